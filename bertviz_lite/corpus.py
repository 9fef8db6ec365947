"""Every head's attention statistics over a corpus, batch by batch, on one machine or a Dask cluster.

    r = bv.corpus.head_stats(model, sentences)          # streams batches of 32 traces
    r["sep"]                                            # [layer, head]: mean attention to [SEP]
    r.top("prev")                                       # the heads that look at the previous token

The statistics of Clark et al. 2019 ("What Does BERT Look At?", section 3). For one sentence and
one head, A is the attention map over its real tokens; i runs over the query tokens, j over the
keys. Each statistic is a sum over j for each i, then a mean over i; `head_stats` returns its
mean over the sentences:

    cls, sep, punct   sum_j A[i, j] over keys j that are [CLS] / [SEP] / punctuation word pieces
    self, prev, next  A[i, i], A[i, i-1], A[i, i+1]  (0 where that key does not exist)
    entropy           -sum_j A[i, j] ln A[i, j]     (nats; 0 ln 0 = 0)
    distance          sum_j A[i, j] |i - j|          (tokens)

Streaming: sentences are grouped by length (less padding), a batch is traced with keep=['attn.probs'], reduced to per-sentence sums ([layer, head]
per statistic) and dropped before the next one, so memory does not grow with the corpus. With a
Dask client the same function `batch_sums` runs on the workers and the partial sums are added there
(a tree of `add` tasks); only the final [layer, head] arrays come back.

Sentences over the model's 512 positions, and blank or whitespace-only lines (a text file's empty
lines), are skipped and counted (`r.n_skipped`, `r.skipped` holds their indices); `too_long="error"`
raises for an over-long one instead.

Engine rule: no numpy here; the statistics run in the model's array namespace and only the small
[layer, head] sums come back to the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from . import backend
from .analysis import _row_entropy, target_cells
from .batch import pad_encoding, trace_encodings
from .errors import BertVizError, InputTooLongError, as_bool, as_int
from .table import Table
from .trace import DEFAULT_MAX_TRACE_BYTES, estimate_trace_bytes, estimate_working_bytes

# the statistics, in order; the first seven are sums of A[i, j] times a weight on (i, j)
STATS = ("cls", "sep", "punct", "self", "prev", "next", "distance", "entropy")
_TARGET_OF = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punct", "self": "self", "prev": "prev", "next": "next"}
CONNECT_TIMEOUT = "10s"  # how long to try a scheduler address before saying it cannot be reached
NO_WORKERS_TIMEOUT = 60.0  # seconds a cluster may have no workers while head_stats waits on it
POLL_SECONDS = 2.0  # how often a waiting run checks that the cluster is still there
DESCRIPTIONS = {
    "cls": "attention to [CLS]", "sep": "attention to [SEP]", "punct": "attention to punctuation",
    "self": "attention to the token itself", "prev": "attention to the previous token",
    "next": "attention to the next token", "distance": "mean distance attended (tokens)",
    "entropy": "entropy of the attention row (nats)",
}


# ------------------------------------------------------------------------------------------
# one batch -> sums over its sentences (what runs on a worker)
# ------------------------------------------------------------------------------------------


@dataclass
class Partial:
    """Sums over some sentences of each per-sentence statistic ([layer, head] host arrays)."""

    sums: dict
    n_sentences: int
    skipped: tuple[int, ...] = ()

    def __add__(self, other: "Partial") -> "Partial":
        return Partial({k: self.sums[k] + other.sums[k] for k in self.sums}, self.n_sentences + other.n_sentences,
                       self.skipped + other.skipped)


def add(*parts: Partial) -> Partial:
    """The sum of partial sums, in the order given (the reduction's one step)."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def pairwise_sum(parts: list, add_pair=add) -> object:
    """The batches' partial sums added in one fixed tree, level by level ((0+1) + (2+3)) + ...: the order
    head_stats uses here and on a cluster, so both add the same numbers in the same order."""
    level = list(parts)
    while len(level) > 1:
        level = [add_pair(*level[k:k + 2]) for k in range(0, len(level), 2)]
    return level[0]


def key_weights(tokens, mask, xp, dtype, config=None):
    """[B, 7, n, n]: for each of the first seven STATS, the weight of key j for query i.

    cls / sep / punct weigh the keys that are such tokens; self / prev / next the key at i, i-1,
    i+1; distance |i - j|. Padded keys weigh 0 (they get zero attention anyway).
    """
    B, n = len(tokens), len(tokens[0])
    real = xp.asarray(mask, dtype=dtype)  # [B, n]
    i = xp.reshape(xp.arange(n), (n, 1))  # [n, 1], query
    j = xp.reshape(xp.arange(n), (1, n))  # [1, n], key
    w = [target_cells(t, tokens, xp, dtype, config) for t in _TARGET_OF.values()]  # the targets analysis defines
    w.append(xp.broadcast_to(xp.astype(xp.abs(i - j), dtype), (B, n, n)))  # distance |i - j|
    return xp.stack(w, axis=1) * xp.reshape(real, (B, 1, 1, n))  # [B, 7, n, n]


def sentence_stats(probs, tokens, mask, xp, config=None):
    """Each sentence's statistics for one layer: [B, n_h, n, n] maps -> [B, n_h, 8] (STATS order);
    config: the model's, whose family spells [CLS] and [SEP] (RoBERTa: <s>, </s>).

    Per query i: sum_j A[i, j] w[i, j] for the weighted ones (one batched product) and the row's
    entropy; then the mean over the real queries of each sentence.
    """
    B, n_h, n, _ = probs.shape
    w = key_weights(tokens, mask, xp, probs.dtype, config)  # [B, 7, n, n]
    # [B, n, n_h, n] @ [B, n, n, 7] -> [B, n(query), n_h, 7]: sum over keys j, for each query i
    per_query = xp.permute_dims(probs, (0, 2, 1, 3)) @ xp.permute_dims(w, (0, 2, 3, 1))
    entropy = xp.permute_dims(_row_entropy(probs, xp), (0, 2, 1))  # [B, n, n_h]
    per_query = xp.concat([per_query, xp.reshape(entropy, (B, n, n_h, 1))], axis=-1)  # [B, n, n_h, 8]
    wide = getattr(xp, "float64", None) or probs.dtype
    per_query = xp.astype(per_query, wide)
    real = xp.asarray(mask, dtype=wide)  # [B, n]
    n_real = xp.sum(real, axis=1)  # [B]
    return xp.sum(per_query * xp.reshape(real, (B, n, 1, 1)), axis=1) / xp.reshape(n_real, (B, 1, 1))  # [B, n_h, 8]


# the statistics' own working memory per input of n tokens, besides its trace: key_weights
# [7, n, n] (float32) and its transposed copy, the per-query sums [n, n_h, 8] in float64
def _stats_bytes(config, n: int) -> int:
    return 4 * 2 * 7 * n * n + 8 * 2 * n * config.num_heads * len(STATS)


def pieces(model, encs: list, max_bytes=None) -> list[tuple[int, int]]:
    """[start, stop) ranges of encodings (sorted by length) whose traces fit the budget together:
    each piece is padded to its own longest input, and B inputs of n tokens need B times the
    trace's recorded maps, the forward pass's working memory and the statistics' own arrays."""
    limit = DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
    c = model.config

    def one(n):
        return (estimate_trace_bytes(c, n, keep=["attn.probs"], mlm=model.has_mlm, pooler=model.has_pooler)
                + estimate_working_bytes(c, n) + _stats_bytes(c, n))

    out, start = [], 0
    while start < len(encs):
        stop = start + 1  # one input always goes (the runner's own check refuses it if it cannot fit)
        while stop < len(encs) and (stop + 1 - start) * one(len(encs[stop].ids)) <= limit:
            stop += 1
        out.append((start, stop))
        start = stop
    return out


def batch_sums(model, sentences: list, indices: list | None = None, too_long: str = "skip",
               max_bytes: int | None = None) -> Partial:
    """Trace one batch (keep=['attn.probs']) and sum each statistic over its sentences.

    `indices` are the sentences' places in the corpus (to report skipped ones). The batch is cut
    into pieces the memory budget allows (max_bytes, 2 GiB by default; `pieces`), whatever
    batch_size asked for. Runs wherever it is called: in this process, or on a Dask worker.
    """
    indices = list(range(len(sentences))) if indices is None else list(indices)
    encs, texts, skipped = [], [], []
    for k, s in zip(indices, sentences):
        if not s.strip():  # a blank line is no sentence: skipped, so it does not shift the means
            skipped.append(k)
            continue
        try:
            encs.append(model.tokenize(s))
            texts.append((s,))
        except InputTooLongError as e:
            if too_long == "error":
                raise InputTooLongError(f"sentence {k} of the corpus: {e}") from None
            skipped.append(k)
    L, n_h = model.config.num_layers, model.config.num_heads
    xp = model.xp
    total = xp.zeros((L, n_h, len(STATS)), dtype=getattr(xp, "float64", None) or xp.float32)
    order = sorted(range(len(encs)), key=lambda k: len(encs[k].ids))  # shortest first: little padding
    encs, texts = [encs[k] for k in order], [texts[k] for k in order]
    pad_id = model.config.pad_token_id  # [PAD] in bert's vocabulary, <pad> in roberta's and albert's
    for start, stop in pieces(model, encs, max_bytes):  # one piece of traces alive at a time
        n = len(encs[stop - 1].ids)
        piece = [pad_encoding(e, n, pad_id, model.tokenizer.id_to_token(pad_id)) for e in encs[start:stop]]
        btr = trace_encodings(model, piece, texts[start:stop], keep=["attn.probs"], max_bytes=max_bytes)
        per_layer = [xp.sum(sentence_stats(btr.get("attn.probs", layer=layer), btr.tokens, btr.mask, xp,
                                           model.config), axis=0)
                     for layer in range(L)]  # L x [n_h, 8], summed over the piece's sentences
        total = total + xp.stack(per_layer, axis=0)  # [L, n_h, 8]
        del btr
    stacked = backend.to_host(total)
    return Partial({name: stacked[:, :, k].copy() for k, name in enumerate(STATS)}, len(encs), tuple(skipped))


def batches(sentences: list, batch_size: int) -> list[list[int]]:
    """The corpus's indices cut into batches of sentences of similar length.

    Sorting by character length (a close proxy for token length, known without tokenizing)
    keeps padding small: a batch pads every sentence to its longest. Averages do not depend on
    the order, and the same corpus always gives the same batches (ties keep corpus order).
    """
    order = sorted(range(len(sentences)), key=lambda i: (len(sentences[i]), i))
    return [order[k:k + batch_size] for k in range(0, len(order), batch_size)]


# ------------------------------------------------------------------------------------------
# the result
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadStats:
    """Each statistic's mean over the sentences, per layer and head: `r["sep"]` -> [layer, head]."""

    means: dict
    n_sentences: int
    skipped: tuple[int, ...] = ()
    model_name: str = ""
    names: tuple[str, ...] = field(default=STATS)

    @classmethod
    def from_sums(cls, total: Partial, model_name: str = "") -> "HeadStats":
        if total.n_sentences == 0:
            raise BertVizError(f"every sentence ({len(total.skipped)}) was blank or longer than the model's "
                               "positions; nothing to average (give non-empty sentences that fit)")
        return cls({k: v / total.n_sentences for k, v in total.sums.items()}, total.n_sentences,
                   tuple(sorted(total.skipped)), model_name)

    def __getitem__(self, name: str):
        if name not in self.means:
            raise KeyError(f"unknown statistic {name!r}; head_stats computes {', '.join(STATS)}")
        return self.means[name]

    def __contains__(self, name) -> bool:
        return name in self.means

    def keys(self):
        return list(self.names)

    @property
    def n_skipped(self) -> int:
        return len(self.skipped)

    def top(self, name: str, k: int = 5, *, largest: bool = True) -> list[tuple[int, int, float]]:
        """The k heads with the largest (or smallest) value: [(layer, head, value), ...]; ties by position."""
        v = self[name]
        cells = [(float(v[layer, head]), layer, head) for layer in range(v.shape[0]) for head in range(v.shape[1])]
        cells.sort(key=lambda c: (-c[0] if largest else c[0], c[1], c[2]))
        return [(layer, head, value) for value, layer, head in cells[:k]]

    def table(self, names: Iterable[str] = ("cls", "sep", "punct", "prev", "next"), k: int = 5) -> Table:
        """The top-k heads of each statistic, as rows: statistic, rank, layer, head, value."""
        rows = [(name, r + 1, layer, head, round(value, 4))
                for name in names for r, (layer, head, value) in enumerate(self.top(name, k))]
        return Table(("statistic", "rank", "layer", "head", "value"), rows,
                     title=f"top {k} heads over {self.n_sentences:,} sentences ({self.model_name})")

    def __repr__(self) -> str:
        L, n_h = self.means[STATS[0]].shape
        skipped = f", {self.n_skipped} skipped (blank or too long)" if self.skipped else ""
        return (f"<HeadStats {self.model_name}: {len(self.names)} statistics x {L} layers x {n_h} heads over "
                f"{self.n_sentences:,} sentences{skipped}>")


# ------------------------------------------------------------------------------------------
# the corpus: locally or on a Dask cluster
# ------------------------------------------------------------------------------------------


def _check_corpus(sentences) -> list:
    if isinstance(sentences, str):
        raise TypeError("head_stats takes a list of sentences, not one string; for a text file use "
                        "open(path).read().splitlines()")
    if not isinstance(sentences, Iterable):
        raise TypeError(f"sentences must be a list of strings, got {type(sentences).__name__}")
    sentences = list(sentences)
    if not sentences:
        raise ValueError("the corpus is empty: head_stats needs at least one sentence")
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"sentence {i} is a {type(s).__name__} ({s!r:.60}), not a str; every item of the "
                            "corpus must be a sentence")
    return sentences


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm
    # delay: a run that ends within a second never draws a bar
    return tqdm(total=total, disable=not enabled, desc=desc, unit="sentence", delay=1.0)


def head_stats(model, sentences, batch_size: int = 32, client=None, progress: bool = True,
               too_long: str = "skip", max_bytes: float | None = None) -> HeadStats:
    """Every head's statistics (STATS) averaged over a corpus -> HeadStats (`r[name]` is [layer, head]).

    sentences: a list (or any iterable) of strings, each one input ([CLS] sentence [SEP]).
    batch_size: sentences traced at once; memory is one batch of attention maps, whatever the corpus.
    client: a `dask.distributed.Client` or a scheduler address ('tcp://host:8786') to run the batches
    on a cluster's workers (each needs bertviz-lite installed); None runs here.
    progress: a tqdm bar (shown when a run takes more than a second).
    too_long: 'skip' (count them in r.skipped) or 'error' for sentences over the model's positions.
    max_bytes: the memory budget of one piece (2 GiB by default): any batch_size is traced in pieces
    that fit it, counting the attention maps, the forward pass's working memory and the statistics.
    Blank and whitespace-only lines are always skipped and counted in r.skipped.
    Deterministic: the same corpus and batch size give the same bits run after run, here or on a
    cluster, when BLAS runs the same number of threads (BERTVIZ_LITE_THREADS set; see README, "What is
    bit-stable"): the partial sums are added in one fixed pairwise order (`pairwise_sum`) in both places.
    A cluster's workers usually run BLAS on other thread counts than this process, and a matrix product's
    rounding depends on them, so a cluster's result equals the local one to about 1e-6, not bit for bit.
    """
    from .model import Bert
    if not isinstance(model, Bert):  # L12: None (or a name) was a raw AttributeError on .tokenize
        hint = f" (load it first: bv.load({model!r}))" if isinstance(model, str) else ""
        raise TypeError(f"head_stats takes a loaded model first (model = bv.load('minilm')), got "
                        f"{type(model).__name__}{hint}")
    batch_size = as_int(batch_size, "batch_size")  # numpy's integers too
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    progress = as_bool(progress, "progress")
    if too_long not in ("skip", "error"):
        raise ValueError(f"too_long must be 'skip' or 'error', got {too_long!r}")
    sentences = _check_corpus(sentences)
    groups = batches(sentences, batch_size)
    if client is None:
        parts = []  # a few [layer, head] arrays per batch: small beside one batch's attention maps
        with _progress(len(sentences), progress, "head_stats") as bar:
            for idx in groups:  # one batch of traces alive at a time
                parts.append(batch_sums(model, [sentences[i] for i in idx], idx, too_long, max_bytes))
                bar.update(len(idx))
        total = pairwise_sum(parts)  # the cluster's order
    else:
        total = _on_cluster(client, model, sentences, groups, progress, too_long, max_bytes)
    return HeadStats.from_sums(total, model.name)


def _connect(client):
    """(a running Client, whether we opened it) from a Client or a scheduler address."""
    try:
        from dask.distributed import Client
    except ImportError as e:
        raise BertVizError("client= needs Dask: pip install 'bertviz-lite[cluster]' (dask and distributed)") from e
    if isinstance(client, str):
        try:
            return _bounded_client(Client)(client, timeout=CONNECT_TIMEOUT, set_as_default=False), True
        except (OSError, TimeoutError, ValueError) as e:
            raise BertVizError(f"could not reach a Dask scheduler at {client!r} ({e}); start one (`dask scheduler`) "
                               "or pass a running dask.distributed.Client") from None
    if not isinstance(client, Client):
        raise TypeError(f"client must be a dask.distributed.Client or a scheduler address, got "
                        f"{type(client).__name__}")
    if client.status != "running":
        raise BertVizError(f"the Dask client is {client.status}, not running: connect a new Client to the "
                           "scheduler (or pass client=None to run here)")
    return client, False


def _bounded_client(Client):
    """A Client class whose whole start (TCP connection, handshake, registration) ends within
    CONNECT_TIMEOUT. Client(timeout=) bounds the TCP connection only: distributed then waits for
    the scheduler's handshake with no limit, forever on an address that accepts and never answers."""

    class BoundedClient(Client):
        def start(self, **kwargs):
            try:  # Client.start hands its keywords to distributed.utils.sync, which bounds the start
                return super().start(callback_timeout=CONNECT_TIMEOUT, **kwargs)
            except TimeoutError:
                self.close()
                raise TimeoutError(f"it accepted the connection but gave no Dask handshake within "
                                   f"{CONNECT_TIMEOUT}") from None

    return BoundedClient


def _check_cluster(client, no_workers_since: float | None) -> float | None:
    """Raise when the client has lost its scheduler, or the cluster has had no worker for too long
    (tasks would wait forever); returns since when it has had none (None while it has some)."""
    import time

    if client.status != "running":
        raise BertVizError(f"lost the Dask scheduler during head_stats (client {client.status}); no result")
    if client.scheduler_info(n_workers=-1).get("workers"):
        return None
    since = no_workers_since or time.monotonic()
    if time.monotonic() - since > NO_WORKERS_TIMEOUT:
        raise BertVizError(f"the Dask cluster has had no workers for {NO_WORKERS_TIMEOUT:.0f} s, so head_stats cannot "
                           "go on; start workers (`dask worker <scheduler address>`) and run it again")
    return since


SCATTER_TRIES = 3  # a worker that dies while the model is being sent to every worker fails one try


def _scatter_model(client, model):
    """The model sent once to every worker (broadcast). A worker that dies while it is sent (N16: it failed
    the run; a worker killed later was survived) is not fatal: the model is sent again to the workers
    still there, up to SCATTER_TRIES times, waiting for at least one."""
    for attempt in range(1, SCATTER_TRIES + 1):
        try:
            return client.scatter(model, broadcast=True, hash=False)
        except BertVizError:
            raise
        except Exception:  # the connection to a dying worker closed, a timeout: try the workers left
            if attempt == SCATTER_TRIES or client.status != "running":
                raise
            try:
                client.wait_for_workers(1, timeout=NO_WORKERS_TIMEOUT)
            except TimeoutError:
                raise BertVizError(f"the Dask cluster lost its workers while the model was sent to them and has had "
                                   f"none for {NO_WORKERS_TIMEOUT:.0f} s; start workers and run again") from None


def _on_cluster(client, model, sentences, groups, progress: bool, too_long: str, max_bytes=None) -> Partial:
    """Send each batch to the workers, add the partial sums there in a tree, bring back the total."""
    import queue

    client, opened = _connect(client)
    futures = []
    try:
        try:
            try:
                client.wait_for_workers(1, timeout=NO_WORKERS_TIMEOUT)
            except TimeoutError:
                raise BertVizError(f"the Dask cluster has no workers (waited {NO_WORKERS_TIMEOUT:.0f} s); start some "
                                   "(`dask worker <scheduler address>`) and run head_stats again") from None
            remote_model = _scatter_model(client, model)  # once per worker, not per batch
            leaves = [client.submit(batch_sums, remote_model, [sentences[i] for i in idx], idx, too_long, max_bytes,
                                    pure=False)
                      for idx in groups]
            futures = list(leaves)

            def submit_add(*pair):  # pairwise sums, in pairwise_sum's order: the local run's
                futures.append(client.submit(add, *pair, pure=False))
                return futures[-1]

            root = pairwise_sum(leaves, submit_add)
            sizes = {f.key: len(idx) for f, idx in zip(leaves, groups)}
            finished = queue.Queue()  # each future puts itself here when it is done (dask calls back)
            for f in futures:
                f.add_done_callback(finished.put)
            with _progress(len(sentences), progress, "head_stats (dask)") as bar:
                left, no_workers_since = len(futures), None
                while left:
                    try:
                        f = finished.get(timeout=POLL_SECONDS)
                    except queue.Empty:  # nothing finished for a while: is anyone still working?
                        no_workers_since = _check_cluster(client, no_workers_since)
                        continue
                    left -= 1
                    if f.status != "finished":
                        f.result()  # raises the task's error (or CancelledError) now, not after the run
                    bar.update(sizes.get(f.key, 0))
            return root.result()
        except (InputTooLongError, BertVizError, TypeError, ValueError):
            raise  # the run's own errors, raised on a worker: pass them on as they are
        except Exception as e:  # the cluster went away, a worker died, the connection closed
            if "bertviz_lite" in str(e):
                raise BertVizError(f"a Dask worker could not load bertviz-lite ({type(e).__name__}: {e}); install "
                                   "the same bertviz-lite version on every worker, then run again") from e
            raise BertVizError(f"the Dask cluster failed during head_stats ({type(e).__name__}: {e}); "
                               "no result was produced. Check the scheduler and workers, then run again") from e
    finally:
        if futures and client.status == "running":
            client.cancel(futures)
        if opened:
            client.close()
