"""BERT's masked-language-model objective, and training on it with gradients written by hand.

The head is BERT's own (Devlin et al. 2019, section 3.1 "Task #1: Masked LM"; Hugging Face's
`BertLMPredictionHead`), its forward `engine.mlm_head`, its backward `backward.mlm_head_backward`:

    a = Z W^t + b^t          [N, H]     (Z: the encoder's last layer at the chosen rows)
    g = GELU(a)              [N, H]
    h = LayerNorm(g)         [N, H]
    y = h W_T^T + b^mlm      [N, V]
    loss = mean_i -log softmax(y_i)[t_i]

The masking follows BERT's `create_pretraining_data.py`: 15% of the word pieces of a sentence
(at least one, never [CLS] or [SEP]) are chosen; of those 80% become [MASK], 10% a random piece,
10% stay as they were; the loss is taken on the chosen rows only.

A training step (`loss_and_grads`) runs the trained part of the model forward through a recorder,
which is the tape: the last encoder layers from `Batch.first` on (engine.encoder_layer), the rows at
the chosen positions, the head; then the loss, its gradient, and the backward functions of
bertviz_lite.backward reading the tape in reverse. The layers below `first` are frozen and run once
per masked sentence (their output is the batch's Z). The decoder W_T is the encoder's own token
table and stays frozen (training it would change the encoder's input too).
`training/train_mlm_head.py` fits the head alone (the head `load("minilm")` ships);
`training/train_minilm_mlm.py` trains the last layers with it (`load("minilm-mlm")`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from . import backend, backward, engine
from .trace import NullRecorder, Recorder

MASK_RATE = 0.15  # share of word pieces chosen for prediction
P_MASK, P_RANDOM = 0.8, 0.1  # of the chosen: -> [MASK], -> a random piece; the rest stay as they are

# closed-class English words (articles, determiners, pronouns, prepositions, conjunctions, auxiliary
# and modal verbs, a few particles): a masked piece that is one of these is a "function word"; a
# whole-word alphabetic piece that is not is a "content word"; '##' pieces, digits and punctuation are "other"
FUNCTION_WORDS = frozenset("""
a an the this that these those some any no every each either neither all both half several many much few
little more most less least other another such what which whose whatever whichever
i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it its itself
we us our ours ourselves they them their theirs themselves one ones oneself who whom whoever someone anyone
everyone something anything everything nothing nobody somebody anybody everybody
of in on at by for with from to into onto upon about above below over under between among through during
before after against without within along across behind beyond near toward towards around off out up down
via per than as like unlike despite except since until till throughout beneath beside besides inside outside
and or but nor so yet if then because although though while whereas unless whether whether when where
why how whenever wherever also not too very just only even either
be am is are was were been being have has had having do does did done doing will would shall should can
could may might must ought
there here now again ever never once
""".split())


# ------------------------------------------------------------------------------------------
# masking (BERT's recipe)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Masked:
    """One sentence after masking: the input ids the encoder sees and what is to be predicted."""

    ids: list  # [n] input ids, with [MASK] / random / kept pieces at the chosen positions
    positions: list  # chosen positions, ascending
    targets: list  # the original ids there
    kinds: list  # per chosen position: "mask", "random" or "keep"


def choose_masks(ids, rng, *, vocab_size: int, mask_id: int, special_ids, rate: float = MASK_RATE,
                 p_mask: float = P_MASK, p_random: float = P_RANDOM, words=None) -> Masked:
    """BERT's masking of one tokenized sentence: round(rate * pieces) of them (at least one) chosen at random;
    each chosen piece becomes [MASK] with p=p_mask, a random vocabulary piece with p=p_random, or stays.

    words: None (pieces chosen one by one), or per piece the index of the word it belongs to (whole-word
    masking, `word_ids`): whole words are chosen, in a random order, until round(rate * pieces) pieces are,
    as BERT's whole-word-masking models were trained."""
    _positive_whole("vocab_size", vocab_size)  # a random piece is drawn from 0 .. vocab_size-1
    rate = _check_share("rate", rate, low_open=True)
    p_mask, p_random = _check_share("p_mask", p_mask), _check_share("p_random", p_random)
    if p_mask + p_random > 1:
        raise ValueError(f"p_mask + p_random is the share of chosen pieces replaced, at most 1, got "
                         f"{p_mask} + {p_random}")
    ids = [int(i) for i in ids]
    candidates = [i for i, t in enumerate(ids) if t not in special_ids]
    if not candidates:
        raise ValueError("no word piece to mask: the input holds only [CLS], [SEP] or [PAD]")
    k = max(1, int(round(len(candidates) * rate)))
    if words is None:
        order = rng.permutation(len(candidates))
        positions = sorted(candidates[int(j)] for j in order[:k])
    else:
        groups = {}
        for i in candidates:
            groups.setdefault(words[i], []).append(i)
        units = list(groups.values())
        positions = []
        for j in rng.permutation(len(units)):
            if positions and len(positions) + len(units[int(j)]) > k:
                continue  # a whole word that would overshoot (BERT skips it too)
            positions += units[int(j)]
            if len(positions) >= k:
                break
        positions.sort()
    out, kinds = list(ids), []
    for p in positions:
        u = rng.random()
        if u < p_mask:
            out[p], kind = mask_id, "mask"
        elif u < p_mask + p_random:
            out[p], kind = int(rng.integers(0, vocab_size)), "random"
        else:
            kind = "keep"
        kinds.append(kind)
    return Masked(out, positions, [ids[p] for p in positions], kinds)


def word_ids(tokens) -> list:
    """Per word piece, the index of the whole word it belongs to: a '##' piece continues the word before it."""
    out, w = [], -1
    for t in tokens:
        if not (t.startswith("##") and w >= 0):
            w += 1
        out.append(w)
    return out


def word_class(piece: str) -> str:
    """'function', 'content' or 'other' (a '##' piece, a number, punctuation) for a vocabulary piece."""
    if piece.startswith("##") or not piece.isalpha():
        return "other"
    return "function" if piece in FUNCTION_WORDS else "content"


# ------------------------------------------------------------------------------------------
# argument checks: these are public functions the lessons call by hand
# ------------------------------------------------------------------------------------------


def _check_targets(targets, n_rows: int, vocab: int, what: str = "targets") -> None:
    """One target per row, each a vocabulary id 0 .. vocab-1 (-1 would wrap to the last entry silently)."""
    t = backend.to_host(targets)
    if t.ndim != 1 or t.shape[0] != n_rows:
        raise ValueError(f"{what}: expected one id per row ({n_rows}), got shape {tuple(t.shape)}")
    if n_rows == 0:
        raise ValueError(f"{what}: the batch has no chosen row (zero length): there is no loss to take; "
                         "choose at least one position (choose_masks chooses at least one per sentence)")
    if t.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integer vocabulary ids, got dtype {t.dtype}")
    bad = (t < 0) | (t >= vocab)
    if bad.any():
        raise ValueError(f"{what}: id {int(t[bad][0])} at row {int(bad.argmax())} is outside the vocabulary "
                         f"0 .. {vocab - 1}")


def _check_logits(y, targets) -> None:
    if len(y.shape) != 2:
        raise ValueError(f"logits must be [rows, vocabulary], got shape {tuple(y.shape)}")
    _check_targets(targets, int(y.shape[0]), int(y.shape[1]))


def check_batch(batch, c) -> None:
    """A Batch that a training step can take: its shapes agree, every chosen row is a position of the batch,
    every target a vocabulary id, every sentence has a real token, and the layers it trains have weights
    of their own. Raises ValueError naming what is wrong."""
    if not 0 <= batch.first <= c.num_layers:
        raise ValueError(f"Batch.first must be 0 .. {c.num_layers} (the layers), got {batch.first}")
    if batch.first < c.num_layers and c.shared_layers:
        raise ValueError("mlm trains layers that have weights of their own (layer.{l}.*); this config has "
                         "shared_layers=True (ALBERT: one layer's weights run L times), which it cannot train: "
                         "train the head alone (Batch.first = num_layers) or use a model without shared layers")
    if not c.tie_word_embeddings:
        raise ValueError("mlm trains the head with the tied decoder (the token table W_T, frozen); this config "
                         "has tie_word_embeddings=False (a decoder W_out of its own), which its backward does not "
                         "cover")
    shape = tuple(batch.Z.shape)
    if len(shape) != 3 or shape[-1] != c.hidden_size:
        raise ValueError(f"Batch.Z must be [sentences, tokens, {c.hidden_size}], got shape {shape}")
    mask = backend.to_host(batch.mask)
    if tuple(mask.shape) != shape[:2]:
        raise ValueError(f"Batch.mask must be [sentences, tokens] = {shape[:2]}, got shape {tuple(mask.shape)}")
    empty = ~(mask > 0).any(axis=1)
    if empty.any():
        raise ValueError(f"sentence {int(empty.argmax())} of the batch is all padding (no real token): attention "
                         "over nothing is undefined and its gradients would be NaN; leave it out of the batch")
    rows = backend.to_host(batch.rows)
    _check_targets(batch.targets, int(rows.shape[0]) if rows.ndim == 1 else -1, c.vocab_size, "Batch.targets")
    if rows.dtype.kind not in "iu" or rows.min() < 0 or rows.max() >= shape[0] * shape[1]:
        raise ValueError(f"Batch.rows must be flat positions b * n + i in 0 .. {shape[0] * shape[1] - 1}, "
                         f"got {rows.min()} .. {rows.max()} ({rows.dtype})")
    if not (mask.reshape(-1)[rows] > 0).all():
        raise ValueError("a chosen row of the batch is a padding position: choose real tokens only")


def _positive_whole(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1{' or None' if allow_none else ''}, got {value!r}")


def _check_share(name: str, value, low_open: bool = False) -> float:
    """A share: a number in [0, 1] ((0, 1] with low_open), nan refused."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not ((0 < v if low_open else 0 <= v) and v <= 1):  # nan fails this too
        raise ValueError(f"{name} must be a number in {'0 < ' if low_open else '0 <= '}{name} <= 1, got {value!r}")
    return v


def _check_rate(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}: with it Adam's weights would be "
                         "NaN or never move")
    return v


# ------------------------------------------------------------------------------------------
# the loss and its backward (the head's forward is engine.mlm_head, its backward backward.mlm_head_backward)
# ------------------------------------------------------------------------------------------


def log_softmax(y, xp):
    """log softmax(y) row-wise, computed without overflow   [N, V]."""
    m = xp.max(y, axis=-1, keepdims=True)
    return y - m - xp.log(xp.sum(xp.exp(y - m), axis=-1, keepdims=True))


def cross_entropy(y, targets, xp, logp=None):
    """mean over rows of -log softmax(y)[target]   [N, V], [N] -> scalar (logp: log_softmax(y), if already computed)."""
    _check_logits(y, targets)
    logp = log_softmax(y, xp) if logp is None else logp
    return -xp.mean(xp.take_along_axis(logp, xp.reshape(targets, (-1, 1)), axis=-1))


def cross_entropy_backward(y, targets, xp, logp=None):
    """d loss / d y = (softmax(y) - onehot(target)) / N   [N, V] (logp: log_softmax(y), if already computed)."""
    _check_logits(y, targets)
    N, V = y.shape
    logp = log_softmax(y, xp) if logp is None else logp
    onehot = xp.astype(xp.arange(V)[None, :] == xp.reshape(targets, (-1, 1)), y.dtype)  # [N, V]
    return (xp.exp(logp) - onehot) / N


# ------------------------------------------------------------------------------------------
# the chosen rows: the logits (30,522 wide) are computed only where the loss is taken
# ------------------------------------------------------------------------------------------


def chosen_rows(Z, rows, xp):
    """The encoder's rows at the chosen positions   [B, n, H], rows [N] (flat indices b * n + i) -> [N, H]."""
    return xp.take(xp.reshape(Z, (-1, Z.shape[-1])), rows, axis=0)


def chosen_rows_backward(drows, rows, shape, xp):
    """Z rows = Z[rows]   ->   dZ [B, n, H]: each chosen row's gradient added back at its position, 0 elsewhere
    (a position chosen twice gets the sum of its two rows' gradients, as the chain rule says)."""
    dZ = xp.zeros((shape[0] * shape[1], shape[2]), dtype=drows.dtype)
    backend.add_rows(dZ, rows, drows, xp)  # repeated rows add up (dZ[rows] = drows would keep only the last)
    return xp.reshape(dZ, shape)


@dataclass(frozen=True)
class Batch:
    """What one training step sees: the input Z [B, n, H] of the first trained layer `first` (the frozen
    layers below ran once, on the masked text), its padding mask [B, n], the chosen rows (flat indices
    b * n + i) and their targets. first = L (the number of layers): Z is the last layer, only the head trains."""

    Z: object
    mask: object
    rows: object
    targets: object
    first: int


def rows_batch(Z, targets, xp, first: int) -> Batch:
    """Rows of the last layer [N, H] as a batch of N one-token inputs (the head trained alone)."""
    N = Z.shape[0]
    return Batch(xp.reshape(Z, (N, 1, Z.shape[-1])), xp.ones((N, 1), dtype=xp.int64), xp.arange(N), targets, first)


def frozen_layers(model, ids, mask, first: int):
    """The frozen part, run once per masked sentence: embeddings and layers 0 .. first-1 on padded ids
    [B, n] (mask [B, n]) -> [B, n, H], the input of the first trained layer; nothing recorded."""
    xp, c, rec = model.xp, model.config, NullRecorder(model.xp)
    mask_add = engine.padding_mask(mask, xp, model.weights["embed.W_T"].dtype)
    Z = engine.embeddings(model.weights, xp.asarray(ids), xp.zeros_like(xp.asarray(ids)), c, rec, xp)
    return engine.encoder(model.layer_weights, Z, mask_add, c, rec, xp, range(first))


def batches_by_length(masked: list, Zs: list, size: int, first: int) -> list:
    """Batches of `size` masked sentences of similar length (sorted by length, then cut): masked[i] is a
    Masked, Zs[i] its frozen features [n_i, H] (the input of layer `first`). Each is padded with zeros to
    its longest sentence, masked, so the padding changes no real token's value; arrays in Zs's namespace."""
    _positive_whole("size", size)
    if len(masked) == 0:
        raise ValueError("batches_by_length got no masked sentence: there is nothing to batch")
    if len(Zs) != len(masked):
        raise ValueError(f"batches_by_length needs one feature array per masked sentence, got {len(Zs)} for "
                         f"{len(masked)} sentences")
    xp = backend.namespace_of(Zs[0])
    order = sorted(range(len(masked)), key=lambda i: (len(masked[i].ids), i))
    batches = []
    for s in range(0, len(order), size):
        idx = order[s:s + size]
        n = max(len(masked[i].ids) for i in idx)
        Z = xp.zeros((len(idx), n, Zs[idx[0]].shape[-1]), dtype=Zs[idx[0]].dtype)
        mask = xp.zeros((len(idx), n), dtype=xp.int64)
        rows, targets = [], []
        for j, i in enumerate(idx):
            m = masked[i]
            Z[j, :len(m.ids)] = Zs[i]
            mask[j, :len(m.ids)] = 1
            rows += [j * n + p for p in m.positions]
            targets += m.targets
        batches.append(Batch(Z, mask, xp.asarray(rows, dtype=xp.int64), xp.asarray(targets, dtype=xp.int64), first))
    return batches


# ------------------------------------------------------------------------------------------
# one step: the forward through the recorder (the tape), the loss, the backward reading the tape
# ------------------------------------------------------------------------------------------


def forward(weights: dict, batch: Batch, c, xp):
    """Layers batch.first .. L-1 on batch.Z, the chosen rows, the head's logits there, every line recorded.

    Returns (logits [N, V], tape): the tape is the recorder's dict, `layer.{l}.attn.q`, ..., `mlm.rows`,
    `mlm.dense`, `mlm.act`, `mlm.transform`, `mlm.logits`: what backward.* reads back.
    """
    tape, layers = Recorder(xp), range(batch.first, c.num_layers)
    mask_add = engine.padding_mask(batch.mask, xp, batch.Z.dtype)
    Z = engine.encoder({ly: engine.LayerWeights(weights, ly) for ly in layers}, batch.Z, mask_add, c, tape, xp, layers)
    rows = tape("mlm.rows", chosen_rows(Z, batch.rows, xp))  # [N, H]
    logits = engine.mlm_head(weights, rows, c, tape, xp, tape=tape)  # [N, V]
    return logits, tape.store


def backward_pass(dy, weights: dict, tape: dict, batch: Batch, c, xp) -> dict:
    """d loss / d logits [N, V] -> d loss / d every weight of the head and of layers batch.first .. L-1."""
    layers = batch.first < c.num_layers
    drows, grads = backward.mlm_head_backward(dy, weights, tape.__getitem__, tape["mlm.rows"], c, xp, need_dZ=layers)
    if layers:
        dZ = chosen_rows_backward(drows, batch.rows, tuple(batch.Z.shape), xp)
        _, g = backward.layers_backward(dZ, weights, tape, batch.Z, batch.first, c, xp)
        grads.update(g)
    return grads


def loss_and_grads(params: dict, frozen: dict, batch: Batch, c, xp):
    """(cross-entropy on the batch's chosen rows, its gradient for every tensor in params).

    params: the tensors trained (full names: `mlm.W_t`, `layer.5.attn.W_Q`, ...); frozen: the rest the
    forward reads (`embed.W_T`, the tied decoder; layers batch.first .. L-1 that are not trained).
    """
    check_batch(batch, c)
    weights = {**frozen, **params}
    logits, tape = forward(weights, batch, c, xp)
    logp = log_softmax(logits, xp)  # once, for the loss and its gradient
    loss = cross_entropy(logits, batch.targets, xp, logp)
    grads = backward_pass(cross_entropy_backward(logits, batch.targets, xp, logp), weights, tape, batch, c, xp)
    return loss, {k: grads[k] for k in params}


def init_head(hidden: int, vocab: int, rng, xp, std: float = 0.02, dtype=None) -> dict:
    """BERT's initialisation of the head: W^t ~ N(0, std), biases 0, LayerNorm 1 and 0."""
    W = backend.from_host(backend.host_random_normal((hidden, hidden), std, rng), xp)
    params = {"mlm.W_t": W, "mlm.b_t": xp.zeros(hidden, dtype=W.dtype), "mlm.ln.gamma": xp.ones(hidden, dtype=W.dtype),
              "mlm.ln.beta": xp.zeros(hidden, dtype=W.dtype), "mlm.bias": xp.zeros(vocab, dtype=W.dtype)}
    return params if dtype is None else {k: xp.astype(v, dtype) for k, v in params.items()}


# ------------------------------------------------------------------------------------------
# training and evaluation
# ------------------------------------------------------------------------------------------


class Adam:
    """Adam (Kingma and Ba 2015) with bias correction: BERT's optimiser, here without weight decay."""

    def __init__(self, params: dict, xp, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6):
        self.xp, self.b1, self.b2, self.eps, self.t = xp, b1, b2, eps, 0
        self.m = {k: xp.zeros_like(v) for k, v in params.items()}
        self.v = {k: xp.zeros_like(v) for k, v in params.items()}

    def step(self, params: dict, grads: dict, lr) -> dict:
        """New parameters (the old ones are not changed in place); lr: one rate, or a dict of one per tensor."""
        self.t += 1
        c1, c2 = 1.0 - self.b1 ** self.t, 1.0 - self.b2 ** self.t
        new = {}
        for k, p in params.items():
            self.m[k] = self.b1 * self.m[k] + (1.0 - self.b1) * grads[k]
            self.v[k] = self.b2 * self.v[k] + (1.0 - self.b2) * grads[k] ** 2
            rate = lr[k] if isinstance(lr, dict) else lr
            new[k] = p - rate * (self.m[k] / c1) / (self.xp.sqrt(self.v[k] / c2) + self.eps)
        return new


def learning_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """BERT's schedule: linear warm-up to the peak, then linear decay to 0 at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(0.0, (total - step) / max(1, total - warmup))


def train(params: dict, frozen: dict, batches, c, xp, *, rng, epochs: int = 1, peak_lr=1e-3, warmup: float = 0.05,
          log_every: int = 50, on_log=None, steps=None, heldout=None, heldout_every=None):
    """Adam over `batches` (a sequence of Batch, or a function epoch -> that sequence), their order
    shuffled each epoch with rng; the learning rate follows BERT's warm-up and linear decay.

    peak_lr: one rate, or a function key -> rate (e.g. the layers slower than the head). steps: stop
    after that many (a smoke run, a live fit). heldout: a function params -> held-out loss, called at
    the first step, every heldout_every steps and at the last. Returns (params, log): log holds
    (step, mean training loss since the last entry, held-out loss or None); on_log(entry) is called for each.
    """
    _positive_whole("epochs", epochs)
    _positive_whole("steps", steps, allow_none=True)
    _positive_whole("log_every", log_every)
    _positive_whole("heldout_every", heldout_every, allow_none=True)
    if not (isinstance(warmup, numbers.Real) and 0 <= warmup < 1):
        raise ValueError(f"warmup is the share of the steps spent warming up, 0 <= warmup < 1, got {warmup!r}")
    peak = {k: _check_rate(f"peak_lr for {k}" if callable(peak_lr) else "peak_lr",
                           peak_lr(k) if callable(peak_lr) else peak_lr) for k in params}
    get = batches if callable(batches) else (lambda epoch: batches)
    first_epoch = get(0)  # once: a function may draw a new shuffle each call
    per_epoch = len(first_epoch)
    if per_epoch == 0:
        raise ValueError("train got no batches: nothing to train on")
    total = epochs * per_epoch if steps is None else min(steps, epochs * per_epoch)
    warm = max(1, int(warmup * total))
    opt, log, step, running, count = Adam(params, xp), [], 0, 0.0, 0
    for epoch in range(epochs):
        epoch_batches = first_epoch if epoch == 0 else get(epoch)
        for i in rng.permutation(len(epoch_batches)):
            if step == total:
                return params, log
            loss, grads = loss_and_grads(params, frozen, epoch_batches[int(i)], c, xp)
            params = opt.step(params, grads, {k: learning_rate(step, total, p, warm) for k, p in peak.items()})
            running, count, step = running + float(loss), count + 1, step + 1
            check = heldout is not None and (step == 1 or step == total or
                                             (heldout_every and step % heldout_every == 0))
            if step % log_every == 0 or step == total or check:
                log.append((step, running / count, heldout(params) if check else None))
                if on_log is not None:
                    on_log(log[-1])
                running, count = 0.0, 0
    return params, log


def ranks_and_losses(params: dict, frozen: dict, batches, c, xp, *, top1: bool = False):
    """Per chosen row, in batch order: the rank of the target among the logits (0 = top-1, exactly where an
    argmax, which takes the first of equal logits, gives the target) and its loss; top1=True adds the top-1 id
    per row. A row whose logits are not all finite (a diverged model) gets the worst rank, V, and an infinite
    loss: it never counts as a hit."""
    ranks, losses, best = [], [], []
    weights = {**frozen, **params}
    for b in batches:
        y, _ = forward(weights, b, c, xp)
        t = xp.reshape(b.targets, (-1, 1))
        yt = xp.take_along_axis(y, t, axis=-1)  # [N, 1]
        finite = xp.all(xp.isfinite(y), axis=-1)  # [N]
        # how many pieces come before the target as argmax orders them: a higher logit, or an equal one at a
        # lower id (a tie is not a hit: all-equal logits would otherwise make every target "top-1")
        before = (y > yt) | ((y == yt) & (xp.arange(y.shape[-1])[None, :] < t))  # [N, V]
        rank = xp.sum(xp.astype(before, xp.int32), axis=-1)
        ranks.append(xp.where(finite, rank, xp.asarray(y.shape[-1], dtype=rank.dtype)))
        loss = -xp.take_along_axis(log_softmax(y, xp), t, axis=-1)[:, 0]
        losses.append(xp.where(finite, loss, xp.asarray(math.inf, dtype=loss.dtype)))
        if top1:
            best.append(xp.where(finite, xp.argmax(y, axis=-1), xp.asarray(-1, dtype=xp.int64)))
    out = (xp.concat(ranks), xp.concat(losses))
    return out + (xp.concat(best),) if top1 else out


# the head alone, on fixed rows of the last layer (training/train_mlm_head.py; lesson 11)


def fit(params: dict, Z, targets, W_T, c, *, xp, rng, epochs: int = 1, batch: int = 512, peak_lr: float = 1e-3,
        warmup: float = 0.05, log_every: int = 50, on_log=None):
    """The head alone: minibatch Adam on rows of the last layer (Z [N, H], targets [N]); the rows are
    shuffled each epoch with rng. Returns (params, log): log holds (step, rows seen, mean loss since the last entry)."""
    N, L = Z.shape[0], c.num_layers
    _positive_whole("batch", batch)
    _check_targets(targets, N, c.vocab_size)
    per_epoch = math.ceil(N / batch)

    def batches(epoch):
        order = backend.from_host(rng.permutation(N), xp)
        return [rows_batch(xp.take(Z, order[s * batch:(s + 1) * batch], axis=0),
                        xp.take(targets, order[s * batch:(s + 1) * batch], axis=0), xp, L) for s in range(per_epoch)]

    in_order = _InOrder()  # fit's rows are shuffled, not its batches: keep their order
    params, log = train(params, {"embed.W_T": W_T}, batches, c, xp, rng=in_order, epochs=epochs, peak_lr=peak_lr,
                        warmup=warmup, log_every=log_every,
                        on_log=None if on_log is None else lambda e: on_log(_with_rows(e, batch, epochs * N)))
    return params, [_with_rows(e, batch, epochs * N) for e in log]


def top_k_hits(params: dict, Z, targets, W_T, c, *, xp, batch: int = 1024):
    """The head alone on rows of the last layer: per row, the rank of the target (0 = top-1) and the loss."""
    batches = [rows_batch(Z[s:s + batch], targets[s:s + batch], xp, c.num_layers) for s in range(0, Z.shape[0], batch)]
    return ranks_and_losses(params, {"embed.W_T": W_T}, batches, c, xp)


class _InOrder:
    """An rng stand-in whose permutation is the identity (fit shuffles rows itself)."""

    @staticmethod
    def permutation(n):
        return range(n)


def _with_rows(entry, batch: int, total_rows: int):
    step, loss, _ = entry
    return step, min(step * batch, total_rows), loss
