"""The view model (views/model/data.py), its codec, the plotly builders and PNGs drawn from it, the
exported page's payloads, and the one-symbol-per-concept table they label from."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.backend import to_host
from bertviz_lite.errors import BertVizError
from bertviz_lite.views.wire import codec
from bertviz_lite.views.model import data, panels, records
from bertviz_lite.views import export_html, save_png
from bertviz_lite.schema_text import plain_formula
from bertviz_lite.views.model.data import UnknownKeyError, block_mean

pytest.importorskip("plotly")
from bertviz_lite.views.render.figures import (attention_heatmap, compare_view, head_view, model_view,  # noqa: E402
                                        neuron_view, param_breakdown, step_view, token_view)

from ..helpers import real_idx, real_map


@pytest.fixture(scope="module")
def padded(small):
    return small.trace("The cat sat on the mat.", pad_to=24)


@pytest.fixture(scope="module")
def pair(small):
    return small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=30)


# ------------------------------------------------------------------------------------------
# the view model
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["probs", "scores"])
def test_attention_data_is_the_layers_maps_over_real_tokens(padded, kind):
    vd = data.view_data(padded, "attention", layer=1, kind=kind)
    np.testing.assert_allclose(vd["arrays"]["maps"], real_map(padded, 1, name=f"attn.{kind}"), rtol=1e-6)
    assert np.isfinite(vd["arrays"]["maps"]).all()  # masked [PAD] keys are dropped, not drawn
    assert vd["labels"] == [f"{i} {padded.tokens[i]}" for i in real_idx(padded)]
    assert not any("[PAD]" in lab for lab in vd["labels"])


def test_one_colour_rule_per_kind_of_tensor(padded):
    probs = data.view_data(padded, "attention", layer=0, kind="probs")
    maps = probs["arrays"]["maps"]
    assert probs["scale"]["name"] == "Blues"
    assert probs["scale"]["clim"] == [[0.0, pytest.approx(float(m.max()))] for m in maps]  # white is 0, per map
    scores = data.view_data(padded, "attention", layer=0, kind="scores")
    assert scores["scale"]["name"] == "RdBu_r" and all(lo == -hi for lo, hi in scores["scale"]["clim"])
    # the step-through draws an attention map with the same rule, token labels on both axes
    st = data.view_data(padded, "step", key="layer.0.attn.probs")
    assert st["scale"]["name"] == "Blues" and st["scale"]["clim"] == probs["scale"]["clim"]
    assert st["col_labels"] == st["row_labels"] == probs["labels"]
    # the scores map: the same per-head scale in the attention tab and the step-through
    st_scores = data.view_data(padded, "step", key="layer.0.attn.scores")
    assert st_scores["scale"]["clim"] == scores["scale"]["clim"]
    ffn = data.view_data(padded, "step", key="layer.0.ffn.up")
    [[lo, hi]] = ffn["scale"]["clim"]  # one slice: not a per-head tensor
    assert ffn["scale"]["name"] == "RdBu_r" and lo == -hi and hi > 0
    # the plotly figures take the colours from the view data
    fig = attention_heatmap(padded, 0, 3)
    assert (fig.data[0].zmin, fig.data[0].zmax) == tuple(probs["scale"]["clim"][3])
    assert step_view(padded, "layer.0.attn.probs", head=3).data[0].zmax == pytest.approx(probs["scale"]["clim"][3][1])


def test_colour_scale_clips_outliers_and_says_so():
    x = np.concatenate([np.linspace(-1, 1, 1000), [50.0]])
    sc = data.colour_scale(x, "signed")
    assert sc["clipped"] and sc["clim"][1] < 2
    assert data.colour_scale(x, "difference")["clim"] == [-50.0, 50.0]
    with pytest.raises(ValueError, match="kind of tensor"):
        data.colour_scale(x, "rainbow")


@pytest.mark.parametrize("pf, qseg, kseg", [("A->B", 0, 1), ("B->A", 1, 0), ("B->B", 1, 1)])
def test_pair_filter_slices_the_block(pair, pf, qseg, kseg):
    fig = attention_heatmap(pair, 1, 0, pair_filter=pf)
    idx = real_idx(pair)
    rows = [i for i in idx if pair.segments[i] == qseg]
    cols = [i for i in idx if pair.segments[i] == kseg]
    want = to_host(pair.get("attn.probs", layer=1, head=0))[np.ix_(rows, cols)]
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), want, rtol=1e-6)
    assert [s.split(" ", 1)[1] for s in fig.data[0].y] == [pair.tokens[i] for i in rows]


def test_pair_filter_needs_a_pair_and_bad_selections_are_named(padded):
    with pytest.raises(ValueError, match="sentence pair"):
        attention_heatmap(padded, 0, 0, pair_filter="A->B")
    with pytest.raises(ValueError, match="one of"):
        attention_heatmap(padded, 0, 0, pair_filter="A-B")
    with pytest.raises(bv.OutOfRangeError, match="2 layers"):
        attention_heatmap(padded, 2, 0)
    with pytest.raises(bv.OutOfRangeError, match="4 heads"):
        neuron_view(padded, 0, 4, 0)
    with pytest.raises(ValueError, match="view must be one of"):
        data.view_data(padded, "heatmap")


def test_unknown_step_key_is_one_clear_error(padded):
    with pytest.raises(UnknownKeyError) as e:
        step_view(padded, "layer.0.attn.prob")
    assert isinstance(e.value, BertVizError) and isinstance(e.value, KeyError)
    assert "'layer.0.attn.probs'" in str(e.value) and not str(e.value).startswith('"')


def test_model_view_every_layer_and_head_block_means(small):
    tr = small.trace(" ".join(["the cat sat on the mat"] * 12))
    vd = data.view_data(tr, "model", kind="probs")
    L, A = tr.num_layers, tr.num_heads
    assert vd["arrays"]["maps"].shape == (L, A, 48, 48) and vd["shown"] == 48 < vd["tokens"] == tr.n_real
    expect, _, _ = block_mean(real_map(tr, 1, 2), 48)
    np.testing.assert_allclose(vd["arrays"]["maps"][1, 2], expect, rtol=1e-5)
    fig = model_view(tr)
    assert len(fig.data) == L * A and {(t.meta["layer"], t.meta["head"]) for t in fig.data} == \
        {(ly, h) for ly in range(L) for h in range(A)}


def test_block_mean_is_exact_on_even_blocks():
    a = np.arange(64, dtype=float).reshape(8, 8)
    z, re_, ce = block_mean(a, 4)
    assert z.shape == (4, 4) and list(re_) == [0, 2, 4, 6, 8]
    assert z[0, 0] == a[:2, :2].mean() and z[3, 3] == a[6:, 6:].mean()


def test_head_view_starts_with_every_head_and_groups_lines_by_head(pair):
    fig = head_view(pair, 0)  # bertviz's start: every head, one colour each
    assert {t.legendgroup for t in fig.data if t.legendgroup} == {f"head {h}" for h in range(pair.num_heads)}
    fig = head_view(pair, 1, heads=[1, 3])
    z = real_map(pair, 1, 3)
    lines = [t for t in fig.data if t.mode == "lines" and t.meta.get("head") == 3 and "low" in t.meta]
    assert sum(np.isnan(np.asarray(t.x, dtype=float)).sum() for t in lines) == int((z >= 0.02).sum())
    q, k = [t for t in fig.data if t.mode == "text"]
    assert list(q.text) == list(k.text) == [pair.tokens[i] for i in real_idx(pair)]


def test_token_view_rows_are_that_tokens_attention_in_every_layer_and_head(pair):
    vd = data.view_data(pair, "token", query=4)
    for layer in range(pair.num_layers):
        np.testing.assert_allclose(vd["arrays"]["rows"][layer], real_map(pair, layer)[:, 4], rtol=1e-6)
    assert token_view(pair, 4).layout.meta["query"] == 4
    with pytest.raises(ValueError, match="token index"):
        data.view_data(pair, "token", query=pair.n_real)


def test_neuron_view_adds_up_to_the_recorded_scores_and_weights(padded):
    vd = data.view_data(padded, "neuron", layer=1)
    num = panels.neuron_numbers(vd, head=2, query=3)
    assert num["prod"].shape == (padded.n_real, padded.config.head_size)
    np.testing.assert_allclose(num["prod"].sum(axis=1) / np.sqrt(padded.config.head_size), num["scores"],
                               rtol=1e-5, atol=1e-6)  # the recorded float32 scores
    np.testing.assert_allclose(num["scores"], real_map(padded, 1, 2, name="attn.scores")[3], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(num["weights"], real_map(padded, 1, 2)[3], rtol=1e-4, atol=1e-7)
    fig = neuron_view(padded, 1, 2, 3)
    bars = [t for t in fig.data if t.type == "bar"]
    np.testing.assert_allclose(np.asarray(bars[1].x), num["weights"])
    assert "sqrt" not in fig.layout.title.text and "\u221a" in fig.layout.title.text


@pytest.mark.parametrize("words", [6, 150])  # under and over the 128 tokens up to which the page carries maps
def test_neuron_view_prints_a_variants_own_scores_at_any_length(small, words):
    """On model.variant(attention_scale=0.5) the scores are 0.5 q.k; the view recomputed them with
    1/sqrt(d_k) (half the true ones here, d_k = 16) wherever its data did not carry them."""
    half = small.variant(attention_scale=0.5)
    tr = half.trace(" ".join(["cat"] * words))
    vd = data.view_data(tr, "neuron", layer=1)
    num = panels.neuron_numbers(vd, head=2, query=3)
    np.testing.assert_array_equal(num["scores"], real_map(tr, 1, 2, name="attn.scores")[3])  # the recorded ones
    np.testing.assert_array_equal(num["weights"], real_map(tr, 1, 2)[3])
    np.testing.assert_allclose(num["scores"], 0.5 * num["prod"].sum(axis=1), rtol=1e-4, atol=1e-5)
    assert vd["scale_factor"] == 0.5 and vd["scale_text"] == "0.500"
    fig = panels.resolve(vd, "neuron", head=2, query=3)
    assert "\u00d7 0.500 = " in fig["summary"] and "\u221a" not in fig["summary"]
    assert any(p.get("title") == "score = \u03a3 \u00d7 0.500" for p in fig["panels"])


def test_neuron_view_refuses_a_trace_without_the_recorded_scores(small):
    """Traced with only q and k kept, the view had to recompute the scores; it now says what to record."""
    tr = small.variant(attention_scale=0.5).trace("The cat sat on the mat.", keep=["attn.q", "attn.k"])
    assert "neuron" not in data.shown_views(tr) and not data.facts(tr)["neuron"]
    with pytest.raises(UnknownKeyError, match="attn.scores, attn.probs.*keep="):
        data.view_data(tr, "neuron", layer=1)


def test_compare_view(small, pair):
    same = data.view_data(pair, "compare", trace_b=pair, layer=1)
    assert np.nanmax(same["arrays"]["grid"]) == 0 and not same["arrays"]["diff"].any()
    other = small.trace("The dog sat on the mat.", pair="It was tired.", pad_to=30)
    vd = data.view_data(pair, "compare", trace_b=other, layer=1)
    np.testing.assert_allclose(vd["arrays"]["diff"], real_map(other, 1) - real_map(pair, 1),
                               atol=1e-6)
    rows = {k: r for k, r, _, _ in vd["rows"]}
    steps = vd["steps"]
    assert vd["arrays"]["grid"][steps.index("ffn.ln"), 1] == pytest.approx(rows["layer.1.ffn.ln"], rel=1e-5)
    assert rows["embed.position"] == 0 and rows["embed.token"] > 0  # one wordpiece differs, positions do not
    fig = compare_view(pair, other, layer=1, head=2)  # A, B, B - A, the grid and the largest changes: every renderer's
    assert [t.type for t in fig.data] == ["heatmap"] * 4 + ["table"]
    with pytest.raises(ValueError, match="same length"):
        data.view_data(pair, "compare", trace_b=small.trace("A longer sentence than the other one, by far."))


# ------------------------------------------------------------------------------------------
# step view: shapes, weights and notes from the loaded model
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
def test_step_shapes_and_weights(base_trace, base_ledger, key, inputs, output, weights):
    vd = data.view_data(base_trace, "step", key=key, ledger=base_ledger)
    assert inputs in vd["shape"] and output in vd["shape"], vd["shape"]
    assert {w[0]: w[2] for w in vd["weights"]} == weights
    fig = step_view(base_trace, key, ledger=base_ledger)
    table = [t for t in fig.data if t.type == "table"][1]
    names, counts = list(table.cells.values[0]), list(table.cells.values[2])
    for name, count in weights.items():
        assert counts[names.index(name)] == f"{count:,}"
    assert "\\" not in fig.layout.title.text  # no raw latex in the drawn title


def test_step_tensor_every_head_and_checks(base_trace):
    vd = data.view_data(base_trace, "step", key="layer.0.attn.q")
    np.testing.assert_allclose(vd["arrays"]["z"][3], to_host(base_trace.get("attn.q", layer=0, head=3)), rtol=1e-6)
    assert vd["per_head"] and vd["takes"] == ["embed.ln"]
    ln = dict(data.view_data(base_trace, "step", key="layer.1.ffn.ln")["stats"])
    lo, hi = (float(x) for x in next(v for k, v in ln.items() if k.startswith("row stds")).split(" .. "))
    assert 0.99 < lo <= hi < 1.01  # random weights: gamma 1, beta 0
    probs = dict(data.view_data(base_trace, "step", key="layer.0.attn.probs")["stats"])
    assert abs(float(probs["row sums (= 1)"].split(" .. ")[0]) - 1) < 1e-5
    assert data.view_data(base_trace, "step", key="pooler.out")["arrays"]["z"].shape == (1, 1, 768)


def test_notes_and_sizes_come_from_the_loaded_model(small):
    tr = small.trace("The cat sat.")
    d_k = small.config.head_size  # 16 in the small config, 64 in BERT-base, 32 in MiniLM
    vd = data.view_data(tr, "step", key="layer.0.attn.scores")
    assert f"sqrt(d_k) = {np.sqrt(d_k):g}" in vd["note"] and "sqrt(d_k) = 8" not in vd["note"]
    assert f"\u221a{d_k}" in vd["shape"]
    assert data.facts(tr)["sizes"]["d_k"] == d_k
    params = data.view_data(tr, "params")
    assert params["total"] == bv.params.formula_total(small.config, pooler=True)
    assert f"H={small.config.hidden_size}" in params["reconcile_title"]
    assert not any(r[0] == "the BERT paper" or "12 layers" in " ".join(map(str, r)) for r in params["reconcile"])
    assert any(r[0] == "the BERT paper" for r in data.params(config=bv.BertConfig())["reconcile"])


def test_step_shows_the_tied_output_matrix_once(small_mlm):
    tr = small_mlm.trace("The cat sat.")
    rows = data.view_data(tr, "step", key="mlm.logits", ledger=bv.count_params(small_mlm))["weights"]
    assert [r[0] for r in rows].count("embed.W_T (tied)") == 1 and rows[-1][2] == 0


def test_stepper_steps_in_forward_order(base_trace):
    assert data.stepper_steps(base_trace) == schema.trace_keys(base_trace.num_layers)


# ------------------------------------------------------------------------------------------
# formulas and symbols
# ------------------------------------------------------------------------------------------


def test_plain_formulas_have_no_latex():
    for step in schema.STEPS:
        for text in (plain_formula(step.formula), plain_formula(step.formula, html=False, unicode=True)):
            assert "\\" not in text and "{" not in text and "mathrm" not in text, text
    assert plain_formula(schema.STEP_BY_KEY["attn.scores"].formula, html=False, unicode=True) == \
        "E\u2095 = Q\u2095 K\u2095\u1d40 / \u221ad\u2096 + M"


def test_one_symbol_per_concept():
    symbols = [s.symbol for s in schema.SYMBOLS]
    assert len(symbols) == len(set(symbols))
    # scores and segment embeddings, the map and the head count, head and model width: apart
    assert schema.STEP_BY_KEY["embed.segment"].symbol == "S" and schema.STEP_BY_KEY["attn.scores"].symbol == "E_{h}"
    assert "S" not in schema.STEP_BY_KEY["attn.probs"].formula
    assert schema.STEP_BY_KEY["attn.concat"].formula.endswith("Z_{n_h}]")
    assert "d_k" in schema.AXES["head_dim"] and schema.AXES["hidden"].startswith("H")
    for s in schema.STEPS:  # every step's inputs format with any config's sizes
        assert "{" not in schema.inputs_text(s.key, bv.BertConfig()) + schema.note_text(s.key, bv.BertConfig())


# ------------------------------------------------------------------------------------------
# codec
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, bound", [("f4", 1e-6), ("u2", 1 / 131070), ("u1", 1 / 508)])
def test_codec_round_trip_within_its_stated_error(padded, dtype, bound):
    vd = data.view_data(padded, "attention", layer=1, kind="scores")
    maps = vd["arrays"]["maps"].copy()
    maps[0, 0, 0] = np.nan
    vd["arrays"]["maps"] = maps
    back = codec.from_text(codec.to_text(*codec.encode(vd, default=dtype)))["arrays"]["maps"]
    assert np.isnan(back[0, 0, 0]) and np.isfinite(back).sum() == np.isfinite(maps).sum()
    span = np.nanmax(maps, axis=(1, 2)) - np.nanmin(maps, axis=(1, 2))
    err = np.nanmax(np.abs(back - maps), axis=(1, 2))
    assert (err <= span * bound + 1e-6 * np.nanmax(np.abs(maps))).all()


def test_request_keys_are_spelled_once():
    assert codec.request_key("attention", {"layer": 2, "kind": "probs"}) == 'attention|{"kind":"probs","layer":2}'
    assert "</" not in codec.to_json({"x": "</script>"})


# ------------------------------------------------------------------------------------------
# PNGs and the exported page
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("view", data.VIEWS)
def test_png_of_every_view_is_not_blank(small, pair, tmp_path, view):
    from PIL import Image
    other = small.trace("The dog sat on the mat.", pair="It was tired.", pad_to=30)
    path = save_png(pair, tmp_path / f"{view}.png", view=view, layer=1, head=2, query=3, compare=other,
                    ledger=bv.count_params(small))
    img = np.asarray(Image.open(path).convert("RGB"), dtype=float)
    assert img.shape[0] > 200 and img.shape[1] > 300 and img.std() > 10


def _page_data(text: str) -> dict:
    from bertviz_lite.views.wire.export import read_page
    return read_page(text)


def _check_page(path, budget: int) -> str:
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < budget, path.stat().st_size
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=", text)
    assert "fetch(" not in text and "https://" not in text.split("<script type=\"module\">")[1]
    from bertviz_lite.views.wire.export import front_end
    assert text.count(front_end()) == 1  # the explorer's own front-end, once
    return text


def test_export_html_small(small, tmp_path):
    tr = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=40)
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(small), title="cats")
    text = _check_page(out, 2**20)
    page = _page_data(text)
    info, payloads = page["state"]["info"], page["payloads"]
    assert info["tokens"] == [t for t, m in zip(tr.tokens, tr.mask) if m] and info["n"] == tr.n_real < tr.n
    assert not any("[PAD]" in lab for lab in info["labels"])
    for view in records.ONE_TRACE_VIEWS:  # each tab's data (the head view's is the attention view's)
        assert any(k.startswith(records.record(view).source + "|") for k in payloads), view
    assert {json.loads(k.split("|", 1)[1])["key"] for k in payloads if k.startswith("step|")} == set(tr.keys())
    back = codec.from_text(payloads[codec.request_key("attention", {"layer": 1, "kind": "probs"})])
    np.testing.assert_allclose(back["arrays"]["maps"], real_map(tr, 1), atol=1 / 65534)
    assert "<title>cats</title>" in text and "every layer" in info["page_note"]
    # each distinct layout is kept once: every token's one-token view names the same one
    tokens = {payloads[k]["header"]["layouts"] for k in payloads if k.startswith("token|")}
    assert len(tokens) == 1 and page["layouts"][tokens.pop()]["token"]["panels"][0]["type"] == "heatmap"
    from bertviz_lite.views.model import panels
    lid = payloads[codec.request_key("attention", {"layer": 1, "kind": "probs"})]["header"]["layouts"]
    assert page["layouts"][lid] == json.loads(json.dumps(panels.layouts(data.view_data(tr, "attention", layer=1))))


def test_export_keeps_block_means_and_says_so(small, tmp_path):
    tr = small.trace(" ".join(["the cat sat on the mat"] * 25), pad_to=160)  # > 128 real tokens
    assert tr.n_real > 128
    out = export_html(tr, tmp_path / "page.html", max_bytes=350_000)  # one layer's full maps fit, not two
    page = _page_data(out.read_text(encoding="utf-8"))
    note = page["state"]["info"]["page_note"]
    assert "block means" in note and "attention in full" in note
    back = codec.from_text(page["payloads"][codec.request_key("attention", {"layer": 1, "kind": "probs"})])
    if back["edges"] is None:  # this layer was kept in full
        np.testing.assert_allclose(back["arrays"]["maps"], real_map(tr, 1), atol=1 / 254)
    else:
        expect, _, _ = block_mean(real_map(tr, 1), 96)
        np.testing.assert_allclose(back["arrays"]["maps"], expect, atol=expect.max() / 250)
    assert out.stat().st_size < 500_000


def test_export_html_moderate_bert_base(base, tmp_path):
    tr = base.trace(" ".join(["the quick brown fox jumps over the lazy dog"] * 14))  # 128 tokens
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(base))
    _check_page(out, 15 * 10**6)


@pytest.mark.slow
def test_export_html_512_tokens_under_budget(base, tmp_path):
    tr = base.trace(" ".join(["word"] * 510), pad_to=512)
    assert tr.n_real == 512
    out = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(base))
    _check_page(out, 15 * 10**6)


def test_export_with_non_finite_attention_names_the_key_and_loses_nothing(padded, tmp_path):
    values = {k: to_host(padded[k]).copy() for k in padded.keys()}
    values["layer.1.attn.probs"][0, 2, 3] = np.nan
    broken = padded.replace_values(values)
    path = tmp_path / "page.html"
    path.write_text("the page from before", encoding="utf-8")
    with pytest.raises(data.NonFiniteError, match=r"'layer\.1\.attn\.probs'"):
        export_html(broken, path)
    assert path.read_text(encoding="utf-8") == "the page from before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]  # no half-written file left


def test_export_failing_while_writing_keeps_the_old_file(padded, tmp_path, monkeypatch):
    from bertviz_lite.views.wire import files
    path = tmp_path / "page.html"
    path.write_text("the page from before", encoding="utf-8")

    def fail(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        export_html(padded, path)
    assert path.read_text(encoding="utf-8") == "the page from before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


def test_params_breakdown_sums_to_the_ledger(base, base_ledger):
    vd = data.params(base_ledger, config=base.config)
    assert sum(v for _, v in vd["groups"]) == base_ledger.total == vd["total"]
    fig = param_breakdown(base_ledger, config=base.config)
    assert sum(fig.data[0].x) == base_ledger.total


def test_parameter_groups_in_forward_order_with_readable_shares(small):
    vd = data.params(bv.count_params(small))
    groups = [g for g, _ in vd["groups"]]
    assert groups[:5] == ["embeddings", "layer.0.attention", "layer.0.attention layernorm", "layer.0.feed-forward",
                          "layer.0.ffn layernorm"]
    assert groups.index("pooler") > groups.index("layer.1.ffn layernorm")
    texts = panels.params_layout(vd)["panels"][0]["texts"]
    shares = [t.split("(")[1].rstrip(")") for t in texts]
    assert all(s == "<0.01%" or len(s.rstrip("%").split(".")[1]) <= 2 for s in shares), shares
    assert panels.share_text(768, 22_713_216) == "<0.01%" and panels.share_text(591_360, 22_713_216) == "2.6%"
    assert panels.share_text(147_840, 22_713_216) == "0.65%" and panels.share_text(0, 10) == "0.00%"


def test_bv_views_is_reachable_after_import():
    assert bv.views.neuron_view_figure is neuron_view and bv.views.compare_view is compare_view


def test_compare_an_ablated_run_with_a_plain_one(small, pair):
    ablated = small.trace("The cat sat on the mat.", pair="It was tired.", pad_to=30, edits=bv.ablate(heads={1: [2]}))
    vd = data.view_data(pair, "compare", trace_b=ablated, layer=1)
    rows = {k: r for k, r, _, _ in vd["rows"]}
    assert rows["layer.0.ffn.ln"] == 0 and rows["layer.1.attn.context"] > 0  # nothing changes before the edit
    grid, steps = vd["arrays"]["grid"], vd["steps"]
    assert grid[:, 0].max() == 0 and grid[steps.index("attn.concat"), 1] > 0
    assert [k for k, _ in vd["edits"]] == [k for k, _ in ablated.edits] and vd["edits"]
    # the edited keys are marked in the step view of the edited run
    step = data.view_data(ablated, "step", key=ablated.edits[0][0])
    assert step["edited"] and data.facts(ablated)["edits"]
    assert "edited" in step_view(ablated, ablated.edits[0][0]).layout.title.text


@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_the_page_needs_neither_plotly_nor_matplotlib(small, tmp_path):
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent(f"""
        import sys
        class NoViews:  # as if plotly and matplotlib were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("plotly", "matplotlib", "ipywidgets", "anywidget"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, NoViews())
        import bertviz_lite as bv
        tr = bv.load("random", seed=3, config={small.config.__dict__!r}).trace("The cat sat.")
        print(bv.export_html(tr, {str(tmp_path / "page.html")!r}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "page.html").stat().st_size > 10_000


# ------------------------------------------------------------------------------------------
# one drawing rule per view: the renderers draw the view model's limits
# ------------------------------------------------------------------------------------------


def plotly_limits(fig) -> list[tuple[float, float]]:
    return [(float(t.zmin), float(t.zmax)) for t in fig.data if t.type == "heatmap"]


def mpl_limits(vd, **kw) -> list[tuple[float, float]]:
    from matplotlib.collections import QuadMesh
    from matplotlib.image import AxesImage

    from bertviz_lite.views.model import panels
    from bertviz_lite.views.render import static
    mfig = static.draw(panels.resolve(vd, **kw))
    return [tuple(map(float, a.get_clim())) for ax in mfig.axes for a in ax.get_children()
            if isinstance(a, (AxesImage, QuadMesh)) and not getattr(ax, "_colorbar", None)
            and ax.get_label() != "<colorbar>"]


def approx_pairs(got, want):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert g == pytest.approx(tuple(w), rel=1e-6), (got, want)


def test_compare_maps_share_one_scale_that_covers_both_runs(small):
    # B is scaled up 3x: its maps are sharper than A's; A and B are drawn at one limit per head,
    # the larger of the two maps' largest weights, so B is never clipped
    from bertviz_lite.views.render import figures
    a = small.trace("The cat sat on the mat.")
    b = small.trace("The cat sat on the mat.", edits=bv.scale("layer.1.attn.scores", 3.0))
    vd = data.view_data(a, "compare", trace_b=b, layer=1)
    for h in range(a.num_heads):
        top = max(vd["arrays"]["a"][h].max(), vd["arrays"]["b"][h].max())
        assert vd["scale"]["clim"][h] == [0.0, pytest.approx(float(top))]
    assert any(vd["arrays"]["b"][h].max() > vd["arrays"]["a"][h].max() for h in range(a.num_heads))
    grid = vd["arrays"]["grid"]
    assert vd["scale_grid"]["name"] == "Reds" and vd["scale_grid"]["clim"] == [0.0, pytest.approx(float(np.nanmax(grid)))]
    h = 2
    want = [vd["scale"]["clim"][h], vd["scale"]["clim"][h], vd["scale_diff"]["clim"][h], vd["scale_grid"]["clim"]]
    approx_pairs(plotly_limits(figures.view_figure(vd, "compare", head=h)), want)
    approx_pairs(mpl_limits(vd, head=h), want)


@pytest.mark.parametrize("view, args, kw", [
    ("attention", dict(layer=1, kind="probs"), dict(head=2)),
    ("attention", dict(layer=1, kind="scores"), dict(head=3)),
    ("step", dict(key="layer.1.attn.scores"), dict(head=3)),
    ("step", dict(key="layer.0.ffn.up"), dict(head=0)),
    ("step", dict(key="embed.ln"), dict(head=0)),
    ("model", dict(kind="probs"), {}),
    ("token", dict(query=2), {}),
    ("neuron", dict(layer=1), dict(head=1, query=2)),
])
def test_every_renderer_draws_the_view_models_limits(padded, view, args, kw):
    from bertviz_lite.views.render import figures
    vd = data.view_data(padded, view, **args)
    sc = vd["scale"]
    if view == "attention" or view == "step":
        want = [sc["clim"][kw["head"]]]
    elif view == "model":
        want = [lim for row in sc["clim"] for lim in row]
    elif view == "token":  # each (layer, head) row divided by its own largest weight: 0..1
        want = [(0.0, 1.0)]
        rows = vd["arrays"]["rows"]
        np.testing.assert_allclose(np.asarray(sc["clim"])[..., 1], rows.max(axis=-1), rtol=1e-6)
    else:  # neuron: q and k at the q/k limit, q*k at the head's own limit (fixed while the query moves)
        lim, plim = sc["clim"][1], vd["scale_prod"]["clim"][kw["head"]][1]
        want = [(-lim, lim), (-lim, lim), (-plim, plim)]
        q, k = vd["arrays"]["q"][kw["head"]].astype(float), vd["arrays"]["k"][kw["head"]].astype(float)
        assert plim == pytest.approx(np.abs(q[:, None, :] * k[None, :, :]).max())
    fig = figures.view_figure(vd, view, **kw)
    approx_pairs(plotly_limits(fig), want)
    approx_pairs(mpl_limits(vd, **kw), want)


def test_scores_share_a_scale_in_the_attention_tab_and_the_step_through(padded):
    att = data.view_data(padded, "attention", layer=1, kind="scores")
    st = data.view_data(padded, "step", key="layer.1.attn.scores")
    assert st["scale"]["clim"] == att["scale"]["clim"]


def test_head_view_lines_start_at_the_view_models_min_weight(padded):
    from bertviz_lite.views.render import figures
    # the front-end draws the head view from the attention view data: the rule travels with it
    assert data.view_data(padded, "attention", layer=1)["min_weight"] == data.MIN_WEIGHT
    vd = data.view_data(padded, "head", layer=1, heads=[0])
    assert vd["min_weight"] == data.MIN_WEIGHT
    vd["min_weight"] = 0.15
    fig = figures.view_figure(vd, "head")
    lows = [t.meta["low"] for t in fig.data if t.meta and "low" in t.meta]
    assert min(lows) == 0.15
    z = vd["arrays"]["maps"][0]
    drawn = sum(np.isfinite(np.asarray(t.y, dtype=float)).sum() // 2 for t in fig.data if t.meta and "low" in t.meta)
    assert drawn == int((z >= 0.15).sum())


def test_one_request_per_selection():
    # the head is a selection of what is drawn, not of the data: the head view draws the layer's weights
    assert data.request("head", layer=2, head=3) == dict(layer=2, kind="probs")
    assert data.request("step", layer=1) == dict(key="layer.1.attn.probs")
    assert data.request("compare", layer=1, kind="scores") == dict(layer=1)
    # the front-end reads the same table
    info = data.facts(bv.load("random", config=dict(num_layers=1)).trace("a b"))
    assert info["requests"]["head"] == dict(data="attention", args=["layer"], fixed={"kind": "probs"})
    with pytest.raises(ValueError, match="view must be one of"):
        data.request("heads")


# ------------------------------------------------------------------------------------------
# attention from anywhere (Hugging Face's outputs.attentions)
# ------------------------------------------------------------------------------------------


class Tensorish:
    """Anything with __array__ (a torch tensor on the cpu, say)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def hf_attentions(tr):
    """The trace's maps in Hugging Face's layout: a tuple of L arrays [batch=1, heads, n, n]."""
    return tuple(Tensorish(to_host(tr.get("attn.probs", layer=ly))[None]) for ly in range(tr.num_layers))


def test_head_view_and_model_view_take_hugging_face_attention(small):
    from bertviz_lite.views.render import figures
    tr = small.trace("The cat sat on the mat.")
    att = hf_attentions(tr)
    ours = head_view(tr, 1)
    theirs = head_view(att, list(tr.tokens), layer=1)
    lines = [[np.asarray(t.y, dtype=float) for t in f.data if t.meta and "low" in t.meta] for f in (ours, theirs)]
    assert len(lines[0]) == len(lines[1]) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(*lines))
    assert head_view(att, list(tr.tokens)).layout.meta["layer"] == 0  # bertviz's call
    m = model_view(att, list(tr.tokens))
    np.testing.assert_allclose(np.asarray(m.data[5].z), np.asarray(model_view(tr).data[5].z), rtol=1e-6)
    t2 = bv.Trace.from_attentions(att, tr.tokens)
    assert t2.keys() == [f"layer.{ly}.attn.probs" for ly in range(tr.num_layers)]
    for view, args in [("attention", dict(layer=1)), ("token", dict(query=2)), ("model", {}), ("head", dict(layer=0))]:
        data.view_data(t2, view, **args)  # every attention view takes it
    pair = bv.Trace.from_attentions(att, tr.tokens, sentence_b_start=4)
    assert pair.has_pair and data.pair_positions(pair, "A->B")[1] == list(range(4, tr.n))
    # the maps fix L and n_h only: the page's sizes hold no nominal H or d_k (a given config's are kept)
    assert set(data.facts(t2)["sizes"]) == {"L", "n_h"} and set(data.facts(t2.to_host())["sizes"]) == {"L", "n_h"}
    assert "params" not in data.facts(t2)["views"] and "params" in data.facts(tr)["views"]  # no count of a guess
    assert data.facts(bv.Trace.from_attentions(att, tr.tokens, config=tr.config))["sizes"]["d_k"] == tr.config.head_size
    assert isinstance(data.as_trace(tr), bv.Trace)


def test_attention_from_elsewhere_is_checked(small):
    tr = small.trace("The cat sat.")
    att = [to_host(tr.get("attn.probs", layer=ly))[None] for ly in range(tr.num_layers)]
    with pytest.raises(ValueError, match=r"expected \[batch, heads, n, n\].*n = 4"):
        bv.Trace.from_attentions(att, tr.tokens[:4])
    with pytest.raises(ValueError, match="do not sum to 1.*not the scores"):
        bv.Trace.from_attentions([a * 2 for a in att], tr.tokens)
    with pytest.raises(ValueError, match="attentions is empty"):
        bv.Trace.from_attentions([], tr.tokens)
    with pytest.raises(bv.OutOfRangeError, match="batch_index 1"):
        bv.Trace.from_attentions(att, tr.tokens, batch_index=1)
    with pytest.raises(TypeError, match="takes a Trace.*with its"):
        model_view(att)


def test_block_means_never_mix_sentence_a_and_b(small):
    # a long pair shown as block means: every block is all A or all B, so pair filters keep whole sentences
    tr = small.trace(" ".join(["the cat sat on the mat"] * 12), pair=" ".join(["it was tired"] * 12))
    vd = data.attention(tr, 0, max_tokens=40)
    segs = [tr.segments[i] for i in data.real_positions(tr)]
    edges = vd["edges"]
    assert len(edges) - 1 == 40 and segs.index(1) in edges
    assert all(len(set(segs[a:b])) == 1 for a, b in zip(edges[:-1], edges[1:]))
    rows, cols = data.pair_positions(tr, "B->B")
    from bertviz_lite.views.model import panels
    p = panels.resolve(vd, "attention", dict(pair_filter="B->B"))["panels"][0]
    assert all(vd["segments"][i] == 1 for i in p["rows"]) and p["rows"][0] == edges.index(segs.index(1))


def test_no_parameter_count_for_guessed_sizes_and_the_model_png_outlines_what_is_asked(small, tmp_path):
    tr = small.trace("The cat sat on the mat.")
    att = [to_host(tr.get("attn.probs", layer=ly))[None] for ly in range(tr.num_layers)]
    guessed = bv.Trace.from_attentions(att, tr.tokens)
    with pytest.raises(ValueError, match="guessed"):
        save_png(guessed, tmp_path / "p.png", view="params")
    from bertviz_lite.views.model import panels
    vd = data.view_data(tr, "model")
    marked = lambda **sel: [(p["meta"]["layer"], p["meta"]["head"]) for p in panels.resolve(vd, "model", sel)["panels"]
                            if p["marked"]]
    assert marked() == [] and marked(layer=1, head=3, outline=True) == [(1, 3)]


def test_a_token_with_a_lone_surrogate_is_drawn_and_saved(tmp_path):
    # a token holding '\ud800' (text decoded with errors='surrogateescape', a broken tokenizer) once crashed
    # save_png and the explorer's saved output with matplotlib's raw TypeError
    from bertviz_lite.views import explore
    maps = [np.random.default_rng(0).dirichlet(np.ones(4), size=(1, 2, 4)).astype(np.float32)]
    tr = bv.Trace.from_attentions(maps, ["[CLS]", "a\ud800", "\udcff", "[SEP]"])
    assert save_png(tr, tmp_path / "map.png").stat().st_size > 1000
    w = explore(tr)
    bundle = w._repr_mimebundle_()
    out = bundle[0] if isinstance(bundle, tuple) else bundle
    saved = w.saved_bundle()
    assert out["image/png"] and saved["image/png"] and "text/html" in saved
    for value in [*out.values(), *saved.values()]:  # a saved notebook is UTF-8: every text it keeps must encode
        if isinstance(value, str):
            value.encode("utf-8")
