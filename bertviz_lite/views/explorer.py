"""The notebook explorer: one widget with four tabs over a trace.

    import bertviz_lite as bv
    model = bv.load("minilm")
    tr = model.trace("The cat sat on the mat.", pair="It was tired.")
    bv.explore(tr, model=model)                 # the widget (JupyterLab 4, Notebook 7, VS Code)
    bv.explore(tr, static=True)                 # a plain plotly figure, for pages without widgets

Tabs: *step-through* (every trace key in forward order as `step_view`: formula, shapes in
and out, the tensor, statistics, the weights it reads), *attention* (one head's map, probs
or scores, sentence-pair blocks; [PAD] never shown), *model view* (layers x heads; click a
panel to open it) and *parameters* (`param_breakdown`).

How switching stays instant. The widget is an anywidget whose front-end is one static file
(`assets/explore.js`). The attention map is drawn on a canvas from the maps of the selected
layer, which the front-end asks the kernel for once per (layer, kind): every head of the
layer, real tokens only, as one binary buffer (float32 up to 128 tokens; above, uint16
scaled per map to its [min, max], error <= range / 131070 plus float32 rounding), never as
JSON numbers. Switching head or sentence block redraws from that buffer with no round trip.
(A canvas, not a plotly heatmap: plotly's restyle alone took 130-280 ms for a 512 x 512 map
on the 2-core test machine; the canvas uses the same plotly colour scales.)
A layer not yet in the page costs one request, answered with the head on screen first (one
map, drawn at once) and then the whole layer; the neighbouring layers are fetched ahead.
The other tabs are the plotly figures of `figures.py`, sent as plotly JSON (arrays base64)
when a tab is first opened and drawn by the plotly.js that ships in the plotly package: the
kernel sends it once per page on request (as bytes), so no script comes from a CDN and the
saved notebook stays small (no 5 MB bundle in its widget state).

Without a widget front-end (nbconvert HTML, a GitHub preview, a plain script) a widget
shows only its text; pass `static=True` for the plotly figure of the chosen tab instead.
When ipywidgets or anywidget is not installed, explore() warns and returns that figure.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np

from .. import schema
from ..backend import to_host
from ..params import ParamLedger, count_params, step_of_param
from ..trace import Trace
from ..weights import param_shapes
from .figures import (PAIR_FILTERS, attention_heatmap, model_view, pair_positions, param_breakdown, plain_formula,
                      real_positions, step_view, stepper_steps, token_labels)

TABS = ("steps", "attention", "model", "params")
TAB_TITLES = {"steps": "step-through", "attention": "attention", "model": "model view", "params": "parameters"}
KINDS = ("probs", "scores")
FLOAT_MAX_TOKENS = 128  # up to here maps travel as float32 (exact); above as uint16 per-map scaled
ASSETS = Path(__file__).with_name("assets")


# ------------------------------------------------------------------------------------------
# checks and the data the front-end needs
# ------------------------------------------------------------------------------------------


def check_trace(trace) -> Trace:
    if not isinstance(trace, Trace):
        raise TypeError(f"explore() takes a Trace, got {type(trace).__name__}: make one with "
                        "tr = model.trace('some text') and call bv.explore(tr)")
    missing = [f"layer.{layer}.attn.probs" for layer in range(trace.num_layers)
               if f"layer.{layer}.attn.probs" not in trace]
    if missing:
        raise KeyError(f"explore() needs the attention maps of every layer; this trace lacks {missing[0]!r} "
                       "(trace with keep=None, or a keep= list that includes 'attn.probs')")
    return trace


def check_model(model, trace: Trace):
    if model is None:
        return None
    from ..model import Bert
    if not isinstance(model, Bert):
        raise TypeError(f"model= takes the Bert that made the trace (model = bv.load(...)), got {type(model).__name__}")
    if model.config != trace.config:
        raise ValueError(f"model= does not match the trace: the model is {model.config} but the trace was "
                         f"made with {trace.config}; pass the model that made the trace, or leave model= out")
    return model


def recorded_kinds(trace: Trace) -> list[str]:
    """The attention kinds recorded for every layer ('probs' always; 'scores' unless keep= dropped them)."""
    return [k for k in KINDS if all(f"layer.{layer}.attn.{k}" in trace for layer in range(trace.num_layers))]


def check_kind(trace: Trace, kind: str) -> str:
    kinds = recorded_kinds(trace)
    if kind not in kinds:
        why = "" if kind in KINDS else f" (one of {KINDS})"
        raise ValueError(f"kind must be one of {kinds} for this trace, got {kind!r}{why}")
    return kind


def check_pair_filter(trace: Trace, pair_filter: str) -> str:
    pair_positions(trace, pair_filter)  # raises, naming the choices, when it is not one or needs a pair
    return pair_filter


def check_tab(tab: str) -> str:
    if tab not in TABS:
        raise ValueError(f"tab must be one of {TABS}, got {tab!r}")
    return tab


def check_key(trace: Trace, key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a trace key such as 'layer.0.attn.q', got {key!r}")
    trace[key]  # raises KeyError with a did-you-mean hint for an unknown key
    return key


def ledger_from_config(trace: Trace) -> ParamLedger:
    """A parameter ledger from the trace's config (no model at hand): the shapes the model must have.

    The pooler counts when the trace recorded pooler.out (or recorded a subset, where it is unknown),
    the mlm head when it recorded mlm.logits; a next-sentence head cannot be seen in a trace.
    """
    pooler = "pooler.out" in trace or trace.keep is not None
    mlm = "mlm.logits" in trace
    shapes = param_shapes(trace.config, mlm=mlm, pooler=pooler)
    rows = [(step_of_param(name), name, tuple(shape), math.prod(shape)) for name, shape in shapes.items()]
    return ParamLedger(rows, tied=("embed.W_T (mlm output layer)",) if mlm else ())


def colour_lut(name: str) -> list[list[int]]:
    """256 RGB triples sampled from a plotly colour scale (the figures' own scales)."""
    from plotly.colors import sample_colorscale, unlabel_rgb
    return [[int(round(c)) for c in unlabel_rgb(s)] for s in sample_colorscale(name, list(np.linspace(0, 1, 256)))]


def map_block(trace: Trace, layer: int, kind: str, head: int | None = None) -> tuple[dict, bytes]:
    """Every head's map of one layer over the real tokens (or one head's), packed for the front-end.

    Returns (header, bytes): header["dtype"] is "f4" (float32, exact) up to FLOAT_MAX_TOKENS
    tokens, else "u2": uint16 q per map with value = lo + q / 65535 * (hi - lo).
    Row-major (head, query, key), little-endian; header["head"] is None for the whole layer.
    """
    layer = trace.check_layer(layer)
    a = np.asarray(to_host(trace.get(f"attn.{kind}", layer=layer)), dtype=np.float32)  # (head, n, n)
    if head is not None:
        a = a[trace.check_head(head)][None]
    real = real_positions(trace)
    if len(real) != trace.n:
        idx = np.asarray(real)
        a = a[:, idx][:, :, idx]
    heads, n = a.shape[0], a.shape[1]
    lo, hi = a.min(axis=(1, 2)), a.max(axis=(1, 2))
    header = dict(layer=layer, kind=kind, head=head, heads=heads, n=n, lo=lo.tolist(), hi=hi.tolist())
    if n <= FLOAT_MAX_TOKENS:
        return dict(header, dtype="f4"), np.ascontiguousarray(a, dtype="<f4").tobytes()
    span = np.where(hi > lo, hi - lo, 1.0).astype(np.float32)
    q = np.rint((a - lo[:, None, None]) * (65535.0 / span)[:, None, None]).astype("<u2")
    return dict(header, dtype="u2"), q.tobytes()


def decode_block(header: dict, data) -> np.ndarray:
    """The inverse of map_block (as the front-end does it): (head, n, n) float values."""
    shape = (header["heads"], header["n"], header["n"])
    if header["dtype"] == "f4":
        return np.frombuffer(bytes(data), dtype="<f4").reshape(shape).astype(np.float64)
    q = np.frombuffer(bytes(data), dtype="<u2").reshape(shape).astype(np.float64)
    lo, hi = np.asarray(header["lo"])[:, None, None], np.asarray(header["hi"])[:, None, None]
    return lo + q / 65535.0 * (hi - lo)


def explorer_info(trace: Trace, *, model_name: str, ledger_source: str) -> dict:
    """The static facts the front-end draws with: tokens, sizes, keys in order, formulas, colours."""
    import plotly
    from plotly.offline import get_plotlyjs_version
    real = real_positions(trace)
    kinds = recorded_kinds(trace)
    axes = {k: list(trace.axes(f"layer.0.attn.{k}")[1:]) for k in kinds}
    return dict(
        title=f"{model_name}: " + " | ".join(t for t in trace.texts if t),
        layers=trace.num_layers, heads=trace.num_heads, n=len(real), n_total=trace.n,
        tokens=[trace.tokens[i] for i in real], labels=token_labels(trace, real),
        segments=[trace.segments[i] for i in real], has_pair=trace.has_pair,
        pair_filters=list(PAIR_FILTERS) if trace.has_pair else ["all"], kinds=kinds, axes=axes,
        formulas={k: plain_formula(schema.STEP_BY_KEY[f"attn.{k}"].formula, html=False) for k in kinds},
        keys=stepper_steps(trace),
        notes={s.key: s.note for s in schema.STEPS},
        luts={"probs": colour_lut("Blues"), "scores": colour_lut("RdBu_r")},
        ledger_source=ledger_source, plotly_version=get_plotlyjs_version(), plotly_py=plotly.__version__)


# ------------------------------------------------------------------------------------------
# the widget
# ------------------------------------------------------------------------------------------


_EXPLORER = None


def __getattr__(name):
    if name == "Explorer":  # `from bertviz_lite.views.explorer import Explorer` (imports anywidget)
        return _widget_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _widget_class():
    """The Explorer class, defined on first use so that importing this module needs no widget library."""
    global _EXPLORER
    if _EXPLORER is not None:
        return _EXPLORER
    import anywidget
    import traitlets as t

    class Explorer(anywidget.AnyWidget):
        """The explorer widget. Selections are traitlets: `w.layer = 2; w.head = 5; w.tab = "model"`."""

        _esm = ASSETS / "explore.js"
        _css = ASSETS / "explore.css"
        info = t.Dict().tag(sync=True)  # static facts (explorer_info)
        tab = t.Unicode("attention").tag(sync=True)
        layer = t.Int(0).tag(sync=True)
        head = t.Int(0).tag(sync=True)
        kind = t.Unicode("probs").tag(sync=True)
        pair_filter = t.Unicode("all").tag(sync=True)
        key = t.Unicode("").tag(sync=True)

        def __init__(self, trace: Trace, *, model=None, ledger=None, tab="attention", layer=0, head=0,
                     kind="probs", pair_filter="all", key=None):
            trace = check_trace(trace).to_host()
            self.trace, self.model = trace, model
            self._ledger = ledger
            self._ledger_source = ("the loaded model's arrays" if ledger is not None
                                   else "the config's shapes (pass model= to count the loaded arrays)")
            name = model.name if model is not None else (trace.model_name or "bert")
            super().__init__(info=explorer_info(trace, model_name=name, ledger_source=self._ledger_source),
                             tab=check_tab(tab), layer=trace.check_layer(layer), head=trace.check_head(head),
                             kind=check_kind(trace, kind), pair_filter=check_pair_filter(trace, pair_filter),
                             key=check_key(trace, key if key is not None else stepper_steps(trace)[0]))
            self.on_msg(self._on_msg)

        # --- every selection is checked where it is set, from Python or from the page
        @t.validate("tab")
        def _v_tab(self, proposal):
            return check_tab(proposal["value"])

        @t.validate("layer")
        def _v_layer(self, proposal):
            return self.trace.check_layer(proposal["value"])

        @t.validate("head")
        def _v_head(self, proposal):
            return self.trace.check_head(proposal["value"])

        @t.validate("kind")
        def _v_kind(self, proposal):
            return check_kind(self.trace, proposal["value"])

        @t.validate("pair_filter")
        def _v_pair(self, proposal):
            return check_pair_filter(self.trace, proposal["value"])

        @t.validate("key")
        def _v_key(self, proposal):
            return check_key(self.trace, proposal["value"])

        # --- what the tabs show, as plain plotly figures
        @property
        def ledger(self) -> ParamLedger:
            if self._ledger is None:
                self._ledger = ledger_from_config(self.trace)
            return self._ledger

        def figure(self, tab: str | None = None):
            """The plotly figure of a tab at the current selection (the static fallback draws this)."""
            tab = check_tab(tab or self.tab)
            if tab == "attention":
                return attention_heatmap(self.trace, self.layer, self.head, kind=self.kind,
                                         pair_filter=self.pair_filter)
            if tab == "model":
                return model_view(self.trace, kind=self.kind)
            if tab == "steps":
                return step_view(self.trace, self.key, ledger=self._ledger)
            return param_breakdown(self.ledger, config=self.trace.config)

        # --- the front-end asks, the kernel answers (custom messages: nothing large is kept in the state)
        def _on_msg(self, _widget, content, buffers):
            what = content.get("type") if isinstance(content, dict) else None
            try:
                if what == "maps":  # the head on screen first (small, drawn at once), then the whole layer
                    layer, kind = int(content["layer"]), check_kind(self.trace, content["kind"])
                    if content.get("head") is not None:
                        header, data = map_block(self.trace, layer, kind, int(content["head"]))
                        self.send(dict(header, type="maps"), buffers=[data])
                    header, data = map_block(self.trace, layer, kind)
                    self.send(dict(header, type="maps"), buffers=[data])
                elif what == "figure":
                    self.send(dict(type="figure", view=content["view"], arg=content.get("arg", ""),
                                   json=self._figure_json(content["view"], content.get("arg", ""))))
                elif what == "plotly":
                    from plotly.offline import get_plotlyjs, get_plotlyjs_version
                    self.send(dict(type="plotly", version=get_plotlyjs_version()),
                              buffers=[get_plotlyjs().encode("utf-8")])
                else:
                    raise ValueError(f"unknown request {content!r}")
            except Exception as e:  # shown in the page: the kernel's log is not where people look
                self.send(dict(type="error", request=content, message=f"{type(e).__name__}: {e}"))

        def _figure_json(self, view: str, arg: str) -> str:
            import plotly.io as pio
            if view == "model":
                fig = model_view(self.trace, kind=check_kind(self.trace, arg or "probs"))
            elif view == "steps":
                fig = step_view(self.trace, check_key(self.trace, arg), ledger=self._ledger)
            elif view == "params":
                fig = param_breakdown(self.ledger, config=self.trace.config)
            else:
                raise ValueError(f"no figure named {view!r}; the tabs with figures are 'model', 'steps', 'params'")
            return pio.to_json(fig, validate=False)  # numpy arrays travel base64 ("bdata")

        def __repr__(self) -> str:
            return (f"<bertviz-lite explorer: {self.trace.n_real} tokens, {self.trace.num_layers} layers x "
                    f"{self.trace.num_heads} heads; tab={self.tab!r} layer={self.layer} head={self.head}>")

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            data = bundle[0] if isinstance(bundle, tuple) else bundle
            data["text/plain"] = (repr(self) + "\nThis is a Jupyter widget: it draws in JupyterLab 4, Notebook 7 or "
                                  "VS Code. Without a widget front-end use bv.explore(tr, static=True), a plain "
                                  "plotly figure.")
            return bundle

    Explorer.__qualname__ = "Explorer"
    _EXPLORER = Explorer
    return Explorer


def widgets_available() -> bool:
    try:
        import anywidget  # noqa: F401
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def explore(trace, model=None, *, tab: str = "attention", layer: int = 0, head: int = 0, kind: str = "probs",
            pair_filter: str = "all", key: str | None = None, static: bool = False):
    """The explorer widget for a trace, or with static=True the plotly figure of one tab.

    trace: `model.trace(text)` (every layer's attn.probs recorded). model: the Bert that made
    it (optional): the parameters tab then counts its loaded arrays (else the config's shapes).
    tab: "attention" (default), "steps", "model" or "params"; layer, head, kind ("probs" or
    "scores"), pair_filter ("all", "A->A", "A->B", "B->A", "B->B" for sentence pairs) and key
    (a trace key for the step-through; default the first) set the starting selection.
    static=True returns a `go.Figure` (call .show() or let the notebook draw it): the way to
    go where no widget manager runs. The widget is returned, never displayed by this call.
    """
    trace = check_trace(trace)
    model = check_model(model, trace)
    ledger = count_params(model) if model is not None else None
    if static is not True and static is not False:
        raise TypeError(f"static must be True or False, got {static!r}")
    if not static and not widgets_available():
        warnings.warn("bv.explore: ipywidgets and anywidget are needed for the interactive explorer "
                      "(pip install 'bertviz-lite[views]'); returning the static figure instead", stacklevel=2)
        static = True
    if static:
        check_tab(tab)
        check_kind(trace, kind)
        check_pair_filter(trace, pair_filter)
        layer, head = trace.check_layer(layer), trace.check_head(head)
        if tab == "attention":
            return attention_heatmap(trace, layer, head, kind=kind, pair_filter=pair_filter)
        if tab == "model":
            return model_view(trace, kind=kind)
        if tab == "steps":
            key = check_key(trace, key if key is not None else stepper_steps(trace)[0])
            return step_view(trace, key, ledger=ledger)
        return param_breakdown(ledger if ledger is not None else ledger_from_config(trace), config=trace.config)
    return _widget_class()(trace, model=model, ledger=ledger, tab=tab, layer=layer, head=head, kind=kind,
                           pair_filter=pair_filter, key=key)
