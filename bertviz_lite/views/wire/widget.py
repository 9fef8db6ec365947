"""The explorer widget: an anywidget over a trace, whose front-end is `assets/app.js` (the file the
exported page runs). Importing this module imports anywidget: `explore()` (explorer.py) imports it
when it makes a widget, so the engine and `import bertviz_lite` load no widget library.

The page asks for view data ({type: "view", view, args}); the kernel answers with
`data.view_data(...)` packed by `codec.encode` as binary buffers (float32, or uint16 scaled per
map above EXACT_UP_TO tokens), never JSON numbers (`answer`). Every selection is a traitlet,
checked where it is set (`check_selection`), from Python or from the page.

A saved notebook keeps every tab: the explorer is shown as its exported page (`saved_bundle`: the
view data, compressed, with the front-end, under SAVED_PAGE_BYTES, in an iframe; a PNG of the
starting map where HTML does not run) followed by the widget (`Explorer._ipython_display_` says
why two outputs).
"""

from __future__ import annotations

import base64
import html
import io

import anywidget
import numpy as np
import traitlets as t

from ...errors import BertVizError
from ...trace import Trace
from . import codec
from ..model import data, records
from .export import ASSETS, DEFAULT_MAX_BYTES, build_page, check_max_bytes
from .selection import check_query, check_shown, check_tab, shown_parts

# the saved notebook page's cap, up to how many tokens it keeps every tab, how maps travel (why: limits.py)
from ..model.limits import EXACT_UP_TO, SAVED_EVERY_TAB_UP_TO, SAVED_PAGE_BYTES

# above SAVED_EVERY_TAB_UP_TO tokens the saved page keeps only these tabs (their records' saved_long): the
# step-through's ~100 tensors and the one-token view would take seconds to build each time the explorer is shown
# (7 s for MiniLM at 500 tokens) and megabytes to keep
SAVED_LONG_TABS = tuple(r.name for r in records.RECORDS if r.saved_long)


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
    from ..render.static import to_png
    buf = io.BytesIO()
    # small enough to keep in a saved notebook: above 128 tokens, block means (a 512-token map is ~1 MB of noise)
    to_png(data.attention(trace, layer, kind, max_tokens=EXACT_UP_TO), buf, head=head, dpi=90)
    return buf.getvalue()


def fallback_png_b64(trace, layer: int, head: int) -> str | None:
    """fallback_png as base64 text, or None without matplotlib (the text alone then)."""
    try:
        return base64.b64encode(fallback_png(trace, layer, head)).decode("ascii")
    except ImportError:
        return None


def saved_html(page: str, png_b64: str, title: str) -> str:
    """The saved output's HTML: the page in an iframe (srcdoc), shown once it loads; until then, and
    wherever iframes or their load handler are stripped (GitHub, an untrusted notebook), the PNG."""
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


class ViewHTML:
    """What `html_action="return"` gives: the view's self-contained page (`.data`, as bertviz's
    returned HTML object has it: write it to a file to share), shown in an iframe when displayed."""

    def __init__(self, page: str, title: str):
        self.data, self.title = page, title

    def _repr_html_(self) -> str:
        return saved_html(self.data, "", self.title)

    def __repr__(self) -> str:
        return f"<bertviz-lite page: {self.title}, {len(self.data.encode()) / 1e6:.1f} MB (.data is its HTML)>"


def check_pair(trace, pair_filter: str) -> str:
    data.pair_positions(trace, pair_filter)  # raises, naming the choices
    return pair_filter


def check_layer(trace, info: dict, layer: int) -> int:
    return check_shown(trace.check_layer(layer), info.get("layers_shown"), "layer")


def check_heads(trace, info: dict, heads) -> list[int]:
    return [check_shown(trace.check_head(h), info.get("heads_shown"), "head") for h in heads]


# how each selection is checked where it is set (from Python or from the page): f(trace, info, compare?, value)
SELECTION_CHECKS = {
    "tab": lambda trace, info, compare, tab: check_tab(tab, compare),
    "layer": lambda trace, info, compare, layer: check_layer(trace, info, layer),
    "head": lambda trace, info, compare, head: trace.check_head(head),
    "kind": lambda trace, info, compare, kind: data.check_kind(trace, kind),
    "pair_filter": lambda trace, info, compare, pair_filter: check_pair(trace, pair_filter),
    "query": lambda trace, info, compare, query: check_query(trace, query),
    "key": lambda trace, info, compare, key: data.check_key(trace, key),
    "heads": lambda trace, info, compare, heads: check_heads(trace, info, heads),
}


def check_selection(trace, info: dict, compare: bool, name: str, value):
    """One selection (a SELECTION_CHECKS name) checked: the value, or a clear error naming the choices."""
    return SELECTION_CHECKS[name](trace, info, compare, value)


def explorer_facts(trace, model, compare, ledger, pretty: bool, shown: dict) -> dict:
    """The widget's static facts (data.facts and what include_layers / include_heads / display_mode show)."""
    name = model.name if model is not None else (trace.model_name or "bert")
    source = ("the loaded model's arrays" if ledger is not None
              else "the config's shapes (pass model= to count the loaded arrays)")
    with data.pretty_labels(pretty):
        info = data.facts(trace, model_name=name, trace_b=compare, ledger_source=source)
    return dict(info, **shown)


def text_fallback(w) -> str:
    """The widget's text/plain: what it is, the model's known sizes, the tokens, and where it draws."""
    return (repr(w) + f"\nmodel {w.info['model']}: {sizes_text(w.info['sizes'], w.trace)}"
            f"\ntokens: {' '.join(w.info['tokens'])}\n"
            "The picture is layer {0}, head {1}'s attention map. "
            "This is a Jupyter widget: it draws in JupyterLab 4, "
            "Notebook 7 or VS Code with its kernel running; elsewhere use bv.explore(tr, static=True) or "
            "bv.export_html(tr, 'page.html').".format(w.layer, w.head))


def saved_page_with(w, long: bool, max_bytes: int | None = None) -> str:
    """The explorer's page under max_bytes (SAVED_PAGE_BYTES): every tab, or (long) the SAVED_LONG_TABS, said on
    the page."""
    state = w.state()
    shown = dict(state, tab=state["tab"] if not long or state["tab"] in SAVED_LONG_TABS else "attention")
    note = (f"A saved notebook keeps every tab up to {SAVED_EVERY_TAB_UP_TO} tokens and "
            f"{SAVED_PAGE_BYTES / 1e6:.0f} MB; this input has {w.trace.n_real} tokens: run the notebook "
            "for every tab, or bv.export_html(tr, 'page.html').")
    with data.pretty_labels(w.pretty):
        return build_page(w.trace, ledger=w.ledger, compare=w.trace_b, info=w.info,
                          title=f"bertviz-lite: {w.info['model']}",
                          max_bytes=SAVED_PAGE_BYTES if max_bytes is None else max_bytes,
                          state=shown, views=SAVED_LONG_TABS if long else None, note=note if long else "")


def fitting_saved_page(w, max_bytes: int | None = None) -> str:
    """The first saved page that fits max_bytes (SAVED_PAGE_BYTES): build_page keeps the cap or refuses; every
    tab first (up to SAVED_EVERY_TAB_UP_TO tokens), then SAVED_LONG_TABS (said on the page), then none:
    saved_bundle keeps the PNG and says why."""
    for long in ((False, True) if w.trace.n_real <= SAVED_EVERY_TAB_UP_TO else (True,)):
        try:
            return saved_page_with(w, long, max_bytes)
        except BertVizError as e:
            refused = e
    raise BertVizError(f"the saved page would be over the {SAVED_PAGE_BYTES / 1e6:.0f} MB a notebook output "
                       f"may hold ({refused}); the notebook keeps the picture (bv.export_html(tr, 'page.html') "
                       "writes every tab)")


def saved_output(w) -> dict:
    """What a saved notebook keeps of the explorer (one output): the exported page in an iframe
    (text/html: every tab works without a kernel, in JupyterLab, Notebook 7 and nbviewer), a PNG of
    the starting map in the same HTML and as image/png (where HTML is not run: GitHub, an untrusted
    notebook), and the text."""
    out = {"text/plain": f"<saved explorer: tab {w.tab}, layer {w.layer}, head {w.head}>"}
    png = fallback_png_b64(w.trace, w.layer, w.head)
    if png is not None:
        out["image/png"] = png
    try:
        out["text/html"] = capped_saved_html(w, png or "")
    except Exception as e:  # the widget still shows; the saved notebook keeps the PNG and says why
        out["text/plain"] += f"\n(the saved page could not be built: {type(e).__name__}: {e})"
    return data.no_surrogates(out)  # a notebook is saved as UTF-8


def capped_saved_html(w, png: str, tries: int = 3) -> str:
    """saved_html of the explorer's page such that the whole output (that HTML and the PNG beside it) keeps to
    SAVED_PAGE_BYTES. The page goes into srcdoc html-escaped, which grows it (by 2.4% on a MiniLM page; six times
    for tokens full of '"', each written &quot;), and the PNG is kept twice: the page is built under what is left,
    then again under a budget shrunk by the growth it showed."""
    def size(text):  # bytes as saved; a lone surrogate (saved as U+FFFD, saved_output) counts its 3 bytes
        return len(text.encode("utf-8", "surrogatepass"))

    room = SAVED_PAGE_BYTES - 2 * len(png) - 4096  # the PNG in the HTML and as image/png; the iframe's wrapper
    budget = room
    for _ in range(tries):
        page = fitting_saved_page(w, budget)
        out = saved_html(page, png, w.info["title"])
        if size(out) + len(png) <= SAVED_PAGE_BYTES:
            return out
        growth = (size(out) - len(png)) / max(1, size(page))
        budget = int(min(budget, room / growth) * 0.98)
    raise BertVizError(f"the saved output would be over the {SAVED_PAGE_BYTES / 1e6:.0f} MB a notebook output may "
                       "hold once its page is escaped into the notebook; the notebook keeps the picture "
                       "(bv.export_html(tr, 'page.html') writes every tab)")


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
        trace = data.check_trace(trace).to_host()
        if compare is not None:
            data.check_comparable(trace, compare)
            compare = compare.to_host()
        self.trace, self.model, self.trace_b, self.ledger, self.pretty = trace, model, compare, ledger, pretty
        shown = shown_parts(trace, include_layers, include_heads, display_mode)
        info = explorer_facts(trace, model, compare, ledger, pretty, shown)
        key = key if key is not None else data.stepper_steps(trace)[0]
        selection = dict(tab=tab, layer=layer, head=head, kind=kind, pair_filter=pair_filter, query=query, key=key)
        super().__init__(info=info, **{name: check_selection(trace, info, compare is not None, name, value)
                                       for name, value in selection.items()})
        self.on_msg(self._on_msg)

    @t.validate(*SELECTION_CHECKS)
    def _check(self, proposal):
        return check_selection(self.trace, self.info, self.trace_b is not None, proposal["trait"].name,
                               proposal["value"])

    def _args(self, tab: str) -> dict:
        return data.request(tab, layer=self.layer, head=self.head, query=self.query, kind=self.kind, key=self.key)

    def first_view(self) -> dict:
        """The starting tab's view data as the front-end asks for it ({key, header, buffers}), for `first`."""
        request = dict(view=data.REQUESTS[self.tab][0], args=self._args(self.tab))
        with data.pretty_labels(self.pretty):
            header, buffers = answer(self.trace, request, trace_b=self.trace_b, ledger=self.ledger)
        return dict(key=header["request_key"], header=header, buffers=[bytes(b) for b in buffers])

    def view_data(self, tab: str | None = None) -> dict:
        """The view data of a tab at the current selection."""
        tab = check_tab(tab or self.tab, self.trace_b is not None)
        with data.pretty_labels(self.pretty):
            return data.view_data(self.trace, tab, trace_b=self.trace_b, ledger=self.ledger, **self._args(tab))

    def figure(self, tab: str | None = None):
        """The plotly figure of a tab at the current selection."""
        from ..render.figures import view_figure
        vd = self.view_data(tab)
        return view_figure(vd, tab or self.tab, head=self.head if vd.get("per_head", True) else 0,
                           heads=self.heads or None, query=self.query, pair_filter=self.pair_filter, outline=True)

    def _on_msg(self, _widget, content, buffers):
        """The front-end asks, the kernel answers (an error is shown in the page: the kernel's log is not
        where people look)."""
        try:
            if not isinstance(content, dict) or content.get("type") != "view":
                raise ValueError(f"unknown request {content!r}")
            with data.pretty_labels(self.pretty):
                header, data_ = answer(self.trace, content, trace_b=self.trace_b, ledger=self.ledger)
            self.send(header, buffers=data_)
        except Exception as e:
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
        out["text/plain"] = data.no_surrogates(text_fallback(self))
        png = fallback_png_b64(self.trace, self.layer, self.head) if picture else None
        if png is not None:
            out["image/png"] = png
        return bundle

    def state(self) -> dict:
        """The selection, as the exported page starts from it."""
        return dict(tab=self.tab, layer=self.layer, head=self.head, heads=list(self.heads), kind=self.kind,
                    pair_filter=self.pair_filter, key=self.key, query=self.query)

    def page(self, max_bytes: int | None = None) -> str:
        """This explorer as one self-contained page (`export_html`'s, every tab, under max_bytes), opened
        at its selection: what bertviz's calls give with html_action="return"."""
        max_bytes = check_max_bytes(DEFAULT_MAX_BYTES if max_bytes is None else max_bytes)
        with data.pretty_labels(self.pretty):
            return build_page(self.trace, ledger=self.ledger, compare=self.trace_b, info=self.info,
                              title=f"bertviz-lite: {self.info['model']}", max_bytes=max_bytes, state=self.state())

    def saved_page(self) -> str:
        """The exported page of this explorer (`export.build_page`: view data, compressed, with the
        front-end), opened at its selection, under SAVED_PAGE_BYTES; every tab up to
        SAVED_EVERY_TAB_UP_TO tokens, the SAVED_LONG_TABS above (`fitting_saved_page`)."""
        return fitting_saved_page(self)

    def saved_bundle(self) -> dict:
        """What a saved notebook keeps of the explorer (`saved_output`)."""
        return saved_output(self)

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
