"""The page a saved notebook keeps holds every layer's neuron view at 128 tokens, under its cap (it once
kept layers 0 and 5 at 100 tokens and none at 128), by a stated rule: the records' priority puts
the neuron view before the step-through and the one-token view, and a tab of which nothing fits is not shown.
Above 128 tokens the compare view travels as block means, as the other long views do, and says so (it was
sent in full: three 512 x 512 maps a head)."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.views.wire import codec, export, widget
from bertviz_lite.views.model import data, limits, records

WORDS = "the quick brown fox jumps over the lazy dog while a small cat sleeps on the warm mat in the sun".split()


def trace_of(model, n: int):
    """A trace of exactly n tokens."""
    for k in range(n):
        tr = model.trace(" ".join((WORDS * 20)[:k]))
        if tr.n_real == n:
            return tr
    raise AssertionError(f"no text of {n} tokens")


@pytest.mark.slow
def test_a_saved_page_at_128_tokens_keeps_every_layers_neuron_view_under_its_cap(minilm):
    pytest.importorskip("anywidget")
    tr = trace_of(minilm, limits.LONG_INPUT)
    page = bv.explore(tr, model=minilm).saved_page()
    assert len(page.encode()) <= limits.SAVED_PAGE_BYTES
    kept = export.read_page(page)
    for layer in range(tr.num_layers):
        assert codec.request_key("neuron", {"layer": layer}) in kept["payloads"], layer
    info = kept["state"]["info"]
    assert "neuron view: every layer" in info["page_note"]
    # what did not fit is named, and a tab with nothing in it is not offered
    for view in info["views"]:
        assert any(k.startswith(records.record(view).source + "|") for k in kept["payloads"]), view


def test_the_page_builds_the_neuron_view_before_the_step_through_and_the_one_token_view():
    order = records.PAGE_ORDER
    assert order.index("neuron") < order.index("step") < order.index("token")


def test_a_tab_of_which_nothing_fits_is_not_shown(small):
    tr = small.trace(" ".join(["the cat sat on the mat"] * 6))
    always = len(export.build_page(tr, views=records.ALWAYS_IN_PAGE).encode())
    page = export.build_page(tr, max_bytes=always + 2_000, state=dict(tab="token"))
    info = export.read_page(page)["state"]
    assert "token" not in info["info"]["views"] and info["tab"] == "attention"
    assert "one token: no token (over the size budget)" in info["info"]["page_note"]


@pytest.fixture(scope="module")
def long_pair(small):
    text = " ".join(["the cat sat on a mat"] * 25)  # 152 tokens
    return small.trace(text), small.trace(text, edits=bv.ablate(heads={1: [2]}))


def test_compare_above_128_tokens_is_sent_as_block_means_and_says_so(long_pair):
    a, b = long_pair
    assert a.n_real > limits.COMPARE_FULL_UP_TO
    vd = data.view_data(a, "compare", trace_b=b, layer=1)
    side = limits.COMPARE_MAPS
    for name in ("a", "b", "diff"):
        assert vd["arrays"][name].shape == (a.num_heads, side, side)
    # the block means are the maps' means (B - A of the means is the mean of B - A)
    full = data.compare(a, b, layer=1, max_tokens=a.n_real)
    e = vd["edges"]
    want = full["arrays"]["diff"][:, e[0]:e[1], e[2]:e[3]].mean(axis=(1, 2))
    np.testing.assert_allclose(vd["arrays"]["diff"][:, 0, 2], want, atol=1e-6)
    notes = " ".join(str(n) for n in vd["layouts"]["compare"]["notes"])
    assert f"{a.n_real} tokens in {side} blocks a side" in notes and "attention tab" in notes
    # to the notebook: block means, no longer three full maps a head
    header, buffers = widget.answer(a, dict(view="compare", args=dict(layer=1)), trace_b=b)
    assert sum(len(x) for x in buffers[:3]) <= 3 * a.num_heads * side * side * 4


def test_compare_up_to_128_tokens_stays_in_full(small):
    a = small.trace("the cat sat on the mat")
    vd = data.view_data(a, "compare", trace_b=a, layer=0)
    assert vd["edges"] is None and vd["arrays"]["a"].shape[-1] == a.n_real
    assert not any("block means" in str(n) for n in vd["layouts"]["compare"]["notes"])
