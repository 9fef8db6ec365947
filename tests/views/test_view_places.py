"""Adding a view is three places: its record, its builder, its layout (and, if it has one, its plotly function,
which the record names). Everything else the package decides about a view (the exported page's builder and
order, how its arrays travel to the notebook and in the page, whether a trace can show it, what its builder is
given, the tabs a long saved page keeps, the plotly names, every size limit, the front-end's tab, controls and
drawing) is read from the record, from `limits.py` or from the layout; the tests read the tab list from the
records too, so no test is edited.

The proof: a fresh copy of the package with a toy view added (one record in records.py, one builder in data.py,
one layout in panels.py; the test counts the top-level definitions that differ from the package's) shows it,
exports it, saves it, answers the front-end's requests for it, offers it on the command line, draws it with
plotly, and its exported page draws its tab in chromium as Python resolves it."""

from __future__ import annotations

import ast
import io
import json
import os
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
    import json
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
    # the page the browser opens, and what Python resolves for its first selection
    open("toy.html", "w", encoding="utf-8").write(export.build_page(tr, state=dict(tab="toy", layer=1)))
    from bertviz_lite.views.model import panels
    fig = panels.resolve(data.view_data(tr, "toy", layer=1), "toy", layer=1, head=0)
    json.dump(dict(title=fig["title"], shapes=[list(p["z"].shape) for p in fig["panels"]]), open("toy.json", "w"))
    print("TOY VIEW OK")
''')


def add_places(root: Path) -> None:
    """Write the toy view into a copy of the package."""
    for rel, before, text, offset in PLACES:
        path = root / rel
        src = path.read_text(encoding="utf-8")
        assert src.count(before) == 1, (rel, before)
        at = src.index(before) + offset
        path.write_text(src[:at] + text + src[at:], encoding="utf-8")


def top_level(source: str) -> dict[str, str]:
    """A module's top-level statements by name (a function, a class, an assignment's targets; anything else by
    itself), each as its syntax tree without positions."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = ", ".join(ast.unparse(t) for t in targets)
        else:
            name = ast.dump(node)
        out[name] = ast.dump(node)
    return out


def places_changed(package: Path, copy: Path) -> list[tuple[str, str]]:
    """(file, definition) for every top-level definition of the copy that is new or differs from the package's,
    and (file, "the file") for any other file that is new or differs (app.js, a style sheet)."""
    out = []
    for path in sorted(copy.rglob("*")):
        rel = path.relative_to(copy)
        if rel.parts[0] == "data" or "__pycache__" in rel.parts or not path.is_file():
            continue
        old = package / rel
        if old.is_file() and old.read_bytes() == path.read_bytes():
            continue
        if path.suffix != ".py" or not old.is_file():
            out.append((str(rel), "the file"))
            continue
        before, after = top_level(old.read_text(encoding="utf-8")), top_level(path.read_text(encoding="utf-8"))
        out += [(str(rel), name) for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]
    return out


TOY_DRAWN = "() => document.querySelector(\".bvl-x-section[data-tab='toy']\")?.fig !== undefined"


def draw_toy_tab(page_file: Path) -> tuple[dict, bytes]:
    """The toy tab as the exported page draws it in chromium: its resolved figure and a picture of its panels."""
    from ..helpers import CHROMIUM, chromium_context
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    for ctx in chromium_context(sync_api):
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        page.wait_for_function(TOY_DRAWN, timeout=30_000)
        assert page.locator(".bvl-x-tab[data-tab='toy']").inner_text() == "toy view"
        fig = page.evaluate("() => { const f = document.querySelector(\".bvl-x-section[data-tab='toy']\").fig; "
                            "return {title: f.title, shapes: f.panels.map((p) => [p.R, p.C])}; }")
        png = page.locator(".bvl-x-section[data-tab='toy'] .bvl-panels").screenshot()
        assert not errors, errors
        return fig, png


@pytest.mark.slow
@pytest.mark.browser
def test_a_toy_view_in_three_places_is_shown_exported_saved_and_drawn(tmp_path):
    pytest.importorskip("anywidget")
    pytest.importorskip("plotly")
    copy = tmp_path / "bertviz_lite"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    (copy / "data").symlink_to(PACKAGE / "data", target_is_directory=True)
    add_places(copy)
    places = places_changed(PACKAGE, copy)
    assert places == [("views/model/data.py", "toy"), ("views/model/panels.py", "toy_layout"),
                      ("views/model/records.py", "RECORDS")], places
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "CI": "1",
                              "OMP_WAIT_POLICY": "PASSIVE"})
    assert "TOY VIEW OK" in run.stdout, run.stderr[-3000:]
    # the page draws the toy tab (the front-end knows no view by name): the panels Python resolves, in colour
    fig, png = draw_toy_tab(tmp_path / "toy.html")
    assert fig == json.loads((tmp_path / "toy.json").read_text())
    from PIL import Image
    assert len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or []) > 8
    (tmp_path / "toy.png").write_bytes(png)


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
