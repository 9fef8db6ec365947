"""The course: every lesson has the skeleton of STYLE.md habit 10, every exercise stub has a
solution, every lesson runs with its solutions filled in under strict checking, and every
checker rejects wrong answers (the replay of each `check` call with wrong ones).

    .venv/bin/python -m pytest tests/test_lessons.py -q                 # all lessons
    .venv/bin/python -m pytest tests/test_lessons.py -q -k 03_one_head   # one lesson

The solutions run takes as long as the lesson (each <= 90 s), so those tests are marked slow.
"""
from __future__ import annotations

import base64
import copy
import json
import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = NOTEBOOKS / "solutions"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
TAG = re.compile(r"^exercise-(\d\d\.\d+)$")
BLOCK = re.compile(r"^# %% (\d\d\.\d+)\s*$", re.M)
HEADINGS = ["## Goal", "## The formula lines", "## Run", "## Look", "## Check", "## Exercises",
            "## What you computed", "## Next"]

sys.path.insert(0, str(NOTEBOOKS))
import course  # noqa: E402  (notebooks/course.py, as the lessons import it)


def ids(path):
    return [p.stem for p in path]


def exercise_cells(nb) -> dict[str, nbformat.NotebookNode]:
    cells = {}
    for cell in nb.cells:
        for tag in cell.metadata.get("tags", []):
            m = TAG.match(tag)
            if m:
                assert m.group(1) not in cells, f"two cells tagged {tag}"
                cells[m.group(1)] = cell
    return cells


def solutions(lesson: Path) -> dict[str, str]:
    path = SOLUTIONS / f"{lesson.stem}.py"
    if not path.exists():
        return {}
    text = path.read_text()
    parts = BLOCK.split(text)
    return {parts[i]: parts[i + 1].strip("\n") + "\n" for i in range(1, len(parts), 2)}


# ------------------------------------------------------------------------------------------
# the checker itself
# ------------------------------------------------------------------------------------------


def test_close_names_what_is_off():
    assert course.close(np.ones((2, 3)), np.ones((2, 3)))[0]
    ok, detail = course.close(np.ones((6, 64)), np.ones((6, 6)))
    assert not ok and detail == "shape (6, 64) but expected (6, 6)"
    ok, detail = course.close(np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0]))
    assert not ok and "1 of 3 values differ" in detail and "index (2,)" in detail
    assert not course.close("abc", 1.0)[0]
    assert not course.close(np.array([1.0, np.nan]), np.array([1.0, 2.0]))[0]
    assert course.close(np.array([0.0, -np.inf]), np.array([0.0, -np.inf]))[0]
    assert course.close(2.0 + 1e-7, 2.0)[0] and not course.close(2.1, 2.0)[0]


def test_equals_one_of_within():
    assert course.equals(["a", "b"], ["a", "b"])[0] and not course.equals(["a"], ["a", "b"])[0]
    assert course.equals(3, 3)[0] and not course.equals(True, 1)[0]
    assert course.one_of(2, [1, 2])[0] and not course.one_of(3, [1, 2])[0]
    assert course.within(0.5, 0, 1)[0] and not course.within(1.5, 0, 1)[0]
    assert not course.within(np.ones(2), 0, 1)[0]


def test_check_prints_verdict_and_strict_raises(monkeypatch, capsys):
    @course.exercise("98.1", hint="double it")
    def _(answer, *, x):
        return course.close(answer, 2 * x)

    monkeypatch.delenv(course.STRICT_ENV, raising=False)
    assert course.check("98.1", ..., x=1) is False
    assert "replace the ... with your answer" in capsys.readouterr().out
    assert course.check("98.1", 2, x=1) is True
    assert "✅ correct (98.1)" in capsys.readouterr().out
    assert course.check("98.1", 3, x=1) is False
    out = capsys.readouterr().out
    assert "❌ not yet (98.1)" in out and "hint: double it" in out
    assert course.check("98.1", None, x=1) is False  # a malformed answer is "not yet", not a crash
    monkeypatch.setenv(course.STRICT_ENV, "1")
    with pytest.raises(AssertionError, match="not yet"):
        course.check("98.1", 3, x=1)
    with pytest.raises(KeyError, match="lesson 97"):
        course.check("97.1", 1)
    with pytest.raises(ValueError, match="NN.k"):
        course.exercise("3.1", hint="")


# ------------------------------------------------------------------------------------------
# the committed lessons
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_lesson_skeleton(lesson):
    nb = nbformat.read(lesson, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    missing = [h for h in HEADINGS if h not in markdown]
    assert not missing, f"{lesson.name} lacks the headings {missing}"
    assert re.search(r"^#+ .*Try it", markdown, re.M), f"{lesson.name} has no 'Try it' heading (a live control)"
    assert "widgets" not in nb.metadata, "widget state is stored: refresh with scripts/refresh_notebooks.py"
    pictures = [c for c in nb.cells if c.cell_type == "code" and c.source.lstrip().startswith("# PICTURE")]
    assert pictures, f"{lesson.name}: no '# PICTURE' cell (a stored picture under Look)"
    for cell in pictures:
        pngs = [o["data"]["image/png"] for o in cell.outputs if "image/png" in o.get("data", {})]
        assert pngs, f"{lesson.name}: a '# PICTURE' cell without a stored PNG: refresh the lesson"
        for png in pngs:
            raw = base64.b64decode(png)
            assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) <= 200 * 1024


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_exercises_have_stubs_and_solutions(lesson):
    nb = nbformat.read(lesson, as_version=4)
    cells = exercise_cells(nb)
    sols = solutions(lesson)
    assert len(cells) >= 2, f"{lesson.name}: {len(cells)} exercise cells (tagged exercise-NN.k); at least 2"
    assert all(i.startswith(lesson.name[:2] + ".") for i in cells), sorted(cells)
    assert sorted(cells) == sorted(sols), (f"{lesson.name}: stubs {sorted(cells)} but solutions "
                                           f"{sorted(sols)} in notebooks/solutions/{lesson.stem}.py")
    for i, cell in cells.items():
        assert "..." in cell.source, f"{lesson.name} exercise {i}: the committed cell must hold a ... stub"
        assert not cell.outputs
        course.checker(i)  # registered in notebooks/exercises/exNN.py
        assert f'check("{i}"' in "\n".join(c.source for c in nb.cells), f"{lesson.name}: nothing checks {i}"


# interact/interactive draw into an Output widget, and so does any `with out:` block run while the cell runs
LIVE_OUTPUT = re.compile(r"\b(?:interactive|interact|interactive_output)\(|^[ \t]*with[ \t]+\w+[ \t]*:", re.M)


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_try_it_controls_need_no_output_widget(lesson):
    """Output captured by an Output widget makes nbclient write on the kernel's shell channel while it waits
    for the cell's reply, which can stall the run for the whole cell timeout: lessons draw their controls
    with course.try_it (the run-time count is in test_lesson_runs_with_solutions)."""
    nb = nbformat.read(lesson, as_version=4)
    found = [(i, m.group(0).strip()) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for m in LIVE_OUTPUT.finditer(cell.source)]
    assert not found, f"{lesson.name}: {found}: draw Try-it controls with course.try_it(draw, name=control, ...)"


def test_try_it_captures_text_then_displays():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display

    def draw(x):
        print("x is", x)
        display({"text/plain": "a picture", "image/png": "iVBORw0KGgo="}, raw=True)

    InteractiveShell.instance()  # display() publishes through a shell, as in a kernel
    try:
        outputs = course._captured(draw, {"x": 3})
    finally:
        InteractiveShell.clear_instance()
    assert outputs[0] == ({"text/plain": "x is 3\n"}, {})
    assert outputs[1][0]["image/png"] == "iVBORw0KGgo=" and len(outputs) == 2


def test_notebooks_folder_small():
    size = sum(p.stat().st_size for p in NOTEBOOKS.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in str(p))
    assert size <= 15 * 1024 * 1024, f"notebooks/ is {size / 2**20:.1f} MiB, more than 15"


REPLAY = """
import json
import course
_accepted = []
for _c in course.calls():
    for _w in course.wrong_answers(_c):
        if course.checker(_c.id)(_w, **_c.context)[0]:
            _accepted.append([_c.id, repr(_w)[:120]])
print("REPLAY " + json.dumps({"passed": sorted({c.id for c in course.calls() if c.ok}),
                              "failed": sorted({c.id for c in course.calls() if not c.ok}),
                              "accepted_wrong": _accepted}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_lesson_runs_with_solutions(lesson, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(lesson, as_version=4)
    cells, sols = exercise_cells(nb), solutions(lesson)
    if not cells:
        pytest.fail(f"{lesson.name} has no exercises yet")
    for i, cell in cells.items():
        cell.source = sols[i]
    nb.cells.append(nbformat.v4.new_code_cell(REPLAY))
    monkeypatch.setenv(course.STRICT_ENV, "1")  # the kernel inherits it: a failed check raises
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    # store_widget_state=True: nbclient's Output-widget hook raises KeyError without it (nothing is written).
    # Every write nbclient makes on the shell channel while it waits there for a cell's reply can swallow
    # the reply's wake-up (the run then idles for the whole cell timeout: lessons 01, 03 and 06 once took
    # 300 s longer). It writes only for output captured by an Output widget, so a lesson must cause none
    # (course.try_it draws Try-it controls without one): counted here, and the run is not retried.
    from nbclient import output_widget
    writes = []
    publish = output_widget.OutputWidget._publish_msg
    monkeypatch.setattr(output_widget.OutputWidget, "_publish_msg",
                        lambda self, *a, **k: (writes.append(self.comm_id), publish(self, *a, **k))[1])
    run = copy.deepcopy(nb)
    client = NotebookClient(run, timeout=120, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    assert not writes, (f"{lesson.name}: an Output widget captured output while the lesson ran, so nbclient "
                        f"wrote {len(writes)} messages on the shell channel mid-cell (each can stall the run for "
                        f"the cell timeout); draw Try-it controls with course.try_it")
    nb = run
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    report = json.loads(text.split("REPLAY ", 1)[1])
    assert not report["failed"], report
    assert sorted(cells) == [i for i in report["passed"] if i in cells], report
    assert not report["accepted_wrong"], f"checkers accepted wrong answers: {report['accepted_wrong']}"
