"""Rough edges a new user hits in the views (issue 32 §4): the compare tab opens where the runs
differ, the parameters tab lists groups in forward order with readable shares."""

from __future__ import annotations

import pytest

import bertviz_lite as bv
from bertviz_lite.views.model import data, limits, panels

pytest.importorskip("anywidget")


def test_the_compare_tab_opens_on_the_first_layer_that_differs(small):
    a = small.trace("The cat sat on the mat.")
    b = small.trace("The cat sat on the mat.", edits=bv.scale("layer.1.attn.scores", 3.0))
    assert data.first_differing_layer(a, b) == 1 and data.first_differing_layer(a, a) == 0
    w = bv.explore(a, compare=b, tab="compare")
    assert w.layer == 1 and w.info["compare"]["first_layer"] == 1
    assert bv.explore(a, compare=b, tab="compare", layer=0).layer == 0  # a layer asked for is kept
    assert bv.explore(a, compare=b, static=True, tab="compare").layout.meta["layer"] == 1


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


def test_the_readme_states_the_views_numbers_as_the_code_has_them():
    from pathlib import Path

    from bertviz_lite.views.wire import export, widget
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    views = readme[readme.index("## Views, export and the command line"):readme.index("## Many sentences")]
    assert f"fits in {export.DEFAULT_MAX_BYTES // 10**6} MB" in views and f"{export.DEFAULT_MAX_BYTES:,}" in views
    assert f"at most {limits.SAVED_PAGE_BYTES // 10**6} MB" in views.replace("\n", " ")
    assert f"at most {limits.MAX_TOKENS:,} tokens" in views
    assert "15 MB" not in views
