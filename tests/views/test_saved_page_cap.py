"""The saved notebook page holds to its stated cap (widget.SAVED_PAGE_BYTES): fewer tabs first, then
only the picture with the reason, never a page over the cap (a reviewer measured 4.5 MB under a 2 MB cap)."""

from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

import bertviz_lite as bv  # noqa: E402
from bertviz_lite.views.wire import widget  # noqa: E402


def test_a_page_over_the_cap_keeps_fewer_tabs_then_only_the_picture(small, monkeypatch):
    tr = small.trace("the cat sat on the mat because it was tired and the mat was warm")
    w = bv.explore(tr, model=small)
    full = w.saved_page()
    long = len(full.encode()) - 1
    monkeypatch.setattr(widget, "SAVED_PAGE_BYTES", long)
    fewer = w.saved_page()
    assert len(fewer.encode()) <= long  # the attention, model, head view and parameters tabs (the note is packed)
    monkeypatch.setattr(widget, "SAVED_PAGE_BYTES", 1000)
    with pytest.raises(bv.BertVizError, match="over the"):
        w.saved_page()
    bundle = w.saved_bundle()
    assert "image/png" in bundle and len(bundle.get("text/html", "").encode()) < 100_000


def test_the_whole_saved_output_keeps_to_the_cap_once_escaped(small, monkeypatch):
    # the page goes into the notebook html-escaped (srcdoc) with its PNG twice: 8.06 MB under an 8 MB cap at 128
    # MiniLM tokens, 38.7 MB for tokens full of '"' (each written &quot;). The whole output keeps to the cap.
    tr = small.trace(" ".join(['"'] * 60 + ["the cat"]))
    w = bv.explore(tr, model=small)
    page = w.saved_page()
    cap = len(page.encode()) + 1000  # the raw page fits; escaped, with its PNG twice, it is over
    monkeypatch.setattr(widget, "SAVED_PAGE_BYTES", cap)
    bundle = w.saved_bundle()
    kept = len(bundle["text/html"].encode()) + len(bundle["image/png"])
    assert kept <= cap, (kept, cap)
    assert "saved explorer" in bundle["text/html"] and "could not be built" not in bundle["text/plain"]
