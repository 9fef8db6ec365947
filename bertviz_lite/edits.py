"""Change a step of the forward pass (to compare two runs, see `bertviz_lite.comparison`).

An edit is a function f(x) -> x' for a trace key: the recorder applies it where the value is
computed, the rest of the forward pass uses x', and the trace records x' (TransformerLens's
hooks, without the model object). Edits are given as `{pattern: f}`, with patterns as in
`keep=` ('layer.3.attn.context', 'attn.probs' for every layer, 'layer.*.ffn.act'):

    tr = model.trace(text, edits=bv.ablate(heads={3: [5]}))          # head 5 of layer 3 says nothing
    tr = model.trace(text, edits=bv.scale("ffn.act", 0.5) | bv.ablate(heads={0: [1, 2]}, how="mean"))
    tr = model.trace(text, edits={"layer.2.attn.probs": lambda a: a ** 2 / (a ** 2).sum(-1, keepdims=True)})
    tr_b = model.trace(text_b, patch_from=tr_a, patch=["layer.4.ffn.ln"])  # activation patching
    print(bv.compare(tr_a, tr_b))

Every edit is checked where it applies: the same shape and dtype as the value it replaces, and
no NaN or new infinities (the -inf a padding mask puts in the scores may stay). Patterns that
match no key, heads out of range, replacement values of the wrong shape and patches from a
trace of another length or model are refused before the forward pass runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import backend, schema
from .errors import EditError, as_int
from .trace import Trace, check_patterns, compile_patterns, matches


# ------------------------------------------------------------------------------------------
# edits and their builders
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What an edit may need besides the value: which key, the token mask, the model's config."""

    key: str
    mask: object  # [n] (or [batch, n]) array of the compute dtype: 1 for real tokens, 0 for [PAD]
    config: object
    xp: object


class Edit:
    """A named function for one or more trace keys. `fn(x)` or, with `needs_context`, `fn(x, ctx)`.

    `check(key, shape, config)` (optional) refuses a key before the forward runs.
    """

    def __init__(self, fn: Callable, description: str, *, needs_context: bool = False,
                 check: Callable | None = None):
        if not callable(fn):
            raise TypeError(f"an edit is a function f(x) -> array, got {fn!r}")
        self.fn, self.description, self.needs_context, self.check = fn, description, needs_context, check

    def __call__(self, x, ctx: Context):
        return self.fn(x, ctx) if self.needs_context else self.fn(x)

    def __repr__(self) -> str:
        return f"<Edit {self.description}>"


def as_edit(f) -> Edit:
    """An Edit from an Edit or a plain function f(x)."""
    if isinstance(f, Edit):
        return f
    if not callable(f):
        raise TypeError(f"edits= maps patterns to functions f(x) -> array, got {f!r}")
    name = getattr(f, "__name__", "") or type(f).__name__
    return Edit(f, "custom edit" if name == "<lambda>" else f"custom edit {name}()")


class Edits(dict):
    """Pattern -> edit. Combine with `|` (edits of the same pattern run one after the other) or
    with a dict merge (`{**a, **b}`: b's edit of a pattern replaces a's)."""

    def __or__(self, other):
        if not isinstance(other, dict):
            return NotImplemented
        out = Edits(self)
        for pattern, f in other.items():
            out[pattern] = _chain(out[pattern], f) if pattern in out else f
        return out

    def __ror__(self, other):
        if not isinstance(other, dict):
            return NotImplemented
        return Edits(other) | self

    def __repr__(self) -> str:
        return "Edits(" + ", ".join(f"{p!r}: {as_edit(f).description}" for p, f in self.items()) + ")"


def _chain(first, second) -> Edit:
    a, b = as_edit(first), as_edit(second)

    def both(x, ctx):
        return b(a(x, ctx), ctx)

    def check(key, shape, config):
        for e in (a, b):
            if e.check is not None:
                e.check(key, shape, config)

    return Edit(both, f"{a.description}, then {b.description}", needs_context=True, check=check)


def _whole(value, what: str) -> int:
    """A non-negative whole number (numpy integers too); bools, floats, strings and negatives are refused."""
    i = as_int(value, what)
    if i < 0:
        raise ValueError(f"{what} is {i}: count layers and heads from 0 (negative numbers are not taken here)")
    return i


def _head_list(layer: int, heads) -> tuple[int, ...]:
    if isinstance(heads, str) or not isinstance(heads, Iterable):
        heads = [heads]
    return tuple(dict.fromkeys(_whole(h, f"ablate(heads={{{layer}: ...}}): a head") for h in heads))


def ablate(heads: dict, how: str = "zero") -> Edits:
    """Silence attention heads: their slice of attn.context (A_h V_h, what W^O reads from that head)
    becomes zero (how='zero') or its mean over this input's real tokens (how='mean': every token
    gets the head's average output on this sentence, so what the head says differently at each
    position is gone). For a mean over reference data, use replace() or your own edit.

    heads maps a layer to the heads to silence there: `ablate(heads={3: [5], 0: [1, 2]})`.
    """
    if how not in ("zero", "mean"):
        raise ValueError(f"how={how!r}: ablate silences a head with how='zero' or how='mean'")
    if not isinstance(heads, dict):
        raise TypeError(f"ablate(heads=...) takes a dict such as {{3: [5]}} (layer -> heads), got {heads!r}")
    edits = Edits()
    for layer, hs in heads.items():
        layer = _whole(layer, "ablate(heads=...): a layer")
        hs = _head_list(layer, hs)
        if not hs:
            raise ValueError(f"ablate(heads={{{layer}: []}}) names no head to silence in layer {layer}")
        fn = _zero_heads if how == "zero" else _mean_heads
        edits[schema.full_key("attn.context", layer)] = Edit(
            lambda x, ctx, hs=hs, fn=fn: fn(x, ctx, hs), f"{how}-ablated head{'s' if len(hs) > 1 else ''} "
            + ", ".join(map(str, hs)), needs_context=True, check=lambda key, shape, config, hs=hs: _check_heads(hs, config))
    if not edits:
        raise ValueError("ablate(heads={}) names no layer: give {layer: [head, ...]}, e.g. {3: [5]}")
    return edits


def _check_heads(heads, config) -> None:
    A = config.num_heads
    bad = [h for h in heads if not 0 <= h < A]
    if bad:
        raise EditError(f"ablate: head(s) {bad} out of range: this model has {A} heads, 0..{A - 1}")


def _head_selector(x, heads, xp):
    """[A, 1, 1] booleans, True for the heads named (the head axis is third from the end)."""
    A = x.shape[-3]
    return xp.reshape(xp.asarray([h in heads for h in range(A)]), (A, 1, 1))


def _zero_heads(x, ctx: Context, heads):
    xp = ctx.xp  # [.., n_h, n, d]
    return xp.where(_head_selector(x, heads, xp), xp.zeros_like(x), x)


def _mean_heads(x, ctx: Context, heads):
    xp = ctx.xp  # [.., n_h, n, d]; the mean over real tokens, put in every row
    m = xp.reshape(ctx.mask, ctx.mask.shape[:-1] + (1, ctx.mask.shape[-1], 1))  # [.., 1, n, 1]
    mean = xp.sum(x * m, axis=-2, keepdims=True) / xp.sum(m, axis=-2, keepdims=True)  # [.., n_h, 1, d]
    return xp.where(_head_selector(x, heads, xp), mean + xp.zeros_like(x), x)


def replace(key: str, value) -> Edits:
    """Put `value` in place of a step (e.g. a hand-made attention map); numpy values are moved to
    the model's backend and dtype. Its shape must be the key's (checked before running)."""
    compile_patterns(key, "replace()")
    host = backend.host_real_array(value, f"replace({key!r}, value): value")

    def put(x, ctx):
        return ctx.xp.astype(backend.from_host(host, ctx.xp), x.dtype)

    def check(k, shape, config):
        if tuple(host.shape) != tuple(shape):
            raise EditError(f"replace({key!r}): the value has shape {tuple(host.shape)}, but {k} has shape "
                            f"{tuple(shape)} ({' x '.join(schema.step_of(k, config).axes)}) for this input")

    return Edits({key: Edit(put, f"replaced by a given {'x'.join(map(str, host.shape))} array",
                            needs_context=True, check=check)})


def scale(pattern: str, factor: float) -> Edits:
    """Multiply a step by a number: `scale('attn.out', 0)` removes every layer's attention output."""
    compile_patterns(pattern, "scale()")
    try:
        if isinstance(factor, (bool, str, bytes)):
            raise TypeError
        f = float(factor)  # python, numpy or 0-d array numbers; x * f keeps x's dtype
    except (TypeError, ValueError):
        f = math.nan
    if not math.isfinite(f):
        raise TypeError(f"scale({pattern!r}, factor): factor must be a finite real number, got {factor!r}")

    def times(x, ctx):
        xp = ctx.xp  # infinities (the padding mask's -inf in the scores) stay as they are
        finite = xp.isfinite(x)
        return xp.where(finite, xp.where(finite, x, xp.zeros_like(x)) * f, x)

    return Edits({pattern: Edit(times, f"scaled by {f:g}", needs_context=True)})


# ------------------------------------------------------------------------------------------
# compiling edits for one run (what model.trace calls)
# ------------------------------------------------------------------------------------------


class KeyEdit:
    """The edits of one key, checked: what the recorder calls with the batched value [B, ...].

    Each edit sees one input at a time, with the shape a single trace has (the same function
    gives `btr[i] == model.trace(texts[i], edits=...)`), as a read-only view (a copy on backends
    without one), so an edit cannot change its input, nor through it a key recorded earlier.
    """

    def __init__(self, edits: list[Edit], masks, config, xp):
        self.edits, self.masks, self.config, self.xp = edits, masks, config, xp  # masks: [B, n]
        self.description = "; ".join(e.description for e in edits)

    def __call__(self, key: str, x):
        outs = [self._one(key, x[b, ...], b) for b in range(x.shape[0])]
        return self.xp.expand_dims(outs[0], axis=0) if len(outs) == 1 else self.xp.stack(outs, axis=0)

    def _one(self, key: str, x, b: int):
        ctx = Context(key, self.masks[b, ...], self.config, self.xp)
        for e in self.edits:
            given = backend.read_only(x)
            # where the input already holds an infinity (the padding mask's -inf), taken before the edit runs:
            # comparing y with x afterwards would compare an edit's in-place writes with themselves
            inf_before = self.xp.isinf(x)
            try:
                y = e(given, ctx)
            except EditError:
                raise
            except Exception as err:
                hint = ""
                if isinstance(err, TypeError) and "argument" in str(err):
                    hint = (" (an edit is called as f(x) with the tensor alone; for f(x, ctx) with the key, the "
                            "token mask and the config, wrap it: bv.Edit(f, 'what it does', needs_context=True))")
                elif isinstance(err, ValueError) and "read-only" in str(err):
                    hint = (" (an edit gets a read-only view: it must not change its input in place; return a new "
                            "array, e.g. y = x.copy(); y[...] = ...; return y)")
                raise EditError(f"the edit of {key!r} ({e.description}) raised {type(err).__name__}: {err}{hint}") \
                    from err
            if getattr(getattr(given, "flags", None), "writeable", False):  # numpy's read-only view, unlocked
                raise EditError(f"the edit of {key!r} ({e.description}) set its input's flags.writeable = True: "
                                "an edit must not write into the tensor it is given (it is the one the forward "
                                "pass computed); return a new array, e.g. y = x.copy(); y[...] = ...; return y")
            _check_result(key, e, x, y, inf_before)
            x = x if y is given else y  # an edit that returns its input unchanged: keep the writable original
        return x


def _check_result(key: str, e: Edit, x, y, inf_before) -> None:
    what = f"the edit of {key!r} ({e.description})"
    if type(y) is not type(x):
        raise EditError(f"{what} returned a {type(y).__name__}; it must return an array like its input "
                        f"({type(x).__module__}.{type(x).__name__}, shape {tuple(x.shape)}, {x.dtype})")
    if tuple(y.shape) != tuple(x.shape):
        raise EditError(f"{what} returned shape {tuple(y.shape)}; expected {tuple(x.shape)} "
                        f"({' x '.join(schema.step_of(key).axes)})")
    if y.dtype != x.dtype:
        raise EditError(f"{what} returned dtype {y.dtype}; expected {x.dtype} (cast it back, e.g. y.astype(x.dtype))")
    xp = backend.namespace_of(y)
    # NaN never; an infinity only where the input had the same one (the padding mask's -inf in the scores)
    nan = int(xp.sum(xp.astype(xp.isnan(y), xp.int32)))
    inf = int(xp.sum(xp.astype(xp.isinf(y) & (~inf_before | (y != x)), xp.int32)))
    if nan or inf:
        found = " and ".join(f"{c} {w}" for c, w in ((nan, "NaN"), (inf, "new infinite value(s)")) if c)
        hint = " (to keep a query from a key, add a large negative number such as -1e4 to attn.scores, or put 0 " \
               "in attn.probs and renormalise)" if key.endswith("attn.scores") else ""
        raise EditError(f"{what} produced {found}; edits must keep the values finite{hint}")


def _patch_edits(patch_from, patch, model, n: int, keys: list[str], masks) -> dict:
    if not isinstance(patch_from, Trace):
        raise TypeError(f"patch_from= takes a Trace (from model.trace), got {type(patch_from).__name__}")
    patterns = compile_patterns(patch, "patch=")
    if not patterns:
        raise ValueError("patch_from= needs patch=[patterns]: the keys to take from that trace")
    check_patterns(patterns, keys, "patch=")
    c, pc = model.config, patch_from.config
    if patch_from.model_name != model.name or (pc.num_layers, pc.hidden_size, pc.num_heads, pc.ffn_size) != \
            (c.num_layers, c.hidden_size, c.num_heads, c.ffn_size):
        raise EditError(f"patch_from= is a trace of {patch_from.model_name!r} (L={pc.num_layers}, H={pc.hidden_size}); "
                        f"this model is {model.name!r} (L={c.num_layers}, H={c.hidden_size}): patch between runs of "
                        "one model")
    if patch_from.n != n:
        raise EditError(f"patch_from= has {patch_from.n} tokens, this input has {n}: activation patching needs "
                        "inputs of the same token count (pad both with pad_to=, or pick sentences of equal length)")
    for i, mask in enumerate(masks):
        if tuple(patch_from.mask) != tuple(int(m) for m in mask):
            which = "this input" if len(masks) == 1 else f"texts[{i}]"
            raise EditError(f"patch_from= has another padding mask than {which} "
                            f"({sum(patch_from.mask)} vs {sum(int(m) for m in mask)} real tokens): pad both the same way")
    out = {}
    for key in keys:
        if not any(matches(key, p) for p in patterns):
            continue
        if key not in patch_from:
            raise EditError(f"patch=: {key!r} is not in patch_from (it was traced with keep={patch_from.keep!r}); "
                            "trace it with that key recorded")
        value = patch_from[key]

        def take(x, ctx, value=value):
            v = backend.from_host(backend.to_host(value), ctx.xp)
            return ctx.xp.astype(v, x.dtype)

        out[key] = Edit(take, f"patched from {patch_from.texts[0][:40]!r}", needs_context=True)
    return out


def compile_edits(edits, patch_from, patch, model, n: int, keys: list[str], masks, xp) -> dict:
    """{full key: KeyEdit} for one run, every pattern and every check done before the forward.
    masks: each input's [n] list of 0/1 (one list for a single trace)."""
    per_key: dict[str, list[Edit]] = {}
    if patch_from is not None or patch is not None:
        if patch_from is None:
            raise ValueError("patch= names keys to take from another trace: pass that trace as patch_from=")
        for key, e in _patch_edits(patch_from, patch, model, n, keys, masks).items():
            per_key.setdefault(key, []).append(e)
    if edits:
        if not isinstance(edits, dict):
            raise TypeError("edits= takes {pattern: f} (or bv.ablate(...), bv.replace(...), bv.scale(...)), "
                            f"got {type(edits).__name__}")
        patterns = compile_patterns(tuple(edits), "edits=")
        check_patterns(patterns, keys, "edits=")
        for pattern, f in edits.items():
            e = as_edit(f)
            for key in keys:
                if matches(key, pattern):
                    if e.check is not None:
                        e.check(key, schema.shape_of(key, model.config, n), model.config)
                    per_key.setdefault(key, []).append(e)
    if not per_key:
        return {}
    mask_arr = xp.asarray(masks, dtype=model.weights["embed.W_T"].dtype)  # [B, n]
    return {key: KeyEdit(es, mask_arr, model.config, xp) for key, es in per_key.items()}
