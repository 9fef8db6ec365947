"""The explorer widget's contents, without a browser: what it sends when the page asks for a
layer (exactly that layer's maps, real tokens only, compact bytes), its labels and key order,
the pair filter, the figures of the other tabs, the static fallback, and its errors.
(tests/test_jupyterlab_browser.py drives the same widget in a real JupyterLab.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.backend import to_host
from bertviz_lite.params import formula_total
from bertviz_lite.views import PAIR_FILTERS, attention_heatmap, stepper_steps
from bertviz_lite.views.explorer import (FLOAT_MAX_TOKENS, decode_block, explore, ledger_from_config, map_block,
                                        widgets_available)

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


def real_idx(tr):
    return [i for i, m in enumerate(tr.mask) if m]


def real_map(tr, layer, head, kind="probs", rows=None, cols=None):
    idx = real_idx(tr)
    rows, cols = (idx if rows is None else rows), (idx if cols is None else cols)
    return to_host(tr.get(f"attn.{kind}", layer=layer, head=head))[np.ix_(rows, cols)]


class Sent:
    """Captures what the widget sends to the page (content, buffers)."""

    def __init__(self, w):
        self.messages = []
        w.send = lambda content, buffers=None: self.messages.append((content, buffers or []))

    def ask(self, w, **request):
        start = len(self.messages)
        w._on_msg(w, request, [])
        return self.messages[start:]


# ------------------------------------------------------------------------------------------
# the attention maps the page receives
# ------------------------------------------------------------------------------------------


def test_layer_2_head_5_sends_exactly_that_map(padded):
    w = explore(padded)
    w.layer, w.head = 2, 5
    sent = Sent(w)
    # what the page asks when it shows layer 2, head 5: that head first, then the whole layer
    first, whole = sent.ask(w, type="maps", layer=2, kind="probs", head=5)
    n = padded.n_real
    assert padded.n == 24 > n  # padded, and the padding never travels
    head, buffers = first
    assert (head["type"], head["layer"], head["head"], head["heads"], head["n"]) == ("maps", 2, 5, 1, n)
    assert head["dtype"] == "f4" and len(buffers) == 1 and len(buffers[0]) == 4 * n * n  # bytes, not JSON numbers
    np.testing.assert_array_equal(decode_block(head, buffers[0])[0], real_map(padded, 2, 5))
    layer, buffers = whole
    assert layer["head"] is None and layer["heads"] == 6
    maps = decode_block(layer, buffers[0])
    assert maps.shape == (6, n, n)
    for h in range(6):
        np.testing.assert_array_equal(maps[h], real_map(padded, 2, h))
    assert not np.array_equal(maps[5], maps[4])
    # the same selection as a plotly figure (the static fallback): that map, token labels
    fig = w.figure()
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), real_map(padded, 2, 5))
    assert [s.split(" ", 1)[1] for s in fig.data[0].x] == [padded.tokens[i] for i in real_idx(padded)]
    assert fig.layout.meta["layer"] == 2 and fig.layout.meta["head"] == 5


def test_long_inputs_travel_as_scaled_uint16(wide):
    tr = wide.trace(" ".join(["the cat sat on the mat"] * 25), pad_to=160)
    n = tr.n_real
    assert n > FLOAT_MAX_TOKENS
    for kind in ("probs", "scores"):
        header, data = map_block(tr, 1, kind)
        assert header["dtype"] == "u2" and len(data) == 2 * 6 * n * n
        maps = decode_block(header, data)
        for h in (0, 5):
            want = real_map(tr, 1, h, kind)
            step = (want.max() - want.min()) / 65535
            np.testing.assert_allclose(maps[h], want, rtol=0, atol=step / 2 * 1.05)  # half a step, float32 rounding
        assert np.isfinite(maps).all()  # scores of [PAD] keys (-inf) are not sent
    one, data = map_block(tr, 1, "probs", head=3)
    np.testing.assert_allclose(decode_block(one, data)[0], real_map(tr, 1, 3), atol=real_map(tr, 1, 3).max() / 1e5)


def test_labels_are_the_real_tokens(padded):
    info = explore(padded).info
    tokens = [padded.tokens[i] for i in real_idx(padded)]
    assert info["tokens"] == tokens and info["n"] == len(tokens) and info["n_total"] == 24
    assert [s.split(" ", 1)[1] for s in info["labels"]] == tokens
    assert len(set(info["labels"])) == len(info["labels"])  # "the" twice stays apart: "1 the", "5 the"
    assert not any("[PAD]" in s for s in info["labels"] + info["tokens"])
    assert (info["layers"], info["heads"]) == (3, 6)
    assert info["kinds"] == ["probs", "scores"] and "softmax" in info["formulas"]["probs"]
    assert info["axes"]["probs"] == ["query", "key"]
    assert all(len(lut) == 256 and lut[0] != lut[-1] for lut in info["luts"].values())


def test_key_selector_lists_trace_keys_in_order(padded):
    w = explore(padded)
    keys = w.info["keys"]
    assert keys == stepper_steps(padded) == schema.trace_keys(3)
    assert keys[:2] == ["embed.token", "embed.position"] and keys[-1] == "pooler.out"
    assert w.key == keys[0]
    w.key = "layer.1.attn.q"
    sent = Sent(w)
    (msg, _), = sent.ask(w, type="figure", view="steps", arg="layer.1.attn.q")
    fig = json.loads(msg["json"])
    assert "layer.1.attn.q" in fig["layout"]["title"]["text"]
    assert fig["layout"]["meta"]["key"] == "layer.1.attn.q"
    assert sum(t["type"] == "heatmap" for t in fig["data"]) == 6  # one per head
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


# ------------------------------------------------------------------------------------------
# the other tabs
# ------------------------------------------------------------------------------------------


def test_model_view_and_params_figures(wide, padded):
    w = explore(padded, model=wide)
    sent = Sent(w)
    (msg, _), = sent.ask(w, type="figure", view="model", arg="probs")
    fig = json.loads(msg["json"])
    panels = [(t["meta"]["layer"], t["meta"]["head"]) for t in fig["data"]]
    assert panels == [(layer, h) for layer in range(3) for h in range(6)]
    assert isinstance(fig["data"][0]["z"], dict) and "bdata" in fig["data"][0]["z"]  # base64, not float lists
    (msg, _), = sent.ask(w, type="figure", view="params", arg="")
    tree = json.loads(msg["json"])["data"][0]
    assert tree["type"] == "treemap" and tree["values"][tree["ids"].index("model")] == bv.count_params(wide).total
    assert "loaded model" in w.info["ledger_source"]


def test_ledger_from_config_matches_the_loaded_model(wide, padded, small_mlm):
    assert ledger_from_config(padded).total == bv.count_params(wide).total == formula_total(wide.config)
    tr = small_mlm.trace("The [MASK] sat on the mat.")
    assert "mlm.logits" in tr
    assert ledger_from_config(tr).total == bv.count_params(small_mlm).total
    w = explore(padded)  # no model: the config's shapes, and the page says so
    assert "config" in w.info["ledger_source"]
    assert w.figure("params").layout.meta["total"] == bv.count_params(wide).total


def test_plotly_js_is_sent_from_the_package(padded):
    from plotly.offline import get_plotlyjs, get_plotlyjs_version
    w = explore(padded)
    (msg, buffers), = Sent(w).ask(w, type="plotly")
    assert msg["version"] == get_plotlyjs_version() == w.info["plotly_version"]
    assert bytes(buffers[0]) == get_plotlyjs().encode()


# ------------------------------------------------------------------------------------------
# static fallback
# ------------------------------------------------------------------------------------------


def test_static_returns_the_tabs_figure(padded):
    import plotly.graph_objects as go
    fig = explore(padded, static=True, layer=1, head=4, kind="scores")
    assert isinstance(fig, go.Figure)
    assert fig.to_dict() == attention_heatmap(padded, 1, 4, kind="scores").to_dict()
    assert len(explore(padded, static=True, tab="model").data) == 3 * 6
    step = explore(padded, static=True, tab="steps", key="layer.2.ffn.up")
    assert step.layout.meta["key"] == "layer.2.ffn.up"
    assert explore(padded, static=True, tab="params").data[0].type == "treemap"


def test_without_widget_libraries_it_warns_and_draws_a_figure(padded, monkeypatch):
    import plotly.graph_objects as go
    from bertviz_lite.views import explorer as module
    monkeypatch.setattr(module, "widgets_available", lambda: False)
    with pytest.warns(UserWarning, match="static figure"):
        fig = module.explore(padded, layer=2, head=1)
    assert isinstance(fig, go.Figure)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), real_map(padded, 2, 1))


def test_the_widget_text_says_how_to_get_a_figure(padded):
    from bertviz_lite.views.explorer import Explorer
    w = explore(padded)
    assert isinstance(w, Explorer)
    bundle = w._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "static=True" in data["text/plain"] and "6 heads" in data["text/plain"]


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
    with pytest.raises(TypeError, match="static must be True or False"):
        explore(padded, static="yes")
    with pytest.raises(TypeError, match="model= takes the Bert"):
        explore(padded, model="bert-base")
    with pytest.raises(ValueError, match="does not match the trace"):
        explore(padded, model=small)
    with pytest.raises(KeyError, match="keep="):
        explore(wide.trace("The cat sat.", keep=["ffn.*"]))
    probs_only = wide.trace("The cat sat.", keep=["attn.probs"])
    assert explore(probs_only).info["kinds"] == ["probs"]
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
    (msg, _), = Sent(w).ask(w, type="maps", layer=7, kind="probs")
    assert msg["type"] == "error" and "layer 7 is out of range" in msg["message"]
    (msg, _), = Sent(w).ask(w, type="figure", view="head", arg="")
    assert msg["type"] == "error" and "no figure named 'head'" in msg["message"]


# ------------------------------------------------------------------------------------------
# wiring
# ------------------------------------------------------------------------------------------


def test_bv_explore_returns_the_widget_every_time(padded):
    # the function, not a module, every time (a lazy wrapper once lost to the submodule it imported)
    first, second = bv.explore(padded), bv.explore(padded)
    assert type(first).__name__ == type(second).__name__ == "Explorer"


def test_importing_the_explorer_loads_no_widget_library():
    code = ("import sys, bertviz_lite.views.explorer; "
            "print(sorted(m for m in ('anywidget', 'ipywidgets', 'IPython') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
