"""bertviz's calls for real: `head_view(outputs.attentions,
tokens)`, `model_view`, `neuron_view` and `explore` take any framework's tensors (a stand-in for a
torch tensor that tracks gradients: its `__array__` refuses, `.detach().cpu().numpy()` works; the real
torch case is scripts/check_torch_views.py), display the explorer opened on that view and return None
(as bertviz's; `shown` catches what they display), label tokens prettified, and refuse bad input with
one clear error before any work."""

from __future__ import annotations


import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import foreign
from bertviz_lite.backend import to_host
from bertviz_lite.views.model import data, limits, records

pytest.importorskip("plotly")
pytest.importorskip("anywidget")


class GradTensor:
    """Behaves as a torch tensor with requires_grad=True does for NumPy: `np.asarray` refuses it,
    `.detach().cpu().numpy()` gives the numbers."""

    def __init__(self, a, device="cuda:0"):
        self.a, self.device, self.detached = np.asarray(a), device, False

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")

    def detach(self):
        out = GradTensor(self.a, self.device)
        out.detached = True
        return out

    def cpu(self):
        out = GradTensor(self.a, "cpu")
        out.detached = self.detached
        return out

    def numpy(self):
        if not self.detached:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad.")
        if self.device != "cpu":
            raise TypeError("can't convert cuda:0 device type tensor to numpy")
        return self.a


TOKENS = ["[CLS]", "\u0120the", "\u2581cat", "##s", "sat", "[SEP]", "it", "[SEP]"]


@pytest.fixture
def shown(monkeypatch):
    """What bertviz's calls display (IPython.display.display), in order."""
    import IPython.display
    out = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: out.append(obj))
    return out


def attentions(n=len(TOKENS), layers=3, heads=4, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(layers):
        x = rng.random((1, heads, n, n)) ** 4
        out.append((x / x.sum(-1, keepdims=True)).astype(np.float32))
    return out


def test_the_stand_in_refuses_numpy_as_a_grad_tensor_does():
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(GradTensor(np.zeros(2)))


def test_head_view_takes_bertvizs_readme_call_and_opens_the_head_tab(shown):
    att = attentions()
    assert bv.views.head_view([GradTensor(a) for a in att], TOKENS, sentence_b_start=6) is None
    w = shown.pop()
    assert type(w).__name__ == "Explorer" and w.tab == "head" and w.heads == []  # [] = every head
    np.testing.assert_array_equal(to_host(w.trace.get("attn.probs", layer=2)), att[2][0])
    assert w.info["has_pair"] and w.info["pair_filters"][1:] == ["A->A", "A->B", "B->A", "B->B"]
    assert w.info["tokens"] == ["[CLS]", "the", "cat", "##s", "sat", "[SEP]", "it", "[SEP]"]  # prettified
    bv.views.head_view([GradTensor(a) for a in att], TOKENS, prettify_tokens=False)
    raw = shown.pop()
    assert raw.info["tokens"] == TOKENS and raw.view_data("head")["labels"][1] == "1 \u0120the"
    assert w.view_data("head")["labels"][1] == "1 the"
    bv.views.head_view(tuple(GradTensor(a) for a in att), TOKENS, layer=1, heads=[0, 2])
    w2 = shown.pop()
    assert (w2.layer, w2.heads) == (1, [0, 2])


def test_model_view_and_explore_take_tensors_too(shown):
    att = [GradTensor(a) for a in attentions()]
    bv.views.model_view(att, TOKENS, sentence_b_start=6)
    m = shown.pop()
    assert m.tab == "model" and m.view_data("model")["segments"] == [0] * 6 + [1] * 2
    e = bv.explore(att, tokens=TOKENS)
    # attention alone: no parameter count, no step-through, no neuron view (it has no q and k)
    assert e.info["views"] == list(records.ATTENTION_ONLY_VIEWS)
    assert not {"neuron", "step", "params"} & set(e.info["views"])
    assert bv.Trace.from_attentions(att, TOKENS).keys() == [f"layer.{ly}.attn.probs" for ly in range(3)]
    with pytest.raises(TypeError, match="tokens= and sentence_b_start= go with attention from elsewhere"):
        bv.explore(e.trace, tokens=TOKENS)


def test_model_view_filters_thumbnails_by_sentence():
    from bertviz_lite.views.model import panels
    tr = bv.Trace.from_attentions(attentions(), TOKENS, sentence_b_start=6)
    vd = data.view_data(tr, "model")
    fig = panels.resolve(vd, "model", pair_filter="A->B")
    thumb = fig["panels"][0]
    assert thumb["z"].shape == (6, 2) and fig["meta"]["pair_filter"] == "A->B"
    np.testing.assert_allclose(thumb["z"], vd["arrays"]["maps"][0, 0][:6, 6:])
    # each filter's thumbnails at their own limits (else A->B would be washed out by A->A's weights)
    assert thumb["clim"] == [0.0, pytest.approx(float(vd["arrays"]["maps"][0, 0][:6, 6:].max()))]
    assert panels.resolve(vd, "model")["panels"][0]["clim"] == vd["scale"]["clim"][0][0]


def test_neuron_view_opens_the_neuron_tab_and_says_what_attention_alone_lacks(small, shown):
    tr = small.trace("The cat sat.")
    bv.views.neuron_view(tr, layer=1, head=2, query=1)
    w = shown.pop()
    assert (w.tab, w.layer, w.head, w.query) == ("neuron", 1, 2, 1)
    only = bv.Trace.from_attentions([to_host(tr.get("attn.probs", layer=ly))[None] for ly in range(2)], tr.tokens)
    for call in (lambda: bv.views.neuron_view(only), lambda: bv.views.neuron_view_figure(only, 0, 0, 0)):
        with pytest.raises(KeyError, match="queries and keys.*model.trace.*from_attentions"):
            call()


def test_the_static_figures_keep_clear_names_and_dir_lists_the_entry_points():
    from bertviz_lite.views.render import figures
    assert bv.views.head_view_figure is figures.head_view and bv.views.model_view_figure is figures.model_view
    assert bv.views.neuron_view_figure is figures.neuron_view
    for name in ("explore", "export_html", "head_view", "model_view", "neuron_view"):
        assert name in dir(bv) and name in dir(bv.views), name
    assert not hasattr(figures, "draw_head") and not hasattr(figures, "figure")
    fig = bv.views.head_view_figure([GradTensor(a) for a in attentions()], TOKENS)
    assert fig.layout.meta["view"] == "head"


def test_join_tokens_writes_pieces_as_words():
    assert foreign.join_tokens(["[CLS]", "it", "pu", "##rred", ".", "[SEP]"]) == "[CLS] it pu rred . [SEP]".replace(
        "pu rred", "purred")
    assert foreign.join_tokens(["<s>", "It", "\u0120pur", "red", "\u0120.", "</s>"]) == "<s> It purred . </s>"
    assert foreign.join_tokens(["[CLS]", "\u2581the", "\u2581cat", "s", "[SEP]"]) == "[CLS] the cats [SEP]"


def test_prettify_tokens_is_shared():
    assert bv.prettify_tokens(["[CLS]", "\u0120Hello", "\u2581world", "##ing", "<s>", "\u0120", "a</w>"]) == \
        ["[CLS]", "Hello", "world", "##ing", "<s>", "\u0120", "a"]
    assert bv.views.prettify_tokens is foreign.prettify_tokens
    with pytest.raises(TypeError, match="one string"):
        bv.prettify_tokens("Hello")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(tokens=None), TypeError, "tokens is required"),
    (dict(tokens="abcdefgh"), TypeError, "list of token strings, got one string"),
    (dict(tokens=[1] * 8), TypeError, "tokens must be strings"),
    (dict(sentence_b_start="3"), TypeError, "sentence_b_start must be an integer"),
    (dict(sentence_b_start=2.5), TypeError, "sentence_b_start must be an integer"),
    (dict(sentence_b_start=0), bv.OutOfRangeError, "sentence_b_start must be a token index 1..7"),
    (dict(batch_index=True), TypeError, "batch_index must be an integer"),
    (dict(batch_index=1.0), TypeError, "batch_index must be an integer"),
])
def test_from_attentions_checks_its_arguments(kwargs, error, match):
    args = dict(tokens=TOKENS)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        bv.Trace.from_attentions(attentions(), args.pop("tokens"), **args)
    assert bv.Trace.from_attentions(attentions(), TOKENS, sentence_b_start=np.int64(6)).has_pair


def test_a_tensor_nothing_can_read_gets_one_clear_error():
    class Opaque:
        def detach(self):
            raise RuntimeError("device lost")
    with pytest.raises(TypeError, match=r"attentions\[0\].*Opaque.*device lost.*detach\(\).cpu\(\).numpy\(\)"):
        bv.Trace.from_attentions([Opaque()], TOKENS)


def test_attention_too_long_to_draw_is_refused_before_drawing(monkeypatch):
    monkeypatch.setattr(limits, "MAX_TOKENS", 6)
    tr = bv.Trace.from_attentions(attentions(), TOKENS)
    for call in (lambda: bv.views.head_view(tr), lambda: bv.views.model_view_figure(tr),
                 lambda: data.view_data(tr, "attention", layer=0), lambda: bv.export_html(tr, "/nonexistent/x.html"),
                 lambda: bv.views.save_png(tr, "/nonexistent/x.png")):
        with pytest.raises(bv.BertVizError, match=r"8 tokens is more than the views draw \(at most 6\).*GiB"):
            call()


def test_the_size_guard_states_the_memory_of_a_long_map():
    tr = bv.Trace.from_attentions([np.full((1, 12, 2100, 2100), 1 / 2100, dtype=np.float32)],
                                  [f"t{i}" for i in range(2100)])
    with pytest.raises(bv.BertVizError, match=r"2,100 tokens.*about 1\.2 GiB"):
        data.view_data(tr, "model")


def test_plotly_shows_token_text_as_written_and_short():
    tokens = ["[CLS]", "<b>bold</b>", "a<br>b", "<span style='color:red'>x</span>", "y" * 60, "[SEP]"]
    tr = bv.Trace.from_attentions(attentions(n=6), tokens)
    fig = bv.views.render.figures.attention_heatmap(tr, 0, 0)
    labels = list(fig.data[0].x)
    assert all("<" not in s for s in labels) and "1 &lt;b&gt;bold&lt;/b&gt;" in labels
    assert max(len(s) for s in labels) <= 40 and any(s.endswith("\u2026") for s in labels)
    head = bv.views.head_view_figure(tr, 0)
    texts = [t for tr_ in head.data if tr_.mode == "text" for t in tr_.text]
    assert texts and all("<" not in t for t in texts)


def test_plotly_model_view_adds_its_maps_in_one_step(monkeypatch):
    # what made it slow (7.75 s for MiniLM): a 256-stop colour scale validated per map, and every map's axes
    # updated one call at a time; now the scale is its 9 stops and maps, axes and shapes go in one call each
    import plotly.graph_objects as go
    calls = {"add_trace": 0, "update_xaxes": 0, "update_yaxes": 0}
    for name in calls:
        real = getattr(go.Figure, name)

        def counted(self, *a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(self, *a, **k)
        monkeypatch.setattr(go.Figure, name, counted)
    tr = bv.Trace.from_attentions(attentions(n=14, layers=6, heads=12), [f"t{i}" for i in range(14)])
    fig = bv.views.model_view_figure(tr, progress=False)
    assert len(fig.data) == 72 and calls == {"add_trace": 0, "update_xaxes": 0, "update_yaxes": 0}
    assert all(len(t.colorscale) == 9 for t in fig.data)


def test_the_old_plotly_calls_still_run(small, shown):
    # head_view(tr, layer, heads=[...]) (the plotly figure's old call) displays the explorer; explore() returns it
    tr = small.trace("The cat sat.")
    assert bv.views.head_view(tr, 1, heads=[2]) is None
    w = shown[-1]
    assert (w.tab, w.layer, w.heads) == ("head", 1, [2])
    w.show()
    bv.explore(tr, tab="model").show()
    assert [x.tab for x in shown] == ["head", "head", "model"]


def test_a_saved_notebook_keeps_the_page_under_its_cap(small):
    import json
    import re

    from bertviz_lite.views.wire import widget
    w = bv.explore(small.trace("The cat sat on the mat."), layer=1, head=2, tab="head")
    bundle = w.saved_bundle()
    assert set(bundle) == {"text/html", "image/png", "text/plain"}
    page = w.saved_page()
    assert len(page) <= widget.SAVED_PAGE_BYTES
    state = json.loads(re.search(r'id="bvl-data">(.*?)</script>', page, re.S).group(1))["state"]
    assert (state["tab"], state["layer"], state["head"]) == ("head", 1, 2)
    assert state["info"]["views"] == list(records.ONE_TRACE_VIEWS)
    # a long input keeps the tabs that are quick to build, and says so
    long = bv.explore(small.trace(" ".join(["word"] * 140)), tab="step")
    state = json.loads(re.search(r'id="bvl-data">(.*?)</script>', long.saved_page(), re.S).group(1))["state"]
    kept = [v for v in records.ONE_TRACE_VIEWS if records.record(v).saved_long]
    assert state["info"]["views"] == kept and state["tab"] == "attention"
    assert "every tab up to 128 tokens" in state["info"]["page_note"]


@pytest.mark.slow
def test_the_real_torch_case_when_a_torch_python_is_at_hand():
    # scripts/check_torch_views.py with an interpreter that has torch and transformers (never a test dependency):
    # a manual check, run where BVL_TORCH_PYTHON names one (docs/testing.md)
    import os
    import subprocess
    import sysconfig
    from pathlib import Path
    python = os.environ.get("BVL_TORCH_PYTHON")
    if not python:
        pytest.skip("the real-torch check is manual: set BVL_TORCH_PYTHON to a python with torch and transformers")
    if not Path(python).exists():
        pytest.fail(f"BVL_TORCH_PYTHON={python} does not exist")
    root = Path(__file__).resolve().parents[2]
    # this interpreter's site-packages lend anywidget and scipy to the torch interpreter
    run = subprocess.run([python, str(root / "scripts" / "check_torch_views.py"), sysconfig.get_paths()["purelib"]],
                         capture_output=True, text=True, timeout=300, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok: head_view" in run.stdout or "skipped" in run.stdout, run.stdout
