"""One record per view: everything the package decides about a view, written once, as data.

    from bertviz_lite.views.model.records import RECORDS, record
    record("head").data_from      # 'attention': the head view draws the attention view's data

The registries are derived from these records: `data.VIEWS`, `data.TITLES`, `data.BUILDERS`,
`data.REQUESTS`, the tabs a trace can fill (`data.shown_views`, from `needs`), what each builder is
given (`data.view_data`, from `takes`), `panels.LAYOUTS`, `panels.META`, `panels.DRAWN_FROM`, how
arrays travel to the notebook (`widget.wire_dtypes`, from `maps`) and in the exported page
(`wire`), how the page builds each view and in what order (`export.BUILD`, `PAGE_ORDER`), the tabs a
long input's saved page keeps (`saved_long`), the plotly functions (`views.__init__`, from `figure`)
and the controls each tab of the front-end shows (`data.facts(...)["controls"]`). A record names its
functions (builder, layout, page builder, figure) by name, so this module imports none of them; the
size limits live in `limits.py`. A new view is one record, one builder and one layout
(tests/views/test_view_places.py adds one and sees it shown, exported and saved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import limits

# the selection widgets a tab can show, in the order the front-end draws them ("query": a query token's select, the
# pair filter's queries only where the tab has both; "token": a token's select and every token as a chip to click)
CONTROLS = ("layer", "head", "heads", "all_heads", "kind", "pair_filter", "query", "token", "key", "step_head",
            "thumbs")
# the selection words whose next values the front-end asks for ahead of a click (the neighbouring layers, the next key)
AHEAD = ("layer", "key")
# what a view may need of a trace to be shown (`data.NEEDS` says how each is checked, and why a tab is missing)
NEEDS = ("second_trace", "sizes", "neuron_keys")
# what a builder may be given besides the trace and the selection (`data.view_data`)
TAKES = ("trace_b", "ledger")
# how an array travels in the exported page: as the attention maps ("maps": uint16 up to limits.FULL_UP_TO tokens,
# uint8 above, so a buffer two views share is stored once), or always at 16 or 8 bits
WIRES = ("maps", "u2", "u1")


@dataclass(frozen=True)
class ViewRecord:
    """A view. name: its word (`VIEWS`); title: its tab's title; builder: the `data` function that builds its
    view data (`builder(trace, **takes, **request)`); layout: the `panels` function that lays it out;
    data_from: the view whose data it draws (the head view draws the attention view's); request: the selection
    words its data takes; fixed: arguments its data always gets; meta: the selection words a figure records;
    controls: its tab's selection widgets (`CONTROLS`); ahead: the selection words whose next values the front-end
    asks for while one is drawn (`AHEAD`).

    Shown: needs: what a trace must have for its tab (`NEEDS`: a second trace, the model's sizes, the
    neuron view's keys); takes: what its builder is given besides the trace (`TAKES`); second_trace: it is
    drawn from two traces (the compare view: not offered by the command line's --view).
    Sent: maps: its arrays that are token x token maps (float32 to the notebook up to limits.EXACT_UP_TO tokens,
    uint16 above); wire: how its arrays travel in the exported page (`WIRES`), one for all, or per array
    name with "*" for the rest.
    Page: priority: when the exported page builds it (lowest first; 0: always in, whatever the size budget;
    1, 2, ...: in this order while the budget lasts; None: never built for the page, its data travels as
    `data_from`'s); page: the `export` function that builds its payloads (None: one payload per value of each
    request word, `export.every_request`); page_args: arguments its data gets in the page (block means);
    saved_long: the page a saved notebook keeps of a long input keeps its tab; figure: its plotly function's
    name in `figures` (None: `figures.view_figure(vd, name)` draws it)."""
    name: str
    title: str
    builder: str
    layout: str
    request: tuple[str, ...]
    meta: tuple[str, ...]
    controls: tuple[str, ...]
    wire: str | dict = "maps"
    priority: int | None = 0
    second_trace: bool = False
    data_from: str | None = None
    fixed: dict = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()
    maps: tuple[str, ...] = ()
    page: str | None = None
    page_args: dict = field(default_factory=dict)
    saved_long: bool = False
    figure: str | None = None
    ahead: tuple[str, ...] = ()

    def __post_init__(self):
        for what, given, allowed in (("controls", self.controls, CONTROLS), ("ahead", self.ahead, AHEAD),
                                     ("needs", self.needs, NEEDS),
                                     ("takes", self.takes, TAKES),
                                     ("wire", self.wire.values() if isinstance(self.wire, dict) else [self.wire],
                                      WIRES)):
            bad = [c for c in given if c not in allowed]
            if bad:
                raise ValueError(f"view {self.name!r}: unknown {what} {bad}; one of {allowed}")

    @property
    def source(self) -> str:
        """The view whose data this view draws (itself, or data_from)."""
        return self.data_from or self.name

    def wire_of(self, array: str) -> str:
        """How one of its arrays travels in the exported page (`WIRES`)."""
        if isinstance(self.wire, str):
            return self.wire
        return self.wire.get(array, self.wire.get("*", "maps"))


# priority: the page builds the compare view first (asked for), then the neuron view of every layer, then the
# step-through, then the one-token view (so a saved page keeps every layer's neuron view at 128 tokens)
RECORDS = (
    ViewRecord("attention", "attention", "attention", "attention_layout", request=("layer", "kind"),
               meta=("layer", "head", "kind", "pair_filter"), controls=("layer", "head", "kind", "pair_filter"),
               maps=("maps",), page="attention_page", saved_long=True, figure="attention_heatmap", ahead=("layer",)),
    ViewRecord("model", "model view", "model", "model_layout", request=("kind",), meta=("kind", "pair_filter"),
               controls=("kind", "pair_filter", "thumbs"),  # thumbs: maps, or bertviz's lines
               saved_long=True, figure="model_view_figure"),
    ViewRecord("head", "head view", "head", "head_layout", request=("layer",), fixed={"kind": "probs"},
               meta=("layer", "heads", "pair_filter"), controls=("layer", "heads", "all_heads", "pair_filter"),
               data_from="attention", priority=None, maps=("maps",), saved_long=True, figure="head_view_figure"),
    ViewRecord("token", "one token", "token", "token_layout", request=("query",), meta=("query",),
               controls=("token",), priority=4, figure="token_view"),
    # the neuron view prints the model's own scores and weights (16 bits; up to limits.FULL_UP_TO tokens they are
    # the attention maps, one copy in the page); q and k are drawn as colours (8 bits)
    ViewRecord("neuron", "neuron view", "neuron", "neuron_layout", request=("layer",),
               meta=("layer", "head", "query", "pair_filter"), controls=("layer", "head", "pair_filter", "query"),
               wire={"q": "u1", "k": "u1", "*": "u2"}, priority=2,
               needs=("neuron_keys",), maps=("scores", "weights"), page="neuron_page", figure="neuron_view_figure"),
    ViewRecord("step", "step-through", "step", "step_layout", request=("key",), meta=("key", "head"),
               controls=("key", "step_head"), wire="u1", priority=3, needs=("sizes",), takes=("ledger",),
               page_args=dict(max_cells=limits.STEP_CELLS, max_rows=limits.STEP_ROWS), figure="step_view",
               ahead=("key",)),
    ViewRecord("params", "parameters", "parameters", "params_layout", request=(), meta=(), controls=(),
               needs=("sizes",), takes=("ledger",), saved_long=True, figure="param_breakdown"),
    ViewRecord("compare", "compare", "compare", "compare_layout", request=("layer",), meta=("layer", "head"),
               controls=("layer", "head"), wire="u2", second_trace=True, priority=1, needs=("second_trace",),
               takes=("trace_b",), maps=("a", "b", "diff"), page="compare_page", saved_long=True,
               figure="compare_view"),
)

BY_NAME = {r.name: r for r in RECORDS}
VIEWS = tuple(BY_NAME)
# the exported page's build order: views always in first (record order), then the budgeted ones by priority
PAGE_ORDER = tuple(r.name for r in sorted((r for r in RECORDS if r.priority is not None), key=lambda r: r.priority))
ONE_TRACE_VIEWS = tuple(r.name for r in RECORDS if not r.second_trace)  # what a single trace can draw (cli --view)
# what attention maps alone can draw (bertviz's call with outputs.attentions: no q and k, no sizes, one trace)
ATTENTION_ONLY_VIEWS = tuple(r.name for r in RECORDS if not r.needs)
# what every exported page keeps whatever its size budget (priority 0, and the views drawn from their data)
ALWAYS_IN_PAGE = tuple(r.name for r in RECORDS if BY_NAME[r.source].priority == 0)


def record(name: str) -> ViewRecord:
    if name not in BY_NAME:
        raise ValueError(f"view must be one of {VIEWS}, got {name!r}")
    return BY_NAME[name]
