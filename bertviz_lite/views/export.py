"""One self-contained HTML page of a trace: attention heatmap (layer / head / pair selectors),
model view, head view, a step-through of every formula line, and the parameter breakdown.

The page makes no network request: plotly.js is inlined once (from the plotly package),
the interactivity is one static script shipped with the package (`assets/export.js`,
read and inlined), and the data sits in a `<script type="application/json">` block.

Size and fidelity. A 512-token BERT-base trace holds 144 attention maps of 512 x 512
(37.7 M numbers): 151 MB as float32, 37.7 MB even as uint8, far over the 15 MB page
budget, and attention maps of random weights are close to incompressible noise. So:

- every map is sent *down-sampled* to at most 96 x 96 (block means over near-equal token
  blocks), quantised to uint8 per map (value = q / 255 * the map's max), gzip-compressed
  and base64-encoded; the browser inflates it with its native `DecompressionStream('gzip')`.
  These feed the model view, and the heatmap / head view of any layer not sent in full.
- maps are sent at *full resolution* (every real token) when they fit: up to 96 tokens
  that is every map; above, whole layers are added (layer 0, the last, the middle, then
  the rest) while the page stays under `max_bytes` (default 14 MB). At 512 tokens with
  random weights that is one or two layers; `full_layers=[...]` picks them instead. The
  page says, for each layer, whether it is shown in full or as block means.
- full-resolution maps of inputs up to 64 tokens use uint16 (error <= max / 131070);
  longer ones uint8 (error <= max / 510, so a hovered weight can be off by up to 0.002).
- the step-through shows each tensor (and each head of per-head tensors) block-averaged
  to at most ~40 x 40 cells (uint8 between its min and max); its statistics (mean, std,
  min, max, layernorm and softmax checks) are computed here at full precision.
- the model view uses uint8 32 x 32 thumbnails inside the plotly figure itself.
Masked attention *scores* are not exported (the probabilities are the maps people read).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
from pathlib import Path

import numpy as np
import plotly.io as pio
from plotly.colors import get_colorscale
from plotly.offline import get_plotlyjs

from .. import schema
from .figures import (HEAD_COLOURS, attention_heatmap, block_mean, colour_limit, host, model_view, param_breakdown,
                      plain_formula, real_positions, shape_text, step_slice, step_stats, step_weights, stepper_steps,
                      token_labels)

SMALL_MAPS = 96  # every map, at most this many tokens a side
STEP_CELLS = 1_500_000  # uint8 cells shared by every step-through slice
THUMBNAIL = 32  # model view panels
DEFAULT_MAX_BYTES = 14_000_000
ASSET = Path(__file__).with_name("assets") / "export.js"


# ------------------------------------------------------------------------------------------
# packing arrays
# ------------------------------------------------------------------------------------------


def pack(a: np.ndarray) -> str:
    """An integer array's bytes, gzip-compressed, as base64 text (the page inflates it natively)."""
    raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def quantise(maps: np.ndarray, dtype=np.uint8) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative maps (..., q, k) as integers 0..max of dtype, scaled per map: (ints, scale per map)."""
    top = np.iinfo(dtype).max
    scale = maps.max(axis=(-2, -1))
    safe = np.where(scale > 0, scale, 1.0)
    ints = np.rint(maps / safe[..., None, None] * top).astype(dtype)
    return ints, scale


def block_labels(trace, positions: list[int], edges: np.ndarray) -> list[str]:
    """Axis labels of token blocks: '3 the' for a single token, '12-15 the…' for a block."""
    labels = token_labels(trace, positions)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        out.append(labels[a] if b - a == 1 else f"{positions[a]}-{positions[b - 1]} {trace.tokens[positions[a]]}\u2026")
    return out


def _probs(trace, layer: int, real: list[int]) -> np.ndarray:
    return host(trace.get("attn.probs", layer=layer))[:, real][:, :, real]


# ------------------------------------------------------------------------------------------
# the payload
# ------------------------------------------------------------------------------------------


def small_maps(trace, real: list[int]) -> dict:
    """Every layer's maps as block means of at most SMALL_MAPS tokens a side (uint8)."""
    L, A, n = trace.num_layers, trace.num_heads, len(real)
    m = min(n, SMALL_MAPS)
    out = np.zeros((L, A, m, m))
    for layer in range(L):
        p = _probs(trace, layer, real)
        for h in range(A):
            out[layer, h], edges, _ = block_mean(p[h], SMALL_MAPS)
    dtype = np.uint16 if n <= 64 else np.uint8  # short inputs: these are the full maps, keep them finer
    ints, scale = quantise(out, dtype)
    return dict(size=m, edges=edges.tolist(), labels=block_labels(trace, real, edges),
                dtype="u2" if dtype is np.uint16 else "u1", scale=scale.tolist(), data=pack(ints))


def full_layer(trace, layer: int, real: list[int]) -> dict:
    dtype = np.uint16 if len(real) <= 64 else np.uint8
    ints, scale = quantise(_probs(trace, layer, real), dtype)
    return dict(dtype="u2" if dtype is np.uint16 else "u1", scale=scale.tolist(), data=pack(ints))


def layer_order(num_layers: int) -> list[int]:
    """Which layers get full resolution first: the first, the last, the middle, then the rest."""
    first = [0, num_layers - 1, num_layers // 2]
    return list(dict.fromkeys(first + list(range(num_layers))))


def step_payload(trace, ledger=None) -> tuple[list[dict], str]:
    """Each trace key's view: formula, shapes, statistics, weights, and a block-mean slice per head."""
    keys = stepper_steps(trace)
    slices_count = sum(trace.num_heads if trace.axes(k)[0] == "head" else 1 for k in keys)
    side = int(min(64, max(8, math.isqrt(STEP_CELLS // max(1, slices_count)))))
    steps, chunks, offset = [], [], 0
    for key in keys:
        step, axes = schema.step_of(key), trace.axes(key)
        heads = range(trace.num_heads) if axes[0] == "head" else [0]
        slices = []
        for h in heads:
            a, labels, (row_axis, col_axis) = step_slice(trace, key, h)
            a = np.where(np.isfinite(a), a, np.nan)
            z, re_, ce = block_mean(a, side)
            lo, hi = float(np.nanmin(z)), float(np.nanmax(z))
            q = np.rint((np.nan_to_num(z, nan=lo) - lo) / ((hi - lo) or 1.0) * 255).astype(np.uint8)
            chunks.append(q.ravel())
            slices.append(dict(offset=offset, lo=lo, hi=hi))
            offset += q.size
        rows = labels if len(re_) - 1 == len(labels) else [
            labels[a] if b - a == 1 else f"{labels[a]}\u2026" for a, b in zip(re_[:-1], re_[1:])]
        steps.append(dict(
            key=key, title=plain_formula(step.formula), latex=step.formula, shape=shape_text(trace, key),
            note=step.note, stats=step_stats(trace, key), weights=[list(w) for w in step_weights(trace, key, ledger)],
            rows=rows, row_axis=row_axis, col_axis=col_axis, limit=colour_limit(trace, key)[0], cols=ce[:-1].tolist(), ncols=int(a.shape[-1]),
            shape_rc=[len(re_) - 1, len(ce) - 1], per_head=axes[0] == "head", slices=slices))
    return steps, pack(np.concatenate(chunks))


def figure_json(fig) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def heatmap_template(trace) -> dict:
    """The heatmap figure of layer 0, head 0 from the Python builder, without its numbers:
    the page fills z (and labels, title) for the selected layer and head."""
    fig = attention_heatmap(trace, 0, 0)
    fig.data[0].z = None
    return figure_json(fig)


def model_template(trace) -> dict:
    """The model view from the Python builder, thumbnails quantised to uint8 (0..255 per panel)."""
    fig = model_view(trace, max_tokens=THUMBNAIL)
    for t in fig.data:
        z = np.asarray(t.z, dtype=float)
        t.z = np.rint(np.nan_to_num(z) / (np.nanmax(z) or 1.0) * 255).astype(np.uint8)
        t.zmin, t.zmax = 0, 255
        t.hovertemplate = f"layer {t.meta['layer']}, head {t.meta['head']}: click to open<extra></extra>"
    return figure_json(fig)


def build_payload(trace, *, ledger=None, title=None, full_layers="auto", max_bytes=DEFAULT_MAX_BYTES,
                  fixed_bytes: int = 0) -> dict:
    """Everything the page shows, as JSON-ready data (arrays packed)."""
    real = real_positions(trace)
    steps, steps_data = step_payload(trace, ledger)
    data = dict(
        title=title or f"{trace.model_name}: {' | '.join(trace.texts)}", model=trace.model_name,
        texts=list(trace.texts), layers=trace.num_layers, heads=trace.num_heads, n=len(real), n_total=trace.n,
        tokens=[trace.tokens[i] for i in real], labels=token_labels(trace, real), colours=list(HEAD_COLOURS),
        diverging=get_colorscale("RdBu_r"),
        probs_formula=plain_formula(schema.STEP_BY_KEY["attn.probs"].formula),
        segments=[trace.segments[i] for i in real], has_pair=trace.has_pair,
        small=small_maps(trace, real), full={}, steps=steps, steps_data=steps_data,
        figures=dict(heatmap=heatmap_template(trace), model=model_template(trace),
                     params=figure_json(param_breakdown(ledger, config=trace.config)) if ledger is not None else None),
        budget=max_bytes)
    if len(real) <= SMALL_MAPS and full_layers == "auto":
        return data  # the small maps are the full maps
    wanted = layer_order(trace.num_layers) if full_layers in ("auto", "all") else list(full_layers or [])
    size = fixed_bytes + len(to_json(data))
    for layer in wanted:
        layer = trace.check_layer(layer)
        block = full_layer(trace, layer, real)
        extra = len(block["data"]) + 200
        if full_layers == "auto" and size + extra > max_bytes:
            break
        data["full"][str(layer)] = block
        size += extra
    return data


# ------------------------------------------------------------------------------------------
# the page
# ------------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2937; }
header { padding: 12px 20px; background: #f3f4f6; border-bottom: 1px solid #d1d5db; }
header h1 { font-size: 18px; margin: 0 0 4px 0; } header p { margin: 0; font-size: 13px; color: #4b5563; }
nav { display: flex; gap: 4px; padding: 8px 20px 0 20px; border-bottom: 1px solid #d1d5db; }
nav button { border: 1px solid #d1d5db; border-bottom: none; background: #e5e7eb; padding: 6px 14px;
             cursor: pointer; border-radius: 6px 6px 0 0; font-size: 14px; }
nav button.active { background: white; font-weight: 600; }
section { padding: 12px 20px; } .controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap;
          margin-bottom: 8px; font-size: 14px; }
.note { font-size: 13px; color: #6b7280; margin: 4px 0 8px 0; }
.formula { font-size: 20px; margin: 6px 0; } .shape { font-family: ui-monospace, monospace; font-size: 13px; }
table.bvl { border-collapse: collapse; font-size: 13px; margin: 6px 16px 6px 0; display: inline-table;
            vertical-align: top; }
table.bvl td, table.bvl th { border: 1px solid #e5e7eb; padding: 3px 8px; text-align: left; }
table.bvl th { background: #f3f4f6; }
"""


def to_json(data: dict) -> str:
    """JSON safe inside a <script> block."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def render_page(data: dict, title: str) -> str:
    script = ASSET.read_text(encoding="utf-8")
    assert "</script" not in script.lower()
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline' "
        "'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src data: blob:\">\n"
        f"<style>{STYLE}</style>\n</head>\n<body>\n<div id=\"bvl-app\"></div>\n"
        f"<script type=\"application/json\" id=\"bvl-data\">{to_json(data)}</script>\n"
        f"<script>{get_plotlyjs()}</script>\n<script>{script}</script>\n</body>\n</html>\n")


def export_html(trace, path, *, ledger=None, title=None, full_layers="auto",
                max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Write one self-contained HTML page of a trace (all views); returns its path.

    ledger: a `count_params(model)` ledger adds the parameter breakdown and each step's weights.
    full_layers: "auto" (full-resolution maps while the page stays under max_bytes), "all",
    or a list of layers. See the module docstring for the size / fidelity trade-off.
    """
    missing = [k for k in (f"layer.{i}.attn.probs" for i in range(trace.num_layers)) if k not in trace]
    if missing:
        raise KeyError(f"export_html needs the attention maps of every layer; this trace lacks {missing[0]!r} "
                       "(trace with keep=None, or a keep= list that includes 'attn.probs')")
    trace = trace.to_host()
    title = title or f"bertviz-lite: {trace.model_name}"
    fixed = len(get_plotlyjs()) + len(ASSET.read_text(encoding="utf-8")) + len(STYLE) + 2000
    data = build_payload(trace, ledger=ledger, title=title, full_layers=full_layers, max_bytes=max_bytes,
                         fixed_bytes=fixed)
    path = Path(path)
    path.write_text(render_page(data, title), encoding="utf-8")
    return path
