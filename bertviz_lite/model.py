"""A loaded BERT: config, weights on one array backend, and its tokenizer.

`Bert.trace(text)` tokenizes, checks the input and the memory budget, runs the engine
with a recorder and returns a `Trace`. The model holds no widget code.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from . import backend, engine, schema
from .config import BertConfig
from .edits import compile_edits
from .errors import BertVizError
from .trace import NullRecorder, Recorder, Trace, check_budget, check_patterns, compile_patterns

_DTYPES = {"float32": 4, "float16": 2}


@dataclass(frozen=True)
class MaskPrediction:
    """One candidate for a [MASK] position."""

    token: str
    id: int
    probability: float
    position: int  # index of the [MASK] token in the input


def _byte_budget(max_bytes) -> float:
    """max_bytes= as a number of bytes (an int, or a float such as 1e9); a string or a bool is refused."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Real):
        raise TypeError(f"max_bytes must be a number of bytes (e.g. 2 * 1024**3 or 1e9), got "
                        f"{type(max_bytes).__name__} {max_bytes!r}")
    if not max_bytes >= 0:  # nan fails this too
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes!r}")
    return max_bytes


class Bert:
    """A BERT encoder ready to trace. Build one with `bertviz_lite.load(...)`."""

    def __init__(self, config: BertConfig, weights: dict, tokenizer, *, name: str = "bert",
                 backend_name: str | None = None, source: str = ""):
        self.config = config
        self.xp = backend.get_namespace(backend_name)
        self.backend = backend.backend_name(self.xp)
        self.tokenizer = tokenizer
        self.name = name
        self.source = source
        # weights move to the backend once; the engine never changes them
        self.weights = {k: backend.from_host(v, self.xp) for k, v in weights.items()}
        self._layers = [engine.LayerWeights(self.weights, layer) for layer in range(config.num_layers)]
        if tokenizer is not None and tokenizer.vocab_size != config.vocab_size:
            raise BertVizError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's embedding "
                               f"table has {config.vocab_size} rows; load a matching vocab.txt")

    @property
    def has_mlm(self) -> bool:
        return "mlm.bias" in self.weights

    @property
    def has_pooler(self) -> bool:
        return "pooler.W" in self.weights

    @property
    def has_nsp(self) -> bool:
        return "nsp.W" in self.weights

    def __repr__(self) -> str:
        c = self.config
        heads = " +mlm" if self.has_mlm else ""
        return (f"<Bert {self.name}: L={c.num_layers} H={c.hidden_size} n_h={c.num_heads} F={c.ffn_size} "
                f"V={c.vocab_size}{heads} on {self.backend}>")

    def variant(self, *, name: str | None = None, weights: dict | None = None, **config_changes) -> "Bert":
        """A new model with some config fields and/or weights replaced; this one is unchanged.

        For what-if experiments: `model.variant(hidden_act="relu")`,
        `model.variant(attention_scale=1 / 768 ** 0.5)`, `model.variant(weights={"layer.0.attn.W_O": I})`.
        """
        unknown = sorted(set(weights or {}) - set(self.weights))
        if unknown:
            raise KeyError(f"variant() can only replace existing weights; unknown: {unknown}")
        new_weights = {**{k: backend.to_host(v) for k, v in self.weights.items()},
                       **{k: backend.host_float32(backend.to_host(v)) for k, v in (weights or {}).items()}}
        for k, v in (weights or {}).items():
            if tuple(new_weights[k].shape) != tuple(self.weights[k].shape):
                raise ValueError(f"{k} must keep its shape {tuple(self.weights[k].shape)}, got {tuple(v.shape)}")
        changes = ", ".join(f"{k}={v!r}" for k, v in config_changes.items()) or "weights changed"
        return Bert(self.config.replace(**config_changes), new_weights, self.tokenizer,
                    name=name or f"{self.name} [{changes}]", backend_name=self.backend, source=self.source)

    # --- pickling (to send a model to Dask workers): weights travel as host arrays, the array
    # namespace by its name, and the receiving process moves them to that backend again
    def __getstate__(self) -> dict:
        return {"config": self.config, "weights": {k: backend.to_host(v) for k, v in self.weights.items()},
                "tokenizer": self.tokenizer, "name": self.name, "backend_name": self.backend, "source": self.source}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["weights"], state["tokenizer"], name=state["name"],
                      backend_name=state["backend_name"], source=state["source"])

    # --- input
    def tokenize(self, text: str, pair: str | None = None, *, truncate: bool = False, pad_to: int | None = None):
        """The exact model input: tokens, ids, segments, mask and character spans."""
        if self.tokenizer is None:
            raise BertVizError("this model was loaded without a vocabulary; pass token ids to trace_ids()")
        return self.tokenizer.encode(text, pair, max_length=self.config.max_positions, truncate=truncate,
                                     pad_to=pad_to)

    # --- forward
    def trace(self, text: str, pair: str | None = None, *, pad_to: int | None = None, keep=None,
              dtype: str | None = None, truncate: bool = False, max_bytes: int | None = None, fast: bool = True,
              edits=None, patch_from: Trace | None = None, patch=None) -> Trace:
        """Run the forward pass on a sentence (or a pair) and record every intermediate.

        pad_to=512 pads with [PAD] to the formula card's shapes (masked, so real tokens are
        unchanged); keep= glob patterns record only some keys; dtype='float16' halves memory.
        fast=False runs the formula lines of engine.py exactly as written (no fused kernels).
        edits={pattern: f} changes steps (see `bertviz_lite.edits`: ablate, replace, scale);
        patch_from=trace, patch=[patterns] takes those tensors from another run.
        """
        enc = self.tokenize(text, pair, truncate=truncate, pad_to=pad_to)
        texts = (text,) if pair is None else (text, pair)
        return self.trace_ids(enc.ids, enc.segments, enc.mask, tokens=enc.tokens, spans=enc.spans, texts=texts,
                              keep=keep, dtype=dtype, max_bytes=max_bytes, fast=fast, edits=edits,
                              patch_from=patch_from, patch=patch)

    def trace_keys(self) -> list[str]:
        """Every key a full trace of this model holds, in forward order."""
        return schema.trace_keys(self.config.num_layers, mlm=self.has_mlm, pooler=self.has_pooler)

    def trace_batch(self, texts, pairs=None, *, pad_to: int | None = None, keep=None, dtype: str | None = None,
                    truncate: bool = False, max_bytes: int | None = None, fast: bool = True):
        """Trace many texts at once: a BatchTrace with a leading batch axis on every key.

        Inputs are padded with [PAD] to the longest (or pad_to); `btr[i]` is text i as a Trace
        without its padding, the same as `trace(texts[i])`. The budget covers the whole batch.
        (Edits and patching apply to single traces only.)
        """
        from .batch import trace_batch
        return trace_batch(self, texts, pairs, pad_to=pad_to, keep=keep, dtype=dtype, truncate=truncate,
                           max_bytes=max_bytes, fast=fast)

    def trace_ids(self, ids, segments=None, mask=None, *, tokens=None, spans=None, texts=("",), keep=None,
                  dtype: str | None = None, max_bytes: int | None = None, fast: bool = True, edits=None,
                  patch_from: Trace | None = None, patch=None) -> Trace:
        """The forward pass on token ids (what `trace` calls after tokenizing)."""
        c, xp = self.config, self.xp
        ids = [int(i) for i in ids]
        n = len(ids)
        segments = [0] * n if segments is None else [int(s) for s in segments]
        mask = [1] * n if mask is None else [int(m) for m in mask]
        self._check_ids(ids, segments, mask)
        if dtype is not None and not isinstance(dtype, str):
            raise TypeError(f"dtype must be the string 'float32' or 'float16', got {type(dtype).__name__} {dtype!r}")
        if dtype is not None and dtype not in _DTYPES:
            raise ValueError(f"dtype={dtype!r} is not a storage type; use 'float32' or 'float16'")
        if max_bytes is not None:
            max_bytes = _byte_budget(max_bytes)
        keep = compile_patterns(keep)  # once: a generator would be used up by the budget check
        all_keys = self.trace_keys()
        check_patterns(keep, all_keys, "keep=")
        key_edits = compile_edits(edits, patch_from, patch, self, n, all_keys, mask, xp)
        check_budget(c, n, keep=keep, itemsize=_DTYPES.get(dtype or "float32"), mlm=self.has_mlm,
                     max_bytes=max_bytes)
        store_dtype = None if dtype in (None, "float32") else getattr(xp, dtype)
        if keep == () and not key_edits:
            rec = NullRecorder(xp)
        else:
            rec = Recorder(xp, keep=keep, dtype=store_dtype, edits=key_edits)
        with backend.fast_path(fast):
            engine.forward(self.weights, self._layers, xp.asarray(ids), xp.asarray(segments), mask, c, rec, xp,
                           mlm=self.has_mlm)
        if tokens is None:
            tokens = [self.tokenizer.id_to_token(i) for i in ids] if self.tokenizer else [str(i) for i in ids]
        return Trace(rec.store, config=c, tokens=tokens, ids=ids, segments=segments, mask=mask, spans=spans,
                     texts=texts, model_name=self.name, backend_name=self.backend, keep=keep, edits=rec.edited)

    def _check_ids(self, ids, segments, mask) -> None:
        c, n = self.config, len(ids)
        if n == 0:
            raise ValueError("no tokens: an input needs at least [CLS] and [SEP]")
        if n > c.max_positions:
            from .errors import InputTooLongError
            raise InputTooLongError(f"{n} tokens is more than this model's {c.max_positions} positions; "
                                    f"shorten the input or pass truncate=True")
        if len(segments) != n or len(mask) != n:
            raise ValueError(f"ids, segments and mask must have the same length, got {n}, {len(segments)}, {len(mask)}")
        bad = [i for i in ids if not 0 <= i < c.vocab_size]
        if bad:
            raise ValueError(f"token id(s) {bad[:5]} outside the vocabulary 0..{c.vocab_size - 1}")
        bad = [s for s in segments if not 0 <= s < c.type_vocab_size]
        if bad:
            raise ValueError(f"segment id(s) {sorted(set(bad))} outside 0..{c.type_vocab_size - 1}")
        if any(m not in (0, 1) for m in mask):
            raise ValueError("mask values must be 1 (real token) or 0 ([PAD])")
        if not mask[0]:
            raise ValueError("the first token is masked: at least [CLS] must be a real token")

    # --- masked language modelling
    def fill_mask(self, text: str, top_k: int = 5, pair: str | None = None) -> list[list[MaskPrediction]]:
        """Top-k tokens for each [MASK] in the text, from the mlm head (softmax over the vocabulary).

        Returns one list per [MASK], best first.
        """
        if not self.has_mlm:
            raise BertVizError(f"{self.name} has no masked-lm head: load a BertForPreTraining or BertForMaskedLM "
                               "checkpoint (e.g. google-bert/bert-base-uncased) or load('random', mlm=True)")
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        enc = self.tokenize(text, pair)
        positions = [i for i, t in enumerate(enc.tokens) if t == "[MASK]"]
        if not positions:
            raise ValueError(f"no [MASK] token in {text!r}; write [MASK] where a word should be predicted")
        tr = self.trace_ids(enc.ids, enc.segments, enc.mask, tokens=enc.tokens, keep=["mlm.logits"])
        logits = backend.to_host(tr["mlm.logits"])
        hx = backend.namespace_of(logits)
        out = []
        for pos in positions:
            p = engine.softmax(hx.astype(logits[pos], hx.float64), hx)  # [V], float64 for the ranking
            top = hx.argsort(-p)[:top_k]  # highest probability first
            out.append([MaskPrediction(self.tokenizer.id_to_token(int(i)), int(i), float(p[i]), pos) for i in top])
        return out

