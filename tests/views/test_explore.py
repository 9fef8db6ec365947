"""The explorer widget's contents, without a browser: what it sends when the page asks for a
view (the view model's data, real tokens only, compact bytes), its labels and key order, the
pair filter, every tab's view data, the static fallback, and its errors.
(tests/views/test_jupyterlab_browser.py drives the same widget in a real JupyterLab.)"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.params import formula_total, ledger_for_config
from bertviz_lite.views import PAIR_FILTERS, stepper_steps
from bertviz_lite.views.wire import codec
from bertviz_lite.views.model import data
from bertviz_lite.views.explorer import explore, widgets_available

from ..helpers import real_idx, real_map

pytest.importorskip("plotly")
if not widgets_available():
    pytest.skip("the explorer widget needs ipywidgets and anywidget (pip install 'bertviz-lite[views]')",
                allow_module_level=True)

WIDE = {"hidden_size": 96, "num_layers": 3, "num_heads": 6, "ffn_size": 384}  # a layer 2 and a head 5


@pytest.fixture(scope="module")
def wide():
    return bv.load("random", seed=7, config=WIDE)


@pytest.fixture(scope="module")
def padded(wide):
    return wide.trace("The cat sat on the mat.", pad_to=24)


@pytest.fixture(scope="module")
def pair(wide):
    return wide.trace("The cat sat on the mat.", pair="It was tired.", pad_to=30)


class Sent:
    """Captures what the widget sends to the page (content, buffers)."""

    def __init__(self, w):
        self.messages = []
        w.send = lambda content, buffers=None: self.messages.append((content, buffers or []))

    def ask(self, w, view, **args):
        """What the page gets for one request, as the page asks it."""
        start = len(self.messages)
        w._on_msg(w, dict(type="view", view=view, args=args, request_key=codec.request_key(view, args)), [])
        (msg, buffers), = self.messages[start:]
        return msg, buffers


# ------------------------------------------------------------------------------------------
# the view data the page receives
# ------------------------------------------------------------------------------------------


def test_layer_2_head_5_gets_exactly_that_layers_maps(padded):
    w = explore(padded)
    w.layer, w.head = 2, 5
    msg, buffers = Sent(w).ask(w, "attention", layer=2, kind="probs")
    n = padded.n_real
    assert padded.n == 24 > n  # padded, and the padding never travels
    assert msg["type"] == "view" and msg["request_key"] == codec.request_key("attention", {"layer": 2, "kind": "probs"})
    spec, = msg["arrays"]
    assert spec["dtype"] == "f4" and spec["shape"] == [6, n, n] and len(buffers[0]) == 4 * 6 * n * n  # bytes
    maps = codec.decode(msg, buffers)["arrays"]["maps"]
    for h in range(6):
        np.testing.assert_array_equal(maps[h], real_map(padded, 2, h))
    assert msg["scale"]["clim"][5] == [0.0, pytest.approx(real_map(padded, 2, 5).max())]
    # the same selection as a plotly figure: that map, token labels
    fig = w.figure()
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), real_map(padded, 2, 5))
    assert [s.split(" ", 1)[1] for s in fig.data[0].x] == [padded.tokens[i] for i in real_idx(padded)]
    assert fig.layout.meta["layer"] == 2 and fig.layout.meta["head"] == 5


def test_long_inputs_travel_as_scaled_uint16(wide):
    from bertviz_lite.views.wire.widget import EXACT_UP_TO
    tr = wide.trace(" ".join(["the cat sat on the mat"] * 25), pad_to=160)
    n = tr.n_real
    assert n > EXACT_UP_TO
    w = explore(tr)
    for kind in ("probs", "scores"):
        msg, buffers = Sent(w).ask(w, "attention", layer=1, kind=kind)
        assert msg["arrays"][0]["dtype"] == "u2" and len(buffers[0]) == 2 * 6 * n * n
        maps = codec.decode(msg, buffers)["arrays"]["maps"]
        for h in (0, 5):
            want = real_map(tr, 1, h, name=f"attn.{kind}")
            step = (want.max() - want.min()) / 65534
            np.testing.assert_allclose(maps[h], want, rtol=0, atol=step / 2 * 1.05 + 1e-7)
        assert np.isfinite(maps).all()  # scores of [PAD] keys (-inf) are not sent
    # the neuron view's recorded scores and weights are that layer's maps, and travel as they do
    msg, buffers = Sent(w).ask(w, "neuron", layer=1)
    assert {a["name"]: a["dtype"] for a in msg["arrays"]} == {"q": "f4", "k": "f4", "scores": "u2", "weights": "u2"}
    back = codec.decode(msg, buffers)["arrays"]
    want = real_map(tr, 1, 5, name="attn.scores")
    np.testing.assert_allclose(back["scores"][5], want, rtol=0, atol=(want.max() - want.min()) / 65534 * 0.53 + 1e-7)


@pytest.mark.parametrize("view, args, arrays", [
    ("model", dict(kind="probs"), {"maps"}),
    ("token", dict(query=3), {"rows"}),
    ("neuron", dict(layer=1), {"q", "k", "scores", "weights"}),  # the recorded scores and weights, at any length
    ("step", dict(key="layer.1.attn.q"), {"z"}),
    ("params", {}, set()),
])
def test_every_tab_is_answered_with_its_view_data(wide, padded, view, args, arrays):
    w = explore(padded, model=wide)
    msg, buffers = Sent(w).ask(w, view, **args)
    assert msg["type"] == "view" and msg["view"] == view
    assert {a["name"] for a in msg["arrays"]} == arrays and len(buffers) == len(arrays)
    want = data.view_data(padded, view, ledger=w.ledger, **args)
    back = codec.decode(msg, buffers)
    for name in arrays:
        np.testing.assert_allclose(back["arrays"][name], want["arrays"][name], rtol=1e-6)
    if view == "params":
        assert msg["total"] == bv.count_params(wide).total and "loaded model" in msg["source"]


def test_compare_tab(wide, pair):
    other = wide.trace("The dog sat on the mat.", pair="It was tired.", pad_to=30)
    w = explore(pair, compare=other, tab="compare", layer=1)
    assert "compare" in w.info["views"] and w.info["compare"]["text"].startswith("The dog")
    msg, buffers = Sent(w).ask(w, "compare", layer=1)
    diff = codec.decode(msg, buffers)["arrays"]["diff"]
    np.testing.assert_allclose(diff[2], real_map(other, 1, 2) - real_map(pair, 1, 2), atol=1e-6)
    assert "compare" not in explore(pair).info["views"]
    with pytest.raises(ValueError, match="compare=second_trace"):
        explore(pair, tab="compare")
    with pytest.raises(ValueError, match="same length"):
        explore(pair, compare=wide.trace("Short."))


def test_the_compare_tab_opens_on_the_first_layer_that_differs(small):
    a = small.trace("The cat sat on the mat.")
    b = small.trace("The cat sat on the mat.", edits=bv.scale("layer.1.attn.scores", 3.0))
    assert data.first_differing_layer(a, b) == 1 and data.first_differing_layer(a, a) == 0
    w = bv.explore(a, compare=b, tab="compare")
    assert w.layer == 1 and w.info["compare"]["first_layer"] == 1
    assert bv.explore(a, compare=b, tab="compare", layer=0).layer == 0  # a layer asked for is kept
    assert bv.explore(a, compare=b, static=True, tab="compare").layout.meta["layer"] == 1


def test_labels_are_the_real_tokens(padded):
    info = explore(padded).info
    tokens = [padded.tokens[i] for i in real_idx(padded)]
    assert info["tokens"] == tokens and info["n"] == len(tokens) and info["n_total"] == 24
    assert [s.split(" ", 1)[1] for s in info["labels"]] == tokens
    assert len(set(info["labels"])) == len(info["labels"])  # "the" twice stays apart: "1 the", "5 the"
    assert not any("[PAD]" in s for s in info["labels"] + info["tokens"])
    assert (info["layers"], info["heads"]) == (3, 6) and info["sizes"]["d_k"] == 16
    assert info["kinds"] == ["probs", "scores"] and "softmax" in info["formulas"]["probs"]
    assert all(len(lut) == 256 and lut[0] != lut[-1] for lut in info["luts"].values())
    assert [s[0] for s in info["symbols"]] == [s.symbol for s in schema.SYMBOLS]


def test_key_selector_lists_trace_keys_in_order(padded):
    w = explore(padded)
    keys = w.info["keys"]
    assert keys == stepper_steps(padded) == schema.trace_keys(3)
    assert keys[:2] == ["embed.token", "embed.position"] and keys[-1] == "pooler.out"
    assert w.key == keys[0]
    w.key = "layer.1.attn.q"
    assert w.figure("step").layout.meta["key"] == "layer.1.attn.q"
    with pytest.raises(KeyError, match="did you mean"):
        w.key = "layer.1.attn.qq"
    assert w.key == "layer.1.attn.q"


def test_pair_filter(pair):
    w = explore(pair, layer=1, head=2, pair_filter="A->B")
    assert w.info["pair_filters"] == list(PAIR_FILTERS) and w.info["has_pair"]
    segs = w.info["segments"]
    assert segs == [pair.segments[i] for i in real_idx(pair)] and set(segs) == {0, 1}
    rows = [i for i in real_idx(pair) if pair.segments[i] == 0]
    cols = [i for i in real_idx(pair) if pair.segments[i] == 1]
    fig = w.figure()
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), real_map(pair, 1, 2, rows=rows, cols=cols))
    assert [s.split(" ", 1)[1] for s in fig.data[0].y] == [pair.tokens[i] for i in rows]
    w.pair_filter = "B->A"
    np.testing.assert_array_equal(np.asarray(w.figure().data[0].z), real_map(pair, 1, 2, rows=cols, cols=rows))
    with pytest.raises(ValueError, match="pair_filter must be one of"):
        w.pair_filter = "A-B"


def test_pair_filter_needs_a_pair(padded):
    w = explore(padded)
    assert w.info["pair_filters"] == ["all"] and not w.info["has_pair"]
    with pytest.raises(ValueError, match="sentence pair"):
        w.pair_filter = "A->B"
    with pytest.raises(ValueError, match="sentence pair"):
        explore(padded, pair_filter="A->A")


def test_ledger_for_config_matches_the_loaded_model(wide, padded, small_mlm):
    assert ledger_for_config(wide.config).total == bv.count_params(wide).total == formula_total(wide.config)
    tr = small_mlm.trace("The [MASK] sat on the mat.")
    assert data.view_data(tr, "params")["total"] == bv.count_params(small_mlm).total
    w = explore(padded)  # no model: the config's shapes, and the page says so
    assert "config" in w.info["ledger_source"]
    assert w.figure("params").layout.meta["total"] == bv.count_params(wide).total


# ------------------------------------------------------------------------------------------
# static fallback
# ------------------------------------------------------------------------------------------


def test_static_returns_the_tabs_figure(padded):
    import plotly.graph_objects as go
    from bertviz_lite.views.render.figures import attention_heatmap
    fig = explore(padded, static=True, layer=1, head=4, kind="scores")
    assert isinstance(fig, go.Figure)
    assert fig.to_dict() == attention_heatmap(padded, 1, 4, kind="scores").to_dict()
    assert len(explore(padded, static=True, tab="model").data) == 3 * 6
    assert explore(padded, static=True, tab="step", key="layer.2.ffn.up").layout.meta["key"] == "layer.2.ffn.up"
    assert explore(padded, static=True, tab="neuron", layer=1, head=2, query=3).layout.meta == \
        dict(view="neuron", layer=1, head=2, query=3, pair_filter="all")
    assert explore(padded, static=True, tab="params").layout.meta["view"] == "params"


@pytest.mark.parametrize("static, gone", [(False, "anywidget"), (True, "plotly")])
def test_without_the_views_extra_one_error_names_it(padded, monkeypatch, static, gone):
    import importlib.util
    from bertviz_lite.views import explorer as module
    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == gone else real_find(name, *a))
    with pytest.raises(bv.BertVizError, match=rf"\[views\] extra \({gone} is not installed\).*bertviz-lite\[views\]"):
        module.explore(padded, static=static)


def test_a_saved_notebook_keeps_a_picture_and_the_key_facts(padded):
    import base64
    import io

    from PIL import Image

    from bertviz_lite.views.wire.widget import Explorer
    w = explore(padded, layer=1, head=3)
    assert isinstance(w, Explorer)
    bundle = w._repr_mimebundle_()
    out = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in out
    text = out["text/plain"]
    assert "static=True" in text and "6 heads" in text and "d_k = 16" in text and "layer 1, head 3" in text
    assert " ".join(padded.tokens[i] for i in real_idx(padded)) in text
    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(out["image/png"]))).convert("RGB"), dtype=float)
    assert img.shape[0] > 200 and img.std() > 10


def test_the_explorer_shows_its_picture_then_the_widget(padded, monkeypatch):
    # a saved notebook reopened without its kernel cannot draw the widget output in JupyterLab 4 or
    # Notebook 7: the separate PNG output is what a reader sees (tests/views/test_saved_notebook_browser.py),
    # first, above the placeholder JupyterLab draws for the widget output
    # (its place comes first, the widget then, and the page and the PNG fill the place once built: the widget
    # draws meanwhile from the view data in its state)
    import IPython.display
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda data, raw=False, **kw: shown.append((data, kw)))
    w = explore(padded, layer=1, head=3)
    w._ipython_display_()
    (place, at), (widget, _), (picture, update) = shown
    assert place == {"text/plain": ""} and update == dict(display_id=at["display_id"], update=True)
    assert "application/vnd.jupyter.widget-view+json" in widget and "image/png" not in widget
    assert w.first["key"] == 'attention|{"kind":"probs","layer":1}' and w.first["buffers"]  # the first picture's data
    # the saved output: the exported page (every tab, no kernel needed) with the PNG for GitHub
    assert set(picture) == {"image/png", "text/html", "text/plain"} and "layer 1, head 3" in picture["text/plain"]
    assert "bvl-saved-page" in picture["text/html"] and picture["image/png"] in picture["text/html"]


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------


def test_bad_input_is_named(wide, padded, small):
    with pytest.raises(TypeError, match="takes a Trace.*model.trace"):
        explore("The cat sat on the mat.")
    with pytest.raises(bv.OutOfRangeError, match="layer 3 is out of range.*3 layers"):
        explore(padded, layer=3)
    with pytest.raises(bv.OutOfRangeError, match="head 9 is out of range.*6 heads"):
        explore(padded, head=9)
    with pytest.raises(bv.OutOfRangeError):
        explore(padded, static=True, head=-7)
    with pytest.raises(ValueError, match="kind must be one of"):
        explore(padded, kind="weights")
    with pytest.raises(ValueError, match="tab must be one of"):
        explore(padded, tab="heads")
    with pytest.raises(ValueError, match="token index"):
        explore(padded, query=padded.n_real)
    with pytest.raises(TypeError, match="static must be True or False"):
        explore(padded, static="yes")
    with pytest.raises(TypeError, match="model= takes the Bert"):
        explore(padded, model="bert-base")
    with pytest.raises(ValueError, match="does not match the trace"):
        explore(padded, model=small)
    with pytest.raises(KeyError, match="keep="):
        explore(wide.trace("The cat sat.", keep=["ffn.*"]))
    probs_only = wide.trace("The cat sat.", keep=["attn.probs"])
    assert explore(probs_only).info["kinds"] == ["probs"] and not explore(probs_only).info["neuron"]
    with pytest.raises(ValueError, match=r"\['probs'\] for this trace"):
        explore(probs_only, kind="scores")


def test_bad_selection_after_the_fact(padded):
    w = explore(padded)
    with pytest.raises(bv.OutOfRangeError, match="0..2"):
        w.layer = 3
    with pytest.raises(bv.OutOfRangeError, match="0..5"):
        w.head = 6
    assert (w.layer, w.head) == (0, 0)
    w.layer, w.head = -1, -1  # negative indices count from the end, like the figure builders
    assert (w.layer, w.head) == (2, 5)
    msg, _ = Sent(w).ask(w, "attention", layer=7, kind="probs")
    assert msg["type"] == "error" and "layer 7 is out of range" in msg["message"] and msg["request_key"]
    msg, _ = Sent(w).ask(w, "heatmap", layer=0)
    assert msg["type"] == "error" and "view must be one of" in msg["message"]


# ------------------------------------------------------------------------------------------
# wiring
# ------------------------------------------------------------------------------------------


def test_bv_explore_returns_the_widget_every_time(padded):
    # the function, not a module, every time (a lazy wrapper once lost to the submodule it imported)
    first, second = bv.explore(padded), bv.explore(padded)
    assert type(first).__name__ == type(second).__name__ == "Explorer"


@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_importing_the_views_loads_no_widget_library_and_the_engine_no_views():
    code = ("import sys, bertviz_lite as bv; before = 'bertviz_lite.views' in sys.modules; bv.views; "
            "import bertviz_lite.views.explorer; "
            "print(before, sorted(m for m in ('anywidget', 'ipywidgets', 'IPython', 'plotly', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False []"


@pytest.mark.parametrize("name, bad", [("tab", "heatmap"), ("layer", 3), ("head", 6), ("kind", "logits"),
                                       ("pair_filter", "A->C"), ("query", 99), ("key", "no.such.key"),
                                       ("heads", [1, 6])])
def test_every_selection_is_checked_where_it_is_set(padded, name, bad):
    # the page sets selections through the widget's state: each trait is checked as explore() checks it
    w = explore(padded)
    before = getattr(w, name)
    with pytest.raises((ValueError, KeyError, IndexError)):  # OutOfRangeError is an IndexError
        setattr(w, name, bad)
    assert getattr(w, name) == before


def test_a_layer_or_head_not_shown_is_refused_after_the_fact(padded):
    w = explore(padded, include_layers=[1, 2], include_heads=[0, 3])
    with pytest.raises(ValueError, match=r"layer 0 is not among those shown \(include_layers=\[1, 2\]\)"):
        w.layer = 0
    with pytest.raises(ValueError, match=r"head 2 is not among those shown"):
        w.heads = [0, 2]
    w.heads = [3]
    assert (w.layer, w.heads) == (1, [3])
