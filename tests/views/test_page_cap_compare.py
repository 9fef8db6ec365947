"""max_bytes is a cap on every exported page, compare included: the compare view is kept
layer by layer while the budget lasts and the page says which layers it left out; a page whose always-kept
part is over the cap is refused before anything is written."""

from __future__ import annotations

import json
import re

import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import records
from bertviz_lite.views.wire import export

CONFIG = {"hidden_size": 96, "num_layers": 4, "num_heads": 6, "ffn_size": 192}


@pytest.fixture(scope="module")
def pair():
    m = bv.load("random", seed=1, config=CONFIG)
    text = " ".join(["the cat sat on a mat"] * 25)  # 152 tokens: above the 128 kept in full
    return m.trace(text), m.trace(text, edits=bv.ablate(heads={1: [2]}))


def note(page: str) -> str:
    return json.loads(re.search(r'id="bvl-data">(.*?)</script>', page, re.S).group(1))["state"]["info"]["page_note"]


def test_a_compare_page_stays_under_max_bytes_and_says_what_it_left_out(pair):
    a, b = pair
    whole = export.build_page(a, compare=b)  # the default 14 MB holds every layer of it
    assert "compare view: every layer" in note(whole)
    always = records.ALWAYS_IN_PAGE
    base = len(export.build_page(a, compare=b, views=always).encode())
    with_compare = len(export.build_page(a, compare=b, views=always + ("compare",)).encode())
    cap = base + (with_compare - base) // 2  # room for about half its layers
    page = export.build_page(a, compare=b, max_bytes=cap)
    assert len(page.encode()) <= cap
    said = note(page)
    assert re.search(r"compare view: (layers [\d, ]+|no layer) \(.*over the size budget", said), said


def test_a_cap_below_what_is_always_kept_is_refused_before_writing(pair, tmp_path):
    a, b = pair
    target = tmp_path / "page.html"
    with pytest.raises(bv.BertVizError, match=r"over max_bytes=200,000.*larger max_bytes, or fewer tokens"):
        bv.export_html(a, target, compare=b, max_bytes=200_000, progress=False)
    assert not target.exists()


def test_a_buffer_two_views_share_is_counted_once_in_the_budget():
    # the neuron view's weights are the attention maps (codec.pack_page stores them once): the budget counted
    # them again, so a saved page at 100-128 tokens kept the neuron view of one layer or none
    from bertviz_lite.views.wire import export as ex
    a = bv.load("random", seed=1, config=CONFIG).trace("the cat sat on the mat because it was warm")
    alone = ex.Payloads(a, None, None)
    assert alone.add("neuron", dict(layer=0))
    after = ex.Payloads(a, None, None)
    after.add("attention", dict(layer=0, kind="probs"))
    before = after.size
    assert after.add("neuron", dict(layer=0))
    shared = set(alone.items['neuron|{"layer":0}']["data"]) & set(after.items['attention|{"kind":"probs","layer":0}']["data"])
    assert shared  # up to 128 tokens the neuron view carries the attention maps as its weights
    assert alone.size - (after.size - before) == sum(len(d) for d in shared)
