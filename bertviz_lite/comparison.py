"""Where two runs differ, key by key: `bv.compare(tr_a, tr_b)` (a run and its edited twin, or two models
on the same text: `compare(minilm.trace(s), minilm_mlm.trace(s)).layers()` says which layers moved).

Per key: max |a - b|, the relative change ||a - b|| / ||a||, and the mean cosine between a and b
along the last axis (`analysis.cosine`); with a masked-LM head, how the top 5 at each [MASK] changed.
"""

from __future__ import annotations

from . import backend, families
from .analysis import cosine
from .errors import EditError
from .table import Table
from .trace import Trace, check_patterns, compile_patterns, matches




class Comparison(Table):
    """bv.compare's table, plus how the masked-LM's top 5 changed at each [MASK] (`mask_changes`)."""

    mask_changes: list = []

    @staticmethod
    def _fmt(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else Table._fmt(v)

    def changed(self, above: float = 0.0) -> "Comparison":
        """Only the rows whose max |a - b| is above `above`."""
        out = Comparison(self.columns, [r for r in self.rows if r[1] > above], title=self.title)
        out.mask_changes = self.mask_changes
        return out

    def layers(self) -> Table:
        """Per layer, the largest relative change of any of its keys (and of the embeddings and heads):
        which layers moved. Between load("minilm") and load("minilm-mlm") the frozen layers read 0."""
        from .schema import split_key
        moved: dict = {}
        for key, max_abs, rel, _ in self.rows:
            layer, _step = split_key(key)
            where = layer if layer is not None else "embeddings" if key.startswith("embed.") else "heads"
            old = moved.get(where, (0.0, 0.0))
            moved[where] = (max(old[0], rel), max(old[1], max_abs))
        rows = [(w, r, a) for w, (r, a) in moved.items()]
        return Table(("layer", "max_rel_change", "max_abs_diff"), rows, title=f"{self.title}: by layer")

    def __str__(self) -> str:
        out = Table.__str__(self)
        for pos, a, b in self.mask_changes:
            out += f"\n[MASK] at {pos}: top-5 {', '.join(a)}  ->  {', '.join(b)}"
        return out

    __repr__ = __str__


def compare(tr_a: Trace, tr_b: Trace, *, keys=None, model=None) -> Comparison:
    """Where two runs differ, key by key in forward order (the keys both recorded).

    Columns: max |a - b|; relative change ||a - b|| / ||a||; mean cosine between a and b along
    the last axis (per token, and per head where there is a head axis). Padded positions are
    left out when both traces share one mask; entries infinite in either (the padding mask's
    -inf in the scores) are left out of all three. With a masked-LM head in both, `mask_changes`
    lists the top 5 at each [MASK] before and after (as token strings when model= is given).
    keys= takes patterns as in keep= to compare only some steps; `.changed()` keeps the rows that moved.
    """
    for t, name in ((tr_a, "tr_a"), (tr_b, "tr_b")):
        if not isinstance(t, Trace):
            raise TypeError(f"compare() takes two traces; {name} is a {type(t).__name__}")
    shared = [k for k in tr_a.keys() if k in tr_b]
    if keys is not None:
        patterns = compile_patterns(keys, "compare(keys=)")
        check_patterns(patterns, shared, "compare(keys=)")
        shared = [k for k in shared if any(matches(k, p) for p in patterns)]
    if not shared:
        raise EditError("the two traces share no recorded key (see tr.keys() and keep=)")
    if tr_a.model_name != tr_b.model_name and tr_a.ids != tr_b.ids:
        raise EditError(f"compare() across two models ({tr_a.model_name} and {tr_b.model_name}) needs the same "
                        f"tokens in both traces: trace the same text with each model")
    same_mask = tr_a.mask == tr_b.mask
    rows = []
    for key in shared:
        a, b = tr_a[key], tr_b[key]
        if tuple(a.shape) != tuple(b.shape):
            raise EditError(f"{key!r} has shape {tuple(a.shape)} in tr_a and {tuple(b.shape)} in tr_b: compare runs "
                            "of one model on inputs of the same token count")
        if same_mask:
            axes = tr_a.axes(key)
            a, b = tr_a.real(a, axes), tr_a.real(b, axes)
        rows.append((key,) + _differences(backend.to_host(a), backend.to_host(b)))
    title = f"{tr_a.model_name}: {_label(tr_a)} vs {_label(tr_b)}" if tr_a.model_name == tr_b.model_name else \
        f"{_label(tr_a)}: {tr_a.model_name} vs {tr_b.model_name}"  # two models on the same text
    out = Comparison(("key", "max_abs_diff", "rel_change", "mean_cos"), rows, title=title)
    out.mask_changes = _mask_changes(tr_a, tr_b, model)
    return out


def _differences(a, b) -> tuple[float, float, float]:
    """(max |a - b|, ||a - b|| / ||a||, mean cosine along the last axis), in float64 on the host."""
    hx = backend.namespace_of(a)
    a, b = hx.astype(a, hx.float64), hx.astype(b, hx.float64)
    finite = hx.isfinite(a) & hx.isfinite(b)
    zero = hx.zeros_like(a)
    a, b = hx.where(finite, a, zero), hx.where(finite, b, zero)
    d = a - b
    norm_a = float(hx.linalg.vector_norm(a))
    cos = cosine(a, b, hx)
    return (float(hx.max(hx.abs(d))) if d.size else 0.0,
            float(hx.linalg.vector_norm(d)) / norm_a if norm_a > 0 else 0.0, float(hx.mean(cos)))


def _label(tr: Trace) -> str:
    text = repr(tr.texts[0][:30])
    if not tr.edits:
        return text
    keys = [k for k, _ in tr.edits]
    return f"{text} (edited: {', '.join(keys[:3])}{'...' if len(keys) > 3 else ''})"


def _mask_changes(tr_a: Trace, tr_b: Trace, model) -> list:
    if "mlm.logits" not in tr_a or "mlm.logits" not in tr_b:
        return []
    name = model.tokenizer.id_to_token if model is not None and model.tokenizer is not None else str
    la, lb = backend.to_host(tr_a["mlm.logits"]), backend.to_host(tr_b["mlm.logits"])
    hx = backend.namespace_of(la)
    out = []
    mask = families.special_tokens(tr_a.config).mask  # [MASK]; RoBERTa's <mask>
    for pos, tok in enumerate(tr_a.tokens):
        if tok == mask and pos < lb.shape[0]:
            top_a = hx.argsort(la[pos], descending=True)[:5]
            top_b = hx.argsort(lb[pos], descending=True)[:5]
            out.append((pos, [name(int(i)) for i in top_a], [name(int(i)) for i in top_b]))
    return out
