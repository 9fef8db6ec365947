"""A loaded BERT: config, weights on one array backend, and its tokenizer.

`Bert.trace(text)` tokenizes, checks the input and the memory budget, runs the engine
with a recorder and returns a `Trace`. The model holds no widget code.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

from . import backend, engine, families, kernels, schema
from .config import BertConfig
from .errors import BertVizError, TraceTooLargeError
from .trace import DEFAULT_MAX_TRACE_BYTES, Trace, check_max_bytes
from .weights import head_shapes, param_shapes

# the trained model load("minilm") reads; its masked-LM head is fitted here (loading imports this name, so the
# model needs nothing from loading)
MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
PREDICTION_BYTES = 200  # one MaskPrediction with its token string, as Python holds it (measured: ~170)


@dataclass(frozen=True)
class MaskPrediction:
    """One candidate for a [MASK] position."""

    token: str
    id: int
    probability: float
    position: int  # index of the [MASK] token in the input

    @property
    def word(self) -> str:
        """The token as people read it (`prettify_token`: no Ġ, ▁ or leading ##); `token` is the vocabulary's."""
        from .foreign import prettify_token
        return prettify_token(self.token)

    def __str__(self) -> str:
        return f"{self.word} {self.probability:.3f}"


class Bert:
    """A BERT encoder ready to trace. Build one with `bertviz_lite.load(...)`."""

    def __init__(self, config: BertConfig, weights: dict, tokenizer, *, name: str = "bert",
                 backend_name: str | None = None, source: str = "", description: str = ""):
        self.config = config
        self.description = description  # what this model is, in words (loading.MODELS for the built-in ones)
        self.xp = backend.get_namespace(backend_name)
        self.backend = backend.backend_name(self.xp)
        self.tokenizer = tokenizer
        self.name = name
        self.source = source
        # weights move to the backend once; the engine never changes them
        self.weights = {k: backend.from_host(v, self.xp) for k, v in weights.items()}
        # ALBERT (shared_layers): every layer reads layer 0's weights
        stored = [0 if config.shared_layers else layer for layer in range(config.num_layers)]
        packed = {layer: kernels.pack_qkv(self.weights, schema.layer_prefix(layer)) for layer in set(stored)}
        for layer, qkv in packed.items():  # the fast path's one [W^Q | W^K | W^V]: the dict holds views of it
            if qkv is not None:
                self.weights.update(zip((schema.layer_prefix(layer) + k for k in kernels.QKV_WEIGHTS), qkv.views))
        self.layer_weights = [engine.LayerWeights(self.weights, layer, packed[layer]) for layer in stored]
        if tokenizer is not None and tokenizer.vocab_size != config.vocab_size:
            raise BertVizError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model's embedding "
                               f"table has {config.vocab_size} rows; load a matching vocab.txt")

    @property
    def family(self) -> families.Family:
        """The record of the model's family (families.py): its special tokens, architectures, name map."""
        return families.family_of(self.config)

    @property
    def architecture(self) -> str:
        """The transformers class this model is (BertModel, RobertaForMaskedLM, BertForPreTraining, ...); a
        head fitted here on MiniLM is not part of it (MiniLM is a BertModel)."""
        return self.family.architecture(head=self.config.head, mlm=self.has_mlm and not self.mlm_fitted_here)

    @property
    def has_mlm(self) -> bool:
        return "mlm.bias" in self.weights

    @property
    def mlm_fitted_here(self) -> bool:
        """True for minilm's head, fitted on the frozen encoder by training/train_mlm_head.py (not pre-trained)."""
        return self.has_mlm and self.source in (MINILM_REPO, "minilm-mlm")

    @property
    def has_pooler(self) -> bool:
        return "pooler.W" in self.weights

    @property
    def has_nsp(self) -> bool:
        return "nsp.W" in self.weights

    @property
    def max_tokens(self) -> int:
        """The longest input: the position table's rows from the offset on (RoBERTa: 514 - 2 = 512)."""
        return self.config.max_positions - self.config.position_offset

    def heads(self) -> list[str]:
        """What sits on the encoder, as the repr says it: the task head (with its labels), the masked-LM head
        (the checkpoint's own, or the one fitted here on MiniLM), the next-sentence head."""
        c, out = self.config, []
        if c.head is not None and c.head != "next_sentence":
            shown = ", ".join(c.labels[:4]) + (", ..." if len(c.labels) > 4 else "")
            out.append(f"{c.head} head ({shown})")
        if self.has_mlm:
            out.append("mlm head (fitted by bertviz-lite)" if self.mlm_fitted_here else "mlm head")
        if self.has_nsp or c.head == "next_sentence":
            out.append("next-sentence head")
        return out

    def __repr__(self) -> str:
        c = self.config
        heads = "".join(f" +{h}" for h in self.heads())
        described = getattr(self, "description", "")  # a named model's line (load's model table), if it has one
        return (f"<{self.family.name} {self.name}: {self.architecture}{f' ({described})' if described else ''}, "
                f"L={c.num_layers} H={c.hidden_size} n_h={c.num_heads} d_ffnn={c.ffn_size} V={c.vocab_size}"
                f"{heads} on {self.backend}>")

    def variant(self, *, name: str | None = None, weights: dict | None = None, **config_changes) -> "Bert":
        """A new model with some config fields and/or weights replaced; this one is unchanged.

        For what-if experiments: `model.variant(hidden_act="relu")`,
        `model.variant(attention_scale=1 / 768 ** 0.5)`, `model.variant(weights={"layer.0.attn.W_O": I})`.
        """
        if weights is not None and not isinstance(weights, Mapping):
            raise TypeError(f"variant(weights=) takes a dict of weight name -> array, got {type(weights).__name__}")
        fields = {f.name for f in dataclasses.fields(BertConfig)}
        if set(config_changes) - fields:
            raise TypeError(f"variant() got {sorted(set(config_changes) - fields)}, which are not config fields; "
                            f"it changes these: {sorted(fields)}")
        config = self.config.replace(**config_changes)
        heads = head_shapes(config)  # a task head added with head=, labels= brings its own weights
        unknown = sorted(set(weights or {}) - set(self.weights) - set(heads), key=str)
        if unknown:
            raise KeyError(f"variant() can only replace existing weights (or add the head's {sorted(heads)}); "
                           f"unknown: {unknown}")
        new_weights = {**{k: backend.to_host(v) for k, v in self.weights.items()},
                       **{k: backend.host_real_array(v, f"variant weight {k!r}") for k, v in (weights or {}).items()}}
        changes = ", ".join(f"{k}={v!r}" for k, v in config_changes.items()) or "weights changed"
        bad = [f"{k} holds {backend.host_bad_values(new_weights[k])} NaN/Inf value(s)" for k in (weights or {})
               if backend.host_bad_values(new_weights[k])]  # as a checkpoint's weights are checked
        if bad:
            raise ValueError(f"variant({changes}): weights must be finite: {'; '.join(bad[:5])}")
        # a variant changes values, never the model's shapes (load('random', config=...) builds another size)
        shapes = param_shapes(config, mlm=self.has_mlm, nsp=self.has_nsp, pooler=self.has_pooler)  # with any head
        wrong = [f"{k} has {tuple(w.shape)}, the config needs {shapes[k]}" for k, w in new_weights.items()
                 if k in shapes and tuple(w.shape) != tuple(shapes[k])]
        wrong += [f"{k} {shape} is missing" for k, shape in shapes.items() if k not in new_weights]
        if wrong:
            raise ValueError(f"variant({changes}): every weight must keep a shape the config fits: "
                             f"{'; '.join(wrong[:5])}{f' (and {len(wrong) - 5} more)' if len(wrong) > 5 else ''}. "
                             "A variant changes values, not sizes; for another size use load('random', config=...)")
        return Bert(config, new_weights, self.tokenizer,
                    name=name or f"{self.name} [{changes}]", backend_name=self.backend, source=self.source)

    # --- pickling (to send a model to Dask workers): weights travel as host arrays, the array
    # namespace by its name, and the receiving process moves them to that backend again
    def __getstate__(self) -> dict:
        return {"config": self.config, "weights": {k: backend.to_host(v) for k, v in self.weights.items()},
                "tokenizer": self.tokenizer, "name": self.name, "backend_name": self.backend, "source": self.source,
                "description": self.description}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["weights"], state["tokenizer"], name=state["name"],
                      backend_name=state["backend_name"], source=state["source"],
                      description=state.get("description", ""))

    # --- input
    def tokenize(self, text: str, pair: str | None = None, *, truncate: bool = False, pad_to: int | None = None):
        """The exact model input: tokens, ids, segments, mask and character spans."""
        if self.tokenizer is None:
            raise BertVizError("this model was loaded without a vocabulary; pass token ids to trace_ids()")
        return self.tokenizer.encode(text, pair, max_length=self.max_tokens, truncate=truncate,
                                     pad_to=pad_to)

    # --- forward: one sentence is a batch of one (bertviz_lite.batch.run is the one path)
    def trace(self, text: str, pair: str | None = None, *, pad_to: int | None = None, keep=None,
              dtype: str | None = None, truncate: bool = False, max_bytes: int | None = None, fast: bool = True,
              edits=None, patch_from: Trace | None = None, patch=None) -> Trace:
        """Run the forward pass on a sentence (or a pair) and record every intermediate.

        pad_to=512 pads with [PAD] to the formula card's shapes (masked, so real tokens are
        unchanged); keep= glob patterns record only some keys; dtype='float16' halves memory.
        fast=False runs the formula lines of engine.py exactly as written (no fused kernels).
        edits={pattern: f} changes steps (see `bertviz_lite.edits`: ablate, replace, scale);
        patch_from=trace, patch=[patterns] takes those tensors from another run.
        The same runner as trace_batch: `model.trace_batch(texts, edits=e)[i]` equals `model.trace(texts[i], edits=e)`.
        """
        from .batch import check_options, run
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}"
                            + ("; for many texts use model.trace_batch(texts)" if isinstance(text, (list, tuple)) else ""))
        opts = check_options(self, keep=keep, dtype=dtype, max_bytes=max_bytes, pad_to=pad_to, fast=fast)
        enc = self.tokenize(text, pair, truncate=truncate, pad_to=opts.pad_to)
        texts = (text,) if pair is None else (text, pair)
        return run(self, [enc], [texts], opts, edits=edits, patch_from=patch_from, patch=patch).example(
            0, keep_padding=True)

    def trace_keys(self) -> list[str]:
        """Every key a full trace of this model holds, in forward order."""
        return schema.model_keys(self.config, mlm=self.has_mlm, pooler=self.has_pooler)

    def trace_batch(self, texts, pairs=None, *, pad_to: int | None = None, keep=None, dtype: str | None = None,
                    truncate: bool = False, max_bytes: int | None = None, fast: bool = True, edits=None,
                    patch_from: Trace | None = None, patch=None, progress: bool = True) -> Trace:
        """Trace many texts at once: a Trace with a batch axis (`tr.has_batch`), leading on every key.

        Inputs are padded with [PAD] to the longest (or pad_to); `btr[i]` is text i as a Trace
        without its padding, the same as `trace(texts[i], edits=...)`. Every option works as in
        trace(); edits see one input at a time; the budget covers the whole batch. From 64 inputs on, a run
        over a second shows a tqdm bar over the layers (progress=False, or the CI variable set: none).
        """
        from .batch import trace_batch
        return trace_batch(self, texts, pairs, pad_to=pad_to, keep=keep, dtype=dtype, truncate=truncate,
                           max_bytes=max_bytes, fast=fast, edits=edits, patch_from=patch_from, patch=patch,
                           progress=progress)

    def trace_ids(self, ids, segments=None, mask=None, *, tokens=None, spans=None, texts=("",), keep=None,
                  dtype: str | None = None, max_bytes: int | None = None, fast: bool = True, edits=None,
                  patch_from: Trace | None = None, patch=None) -> Trace:
        """The forward pass on token ids (what `trace` runs after tokenizing), as a batch of one."""
        from .batch import check_options, run
        from .tokenizer import Encoding
        ids = [int(i) for i in ids]
        n = len(ids)
        segments = [0] * n if segments is None else [int(s) for s in segments]
        mask = [1] * n if mask is None else [int(m) for m in mask]
        opts = check_options(self, keep=keep, dtype=dtype, max_bytes=max_bytes, fast=fast)
        for what, given in (("tokens", tokens), ("spans", spans)):
            if given is not None and len(given) != n:
                raise ValueError(f"trace_ids: {what}= has {len(given)} entries for {n} ids; give one per id")
        if tokens is None:
            in_vocab = self.tokenizer is not None and all(0 <= i < self.config.vocab_size for i in ids)
            tokens = [self.tokenizer.id_to_token(i) for i in ids] if in_vocab else [str(i) for i in ids]
        spans = [None] * n if spans is None else list(spans)
        enc = Encoding(list(tokens), ids, segments, mask, spans, sum(mask), False)
        return run(self, [enc], [tuple(texts)], opts, edits=edits, patch_from=patch_from, patch=patch).example(
            0, keep_padding=True)

    def _knows_token(self, token: str) -> bool:
        """Whether the tokenizer's vocabulary holds this token."""
        try:  # (WordPiece answers an unknown token with [UNK]'s id)
            return self.tokenizer.id_to_token(self.tokenizer.token_to_id(token)) == token
        except (KeyError, ValueError, IndexError):
            return False

    # --- masked language modelling
    def fill_mask(self, text: str, top_k: int = 5, pair: str | None = None, *,
                  max_bytes: float | None = None) -> list[list[MaskPrediction]]:
        """Top-k tokens for each [MASK] in the text, from the mlm head (softmax over the vocabulary).

        Returns one list per [MASK], best first. max_bytes: the budget for the predictions returned (2 GiB by
        default, as trace()'s); masks x top_k over it is refused before the trace runs.
        """
        if not self.has_mlm:
            raise BertVizError(f"{self.name} has no masked-lm head (loaded with mlm=False, or a checkpoint without "
                               "one): use load('minilm') (its head is fitted by bertviz-lite), a BertForPreTraining or "
                               "BertForMaskedLM checkpoint (e.g. google-bert/bert-base-uncased), or load('random', mlm=True)")
        V = self.config.vocab_size
        if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or not 1 <= top_k <= V:
            raise ValueError(f"top_k must be a whole number from 1 to the vocabulary size {V:,}, got {top_k!r}")
        mask = self.family.special.mask  # [MASK]; RoBERTa's <mask> (families.py)
        if not self._knows_token(mask):  # a typed mask would become [UNK]s or pieces, and nothing could be predicted
            raise BertVizError(f"{self.name}'s vocabulary has no mask token ({mask}), so fill_mask cannot "
                               "mark a position to predict; use a checkpoint whose tokenizer has one, or trace "
                               "the text and read tr['mlm.logits'] at the position you want")
        enc = self.tokenize(text, pair)
        positions = [i for i, t in enumerate(enc.tokens) if t == mask]
        if not positions:
            raise ValueError(f"no {mask} token in {text!r}; write {mask} where a word should be predicted"
                             + (f" ({self.family.name} spells it {mask}, not [MASK])" if mask != "[MASK]" else ""))
        check_max_bytes(max_bytes)
        count, limit = len(positions) * top_k, DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
        if count * PREDICTION_BYTES > limit:
            raise TraceTooLargeError(
                f"fill_mask would return {len(positions):,} masks x top_k {top_k:,} = {count:,} predictions, about "
                f"{count * PREDICTION_BYTES / 2**20:,.0f} MiB, over the budget of {limit / 2**20:,.0f} MiB: ask for a "
                "smaller top_k or fewer masks, or raise max_bytes=")
        tr = self.trace_ids(enc.ids, enc.segments, enc.mask, tokens=enc.tokens, keep=["mlm.logits"])
        logits = backend.to_host(tr["mlm.logits"])
        hx = backend.namespace_of(logits)
        out = []
        for pos in positions:
            p = engine.softmax(hx.astype(logits[pos], hx.float64), hx)  # [V], float64 for the ranking
            top = hx.argsort(-p)[:top_k]  # highest probability first
            out.append([MaskPrediction(self.tokenizer.id_to_token(int(i)), int(i), float(p[i]), pos) for i in top])
        return out

