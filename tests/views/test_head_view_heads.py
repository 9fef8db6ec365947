"""heads=: one index, a list (each head once), or a clear error (explore's, which bertviz's head_view passes on)."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

import bertviz_lite as bv  # noqa: E402


def test_heads_takes_one_index_or_a_list_and_keeps_each_head_once(small):
    tr = small.trace("the cat sat")
    assert bv.explore(tr, tab="head", heads=1).heads == [1]
    assert bv.explore(tr, tab="head", heads=[0, 0, 1]).heads == [0, 1]
    with pytest.raises(TypeError, match="heads= takes a list"):
        bv.views.head_view(tr, heads="1")
