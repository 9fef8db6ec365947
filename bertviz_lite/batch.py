"""Batched traces: many inputs through the same formula lines at once.

`model.trace_batch(texts)` pads every input to the longest (or to `pad_to`) with [PAD], runs
the engine once with a leading batch axis on every array (the engine's lines are written for
`[..., n, H]`, so nothing is run twice), and returns a `BatchTrace`: the same keys as a `Trace`,
each with a leading `batch` axis, plus each example's tokens and mask. `btr[i]` is example i as
an ordinary `Trace` with its padding removed, equal to `model.trace(texts[i])` (padded keys get
exactly zero attention, so the real tokens compute the same numbers, up to float32 rounding).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import backend, engine, schema
from .errors import TraceTooLargeError
from .tokenizer import Encoding
from .trace import (DEFAULT_MAX_TRACE_BYTES, NullRecorder, Recorder, Table, Trace, check_patterns,
                    compile_patterns, estimate_trace_bytes)

BATCH_AXIS = "batch"  # the leading axis every key of a BatchTrace has (schema.AXES names it)
_STORE_DTYPES = {"float32": 4, "float16": 2}


# ------------------------------------------------------------------------------------------
# input: texts -> one padded [B, n] batch
# ------------------------------------------------------------------------------------------


def _check_texts(texts, pairs) -> tuple[list[str], list[str | None]]:
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


def pad_encoding(enc: Encoding, n: int, pad_id: int, pad_token: str = "[PAD]") -> Encoding:
    """One input padded with [PAD] to n tokens (masked: 0), as the tokenizer's pad_to does."""
    extra = n - len(enc.ids)
    if extra < 0:
        raise ValueError(f"pad_to={n} is shorter than an input of {len(enc.ids)} tokens; padding never cuts tokens")
    return Encoding(enc.tokens + [pad_token] * extra, enc.ids + [pad_id] * extra, enc.segments + [0] * extra,
                    enc.mask + [0] * extra, enc.spans + [None] * extra, enc.n_real, enc.truncated)


def encode_batch(model, texts, pairs=None, *, pad_to: int | None = None, truncate: bool = False) -> list[Encoding]:
    """Each text (and pair) tokenized once, then padded to the longest input or to pad_to."""
    texts, pairs = _check_texts(texts, pairs)
    if pad_to is not None and (not isinstance(pad_to, int) or isinstance(pad_to, bool)):
        raise TypeError(f"pad_to must be an int, got {type(pad_to).__name__}")
    encs = [model.tokenize(t, p, truncate=truncate) for t, p in zip(texts, pairs)]
    n = max(len(e.ids) for e in encs) if pad_to is None else pad_to
    if n > model.max_tokens:
        from .errors import InputTooLongError
        raise InputTooLongError(f"pad_to={n} is more than the model's {model.max_tokens} positions")
    pad_id = model.config.pad_token_id  # [PAD] in bert's vocabulary, <pad> in roberta's and albert's
    return [pad_encoding(e, n, pad_id, model.tokenizer.id_to_token(pad_id)) for e in encs]


def check_batch_budget(config, batch: int, n: int, *, keep, itemsize: int, mlm: bool,
                       max_bytes: int | None) -> int:
    """Raise TraceTooLargeError, saying how to shrink it, when a batch of traces would exceed max_bytes."""
    limit = DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
    one = estimate_trace_bytes(config, n, keep=keep, itemsize=itemsize, mlm=mlm)
    need = batch * one
    if need > limit:
        fits = max(0, limit // one) if one else batch
        raise TraceTooLargeError(
            f"a batch of {batch} traces of {n} tokens would hold {need / 2**20:,.0f} MiB, over the budget of "
            f"{limit / 2**20:,.0f} MiB. Use a batch of at most {fits} texts, record less with keep= "
            f"(e.g. keep=['attn.probs']), store float16 with dtype='float16', or raise max_bytes=.")
    return need


def trace_batch(model, texts, pairs=None, *, pad_to: int | None = None, keep=None, dtype: str | None = None,
                truncate: bool = False, max_bytes: int | None = None, fast: bool = True) -> "BatchTrace":
    """What `Bert.trace_batch` runs: tokenize, pad, check the budget, one forward with a batch axis."""
    texts, pairs = _check_texts(texts, pairs)
    encs = encode_batch(model, texts, pairs, pad_to=pad_to, truncate=truncate)
    return trace_encodings(model, encs, [(t,) if p is None else (t, p) for t, p in zip(texts, pairs)],
                           keep=keep, dtype=dtype, max_bytes=max_bytes, fast=fast)


def trace_encodings(model, encs: Sequence[Encoding], texts, *, keep=None, dtype: str | None = None,
                    max_bytes: int | None = None, fast: bool = True) -> "BatchTrace":
    """One forward over inputs already tokenized and padded to the same length."""
    c, xp = model.config, model.xp
    keep = compile_patterns(keep)
    check_patterns(keep, model.trace_keys(), "keep=")
    if len({len(e.ids) for e in encs}) != 1:
        raise ValueError("every encoding of a batch must have the same length; pad them with pad_encoding()")
    for e in encs:
        model._check_ids(e.ids, e.segments, e.mask)
    if dtype is not None and dtype not in _STORE_DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a storage type; use 'float32' or 'float16'")
    B, n = len(encs), len(encs[0].ids)
    check_batch_budget(c, B, n, keep=keep, itemsize=_STORE_DTYPES[dtype or "float32"], mlm=model.has_mlm,
                       max_bytes=max_bytes)
    store_dtype = None if dtype in (None, "float32") else getattr(xp, dtype)
    rec = NullRecorder(xp) if keep == () else Recorder(xp, keep=keep, dtype=store_dtype)
    ids = xp.asarray([e.ids for e in encs])  # [B, n]
    segments = xp.asarray([e.segments for e in encs])  # [B, n]
    mask = [e.mask for e in encs]  # [B, n]
    with backend.fast_path(fast):
        engine.forward(model.weights, model._layers, ids, segments, mask, c, rec, xp, mlm=model.has_mlm)
    return BatchTrace(rec.store, config=c, encodings=encs, texts=texts, model_name=model.name,
                      backend_name=model.backend, keep=keep)


# ------------------------------------------------------------------------------------------
# the batched trace
# ------------------------------------------------------------------------------------------


class BatchTrace:
    """The recorded forward pass of B inputs padded to n tokens: every key has a leading batch axis.

    `btr["layer.3.attn.probs"]` -> [B, A, n, n]; `btr.get("attn.probs", layer=3)`;
    `btr.stack("attn.probs")` -> (batch, layer, head, query, key); `btr.tokens[i]`, `btr.mask[i]`
    (padded to n); `btr[i]` -> example i as a `Trace` without its padding; `len(btr)` = B.
    """

    def __init__(self, values: dict, *, config, encodings: Sequence[Encoding], texts, model_name: str = "",
                 backend_name: str = "numpy", keep=None):
        self._values = dict(values)
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
        if isinstance(key, int) and not isinstance(key, bool):
            return self.example(key)
        if not isinstance(key, str):
            raise TypeError(f"index a batch trace with a key ('layer.0.attn.probs') or an example number, "
                            f"got {type(key).__name__}")
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
        arrays = [self[f"layer.{layer}.{name}"] for layer in range(self.config.num_layers)]
        return backend.namespace_of(arrays[0]).stack(arrays, axis=1)

    def stack_axes(self, name: str) -> tuple[str, ...]:
        return (BATCH_AXIS, "layer") + schema.STEP_BY_KEY[name].axes

    @property
    def nbytes(self) -> int:
        return sum(int(v.size) * backend.itemsize(v) for v in self._values.values())

    def shapes(self) -> Table:
        """Every recorded key with its shape, named axes (batch first), and formula."""
        rows = [(key, tuple(v.shape), " x ".join(self.axes(key)), schema.step_of(key, self.config).formula)
                for key, v in self._values.items()]
        return Table(("key", "shape", "axes", "formula"), rows,
                     title=f"batch of {len(self)} inputs x {self.n} tokens, {len(rows)} tensors, "
                           f"{self.nbytes / 2**20:,.1f} MiB")

    # --- one example
    def _empty_trace(self, i: int) -> Trace:
        return Trace({}, config=self.config, tokens=self.tokens[i], ids=self.ids[i], segments=self.segments[i],
                     mask=self.mask[i], spans=self.spans[i], texts=self.texts[i], model_name=self.model_name,
                     backend_name=self.backend, keep=self.keep)

    def example(self, i: int) -> Trace:
        """Input i as an ordinary Trace, its padding removed (a copy: it keeps no batch array alive)."""
        B = len(self)
        if not -B <= i < B:
            from .errors import OutOfRangeError
            raise OutOfRangeError(f"example {i} is out of range: this batch holds {B} inputs, 0..{B - 1}")
        i %= B
        m = self.n_real[i]  # padding is always at the end
        values = {}
        for key, x in self._values.items():
            axes = schema.step_of(key, self.config).axes
            cut = tuple(slice(0, m) if a in ("token", "query", "key") else slice(None) for a in axes)
            xp = backend.namespace_of(x)
            values[key] = xp.asarray(x[(i, *cut)], copy=True)
        return Trace(values, config=self.config, tokens=self.tokens[i][:m], ids=self.ids[i][:m],
                     segments=self.segments[i][:m], mask=self.mask[i][:m], spans=self.spans[i][:m],
                     texts=self.texts[i], model_name=self.model_name, backend_name=self.backend, keep=self.keep)

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
