"""One record per view: everything the package knows about a view, written once, as data.

    from bertviz_lite.views.records import RECORDS, record
    record("head").data_from      # 'attention': the head view draws the attention view's data

The registries are derived from these records: `data.VIEWS`, `data.TITLES`, `data.BUILDERS`,
`data.REQUESTS`, `panels.LAYOUTS`, `panels.META`, `panels.DRAWN_FROM`, the exported page's wire
dtypes and the controls each tab of the front-end shows (`data.facts(...)["controls"]`). A record
names its builder and its layout as functions of `data.py` and `panels.py` (by name, so this module
imports neither). A new view is one record, one builder and one layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the selection widgets a tab can show, in the order the front-end draws them
CONTROLS = ("layer", "head", "heads", "all_heads", "kind", "pair_filter", "query", "key", "step_head", "thumbs")


@dataclass(frozen=True)
class ViewRecord:
    """A view. name: its word (`VIEWS`); title: its tab's title; builder: the `data` function that
    builds its view data (None: built by `data.view_data` itself, with a ledger or a second trace);
    layout: the `panels` function that lays it out; data_from: the view whose data it draws (the head
    view draws the attention view's); request: the selection words its data takes; fixed: arguments
    its data always gets; meta: the selection words a figure records; controls: its tab's selection
    widgets (`CONTROLS`); wire: how its arrays travel in the exported page ('maps': uint16 up to 128
    tokens, uint8 above; 'u2'; 'u1'); priority: when the exported page builds it (`export.build_payloads`,
    lowest first; 0: always in, whatever the size budget; 1, 2, ...: in this order while the budget lasts;
    None: never built for the page, its data travels as `data_from`'s); second_trace: it needs a second
    trace (the compare view: not drawn from one sentence, so not offered by the command line's --view)."""
    name: str
    title: str
    builder: str | None
    layout: str
    request: tuple[str, ...]
    meta: tuple[str, ...]
    controls: tuple[str, ...]
    wire: str = "maps"
    priority: int | None = 0
    second_trace: bool = False
    data_from: str | None = None
    fixed: dict = field(default_factory=dict)

    def __post_init__(self):
        bad = [c for c in self.controls if c not in CONTROLS]
        if bad:
            raise ValueError(f"view {self.name!r}: unknown controls {bad}; one of {CONTROLS}")

    @property
    def source(self) -> str:
        """The view whose data this view draws (itself, or data_from)."""
        return self.data_from or self.name


RECORDS = (
    ViewRecord("attention", "attention", "attention", "attention_layout", request=("layer", "kind"),
               meta=("layer", "head", "kind", "pair_filter"), controls=("layer", "head", "kind", "pair_filter")),
    ViewRecord("model", "model view", "model", "model_layout", request=("kind",), meta=("kind", "pair_filter"),
               controls=("kind", "pair_filter", "thumbs")),  # thumbs: maps, or bertviz's lines
    ViewRecord("head", "head view", "head", "head_layout", request=("layer",), fixed={"kind": "probs"},
               meta=("layer", "heads", "pair_filter"), controls=("layer", "heads", "all_heads", "pair_filter"),
               data_from="attention", priority=None),
    ViewRecord("token", "one token", "token", "token_layout", request=("query",), meta=("query",),
               controls=("query",), priority=3),
    ViewRecord("neuron", "neuron view", "neuron", "neuron_layout", request=("layer",), meta=("layer", "head", "query"),
               controls=("layer", "head", "query"), wire="u2", priority=2),
    ViewRecord("step", "step-through", None, "step_layout", request=("key",), meta=("key", "head"),
               controls=("key", "step_head"), wire="u1"),
    ViewRecord("params", "parameters", None, "params_layout", request=(), meta=(), controls=()),
    ViewRecord("compare", "compare", None, "compare_layout", request=("layer",), meta=("layer", "head"),
               controls=("layer", "head"), wire="u2", second_trace=True, priority=1),  # asked for: first
)

BY_NAME = {r.name: r for r in RECORDS}
VIEWS = tuple(BY_NAME)
# the exported page's build order: views always in first (record order), then the budgeted ones by priority
PAGE_ORDER = tuple(r.name for r in sorted((r for r in RECORDS if r.priority is not None), key=lambda r: r.priority))
ONE_TRACE_VIEWS = tuple(r.name for r in RECORDS if not r.second_trace)  # what a single trace can draw (cli --view)


def record(name: str) -> ViewRecord:
    if name not in BY_NAME:
        raise ValueError(f"view must be one of {VIEWS}, got {name!r}")
    return BY_NAME[name]
