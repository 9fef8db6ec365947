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
from . import codec, data, records
# the saved notebook page's cap, up to how many tokens it keeps every tab, how maps travel (why: limits.py)
from .limits import EXACT_UP_TO, SAVED_EVERY_TAB_UP_TO, SAVED_PAGE_BYTES

TABS = data.VIEWS
# above SAVED_EVERY_TAB_UP_TO tokens the saved page keeps only these tabs (their records' saved_long): the
# step-through's ~100 tensors and the one-token view would take seconds to build each time the explorer is shown
# (7 s for MiniLM at 500 tokens) and megabytes to keep
SAVED_LONG_TABS = tuple(r.name for r in records.RECORDS if r.saved_long)
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


def shown_indices(values, total: int, what: str) -> list[int] | None:
    """include_layers= / include_heads=: the indices to show, each once, in order (None: all of them)."""
    if values is None:
        return None
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = [values]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"include_{what}s= takes a list of {what} indices (e.g. include_{what}s=[0, 5]), "
                        f"got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < total:
            raise ValueError(f"include_{what}s= holds {v!r}; each must be a {what} index 0..{total - 1}")
        out.append(int(v))
    if not out:
        raise ValueError(f"include_{what}s= is empty; leave it out to show every {what}")
    return sorted(set(out))


DISPLAY_MODES = ("light", "dark")  # bertviz's display_mode; None follows the notebook's theme


def shown_parts(trace, include_layers=None, include_heads=None, display_mode=None) -> dict:
    """The facts that restrict what the front-end shows (bertviz's include_layers, include_heads,
    display_mode): absent when everything is shown in the notebook's own colours."""
    if display_mode is not None and display_mode not in DISPLAY_MODES:
        raise ValueError(f"display_mode must be 'light' or 'dark' (bertviz's), or None to follow the notebook's "
                         f"theme; got {display_mode!r}")
    out = dict(layers_shown=shown_indices(include_layers, trace.num_layers, "layer"),
               heads_shown=shown_indices(include_heads, trace.num_heads, "head"), mode=display_mode)
    return {k: v for k, v in out.items() if v is not None}


def check_shown(index: int, shown, what: str) -> int:
    if shown is not None and index not in shown:
        raise ValueError(f"{what} {index} is not among those shown (include_{what}s={shown})")
    return index


def sizes_text(sizes: dict, trace) -> str:
    """The model's sizes as far as they are known: attention from elsewhere fixes only L and n_h."""
    known = f"{trace.num_layers} layers, {trace.num_heads} heads"
    if "H" in sizes:
        return f"{trace.num_layers} layers, H = {sizes['H']}, {trace.num_heads} heads of d_k = {sizes['d_k']}"
    return known + " (H and d_k unknown: only the attention maps were given)"


def wire_dtypes(vd: dict) -> dict:
    """How each array travels to the notebook: float32, or uint16 for a token x token map (`vd["map_arrays"]`:
    its view record's `maps`, such as the neuron view's scores and weights) of more than EXACT_UP_TO tokens."""
    return {name: ("u2" if name in vd["map_arrays"] and np.shape(a)[-1] > EXACT_UP_TO else "f4")
            for name, a in vd["arrays"].items()}


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
        # the view data of the tab it opens on, in the widget's state (its arrays as binary buffers): the
        # first picture needs no round trip to a kernel that may still be busy (first_view)
        first = t.Dict().tag(sync=True)

        def __init__(self, trace: Trace, *, model=None, ledger=None, compare=None, tab="attention", layer=0, head=0,
                     kind="probs", pair_filter="all", key=None, query=0, pretty=True, include_layers=None,
                     include_heads=None, display_mode=None):
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
            info.update(shown_parts(trace, include_layers, include_heads, display_mode))
            super().__init__(info=info,
                             tab=check_tab(tab, compare is not None),
                             layer=check_shown(trace.check_layer(layer), info.get("layers_shown"), "layer"),
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
            return check_shown(self.trace.check_layer(proposal["value"]), self.info.get("layers_shown"), "layer")

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
            return [check_shown(self.trace.check_head(h), self.info.get("heads_shown"), "head")
                    for h in proposal["value"]]

        def first_view(self) -> dict:
            """The starting tab's view data as the front-end asks for it ({key, header, buffers}), for `first`."""
            tab = self.tab
            view = data.REQUESTS[tab][0]
            args = data.request(tab, layer=self.layer, head=self.head, query=self.query, kind=self.kind,
                                key=self.key)
            with data.pretty_labels(self.pretty):
                header, buffers = answer(self.trace, dict(view=view, args=args), trace_b=self.trace_b,
                                         ledger=self.ledger)
            return dict(key=header["request_key"], header=header, buffers=[bytes(b) for b in buffers])

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

        def _repr_mimebundle_(self, picture: bool = True, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            out = bundle[0] if isinstance(bundle, tuple) else bundle
            tr = self.trace
            out["text/plain"] = (
                repr(self) + f"\nmodel {self.info['model']}: {sizes_text(self.info['sizes'], tr)}"
                f"\ntokens: {' '.join(self.info['tokens'])}\n"
                "The picture is layer {0}, head {1}'s attention map. "
                "This is a Jupyter widget: it draws in JupyterLab 4, "
                "Notebook 7 or VS Code with its kernel running; elsewhere use bv.explore(tr, static=True) or "
                "bv.export_html(tr, 'page.html').".format(self.layer, self.head))
            if picture:
                try:
                    out["image/png"] = base64.b64encode(fallback_png(tr, self.layer, self.head)).decode("ascii")
                except ImportError:  # no matplotlib: the text alone
                    pass
            return bundle

        def state(self) -> dict:
            """The selection, as the exported page starts from it."""
            return dict(tab=self.tab, layer=self.layer, head=self.head, heads=list(self.heads), kind=self.kind,
                        pair_filter=self.pair_filter, key=self.key, query=self.query)

        def page(self, max_bytes: int | None = None) -> str:
            """This explorer as one self-contained page (`export_html`'s, every tab, under max_bytes), opened
            at its selection: what bertviz's calls give with html_action="return"."""
            from .export import DEFAULT_MAX_BYTES, build_page, check_max_bytes
            max_bytes = check_max_bytes(DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
            with data.pretty_labels(self.pretty):
                return build_page(self.trace, ledger=self.ledger, compare=self.trace_b, info=self.info,
                                  title=f"bertviz-lite: {self.info['model']}", max_bytes=max_bytes, state=self.state())

        def saved_page(self) -> str:
            """The exported page of this explorer (`export.build_page`: view data, compressed, with the
            front-end), opened at its selection, under SAVED_PAGE_BYTES; every tab up to
            SAVED_EVERY_TAB_UP_TO tokens, the SAVED_LONG_TABS above."""
            from .export import build_page
            state = self.state()
            def build(long: bool) -> str:
                shown = dict(state, tab=state["tab"] if not long or state["tab"] in SAVED_LONG_TABS else "attention")
                note = (f"A saved notebook keeps every tab up to {SAVED_EVERY_TAB_UP_TO} tokens and "
                        f"{SAVED_PAGE_BYTES / 1e6:.0f} MB; this input has {self.trace.n_real} tokens: run the notebook "
                        "for every tab, or bv.export_html(tr, 'page.html').")
                with data.pretty_labels(self.pretty):
                    return build_page(self.trace, ledger=self.ledger, compare=self.trace_b, info=self.info,
                                      title=f"bertviz-lite: {self.info['model']}", max_bytes=SAVED_PAGE_BYTES,
                                      state=shown, views=SAVED_LONG_TABS if long else None, note=note if long else "")

            # build_page keeps the cap or refuses; every tab first (up to SAVED_EVERY_TAB_UP_TO tokens), then
            # SAVED_LONG_TABS (said on the page), then none: saved_bundle keeps the PNG and says why
            for long in ((False, True) if self.trace.n_real <= SAVED_EVERY_TAB_UP_TO else (True,)):
                try:
                    return build(long)
                except BertVizError as e:
                    refused = e
            raise BertVizError(f"the saved page would be over the {SAVED_PAGE_BYTES / 1e6:.0f} MB a notebook output "
                               f"may hold ({refused}); the notebook keeps the picture (bv.export_html(tr, 'page.html') "
                               "writes every tab)")

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
            import uuid
            if not self.first:
                self.first = self.first_view()  # drawn as soon as the widget output arrives
            bundle = self._repr_mimebundle_(picture=False)  # the saved output carries the picture
            data_, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
            # the saved output's place first, then the widget, then what the saved output holds: the page and
            # its PNG take a second or more to build, and the widget draws meanwhile (first picture)
            place = uuid.uuid4().hex
            display({"text/plain": ""}, raw=True, display_id=place)
            display(data_, metadata=meta, raw=True)
            display(self.saved_bundle(), raw=True, display_id=place, update=True)

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
            tab: str = "attention", layer: int | None = None, head: int = 0, heads=None, kind: str = "probs",
            pair_filter: str = "all", key: str | None = None, query: int = 0, prettify_tokens: bool = True,
            include_layers=None, include_heads=None, display_mode: str | None = None, static: bool = False):
    """The explorer widget for a trace (returned: the cell's last line shows it, `w.show()` anywhere),
    or with static=True the plotly figure of one tab. bertviz's calls (`head_view`, `model_view`,
    `neuron_view`) display it themselves and return None.

    trace: `model.trace(text)` (every layer's attn.probs recorded), or attention computed elsewhere
    (`outputs.attentions`, torch tensors included) with tokens= (and sentence_b_start= for a pair).
    model: the Bert that made it (optional): the parameters tab then counts its loaded arrays (else
    the config's shapes). compare: a second trace of the same model and length (an edited run,
    another sentence): adds the compare tab. tab: one of "attention", "head", "token", "model",
    "neuron", "step", "params", "compare"; layer, head, kind ("probs" or "scores"), pair_filter ("all",
    "A->A", "A->B", "B->A", "B->B" for sentence pairs), key (a trace key for the step-through) and
    query (a token index) set the starting selection (layer: the first shown, or with compare= the
    first layer whose attention differs); heads: the head view's heads at the start (default every
    head). include_layers / include_heads (bertviz's): show only these layers / heads (the layer
    selects, the head boxes, the model view's grid). display_mode: "light" or "dark" (bertviz's
    colours), None (default) follows the notebook's theme. prettify_tokens: labels without Ġ and ▁
    (## kept, as bertviz keeps it; `bertviz_lite.foreign.prettify_tokens`; False shows the tokenizer's
    strings). static=True returns a `go.Figure`.
    """
    trace = check_trace(data.as_trace(trace, tokens, sentence_b_start=sentence_b_start))
    model = check_model(model, trace)
    shown = shown_parts(trace, include_layers, include_heads, display_mode)
    if layer is None:
        layer = shown.get("layers_shown", [0])[0]
        if compare is not None:
            data.check_comparable(trace, compare)
            layer = max(layer, data.first_differing_layer(trace, compare))
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
                           heads=head_list(trace, heads), pair_filter=pair_filter, outline=True)
    w = _widget_class()(trace, model=model, ledger=ledger, compare=compare, tab=tab, layer=layer, head=head,
                        kind=kind, pair_filter=pair_filter, key=key, query=query, pretty=prettify_tokens,
                        include_layers=include_layers, include_heads=include_heads, display_mode=display_mode)
    if heads is not None:
        w.heads = head_list(trace, heads)
    return w


def head_list(trace, heads) -> list[int] | None:
    """heads=: one index or a list of them, each once, in the order given (None: every head)."""
    if heads is None:
        return None
    if isinstance(heads, (int, np.integer)) and not isinstance(heads, bool):
        heads = [heads]  # one head
    if isinstance(heads, (str, bytes)) or not hasattr(heads, "__iter__"):
        raise TypeError(f"heads= takes a list of head indices (e.g. heads=[2, 5]), got {type(heads).__name__}")
    return list(dict.fromkeys(trace.check_head(h) for h in heads))


HTML_ACTIONS = ("view", "return")  # bertviz's html_action


class ViewHTML:
    """What `html_action="return"` gives: the view's self-contained page (`.data`, as bertviz's
    returned HTML object has it: write it to a file to share), shown in an iframe when displayed."""

    def __init__(self, page: str, title: str):
        self.data, self.title = page, title

    def _repr_html_(self) -> str:
        return saved_html(self.data, "", self.title)

    def __repr__(self) -> str:
        return f"<bertviz-lite page: {self.title}, {len(self.data.encode()) / 1e6:.1f} MB (.data is its HTML)>"


def show_or_return(w, html_action: str, what: str):
    """bertviz's ending: "view" displays the explorer where the call is (after a print, with a trailing
    `;`, inside a function) and returns None; "return" gives the page's HTML instead."""
    if html_action == "return":
        return ViewHTML(w.page(), w.info["title"])
    from IPython.display import display
    display(w)
    return None


def check_html_action(html_action, what: str) -> str:
    if html_action not in HTML_ACTIONS:
        raise ValueError(f"{what}: html_action must be 'view' (display it, the default) or 'return' (the page's "
                         f"HTML), as bertviz's; got {html_action!r}")
    return html_action


def head_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
              layer: int | None = None, heads=None, *, include_layers=None, include_heads=None,
              display_mode: str | None = None, html_action: str = "view", pair_filter: str = "all"):
    """bertviz's head view (bertviz's signature), interactive: the explorer opened on its head view
    tab, displayed where it is called; returns None (html_action="return": the page's HTML, as
    bertviz). For the widget object, call `bv.explore(..., tab="head")`.

        outputs = hf_model(inputs, output_attentions=True)          # bertviz's README example
        head_view(outputs.attentions, tokens)

    attention: `outputs.attentions` (L tensors [1, heads, n, n] of any framework) with its tokens, or
    a bertviz_lite Trace (no tokens). Every head is shown at the start, one colour each; the layer
    select, hovering a token (only its lines), clicking a head's box (toggle), double-clicking it
    (that head alone; again: every head), "all heads" and the sentence-pair filter work as in bertviz.
    layer, heads: the start; include_layers / include_heads: show only those; display_mode: "light" or
    "dark" (default: the notebook's theme). The plotly figure: `bv.views.head_view_figure(trace, layer)`.
    head_view(tr, 2) (a Trace and a layer, the plotly figure's old call) opens layer 2."""
    check_html_action(html_action, "head_view()")
    if isinstance(attention, Trace) and isinstance(tokens, (int, np.integer)) and not isinstance(tokens, bool):
        attention, tokens, layer = attention, None, int(tokens)
    trace = data.as_trace(attention, tokens, sentence_b_start=sentence_b_start, what="head_view()")
    w = explore(trace, tab="head", layer=layer, heads=heads, pair_filter=pair_filter, prettify_tokens=prettify_tokens,
                include_layers=include_layers, include_heads=include_heads, display_mode=display_mode)
    return show_or_return(w, html_action, "head_view()")


def model_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
               display_mode: str | None = None, *, include_layers=None, include_heads=None,
               html_action: str = "view", pair_filter: str = "all"):
    """bertviz's model view (bertviz's signature), interactive: the explorer opened on its model view
    tab (every layer x head as a thumbnail; click one to open it, the sentence-pair filter above),
    displayed where it is called; returns None (html_action="return": the page's HTML). Arguments as
    `head_view`. The plotly figure: `bv.views.model_view_figure(trace)`; the widget: `bv.explore(...,
    tab="model")`."""
    check_html_action(html_action, "model_view()")
    trace = data.as_trace(attention, tokens, sentence_b_start=sentence_b_start, what="model_view()")
    w = explore(trace, tab="model", pair_filter=pair_filter, prettify_tokens=prettify_tokens,
                include_layers=include_layers, include_heads=include_heads, display_mode=display_mode)
    return show_or_return(w, html_action, "model_view()")


def neuron_view(model, model_type: str | None = None, tokenizer=None, sentence_a: str | None = None,
                sentence_b: str | None = None, display_mode: str | None = None, layer: int | None = None,
                head: int | None = None, html_action: str = "view", *, query: int = 0, prettify_tokens: bool = True):
    """bertviz's neuron view (bertviz's signature `neuron_view(model, model_type, tokenizer, sentence_a,
    sentence_b)`), interactive: the explorer opened on its neuron view tab (how a query's q and each
    key's k make the scores and the weights), displayed where it is called; returns None
    (html_action="return": the page's HTML).

    model: a Hugging Face transformers model of the BERT family (BertModel, RobertaModel, ...; bertviz's
    own BertModel too) with its tokenizer: the sentences are traced through bertviz-lite's BERT with
    that model's weights; or a bertviz_lite model (`bv.load(...)`; tokenizer not needed); or a Trace
    (`neuron_view(tr, layer=2, head=5)`). Attention from elsewhere has no queries and keys. The plotly
    figure: `bv.views.neuron_view_figure(trace, layer, head, query)`."""
    check_html_action(html_action, "neuron_view()")
    trace = neuron_trace(model, model_type, tokenizer, sentence_a, sentence_b)
    data.check_neuron(trace, "neuron_view()")
    w = explore(trace, tab="neuron", layer=0 if layer is None else layer, head=0 if head is None else head,
                query=query, prettify_tokens=prettify_tokens, display_mode=display_mode)
    return show_or_return(w, html_action, "neuron_view()")


def neuron_trace(model, model_type, tokenizer, sentence_a, sentence_b) -> Trace:
    """The trace the neuron view draws, from whatever bertviz's first argument is here."""
    from ..model import Bert
    if isinstance(model, Trace):
        if sentence_a is not None or tokenizer is not None:
            raise TypeError("neuron_view(): a Trace carries its own sentences; pass neuron_view(tr, layer=..., "
                            "head=...), or a model with its tokenizer and sentences")
        return check_trace(model, "neuron_view()")
    if sentence_a is None or not isinstance(sentence_a, str) or not sentence_a.strip():
        if not isinstance(model, Bert) and not hasattr(model, "save_pretrained"):
            raise TypeError(f"neuron_view() takes a Trace from model.trace(text), or bertviz's call neuron_view(model, "
                            f"model_type, tokenizer, sentence_a, sentence_b); got a {type(model).__name__}: it draws "
                            "each layer's queries and keys (attn.q, attn.k), which attention from elsewhere "
                            "(outputs.attentions) does not have; head_view and model_view take that")
        raise ValueError(f"neuron_view() needs sentence_a, the text to trace (a non-empty string), got {sentence_a!r}")
    if isinstance(model, Bert):
        return model.trace(sentence_a, pair=sentence_b)
    return bert_from_transformers(model, tokenizer, model_type, "neuron_view()").trace(sentence_a, pair=sentence_b)


def bert_from_transformers(model, tokenizer, model_type=None, what: str = "neuron_view()"):
    """A bertviz-lite model with the weights and tokenizer of a Hugging Face transformers model of the
    BERT family (bertviz's neuron_view(model, model_type, tokenizer, ...) arguments), read through
    `load()` from the files the model and tokenizer write with `save_pretrained`, so every check of a
    checkpoint applies."""
    import tempfile

    from ..families import FAMILIES
    from ..foreign import shorten
    from ..loading import load
    runs = ", ".join(sorted(FAMILIES))
    other = "; for any other model, head_view(outputs.attentions, tokens) and model_view draw its attention"
    if model_type is not None and model_type not in FAMILIES:
        raise BertVizError(f"{what} traces the sentences through bertviz-lite's own BERT, which runs the model types "
                           f"{runs}; got model_type {shorten(str(model_type))!r}{other}")
    for name, obj in (("model", model), ("tokenizer", tokenizer)):
        if not callable(getattr(obj, "save_pretrained", None)):
            raise TypeError(f"{what}: {name} must be a Hugging Face transformers {name} (with save_pretrained), or "
                            f"pass a bertviz-lite model (bv.load(...)) or a Trace; got {type(obj).__name__}")
    with tempfile.TemporaryDirectory(prefix="bertviz-lite-hf-") as folder:
        try:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
        except Exception as e:
            raise BertVizError(f"{what} could not write the model's files with save_pretrained "
                               f"({type(e).__name__}: {e})") from e
        try:
            return load(folder)
        except (BertVizError, ValueError, KeyError, OSError) as e:
            raise BertVizError(f"{what} traces the sentences through bertviz-lite's own BERT, which cannot load this "
                               f"{type(model).__name__} (it runs the model types {runs}): {e}{other}") from e
