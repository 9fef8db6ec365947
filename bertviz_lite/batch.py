"""One runner for one sentence and many: every input goes through the same formula lines as a batch.

`model.trace(text)` is a batch of one; `model.trace_batch(texts)` pads every input to the longest
(or to `pad_to`) with [PAD] and runs the engine once with a leading batch axis on every array (the
engine's lines are written for `[..., n, H]`, so nothing is run twice). Both go through `run()`:
one validator (`check_options`), one budget check (recorded tensors and the forward's working
memory), one recorder, so `keep=`, `edits=`, `patch_from=`, `dtype=`, `fast=False` and `max_bytes=`
work the same for one sentence and many. `run` returns one `Trace` type with a batch axis
(`tr.has_batch`): the same keys, each with a leading `batch` axis; `btr[i]` is example i as a `Trace`
without a batch axis and with its padding removed, equal to `model.trace(texts[i], edits=...)`
(padded keys get exactly zero attention, so the real tokens compute the same numbers, up to float32
rounding). `model.trace(text)` is the batch of one, its batch axis dropped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from . import engine, kernels, threads
from .edits import compile_edits
from .errors import InputTooLongError, as_bool, as_int
from .tokenizer import Encoding, pad_encoding  # padding is written once, in tokenizer.py
from .trace import NullRecorder, Recorder, Trace, check_budget, check_max_bytes, check_patterns, compile_patterns

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
    if dtype is not None and not hasattr(model.xp, dtype):  # array_api_strict keeps to the standard's dtypes
        raise ValueError(f"dtype={dtype!r}: the {model.backend} backend has no {dtype}; use dtype='float32' "
                         f"or load the model with backend='numpy' or 'cupy'")
    check_max_bytes(max_bytes)
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


PROGRESS_FROM = 64  # trace_batch shows its bar from this many inputs on (a few sentences never show one)


def progress_bar(total: int, enabled: bool, desc: str, unit: str = "layer"):
    """A tqdm bar (a widget in a notebook, text in a terminal) shown when the work takes over a second;
    none with progress=False or in CI (the CI variable set), so logs and stored outputs stay the same."""
    from tqdm.auto import tqdm  # here, not at import: the engine loads no widget library until asked
    return tqdm(total=total, disable=not enabled or bool(os.environ.get("CI")), desc=desc, unit=unit, delay=1.0)


def trace_batch(model, texts, pairs=None, *, pad_to=None, keep=None, dtype=None, truncate: bool = False,
                max_bytes=None, fast: bool = True, edits=None, patch_from=None, patch=None,
                progress: bool = True) -> Trace:
    """What `Bert.trace_batch` runs: check, tokenize, pad, then `run` (one forward over the whole batch;
    from PROGRESS_FROM inputs on, a bar over its layers when it takes more than a second)."""
    opts = check_options(model, keep=keep, dtype=dtype, max_bytes=max_bytes, pad_to=pad_to, fast=fast)
    texts, pairs = check_texts(texts, pairs)
    encs = encode_batch(model, texts, pairs, pad_to=opts.pad_to, truncate=truncate)
    return run(model, encs, [(t,) if p is None else (t, p) for t, p in zip(texts, pairs)], opts,
               edits=edits, patch_from=patch_from, patch=patch, progress=progress and len(encs) >= PROGRESS_FROM)


def trace_encodings(model, encs: Sequence[Encoding], texts, *, keep=None, dtype=None, max_bytes=None,
                    fast: bool = True, edits=None, patch_from=None, patch=None) -> Trace:
    """One forward over inputs already tokenized and padded to the same length."""
    opts = check_options(model, keep=keep, dtype=dtype, max_bytes=max_bytes, fast=fast)
    return run(model, encs, texts, opts, edits=edits, patch_from=patch_from, patch=patch)


def run(model, encs: Sequence[Encoding], texts, opts: Options, *, edits=None, patch_from=None,
        patch=None, progress: bool = False) -> Trace:
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
    bar = progress_bar(c.num_layers, True, f"trace_batch ({B} inputs)") if progress else contextlib.nullcontext()
    with kernels.fast_path(opts.fast), threads.threads_for_load(), bar:  # fewer threads while others hold the cores
        if progress:  # the engine opens each layer's scope once: a step of the bar
            rec.on_scope = lambda prefix: bar.update(1)
        engine.forward(model.weights, model.layer_weights, ids, segments, masks, c, rec, xp, mlm=model.has_mlm)
    rec.warn_overflow(stacklevel=3)  # trace(), trace_batch(): the user's line
    return Trace(rec.store, config=c, tokens=[e.tokens for e in encs], ids=[e.ids for e in encs],
                 segments=[e.segments for e in encs], mask=[e.mask for e in encs], spans=[e.spans for e in encs],
                 texts=texts, model_name=model.name, backend_name=model.backend, keep=opts.keep, edits=rec.edited,
                 has_batch=True)


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


# BatchTrace was a second class with Trace's methods; a trace with a batch axis is now a Trace
# (`tr.has_batch`). The name stays for code that imported it: isinstance(btr, BatchTrace) still holds.
BatchTrace = Trace
