"""Static PNGs of the views for documents, drawn with matplotlib (no kaleido, no browser).

    from bertviz_lite.views import save_png
    save_png(tr, "map.png", view="attention", layer=2, head=5)
    save_png(tr, "neuron.png", view="neuron", layer=2, head=5, query=3)

Each picture draws the view's panels (`panels.resolve`): the same labels, colour tables
(`data.lut`) and colour limits as the explorer and the exported page; this module only knows
the four primitives (heatmap, lines, bars, table). Object API only: no pyplot, no
global backend change.
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from ..model import data, limits, panels

ACCENT = data.ACCENT


def cmap(name: str) -> ListedColormap:
    """The view data's colour scale as a matplotlib colour map (the same 256 colours)."""
    return ListedColormap(np.asarray(data.lut(name)) / 255.0, name=name)


def _ticks(ax, labels, axis: str) -> None:
    labels = list(labels)
    n = len(labels)
    step = max(1, int(np.ceil(n / limits.LABEL_ALL_UP_TO)))  # above, thinned
    idx = np.arange(0, n, step)
    size = 9 if n <= 40 else 7 if n <= 80 else 5
    if axis == "x":
        ax.set_xticks(idx, [labels[i] for i in idx], rotation=90, fontsize=size)
    else:
        ax.set_yticks(idx, [labels[i] for i in idx], fontsize=size)


def _words(labels) -> list[str]:
    """Token labels without their position ("3 the" -> "the"); other labels as they are."""
    return [s.split(" ", 1)[1] if re.match(r"\d+ ", s) else s for s in labels]


def _heatmap(mfig, ax, p) -> None:
    z = p["z"]
    im = ax.imshow(z, cmap=cmap(p["scale"]), vmin=p["clim"][0], vmax=p["clim"][1], interpolation="nearest",
                   aspect="equal" if p.get("square") else "auto")
    if p.get("thumb"):
        ax.set_xticks([]), ax.set_yticks([])
        if p.get("marked"):
            for side in ax.spines.values():
                side.set_edgecolor(ACCENT), side.set_linewidth(2.5)
        return
    bar = mfig.colorbar(im, ax=ax, shrink=0.8, label=p["unit"])
    if not p.get("colorbar", True):  # a map that shares its neighbour's bar keeps the room, so both are one size
        bar.ax.set_visible(False)
    R, C = z.shape
    if p.get("y_labels"):
        _ticks(ax, _words(p["y_labels"]), "y")
    else:
        ax.set_yticks([])
    if p.get("row_ticks"):
        ax.set_yticks([r + 0.5 * (len(p["y_labels"]) // len(p["row_ticks"])) - 0.5 for r, _ in p["row_ticks"]],
                      [t for _, t in p["row_ticks"]], fontsize=8)
    if p.get("x_labels") and p.get("x_ticks", True):
        _ticks(ax, _words(p["x_labels"]), "x")
    elif p.get("x_labels"):  # many numbered columns: a few ticks
        idx = np.linspace(0, C - 1, min(C, 8)).round().astype(int)
        ax.set_xticks(idx, [p["x_labels"][i] for i in idx], fontsize=8)
    else:
        ax.set_xticks([])
    if p.get("square"):
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
    for axis, labels, groups in ((0, ax.get_xticklabels(), p.get("x_groups")),
                                 (1, ax.get_yticklabels(), p.get("y_groups"))):
        if groups:  # sentence B's labels in the accent colour, as in the page
            for lab in labels:
                at = int(round(lab.get_position()[axis]))  # the tick's column (x) or row (y)
                if 0 <= at < len(groups) and groups[at]:
                    lab.set_color(ACCENT)
    for i in p.get("row_splits") or []:
        ax.axhline(i - 0.5, color=ACCENT, lw=1.2)
    for j in p.get("col_splits") or []:
        ax.axvline(j - 0.5, color=ACCENT, lw=1.2)
    if p.get("mark_row", -1) >= 0:  # the selected query's row
        i, C = p["mark_row"], p["z"].shape[1]
        ax.add_patch(Rectangle((-0.5, i - 0.5), C, 1, fill=False, edgecolor=ACCENT, lw=2))
    ax.set_xlabel(p.get("x_title", "")), ax.set_ylabel(p.get("y_title", ""))
    if p.get("title"):
        ax.set_title(_wrap(p["title"], panels.panel_size(p)[0]), fontsize=10)


def _wrap(text: str, inches: float) -> str:
    """text wrapped to about 14 characters an inch (each of its lines)."""
    return "\n".join(textwrap.fill(line, max(20, int(14 * inches))) for line in text.split("\n"))


def _lines(mfig, ax, p) -> None:
    w0, w1 = p["width"]
    k = len(p["series"])
    for w, si, i, j in panels.line_order(p["series"], p["min_weight"]):  # weakest first: the strongest on top
        ax.plot([0.03, 0.97], [-i, -j], color=p["series"][si]["colour"], alpha=float(panels.line_alpha(p["alpha"], w, k)),
                lw=w0 + w1 * w)
    handles = [Line2D([], [], color=s["colour"], lw=3, label=f"head {s['head']}") for s in p["series"]]
    for x, labels, groups, ha in ((-0.01, p["left"], p["left_groups"], "right"),
                                  (1.01, p["right"], p["right_groups"], "left")):
        for i, (s, g) in enumerate(zip(_words(labels), groups)):
            ax.text(x, -i, data.shorten(s, 22), ha=ha, va="center", fontsize=9, color=ACCENT if g else "#1f2937")
    ax.text(-0.05, 1.2, p["left_title"], ha="right", fontsize=9, style="italic")
    ax.text(1.05, 1.2, p["right_title"], ha="left", fontsize=9, style="italic")
    ax.set_xlim(-0.55, 1.55)
    ax.axis("off")
    ax.legend(handles=handles, loc="upper right", fontsize=8, frameon=False)


def _bars(mfig, ax, p) -> None:
    vals = p["values"]
    ys = np.arange(len(vals))
    ax.barh(ys, vals, color=p["colour"])
    ax.set_ylim(len(vals) - 0.5, -0.5)
    if p.get("aligned"):
        ax.set_yticks([])
    else:
        ax.set_yticks(ys, _words(p["labels"]), fontsize=8)
    for y, v, t in zip(ys, vals, panels.bar_texts(p)):
        ax.text(v if v >= 0 else 0, y, f" {t}", va="center", fontsize=8)
    lo, hi = min(0.0, float(vals.min())), max(0.0, float(vals.max()))
    ax.set_xlim(lo - 0.05 * (hi - lo), hi + (0.45 if not p.get("aligned") else 0.35) * (hi - lo or 1))
    if p.get("x_title"):
        ax.set_xlabel(p["x_title"])
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}M" if hi > 1e6 else f"{v:g}"))
    if p.get("title"):
        ax.set_title(p["title"], fontsize=10)


def _table(mfig, ax, p) -> None:
    ax.axis("off")
    cols = p["columns"]
    cells = [[textwrap.fill(c, panels.CELL_CHARS) for c in r] for r in p["rows"]] or [[""] * len(cols)]
    widest = [max([max(len(line) for line in r[i].split("\n")) for r in cells] + [len(c)]) + 2
              for i, c in enumerate(cols)]
    tab = ax.table(cellText=cells, colLabels=cols, loc="upper center", cellLoc="left",
                   colWidths=[w / sum(widest) for w in widest])
    tab.auto_set_font_size(False)
    tab.set_fontsize(8 if len(cols) > 3 else 9)
    height = 1.0 / (sum(1 + max(c.count("\n") for c in r) for r in cells) + 1)
    for (r, c), cell in tab.get_celld().items():
        lines = 1 if r == 0 else 1 + max(x.count("\n") for x in cells[r - 1])
        cell.set_height(height * lines)
    if p.get("caption"):
        ax.set_title(p["caption"], fontsize=9)


PRIMITIVES = {"heatmap": _heatmap, "lines": _lines, "bars": _bars, "table": _table}


def draw(fig: dict) -> Figure:
    """A matplotlib Figure of resolved panels (`panels.resolve`): one function per primitive."""
    ws, hs = panels.grid_sizes(fig)
    width = max(6.0, min(18.0, sum(ws) + 0.6))
    title = _wrap(panels.plain_title(fig) + (f"\n{fig['subtitle']}" if fig["subtitle"] else ""), width * 0.85)
    notes = [fig["summary"]] if fig["summary"] else []
    notes += fig["notes"]
    wrapped = [_wrap(n, width) for n in notes]
    extra_h = 0.45 + 0.2 * title.count("\n") + 0.18 * sum(w.count("\n") + 1 for w in wrapped)
    height = max(2.5, min(30.0, sum(hs) + extra_h))
    mfig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    gs = mfig.add_gridspec(*fig["grid"], width_ratios=ws, height_ratios=hs)
    for p in fig["panels"]:
        r, c, rs, cs = p["at"]
        ax = mfig.add_subplot(gs[r:r + rs, c:c + cs])
        PRIMITIVES[p["type"]](mfig, ax, p)
        if fig.get("row_titles") and c == 0 and p.get("thumb"):
            ax.set_ylabel(fig["row_titles"][r], fontsize=8, rotation=0, ha="right", va="center")
        if fig.get("col_titles") and r == 0 and p.get("thumb"):
            ax.set_title(fig["col_titles"][c], fontsize=8)
    mfig.suptitle(title, fontsize=11)
    if wrapped:
        mfig.supxlabel("\n".join(wrapped), fontsize=8, color="#4b5563")
    return mfig


def to_png(vd: dict, path, *, view: str | None = None, head: int = 0, heads=None, query: int = 0,
           pair_filter: str = "all", layer: int | None = None, outline: bool = False, dpi: int | None = None):
    """A PNG of view data (`data.view_data(...)`) for a selection: written to path (a file name or a
    binary file; a file name is checked before drawing and written whole or not at all: a folder, a
    device or a FIFO is refused). view: the view to draw (default the data's own; 'head' draws attention data);
    outline=True marks the selected layer and head in the model view."""
    if not isinstance(vd, dict) or vd.get("view") not in panels.LAYOUTS:
        raise TypeError("to_png draws view data: data.view_data(trace, view, ...) (for a trace, use save_png)")
    from ..wire.files import check_folder, check_target, write_whole
    named = isinstance(path, (str, Path))
    if named:  # a file name: checked before drawing, written whole or not at all (as save_png)
        target = check_target(path, what="to_png", kind=".png")
        check_folder(target, path, what="to_png")
    # every text is drawn as written: a sentence's `$...$` is not matplotlib mathtext (a lone surrogate, which no
    # font draws, as U+FFFD: matplotlib raised a raw TypeError on it)
    with rc_context({"text.parse_math": False}):
        mfig = draw(data.no_surrogates(panels.resolve(vd, view, head=head, heads=heads, query=query, pair_filter=pair_filter,
                                            layer=layer, outline=outline)))
        FigureCanvasAgg(mfig)
        buf = io.BytesIO() if named else path
        mfig.savefig(buf, format="png", dpi=dpi or mfig.dpi, facecolor="white")
    if named:
        write_whole(target, buf.getvalue(), shown=Path(path), what="the PNG")
        return Path(path)
    return path


def save_png(trace, path, view: str = "attention", layer: int | None = None, head: int | None = None, *,
             key: str | None = None, query: int = 0, ledger=None, kind: str = "probs", compare=None,
             heads=None, pair_filter: str = "all") -> Path:
    """Build a view of a trace and save it as a PNG. view: one of data.VIEWS ('attention', 'model',
    'head', 'token', 'neuron', 'step', 'params', 'compare' with compare=second_trace); layer and head
    default to 0 (the model view outlines them when both are given); heads= the head view's heads;
    pair_filter= 'A->B' and the like for a sentence pair.
    The file is written whole or not at all (as export_html writes a page); a folder, a device or a
    FIFO at `path` is refused with NotARegularFileError before anything is drawn (writing a PNG into
    a FIFO nobody reads would block for ever)."""
    from ..wire.files import check_folder, check_target, write_whole
    data.check_drawable(trace, "save_png")
    outline = view == "model" and layer is not None and head is not None
    layer, head = layer or 0, head or 0
    args = data.request(view, layer=layer, head=head, query=query, kind=kind, key=key)
    head = trace.check_head(head)
    data.pair_positions(trace, pair_filter)
    path = Path(path)
    target = check_target(path, what="save_png", kind=".png")
    check_folder(target, path, what="save_png")
    vd = data.view_data(trace, view, trace_b=compare, ledger=ledger, **args)
    buf = io.BytesIO()
    to_png(vd, buf, view=view, head=head, heads=heads, query=query, layer=layer, outline=outline,
           pair_filter=pair_filter)
    write_whole(target, buf.getvalue(), shown=path, what="the PNG")
    return path
