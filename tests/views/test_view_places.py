"""Adding a view is at most 4 places (issue 41 item 3): its record, its builder, its layout (and, if it has
one, its plotly function, which the record names). Everything else the package decides about a view (the
exported page's builder and order, how its arrays travel to the notebook and in the page, whether a trace
can show it, what its builder is given, the tabs a long saved page keeps, the plotly names, every size
limit) is read from the record or from `limits.py`.

The proof: a fresh copy of the package with a toy view added in exactly three places (one record in
records.py, one builder in data.py, one layout in panels.py) shows it, exports it, saves it, answers the
front-end's requests for it, offers it on the command line and draws it with plotly."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bertviz_lite
from bertviz_lite.views.model import data, limits, records
from bertviz_lite.views.wire import export, widget

PACKAGE = Path(bertviz_lite.__file__).resolve().parent

# the three places, each an insertion before a line the file has once
TOY_RECORD = '''    ViewRecord("toy", "toy view", "toy", "toy_layout", request=("layer",), meta=("layer", "head"),
               controls=("layer", "head"), priority=5),
'''
TOY_BUILDER = '''def toy(trace, layer: int) -> dict:
    """Each head's attention entropy per query (a toy view): arrays["entropy"] (head, query)."""
    a = attention(trace, layer)["arrays"]["maps"].astype(np.float64)
    ent = -(a * np.log(np.where(a > 0, a, 1.0))).sum(axis=-1)
    return _base(trace, "toy", layer=layer, labels=token_labels(trace), heads=trace.num_heads,
                 scale=colour_scale(ent, "weights"), arrays=dict(entropy=ent.astype(np.float32)))


'''
TOY_LAYOUT = '''def toy_layout(vd: dict) -> dict:
    panel = heatmap("toy", ref("arrays.entropy"), vd["scale"]["clim"], vd["scale"], x_labels=ref("labels"),
                    y_labels=[f"H{h}" for h in range(vd["heads"])], hover="{y} {x}: {v}", at=[0, 0])
    return dict(title="attention entropy, layer {layer}", formula=None, grid=[1, 1], panels=[panel],
                notes=["each query's entropy of its attention row"], live=[], edited="")


'''
PLACES = [("views/model/records.py", "\n)\n\nBY_NAME", TOY_RECORD, 1), ("views/model/data.py", "BUILDERS = ", TOY_BUILDER, 0),
          ("views/model/panels.py", "LAYOUTS = ", TOY_LAYOUT, 0)]

CHECK = textwrap.dedent('''
    import bertviz_lite as bv
    from bertviz_lite import cli
    from bertviz_lite.views.wire import codec, export, widget
    from bertviz_lite.views.model import data
    from bertviz_lite.views.render import figures
    tr = bv.load("random", seed=3, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256}) \\
        .trace("The cat sat on the mat.")
    assert "toy" in data.shown_views(tr) and "toy" in data.facts(tr)["views"], "shown"
    assert data.facts(tr)["controls"]["toy"] == ["layer", "head"] and data.facts(tr)["titles"]["toy"] == "toy view"
    page = export.read_page(export.build_page(tr))
    assert all(codec.request_key("toy", {"layer": ly}) in page["payloads"] for ly in range(2)), "exported"
    assert "toy view: every layer" in page["state"]["info"]["page_note"], page["state"]["info"]["page_note"]
    saved = export.read_page(bv.explore(tr).saved_page())
    assert codec.request_key("toy", {"layer": 1}) in saved["payloads"], "saved"
    header, buffers = widget.answer(tr, {"view": "toy", "args": {"layer": 1}})
    assert header["arrays"][0]["dtype"] == "f4" and len(buffers) == 1, "answered"
    assert "toy" in cli.VIEWS, "offered by --view"
    figures.view_figure(data.view_data(tr, "toy", layer=0), "toy", head=0)
    print("TOY VIEW OK")
''')


def add_places(root: Path) -> int:
    """Write the toy view into a copy of the package; returns the number of places edited."""
    for rel, before, text, offset in PLACES:
        path = root / rel
        src = path.read_text(encoding="utf-8")
        assert src.count(before) == 1, (rel, before)
        at = src.index(before) + offset
        path.write_text(src[:at] + text + src[at:], encoding="utf-8")
    return len(PLACES)


@pytest.mark.slow
def test_a_toy_view_in_three_places_is_shown_exported_saved_and_drawn(tmp_path):
    pytest.importorskip("anywidget")
    pytest.importorskip("plotly")
    copy = tmp_path / "bertviz_lite"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    (copy / "data").symlink_to(PACKAGE / "data", target_is_directory=True)
    places = add_places(copy)
    assert places <= 4
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "CI": "1",
                              "OMP_WAIT_POLICY": "PASSIVE"})
    assert "TOY VIEW OK" in run.stdout, run.stderr[-3000:]


def test_the_per_view_tables_are_read_from_the_records():
    assert widget.SAVED_LONG_TABS == tuple(r.name for r in records.RECORDS if r.saved_long)
    assert {n: f.__name__ for n, f in export.BUILD.items()} == {
        r.name: r.page or "every_request" for r in records.RECORDS if r.priority is not None}
    import bertviz_lite.views as views
    assert views._FIGURES == tuple(r.figure for r in records.RECORDS if r.figure)
    assert all(callable(getattr(views, name)) for name in views._FIGURES)


def test_the_tabs_a_trace_shows_follow_the_records_needs(small, monkeypatch):
    tr = small.trace("The cat sat.")
    assert "compare" not in data.shown_views(tr) and "compare" in data.shown_views(tr, tr)
    neuron = records.record("neuron")
    changed = records.ViewRecord(**{**neuron.__dict__, "needs": ("second_trace",)})
    monkeypatch.setitem(records.BY_NAME, "neuron", changed)
    monkeypatch.setattr(records, "RECORDS", tuple(records.BY_NAME.values()))
    assert "neuron" not in data.shown_views(tr) and "neuron" in data.shown_views(tr, tr)


def test_the_notebook_wire_follows_the_records_maps(small):
    tr = small.trace(" ".join(["the cat sat on the mat"] * 25))  # above limits.EXACT_UP_TO tokens
    assert tr.n_real > limits.EXACT_UP_TO
    for view, args in (("attention", dict(layer=0, kind="probs")), ("neuron", dict(layer=1)), ("token", dict(query=3))):
        vd = data.view_data(tr, view, **args)
        big = {a for a in records.record(view).maps}
        assert widget.wire_dtypes(vd) == {a: "u2" if a in big else "f4" for a in vd["arrays"]}, view


def test_every_size_limit_is_written_once_in_limits():
    """No views module but limits.py holds a number of tokens such as 128 (seven of them did), and the
    front-end is given the limits it draws by."""
    for path in (PACKAGE / "views").glob("*.py"):
        if path.name == "limits.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in
                 (limits.LONG_INPUT, limits.SMALL_MAPS, limits.THUMB_TOKENS, limits.MAX_TOKENS, limits.SAVED_PAGE_BYTES,
                  limits.DEFAULT_MAX_BYTES, limits.MIN_BYTES)
                 and type(n.value) is int]
        assert not found, f"{path.name} lines {found}: a size limit outside limits.py"
    assert data.facts.__code__.co_names.count("limits")
