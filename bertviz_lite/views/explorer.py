"""The notebook explorer: one widget over a trace, with every view.

    import bertviz_lite as bv
    model = bv.load("minilm")
    tr = model.trace("The cat sat on the mat.", pair="It was tired.")
    bv.explore(tr, model=model)                  # the widget (JupyterLab 4, Notebook 7, VS Code)
    bv.explore(tr, compare=tr_edited)            # adds the compare tab
    bv.explore(tr, static=True)                  # a plotly figure of one tab, for pages without widgets
    bv.views.head_view(outputs.attentions, tokens)   # bertviz's calls: the explorer opened on that view

Tabs (one vocabulary, `data.VIEWS`): attention, head view, one token (where it attends in
every layer and head), model view, neuron view, step-through, parameters, compare.

The widget is an anywidget whose front-end is `assets/app.js`, the same file the exported
page runs. The page asks for view data ({type: "view", view, args}); the kernel answers with
`data.view_data(...)` packed by `codec.encode` as binary buffers (float32, or uint16 scaled
per map above EXACT_UP_TO tokens), never JSON numbers. A layer's attention arrives as every
head at once, so switching head or sentence block redraws with no round trip, and the
neighbouring layers are fetched ahead. Nothing large is kept in the widget's state.

A saved notebook keeps every tab: the explorer is shown as its exported page (`saved_bundle`:
the view data, compressed, with the front-end, under SAVED_PAGE_BYTES, in an iframe; a PNG of
the starting map where HTML does not run) followed by the widget; reopened without a kernel, the
page works on its own (`_ipython_display_` says why two outputs).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np

from ..errors import BertVizError
from ..params import ParamLedger, count_params
from ..trace import Trace
from . import codec, data

TABS = data.VIEWS
# a saved notebook keeps the exported page of each explorer up to this size: every tab while it fits
# (MiniLM: 0.8 MB at 22 tokens, 4.7 MB at 122), else the tabs of SAVED_LONG_TABS (1.4 MB at 202 tokens),
# else only the picture, saying why (saved_page); measured 2026-11-25
SAVED_PAGE_BYTES = 5_000_000
# above this many tokens the saved page keeps the attention, model, head view and parameters tabs only:
# the step-through's 97 tensors and the one-token view would take seconds to build each time the
# explorer is shown (7 s for MiniLM at 500 tokens) and megabytes to keep
SAVED_EVERY_TAB_UP_TO = 128
SAVED_LONG_TABS = ("attention", "model", "head", "params", "compare")
EXACT_UP_TO = 128  # up to here maps travel as float32 (exact); above as uint16 scaled per map
ASSETS = Path(__file__).with_name("assets")


def check_trace(trace, what: str = "explore()") -> Trace:
    return data.check_trace(trace, what)


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


def check_tab(tab: str, compare: bool = True) -> str:
    tabs = TABS if compare else tuple(t for t in TABS if t != "compare")
    if tab not in tabs:
        hint = " (the compare tab needs compare=second_trace)" if tab == "compare" else ""
        raise ValueError(f"tab must be one of {tabs}, got {tab!r}{hint}")
    return tab


def check_query(trace: Trace, query) -> int:
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < trace.n_real:
        raise ValueError(f"query must be a token index 0..{trace.n_real - 1} (among the real tokens), got {query!r}")
    return query


def wire_dtypes(vd: dict) -> dict:
    """How each array travels to the notebook: float32, or uint16 for maps above EXACT_UP_TO tokens (the
    neuron view's scores and weights are its layer's maps)."""
    big = vd["view"] in ("attention", "head", "compare", "neuron") and len(vd.get("labels", ())) > EXACT_UP_TO
    maps = ("maps", "a", "b", "diff", "scores", "weights")
    return {name: ("u2" if big and name in maps else "f4") for name in vd["arrays"]}


def answer(trace, request: dict, *, trace_b=None, ledger=None) -> tuple[dict, list[bytes]]:
    """The reply to one front-end request: (header, buffers)."""
    view, args = request.get("view"), dict(request.get("args") or {})
    vd = data.view_data(trace, view, trace_b=trace_b, ledger=ledger, **args)
    header, buffers = codec.encode(vd, wire_dtypes(vd))
    return dict(header, type="view", request_key=request.get("request_key") or codec.request_key(view, args)), buffers


def fallback_png(trace, layer: int, head: int, kind: str = "probs") -> bytes:
    """A PNG of one attention map (the saved notebook's picture where no widget manager runs)."""
    from .static import to_png
    buf = io.BytesIO()
    # small enough to keep in a saved notebook: above 128 tokens, block means (a 512-token map is ~1 MB of noise)
    to_png(data.attention(trace, layer, kind, max_tokens=EXACT_UP_TO), buf, head=head, dpi=90)
    return buf.getvalue()


def saved_html(page: str, png_b64: str, title: str) -> str:
    """The saved output's HTML: the page in an iframe (srcdoc), shown once it loads; until then, and
    wherever iframes or their load handler are stripped (GitHub, an untrusted notebook), the PNG."""
    import html
    img = (f'<img class="bvl-saved-png" alt="{html.escape(title)}: layer map (the saved explorer)" '
           f'src="data:image/png;base64,{png_b64}">') if png_b64 else ""
    # reopened without a kernel, the widget's own output (the next one) can only say "model not found":
    # hidden while it holds no drawn explorer (JupyterLab 4 and Notebook 7 output areas; a live widget shows)
    style = ("<style>.jp-OutputArea-child:has(.bvl-saved) + .jp-OutputArea-child:not(:has(.bvl-x))"
             "{display:none}</style>")
    return (style + '<div class="bvl-saved">' + img +
            f'<iframe class="bvl-saved-page" title="{html.escape(title)} (saved explorer)" '
            'style="width:100%;height:820px;border:0;display:none" '
            # shown once loaded, the PNG hidden; its height follows the page's (a srcdoc page is same-origin)
            'onload="var f=this,i=f.previousElementSibling;f.style.display=\'block\';if(i)i.style.display=\'none\';'
            'try{var b=f.contentDocument.body,fit=function(){f.style.height=(b.scrollHeight+24)+\'px\'};fit();'
            'new ResizeObserver(fit).observe(b)}catch(e){}" '
            f'srcdoc="{html.escape(page, quote=True)}"></iframe></div>')


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
        """The explorer widget. Selections are traitlets: `w.layer = 2; w.head = 5; w.tab = "neuron"`."""

        _esm = ASSETS / "app.js"
        _css = ASSETS / "app.css"
        info = t.Dict().tag(sync=True)  # static facts (data.facts)
        tab = t.Unicode("attention").tag(sync=True)
        layer = t.Int(0).tag(sync=True)
        head = t.Int(0).tag(sync=True)
        kind = t.Unicode("probs").tag(sync=True)
        pair_filter = t.Unicode("all").tag(sync=True)
        key = t.Unicode("").tag(sync=True)
        query = t.Int(0).tag(sync=True)
        heads = t.List(t.Int()).tag(sync=True)  # the head view's heads; [] = every head (bertviz's start)

        def __init__(self, trace: Trace, *, model=None, ledger=None, compare=None, tab="attention", layer=0, head=0,
                     kind="probs", pair_filter="all", key=None, query=0, pretty=True):
            trace = check_trace(trace).to_host()
            if compare is not None:
                data.check_comparable(trace, compare)
                compare = compare.to_host()
            self.trace, self.model, self.trace_b, self.ledger, self.pretty = trace, model, compare, ledger, pretty
            name = model.name if model is not None else (trace.model_name or "bert")
            source = ("the loaded model's arrays" if ledger is not None
                      else "the config's shapes (pass model= to count the loaded arrays)")
            with data.pretty_labels(pretty):
                info = data.facts(trace, model_name=name, trace_b=compare, ledger_source=source)
            super().__init__(info=info,
                             tab=check_tab(tab, compare is not None), layer=trace.check_layer(layer),
                             head=trace.check_head(head), kind=data.check_kind(trace, kind),
                             pair_filter=self._pair(pair_filter), query=check_query(trace, query),
                             key=data.check_key(trace, key if key is not None else data.stepper_steps(trace)[0]))
            self.on_msg(self._on_msg)

        def _pair(self, pair_filter):
            data.pair_positions(self.trace, pair_filter)  # raises, naming the choices
            return pair_filter

        # --- every selection is checked where it is set, from Python or from the page
        @t.validate("tab")
        def _v_tab(self, proposal):
            return check_tab(proposal["value"], self.trace_b is not None)

        @t.validate("layer")
        def _v_layer(self, proposal):
            return self.trace.check_layer(proposal["value"])

        @t.validate("head")
        def _v_head(self, proposal):
            return self.trace.check_head(proposal["value"])

        @t.validate("kind")
        def _v_kind(self, proposal):
            return data.check_kind(self.trace, proposal["value"])

        @t.validate("pair_filter")
        def _v_pair(self, proposal):
            return self._pair(proposal["value"])

        @t.validate("key")
        def _v_key(self, proposal):
            return data.check_key(self.trace, proposal["value"])

        @t.validate("query")
        def _v_query(self, proposal):
            return check_query(self.trace, proposal["value"])

        @t.validate("heads")
        def _v_heads(self, proposal):
            return [self.trace.check_head(h) for h in proposal["value"]]

        def view_data(self, tab: str | None = None) -> dict:
            """The view data of a tab at the current selection."""
            tab = check_tab(tab or self.tab, self.trace_b is not None)
            args = data.request(tab, layer=self.layer, head=self.head, query=self.query, kind=self.kind,
                                key=self.key)
            with data.pretty_labels(self.pretty):
                return data.view_data(self.trace, tab, trace_b=self.trace_b, ledger=self.ledger, **args)

        def figure(self, tab: str | None = None):
            """The plotly figure of a tab at the current selection."""
            from .figures import view_figure
            vd = self.view_data(tab)
            return view_figure(vd, tab or self.tab, head=self.head if vd.get("per_head", True) else 0,
                               heads=self.heads or None, query=self.query, pair_filter=self.pair_filter, outline=True)

        # --- the front-end asks, the kernel answers
        def _on_msg(self, _widget, content, buffers):
            try:
                if not isinstance(content, dict) or content.get("type") != "view":
                    raise ValueError(f"unknown request {content!r}")
                with data.pretty_labels(self.pretty):
                    header, data_ = answer(self.trace, content, trace_b=self.trace_b, ledger=self.ledger)
                self.send(header, buffers=data_)
            except Exception as e:  # shown in the page: the kernel's log is not where people look
                key = content.get("request_key") if isinstance(content, dict) else None
                self.send(dict(type="error", request_key=key, message=f"{type(e).__name__}: {e}"))

        def show(self) -> None:
            """Display the explorer (as a plotly figure's fig.show() does; in a notebook, the cell's last
            expression shows it too)."""
            from IPython.display import display
            display(self)

        def __repr__(self) -> str:
            return (f"<bertviz-lite explorer: {self.trace.n_real} tokens, {self.trace.num_layers} layers x "
                    f"{self.trace.num_heads} heads; tab={self.tab!r} layer={self.layer} head={self.head}>")

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            out = bundle[0] if isinstance(bundle, tuple) else bundle
            tr = self.trace
            out["text/plain"] = (
                repr(self) + f"\nmodel {self.info['model']}: {tr.config.num_layers} layers, "
                f"H = {tr.config.hidden_size}, "
                f"{tr.config.num_heads} heads of d_k = {tr.config.head_size}\ntokens: {' '.join(self.info['tokens'])}\n"
                "The picture is layer {0}, head {1}'s attention map. "
                "This is a Jupyter widget: it draws in JupyterLab 4, "
                "Notebook 7 or VS Code with its kernel running; elsewhere use bv.explore(tr, static=True) or "
                "bv.export_html(tr, 'page.html').".format(self.layer, self.head))
            try:
                out["image/png"] = base64.b64encode(fallback_png(tr, self.layer, self.head)).decode("ascii")
            except ImportError:  # no matplotlib: the text alone
                pass
            return bundle

        def saved_page(self) -> str:
            """The exported page of this explorer (`export.build_page`: view data, compressed, with the
            front-end), opened at its selection, under SAVED_PAGE_BYTES; every tab up to
            SAVED_EVERY_TAB_UP_TO tokens, the SAVED_LONG_TABS above."""
            from .export import build_page
            state = dict(tab=self.tab, layer=self.layer, head=self.head, heads=list(self.heads), kind=self.kind,
                         pair_filter=self.pair_filter, key=self.key, query=self.query)
            def build(long: bool) -> str:
                shown = dict(state, tab=state["tab"] if not long or state["tab"] in SAVED_LONG_TABS else "attention")
                note = (f"A saved notebook keeps every tab up to {SAVED_EVERY_TAB_UP_TO} tokens and "
                        f"{SAVED_PAGE_BYTES / 1e6:.0f} MB; this input has {self.trace.n_real} tokens: run the notebook "
                        "for every tab, or bv.export_html(tr, 'page.html').")
                with data.pretty_labels(self.pretty):
                    return build_page(self.trace, ledger=self.ledger, compare=self.trace_b, info=self.info,
                                      title=f"bertviz-lite: {self.info['model']}", max_bytes=SAVED_PAGE_BYTES,
                                      state=shown, views=SAVED_LONG_TABS if long else None, note=note if long else "")

            long = self.trace.n_real > SAVED_EVERY_TAB_UP_TO
            page = build(long)
            if len(page.encode()) > SAVED_PAGE_BYTES and not long:  # the cap holds: fewer tabs, said on the page
                page = build(True)
            size = len(page.encode())
            if size > SAVED_PAGE_BYTES:  # saved_bundle keeps the PNG and says why
                raise BertVizError(f"the saved page would take {size / 1e6:.1f} MB, over the "
                                   f"{SAVED_PAGE_BYTES / 1e6:.0f} MB a notebook output may hold; the notebook keeps the "
                                   "picture (bv.export_html(tr, 'page.html') writes every tab)")
            return page

        def saved_bundle(self) -> dict:
            """What a saved notebook keeps of the explorer (one output): the exported page in an iframe
            (text/html: every tab works without a kernel, in JupyterLab, Notebook 7 and nbviewer), a
            PNG of the starting map in the same HTML and as image/png (where HTML is not run: GitHub,
            an untrusted notebook), and the text."""
            out = {"text/plain": f"<saved explorer: tab {self.tab}, layer {self.layer}, head {self.head}>"}
            png = ""
            try:
                png = base64.b64encode(fallback_png(self.trace, self.layer, self.head)).decode("ascii")
                out["image/png"] = png
            except ImportError:  # no matplotlib: the page and the text
                pass
            try:
                out["text/html"] = saved_html(self.saved_page(), png, self.info["title"])
            except Exception as e:  # the widget still shows; the saved notebook keeps the PNG and says why
                out["text/plain"] += f"\n(the saved page could not be built: {type(e).__name__}: {e})"
            return out

        def _ipython_display_(self):
            """Two outputs: what a saved notebook keeps (the exported page, with a PNG for GitHub), then
            the widget.

            JupyterLab 4 and Notebook 7 draw the widget output whenever their widget manager runs:
            the output area picks the highest-ranked type of a trusted bundle (the widget view) and
            never falls back to the bundle's other types, so a saved notebook reopened without its
            kernel says "Error displaying widget: model not found" there. A separate output holding
            the exported page (text/html) is drawn by every front-end without a kernel, every tab
            working; while the widget is live, the front-end hides it in the page (app.js,
            hideSavedPicture). It comes first: reopened without a kernel, JupyterLab still draws its
            widget manager's placeholder for the widget output, and that line then sits under the
            page instead of above it."""
            from IPython.display import display
            bundle = self._repr_mimebundle_()
            data_, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
            data_.pop("image/png", None)
            display(self.saved_bundle(), raw=True)
            display(data_, metadata=meta, raw=True)

    Explorer.__qualname__ = "Explorer"
    _EXPLORER = Explorer
    return Explorer


def widgets_available() -> bool:
    return not missing_modules(("anywidget", "ipywidgets"))


def missing_modules(names) -> list[str]:
    """Which of these modules cannot be imported (without importing them)."""
    import importlib.util
    return [n for n in names if importlib.util.find_spec(n) is None]


def require_views_extra(static: bool) -> None:
    """One clear error when the [views] extra is not installed: the widget needs anywidget and
    ipywidgets, static=True needs plotly."""
    missing = missing_modules(("plotly",) if static else ("anywidget", "ipywidgets"))
    if missing:
        from ..errors import BertVizError
        raise BertVizError(f"bv.explore{'(static=True)' if static else ''} needs the [views] extra "
                           f"({', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed): "
                           "pip install 'bertviz-lite[views]'")


def explore(trace, model=None, *, tokens=None, sentence_b_start: int | None = None, compare=None,
            tab: str = "attention", layer: int | None = None, head: int = 0, kind: str = "probs",
            pair_filter: str = "all", key: str | None = None, query: int = 0, prettify_tokens: bool = True,
            static: bool = False):
    """The explorer widget for a trace, or with static=True the plotly figure of one tab.

    trace: `model.trace(text)` (every layer's attn.probs recorded), or attention computed elsewhere
    (`outputs.attentions`, torch tensors included) with tokens= (and sentence_b_start= for a pair).
    model: the Bert that made it (optional): the parameters tab then counts its loaded arrays (else
    the config's shapes). compare: a second trace of the same model and length (an edited run,
    another sentence): adds the compare tab. tab: one of "attention", "head", "token", "model",
    "neuron", "step", "params", "compare"; layer, head, kind ("probs" or "scores"), pair_filter ("all",
    "A->A", "A->B", "B->A", "B->B" for sentence pairs), key (a trace key for the step-through) and
    query (a token index) set the starting selection (layer: 0, or with compare= the first layer
    whose attention differs). prettify_tokens: labels without Ġ and ▁ (## kept, as bertviz keeps it;
    `bertviz_lite.foreign.prettify_tokens`; False shows the tokenizer's strings). static=True
    returns a `go.Figure`.
    """
    trace = check_trace(data.as_trace(trace, tokens, sentence_b_start=sentence_b_start))
    model = check_model(model, trace)
    if layer is None:
        layer = 0
        if compare is not None:
            data.check_comparable(trace, compare)
            layer = data.first_differing_layer(trace, compare)
    ledger: ParamLedger | None = count_params(model) if model is not None else None
    for name, flag in (("static", static), ("prettify_tokens", prettify_tokens)):
        if flag is not True and flag is not False:
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    require_views_extra(static)
    if static:
        from .figures import view_figure
        check_tab(tab, compare is not None)
        data.check_kind(trace, kind)
        data.pair_positions(trace, pair_filter)
        layer, head, query = trace.check_layer(layer), trace.check_head(head), check_query(trace, query)
        args = data.request(tab, layer=layer, head=head, query=query, kind=kind,
                            key=data.check_key(trace, key if key is not None else data.stepper_steps(trace)[0]))
        with data.pretty_labels(prettify_tokens):
            vd = data.view_data(trace, tab, trace_b=compare, ledger=ledger, **args)
        return view_figure(vd, tab, head=head if vd.get("per_head", True) else 0, query=query,
                           pair_filter=pair_filter, outline=True)
    return _widget_class()(trace, model=model, ledger=ledger, compare=compare, tab=tab, layer=layer, head=head,
                           kind=kind, pair_filter=pair_filter, key=key, query=query, pretty=prettify_tokens)


def head_view(attention, tokens=None, sentence_b_start: int | None = None, *, layer: int = 0, heads=None,
              pair_filter: str = "all", prettify_tokens: bool = True):
    """bertviz's head view, interactive: the explorer opened on its head view tab.

        outputs = hf_model(inputs, output_attentions=True)          # bertviz's README example
        bv.views.head_view(outputs.attentions, tokens)

    attention: `outputs.attentions` (L tensors [batch, heads, n, n] of any framework) with its
    tokens, or a bertviz_lite Trace (no tokens). Every head is shown at the start, one colour each;
    the layer select, hovering a token (only its lines), clicking a head's box (toggle), double-
    clicking it (that head alone), "all heads" and the sentence-pair filter work as in bertviz.
    heads=: the heads to start with. The plotly figure: `bv.views.head_view_figure(trace, layer)`.
    head_view(tr, 2) (a Trace and a layer, the plotly figure's old call) opens layer 2."""
    if isinstance(attention, Trace) and isinstance(tokens, (int, np.integer)) and not isinstance(tokens, bool):
        attention, tokens, layer = attention, None, int(tokens)
    trace = data.as_trace(attention, tokens, sentence_b_start=sentence_b_start, what="head_view()")
    w = explore(trace, tab="head", layer=layer, pair_filter=pair_filter, prettify_tokens=prettify_tokens)
    if heads is not None:
        if isinstance(heads, (int, np.integer)) and not isinstance(heads, bool):
            heads = [heads]  # one head
        if isinstance(heads, (str, bytes)) or not hasattr(heads, "__iter__"):
            raise TypeError(f"heads= takes a list of head indices (e.g. heads=[2, 5]), got {type(heads).__name__}")
        w.heads = list(dict.fromkeys(w.trace.check_head(h) for h in heads))  # each once, in the order given
    return w


def model_view(attention, tokens=None, sentence_b_start: int | None = None, *, pair_filter: str = "all",
               prettify_tokens: bool = True):
    """bertviz's model view, interactive: the explorer opened on its model view tab (every layer x
    head as a thumbnail; click one to open it, the sentence-pair filter above). Arguments as
    `head_view`. The plotly figure: `bv.views.model_view_figure(trace)`."""
    trace = data.as_trace(attention, tokens, sentence_b_start=sentence_b_start, what="model_view()")
    return explore(trace, tab="model", pair_filter=pair_filter, prettify_tokens=prettify_tokens)


def neuron_view(trace, *, layer: int = 0, head: int = 0, query: int = 0, prettify_tokens: bool = True):
    """bertviz's neuron view, interactive: the explorer opened on its neuron view tab (how a query's
    q and each key's k make the scores and the weights). Needs a trace that recorded attn.q and
    attn.k (`model.trace(text)`); attention from elsewhere has no queries and keys. The plotly
    figure: `bv.views.neuron_view_figure(trace, layer, head, query)`."""
    if not isinstance(trace, Trace):  # attention alone can never fill it: it draws the queries and the keys
        raise TypeError(f"neuron_view() takes a Trace from model.trace(text), got {type(trace).__name__}: it draws "
                        "each layer's queries and keys (attn.q, attn.k), which attention from elsewhere "
                        "(outputs.attentions) does not have; head_view and model_view take that")
    trace = check_trace(trace, "neuron_view()")
    data.check_neuron(trace, "neuron_view()")
    return explore(trace, tab="neuron", layer=layer, head=head, query=query, prettify_tokens=prettify_tokens)
