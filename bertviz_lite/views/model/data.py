"""The view model: (trace, view, arguments) -> view data, the one thing every renderer draws from.

    from bertviz_lite.views.model import data
    vd = data.view_data(tr, "attention", layer=2, kind="probs")
    vd["arrays"]["maps"]          # (head, query, key) over the real tokens, float32
    vd["clim"]                    # per head: the colour scale's [low, high] (decided in `colour_scale`)

One vocabulary of views (`VIEWS`): attention, model, head, token, neuron, step, params, compare.
Each builder returns a plain dict: JSON-ready facts (titles, labels, units, colour scale) plus
`arrays`, a dict of numpy arrays. `codec.py` packs it into binary payloads for the front-end
(the anywidget explorer and the exported page run the same `assets/app.js`); the plotly
builders (`figures.py`) and the matplotlib PNGs (`static.py`) draw from the same dicts.

Rules written once here: which tokens are real (`real_positions`), how a key is checked
(`check_key`), and which colour scale a kind of tensor gets (`colour_scale`, colours in `STOPS`):
attention weights run from white at 0 to the map's largest weight (Blues); every other
tensor (scores, activations) is symmetric around 0 (RdBu_r), clipped at the 99.5th
percentile of |x| when a few outliers would wash the rest out; differences between two
traces are symmetric around 0 on their own scale (PuOr_r).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
import re

import numpy as np

from ... import schema
from ...backend import to_host
from ...errors import BertVizError
from ...foreign import join_tokens, prettify_token, shorten
from ...params import ParamLedger, family_ledgers, group_of, ledger_for_config, reconcile
from ...schema_text import plain_formula
from . import limits, records
from .panels import HEAD_COLOURS, PAIR_FILTERS, layouts
from .panels import _fmt as number_text

SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair alone: no font draws it, UTF-8 cannot encode it


def no_surrogates(x):
    """x (a text, or dicts, lists and tuples of them) with every lone surrogate shown as U+FFFD: a token decoded
    with errors='surrogateescape' holds one, and a picture or a saved notebook of it would fail."""
    if isinstance(x, str):
        return SURROGATE.sub("\ufffd", x)
    if isinstance(x, dict):
        return {k: no_surrogates(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(no_surrogates(v) for v in x)
    return x

VIEWS = records.VIEWS  # one record per view (records.py); the registries below are derived from them
TITLES = {r.name: r.title for r in records.RECORDS}
KINDS = ("probs", "scores")
# bertviz's own colours (d3.schemeCategory10): its head view's heads and its model view's layers, in its calls' look
BERTVIZ_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                   "#17becf")
ACCENT = "#c2410c"  # sentence B's labels and boundaries, a selected thumbnail (app.css's --bvl-accent, light theme)

# ------------------------------------------------------------------------------------------
# colour: one rule per kind of tensor
# ------------------------------------------------------------------------------------------

SCALES = {"weights": "Blues", "signed": "RdBu_r", "difference": "PuOr_r", "change": "Reds"}
UNITS = {"weights": "weight", "signed": "value", "difference": "difference", "change": "relative change"}
# the head view's lines: weights under MIN_WEIGHT are not drawn; opacity and width grow with the weight
MIN_WEIGHT = 0.02
CLIP_PERCENTILE = 99.5
# the colour scales' stops, low to high (ColorBrewer's, as plotly and matplotlib ship them): the
# front-end, the plotly figures and the PNGs all colour through these, so no renderer needs plotly's tables
STOPS = {
    "Blues": ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"),
    "RdBu_r": ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d",
               "#b2182b", "#67001f"),
    "PuOr_r": ("#2d004b", "#542788", "#8073ac", "#b2abd2", "#d8daeb", "#f7f7f7", "#fee0b6", "#fdb863", "#e08214",
               "#b35806", "#7f3b08"),
    "Reds": ("#fff5f0", "#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d"),
}


def tensor_kind(key: str) -> str:
    """'weights' for attention maps (probabilities), 'signed' for everything else."""
    return "weights" if schema.split_key(key)[1] == "attn.probs" else "signed"


def colour_scale(values, kind: str, per: int = 0) -> dict:
    """The colour scale for a kind of tensor ('weights', 'signed', 'difference', 'change'), one
    [low, high] per slice of the first `per` axes (per=1: one per head). Non-finite values are ignored.

    weights and change (a relative change, >= 0): [0, the slice's largest value] (white is 0);
    signed: symmetric, at the 99.5th percentile of |x| (so a few outliers do not wash out the rest;
    `clipped` says so); difference: symmetric at the largest |x|.
    """
    if kind not in SCALES:
        raise ValueError(f"kind of tensor must be one of {sorted(SCALES)}, got {kind!r}")
    a = np.asarray(values, dtype=np.float64)
    flat = a.reshape((int(np.prod(a.shape[:per])) if per else 1, -1))
    lims, clipped = [], False
    for row in flat:
        fin = row[np.isfinite(row)]
        mag = np.abs(fin)
        if kind in ("weights", "change"):
            top = float(fin.max()) if fin.size and fin.max() > 0 else 1.0
            lims.append([0.0, top])
            continue
        if mag.size == 0 or mag.max() == 0:
            lims.append([-1.0, 1.0])
            continue
        lim = float(mag.max())
        if kind == "signed":
            lim = float(np.percentile(mag, CLIP_PERCENTILE)) or lim
            clipped = clipped or bool(mag.max() > lim * 1.05)
        lims.append([-lim, lim])
    clim = np.asarray(lims).reshape(tuple(a.shape[:per]) + (2,)).tolist() if per else lims[0]
    return dict(name=SCALES[kind], kind=kind, clim=clim, clipped=clipped,
                unit=UNITS[kind])


def lut(name: str, size: int = 256) -> list[list[int]]:
    """A colour scale as `size` RGB triples, linear between its STOPS: the front-end, plotly and
    matplotlib all colour through this table."""
    stops = np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in STOPS[name]], dtype=float)
    at = np.linspace(0, 1, len(stops))
    x = np.linspace(0, 1, size)
    return np.rint(np.column_stack([np.interp(x, at, stops[:, c]) for c in range(3)])).astype(int).tolist()


def plotly_scale(name: str) -> list[list]:
    """The same scale as a plotly colorscale ([[position, '#rrggbb'], ...]): the STOPS themselves, evenly
    spaced, which plotly interpolates linearly as `lut` does (the same colours; 9-11 stops instead of 256
    keep plotly's per-trace validation cheap: the model view draws 72 to 144 maps)."""
    stops = STOPS[name]
    return [[i / (len(stops) - 1), c] for i, c in enumerate(stops)]


# ------------------------------------------------------------------------------------------
# tokens, keys, errors
# ------------------------------------------------------------------------------------------


class UnknownKeyError(BertVizError, KeyError):
    """A trace key the trace does not hold; the message names the nearest keys."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


class NonFiniteError(BertVizError, ValueError):
    """A tensor holds NaN or infinite values where a view needs finite numbers."""


def host(x) -> np.ndarray:
    """Any backend's array as a float64 numpy array."""
    return np.asarray(to_host(x), dtype=np.float64)


def real_positions(trace) -> list[int]:
    """Positions (in the padded input) of the real tokens (`Trace.real_positions`)."""
    return trace.real_positions


# tokens as people read them (Ġ and ▁ dropped, ## kept: `foreign.prettify_token`) unless a caller turns it off
# (explore(..., prettify_tokens=False)); a context variable, so a widget answering later keeps its own choice
_PRETTY = contextvars.ContextVar("bertviz_lite_pretty_labels", default=True)


@contextlib.contextmanager
def pretty_labels(on: bool = True):
    """Within the block, views label tokens prettified (on, the default) or as the tokenizer wrote them."""
    token = _PRETTY.set(bool(on))
    try:
        yield
    finally:
        _PRETTY.reset(token)


def token_text(token: str) -> str:
    """A token as the views show it (prettified unless `pretty_labels(False)`)."""
    return prettify_token(token) if _PRETTY.get() else token


def token_labels(trace, positions=None) -> list[str]:
    """Unique axis labels "position token" ("3 the"), so repeated tokens stay apart."""
    positions = real_positions(trace) if positions is None else positions
    return [f"{i} {token_text(trace.tokens[i])}" for i in positions]


def check_drawable(trace, what: str = "this view") -> None:
    """One clear error, before any work, when a trace is too long to draw: its length and the memory
    drawing would take (one layer's maps as float64, about three copies: read, filtered, coloured)."""
    n = trace.n_real
    if n > limits.MAX_TOKENS:
        need = 3 * trace.num_heads * n * n * 8
        raise BertVizError(f"{what}: {n:,} tokens is more than the views draw (at most {limits.MAX_TOKENS:,}): drawing "
                           f"one layer's {trace.num_heads} maps would take about {need / 2**30:.1f} GiB of memory; "
                           f"slice the attention to the tokens you want to see (a[..., :m, :m] with tokens[:m]) "
                           "or average blocks of tokens first")


def check_key(trace, key) -> str:
    """A trace key the trace holds, or one clear error naming the nearest keys."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a trace key such as 'layer.0.attn.probs', got {key!r}")
    if key in trace:
        return key
    try:
        trace[key]
    except KeyError as e:
        message = str(e.args[0]) if e.args else key
    else:  # pragma: no cover - a trace that answers without holding the key
        return key
    if "did you mean" not in message:
        near = difflib.get_close_matches(key, trace.keys(), n=4, cutoff=0.5)
        if near:
            message += f"; nearest recorded keys: {', '.join(repr(k) for k in near)}"
    raise UnknownKeyError(message)


def edited_keys(trace) -> dict[str, str]:
    """{key: description} of the keys an edit changed (forward-pass edits; empty for a plain trace)."""
    return {k: d for k, d in getattr(trace, "edits", ())}


def pair_positions(trace, pair_filter: str = "all") -> tuple[list[int], list[int]]:
    """(query positions, key positions) a sentence-pair filter keeps, among the real tokens."""
    if pair_filter not in PAIR_FILTERS:
        raise ValueError(f"pair_filter must be one of {PAIR_FILTERS}, got {pair_filter!r}")
    real = real_positions(trace)
    if pair_filter == "all":
        return real, real
    if not trace.has_pair:
        raise ValueError(f"pair_filter={pair_filter!r} needs a sentence pair: trace(text, pair=...)")
    side = {"A": [i for i in real if trace.segments[i] == 0], "B": [i for i in real if trace.segments[i] == 1]}
    q, k = pair_filter.split("->")
    return side[q], side[k]


def recorded_kinds(trace) -> list[str]:
    """Attention kinds recorded for every layer ('probs'; 'scores' unless keep= dropped them)."""
    return [k for k in KINDS if all(schema.full_key(f"attn.{k}", layer) in trace for layer in range(trace.num_layers))]


def check_kind(trace, kind: str) -> str:
    kinds = recorded_kinds(trace)
    if kind not in kinds:
        why = "" if kind in KINDS else f" (one of {KINDS})"
        raise ValueError(f"kind must be one of {kinds} for this trace, got {kind!r}{why}")
    return kind


NEURON_KEYS = ("attn.q", "attn.k", "attn.scores", "attn.probs")  # what the neuron view shows, each as recorded


def check_neuron(trace, what: str = "the neuron view", layer: int | None = None):
    """The neuron view needs a layer's (None: every layer's) queries, keys, scores and weights, as the model
    recorded them: one error saying what it needs and how to record it."""
    if not has_neuron_keys(trace, None if layer is None else [layer]):
        raise UnknownKeyError(f"{what} needs each layer's queries and keys and the scores and weights the model "
                              f"computed from them ({', '.join(NEURON_KEYS)}), which only a forward pass here "
                              "records: tr = model.trace(text) with keep=None (the default) or a keep= list with all "
                              "four; attention from elsewhere (Trace.from_attentions) holds the weights only")
    return trace


def has_neuron_keys(trace, layers=None) -> bool:
    """Whether the trace holds NEURON_KEYS of these layers (None: of every layer)."""
    layers = range(trace.num_layers) if layers is None else layers
    return all(schema.full_key(k, ly) in trace for ly in layers for k in NEURON_KEYS)


def as_trace(trace_or_attention, tokens=None, *, sentence_b_start=None, what: str = "explore()") -> "Trace":
    """A Trace as is, or attention computed elsewhere (Hugging Face's `outputs.attentions`: L tensors
    [batch, heads, n, n] of any framework, gradients and devices included) with its tokens, through
    `Trace.from_attentions` (bertviz's calls)."""
    from ...trace import Trace
    if isinstance(trace_or_attention, Trace):
        if tokens is not None or sentence_b_start is not None:
            raise TypeError(f"{what}: tokens= and sentence_b_start= go with attention from elsewhere; a Trace "
                            "carries its own tokens and sentence pair")
        return trace_or_attention
    if tokens is None:
        fn = what.rstrip("()")
        raise TypeError(f"{what} takes a Trace (tr = model.trace('some text')) or attention from elsewhere with its "
                        f"tokens ({fn}(outputs.attentions, tokens)); got a {type(trace_or_attention).__name__} "
                        "and no tokens")
    return Trace.from_attentions(trace_or_attention, tokens, sentence_b_start=sentence_b_start)


def check_trace(trace, what: str = "explore()"):
    """A Trace with every layer's attention that the views can draw, or one clear error."""
    from ...trace import Trace
    if not isinstance(trace, Trace):
        raise TypeError(f"{what} takes a Trace, got {type(trace).__name__}: make one with "
                        f"tr = model.trace('some text') and call {what.rstrip('()')}(tr)")
    return check_attention(trace, what)


def check_attention(trace, what: str = "this view"):
    check_drawable(trace, what)
    missing = [schema.full_key("attn.probs", layer) for layer in range(trace.num_layers)
               if schema.full_key("attn.probs", layer) not in trace]
    if missing:
        raise UnknownKeyError(f"{what} needs the attention maps of every layer; this trace lacks {missing[0]!r} "
                              "(trace with keep=None, or a keep= list that includes 'attn.probs')")
    return trace


def check_finite(trace, key: str, a: np.ndarray, allow_neg_inf: bool = False) -> np.ndarray:
    """a, or a clear error naming the key when it holds NaN or +-inf (masked scores may hold -inf)."""
    bad = np.isnan(a) | (np.isinf(a) if not allow_neg_inf else np.isposinf(a))
    if bad.any():
        raise NonFiniteError(f"{key!r} holds {int(bad.sum()):,} non-finite values (NaN or inf) out of {a.size:,}: "
                             "an edit or a checkpoint produced them; views need finite numbers (check the edit, "
                             "or tr.get(...) to find where they start)")
    return a


def block_edges(n: int, m: int, split: int | None = None) -> np.ndarray:
    """Edges of min(n, m) near-equal blocks over n items; block i covers edges[i]..edges[i+1]-1.
    split: an item where a block must start (sentence B's first token), so no block mixes A and B."""
    if not split or not 0 < split < n or min(n, m) < 2:
        return np.linspace(0, n, min(n, m) + 1).round().astype(int)
    k = min(min(n, m) - 1, max(1, round(min(n, m) * split / n)))  # blocks for A, in proportion
    return np.concatenate([block_edges(split, k), split + block_edges(n - split, min(n, m) - k)[1:]])


def block_mean(a: np.ndarray, max_rows: int, max_cols: int | None = None, split: int | None = None):
    """Down-sample the last two axes to at most max_rows x max_cols by block means: (array, row edges, col edges).
    split: a row and column where a block must start (see block_edges)."""
    max_cols = max_rows if max_cols is None else max_cols
    re_, ce = block_edges(a.shape[-2], max_rows, split), block_edges(a.shape[-1], max_cols, split)
    if len(re_) - 1 == a.shape[-2] and len(ce) - 1 == a.shape[-1]:
        return a, re_, ce
    s = np.add.reduceat(np.add.reduceat(a, re_[:-1], axis=-2), ce[:-1], axis=-1)
    return s / np.outer(np.diff(re_), np.diff(ce)), re_, ce


def block_labels(labels: list[str], edges) -> list[str]:
    """Labels of token blocks: the token's own label, or 'first-last token…' for a block."""
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        out.append(labels[a] if b - a == 1 else f"{labels[a].split(' ', 1)[0]}-{labels[b - 1]}\u2026")
    return out


def _base(trace, view: str, **facts) -> dict:
    facts.setdefault("arrays", {})
    return dict(view=view, model=trace.model_name or "bert", **facts)


# ------------------------------------------------------------------------------------------
# the views
# ------------------------------------------------------------------------------------------


def attention(trace, layer: int, kind: str = "probs", *, max_tokens: int | None = None) -> dict:
    """Every head's map of one layer over the real tokens: arrays["maps"] (head, query, key).
    max_tokens: block means of at most that many tokens a side (the exported page's small maps)."""
    check_drawable(trace, "the attention view")
    layer, kind = trace.check_layer(layer), check_kind(trace, kind)
    key = schema.full_key(f"attn.{kind}", layer)
    maps = host(trace.real(trace[key], trace.axes(key)))
    check_finite(trace, key, maps, allow_neg_inf=kind == "scores")
    maps = np.where(np.isfinite(maps), maps, np.nan)
    edges = None
    if max_tokens is not None and maps.shape[-1] > max_tokens:
        segs = [trace.segments[i] for i in real_positions(trace)]
        split = segs.index(1) if 1 in segs else None  # blocks never mix sentence A and B
        maps, edges, _ = block_mean(np.nan_to_num(maps, nan=0.0), max_tokens, split=split)
    step = schema.STEP_BY_KEY[f"attn.{kind}"]
    scale = colour_scale(maps, "weights" if kind == "probs" else "signed", per=1)
    labels = token_labels(trace)
    segments = [trace.segments[i] for i in real_positions(trace)]
    # each head's top limit as the page prints it (Python's rounding, not the front-end's)
    limit_texts = [number_text(c[1], 3 if kind == "probs" else 2) for c in scale["clim"]]
    return _base(trace, "attention", layer=layer, kind=kind, key=key, formula=step.formula, symbol=step.symbol,
                 limit_texts=limit_texts,
                 axes=list(trace.axes(key)[1:]), scale=scale, edges=None if edges is None else edges.tolist(),
                 labels=labels if edges is None else block_labels(labels, edges), edited=key in edited_keys(trace),
                 segments=segments if edges is None else [segments[e] for e in edges[:-1]],
                 min_weight=MIN_WEIGHT, arrays=dict(maps=maps.astype(np.float32)))


def model(trace, kind: str = "probs", *, max_tokens: int = limits.THUMB_TOKENS, on_layer=None) -> dict:
    """Every layer x head as a thumbnail: arrays["maps"] (layer, head, m, m), block means above max_tokens."""
    check_drawable(trace, "the model view")
    kind = check_kind(trace, kind)
    segs = [trace.segments[i] for i in real_positions(trace)]
    split = segs.index(1) if 1 in segs else None  # blocks never mix sentence A and B (the pair filter)
    out = edges = None
    for layer in range(trace.num_layers):  # one layer at a time: 512-token maps are big
        key = schema.full_key(f"attn.{kind}", layer)
        maps = host(trace.real(trace[key], trace.axes(key)))
        check_finite(trace, key, maps, allow_neg_inf=kind == "scores")
        z, edges, _ = block_mean(np.where(np.isfinite(maps), maps, 0.0), max_tokens, split=split)
        if out is None:
            out = np.zeros((trace.num_layers,) + z.shape, dtype=np.float32)
        out[layer] = z
        if on_layer is not None:  # a progress bar's update (figures.model_view)
            on_layer()
    tensor = "weights" if kind == "probs" else "signed"
    scale = colour_scale(out, tensor, per=2)
    block_segs = [segs[e] for e in edges[:-1]]
    # each sentence-pair filter's thumbnails at their own limits (A->B alone would look washed out at the
    # whole map's): {filter: [layer][head][low, high]}
    scale["by_pair"] = {"all": scale["clim"]}
    if trace.has_pair:
        from .panels import pair_index
        for pf in PAIR_FILTERS[1:]:
            rows, cols = pair_index(pf, block_segs)
            scale["by_pair"][pf] = colour_scale(out[:, :, rows][:, :, :, cols], tensor, per=2)["clim"]
    return _base(trace, "model", kind=kind, layers=trace.num_layers, heads=trace.num_heads, tokens=trace.n_real,
                 shown=int(out.shape[-1]), edges=[int(e) for e in edges], scale=scale, segments=block_segs,
                 arrays=dict(maps=out))


def head(trace, layer: int, heads=None, kind: str = "probs") -> dict:
    """bertviz's head view: the layer's weights (as `attention`) and the heads to start with."""
    if kind != "probs":
        raise ValueError(f"the head view draws attention weights (kind='probs'), got kind={kind!r}")
    vd = attention(trace, layer, "probs")
    heads = None if heads is None else [trace.check_head(h) for h in heads]  # None: the selected head
    vd.update(view="head", heads=heads, colours=list(HEAD_COLOURS))  # lines from vd["min_weight"] up
    return vd


def token(trace, query: int) -> dict:
    """Where one token attends in every layer and head: arrays["rows"] (layer, head, key)."""
    real = real_positions(trace)
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not 0 <= query < len(real):
        raise ValueError(f"query must be a token index 0..{len(real) - 1} (among the real tokens), got {query!r}")
    check_attention(trace, "the token view")
    rows = np.stack([host(trace.real(trace.get("attn.probs", layer=layer), ("head", "query", "key")))[:, query]
                     for layer in range(trace.num_layers)])
    # each row is drawn to its own largest weight (the layout's over_row_max: these limits' tops)
    return _base(trace, "token", query=int(query), label=token_labels(trace)[query], labels=token_labels(trace),
                 segments=[trace.segments[i] for i in real],
                 layers=trace.num_layers, heads=trace.num_heads, scale=colour_scale(rows, "weights", per=2),
                 arrays=dict(rows=rows.astype(np.float32)))


def neuron(trace, layer: int) -> dict:
    """What a score is made of, for every head and query of one layer: arrays q, k (head, token, d_k) and
    the model's own scores and weights (head, query, key), as recorded, never recomputed here (a variant's
    attention_scale, an edited score: the view prints what the model computed).
    score(q, k) = sum_i q_i k_i * scale (+ M), scale = config.scale (1/sqrt(d_k) by default), then the softmax."""
    check_drawable(trace, "the neuron view")
    layer = trace.check_layer(layer)
    check_neuron(trace, layer=layer)
    arrays = {}
    for name in ("q", "k"):
        key = schema.full_key(f"attn.{name}", layer)
        check_key(trace, key)
        arrays[name] = check_finite(trace, key, host(trace.real(trace[key], trace.axes(key)))).astype(np.float32)
    # the numbers the view prints (each key's score and softmax weight) as the model recorded them; up to
    # limits.FULL_UP_TO tokens these arrays are the attention view's maps of the layer (one copy in the page), and
    # the page sends q and k at 8 bits (drawn as colours: the record's wire)
    for name, kind in (("scores", "scores"), ("weights", "probs")):
        key = schema.full_key(f"attn.{kind}", layer)
        a = host(trace.real(trace[key], trace.axes(key)))
        arrays[name] = np.where(np.isfinite(a), a, np.nan).astype(np.float32)
    c, d_k = trace.config, trace.config.head_size
    steps = {s: schema.STEP_BY_KEY[f"attn.{s}"] for s in ("q", "k", "scores", "probs")}
    return _base(trace, "neuron", layer=layer, d_k=d_k, scale_factor=c.scale, labels=token_labels(trace),
                 segments=[trace.segments[i] for i in real_positions(trace)],  # the sentence-pair filter's
                 scale_text=f"1/\u221a{d_k}" if c.attention_scale is None else number_text(c.scale),
                 formulas={s: st.formula for s, st in steps.items()},
                 scale=colour_scale(np.concatenate([arrays["q"].ravel(), arrays["k"].ravel()]), "signed"),
                 scale_prod=product_scale(arrays["q"], arrays["k"]), arrays=arrays)


def product_scale(q: np.ndarray, k: np.ndarray) -> dict:
    """The neuron view's q*k colour scale, one per head: symmetric at the largest |q_i k_i| over every
    query and key of the head, so stepping through queries keeps one scale (q, k: (head, token, d_k))."""
    qa, ka = np.abs(q.astype(np.float64)), np.abs(k.astype(np.float64))
    top = qa.max(axis=1) * ka.max(axis=1)  # max over tokens of |q_i| times of |k_i|, per coordinate
    lims = [[-float(t), float(t)] if t > 0 else [-1.0, 1.0] for t in top.max(axis=1)]
    return dict(name=SCALES["signed"], kind="signed", clim=lims, clipped=False, unit="qᵢ kᵢ")


def step(trace, key: str, *, ledger: ParamLedger | None = None, max_cells: int = 40_000,
         max_rows: int | None = None) -> dict:
    """One formula line: formula, shapes in and out, the tensor (every head of per-head tensors),
    statistics, the weights it reads, whether an edit changed it. The tensor is block-averaged to
    at most max_cells per head (and max_rows rows, when given); statistics use every value."""
    check_drawable(trace, "the step-through")
    key = check_key(trace, key)
    st, axes = schema.step_of(key, trace.config), trace.axes(key)
    a = host(trace.real(trace[key], axes))
    check_finite(trace, key, a, allow_neg_inf=st.key == "attn.scores")
    per_head = axes[0] == "head"
    if not per_head:
        a = a[None]
    if a.ndim == 2:  # a vector (the pooled [CLS])
        a = a[:, None, :]
    rows_axis, cols_axis = ("", axes[-1]) if len(axes) == 1 else (axes[-2], axes[-1])
    z = np.where(np.isfinite(a), a, 0.0)  # real tokens only: no masked (-inf) score is left
    rows = min(z.shape[1], max_rows or z.shape[1])
    zb, re_, ce = block_mean(z, rows, max(1, max_cells // rows))
    labels = token_labels(trace)
    row_labels = block_labels(labels, re_) if rows_axis in ("token", "query") else [st.symbol.replace("\\", "")]
    col_labels = labels if cols_axis == "key" and len(ce) - 1 == z.shape[2] else None
    if cols_axis == "label":  # a task head's logits: its labels (config.json's id2label)
        col_labels = list(trace.labels)
    elif cols_axis == "token" and len(ce) - 1 == z.shape[2]:  # one score per token (ELECTRA's discriminator)
        col_labels = labels
    # one scale per head, the same rule as the attention tab (its scores map is this map): clim[slot]
    scale = colour_scale(z, tensor_kind(key), per=1)
    weights = step_weights(trace, key, ledger)
    edits = edited_keys(trace)
    formula = schema.formula_of(key, trace.config)  # the config's own line (BERT: P = W_P[0:n])
    return _base(trace, "step", key=key, step=st.key, formula=formula, symbol=st.symbol,
                 plain=plain_formula(formula, html=False), note=schema.note_text(key, trace.config),
                 shape=shape_text(trace, key), stats=step_stats(trace, key, a if per_head else a[0]),
                 weights=[list(w) for w in weights], weights_table=weights_table(weights), per_head=per_head,
                 rows_axis=rows_axis, cols_axis=cols_axis, row_labels=row_labels, col_labels=col_labels,
                 col_starts=ce[:-1].tolist(), columns=int(z.shape[2]),
                 row_edges=None if len(re_) - 1 == z.shape[1] else re_.tolist(), scale=scale,
                 takes=[k for k in schema.takes_keys(key, trace.num_layers, proj="embed.proj" in trace)],
                 segments=[trace.segments[i] for i in real_positions(trace)],
                 edited=edits.get(key, ""), arrays=dict(z=zb.astype(np.float32)),
                 # a whole token x token map (the scores, the weights) travels as the attention view's maps
                 map_arrays=["z"] if tuple(axes) == ("head", "query", "key") and zb.shape == z.shape else [])


# each layer's groups in forward order (BERT's LayerNorm comes after the sublayer it closes)
LAYER_GROUPS = ("attention", "attention layernorm", "feed-forward", "ffn layernorm")
OUTER_GROUPS = ("embeddings", "pooler", "mlm head", "task head", "nsp head")


def group_rank(group: str) -> tuple:
    """Where a parameter group sits in the forward pass: embeddings, each layer's four groups, the heads."""
    layer, rel = schema.split_key(group)
    if layer is not None:
        return (1, layer, LAYER_GROUPS.index(rel) if rel in LAYER_GROUPS else len(LAYER_GROUPS))
    order = OUTER_GROUPS.index(group) if group in OUTER_GROUPS else len(OUTER_GROUPS)
    return (0 if order == 0 else 2, 0, order)


def parameters(trace, *, ledger: ParamLedger | None = None) -> dict:
    """The parameters view of a trace (its record's builder): `params` of the ledger, else of its config."""
    return params(ledger, trace=trace)


def params(ledger: ParamLedger | None = None, *, config=None, trace=None) -> dict:
    """The parameter ledger by group and weight, and every total the popular sources give, for the
    loaded model (ledger) or the config (the shapes it must have)."""
    config = config or (trace.config if trace is not None else None)
    if ledger is None:
        if trace is None and config is None:
            raise ValueError("params needs ledger=count_params(model), or a config / trace to count from")
        if trace is not None and trace.nominal and config is trace.config:
            unknown = ", ".join(sorted(trace.nominal))
            raise ValueError("the parameters view needs the model's sizes, and this trace's are guessed (attention "
                             f"from elsewhere: {unknown} unknown); pass ledger=bv.count_params(model) or config= the "
                             "model's BertConfig")
        mlm = trace is not None and "mlm.logits" in trace
        pooler = trace is None or "pooler.out" in trace or trace.keep is not None
        ledger, source = ledger_for_config(config, mlm=mlm, pooler=pooler), "the config's shapes"
    else:
        source = "the loaded model's arrays"
    groups = dict(sorted(ledger.by_group().items(), key=lambda kv: group_rank(kv[0])))
    family = config is not None and config.model_type != "bert"  # the sources count BERT; the family's own table
    rec = family_ledgers() if family else reconcile(config)
    rows = [[v if isinstance(v, (int, str)) else str(v) for v in r] for r in rec.rows]
    title = rec.title
    if not family and config is not None and config != type(config)():  # not BERT-base: each source's convention
        L = config.num_layers
        rows = [[(c.replace("12 layers", f"{L} layers") if isinstance(c, str) else c) for c in r]
                for r in rows if r[0] != "the BERT paper"]  # the paper's "110M" is about BERT-base only
        title += " \u2014 each source's convention applied to this model (the sources count BERT-base)"
    return dict(view="params", arrays={}, total=ledger.total, source=source, groups=list(groups.items()),
                weights=[[name, group_of(name), list(shape), count] for _, name, shape, count in ledger.rows],
                reconcile_title=title, reconcile_columns=list(rec.columns), reconcile=rows)


def compare(trace_a, trace_b, layer: int = 0, kind: str = "probs", *, max_tokens: int | None = None) -> dict:
    """Two traces of the same model and length: per-key difference down the layers (relative change
    ||b - a|| / ||a||, largest |b - a|, mean cosine of token vectors) and one layer's maps of both
    with their difference (b - a). Above limits.COMPARE_FULL_UP_TO tokens the maps are block means of at most
    max_tokens (default limits.COMPARE_MAPS) tokens a side, as the other long views are, and the view says so."""
    check_drawable(trace_a, "the compare view")
    check_comparable(trace_a, trace_b)
    layer, kind = trace_a.check_layer(layer), check_kind(trace_a, kind)
    check_kind(trace_b, kind)
    rows = compare_rows(trace_a, trace_b)
    L = trace_a.num_layers
    layer_steps = [s.key for s in schema.LAYER_STEPS]
    grid = np.full((len(layer_steps), L), np.nan)
    for key, rel, _, _ in rows:
        ly, rel_key = schema.split_key(key)
        if ly is not None:
            grid[layer_steps.index(rel_key), ly] = rel
    if max_tokens is None and trace_a.n_real > limits.COMPARE_FULL_UP_TO:
        max_tokens = limits.COMPARE_MAPS
    a, b = (attention(t, layer, kind, max_tokens=max_tokens) for t in (trace_a, trace_b))
    ma, mb = a["arrays"]["maps"], b["arrays"]["maps"]
    # A and B share one scale per head that covers both runs (keys side by side: (head, query, 2 key))
    shared = colour_scale(np.concatenate([ma, mb], axis=-1), "weights" if kind == "probs" else "signed", per=1)
    diff = (np.nan_to_num(mb.astype(np.float64)) - np.nan_to_num(ma.astype(np.float64)))
    edits = {**edited_keys(trace_a), **edited_keys(trace_b)}
    return _base(trace_a, "compare", layer=layer, kind=kind, labels=a["labels"], labels_b=b["labels"],
                 texts=[" | ".join(t.texts) for t in (trace_a, trace_b)], steps=layer_steps,
                 texts_short=[shorten(" | ".join(t.texts), 90) for t in (trace_a, trace_b)],  # for titles
                 rows=[[k, r, m, c] for k, r, m, c in rows], edits=[[k, d] for k, d in edits.items()],
                 scale=shared, scale_diff=colour_scale(diff, "difference", per=1),
                 identical=["" if np.any(d != 0) else " \u2014 identical (the edit acts after this map, or not in this "
                            "layer: see the steps below)" for d in diff],
                 scale_grid=colour_scale(grid, "change"), edges=a["edges"], tokens=trace_a.n_real,
                 arrays=dict(a=ma, b=mb, diff=diff.astype(np.float32), grid=grid.astype(np.float32)))


def check_comparable(trace_a, trace_b) -> None:
    from ...trace import Trace
    for t in (trace_a, trace_b):
        if not isinstance(t, Trace):
            raise TypeError(f"compare takes two Traces, got {type(t).__name__}")
    if trace_a.config != trace_b.config:
        raise ValueError("compare needs two traces of the same model: their configs differ")
    if trace_a.n_real != trace_b.n_real:
        raise ValueError(f"compare needs inputs of the same length: {trace_a.n_real} and {trace_b.n_real} real tokens "
                         "(compare a sentence with an edited run of itself, or two sentences of equal length)")
    check_attention(trace_a, "compare")
    check_attention(trace_b, "compare")


def first_differing_layer(trace_a, trace_b) -> int:
    """The first layer whose attention weights differ between two traces (where the compare tab
    opens: an edit in layer 2 leaves layers 0 and 1 blank); 0 when none differs."""
    for layer in range(trace_a.num_layers):
        a, b = (host(t.real(t.get("attn.probs", layer=layer), ("head", "query", "key"))) for t in (trace_a, trace_b))
        if a.shape != b.shape or not np.array_equal(a, b):
            return layer
    return 0


def compare_rows(trace_a, trace_b) -> list[tuple[str, float, float, float]]:
    """(key, relative change, largest |b - a|, mean cosine) for each key both traces hold (bv.compare's numbers)."""
    from ...comparison import compare as compare_runs
    return [(key, rel, max_abs, cos) for key, max_abs, rel, cos in compare_runs(trace_a, trace_b).rows]


# ------------------------------------------------------------------------------------------
# step texts: formulas without LaTeX, shapes, statistics, weights
# ------------------------------------------------------------------------------------------

# plain_formula (formulas without LaTeX) lives in the engine's text module: tr.shapes() prints it too


def shape_text(trace, key: str) -> str:
    """What goes in and what comes out, e.g. '(n x 768)·(768 x 64) + (64) per head → 12 x n x 64'."""
    st = schema.step_of(key, trace.config)
    sizes = schema.axis_sizes(trace.config, trace.n_real)
    sizes.update(token="n", query="n", key="n")
    out = " x ".join(str(sizes[a]) for a in st.axes)
    return f"{schema.inputs_text(key, trace.config)} \u2192 {out}   ({' x '.join(st.axes)}; n = {trace.n_real})"


def step_stats(trace, key: str, a: np.ndarray | None = None) -> list[tuple[str, str]]:
    """Summary statistics of a step's real values, plus the step's own check (layernorm, softmax)."""
    st = schema.step_of(key, trace.config)
    if a is None:
        a = host(trace.real(trace[key], trace.axes(key)))
    fin = a[np.isfinite(a)]
    rows = [("shape (real tokens)", " x ".join(map(str, a.shape))), ("mean", f"{fin.mean():.4g}"),
            ("std", f"{fin.std():.4g}"), ("min", f"{fin.min():.4g}"), ("max", f"{fin.max():.4g}")]
    if a.size != fin.size:
        rows.append(("masked (-inf)", f"{a.size - fin.size:,}"))
    if st.check == "layernorm":
        mu, sd = a.mean(axis=-1), a.std(axis=-1)
        rows += [("row means (0 if \u03b3=1, \u03b2=0)", f"max |mean| = {np.abs(mu).max():.3g}"),
                 ("row stds (1 if \u03b3=1, \u03b2=0)", f"{sd.min():.4g} .. {sd.max():.4g}")]
    if st.check == "softmax":
        s = a.sum(axis=-1)
        rows.append(("row sums (= 1)", f"{s.min():.6f} .. {s.max():.6f}"))
    return rows


def weights_table(weights) -> list[list[str]]:
    """The step-through's table of the weights a step reads, formatted, with its total (a layout refers to it)."""
    total = sum(r[2] for r in weights)
    rows = [[str(r[0]), str(r[1]), f"{r[2]:,}"] for r in weights]
    return rows + [["total", "", f"{total:,}"]] if weights else [["(reads no weights)", "", ""]]


def step_weights(trace, key: str, ledger=None) -> list[tuple[str, str, int]]:
    """(weight, shape, parameters) the step reads: from the ledger, or the shapes from the config.
    A tied weight (the mlm output reads W_T) is listed with 0 parameters: its owner counts it."""
    from ...weights import param_shapes
    st = schema.step_of(key, trace.config)
    shapes = param_shapes(trace.config, mlm=True)
    tied = [(f"{n} (tied)", " x ".join(map(str, shapes[n])), 0) for n in st.tied]
    if ledger is not None:
        return [(name, " x ".join(map(str, shape)), count) for name, shape, count in ledger.for_step(key)] + tied
    layer, _ = schema.split_key(key)
    prefix = "" if layer is None else schema.layer_prefix(layer)
    names = [prefix + r for r in st.reads]
    return [(n, " x ".join(map(str, shapes[n])), math.prod(shapes[n])) for n in names if n in shapes] + tied


def stepper_steps(trace) -> list[str]:
    """The trace's keys in forward order (embeddings, each layer's steps, pooler, mlm)."""
    order = schema.model_keys(trace.config, mlm=True)
    rank = {k: i for i, k in enumerate(order)}
    return sorted(trace.keys(), key=lambda k: rank.get(k, len(order)))


# ------------------------------------------------------------------------------------------
# the registry and the facts every front-end needs
# ------------------------------------------------------------------------------------------

BUILDERS = {r.name: globals()[r.builder] for r in records.RECORDS}


# what each view is drawn from: (view data, the selection's words it takes, fixed arguments); the
# head view draws the attention view's weights (one payload serves both tabs)
REQUESTS = {r.name: (r.source, r.request, dict(r.fixed)) for r in records.RECORDS}


def request(view: str, *, layer: int = 0, head: int = 0, query: int = 0, kind: str = "probs",
            key: str | None = None) -> dict:
    """The view-data arguments of a selection (view, layer, head, query, kind, key): the one mapping
    the explorer, the exported page, the PNG path and the CLI use (the front-end reads the same
    table, `REQUESTS`, from `facts`). key defaults to the selected layer's attention map; the head
    (and the head view's heads) is a selection of what is drawn, not of the data."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    sel = dict(layer=layer, head=head, query=query, kind=kind,
               key=key if key is not None else schema.full_key("attn.probs", layer))
    _, words, fixed = REQUESTS[view]
    return {**{w: sel[w] for w in words}, **fixed}


def view_data(trace, view: str, *, trace_b=None, ledger=None, **args) -> dict:
    """The view data of any view by name (the front-end's requests go through here): its record's builder,
    given what the record says it takes (a second trace, the ledger), with the layouts of the views drawn from
    it (`panels.layouts`: what each renderer draws) and the names of its token x token maps (`map_arrays`: the
    record's, unless the builder named them; how they travel: `widget.wire_dtypes`, `export.Payloads`)."""
    rec = records.record(view)
    given = dict(trace_b=trace_b, ledger=ledger)
    if "trace_b" in rec.takes and trace_b is None:
        raise ValueError(f"the {rec.title} view needs a second trace: bv.explore(tr_a, compare=tr_b)"
                         + (f", or {rec.figure}(tr_a, tr_b)" if rec.figure else ""))
    vd = BUILDERS[view](trace, **{k: given[k] for k in rec.takes}, **args)
    vd.setdefault("map_arrays", list(rec.maps))
    vd["layouts"] = layouts(vd)
    return vd


def shown_texts(trace) -> list[str]:
    """The input's texts for a header; attention from elsewhere has only its tokens, shown as the views
    show them (prettified), split at sentence B."""
    if not trace.nominal:
        return list(trace.texts)
    real = real_positions(trace)
    join = join_tokens if _PRETTY.get() else " ".join  # pieces written as words ("purred", not "pu ##rred")
    return [join([trace.tokens[i] for i in real if trace.segments[i] == s]) for s in (0, 1)]


# what a view's record may need of a trace (records.NEEDS): whether (trace, second trace or None) has it
NEEDS = {
    "second_trace": lambda trace, trace_b: trace_b is not None,  # the compare view
    # attention from elsewhere (Trace.from_attentions) knows only L and n_h: no parameter count, no step-through
    "sizes": lambda trace, trace_b: not trace.nominal,
    "neuron_keys": lambda trace, trace_b: has_neuron_keys(trace),  # q, k, scores and weights as recorded
}


def shown_views(trace, trace_b=None) -> list[str]:
    """The tabs a trace can fill: each view whose record's needs the trace has (`NEEDS`)."""
    return [r.name for r in records.RECORDS if all(NEEDS[need](trace, trace_b) for need in r.needs)]


def facts(trace, *, model_name: str = "", trace_b=None, ledger_source: str = "") -> dict:
    """What the front-end needs before any view: tokens, sizes, keys in order, symbols, colour tables."""
    real = real_positions(trace)
    c = trace.config
    edits = edited_keys(trace)
    return dict(
        title=f"{model_name or trace.model_name or 'bert'}: " + " | ".join(t for t in shown_texts(trace) if t),
        model=model_name or trace.model_name or "bert", layers=trace.num_layers, heads=trace.num_heads,
        n=len(real), n_total=trace.n, tokens=[token_text(trace.tokens[i]) for i in real],
        labels=token_labels(trace, real),
        segments=[trace.segments[i] for i in real], has_pair=trace.has_pair,
        pair_filters=list(PAIR_FILTERS) if trace.has_pair else ["all"], kinds=recorded_kinds(trace),
        keys=stepper_steps(trace), edits=[[k, d] for k, d in edits.items()],
        sizes={k: v for k, v in dict(H=c.hidden_size, n_h=c.num_heads, d_k=c.head_size, d_ffnn=c.ffn_size,
                                     L=c.num_layers, N_V=c.vocab_size).items()
               if k not in trace.nominal},  # only what is known (from_attentions: L and n_h)
        symbols=[[s.symbol, s.meaning, list(s.also)] for s in schema.SYMBOLS],
        formulas={k: plain_formula(schema.STEP_BY_KEY[f"attn.{k}"].formula) for k in KINDS},
        neuron=has_neuron_keys(trace),
        compare=None if trace_b is None else dict(text=" | ".join(trace_b.texts),
                                                  edits=[[k, d] for k, d in edited_keys(trace_b).items()],
                                                  first_layer=first_differing_layer(trace, trace_b)),
        views=shown_views(trace, trace_b),
        titles=TITLES, colours=list(HEAD_COLOURS), ledger_source=ledger_source,
        requests={v: dict(data=src, args=list(words), fixed=fixed) for v, (src, words, fixed) in REQUESTS.items()},
        controls={r.name: list(r.controls) for r in records.RECORDS},
        ahead={r.name: list(r.ahead) for r in records.RECORDS if r.ahead},
        # where a tab opens the first time, unless a later one is selected: a view of two traces at the first layer
        # whose attention differs (an edit in layer 2 leaves layers 0 and 1 blank)
        opens_at={} if trace_b is None else {r.name: dict(layer=first_differing_layer(trace, trace_b))
                                             for r in records.RECORDS if r.second_trace},
        limits=dict(limits.FRONT_END),
        luts={name: lut(name) for name in list(SCALES.values()) + ["Reds"]})
