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

The widget (`widget.Explorer`, an anywidget whose front-end is `assets/app.js`, the same file the
exported page runs) lives in widget.py, imported when the first widget is made: importing this
module needs no widget library. The selections are checked in selection.py, before anywidget loads.
A layer's attention arrives as every head at once, so switching head or sentence block redraws with
no round trip, and the neighbouring layers are fetched ahead. Nothing large is kept in the widget's
state. A saved notebook keeps every tab (`widget.saved_output`).
"""

from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np

from ..errors import BertVizError
from ..params import ParamLedger, count_params
from ..trace import Trace
from .model import data
from .wire.selection import check_query, check_tab, shown_parts


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
    trace = data.check_trace(data.as_trace(trace, tokens, sentence_b_start=sentence_b_start))
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
        from .render.figures import view_figure
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
    from .wire.widget import Explorer  # anywidget loads here, with the first widget
    w = Explorer(trace, model=model, ledger=ledger, compare=compare, tab=tab, layer=layer, head=head,
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


def show_or_return(w, html_action: str, what: str):
    """bertviz's ending: "view" displays the explorer where the call is (after a print, with a trailing
    `;`, inside a function) and returns None; "return" gives the page's HTML instead."""
    if html_action == "return":
        from .wire.widget import ViewHTML
        return ViewHTML(w.page(), w.info["title"])
    from IPython.display import display
    display(w)
    return None


def check_html_action(html_action, what: str) -> str:
    if html_action not in HTML_ACTIONS:
        raise ValueError(f"{what}: html_action must be 'view' (display it, the default) or 'return' (the page's "
                         f"HTML), as bertviz's; got {html_action!r}")
    return html_action


# what the front-end says under a view drawn in bertviz's look (in place of the layout's notes, which describe
# bv.explore's lines and maps)
LOOK_NOTES = {
    "head": "a line per weight, its opacity the weight divided by the number of heads shown (bertviz's rule: faint "
            "with every head on); one colour per head; click a head's box to add or remove it, double-click it to "
            "see it alone (again: every head); hover a token to see only its lines, the other side's tokens shaded "
            "by their weights",
    "model": "each thumbnail: a line from each query (left) to each key (right), its opacity the weight (bertviz's "
             "rule); click one to enlarge it with its tokens (click it again, \u00d7 or Esc to close)",
}


def bertviz_look(w, display_mode: str | None):
    """bertviz's look at first glance, for its calls (bv.explore keeps its own): bertviz's colours
    (d3.schemeCategory10 by head, and by layer in the model view), the head view's lines at opacity
    weight / heads shown, line thumbnails on bertviz's dark tiles (display_mode="light": white) that a
    click opens in a labelled panel over the grid."""
    w.info = dict(w.info, look="bertviz", colours=list(data.BERTVIZ_COLOURS), tiles=display_mode or "dark",
                  look_notes=dict(LOOK_NOTES))


def head_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
              layer: int | None = None, heads=None, *, include_layers=None, include_heads=None,
              display_mode: str | None = None, html_action: str = "view", pair_filter: str = "all"):
    """bertviz's head view (bertviz's signature), interactive: the explorer opened on its head view
    tab, displayed where it is called; returns None (html_action="return": the page's HTML, as
    bertviz). For the widget object, call `bv.explore(..., tab="head")`.

        outputs = hf_model(inputs, output_attentions=True)          # bertviz's README example
        head_view(outputs.attentions, tokens)

    attention: `outputs.attentions` (L tensors [1, heads, n, n] of any framework) with its tokens, or
    a bertviz_lite Trace (no tokens). Every head is shown at the start, one colour each, each line's opacity
    its weight over the heads shown (bertviz's look: faint with every head on, strong for one head; bv.explore
    draws them stronger); the layer
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
    bertviz_look(w, display_mode)
    return show_or_return(w, html_action, "head_view()")


def model_view(attention=None, tokens=None, sentence_b_start: int | None = None, prettify_tokens: bool = True,
               display_mode: str | None = None, *, include_layers=None, include_heads=None,
               html_action: str = "view", pair_filter: str = "all"):
    """bertviz's model view (bertviz's signature), interactive: the explorer opened on its model view
    tab (every layer x head as a thumbnail: bertviz's lines on dark tiles, a click opens it enlarged with
    its tokens over the grid, as bertviz; the thumbnails select offers heat maps, whose click opens that
    head; the sentence-pair filter above), displayed where it is called; returns None
    (html_action="return": the page's HTML). Arguments as `head_view`; display_mode: the tiles' colours
    ("dark", bertviz's default, or "light") and the whole view's. The plotly figure:
    `bv.views.model_view_figure(trace)`; the widget: `bv.explore(..., tab="model")`."""
    check_html_action(html_action, "model_view()")
    trace = data.as_trace(attention, tokens, sentence_b_start=sentence_b_start, what="model_view()")
    w = explore(trace, tab="model", pair_filter=pair_filter, prettify_tokens=prettify_tokens,
                include_layers=include_layers, include_heads=include_heads, display_mode=display_mode)
    bertviz_look(w, display_mode)
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
        return data.check_trace(model, "neuron_view()")
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
            with quiet_progress_bars():
                model.save_pretrained(folder)
                tokenizer.save_pretrained(folder)
        except Exception as e:
            raise BertVizError(f"{what} could not write the model's files with save_pretrained "
                               f"({type(e).__name__}: {e})") from e
        try:
            bert = load(folder)
        except (BertVizError, ValueError, KeyError, OSError) as e:
            raise BertVizError(f"{what} traces the sentences through bertviz-lite's own BERT, which cannot load this "
                               f"{type(model).__name__} (it runs the model types {runs}): {e}{other}") from e
    bert.name = transformers_name(model, model_type or bert.config.model_type)  # not the temporary folder's
    return bert


def transformers_name(model, fallback: str) -> str:
    """A transformers model's own name, as from_pretrained recorded it (model.name_or_path, or its
    config's name_or_path / _name_or_path; empty for a model made from a config): the fallback then."""
    config = getattr(model, "config", None)
    for name in (getattr(model, "name_or_path", None), getattr(config, "name_or_path", None),
                 getattr(config, "_name_or_path", None)):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return fallback


@contextlib.contextmanager
def quiet_progress_bars():
    """transformers' save_pretrained draws a progress bar ("Writing model shards: 100% 1/1") into the
    cell's output. Its switch (transformers.utils.logging's, which turns huggingface_hub's bars off and on
    with it) is off for the block; afterwards both are as they were."""
    logging = sys.modules.get("transformers.utils.logging")  # loaded wherever a transformers model exists
    if not callable(getattr(logging, "is_progress_bar_enabled", None)) or not logging.is_progress_bar_enabled():
        yield
        return
    hub = sys.modules.get("huggingface_hub.utils")
    hub_was_off = hub is not None and hub.are_progress_bars_disabled()
    with warnings.catch_warnings():  # HF_HUB_DISABLE_PROGRESS_BARS fixes hub's bars and warns at each switch
        warnings.simplefilter("ignore")
        logging.disable_progress_bar()
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.enable_progress_bar()
            if hub_was_off:
                hub.disable_progress_bars()
