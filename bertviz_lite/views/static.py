"""Static PNGs of the views for documents, drawn with matplotlib (no kaleido, no browser).

    from bertviz_lite.views import save_png
    save_png(tr, "map.png", view="attention", layer=2, head=5)
    save_png(tr, "neuron.png", view="neuron", layer=2, head=5, query=3)

Each picture draws the view data (`data.py`): the same labels, colour tables (`data.lut`)
and colour limits as the explorer and the exported page. Object API only: no pyplot, no
global backend change.
"""

from __future__ import annotations

import io

from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from . import data

MAX_TICKS = 128  # every token label up to this many tokens; above, thinned


def cmap(name: str) -> ListedColormap:
    """The view data's colour scale as a matplotlib colour map (the same 256 colours)."""
    return ListedColormap(np.asarray(data.lut(name)) / 255.0, name=name)


def _ticks(ax, labels, axis: str) -> None:
    labels = list(labels)
    n = len(labels)
    step = max(1, int(np.ceil(n / MAX_TICKS)))
    idx = np.arange(0, n, step)
    size = 9 if n <= 40 else 7 if n <= 80 else 5
    if axis == "x":
        ax.set_xticks(idx, [labels[i] for i in idx], rotation=90, fontsize=size)
    else:
        ax.set_yticks(idx, [labels[i] for i in idx], fontsize=size)


def _words(labels) -> list[str]:
    return [s.split(" ", 1)[1] if " " in s else s for s in labels]


def _heat(mfig, ax, z, scale_name, clim, label):
    im = ax.imshow(z, cmap=cmap(scale_name), vmin=clim[0], vmax=clim[1], interpolation="nearest", aspect="auto")
    mfig.colorbar(im, ax=ax, shrink=0.7, label=label)
    return im


def _attention(vd, head=0, **_):
    z = vd["arrays"]["maps"][head]
    side = min(12.0, 3.5 + 0.2 * z.shape[0])
    mfig = Figure(figsize=(side + 1.6, side), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    _heat(mfig, ax, z, vd["scale"]["name"], vd["scale"]["clim"][head], vd["scale"]["unit"])
    ax.set_aspect("equal")
    _ticks(ax, _words(vd["labels"]), "x")
    _ticks(ax, _words(vd["labels"]), "y")
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(f"{vd['axes'][1]} (attended to)")
    ax.set_ylabel(f"{vd['axes'][0]} (attends)")
    blocks = "" if vd["edges"] is None else \
        f"\n(block means: {vd['edges'][-1]} tokens in {len(vd['edges']) - 1} blocks a side)"
    mfig.suptitle(f"layer {vd['layer']}, head {head}:  {data.plain_formula(vd['formula'], html=False, unicode=True)}"
                  + blocks)
    return mfig


def _model(vd, **_):
    L, n_h = vd["layers"], vd["heads"]
    width, height = 0.75 * n_h + 1, 0.75 * L + 1.1
    mfig = Figure(figsize=(width, height), dpi=110)
    axes = mfig.subplots(L, n_h, squeeze=False, gridspec_kw=dict(wspace=0.06, hspace=0.06, left=0.7 / width,
                                                                right=1 - 0.2 / width, bottom=0.2 / height,
                                                                top=1 - 0.8 / height))
    cm = cmap(vd["scale"]["name"])
    for ly in range(L):
        for h in range(n_h):
            ax = axes[ly][h]
            lo, hi = vd["scale"]["clim"][ly][h]
            ax.imshow(vd["arrays"]["maps"][ly, h], cmap=cm, vmin=lo, vmax=hi, interpolation="nearest", aspect="auto")
            ax.set_xticks([]), ax.set_yticks([])
            if h == 0:
                ax.set_ylabel(f"L{ly}", fontsize=8, rotation=0, ha="right", va="center")
            if ly == 0:
                ax.set_title(f"H{h}", fontsize=8)
    shown = "" if vd["shown"] == vd["tokens"] else f" (block means, {vd['tokens']} tokens as {vd['shown']})"
    mfig.suptitle(f"model view: attention {vd['kind']}, layers x heads{shown}", y=1 - 0.15 / height, va="top")
    return mfig


def _head(vd, **_):
    labels = _words(vd["labels"])
    n = len(labels)
    mfig = Figure(figsize=(6.5, max(3.5, 0.26 * n + 1.2)), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    handles = []
    for h in vd["heads"]:
        z = vd["arrays"]["maps"][h]
        colour = vd["colours"][h % len(vd["colours"])]
        qi, ki = np.nonzero(z >= vd["min_weight"])
        for i, j in zip(qi, ki):
            ax.plot([0.03, 0.97], [-i, -j], color=colour, alpha=min(1.0, 0.1 + 0.9 * z[i, j]), lw=0.5 + 3 * z[i, j])
        handles.append(Line2D([], [], color=colour, lw=3, label=f"head {h}"))
    for i, s in enumerate(labels):
        ax.text(-0.01, -i, s, ha="right", va="center", fontsize=9)
        ax.text(1.01, -i, s, ha="left", va="center", fontsize=9)
    ax.set_xlim(-0.5, 1.5)
    ax.axis("off")
    ax.legend(handles=handles, loc="upper right", fontsize=8, frameon=False)
    ax.set_title(f"head view, layer {vd['layer']}: query (left) \u2192 key (right)")
    return mfig


def _token(vd, **_):
    rows = vd["arrays"]["rows"]
    L, n_h, n = rows.shape
    z = rows.reshape(L * n_h, n) / np.asarray(vd["scale"]["clim"])[:, :, 1].reshape(-1, 1)
    mfig = Figure(figsize=(min(14, 3 + 0.25 * n), min(14, 2 + 0.08 * L * n_h)), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    _heat(mfig, ax, z, vd["scale"]["name"], [0, 1], "weight / row max")
    _ticks(ax, _words(vd["labels"]), "x")
    ax.set_yticks([ly * n_h + n_h / 2 - 0.5 for ly in range(L)], [f"layer {ly}" for ly in range(L)], fontsize=8)
    for ly in range(1, L):
        ax.axhline(ly * n_h - 0.5, color="#c2410c", lw=0.8)
    ax.set_title(f"where {vd['label']} attends, in every layer (bands of {n_h} heads)")
    return mfig


def _neuron(vd, head=0, query=0, **_):
    num = data.neuron_numbers(vd, head, query)
    labels = _words(vd["labels"])
    n, d = num["k"].shape
    mfig = Figure(figsize=(12, max(3.5, 0.3 * n + 1.8)), dpi=110, layout="constrained")
    grid = mfig.add_gridspec(2, 4, height_ratios=[1, max(2, n)], width_ratios=[3, 3, 1.4, 1.4])
    cm, lim = cmap(vd["scale"]["name"]), vd["scale"]["clim"][1]
    plim = vd["scale_prod"]["clim"][head][1]
    axq = mfig.add_subplot(grid[0, 0])
    axq.imshow(num["q"][None], cmap=cm, vmin=-lim, vmax=lim, aspect="auto")
    axq.set_yticks([0], [f"q: {labels[query]}"], fontsize=9)
    axq.set_xticks([])
    for col, (z, lm, title) in enumerate(((num["k"], lim, "k of each key"), (num["prod"], plim, "q \u2218 k"))):
        ax = mfig.add_subplot(grid[1, col])
        ax.imshow(z, cmap=cm, vmin=-lm, vmax=lm, aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"d\u2096 = {d}")
        _ticks(ax, labels if col == 0 else [""] * n, "y")
    ys = np.arange(n)
    for col, (vals, colour, title) in enumerate(((num["scores"], "#6b7280", f"score = \u03a3 / \u221a{d}"),
                                                 (num["weights"], "#2563eb", "softmax: weight"))):
        ax = mfig.add_subplot(grid[1, 2 + col])
        ax.barh(ys, vals, color=colour)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_yticks([])
        ax.set_title(title, fontsize=10)
        for y, v in zip(ys, vals):
            ax.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    mfig.suptitle(f"neuron view: layer {vd['layer']}, head {head}, query {labels[query]}:  "
                  f"{data.plain_formula(vd['formulas']['scores'], html=False, unicode=True)}")
    return mfig


def _step(vd, head=0, **_):
    z = vd["arrays"]["z"][head if vd["per_head"] else 0]
    clim = vd["scale"]["clim"][head]
    heat_in = min(6.0, 1.2 + 0.22 * z.shape[0])
    table_in = 0.5 + 0.24 * max(len(vd["stats"]), len(vd["weights"]) + 1)
    mfig = Figure(figsize=(10, 1.2 + heat_in + table_in), dpi=110, layout="constrained")
    top, bottom = mfig.subfigures(2, 1, height_ratios=[1.2 + heat_in, table_in])
    ax = top.add_subplot()
    starts = np.asarray(vd["col_starts"], dtype=float)
    x_edges = np.append(starts, vd["columns"]) - 0.5
    y_edges = np.arange(z.shape[0] + 1) - 0.5
    im = ax.pcolormesh(x_edges, y_edges, z, cmap=cmap(vd["scale"]["name"]), vmin=clim[0], vmax=clim[1])
    ax.set_ylim(y_edges[-1], y_edges[0])
    _ticks(ax, _words(vd["row_labels"]), "y")
    if vd["col_labels"]:
        ax.set_xticks(np.arange(len(vd["col_labels"])), _words(vd["col_labels"]), rotation=90, fontsize=8)
    ax.set_xlabel(vd["cols_axis"] + ("" if len(starts) == vd["columns"] else " (block means)"))
    top.colorbar(im, ax=ax, shrink=0.8)
    head_txt = f" (head {head})" if vd["per_head"] else ""
    edited = f"   [edited: {vd['edited']}]" if vd["edited"] else ""
    top.suptitle(f"{vd['key']}{head_txt}:  {data.plain_formula(vd['formula'], html=False, unicode=True)}{edited}\n"
                 f"{vd['shape']}", fontsize=11)
    left, right = bottom.subplots(1, 2)
    for ax2 in (left, right):
        ax2.axis("off")
    weights = [[w[0], w[1], f"{w[2]:,}"] for w in vd["weights"]] or [["(reads no weights)", "", ""]]
    for ax2, cells, cols, widths in ((left, [list(r) for r in vd["stats"]], ["statistic", "value"], [0.5, 0.5]),
                                     (right, weights, ["weight read", "shape", "parameters"], [0.5, 0.27, 0.23])):
        tab = ax2.table(cellText=cells, colLabels=cols, colWidths=widths, loc="upper center", cellLoc="left")
        tab.auto_set_font_size(False)
        tab.set_fontsize(9)
    return mfig


def _params(vd, **_):
    groups = vd["groups"]
    names = [g for g, _ in groups][::-1]
    vals = np.array([v for _, v in groups][::-1], dtype=float)
    mfig = Figure(figsize=(9, 1.2 + 0.28 * len(names)), dpi=110, layout="constrained")
    ax = mfig.add_subplot()
    ax.barh(names, vals, color="#2563eb")
    for y, v in enumerate(vals):
        ax.text(v, y, f" {int(v):,}", va="center", fontsize=8)
    ax.set_xlabel("parameters")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}M"))
    ax.set_xlim(0, vals.max() * 1.25)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(f"parameters by group: {vd['total']:,} in all (counted from {vd['source']})")
    return mfig


def _compare(vd, head=0, **_):
    labels = _words(vd["labels"])
    mfig = Figure(figsize=(15, 10), dpi=100, layout="constrained")
    grid = mfig.add_gridspec(2, 3)
    for col, (name, title) in enumerate((("a", "A"), ("b", "B"), ("diff", "B \u2212 A"))):
        ax = mfig.add_subplot(grid[0, col])
        sc = vd["scale_diff"] if name == "diff" else vd["scale"]
        clim = sc["clim"][head]
        _heat(mfig, ax, vd["arrays"][name][head], sc["name"], clim, sc["unit"])
        ax.set_aspect("equal")
        _ticks(ax, labels, "x")
        _ticks(ax, labels, "y")
        ax.set_title(f"{title}: layer {vd['layer']}, head {head}")
    ax = mfig.add_subplot(grid[1, :])
    g = vd["arrays"]["grid"]
    _heat(mfig, ax, g, vd["scale_grid"]["name"], vd["scale_grid"]["clim"], "relative change")
    ax.set_yticks(np.arange(len(vd["steps"])), vd["steps"], fontsize=8)
    ax.set_xticks(np.arange(g.shape[1]), [f"layer {i}" for i in range(g.shape[1])], fontsize=8)
    ax.set_title("relative change \u2016B \u2212 A\u2016 / \u2016A\u2016 of every step, down the layers")
    mfig.suptitle(f"A: {vd['texts'][0]}\nB: {vd['texts'][1]}", fontsize=11)
    return mfig


DRAW = {"attention": _attention, "model": _model, "head": _head, "token": _token, "neuron": _neuron, "step": _step,
        "params": _params, "compare": _compare}


def to_png(vd: dict, path, *, head: int = 0, query: int = 0, dpi: int | None = None):
    """A PNG of view data (`data.view_data(...)`): written to path (a file name or a binary file)."""
    if not isinstance(vd, dict) or vd.get("view") not in DRAW:
        raise TypeError("to_png draws view data: data.view_data(trace, view, ...) (for a trace, use save_png)")
    # every text is drawn as written: a sentence's `$...$` is not matplotlib mathtext
    with rc_context({"text.parse_math": False}):
        mfig = DRAW[vd["view"]](vd, head=head, query=query)
        FigureCanvasAgg(mfig)
        mfig.savefig(path, format="png", dpi=dpi or mfig.dpi, facecolor="white")
    return Path(path) if isinstance(path, (str, Path)) else path


def save_png(trace, path, view: str = "attention", layer: int = 0, head: int = 0, *, key: str | None = None,
             query: int = 0, ledger=None, kind: str = "probs", compare=None) -> Path:
    """Build a view of a trace and save it as a PNG. view: one of data.VIEWS ('attention', 'model',
    'head', 'token', 'neuron', 'step', 'params', 'compare' with compare=second_trace).
    The file is written whole or not at all (as export_html writes a page); a folder, a device or a
    FIFO at `path` is refused with NotARegularFileError before anything is drawn (writing a PNG into
    a FIFO nobody reads would block for ever)."""
    from .export import check_target, write_whole
    args = data.request(view, layer=layer, head=head, query=query, kind=kind, key=key)
    head = trace.check_head(head)
    path = Path(path)
    target = check_target(path, what="save_png", kind=".png")
    vd = data.view_data(trace, view, trace_b=compare, ledger=ledger, **args)
    buf = io.BytesIO()
    to_png(vd, buf, head=head, query=query)
    write_whole(target, buf.getvalue(), shown=path, what="the PNG")
    return path
