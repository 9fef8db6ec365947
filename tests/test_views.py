"""The views show what the trace holds: heatmap values and labels, pair blocks, the model
grid, the head view's lines, step views' shapes and weights, the parameter breakdown's sums,
static PNGs and the self-contained HTML export."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.backend import to_host
from bertviz_lite.views import (attention_heatmap, export_html, head_view, model_view, param_breakdown, save_png,
                                step_view, stepper_steps, to_png)
from bertviz_lite.views.figures import block_mean, plain_formula

pytest.importorskip("plotly")


def real_idx(tr):
    return [i for i, m in enumerate(tr.mask) if m]


def real_tokens(tr):
    return [t for t, m in zip(tr.tokens, tr.mask) if m]


def strip(labels):
    """'3 the' -> 'the' (the views prefix the position so repeated tokens stay apart)."""
    return [lab.split(" ", 1)[1] for lab in labels]


@pytest.fixture(scope="module")
def padded(small):
    return small.trace("The cat sat on the mat.", pad_to=24)


@pytest.fixture(scope="module")
def pair(small):
    return small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=30)


# ------------------------------------------------------------------------------------------
# attention heatmap
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["probs", "scores"])
def test_heatmap_z_is_the_heads_map(padded, kind):
    fig = attention_heatmap(padded, 1, 2, kind=kind)
    idx = real_idx(padded)
    want = to_host(padded.get(f"attn.{kind}", layer=1, head=2))[np.ix_(idx, idx)]
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isfinite(z).all()  # masked keys (-inf scores) are gone, not drawn
    np.testing.assert_allclose(z, want, rtol=0, atol=0)
    assert len(fig.data) == 1 and fig.data[0].type == "heatmap"


def test_heatmap_labels_are_real_tokens_in_order(padded):
    fig = attention_heatmap(padded, 0, 0)
    x, y = list(fig.data[0].x), list(fig.data[0].y)
    assert strip(x) == strip(y) == real_tokens(padded)
    assert len(set(x)) == len(x)  # "the" twice stays two categories
    assert not any("[PAD]" in lab for lab in x + y)
    assert padded.n > padded.n_real  # the fixture really is padded
    assert fig.layout.yaxis.autorange == "reversed"  # first query on top
    assert "%{y}" in fig.data[0].hovertemplate and "%{x}" in fig.data[0].hovertemplate
    assert fig.data[0].colorbar.title.text == "weight"


def test_heatmap_title_names_layer_head_and_formula(padded):
    fig = attention_heatmap(padded, 1, 3)
    assert "layer 1" in fig.layout.title.text and "head 3" in fig.layout.title.text
    assert "softmax" in fig.layout.title.text
    assert fig.layout.meta["latex"] == schema.STEP_BY_KEY["attn.probs"].formula
    assert fig.layout.xaxis.title.text.startswith("key") and fig.layout.yaxis.title.text.startswith("query")


@pytest.mark.parametrize("pf, qseg, kseg", [("A->A", 0, 0), ("A->B", 0, 1), ("B->A", 1, 0), ("B->B", 1, 1)])
def test_pair_filter_slices_the_block(pair, pf, qseg, kseg):
    fig = attention_heatmap(pair, 1, 0, pair_filter=pf)
    rows = [i for i in real_idx(pair) if pair.segments[i] == qseg]
    cols = [i for i in real_idx(pair) if pair.segments[i] == kseg]
    want = to_host(pair.get("attn.probs", layer=1, head=0))[np.ix_(rows, cols)]
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), want)
    assert strip(fig.data[0].y) == [pair.tokens[i] for i in rows]
    assert strip(fig.data[0].x) == [pair.tokens[i] for i in cols]
    assert pf in fig.layout.title.text


def test_pair_filter_needs_a_pair(padded):
    with pytest.raises(ValueError, match="pair"):
        attention_heatmap(padded, 0, 0, pair_filter="A->B")
    with pytest.raises(ValueError, match="pair_filter"):
        attention_heatmap(padded, 0, 0, pair_filter="A-B")


def test_heatmap_checks_layer_and_head(padded):
    with pytest.raises(bv.OutOfRangeError):
        attention_heatmap(padded, 5, 0)
    with pytest.raises(bv.OutOfRangeError):
        attention_heatmap(padded, 0, 9)


# ------------------------------------------------------------------------------------------
# model view
# ------------------------------------------------------------------------------------------


def test_model_view_has_every_layer_and_head(padded):
    fig = model_view(padded)
    L, A = padded.num_layers, padded.num_heads
    assert len(fig.data) == L * A
    assert sorted((t.meta["layer"], t.meta["head"]) for t in fig.data) == [(l, h) for l in range(L) for h in range(A)]
    idx = real_idx(padded)
    for t in fig.data:
        want = to_host(padded.get("attn.probs", layer=t.meta["layer"], head=t.meta["head"]))[np.ix_(idx, idx)]
        np.testing.assert_allclose(np.asarray(t.z), want, rtol=1e-6)


def test_model_view_downsamples_long_inputs(small):
    tr = small.trace(" ".join(["word"] * 70))
    fig = model_view(tr, max_tokens=16)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (16, 16)
    full = to_host(tr.get("attn.probs", layer=0, head=0)).astype(float)
    np.testing.assert_allclose(z.mean(axis=1).sum(), full.mean(axis=1).sum() * 16 / tr.n, rtol=0.2)
    assert fig.layout.meta["shown"] == 16 and fig.layout.meta["tokens"] == tr.n_real


def test_block_mean_is_exact_on_even_blocks():
    a = np.arange(64, dtype=float).reshape(8, 8)
    z, re_, ce = block_mean(a, 4)
    assert z.shape == (4, 4) and list(re_) == [0, 2, 4, 6, 8]
    assert z[0, 0] == a[:2, :2].mean() and z[3, 1] == a[6:, 2:4].mean()


# ------------------------------------------------------------------------------------------
# head view
# ------------------------------------------------------------------------------------------


def test_head_view_groups_lines_by_head(padded):
    fig = head_view(padded, 1, heads=[0, 2])
    legend = [t for t in fig.data if t.showlegend is not False and t.mode == "lines"]
    assert [t.name for t in legend] == ["head 0", "head 2"]
    assert {t.legendgroup for t in fig.data if t.mode == "lines"} == {"head 0", "head 2"}
    probs = to_host(padded.get("attn.probs", layer=1))
    idx = real_idx(padded)
    for h in (0, 2):
        segments = sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() // 2 for t in fig.data
                       if t.mode == "lines" and t.legendgroup == f"head {h}")
        assert segments == (probs[h][np.ix_(idx, idx)] >= 0.02).sum()


def test_head_view_token_columns(pair):
    fig = head_view(pair, 0, pair_filter="A->B")
    q, k = [t for t in fig.data if t.mode == "text"]
    assert list(q.text) == [pair.tokens[i] for i in real_idx(pair) if pair.segments[i] == 0]
    assert list(k.text) == [pair.tokens[i] for i in real_idx(pair) if pair.segments[i] == 1]
    assert "[PAD]" not in list(q.text) + list(k.text)
    assert "head 0" in q.hovertext[0]  # hovering a query lists its row


# ------------------------------------------------------------------------------------------
# step view
# ------------------------------------------------------------------------------------------

STEP_CASES = [
    ("embed.token", "W_T (30522 x 768) rows", "n x 768", {"embed.W_T": 30522 * 768}),
    ("layer.0.attn.q", "(n x 768)\u00b7(768 x 64)", "12 x n x 64", {"layer.0.attn.W_Q": 768 * 768,
                                                                        "layer.0.attn.b_Q": 768}),
    ("layer.3.attn.scores", "(n x 64)\u00b7(64 x n)", "12 x n x n", {}),
    ("layer.2.ffn.up", "(n x 768)\u00b7(768 x 3072)", "n x 3072", {"layer.2.ffn.W_up": 768 * 3072,
                                                                     "layer.2.ffn.b_up": 3072}),
    ("layer.5.attn.ln", "LayerNorm", "n x 768", {"layer.5.attn.ln.gamma": 768, "layer.5.attn.ln.beta": 768}),
    ("pooler.out", "(768 x 768)", "\u2192 768", {"pooler.W": 768 * 768, "pooler.b": 768}),
]


@pytest.fixture(scope="module")
def base_ledger(base):
    return bv.count_params(base)


@pytest.mark.parametrize("key, inputs, output, weights", STEP_CASES)
def test_step_view_shapes_and_weights(base_trace, base_ledger, key, inputs, output, weights):
    fig = step_view(base_trace, key, ledger=base_ledger)
    shape = fig.layout.title.subtitle.text
    assert inputs in shape and output in shape, shape
    assert {w[0]: w[2] for w in fig.layout.meta["weights"]} == weights
    assert {name: count for name, _, count in base_ledger.for_step(key)} == weights
    table = [t for t in fig.data if t.type == "table"][1]
    names, counts = list(table.cells.values[0]), list(table.cells.values[2])
    for name, count in weights.items():
        assert counts[names.index(name)] == f"{count:,}"
    assert fig.layout.meta["latex"] == schema.step_of(key).formula
    assert "\\" not in fig.layout.title.text  # no raw latex in the drawn title


def test_step_view_heatmap_and_head_slider(base_trace):
    fig = step_view(base_trace, "layer.0.attn.q")
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 12 and [t.visible for t in heat].count(True) == 1
    np.testing.assert_allclose(np.asarray(heat[3].z), to_host(base_trace.get("attn.q", layer=0, head=3)), rtol=1e-6)
    assert strip(heat[0].y) == list(base_trace.tokens)
    assert len(fig.layout.sliders[0].steps) == 12
    pooled = step_view(base_trace, "pooler.out")
    assert np.asarray(pooled.data[0].z).shape == (1, 768)


def test_step_view_checks(base_trace):
    ln = dict(step_view(base_trace, "layer.1.ffn.ln").layout.meta["stats"])
    assert any(k.startswith("row means") for k in ln) and any(k.startswith("row stds") for k in ln)
    stds = next(v for k, v in ln.items() if k.startswith("row stds"))
    lo, hi = (float(x) for x in stds.split(" .. "))
    assert 0.99 < lo <= hi < 1.01  # random weights: gamma 1, beta 0
    probs = dict(step_view(base_trace, "layer.0.attn.probs").layout.meta["stats"])
    assert probs["row sums (= 1)"].startswith("0.99999") or probs["row sums (= 1)"].startswith("1.0000")


def test_stepper_steps_in_forward_order(base_trace):
    assert stepper_steps(base_trace) == schema.trace_keys(base_trace.num_layers)


def test_plain_formulas_have_no_latex():
    for step in schema.STEPS:
        text = plain_formula(step.formula)
        assert "\\" not in text and "{" not in text, (step.key, text)
    assert plain_formula(r"S_{h} = Q_{h} K_{h}^\top / \sqrt{d_k}", html=False) == "S_h = Q_h K_h^T / \u221ad_k"


# ------------------------------------------------------------------------------------------
# parameter breakdown
# ------------------------------------------------------------------------------------------


def test_breakdown_sums_to_the_ledger(base, base_ledger):
    fig = param_breakdown(base_ledger, config=base.config)
    tree = fig.data[0]
    ids, parents, values = list(tree.ids), list(tree.parents), list(tree.values)
    leaves = [v for i, v in zip(ids, values) if i not in parents]
    assert sum(leaves) == base_ledger.total == bv.count_params(base).total
    assert values[ids.index("model")] == base_ledger.total
    for node, value in zip(ids, values):  # branchvalues="total": a parent is the sum of its children
        kids = [v for p, v in zip(parents, values) if p == node]
        assert not kids or sum(kids) == value
    assert tree.branchvalues == "total"
    groups = list(fig.data[1].cells.values[0])
    for group, count in base_ledger.by_group().items():
        assert group in groups
        assert fig.data[1].cells.values[1][groups.index(group)] == f"{count:,}"
    sources = list(fig.data[2].cells.values[0])
    assert sources == bv.reconcile(base.config).column("source")


# ------------------------------------------------------------------------------------------
# static PNG and HTML export
# ------------------------------------------------------------------------------------------


def _pixels(path):
    import matplotlib.image as mpimg
    return mpimg.imread(path)


@pytest.mark.parametrize("view", ["heatmap", "model", "head", "step", "params"])
def test_to_png_is_not_blank(small, padded, tmp_path, view):
    figs = {"heatmap": lambda: attention_heatmap(padded, 0, 1), "model": lambda: model_view(padded),
            "head": lambda: head_view(padded, 0), "step": lambda: step_view(padded, "layer.0.attn.q"),
            "params": lambda: param_breakdown(bv.count_params(small))}
    out = to_png(figs[view](), tmp_path / f"{view}.png")
    img = _pixels(out)
    assert img.shape[0] > 200 and img.shape[1] > 200
    assert img[..., :3].std() > 0.05  # not a blank page


def test_step_view_lists_the_tied_output_matrix_once(small_mlm):
    tr = small_mlm.trace("The cat sat on the mat.")
    ledger = bv.count_params(small_mlm)
    for weights in (step_view(tr, "mlm.logits", ledger=ledger).layout.meta["weights"],
                    step_view(tr, "mlm.logits").layout.meta["weights"]):
        tied = [w for w in weights if w[0].startswith("embed.W_T")]
        c = small_mlm.config
        assert len(tied) == 1 and tied[0][1] == f"{c.vocab_size} x {c.hidden_size}" and tied[0][2] == 0
        assert tied[0][0] == "embed.W_T (tied)" and schema.owner_of("embed.W_T") == "embed.token"
    # counted where it is owned, not twice
    assert sum(w[2] for w in step_view(tr, "mlm.logits", ledger=ledger).layout.meta["weights"]) == \
        sum(count for _, _, count in ledger.for_step("mlm.logits"))


def test_static_step_axis_reads_real_columns(small_mlm):
    from bertviz_lite.views import static
    tr = small_mlm.trace("The cat sat on the mat.")
    fig = step_view(tr, "mlm.logits", max_cells=2_000)  # the vocabulary becomes block means
    heat = fig.data[0]
    assert len(heat.x) < small_mlm.config.vocab_size
    ax = static._step(fig, fig.layout.meta).axes[0]
    lo, hi = sorted(ax.get_xlim())
    assert lo == pytest.approx(-0.5) and hi == pytest.approx(small_mlm.config.vocab_size - 0.5)


def test_static_fallback_draws_bars_lines_legend_and_axis_titles():
    import plotly.graph_objects as go
    from bertviz_lite.views import static
    fig = go.Figure([go.Bar(x=["a", "b", "c"], y=[1, 3, 2], name="first"), go.Bar(x=["a", "b", "c"], y=[2, 1, 2],
                     name="second"), go.Scatter(x=[0, 1, 2], y=[1, 2, 2.5], mode="lines", name="trend")])
    fig.update_layout(title="entropy", xaxis_title="layer", yaxis_title="bits")
    ax = static._generic(fig).axes[0]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == [1, 1, 2, 2, 2, 3]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["trend", "first", "second"]
    assert ax.get_xlabel() == "layer" and ax.get_ylabel() == "bits"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]


def test_save_png(padded, tmp_path):
    out = save_png(padded, tmp_path / "h.png", view="heatmap", layer=1, head=0)
    assert _pixels(out)[..., :3].std() > 0.05


def _check_page(path, budget):
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < budget
    from plotly.offline import get_plotlyjs
    js = get_plotlyjs()
    assert text.count(js[:200]) == 1 and text.count(js[-200:]) == 1  # plotly.js inlined exactly once
    assert not re.search(r"<script[^>]+src=", text)
    assert not re.search(r"<link[^>]+href=[\"']?https?:", text)
    assert "fetch(" not in text.replace(js, "")
    return text


def test_export_html_small(small, tmp_path):
    tr = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=40)
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(small), title="cats")
    text = _check_page(out, 15 * 2**20)
    data = json.loads(text.split('id="bvl-data">')[1].split("</script>")[0])
    labels = data["tokens"] + data["labels"] + data["small"]["labels"] + [r for s in data["steps"] for r in s["rows"]]
    assert data["tokens"] == [t for t, m in zip(tr.tokens, tr.mask) if m] and data["n"] == tr.n_real < tr.n
    assert not any("[PAD]" in lab for lab in labels)
    assert [s["key"] for s in data["steps"]] == stepper_steps(tr)
    assert "<title>cats</title>" in text


def test_export_html_moderate_bert_base(base, tmp_path):
    tr = base.trace(" ".join(["the quick brown fox jumps over the lazy dog"] * 14))  # 128 tokens
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(base))
    _check_page(out, 15 * 2**20)


@pytest.mark.slow
def test_export_html_512_tokens_under_budget(base, tmp_path):
    tr = base.trace(" ".join(["word"] * 510), pad_to=512)
    assert tr.n_real == 512
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(base))
    _check_page(out, 15 * 10**6)


def _unpack(block, shape):
    import base64
    import gzip
    dtype = {"u1": "<u1", "u2": "<u2"}[block["dtype"]]
    return np.frombuffer(gzip.decompress(base64.b64decode(block["data"])), dtype=dtype).reshape(shape)


def test_export_payload_decodes_to_the_maps(small):
    from bertviz_lite.views.export import build_payload
    tr = small.trace(" ".join(["the cat sat on the mat"] * 20), pad_to=140)  # > 96 real tokens
    data = build_payload(tr, full_layers=[1])
    n, A, m = tr.n_real, tr.num_heads, data["small"]["size"]
    assert list(data["full"]) == ["1"] and m == 96 < n
    scale = np.array(data["full"]["1"]["scale"])[:, None, None]
    full = _unpack(data["full"]["1"], (A, n, n)).astype(float) / 255 * scale
    idx = real_idx(tr)
    want = to_host(tr.get("attn.probs", layer=1))[:, idx][:, :, idx]
    np.testing.assert_allclose(full, want, atol=want.max() / 500)
    small_maps = _unpack(data["small"], (tr.num_layers, A, m, m)).astype(float) / 255
    small_maps *= np.array(data["small"]["scale"])[:, :, None, None]
    expect, _, _ = block_mean(want[2], 96)
    np.testing.assert_allclose(small_maps[1, 2], expect, atol=expect.max() / 500)
    assert len(data["small"]["labels"]) == m and data["small"]["labels"][0] == "0 [CLS]"
