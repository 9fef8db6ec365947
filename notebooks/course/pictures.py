"""The course's pictures: what a lesson stores under `# PICTURE` and shows in its Try-it controls.

    from course.pictures import picture, flow_picture, model_config
    picture(tr, "attention", layer=5, head=11)                  # a view, drawn with matplotlib
    picture(flow_picture(model_config("minilm"), highlight=["attn.probs"], strip=True))

`picture` shows a view of a trace, view data or a matplotlib Figure as a stored PNG; `png_bytes` is the same
PNG as bytes, for a Try-it control that redraws a `widgets.Image`. The figures (`forward_pass`, `flow_picture`,
`vectors_picture`) are drawn from `bertviz_lite.schema` and a trace; `symbol_table` and `LAYERS` are the text
every lesson carries. Matplotlib and IPython are imported where a picture is drawn.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np


def picture(what, view: str | None = None, *, dpi: int | None = 80, head: int = 0, query: int = 0, **args):
    """A static PNG for a lesson's "Look" section, as an IPython Image; show it in a cell whose first
    line is `# PICTURE` (scripts/refresh_notebooks.py stores it, so the lesson reads on GitHub).

    what:
    - a trace, with `view` one of bertviz_lite.views.VIEWS and that view's arguments:
      `picture(tr, "attention", layer=5, head=11)`, `picture(tr, "model")`,
      `picture(tr, "head", layer=1, heads=[8, 9])`, `picture(tr, "step", key="embed.ln")`,
      `picture(tr, "params", ledger=ledger)`: drawn by bertviz_lite.views.to_png from the same view
      data as the live views;
    - view data (`bertviz_lite.views.view_data(...)`, maybe with its arrays replaced);
    - a matplotlib Figure (a plotly figure is not redrawn: pass the trace and a view name, or draw
      the lesson's own figure with matplotlib): saved with a tight bounding box, so a label that runs past
      the axes is kept whole, never cropped.
    """
    from IPython.display import Image

    if hasattr(what, "savefig"):
        return Image(data=png_bytes(what, dpi=dpi))
    buf = io.BytesIO()
    if isinstance(what, dict):
        _view_png(what, buf, head=head, query=query, dpi=dpi)
    elif view is not None:
        from bertviz_lite.views import view_data

        if view == "attention":
            head = what.check_head(head)
        vd = view_data(what, view, **args)
        _view_png(vd, buf, head=head, query=query, dpi=dpi)
    else:
        raise TypeError(f"picture() draws a trace (with view=...), view data or a matplotlib Figure; "
                        f"got {type(what).__name__}" + ("" if view else " without view="))
    return Image(data=buf.getvalue())


def png_bytes(fig, *, dpi: int | None = 80) -> bytes:
    """A matplotlib Figure as PNG bytes, saved with a tight bounding box on white (a label that runs past the
    axes is kept whole): what `picture(fig)` shows, and what a Try-it control puts in a `widgets.Image`."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi, bbox_inches="tight", facecolor="white")
    return buf.getvalue()


def _view_png(vd: dict, buf, *, head: int, query: int, dpi):
    from bertviz_lite.views import to_png

    to_png(vd, buf, head=head, query=query, dpi=dpi)


def model_config(name: str = "minilm"):
    """The BertConfig of the model a lesson runs, without loading its weights, so that a lesson's strip of the
    forward pass is drawn at that model's sizes (MiniLM: 6 layers, d_k = 32): "minilm" and "minilm-mlm" read
    the installed all-MiniLM-L6-v2's config.json, "random" is BERT-base, a Hugging Face name reads its cached
    config.json."""
    from bertviz_lite import BertConfig, loading

    if name == "random":
        return BertConfig()
    if name in ("minilm", "minilm-mlm"):
        return BertConfig.from_json(loading.find_minilm() / "config.json")
    folder = loading.cached_folder(name)
    if folder is None:
        raise ValueError(f"model_config: {name!r} is not 'minilm', 'minilm-mlm', 'random' or a cached Hugging Face "
                         "model")
    return BertConfig.from_json(Path(folder) / "config.json")


LAYERS = ("**Layer numbers.** Formulas count the layers 1..L, as the paper and `hidden_states` do; trace keys count "
          "them from 0, as code does. So trace `layer.{l}` is formula layer l+1: it reads $Z_l$ and writes $Z_{l+1}$ "
          "(`layer.{l}.ffn.ln`). $Z_0$ is `embed.ln`, the embeddings after their LayerNorm, and $Z_L$ is "
          "`layer.{L-1}.ffn.ln`. A formula line of layer $l$ (reading $Z_{l-1}$) is recorded under `layer.{l-1}.`, "
          "which is how every table and picture of the course writes it.")


def symbol_table() -> str:
    """The course's "One symbol per thing" table as markdown, from `bertviz_lite.schema.SYMBOLS` (each
    lesson carries it as a markdown cell, so GitHub shows it; tests/course/test_lessons.py keeps them in step)."""
    from bertviz_lite.schema import SYMBOLS

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [f"| `{s.symbol}` | {cell(s.meaning)} | {cell(', '.join(s.also))} |" for s in SYMBOLS]
    return ("**The course's table of symbols**, the same in every lesson (the package's "
            "`bertviz_lite.schema.SYMBOLS`): $A$ is only ever an attention map, the number of heads is $n_h$.\n\n"
            "| symbol | what it is | other names in the sources and code |\n|---|---|---|\n" + "\n".join(rows)
            + "\n\n" + LAYERS)


def forward_pass(config, n: int, *, highlight=(), long: int | None = None):
    """The data-flow figure of the whole forward pass, drawn from `bertviz_lite.schema.STEPS` (a
    matplotlib Figure; show it with `picture(...)`): every trace key top to bottom, its formula, its
    shape at the lesson's n and at `long` tokens (the card's 512: config.max_positions), and the
    weights it reads. The layer steps sit in one box repeated L times. `highlight` names the keys a
    lesson computes ("attn.scores", "embed.sum"): they are filled, the rest is grey; an optional head
    ("mlm.logits", "head.logits") is drawn only when highlighted."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    from bertviz_lite import schema

    long = long or config.max_positions
    # every step a BERT runs, and an optional one (the masked-LM or a task head) when highlighted
    steps = [st for st in schema.STEPS if not st.optional or (st.key in highlight and schema.STEP_BY_KEY[st.key] is st)]
    unknown = set(highlight) - {st.key for st in steps}
    if unknown:
        known = list(dict.fromkeys(st.key for st in schema.STEPS))
        raise ValueError(f"forward_pass: no step {sorted(unknown)}; the steps are {known}")
    rows = len(steps)
    fig = Figure(figsize=(12.5, 0.34 * rows + 1.1))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 12.5)
    ax.set_ylim(rows + 1.6, -0.3)
    ax.axis("off")
    cols = (0.35, 2.35, 6.55, 8.25, 9.95)
    for x, head in zip(cols, ("trace key", "formula", f"shape, n = {n}", f"shape, n = {long}", "weights it reads")):
        ax.text(x, 0.2, head, fontsize=10, fontweight="bold", va="center")
    layer_rows = [i for i, st in enumerate(steps) if st.scope == "layer"]
    top, bottom = layer_rows[0] + 1, layer_rows[-1] + 1
    ax.add_patch(FancyBboxPatch((0.12, top - 0.45), 12.25, bottom - top + 0.9, boxstyle="round,pad=0.02",
                                facecolor="#f4f6fb", edgecolor="#7a86a8", linewidth=1.2))
    ax.text(0.2, (top + bottom) / 2, f"x L = {config.num_layers} layers", rotation=90, fontsize=9, va="center",
            ha="center", color="#4a5578")

    def shape(key, m):
        return " x ".join(str(d) for d in schema.shape_of(key, config, m))

    for i, st in enumerate(steps, start=1):
        on = not highlight or st.key in highlight
        colour = "black" if on else "#9a9a9a"
        if highlight and st.key in highlight:
            ax.add_patch(FancyBboxPatch((0.3, i - 0.36), 12.0, 0.72, boxstyle="round,pad=0.01",
                                        facecolor="#ffe9a8", edgecolor="#d39b00", linewidth=1.0))
        key = (LAYER_PREFIX if st.scope == "layer" else "") + st.key
        ax.text(cols[0], i, key, fontsize=9, family="monospace", va="center", color=colour)
        ax.text(cols[1], i, _formula(st, config), fontsize=10, va="center", color=colour)
        ax.text(cols[2], i, shape(st.key, n), fontsize=9, va="center", color=colour)
        ax.text(cols[3], i, shape(st.key, long), fontsize=9, va="center", color=colour)
        ax.text(cols[4], i, ", ".join(w.split(".")[-1] for w in st.reads) or "-", fontsize=9, va="center",
                family="monospace", color=colour)
    ax.text(0.35, rows + 1.15, f"{config.num_layers} layers, H = {config.hidden_size}, n_h = {config.num_heads} heads "
            f"of d_k = {config.head_size}, d_ffnn = {config.ffn_size}, N_V = {config.vocab_size:,}; "
            "drawn from bertviz_lite.schema.STEPS", fontsize=9, color="#444444", va="center")
    return fig


def _formula(step, config) -> str:
    """A step's formula line at `config` (an optional step's as written), through mathtext; one it cannot parse is
    written as text."""
    from matplotlib.mathtext import MathTextParser

    from bertviz_lite import schema

    line = step.formula if step.optional else schema.formula_of(step.key, config)  # the config's own line
    try:
        MathTextParser("path").parse(f"${line}$")
        return f"${line}$"
    except Exception:
        return line


# the formulas of a layer read Z_{l-1} (layer l of 1..L), which the trace records under layer.{l-1} (see LAYERS)
LAYER_PREFIX = "layer.{l-1}."

# where each step's box sits in the data-flow picture (x centre, row): the layout is the picture's own; what is
# drawn in the boxes and which arrows join them come from schema.STEPS (key, formula, takes)
_FLOW = {"embed.token": (1.9, 0), "embed.position": (5.0, 0), "embed.segment": (8.1, 0), "embed.sum": (5.0, 1),
         "embed.ln": (5.0, 2), "embed.proj": (5.0, 2.9), "Z_{l-1}": (5.0, 3.3), "attn.q": (1.9, 4.4),
         "attn.k": (5.0, 4.4), "attn.v": (8.1, 4.4), "attn.scores": (3.3, 5.4), "attn.probs": (3.3, 6.4),
         "attn.context": (6.7, 7.4), "attn.concat": (5.0, 8.6), "attn.out": (5.0, 9.6), "attn.resid": (5.0, 10.6),
         "attn.ln": (5.0, 11.6), "ffn.up": (5.0, 12.6), "ffn.act": (5.0, 13.6), "ffn.down": (5.0, 14.6),
         "ffn.resid": (5.0, 15.6), "ffn.ln": (5.0, 16.6), "pooler.out": (2.6, 18.2), "mlm.logits": (7.4, 18.2),
         "head.logits": (2.6, 19.3)}
_SIDE = {"attn.q", "attn.k", "attn.v", "attn.scores", "attn.probs", "attn.context", "embed.token", "embed.position",
         "embed.segment", "pooler.out", "mlm.logits", "head.logits"}


def flow_picture(config, *, highlight=(), head: str | None = None, strip: bool = False, dpi_scale: float = 1.0):
    """The forward pass as data flow (a matplotlib Figure; show it with `picture(...)`): one box per trace key
    of `bertviz_lite.schema.STEPS` with its formula, arrows from each step's `takes`, the residual branches
    around attention and the feed-forward block, the split into n_h heads and their concatenation, the L-fold
    layer box, and the fork into the pooler ([CLS] row) and the masked-LM head (every row).
    `highlight` fills the boxes of the keys a lesson computes; `strip=True` draws only the rows around them
    (a lesson's own part of the picture). `head` adds a task head (an optional STEPS entry, e.g.
    "sequence_classification")."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch, Rectangle

    from bertviz_lite import schema

    head = head if head is not None else getattr(config, "head", None)
    steps = {st.key: st for st in schema.STEPS if not st.optional}
    steps["mlm.logits"] = next(st for st in schema.STEPS if st.key == "mlm.logits")
    if config.embed_size == config.hidden_size:
        steps.pop("embed.proj", None)
    if head is not None:
        found = [st for st in schema.STEPS if st.key == "head.logits" and st.optional == head]
        if not found:
            raise ValueError(f"flow_picture: no task head {head!r}; the heads are "
                             f"{[st.optional for st in schema.STEPS if st.key == 'head.logits']}")
        steps["head.logits"] = found[0]
    else:
        steps.pop("head.logits", None)
    missing = set(steps) - set(_FLOW)
    if missing:  # a new step in schema.STEPS needs a place in the picture
        raise ValueError(f"flow_picture: no place for the steps {sorted(missing)}")
    unknown = set(highlight) - set(steps)
    if unknown:
        raise ValueError(f"flow_picture: no step {sorted(unknown)}; the steps are {list(steps)}")
    # a strip: the highlighted steps, the steps they take and the steps that take them
    near = set(highlight) | {t for k in highlight for t in steps[k].takes} | \
        {k for k, st in steps.items() if set(st.takes) & set(highlight)}
    near = {"ffn.ln" if k == "Z_L" else k for k in near}
    rows = [_FLOW[k][1] for k in near if k in _FLOW] if strip and highlight else []
    top, bottom = (min(rows) - 0.6, max(rows) + 0.6) if rows else (-0.7, max(_FLOW[k][1] for k in steps) + 1.1)
    fig = Figure(figsize=(8.6, 0.52 * (bottom - top) + 0.3))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.2, 10.4)
    ax.set_ylim(bottom, top)
    ax.axis("off")
    grey, line = "#9a9a9a", "#555555"
    inch = 0.52  # inches per unit of y (the figure's height above)
    behind = dict(facecolor="white", edgecolor="none", pad=0.6)  # a label sits on white: no line runs through it

    def label(x, y, text, **kw):
        return ax.text(x, y, text, bbox={**behind, "facecolor": kw.pop("back", "white")}, zorder=4, **kw)

    def along(x, y0, y1, texts, size, **kw):
        """A label that runs down the y range y0..y1, put where that range is drawn (a strip shows a part of it):
        the first of `texts` that fits there, whole, or none; never a label cut by the picture's edge."""
        lo, hi = max(y0, top + 0.1), min(y1, bottom - 0.1)
        for text in texts:
            if len(text) * size * 0.5 / 72 <= (hi - lo) * inch:
                label(x, (lo + hi) / 2, text, rotation=90, fontsize=size, va="center", **kw)
                return

    def box(key):
        x, y = _FLOW[key]
        if key == "Z_{l-1}":
            return x, y, 1.2, 0.3
        return x, y, (2.9 if key in _SIDE else 5.6) / 2, 0.36

    # the layer box (L times) and the heads' box
    ax.add_patch(FancyBboxPatch((0.05, 2.75), 10.1, 14.35, boxstyle="round,pad=0.02", facecolor="#f4f6fb",
                                edgecolor="#7a86a8", linewidth=1.2, zorder=0))
    L = config.num_layers
    along(10.3, 2.75, 17.1, [f"x L = {L} layers: formula layer l is trace layer.{{l-1}}; its output Z_l is the next "
                             "layer's input", f"x L = {L} layers", f"L = {L}"], 8, ha="center", color="#4a5578",
          back="#f4f6fb")
    ax.add_patch(Rectangle((0.3, 3.9), 9.6, 4.05, facecolor="none", edgecolor="#7a86a8", linestyle="--", linewidth=1))
    if top < 7.6 < bottom:
        label(0.45, 7.6, f"split into n_h = {config.num_heads} heads of d_k = {config.head_size}:\n"
              "each head runs these lines on its own columns", fontsize=7.5, ha="left", va="center", color="#4a5578",
              back="#f4f6fb")
    if top < 8.12 < bottom:
        label(6.0, 8.12, "concatenate the heads", fontsize=7.5, ha="left", va="center", color="#4a5578", back="#f4f6fb")

    def arrow(a, b, text="", colour=line, via=None):
        (xa, ya, _, ha), (xb, yb, _, hb) = box(a), box(b)
        start, end = (xa, ya + ha), (xb, yb - hb)
        if via is not None:  # a residual branch: out sideways, down, back in
            side = via
            xa_edge = xa - box(a)[2] if side < xa else xa + box(a)[2]
            xb_edge = xb - box(b)[2] if side < xb else xb + box(b)[2]
            ax.plot([xa_edge, side, side], [ya, ya, yb], color=colour, linewidth=1.3, zorder=1)
            ax.annotate("", xy=(xb_edge, yb), xytext=(side, yb),
                        arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.3), zorder=1)
            along(side, ya, yb, [text, text.split(":")[0]], 7.5, ha="center", color=colour, back="#f4f6fb")
            return
        ax.annotate("", xy=end, xytext=start, arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.1),
                    zorder=1)
        if text and top < (start[1] + end[1]) / 2 < bottom:
            label((start[0] + end[0]) / 2 + 0.12, (start[1] + end[1]) / 2, text, fontsize=7.5, color=colour,
                  va="center", back="#f4f6fb" if 2.75 < start[1] < 17.1 else "white")

    source = {"Z_{l-1}": "Z_{l-1}", "Z_L": "ffn.ln"}
    for key, st in steps.items():
        for src in st.takes:
            src = source.get(src, src)
            if key == "attn.resid" and src == "Z_{l-1}":
                arrow(src, key, "residual: Z_(l-1) skips attention", colour="#b5562b", via=0.2)
            elif key == "ffn.resid" and src == "attn.ln":
                arrow(src, key, "residual: Z-bar skips the FFN", colour="#b5562b", via=9.6)
            elif src in _FLOW and src in steps or src == "Z_{l-1}":
                text = {"pooler.out": "[CLS] row", "mlm.logits": "every row"}.get(key, "") if src == "ffn.ln" else ""
                arrow(src, key, text)
    arrow(steps.get("embed.proj") and "embed.proj" or "embed.ln", "Z_{l-1}", "layer.0 reads Z_0")
    def shown(key):  # a box a strip draws whole (texts are not clipped to the axes: one outside would show)
        _, y, _, h = box(key)
        return top <= y - h and y + h <= bottom

    # the layer input and the boxes
    x, y, w, h = box("Z_{l-1}")
    if shown("Z_{l-1}"):
        ax.add_patch(FancyBboxPatch((x - w, y - h), 2 * w, 2 * h, boxstyle="round,pad=0.02", facecolor="white",
                                    edgecolor=line))
        ax.text(x, y, r"$Z_{l-1}$  (the layer's input)", fontsize=8.5, ha="center", va="center")
    for key, st in steps.items():
        if not shown(key):
            continue
        x, y, w, h = box(key)
        on, faded = key in highlight, strip and highlight and key not in highlight  # a strip greys its context
        ax.add_patch(FancyBboxPatch((x - w, y - h), 2 * w, 2 * h, boxstyle="round,pad=0.02", zorder=2,
                                    facecolor="#ffe9a8" if on else "white",
                                    edgecolor="#d39b00" if on else (grey if faded else line),
                                    linewidth=1.4 if on else 0.9))
        colour = grey if faded else "black"
        prefix = LAYER_PREFIX if st.scope == "layer" else ""
        ax.text(x, y - 0.15, prefix + key, fontsize=7.5, family="monospace", ha="center", va="center", color=colour,
                zorder=3)
        ax.text(x, y + 0.14, _formula(st, config), fontsize=8.5, ha="center", va="center", color=colour, zorder=3)
    if not strip:
        ax.text(0.1, bottom - 0.25, f"{config.num_layers} layers, H = {config.hidden_size}, n_h = {config.num_heads}, "
                f"d_k = {config.head_size}, d_ffnn = {config.ffn_size}; boxes, formulas and arrows drawn from "
                "bertviz_lite.schema.STEPS (key, formula, takes)", fontsize=7.5, color="#444444")
    return fig


def vectors_picture(tr, stages, *, layer: int = 0, tokens: int | None = None, title: str | None = None):
    """Per-token vectors as coloured rows, stage by stage, drawn from a trace (a matplotlib Figure; show it with
    `picture(...)`): each stage is one trace key, one row of colour per token and one column per feature (red
    above 0, blue below, each panel scaled to its own 99th percentile, so one large feature does not wash out
    the rest). A stage is a key (`"embed.sum"`; a layer key is read from `layer`) or a pair (key, how):
    - "rows": the [n, H] array as it is;
    - "heads": a [head, n, d_k] key (`attn.q`, `attn.context`) drawn as its n_h blocks side by side with a gap
      between them, each framed in its head's colour: the split into heads;
    - "joined": the same heads put back side by side as one [n, n_h * d_k] array with the blocks framed in the
      same colours: the concatenation (for `attn.q` it is Z W^Q before the split); an [n, H] key (`attn.concat`)
      is framed every d_k columns.
    A 3-d key is drawn as "heads" unless told otherwise. `tokens` keeps the first that many tokens."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    stages = [(s, None) if isinstance(s, str) else tuple(s) for s in stages]
    panels = []
    for key, how in stages:
        value = np.asarray(tr.get(key, layer=layer) if key.split(".")[0] in ("attn", "ffn") else tr[key],
                           dtype=np.float64)
        how = how or ("heads" if value.ndim == 3 else "rows")
        given = value.shape  # the key's own shape, for the title
        if how == "joined" and value.ndim == 2:  # an [n, H] key (attn.concat): cut into the heads' column blocks
            value = np.stack(np.split(value, tr.config.num_heads, axis=-1))
        if how not in ("rows", "heads", "joined") or (how != "rows") != (value.ndim == 3):
            raise ValueError(f"vectors_picture: {key} is {value.ndim}-d; 'rows' draws [n, H], 'heads' draws "
                             f"[head, n, d_k], 'joined' either; got {how!r}")
        if tokens is not None:
            value = value[..., :tokens, :]
        panels.append((key, how, value, given))
    n = panels[0][2].shape[-2]
    panels = [(key, how, value, given[:-2] + (n,) + given[-1:]) for key, how, value, given in panels]
    labels = list(tr.tokens)[:n]
    gap = 4  # columns of white between two heads
    width = max(v.shape[-1] * v.shape[0] + gap * (v.shape[0] - 1) if h == "heads" else
                v.shape[-1] * (v.shape[0] if h == "joined" else 1) for _, h, v, _ in panels)
    fig = Figure(figsize=(10.5, 0.3 + len(panels) * (0.13 * n + 0.6)))
    grid = fig.add_gridspec(len(panels), 1, hspace=0.45, left=0.1, right=0.98, top=0.93 if title else 0.97,
                            bottom=0.03)
    dark = colormaps["tab20"]

    def head_colour(h):  # the darker half of tab20, ten colours in turn
        return dark(2 * (h % 10))

    for i, (key, how, value, given) in enumerate(panels):
        ax = fig.add_subplot(grid[i])
        blocks = list(value) if value.ndim == 3 else [value]
        lim = float(np.percentile(np.abs(value), 99)) or 1.0
        x = 0
        for h, block in enumerate(blocks):
            w = block.shape[-1]
            ax.imshow(block, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", interpolation="nearest",
                      extent=(x - 0.5, x + w - 0.5, n - 0.5, -0.5))
            if value.ndim == 3:
                ax.add_patch(Rectangle((x - 0.5, -0.5), w, n, fill=False, linewidth=1.4,
                                       edgecolor=head_colour(h)))
                if how == "heads" and (len(blocks) <= 12 or h % 2 == 0):
                    ax.text(x + w / 2, -0.9, f"head {h}", ha="center", va="bottom", fontsize=7,
                            color=head_colour(h))
            x += w + (gap if how == "heads" else 0)
        ax.set_xlim(-0.5, width - 0.5)
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.set_xticks([])
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        scope = f"layer.{layer}." if key.split(".")[0] in ("attn", "ffn") else ""
        shape, d = " x ".join(str(s) for s in given), value.shape[-1]
        joined = (f"[{shape}]: the heads' blocks of d_k = {d} columns framed" if len(given) == 2 else
                  f"[{shape}] put side by side: [{n} x {value.shape[0] * d}]")
        what = {"rows": f"[{shape}]: one row per token", "heads": f"[{shape}]: split into {len(blocks)} heads",
                "joined": joined}[how]
        ax.set_title(f"{scope}{key}  {what}   (colour: the value, scaled to +-{lim:.2g})", fontsize=8.5, loc="left",
                     pad=12 if how == "heads" else 4)
    if title:
        fig.suptitle(title, fontsize=10, x=0.1, ha="left")
    return fig

