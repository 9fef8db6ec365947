"""One self-contained HTML page of a trace, drawn by the explorer's own front-end.

    bv.export_html(tr, "page.html", ledger=bv.count_params(model))       # every view
    bv.export_html(tr, "diff.html", compare=tr_edited)                  # + the compare tab

The page runs `assets/app.js` (the explorer's front-end) with a small stand-in for the widget
model that answers each request from payloads embedded in the page: the same view data
(`data.view_data`) and the same codec (`codec.pack_page`: every payload in one gzip stream, base64). It
makes no network request and needs no plotly.js.

Size. A 512-token BERT-base trace holds 144 attention maps of 512 x 512 (37.7 M numbers,
151 MB as float32), so the page keeps what fits `max_bytes` (default 14 MB), in this order
(each view record's `priority`: `records.PAGE_ORDER`; the limits: `limits.py`), and says on the page what
it kept; a tab of which nothing fits is not shown:
1. always: every layer's maps (in full up to FULL_UP_TO tokens, else block means of SMALL_MAPS a side),
   the model view, the parameters;
2. the compare view (with compare=), layer by layer: the first, the last, the middle, then the others
   (block means of limits.COMPARE_MAPS a side above limits.COMPARE_FULL_UP_TO tokens);
3. full-resolution maps and the neuron view of the first and the last layer, then the neuron view of the
   other layers (q and k at 8 bits, drawn as colours; the model's own scores and weights at 16 bits: it prints
   them; up to FULL_UP_TO tokens they are the attention maps, one copy), then full-resolution maps of the others;
4. the step-through, step by step (block means of at most STEP_ROWS x STEP_CELLS / STEP_ROWS cells per head,
   uint8; statistics at full precision);
5. the one-token view, token by token.
A view whose record names no page builder gets one payload per value of each word of its request
(`every_request`: every layer, kind, token or step), in that order while the budget lasts.
max_bytes is a cap on the whole page: what did not fit is named on the page, and a page whose part that is
always kept (1.) is over the cap is refused before anything is written, with its size.
Maps travel as uint16 up to FULL_UP_TO tokens (error <= range / 131070), uint8 above (<= range / 508).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from ...errors import BertVizError
from . import codec
from ..model import data, records
from .files import check_folder, check_target, write_whole
from ..model.limits import DEFAULT_MAX_BYTES, FULL_UP_TO, MIN_BYTES, SMALL_MAPS

ASSETS = Path(__file__).parents[1] / "render" / "assets"  # the front-end is a renderer


def layer_order(num_layers: int) -> list[int]:
    """Which layers get full resolution first: the first, the last, the middle, then the rest."""
    return list(dict.fromkeys([0, num_layers - 1, num_layers // 2] + list(range(num_layers))))


class Payloads:
    """Request key -> packed view data, with a running size."""

    def __init__(self, trace, trace_b, ledger, bar=None):
        self.trace, self.trace_b, self.ledger, self.bar = trace, trace_b, ledger, bar
        self.items: dict[str, dict] = {}
        # each distinct layout once in the page (the one-token view's is the same for every token):
        # a payload's header names it by id; the page's stand-in model puts it back
        self.layouts: dict[str, dict] = {}
        self._layout_ids: dict[str, str] = {}
        self.size = 0
        # buffers already counted: a view that carries another's arrays (the neuron view's scores and weights are
        # the attention maps) adds only what is new, as codec.pack_page stores a shared buffer once
        self.counted: set[str] = set()
        self.small = trace.n_real > FULL_UP_TO  # above, maps travel as block means (and steps do)
        self.maps_dtype = "u1" if self.small else "u2"

    def make(self, view: str, args: dict, **extra) -> tuple[str, dict]:
        vd = data.view_data(self.trace, view, trace_b=self.trace_b, ledger=self.ledger, **args, **extra)
        header, buffers = codec.encode(vd, self.dtypes(view, vd))
        return codec.request_key(view, args), codec.to_text(header, buffers)

    def dtypes(self, view: str, vd: dict) -> dict:
        """How each array of a view travels in the page: as its record's wire says (the numbers people hover
        keep 16 bits, pictures of big tensors 8); a token x token map (`vd["map_arrays"]`: the record's maps, or
        a step that is an attention map) up to FULL_UP_TO tokens as the attention maps, so the page stores it once."""
        rec = records.record(view)
        wires = {a: "maps" if a in vd["map_arrays"] and not self.small else rec.wire_of(a) for a in vd["arrays"]}
        return {a: self.maps_dtype if w == "maps" else w for a, w in wires.items()}

    def add(self, view: str, args: dict, budget: int | None = None, **extra) -> bool:
        if self.bar is not None:
            self.bar.update(1)
        key, payload = self.make(view, args, **extra)
        layout = payload["header"].pop("layouts")
        layouts = codec.to_json(layout)
        new = layouts not in self._layout_ids
        lid = self._layout_ids.get(layouts, f"L{len(self._layout_ids)}")
        payload["header"]["layouts"] = lid
        shared = sum(len(d) for d in set(payload["data"]) & self.counted)
        size = len(codec.to_json(payload)) - shared + len(key) + 8 + (len(layouts) + len(lid) + 6 if new else 0)
        old = len(codec.to_json(self.items[key])) if key in self.items else 0
        if budget is not None and self.size - old + size > budget:
            return False
        self.counted.update(payload["data"])
        if new:
            self._layout_ids[layouts] = lid
            self.layouts[lid] = layout
        self.items[key] = payload
        self.size += size - old
        return True


def progress_bar(total: int, progress, desc: str):
    """A tqdm bar (text in a terminal, a widget in Jupyter) that draws only after a second; progress:
    True, False, or None for "on unless the CI environment variable is set"."""
    if progress is not None and progress is not True and progress is not False:
        raise TypeError(f"progress must be True, False or None (on, except in CI), got {progress!r}")
    if progress is None:
        progress = not os.environ.get("CI")
    from tqdm.auto import tqdm
    return tqdm(total=total, disable=not progress, desc=desc, unit="view", delay=1.0, leave=False)


def build_payloads(trace, *, ledger=None, trace_b=None, max_bytes: int = DEFAULT_MAX_BYTES,
                   fixed_bytes: int = 0, progress=False, views=None) -> tuple[dict, dict, list[str]]:
    """(payloads by request key, the layouts they name by id, what the page kept: one line each).
    views: the tabs the page shows (default every tab the trace can fill); a view not among them is not built."""
    L, n = trace.num_layers, trace.n_real
    views = set(views or data.shown_views(trace, trace_b))
    steps = L * (2 + (trace_b is not None) + 2) + 2 + len(data.stepper_steps(trace)) + n  # about every add
    with progress_bar(steps, progress, "export_html: building the page") as bar:
        return _build_payloads(Payloads(trace, trace_b, ledger, bar), max_bytes - fixed_bytes, views)


def _build_payloads(p: Payloads, budget: int, views: set) -> tuple[dict, dict, list[str]]:
    """Each view in the order of its record's priority (`records.PAGE_ORDER`): those of priority 0 whatever
    the budget, then the others while the budget lasts."""
    kept: list[str] = []
    p.full = []
    for name in records.PAGE_ORDER:  # each builder knows whether the page shows its view (`views`)
        rec = records.record(name)
        kept += BUILD[name](p, rec, None if rec.priority == 0 else budget, views)
    return p.items, p.layouts, kept


def request_values(trace, word: str) -> list:
    """Every value a request word takes for a trace (a view's page, `every_request`)."""
    values = dict(layer=lambda: range(trace.num_layers), kind=lambda: data.recorded_kinds(trace),
                  query=lambda: range(trace.n_real), key=lambda: data.stepper_steps(trace))
    if word not in values:
        raise ValueError(f"no page builder knows the request word {word!r}: name one in the view's record (page=)")
    return list(values[word]())


# what the page's note calls the values of a request word
NOUNS = dict(layer="layer", kind="kind", query="token", key="step")


def every_request(p: Payloads, rec, budget, views) -> list[str]:
    """A view's page with no builder of its own: one payload per value of each word of its request (every layer,
    kind, token or step), with its record's page_args, in that order while the budget lasts (priority 0: all)."""
    import itertools
    if rec.name not in views:
        return []
    words = [w for w in rec.request if w not in rec.fixed]
    combos = [dict(zip(words, c), **rec.fixed) for c in itertools.product(*(request_values(p.trace, w) for w in words))]
    done = 0
    for args in combos:
        if not p.add(rec.name, args, budget, **rec.page_args):
            break
        done += 1
    if budget is None or not words:
        return []
    noun = " and ".join(NOUNS.get(w, w) for w in words)
    if done == len(combos):
        return [f"{rec.title}: every {noun}"]
    if not done:
        return [f"{rec.title}: no {noun} (over the size budget)"]
    last = ", ".join(str(combos[done - 1][w]) for w in words)
    return [f"{rec.title}: {done} of {len(combos)} {noun}s, up to {noun} {last} (the rest are over the size "
            "budget)"]


def attention_page(p: Payloads, rec, budget, views) -> list[str]:
    """Every layer's maps, whatever the budget (every tab draws from them): block means above FULL_UP_TO tokens
    (full-resolution maps come with the neuron view, `neuron_page`, while the budget lasts)."""
    for layer in range(p.trace.num_layers):
        p.add("attention", dict(layer=layer, kind="probs"), max_tokens=SMALL_MAPS if p.small else None)
    return []


def compare_page(p: Payloads, rec, budget, views) -> list[str]:
    """The compare view, layer by layer (layer_order) while the budget lasts (at 512 tokens one BERT-base
    layer's A, B and difference take megabytes, as block means)."""
    if p.trace_b is None or "compare" not in views:
        return []
    L, kept = p.trace.num_layers, []
    for layer in layer_order(L):
        if not p.add("compare", dict(layer=layer), budget):
            break
        kept.append(layer)
    if not kept:
        return ["compare view: no layer (one layer is over the size budget: a larger max_bytes, or fewer tokens)"]
    return [f"compare view: {_layers(sorted(kept), L)}" + ("" if len(kept) == L else " (the other layers are over the "
                                                              "size budget: a larger max_bytes, or fewer tokens)")]


def neuron_page(p: Payloads, rec, budget, views) -> list[str]:
    """The neuron view's q and k, layer by layer, with the full-resolution maps (above FULL_UP_TO tokens):
    the first and the last layer of both, then the neuron view's other layers, then the other maps."""
    trace = p.trace
    L, n = trace.num_layers, trace.n_real
    has_keys = "neuron" in views and data.has_neuron_keys(trace)
    order = layer_order(L)
    neuron = []
    wanted = [(v, ly) for ly in order[:2] for v in ("attention", "neuron")] + \
        [("neuron", ly) for ly in order[2:]] + [("attention", ly) for ly in order[2:]]
    over = set()  # kinds that no longer fit: every layer's payload of a kind is the same size, so not built again
    for view, ly in wanted:
        if view in over:
            continue
        if view == "attention" and p.small:
            if p.add("attention", dict(layer=ly, kind="probs"), budget):
                p.full.append(ly)
            else:
                over.add(view)
        if view == "neuron" and has_keys:
            if p.add("neuron", dict(layer=ly), budget):
                neuron.append(ly)
            else:
                over.add(view)
    if "scores" in data.recorded_kinds(trace) and not p.small:
        for ly in range(L):
            if not p.add("attention", dict(layer=ly, kind="scores"), budget):
                break
    if not p.small or len(p.full) == L:
        kept = [f"every attention map in full ({n} tokens" + (", 8-bit)" if p.small else ")")]
    else:
        kept = [f"attention in full: {_layers(sorted(p.full), L)}; the other layers as block means ({n} tokens in "
                f"{SMALL_MAPS} blocks a side)"]
    if has_keys:
        kept.append(f"neuron view: {_layers(sorted(neuron), L)}")
    elif "neuron" in views:  # not recorded (keep=..., Trace.from_attentions): nothing to keep, no budget spent
        kept.append(f"neuron view: none (the trace lacks one of {', '.join(data.NEURON_KEYS)})")
    return kept


# how each view's payloads are built (its record's page builder, else one payload per request); the ORDER is the
# records' (records.PAGE_ORDER)
BUILD = {r.name: globals()[r.page] if r.page else every_request for r in records.RECORDS if r.priority is not None}


def _layers(layers: list[int], total: int) -> str:
    if len(layers) == total:
        return "every layer"
    return "layers " + ", ".join(map(str, layers)) if layers else "no layer (over the size budget)"


def kept_views(views, payloads: dict) -> list[str]:
    """The tabs a page shows: those of which it keeps a payload (a tab whose every payload is over the size budget
    is not shown; the page's note names it)."""
    built = {key.split("|", 1)[0] for key in payloads}
    return [v for v in views if records.record(v).source in built]


# facts the page carries in its compressed stream (codec.pack_page's info)
PACKED_FACTS = ("luts", "symbols", "formulas")


def without_comment(line: str) -> str:
    """A code line without its trailing ` // comment`, where the code before it closes every string it
    opens (an even number of each quote); else the line as it is (a `//` that may sit in a string stays)."""
    at = line.find(" // ")
    if at < 0 or any(line[:at].count(q) % 2 for q in "\"'`"):
        return line
    return line[:at].rstrip()


def front_end() -> str:
    """app.js as the page inlines it: without its comments (the opening block, comment lines, trailing
    comments), indentation and blank lines (the page's size budget: app.js has no string or template that
    spans lines, so each code line is kept as it is, and a line stays a line)."""
    lines = code_of(ASSETS / "app.js")
    return "\n".join(without_comment(line) for line in lines if not line.startswith("//"))


def code_of(path) -> list[str]:
    """A script's non-blank lines, stripped, after its opening /* ... */ block."""
    text = path.read_text(encoding="utf-8")
    if text.startswith("/*"):
        text = text.split("*/", 1)[1]
    return [line.strip() for line in text.split("\n") if line.strip()]


def style_sheet() -> str:
    """app.css as the page inlines it: without its comments, each rule on one line, no space after a
    `{ ; : ,` or before a `{ } ;` (app.css has no string holding those)."""
    css = re.sub(r"/\*.*?\*/", "", (ASSETS / "app.css").read_text(encoding="utf-8"), flags=re.S)
    css = re.sub(r"\s+([{};])", r"\1", re.sub(r"([{;:,])\s+", r"\1", css))
    return re.sub(r"\s+", " ", css).replace("} ", "}").replace("}", "}\n").strip()


def render_page(info: dict, state: dict, payloads: dict, title: str, layouts: dict | None = None) -> str:
    script = front_end()
    style = style_sheet()
    if "</script" in script.lower() or "</style" in style.lower():
        raise BertVizError("assets/app.js or app.css contains a closing tag; it cannot be inlined")
    # the colour tables are needed only once a map is drawn, the symbol table never by the front-end: they travel
    # in the compressed stream
    shown = {k: v for k, v in info.items() if k not in PACKED_FACTS}
    later = {k: info[k] for k in PACKED_FACTS if k in info}
    boot = ("\nconst BVL = JSON.parse(document.getElementById('bvl-data').textContent);\n"
            "renderPage(document.getElementById('bvl-app'), BVL);\n")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
        "style-src 'unsafe-inline'; img-src data: blob:; connect-src data: blob:\">\n"
        f"<style>body {{ margin: 12px 20px; background: white; }}\n{style}</style>\n</head>\n<body>\n"
        "<div id=\"bvl-app\"></div>\n"
        f"<script type=\"application/json\" id=\"bvl-data\">"
        f"{codec.to_json(dict(state=dict(state, info=shown), page=codec.pack_page(payloads, layouts or {}, later)))}"
        "</script>\n"
        f"<script type=\"module\">{script}{boot}</script>\n</body>\n</html>\n")


def read_page(text: str) -> dict:
    """An exported page's data as Python: {"state": ..., "payloads": {request key: `codec.to_text` form},
    "layouts": {id: layouts}} (the page itself carries the payloads packed: `codec.pack_page`)."""
    part = json.loads(text.split('id="bvl-data">', 1)[1].split("</script>", 1)[0])
    payloads, layouts, later = codec.unpack_page(part["page"])
    state = dict(part["state"], info=dict(part["state"]["info"], **later))
    return dict(state=state, payloads=payloads, layouts=layouts)


def check_max_bytes(max_bytes) -> int:
    """The page's size budget: a whole, finite number of bytes of at least MIN_BYTES, or one clear error."""
    import math
    import numbers
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Real):
        raise TypeError(f"max_bytes must be a number of bytes such as 14_000_000, got {type(max_bytes).__name__} "
                        f"{max_bytes!r}")
    if not math.isfinite(max_bytes):
        raise ValueError(f"max_bytes must be a finite number of bytes, got {max_bytes!r} (it would switch the "
                         "size budget off)")
    if max_bytes < MIN_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_BYTES:,} (the page's front-end and facts alone take "
                         f"about 60 kB), got {max_bytes!r}")
    return int(max_bytes)


def check_ledger(ledger) -> None:
    from ...params import ParamLedger
    if ledger is not None and not isinstance(ledger, ParamLedger):
        raise TypeError(f"ledger must be bv.count_params(model) (a ParamLedger) or None, got "
                        f"{type(ledger).__name__} {ledger!r}"[:200])


def export_html(trace, path, *, ledger=None, compare=None, title=None, max_bytes: int = DEFAULT_MAX_BYTES,
                progress=None) -> Path:
    """Write one self-contained HTML page of a trace (every view); returns its path.

    ledger: `count_params(model)` counts the loaded arrays (else the config's shapes).
    compare: a second trace of the same model and length: adds the compare tab.
    max_bytes: the page's size budget (see the module docstring for what is kept first).
    The file is written whole or not at all: an existing page at `path` is replaced only once
    the new one is complete (and keeps its mode; a new one follows the umask). A symlink to a
    page is written through; anything else that is not a regular file (a device, a FIFO, a
    folder) is refused with NotARegularFileError before the page is built. progress: a bar while the
    page is built (None: on, except where the CI environment variable is set; False: never).
    """
    trace = data.check_trace(trace, "export_html()")
    max_bytes = check_max_bytes(max_bytes)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a string (the page's title), got {type(title).__name__} {title!r}")
    check_ledger(ledger)
    if compare is not None:
        data.check_trace(compare, "export_html(compare=...)")
        data.check_comparable(trace, compare)
    target = check_target(path)  # a str or a path; a trailing slash, a folder, a device, a FIFO: refused
    path = Path(path)
    check_folder(target, path)
    write_whole(target, build_page(trace, ledger=ledger, compare=compare, title=title, max_bytes=max_bytes,
                                   progress=progress), shown=path)
    return path


def build_page(trace, *, ledger=None, compare=None, title=None, max_bytes: int = DEFAULT_MAX_BYTES, state=None,
               info=None, progress=False, views=None, note: str = "") -> str:
    """The page's text (checked arguments: `export_html` checks them). state: the starting selection
    (the explorer's, for the page a saved notebook keeps); info: the facts to start from; views: the
    tabs it shows (default every tab the trace can fill); note: a line after what the page kept."""
    trace = trace.to_host()
    compare = None if compare is None else compare.to_host()
    title = title or f"bertviz-lite: {trace.model_name or 'bert'}"
    info = dict(info) if info is not None else data.facts(
        trace, trace_b=compare, ledger_source="the loaded model's arrays" if ledger is not None else
        "the config's shapes")
    fixed = len(front_end().encode()) + len((ASSETS / "app.css").read_bytes()) + len(codec.to_json(info)) + 4000
    if views is not None:
        info["views"] = [v for v in info["views"] if v in views]
    payloads, layouts, kept = build_payloads(trace, ledger=ledger, trace_b=compare, max_bytes=max_bytes,
                                             fixed_bytes=fixed, progress=progress, views=info["views"])
    info["views"] = kept_views(info["views"], payloads)
    info["page_note"] = "This page keeps: " + "; ".join(kept) + "." + (f" {note}" if note else "")
    start = dict(tab="attention", layer=0, head=0, heads=[], kind="probs", pair_filter="all",
                 key=data.stepper_steps(trace)[0], query=0)
    start.update(state or {})
    if start["tab"] not in info["views"]:  # its tab kept nothing (over the budget): the page opens on the maps
        start["tab"] = "attention"
    page = render_page(info, start, payloads, title, layouts)
    size = len(page.encode())
    if size > max_bytes:  # the budget counts payloads before compression, so only the part always kept gets here
        always = ", ".join(r.title for r in records.RECORDS if r.priority == 0)
        raise BertVizError(f"the page would take {size:,} bytes, over max_bytes={max_bytes:,}, with only the views "
                           f"that are always kept (every layer's maps: {always}) at {trace.n_real} tokens: pass a "
                           "larger max_bytes, or fewer tokens")
    return page
