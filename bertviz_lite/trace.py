"""The Trace: every intermediate tensor of one forward pass, by key, with its named axes; one type for
one input and for a batch (`tr.has_batch`: a leading batch axis on every tensor, `tr[i]` one input).

A trace is a small data container (TransformerLens's ActivationCache, without the model):
exact keys in forward order, one structured accessor `get(name, layer=)`, `stack`,
`shapes`, `to_host`. Analysis lives in free functions that take a trace.
The `Recorder` is what the engine writes through: `x = rec("attn.probs", softmax(s))`.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import math
import numbers
import warnings
from collections.abc import Iterable, Sequence

from . import backend, families, kernels, schema
from .errors import OutOfRangeError, PatternError, TraceTooLargeError, as_int
from .schema_text import plain_formula
from .table import Table

DEFAULT_MAX_TRACE_BYTES = 2 * 1024**3  # a 512-token BERT-base trace in float32 is ~0.7 GB




# ------------------------------------------------------------------------------------------
# which keys to record
# ------------------------------------------------------------------------------------------


def compile_patterns(patterns, what: str = "keep=") -> tuple[str, ...] | None:
    """Glob patterns as a tuple of strings (any iterable, or one string); None stays None."""
    if patterns is None:
        return None
    if isinstance(patterns, str):
        return (patterns,)
    try:
        patterns = tuple(patterns)
    except TypeError:
        raise TypeError(f"{what} takes glob patterns as strings (or a list of them), got {patterns!r}") from None
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"{what} takes glob patterns as strings, got {p!r}")
    return patterns


_compile_keep = compile_patterns


@functools.lru_cache(maxsize=8192)  # called for every key of every trace and batch: the same few pairs
def matches(key: str, pattern: str) -> bool:
    """A pattern matches the full key ('layer.3.attn.probs', 'layer.*.attn.*') or the step key
    inside its layer ('attn.probs' means that step in every layer)."""
    return fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(schema.split_key(key)[1], pattern)


def wants(key: str, keep: tuple[str, ...] | None) -> bool:
    """Whether a key is recorded under keep= patterns; None keeps everything."""
    if keep is None:
        return True
    return any(matches(key, p) for p in keep)


def check_patterns(patterns: tuple[str, ...] | None, keys: list[str], what: str = "keep=") -> None:
    """Raise PatternError, naming the nearest keys, for any pattern that matches none of `keys`."""
    for p in patterns or ():
        if any(matches(k, p) for k in keys):
            continue
        steps = list(dict.fromkeys(schema.split_key(k)[1] for k in keys))
        near = difflib.get_close_matches(p, keys + steps, n=4, cutoff=0.5) or \
            difflib.get_close_matches(p.lower(), keys + steps, n=4, cutoff=0.5)
        layers = sorted({schema.split_key(k)[0] for k in keys} - {None})
        why = ""
        if p.startswith(schema.LAYER_PREFIX) and layers:
            why = f" (this model has layers 0..{layers[-1]})"
        elif p.startswith("mlm.") or p.startswith("pooler."):
            why = " (this model has no such head)"
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else \
            "; patterns match a full key ('layer.3.attn.probs') or a step in every layer ('attn.probs')"
        raise PatternError(f"{what} pattern {p!r} matches no trace key{why}{hint}")


def estimate_trace_bytes(config, n: int, *, keep=None, itemsize: int = 4, mlm: bool = False,
                         pooler: bool = True) -> int:
    """Bytes a trace of n tokens will hold, from the declared axes (before running anything)."""
    keep = _compile_keep(keep)
    sizes = schema.axis_sizes(config, n)
    numel: dict = {}  # a step's values, worked out once: every layer's step has the same shape
    total = 0
    for key in schema.model_keys(config, mlm=mlm, pooler=pooler):
        if wants(key, keep):
            step = schema.step_of(key, config)
            if step.key not in numel:
                numel[step.key] = math.prod(sizes[a] for a in step.axes)
            total += numel[step.key] * itemsize
    return total


def estimate_working_bytes(config, n: int, *, itemsize: int = 4) -> int:
    """Bytes the forward pass itself holds at its peak for one input of n tokens, on top of what it
    records: one layer's scores before and after the mask and its attention map ([n_h, n, n] each),
    the feed-forward's up and activation ([n, d_ffnn] each) and a few [n, H] residual-stream arrays.
    (A recorded tensor is counted again here: the estimate errs on the safe side.)"""
    n_h, H, F = config.num_heads, config.hidden_size, config.ffn_size
    return itemsize * (3 * n_h * n * n + 2 * n * F + 8 * n * H)


def estimate_float32_bytes(config, n: int, *, keep, itemsize: int, mlm: bool) -> int:
    """Bytes the float32 computation holds at its peak beside what is recorded: the larger of the encoder's
    working memory (in a float16 trace, plus one layer's recorded values in float32 beside their float16
    copies) and the masked-LM head's [n, V] float32 product before its bias is added (and, recorded in
    float16, the float32 logits beside their copy). The head runs after the layers' memory is freed.
    (N15: the budget had left out the head and the float32 originals; 1.4-2.2x under.)"""
    keep = _compile_keep(keep)
    encoder = estimate_working_bytes(config, n)
    if itemsize < 4:
        encoder += estimate_trace_bytes(config, n, keep=keep, itemsize=4, pooler=False) // max(1, config.num_layers)
    head = 4 * n * config.vocab_size * (1 if itemsize >= 4 else 2) if mlm and wants("mlm.logits", keep) else 0
    return max(encoder, head)


def check_budget(config, n: int, *, keep, itemsize: int, mlm: bool, max_bytes: float | None, batch: int = 1,
                 pooler: bool = True) -> int:
    """Raise TraceTooLargeError, saying how to shrink it, when B traces of n tokens and the forward
    pass's working memory would exceed max_bytes; returns the bytes needed."""
    limit = DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
    one = estimate_trace_bytes(config, n, keep=keep, itemsize=itemsize, mlm=mlm, pooler=pooler) + \
        estimate_float32_bytes(config, n, keep=keep, itemsize=itemsize, mlm=mlm)
    need = batch * one
    if need > limit:
        probs_only = estimate_trace_bytes(config, n, keep=["attn.probs"], itemsize=2, mlm=False)
        what = f"a trace of {n} tokens" if batch == 1 else f"a batch of {batch} traces of {n} tokens"
        fewer = "use fewer tokens" if batch == 1 else f"use a batch of at most {int(max(0, limit // one))} texts"
        raise TraceTooLargeError(
            f"{what} would hold {need / 2**20:,.0f} MiB (recorded tensors and the forward pass's working "
            f"memory), over the budget of {limit / 2**20:,.0f} MiB. Record less with keep= (e.g. "
            f"keep=['attn.probs'] with dtype='float16' records {probs_only / 2**20:,.1f} MiB per input), store "
            f"float16 with dtype='float16' (halves what is recorded), {fewer}, or raise max_bytes=.")
    return need


def check_max_bytes(max_bytes) -> None:
    """max_bytes (a byte budget, or None for the default) checked: a number >= 0."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Real):
            raise TypeError(f"max_bytes must be a number of bytes (e.g. 2 * 1024**3 or 1e9), got "
                            f"{type(max_bytes).__name__} {max_bytes!r}")
        if not max_bytes >= 0:  # nan fails this too
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes!r}")


def check_attention_budget(attentions, tokens, max_bytes) -> None:
    """Refuse, before anything is copied, attention maps (Trace.from_attentions) whose float32 copies would
    exceed max_bytes (N24: 30,000 tokens made a 3.4 GB trace, 100,000 tried 37 GiB, 10,000 layers a raw
    MemoryError). The estimate is estimate_trace_bytes's for attn.probs, from L = len(attentions), the heads
    of attentions[0]'s shape and n = len(tokens); what cannot be sized here, read_attentions refuses."""
    from .config import BertConfig
    check_max_bytes(max_bytes)
    try:
        n = len(tokens)
        if hasattr(attentions, "shape"):  # one stacked array [L, ...] (array_api_strict's has no len(), no a[0])
            L, n_h = int(attentions.shape[0]), int(attentions.shape[-3])
        else:
            L = len(attentions)
            n_h = int(attentions[0].shape[-3]) if L else 0
    except (TypeError, AttributeError, IndexError, KeyError, ValueError):
        return
    if min(L, n, n_h) < 1:
        return
    config = BertConfig(num_layers=L, num_heads=n_h, hidden_size=64 * n_h, ffn_size=256 * n_h,
                        max_positions=max(512, n))
    need = estimate_trace_bytes(config, n, keep=["attn.probs"], itemsize=4)
    limit = DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
    if need > limit:
        raise TraceTooLargeError(
            f"attention maps of {L:,} layers x {n_h:,} heads over {n:,} tokens would hold {need / 2**20:,.0f} MiB "
            f"as float32, over the budget of {limit / 2**20:,.0f} MiB: pass fewer layers (a slice of the "
            "attentions) or a shorter input, or raise max_bytes=.")


class Recorder:
    """Records tensors by key as the forward runs; `scope('layer.3.')` prefixes the keys.

    It is also the one place where edits apply: `edits` maps full keys to functions (compiled by
    `bertviz_lite.edits`), and the edited value is what is recorded and what the forward goes on with.
    """

    def __init__(self, xp, *, keep=None, dtype=None, store: dict | None = None, prefix: str = "",
                 edits: dict | None = None, edited: list | None = None, overflowed: list | None = None):
        self.xp = xp
        self.keep = compile_patterns(keep)
        self.dtype = dtype  # storage dtype (an xp dtype) or None for the compute dtype
        self.store = {} if store is None else store
        self.prefix = prefix
        self.edits = edits or {}  # full key -> callable(key, value) -> value (checked)
        self.edited = [] if edited is None else edited  # (key, description), in forward order
        # (key, a 0-d flag: a finite value became +-inf when stored), read once after the forward (no sync per key)
        self.overflowed = [] if overflowed is None else overflowed
        self.on_scope = None  # called with each scope the forward opens (a layer): a progress bar's step

    def __call__(self, name: str, value):
        """Record value under prefix+name and return it (edited, if an edit names the key)."""
        key = self.prefix + name
        edit = self.edits.get(key)
        if edit is not None:
            value = edit(key, value)
            self.edited.append((key, edit.description))
        if wants(key, self.keep):
            if key in self.store:
                raise RuntimeError(f"trace key {key!r} recorded twice")
            stored = value if self.dtype is None or value.dtype == self.dtype else self._narrowed(key, value)
            if self.keep is not None and stored is value and backend.part_of_larger(value):
                # only some keys kept: a view would hold the whole buffer (attn.q alone: q, k and v), more
                # than the budget counts for the key; every key kept, the buffer is the trace's anyway
                stored = self.xp.asarray(value, copy=True)
            self.store[key] = stored
        return value

    def _narrowed(self, key: str, value):
        """value in the storage dtype; a finite value it cannot hold (float16: above 65,504) becomes +-inf, and
        the key is noted (the forward goes on with `value`, so only what is stored is changed)."""
        xp = self.xp
        fused = kernels.narrowed(value, self.dtype)  # on cupy, float32 to float16: one launch
        if fused is not None:
            stored, flag = fused
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "overflow encountered in cast": named by key
                stored = xp.astype(value, self.dtype)
            flag = xp.any(xp.isinf(stored) & xp.isfinite(value))
        self.overflowed.append((key, flag))
        return stored

    def warn_overflow(self, stacklevel: int = 2) -> None:
        """One RuntimeWarning naming the keys whose values the storage dtype could not hold, if any."""
        keys = [key for key, flag in self.overflowed if bool(flag)]
        if keys:
            warnings.warn(
                f"{len(keys)} recorded tensor(s) hold values above 65,504, which float16 stores as +-inf: "
                f"{', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}. The forward ran in float32, so nothing "
                "else changed; trace with dtype='float32' to see these values", RuntimeWarning, stacklevel=stacklevel + 1)

    def needs(self, name: str) -> bool:
        """Whether a value under this name would be recorded or edited (else a last step need not run)."""
        key = self.prefix + name
        return key in self.edits or wants(key, self.keep)

    def scope(self, prefix: str) -> "Recorder":
        if self.on_scope is not None:
            self.on_scope(prefix)
        return Recorder(self.xp, keep=self.keep, dtype=self.dtype, store=self.store,
                        prefix=self.prefix + prefix, edits=self.edits, edited=self.edited, overflowed=self.overflowed)


class NullRecorder(Recorder):
    """Records nothing and edits nothing (keep=[] with no edits): the forward at full speed."""

    def __call__(self, name, value):
        return value

    def needs(self, name):
        return False

    def scope(self, prefix):
        if self.on_scope is not None:
            self.on_scope(prefix)
        return self


# ------------------------------------------------------------------------------------------
# the trace
# ------------------------------------------------------------------------------------------


BATCH_AXIS = "batch"  # the leading axis of every key of a trace with a batch axis (schema.AXES names it)


class Trace:
    """The recorded forward pass of one input, or of a batch of B inputs padded to the same n tokens.

    `tr["layer.3.attn.probs"]`, `tr.get("attn.probs", layer=3)`, `tr.stack("attn.probs")`
    -> (layer, head, query, key), `tr.keys()`, `tr.axes(key)`, `tr.shapes()`, `tr.tokens`,
    `tr.to_host()`. A trace holds arrays and facts about the input, never the model.

    `tr.has_batch` says whether every tensor has a leading batch axis (TransformerLens's
    ActivationCache(has_batch_dim)): `model.trace_batch(texts)` returns one, `model.trace(text)` not.
    With a batch axis, `axes`, `get`, `stack` and `shapes` name and keep it, the facts about the input
    (`tokens`, `ids`, `segments`, `mask`, `spans`, `texts`, `n_real`) hold one entry per input,
    `len(tr)` is B, iterating gives the inputs, and `tr[i]` (or `tr.example(i)`) is input i as a trace
    without a batch axis and without its padding. Without one, `len(tr)` and iterating count the keys.
    """

    def __init__(self, values: dict, *, config, tokens: Sequence, ids: Sequence, segments: Sequence,
                 mask: Sequence, spans=None, texts=("",), model_name: str = "", backend_name: str = "numpy",
                 keep=None, edits=(), nominal=(), has_batch: bool = False):
        self._values = dict(values)
        self.config = config
        self.has_batch = bool(has_batch)
        if self.has_batch:  # one entry per input: tuples of tuples, texts one tuple (text[, pair]) per input
            self.tokens = tuple(tuple(t) for t in tokens)
            self.ids = tuple(tuple(int(i) for i in row) for row in ids)
            self.segments = tuple(tuple(int(s) for s in row) for row in segments)
            self.mask = tuple(tuple(int(m) for m in row) for row in mask)
            self.spans = tuple(tuple(row) for row in spans) if spans is not None else \
                tuple((None,) * len(t) for t in self.tokens)
            self.texts = tuple(tuple(t) for t in texts)
        else:
            self.tokens = tuple(tokens)
            self.ids = tuple(int(i) for i in ids)
            self.segments = tuple(int(s) for s in segments)
            self.mask = tuple(int(m) for m in mask)
            self.spans = tuple(spans) if spans is not None else (None,) * len(self.tokens)
            self.texts = tuple(texts)
        self.model_name = model_name
        self.backend = backend_name
        self.keep = keep
        self.edits = tuple(edits)  # ((key, what was done), ...) in forward order; () for a plain run
        # the config sizes nobody measured (Trace.from_attentions knows L and n_h only): views leave them out
        self.nominal = tuple(nominal)

    @classmethod
    def from_attentions(cls, attentions, tokens: Sequence[str], *, sentence_b_start: int | None = None,
                        batch_index: int | None = None, config=None, model_name: str = "attention",
                        max_bytes: float | None = None) -> "Trace":
        """A trace holding only attention maps computed elsewhere, for every attention view.

        attentions: Hugging Face's layout, `outputs.attentions` of a model run with
        output_attentions=True: a sequence of L arrays [batch, heads, n, n] (or [heads, n, n]),
        of any framework (torch tensors that track gradients on any device, TensorFlow, JAX, CuPy:
        `foreign.host_numpy` detaches them and moves them to the host).
        tokens: the n token strings. sentence_b_start: where sentence B starts (bertviz's
        argument), for the pair filters. batch_index: which example of a batch (a batch of more than
        one without it is refused, naming the choice). The trace records `layer.{l}.attn.probs` only, so the
        views that need more (neuron, step, compare of other keys) say what is missing.
        max_bytes: the budget for the float32 maps the trace holds (default 2 GiB, as trace()'s):
        attentions over it are refused before anything is copied, with the estimate.

            out = hf_model(**enc, output_attentions=True)
            tr = bv.Trace.from_attentions(out.attentions, tokens)
        """
        from .config import BertConfig
        from .foreign import read_attentions
        check_attention_budget(attentions, tokens, max_bytes)
        maps, tokens, sentence_b_start = read_attentions(attentions, tokens, sentence_b_start=sentence_b_start,
                                                         batch_index=batch_index)
        n = len(tokens)
        n_h = maps[0].shape[0]
        nominal = ()
        if config is None:  # the maps fix only L and n_h; H and d_ffnn are nominal (64-wide heads, as BERT's):
            # the attention views never read them, and the page's header leaves them out (trace.nominal)
            config = BertConfig(num_layers=len(maps), num_heads=n_h, hidden_size=64 * n_h, ffn_size=256 * n_h,
                                max_positions=max(512, n))
            nominal = ("H", "d_k", "d_ffnn", "N_V")
        elif (config.num_layers, config.num_heads) != (len(maps), n_h):
            raise ValueError(f"config has {config.num_layers} layers x {config.num_heads} heads; "
                             f"attentions hold {len(maps)} x {n_h}")
        segments = [0] * n if sentence_b_start is None else [int(i >= sentence_b_start) for i in range(n)]
        pads = families.spellings("[PAD]", None if nominal else config)  # any family's [PAD] without a config
        mask = [int(t not in pads) for t in tokens]
        if not any(mask):
            raise ValueError(f"tokens are all padding ({tokens[0]!r} x {n}): there is no real token to show; pass "
                             "the tokens of the input, [CLS] and [SEP] included")
        values = {schema.full_key("attn.probs", layer): m for layer, m in enumerate(maps)}
        texts = (" ".join(tokens),)
        return cls(values, config=config, tokens=tokens, ids=[0] * n, segments=segments, mask=mask, texts=texts,
                   model_name=model_name, keep=("attn.probs",), nominal=nominal)

    def is_edited(self, key: str) -> bool:
        """Whether an edit or a patch changed this key in the run that made the trace."""
        return any(k == key for k, _ in self.edits)

    # --- facts about the input
    @property
    def n(self) -> int:
        """Tokens in the input, padding included (the same for every input of a batch)."""
        return len(self.tokens[0]) if self.has_batch else len(self.tokens)

    @property
    def n_real(self):
        """Tokens that are not [PAD] (with a batch axis: a tuple, one count per input)."""
        return tuple(sum(m) for m in self.mask) if self.has_batch else sum(self.mask)

    @property
    def num_layers(self) -> int:
        return self.config.num_layers

    @property
    def labels(self) -> tuple[str, ...]:
        """The task head's label names, in the order of head.logits' last axis (config.json's id2label)."""
        return self.config.labels

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    @property
    def has_pair(self) -> bool:
        """Whether sentence B is there (with a batch axis: in any input)."""
        rows = zip(self.segments, self.mask) if self.has_batch else ((self.segments, self.mask),)
        return any(s == 1 for segs, mask in rows for s, m in zip(segs, mask) if m)

    # --- keys
    def keys(self) -> list[str]:
        """Recorded keys in forward order."""
        return list(self._values)

    def __contains__(self, key) -> bool:
        return key in self._values

    def __iter__(self):
        """The keys; with a batch axis, the inputs as traces (`tr.example(i)`, in order)."""
        if self.has_batch:
            return (self.example(i) for i in range(len(self)))
        return iter(self._values)

    def __len__(self) -> int:
        """The number of recorded keys; with a batch axis, B, the number of inputs."""
        return len(self.tokens) if self.has_batch else len(self._values)

    def _missing(self, key: str) -> KeyError:
        all_keys = schema.trace_keys(self.config.num_layers, mlm=True, head=self.config.head)
        step = schema.STEP_BY_KEY.get(key)
        if step is not None and step.scope == "layer":  # a step name without its layer, as tr.get takes it
            L = self.config.num_layers
            return KeyError(f"{key!r} is recorded once per layer: use tr['layer.0.{key}'] (layers 0..{L - 1}), "
                            f"tr.get({key!r}, layer=0) (layer=-1: the last) or tr.stack({key!r}) for every layer")
        if key in all_keys:
            if key == "mlm.logits":
                return KeyError("'mlm.logits' is recorded only for models with a masked-lm head "
                                "(a BertForPreTraining / BertForMaskedLM checkpoint, or load('random', mlm=True))")
            return KeyError(f"{key!r} was not recorded: this trace was made with keep={self.keep!r}")
        near = difflib.get_close_matches(key, all_keys, n=4, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(k) for k in near)}?" if near else ""
        return KeyError(f"unknown trace key {key!r}{hint} (tr.keys() lists every recorded key)")

    def __getitem__(self, key: str):
        """tr['layer.0.attn.probs'] -> the recorded array; with a batch axis, tr[i] -> input i (`example`)."""
        if not isinstance(key, str):
            if self.has_batch:
                return self.example(key)  # an int (numpy's too); anything else is refused there
            raise TypeError(f"trace keys are strings like 'layer.0.attn.probs', got {type(key).__name__}")
        try:
            return self._values[key]
        except KeyError:
            raise self._missing(key) from None

    def check_layer(self, layer: int) -> int:
        L = self.config.num_layers
        layer = as_int(layer, f"layer (0..{L - 1})")
        if not -L <= layer < L:
            raise OutOfRangeError(f"layer {layer} is out of range: this model has {L} layers, 0..{L - 1}")
        return layer % L

    def check_head(self, head: int) -> int:
        A = self.config.num_heads
        head = as_int(head, f"head (0..{A - 1})")
        if not -A <= head < A:
            raise OutOfRangeError(f"head {head} is out of range: this model has {A} heads, 0..{A - 1}")
        return head % A

    def full_key(self, name: str, layer: int | None = None) -> str:
        """'attn.probs', layer=3 -> 'layer.3.attn.probs' (checked)."""
        if name not in schema.STEP_BY_KEY:
            return schema.full_key(name, layer)  # __getitem__ explains
        step = schema.STEP_BY_KEY[name]
        if step.scope == "layer":
            if layer is None:
                raise TypeError(f"{name!r} is recorded once per layer: pass layer= (0..{self.config.num_layers - 1})"
                                f" or use tr.stack({name!r})")
            return schema.full_key(name, self.check_layer(layer))
        if layer is not None:
            raise TypeError(f"{name!r} is not a per-layer key; call tr.get({name!r}) without layer=")
        return name

    def get(self, name: str, layer: int | None = None, head: int | None = None):
        """A tensor by step name and layer; head= selects one head of a per-head tensor.

        name: a step name ('attn.probs', 'ffn.act', 'embed.ln', 'pooler.out'; `bv.STEPS` lists them) or a
        full key ('layer.3.attn.probs', as `tr.keys()` lists them). layer: which layer a per-layer step is
        read from, 0..L-1, or negative from the end (-1: the last layer); needed for per-layer steps, refused
        for the others. head: one head of a per-head step (0..n_h-1, or negative from the end), which drops
        the head axis.

        Axes (`tr.axes(key)` names them): attn.q / attn.k / attn.v [head, token, head_dim]; attn.scores and
        attn.probs [head, query, key]; attn.context [head, token, head_dim]; the residual stream and the
        LayerNorms [token, hidden]; ffn.up / ffn.act [token, ffn]; pooler.out [hidden]; mlm.logits
        [token, vocab]. `tr.get("attn.probs", layer=2, head=5)` is one (query, key) map;
        `tr.stack("attn.probs")` gives every layer at once, (layer, head, query, key).
        """
        value = self[self.full_key(name, layer)]
        if head is not None:
            if self.axes(self.full_key(name, layer))[self.has_batch] != "head":
                raise TypeError(f"{name!r} has no head axis; its axes are {self.axes(self.full_key(name, layer))}")
            value = value[(slice(None),) * self.has_batch + (self.check_head(head), Ellipsis)]
        return value

    def axes(self, key: str) -> tuple[str, ...]:
        """Named axes of a key ('layer.3.attn.probs' -> ('head', 'query', 'key'); ('batch', 'head', ...)
        with a batch axis)."""
        layer, step = schema.split_key(key)
        if step not in schema.STEP_BY_KEY:
            raise self._missing(key)
        return (BATCH_AXIS,) * self.has_batch + schema.step_of(key, self.config).axes

    def stack(self, name: str):
        """A per-layer step for every layer: axes ('layer',) + the step's axes."""
        step = schema.STEP_BY_KEY.get(name)
        if step is None or step.scope != "layer":
            per_layer = [s.key for s in schema.LAYER_STEPS]
            near = difflib.get_close_matches(name, per_layer, n=3)
            raise KeyError(f"stack() takes a per-layer step name such as 'attn.probs', got {name!r}"
                           + (f"; did you mean {', '.join(map(repr, near))}?" if near else ""))
        arrays = [self[schema.full_key(name, layer)] for layer in range(self.config.num_layers)]
        xp = backend.namespace_of(arrays[0])
        return xp.stack(arrays, axis=int(self.has_batch))  # (layer, ...) or (batch, layer, ...)

    def stack_axes(self, name: str) -> tuple[str, ...]:
        return (BATCH_AXIS,) * self.has_batch + ("layer",) + schema.STEP_BY_KEY[name].axes

    # --- shapes and memory
    def shapes(self) -> Table:
        """Every recorded key with its shape, named axes, and formula (Unicode, as it prints; the
        LaTeX is `bv.STEPS`' formula)."""
        rows = []
        edited = dict(self.edits)
        for key, v in self._values.items():
            formula = plain_formula(schema.formula_of(key, self.config), html=False, unicode=True)
            row = (key, tuple(v.shape), " x ".join(self.axes(key)), formula)
            rows.append(row + (edited.get(key, ""),) if edited else row)
        columns = ("key", "shape", "axes", "formula") + (("edited",) if edited else ())
        note = f", {len(edited)} edited" if edited else ""
        what = f"batch of {len(self)} inputs x {self.n} tokens" if self.has_batch else f"trace of {self.n} tokens"
        return Table(columns, rows, title=f"{what}, {len(rows)} tensors{note}, {self.nbytes / 2**20:,.1f} MiB")

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors held."""
        return sum(int(v.size) * backend.itemsize(v) for v in self._values.values())

    def to_host(self) -> "Trace":
        """The same trace with every tensor as a numpy array (from a gpu, say: every key's copy queued at once
        into one pinned buffer, then one wait; backend.to_host_all)."""
        return self.replace_values(backend.to_host_all(self._values), backend_name="numpy")

    def replace_values(self, values: dict, **changes) -> "Trace":
        kw = dict(config=self.config, tokens=self.tokens, ids=self.ids, segments=self.segments, mask=self.mask,
                  spans=self.spans, texts=self.texts, model_name=self.model_name, backend_name=self.backend,
                  keep=self.keep, edits=self.edits, nominal=self.nominal, has_batch=self.has_batch)
        kw.update(changes)
        return Trace(values, **kw)

    # --- one input of a batch
    def _index(self, i: int) -> int:
        if not self.has_batch:
            raise TypeError("this trace has no batch axis (it is one input): index it by key, tr['layer.0.attn.probs']")
        B = len(self)
        i = as_int(i, "an example number")
        if not -B <= i < B:
            raise OutOfRangeError(f"example {i} is out of range: this batch holds {B} inputs, 0..{B - 1}")
        return i % B

    def example(self, i: int, *, keep_padding: bool = False) -> "Trace":
        """Input i of a trace with a batch axis, as a trace without one and without its padding (a copy:
        it keeps no batch array alive). keep_padding=True keeps all n tokens (what model.trace returns for
        its batch of one). Equal to `model.trace(texts[i], edits=...)` to float32 rounding."""
        i = self._index(i)
        m = self.n if keep_padding else self.n_real[i]  # padding is always at the end
        values = {}
        for key, x in self._values.items():
            if keep_padding and len(self) == 1:  # a batch of one: its only example, no copy
                values[key] = x[0, ...]
                continue
            axes = schema.step_of(key, self.config).axes
            cut = tuple(slice(0, m) if a in ("token", "query", "key") else slice(None) for a in axes)
            values[key] = backend.namespace_of(x).asarray(x[(i, *cut)], copy=True)
        return Trace(values, config=self.config, tokens=self.tokens[i][:m], ids=self.ids[i][:m],
                     segments=self.segments[i][:m], mask=self.mask[i][:m], spans=self.spans[i][:m],
                     texts=self.texts[i], model_name=self.model_name, backend_name=self.backend, keep=self.keep,
                     edits=self.edits, nominal=self.nominal)

    def _one_input(self, what: str) -> None:
        if self.has_batch:
            raise TypeError(f"{what} reads one input; this trace has a batch axis of {len(self)} inputs: take one "
                            "with tr[i] (or tr.example(i)), or iterate over tr")

    @property
    def real_positions(self) -> list[int]:
        """Positions (in the padded input) of the real tokens, in order: the one place [PAD] is dropped."""
        self._one_input("real_positions")
        return [i for i, m in enumerate(self.mask) if m]

    def real(self, x, axes: Iterable[str]):
        """x with padded positions removed on its token/query/key axes (for display and comparisons)."""
        keep_idx = self.real_positions
        if len(keep_idx) == self.n:
            return x
        xp = backend.namespace_of(x)
        idx = xp.asarray(keep_idx)
        for i, a in enumerate(axes):
            if a in ("token", "query", "key"):
                x = xp.take(x, idx, axis=i)
        return x

    def __repr__(self) -> str:
        edited = f", {len(self.edits)} edited" if self.edits else ""
        if self.has_batch:
            return (f"<Trace {self.model_name or 'bert'}: batch of {len(self)} inputs x {self.n} tokens "
                    f"({min(self.n_real)}-{max(self.n_real)} real), {len(self._values)} tensors{edited}, "
                    f"{self.nbytes / 2**20:,.1f} MiB on {self.backend}>")
        return (f"<Trace {self.model_name or 'bert'}: {self.n} tokens ({self.n_real} real), "
                f"{len(self)} tensors{edited}, {self.nbytes / 2**20:,.1f} MiB on {self.backend}>")
