"""One runner for one sentence and many: every input goes through the same formula lines as a batch.

`model.trace(text)` is a batch of one; `model.trace_batch(texts)` pads every input to the longest
(or to `pad_to`) with [PAD] and runs the engine once with a leading batch axis on every array (the
engine's lines are written for `[..., n, H]`, so nothing is run twice). Both go through `run()`:
one validator (`check_options`), one budget check (recorded tensors and the forward's working
memory), one recorder, so `keep=`, `edits=`, `patch_from=`, `dtype=`, `fast=False` and `max_bytes=`
work the same for one sentence and many. A `BatchTrace` holds the same keys as a `Trace`, each with
a leading `batch` axis; `btr[i]` is example i as a `Trace` with its padding removed, equal to
`model.trace(texts[i], edits=...)` (padded keys get exactly zero attention, so the real tokens
compute the same numbers, up to float32 rounding).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from . import backend, engine, kernels, schema, threads
from .edits import compile_edits
from .errors import InputTooLongError, as_bool, as_int
from .tokenizer import Encoding, pad_encoding  # padding is written once, in tokenizer.py
from .trace import NullRecorder, Recorder, Table, Trace, check_budget, check_patterns, compile_patterns

BATCH_AXIS = "batch"  # the leading axis every key of a BatchTrace has (schema.AXES names it)
STORE_DTYPES = {"float32": 4, "float16": 2}  # dtype= names a storage type; bytes per value


# ------------------------------------------------------------------------------------------
# the one validator: the options of a run, checked before anything is tokenized or run
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """A run's options, checked: keep patterns, storage dtype, byte budget, pad_to, fast path."""

    keep: tuple[str, ...] | None
    dtype: str  # 'float32' or 'float16'
    max_bytes: float | None
    pad_to: int | None
    fast: bool


def check_options(model, *, keep=None, dtype=None, max_bytes=None, pad_to=None, fast=True) -> Options:
    """Every option of trace() and trace_batch(), checked once, with one clear error each."""
    if dtype is not None and not isinstance(dtype, str):
        raise TypeError(f"dtype must be the string 'float32' or 'float16', got {type(dtype).__name__} {dtype!r}")
    if dtype is not None and dtype not in STORE_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a storage type; use 'float32' or 'float16'")
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Real):
            raise TypeError(f"max_bytes must be a number of bytes (e.g. 2 * 1024**3 or 1e9), got "
                            f"{type(max_bytes).__name__} {max_bytes!r}")
        if not max_bytes >= 0:  # nan fails this too
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes!r}")
    if pad_to is not None:
        pad_to = as_int(pad_to, "pad_to")  # numpy integers too
        if pad_to < 1:
            raise ValueError(f"pad_to must be a positive number of tokens, got {pad_to}")
        if pad_to > model.max_tokens:
            raise InputTooLongError(f"pad_to={pad_to} is more than the model's {model.max_tokens} positions")
    keep = compile_patterns(keep)  # once: a generator would be used up by the budget check
    check_patterns(keep, model.trace_keys(), "keep=")
    return Options(keep, dtype or "float32", max_bytes, pad_to, as_bool(fast, "fast"))


def check_texts(texts, pairs) -> tuple[list[str], list[str | None]]:
    if isinstance(texts, str):
        raise TypeError("trace_batch takes a list of texts; for one text use model.trace(text)")
    if not isinstance(texts, Sequence):
        raise TypeError(f"texts must be a list of strings, got {type(texts).__name__}")
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty: a batch needs at least one text")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is a {type(t).__name__}, not a str; every item must be a sentence")
    if pairs is None:
        return texts, [None] * len(texts)
    if isinstance(pairs, str) or not isinstance(pairs, Sequence) or len(pairs) != len(texts):
        raise ValueError(f"pairs must be a list with one text (or None) per text: {len(texts)} items")
    for i, p in enumerate(pairs):
        if p is not None and not isinstance(p, str):
            raise TypeError(f"pairs[{i}] is a {type(p).__name__}, not a str or None")
    return texts, list(pairs)


# ------------------------------------------------------------------------------------------
# input: texts -> one padded [B, n] batch
# ------------------------------------------------------------------------------------------


def encode_batch(model, texts, pairs=None, *, pad_to: int | None = None, truncate: bool = False,
                 names: Sequence[str] | None = None) -> list[Encoding]:
    """Each text (and pair) tokenized once, then padded to the longest input or to pad_to.
    An input over the model's positions is named by its index (texts[i])."""
    encs = []
    for i, (t, p) in enumerate(zip(texts, pairs)):
        try:
            encs.append(model.tokenize(t, p, truncate=truncate))
        except InputTooLongError as e:
            raise InputTooLongError(f"{names[i] if names else f'texts[{i}]'}: {e}") from None
    n = max(len(e.ids) for e in encs) if pad_to is None else pad_to
    pad_id = model.config.pad_token_id  # [PAD] in bert's vocabulary, <pad> in roberta's and albert's
    return [pad_encoding(e, n, pad_id, model.tokenizer.id_to_token(pad_id), max_length=model.max_tokens)
            for e in encs]


# ------------------------------------------------------------------------------------------
# the runner
# ------------------------------------------------------------------------------------------


def trace_batch(model, texts, pairs=None, *, pad_to=None, keep=None, dtype=None, truncate: bool = False,
                max_bytes=None, fast: bool = True, edits=None, patch_from=None, patch=None) -> "BatchTrace":
    """What `Bert.trace_batch` runs: check, tokenize, pad, then `run`."""
    opts = check_options(model, keep=keep, dtype=dtype, max_bytes=max_bytes, pad_to=pad_to, fast=fast)
    texts, pairs = check_texts(texts, pairs)
    encs = encode_batch(model, texts, pairs, pad_to=opts.pad_to, truncate=truncate)
    return run(model, encs, [(t,) if p is None else (t, p) for t, p in zip(texts, pairs)], opts,
               edits=edits, patch_from=patch_from, patch=patch)


def trace_encodings(model, encs: Sequence[Encoding], texts, *, keep=None, dtype=None, max_bytes=None,
                    fast: bool = True, edits=None, patch_from=None, patch=None) -> "BatchTrace":
    """One forward over inputs already tokenized and padded to the same length."""
    opts = check_options(model, keep=keep, dtype=dtype, max_bytes=max_bytes, fast=fast)
    return run(model, encs, texts, opts, edits=edits, patch_from=patch_from, patch=patch)


def run(model, encs: Sequence[Encoding], texts, opts: Options, *, edits=None, patch_from=None,
        patch=None) -> "BatchTrace":
    """The one path every trace takes: ids checked, edits compiled, the budget checked, then one
    forward with a leading batch axis through one recorder."""
    c, xp = model.config, model.xp
    if len({len(e.ids) for e in encs}) != 1:
        raise ValueError("every encoding of a batch must have the same length; pad them with pad_encoding()")
    for e in encs:
        check_ids(model, e.ids, e.segments, e.mask)
    B, n = len(encs), len(encs[0].ids)
    keys = model.trace_keys()
    masks = [list(e.mask) for e in encs]
    key_edits = compile_edits(edits, patch_from, patch, model, n, keys, masks, xp)
    check_budget(c, n, keep=opts.keep, itemsize=STORE_DTYPES[opts.dtype], mlm=model.has_mlm,
                 pooler=model.has_pooler, max_bytes=opts.max_bytes, batch=B)
    store_dtype = None if opts.dtype == "float32" else getattr(xp, opts.dtype)
    if opts.keep == () and not key_edits:
        rec = NullRecorder(xp)
    else:
        rec = Recorder(xp, keep=opts.keep, dtype=store_dtype, edits=key_edits)
    ids = xp.asarray([e.ids for e in encs])  # [B, n]
    segments = xp.asarray([e.segments for e in encs])  # [B, n]
    with kernels.fast_path(opts.fast), threads.threads_for_load():  # fewer threads while other work holds the cores
        engine.forward(model.weights, model.layer_weights, ids, segments, masks, c, rec, xp, mlm=model.has_mlm)
    return BatchTrace(rec.store, config=c, encodings=encs, texts=texts, model_name=model.name,
                      backend_name=model.backend, keep=opts.keep, edits=rec.edited)


def check_ids(model, ids, segments, mask) -> None:
    """One input's ids, segments and mask against the model (before anything runs)."""
    c, n = model.config, len(ids)
    if n == 0:
        raise ValueError("no tokens: an input needs at least [CLS] and [SEP]")
    if n > model.max_tokens:
        raise InputTooLongError(f"{n} tokens is more than this model's {model.max_tokens} positions; "
                                f"shorten the input or pass truncate=True")
    if len(segments) != n or len(mask) != n:
        raise ValueError(f"ids, segments and mask must have the same length, got {n}, {len(segments)}, {len(mask)}")
    bad = [i for i in ids if not 0 <= i < c.vocab_size]
    if bad:
        raise ValueError(f"token id(s) {bad[:5]} outside the vocabulary 0..{c.vocab_size - 1}")
    n_seg = c.type_vocab_size or 2  # DistilBERT has no segment table (S = 0); its tokenizer still marks B
    bad = [s for s in segments if not 0 <= s < n_seg]
    if bad:
        raise ValueError(f"segment id(s) {sorted(set(bad))} outside 0..{n_seg - 1}")
    if any(m not in (0, 1) for m in mask):
        raise ValueError("mask values must be 1 (real token) or 0 ([PAD])")
    if not mask[0]:
        raise ValueError("the first token is masked: at least [CLS] must be a real token")


# ------------------------------------------------------------------------------------------
# the batched trace
# ------------------------------------------------------------------------------------------


class BatchTrace:
    """The recorded forward pass of B inputs padded to n tokens: every key has a leading batch axis.

    `btr["layer.3.attn.probs"]` -> [B, n_h, n, n]; `btr.get("attn.probs", layer=3)`;
    `btr.stack("attn.probs")` -> (batch, layer, head, query, key); `btr.tokens[i]`, `btr.mask[i]`
    (padded to n); `btr[i]` -> example i as a `Trace` without its padding; `len(btr)` = B.
    """

    def __init__(self, values: dict, *, config, encodings: Sequence[Encoding], texts, model_name: str = "",
                 backend_name: str = "numpy", keep=None, edits=()):
        self._values = dict(values)
        self.edits = tuple(edits)  # ((key, what was done), ...) in forward order, the same for every input
        self.config = config
        self.tokens = tuple(tuple(e.tokens) for e in encodings)
        self.ids = tuple(tuple(e.ids) for e in encodings)
        self.segments = tuple(tuple(e.segments) for e in encodings)
        self.mask = tuple(tuple(e.mask) for e in encodings)
        self.spans = tuple(tuple(e.spans) for e in encodings)
        self.texts = tuple(tuple(t) for t in texts)
        self.model_name = model_name
        self.backend = backend_name
        self.keep = keep

    # --- facts about the inputs
    def __len__(self) -> int:
        """B, the number of inputs."""
        return len(self.tokens)

    @property
    def n(self) -> int:
        """Tokens per input, padding included (the same for every input of a batch)."""
        return len(self.tokens[0])

    @property
    def n_real(self) -> tuple[int, ...]:
        """Tokens that are not [PAD], per input."""
        return tuple(sum(m) for m in self.mask)

    # --- keys
    def keys(self) -> list[str]:
        return list(self._values)

    def __contains__(self, key) -> bool:
        return key in self._values

    def __getitem__(self, key):
        """btr['layer.0.attn.probs'] -> the batched array; btr[i] -> input i as a Trace."""
        if not isinstance(key, str):
            return self.example(key)  # an int (numpy's too); anything else is refused there
        if key not in self._values:
            raise self._empty_trace(0)._missing(key)
        return self._values[key]

    def axes(self, key: str) -> tuple[str, ...]:
        """('batch',) + the step's named axes."""
        return (BATCH_AXIS,) + self._empty_trace(0).axes(key)

    def get(self, name: str, layer: int | None = None, head: int | None = None):
        """A batched tensor by step name and layer; head= selects one head (axis 1)."""
        probe = self._empty_trace(0)
        key = probe.full_key(name, layer)
        value = self[key]
        if head is not None:
            if probe.axes(key)[0] != "head":
                raise TypeError(f"{name!r} has no head axis; its axes are {self.axes(key)}")
            value = value[:, probe.check_head(head), ...]
        return value

    def stack(self, name: str):
        """A per-layer step for every layer: axes (batch, layer) + the step's axes."""
        if name not in schema.STEP_BY_KEY or schema.STEP_BY_KEY[name].scope != "layer":
            self._empty_trace(0).stack(name)  # raises the trace's own error, with suggestions
        arrays = [self[schema.full_key(name, layer)] for layer in range(self.config.num_layers)]
        return backend.namespace_of(arrays[0]).stack(arrays, axis=1)

    def stack_axes(self, name: str) -> tuple[str, ...]:
        return (BATCH_AXIS, "layer") + schema.STEP_BY_KEY[name].axes

    @property
    def nbytes(self) -> int:
        return sum(int(v.size) * backend.itemsize(v) for v in self._values.values())

    def shapes(self) -> Table:
        """Every recorded key with its shape, named axes (batch first), and formula."""
        rows = [(key, tuple(v.shape), " x ".join(self.axes(key)), schema.formula_of(key, self.config))
                for key, v in self._values.items()]
        return Table(("key", "shape", "axes", "formula"), rows,
                     title=f"batch of {len(self)} inputs x {self.n} tokens, {len(rows)} tensors, "
                           f"{self.nbytes / 2**20:,.1f} MiB")

    # --- one example
    def _empty_trace(self, i: int) -> Trace:
        return Trace({}, config=self.config, tokens=self.tokens[i], ids=self.ids[i], segments=self.segments[i],
                     mask=self.mask[i], spans=self.spans[i], texts=self.texts[i], model_name=self.model_name,
                     backend_name=self.backend, keep=self.keep)

    def _index(self, i: int) -> int:
        B = len(self)
        i = as_int(i, "an example number")
        if not -B <= i < B:
            from .errors import OutOfRangeError
            raise OutOfRangeError(f"example {i} is out of range: this batch holds {B} inputs, 0..{B - 1}")
        return i % B

    def example(self, i: int, *, keep_padding: bool = False) -> Trace:
        """Input i as an ordinary Trace, its padding removed (a copy: it keeps no batch array alive).
        keep_padding=True keeps all n tokens (what model.trace returns for its batch of one)."""
        i = self._index(i)
        m = self.n if keep_padding else self.n_real[i]  # padding is always at the end
        values = {}
        for key, x in self._values.items():
            xp = backend.namespace_of(x)
            if keep_padding and len(self) == 1:  # a batch of one: its only example, no copy
                values[key] = x[0, ...]
                continue
            axes = schema.step_of(key, self.config).axes
            cut = tuple(slice(0, m) if a in ("token", "query", "key") else slice(None) for a in axes)
            values[key] = xp.asarray(x[(i, *cut)], copy=True)
        return Trace(values, config=self.config, tokens=self.tokens[i][:m], ids=self.ids[i][:m],
                     segments=self.segments[i][:m], mask=self.mask[i][:m], spans=self.spans[i][:m],
                     texts=self.texts[i], model_name=self.model_name, backend_name=self.backend, keep=self.keep,
                     edits=self.edits)

    def __iter__(self):
        """The examples as Traces, in order."""
        return (self.example(i) for i in range(len(self)))

    def to_host(self) -> "BatchTrace":
        """The same batch with every tensor as a numpy array."""
        new = object.__new__(BatchTrace)
        new.__dict__.update(self.__dict__)
        new._values = {k: backend.to_host(v) for k, v in self._values.items()}
        new.backend = "numpy"
        return new

    def __repr__(self) -> str:
        return (f"<BatchTrace {self.model_name or 'bert'}: {len(self)} inputs x {self.n} tokens "
                f"({min(self.n_real)}-{max(self.n_real)} real), {len(self._values)} tensors, "
                f"{self.nbytes / 2**20:,.1f} MiB on {self.backend}>")
