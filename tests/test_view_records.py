"""Views as records (issue 32 §3): one record per view; the registries and the front-end's controls
are derived from the records, not written again."""

from __future__ import annotations

import pytest

from bertviz_lite.views import data, export, panels, records


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
    with pytest.raises(ValueError, match="view must be one of"):
        records.record("heads")


def test_the_front_end_builds_each_tabs_controls_from_the_records(small):
    tr = small.trace("The cat sat.", pair="It sat.")
    facts = data.facts(tr)
    assert facts["controls"] == {r.name: list(r.controls) for r in records.RECORDS}
    js = (export.ASSETS / "app.js").read_text(encoding="utf-8")
    assert "info.controls[tab]" in js
    for r in records.RECORDS:  # no hand-written block per tab
        assert f"if (sections.{r.name})" not in js
    for control in records.CONTROLS:  # one maker per control
        assert f"  {control}: (" in js
