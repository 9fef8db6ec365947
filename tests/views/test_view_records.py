"""Views as records: one record per view; the registries and the front-end's controls
are derived from the records, not written again."""

from __future__ import annotations

import pytest

from bertviz_lite.views.model import data, panels, records


def test_every_registry_is_derived_from_the_records():
    names = tuple(r.name for r in records.RECORDS)
    assert data.VIEWS == names and tuple(data.TITLES) == names and tuple(panels.LAYOUTS) == names
    for r in records.RECORDS:
        assert data.TITLES[r.name] == r.title
        assert data.REQUESTS[r.name] == (r.source, r.request, r.fixed)
        assert panels.META[r.name] == r.meta
        assert panels.LAYOUTS[r.name].__name__ == r.layout
        assert (data.BUILDERS[r.name].__name__ == r.builder) if r.builder else r.name not in data.BUILDERS
    assert panels.DRAWN_FROM == {"head": "attention"}


def test_a_record_is_checked():
    with pytest.raises(ValueError, match="unknown controls"):
        records.ViewRecord("x", "x", None, "attention_layout", request=(), meta=(), controls=("slider",))
    with pytest.raises(ValueError, match="unknown ahead"):
        records.ViewRecord("x", "x", None, "attention_layout", request=(), meta=(), controls=(), ahead=("query",))
    with pytest.raises(ValueError, match="view must be one of"):
        records.record("heads")


def test_the_front_end_is_given_each_tabs_controls_from_the_records(small):
    # that the front-end draws what it is given: tests/views/test_export_browser.py (a behaviour, not app.js's spelling)
    tr = small.trace("The cat sat.", pair="It sat.")
    facts = data.facts(tr)
    assert facts["controls"] == {r.name: list(r.controls) for r in records.RECORDS}
    assert facts["ahead"] == {r.name: list(r.ahead) for r in records.RECORDS if r.ahead}  # what it asks for ahead
