"""The course: every lesson has the skeleton of STYLE.md habit 10, every exercise stub has a
solution, every lesson runs with its solutions filled in under strict checking, and every
checker rejects wrong answers (the replay of each `check` call with wrong ones).

    .venv/bin/python -m pytest tests/course/test_lessons.py -q                 # all lessons
    .venv/bin/python -m pytest tests/course/test_lessons.py -q -k 04_one_head   # one lesson

The solutions run takes as long as the lesson (each <= 90 s), so those tests are marked slow.
"""
from __future__ import annotations

import base64
import copy
import html
import json
import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = NOTEBOOKS / "solutions"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
TAG = re.compile(r"^exercise-(\d\d\.\d+)$")
BLOCK = re.compile(r"^# %% (\d\d\.\d+)\s*$", re.M)
HEADINGS = ["## Goal", "## The formula lines", "## Run", "## Look", "## Check", "## Exercises",
            "## What you computed", "## Next"]

sys.path.insert(0, str(NOTEBOOKS))
from course import checks, controls, pictures  # noqa: E402  (notebooks/course/, as the lessons import it)


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
    assert checks.close(np.ones((2, 3)), np.ones((2, 3)))[0]
    ok, detail = checks.close(np.ones((6, 64)), np.ones((6, 6)))
    assert not ok and detail == "shape (6, 64) but expected (6, 6)"
    ok, detail = checks.close(np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0]))
    assert not ok and "1 of 3 values differ" in detail and "index (2,)" in detail
    assert not checks.close("abc", 1.0)[0]
    assert not checks.close(np.array([1.0, np.nan]), np.array([1.0, 2.0]))[0]
    assert checks.close(np.array([0.0, -np.inf]), np.array([0.0, -np.inf]))[0]
    assert checks.close(2.0 + 1e-7, 2.0)[0] and not checks.close(2.1, 2.0)[0]


def test_equals_one_of_within():
    assert checks.equals(["a", "b"], ["a", "b"])[0] and not checks.equals(["a"], ["a", "b"])[0]
    assert checks.equals(3, 3)[0] and not checks.equals(True, 1)[0]
    assert checks.one_of(2, [1, 2])[0] and not checks.one_of(3, [1, 2])[0]
    assert checks.within(0.5, 0, 1)[0] and not checks.within(1.5, 0, 1)[0]
    assert not checks.within(np.ones(2), 0, 1)[0]


def test_check_prints_verdict_and_strict_raises(monkeypatch, capsys):
    @checks.exercise("98.1", hint="double it")
    def _(answer, *, x):
        return checks.close(answer, 2 * x)

    monkeypatch.delenv(checks.STRICT_ENV, raising=False)
    assert checks.check("98.1", ..., x=1) is False
    assert "replace the ... with your answer" in capsys.readouterr().out
    assert checks.check("98.1", 2, x=1) is True
    assert "✅ correct (98.1)" in capsys.readouterr().out
    assert checks.check("98.1", 3, x=1) is False
    out = capsys.readouterr().out
    assert "❌ not yet (98.1)" in out and "hint: double it" in out
    assert checks.check("98.1", None, x=1) is False  # a malformed answer is "not yet", not a crash
    monkeypatch.setenv(checks.STRICT_ENV, "1")
    with pytest.raises(AssertionError, match="not yet"):
        checks.check("98.1", 3, x=1)
    with pytest.raises(KeyError, match="lesson 97"):
        checks.check("97.1", 1)
    with pytest.raises(ValueError, match="NN.k"):
        checks.exercise("3.1", hint="")


def test_graded_hints_come_one_by_one(monkeypatch, capsys):
    @checks.exercise("98.2", hint=("the idea", "a partial step"))
    def _(answer):
        return checks.equals(answer, 6)

    monkeypatch.delenv(checks.STRICT_ENV, raising=False)
    checks.check("98.2", 5)
    out = capsys.readouterr().out
    assert "hint 1 of 2: the idea" in out and "partial" not in out
    checks.check("98.2", 4)
    assert "hint 2 of 2: a partial step" in capsys.readouterr().out
    checks.check("98.2", 3)
    assert "hint 2 of 2: a partial step" in capsys.readouterr().out  # the last hint stays
    with pytest.raises(ValueError, match="hint"):
        checks.exercise("98.3", hint=())


def test_type_slips_are_named():
    ok, detail = checks.equals("6", 6)
    assert not ok and "text (a str)" in detail and "whole number" in detail and "drop the quotes" in detail
    ok, detail = checks.equals("cls", 0)
    assert not ok and "'cls'" in detail and "int" in detail
    ok, detail = checks.close("0.5", 0.5)
    assert not ok and "text (a str)" in detail
    ok, detail = checks.equals(1, True)
    assert not ok and "bool" in detail
    assert checks.equals(np.int64(6), 6)[0] and checks.equals(6.0, 6.0)[0]


def test_complex_answers_and_numpy_bools():
    """A complex answer with the right real part must not pass; np.True_ is a bool."""
    assert not checks.close(2.0 + 1j, 2.0)[0]
    assert not checks.close(np.ones(3) + 0j, np.ones(3))[0]  # even a zero imaginary part: not a real array
    assert not checks.equals(6 + 0j, 6)[0] and not checks.equals(np.complex128(6), 6)[0]
    assert not checks.within(0.5 + 1j, 0, 1)[0] and not checks.within(True, 0, 1)[0]
    assert checks.equals(np.True_, True)[0] and checks.equals(np.bool_(False), False)[0]
    assert not checks.equals(np.True_, False)[0]
    assert checks.one_of(np.int64(2), [1, 2])[0] and not checks.one_of("2", [1, 2])[0]


def test_big_answers_are_not_echoed_nor_kept(monkeypatch, capsys):
    """A 10 MB answer is never echoed into the cell; only the last call of an exercise is kept."""
    @checks.exercise("98.4", hint="a short word")
    def _(answer):
        return checks.equals(answer, "yes")

    monkeypatch.delenv(checks.STRICT_ENV, raising=False)
    big = "x" * 10_000_000
    checks.check("98.4", big)
    out = capsys.readouterr().out
    assert len(out) < 2000, len(out)
    checks.check("98.4", [big] * 3)
    assert len(capsys.readouterr().out) < 2000
    ok, detail = checks.close(np.zeros(2_000_000), np.ones(3))
    assert not ok and len(detail) < 200
    for k in range(50):
        checks.check("98.4", f"no {k}")
    kept = [c for c in checks.calls() if c.id == "98.4"]
    assert len(kept) == 1 and kept[0].answer == "no 49"


def test_checkers_leak_no_runtime_warning(recwarn):
    @checks.exercise("98.5", hint="the mean")
    def _(answer):
        return checks.close(answer, np.array([1.0, np.inf]))

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning out of a checker fails here
        for wrong in ([np.inf, np.inf], [-np.inf, np.nan], [np.nan, np.nan], [1e308, np.inf], [-1e308, 1e308]):
            assert not checks.checker("98.5")(np.array(wrong))[0]
            assert not checks.close(np.array(wrong), np.array([1.0, np.inf]))[0]  # called directly too


def test_formula_rejects_typed_numbers():
    cases = [({"h": 2}, 4), ({"h": 3}, 9)]
    assert checks.formula(lambda h: h * h, cases, "f(h)")[0]
    ok, detail = checks.formula(4, cases, "f(h)")
    assert not ok and "def f(h)" in detail
    ok, detail = checks.formula(lambda h: 4, cases, "f(h)")
    assert not ok and "typed number" in detail
    ok, detail = checks.formula(lambda h: str(h * h), cases, "f(h)")
    assert not ok and "text (a str)" in detail


def test_sequences_are_alike_in_any_container():
    """Where only the order counts, a list, a tuple and an array are the same answer, 6.0 is 6."""
    for answer in ([1, 2, 3], (1, 2, 3), np.array([1, 2, 3]), [1.0, 2.0, 3.0], np.array([1, 2, 3], dtype=np.int32)):
        assert checks.sequence(answer, (1, 2, 3))[0], answer
    assert not checks.sequence([1, 3, 2], [1, 2, 3])[0] and not checks.sequence([1, 2], [1, 2, 3])[0]
    ok, detail = checks.sequence("1, 2, 3", [1, 2, 3])
    assert not ok and "text" in detail
    assert not checks.sequence([1.5, 2, 3], [1, 2, 3])[0] and not checks.sequence([True, 2, 3], [1, 2, 3])[0]
    assert checks.equals(6.0, 6)[0] and not checks.equals(6.5, 6)[0] and not checks.equals(1.0, True)[0]


def test_declared_mistakes_are_named(monkeypatch, capsys):
    """An answer that makes a declared mistake gets that mistake's sentence, not "N values differ"."""
    @checks.exercise("98.6", hint=("the idea", "which axis?"),
                     mistakes=lambda x: {"you halved it": x / 2, "you took the text": "two",
                                         "you used a tuple": (1, 2)})
    def _(answer, *, x):
        return checks.close(answer, x) if not isinstance(answer, (str, tuple)) else (False, "no")

    check = checks.checker("98.6")
    assert check(np.full(3, 0.5), x=np.ones(3)) == (False, "you halved it")
    assert check(np.full(3, 0.5 + 1e-6), x=np.ones(3))[1] == "you halved it"  # float32 arithmetic of the same mistake
    assert check(" Two", x=np.ones(3))[1] == "you took the text"
    assert check((1, 2), x=np.ones(3))[1] == "you used a tuple"
    assert "differ" in check(np.full(3, 0.7), x=np.ones(3))[1]
    assert check(np.ones(3), x=np.ones(3))[0]
    call = checks.Call("98.6", np.ones(3), {"x": np.ones(3)})
    assert set(checks.named_mistakes(call)) == {"you halved it", "you took the text", "you used a tuple"}
    assert any(isinstance(w, np.ndarray) and np.allclose(w, 0.5) for w in checks.wrong_answers(call))


def test_a_mistake_that_is_the_answer_here_is_left_out():
    """A named mistake whose value is the right answer in the exercise's context (exercise 18.1's
    signed maximum when the largest difference happens to be positive; 02.1's segment 0 on a one-segment sentence)
    is not a mistake there: it is left out, as is a second mistake with the same value, and never counted."""
    @checks.exercise("98.7", hint=("the idea", "which sign?"),
                     mistakes=lambda d: {"signed": d.max(), "mean": np.abs(d).mean(), "sum": np.abs(d).sum(),
                                         "sum again": np.abs(d).sum() + 1e-12})
    def _(answer, *, d):
        return checks.close(answer, np.abs(d).max(), atol=1e-12, rtol=1e-9)

    positive, negative = np.array([3.0, -1.0, 2.0]), np.array([-3.0, 1.0, 1.5])
    here = checks.Call("98.7", 3.0, {"d": positive}, True)
    assert set(checks.named_mistakes(here)) == {"mean", "sum"}
    left = checks.left_out_mistakes(here)
    assert set(left) == {"signed", "sum again"} and "accepts" in left["signed"][1] and "same answer" in left["sum again"][1]
    assert 3.0 not in checks.wrong_answers(here)
    there = checks.Call("98.7", 3.0, {"d": negative}, True)
    assert set(checks.named_mistakes(there)) == {"signed", "mean", "sum"}
    assert checks.checker("98.7")(1.5, d=negative) == (False, "signed")


def test_every_write_exercise_declares_its_mistakes():
    """Every write exercise (not a prediction, not open-ended) declares the mistakes it names;
    the replay in test_lesson_runs_with_solutions holds each sentence to its answer and counts at least three."""
    for lesson in LESSONS:
        for ex in lesson_exercises(lesson):
            if not (ex.prediction or ex.open_ended):
                assert ex.mistakes is not None, f"{lesson.name} {ex.id}: no mistakes=... declared"


BLANK = re.compile(r"_{3,}")
# a blank inside code: after an operator, an opening bracket or a comma, before a closing bracket, or in front of an
# attribute, an index or a call (`___.T`, `___[0]`, `___(x)`)
CODE_BLANK = re.compile(r"[=+\-*/@(\[,]\s*_{3,}|_{3,}\s*[)\]]|_{3,}[.\[(]\w")
# the sentences of a hint: a blank may only sit in one that asks (a recipe with a number left out is not a question)
SENTENCE = re.compile(r"(?<=[?;!])\s*|(?<=\.)\s+")


def blanked_lines(hint: str, lines: list[str], least: int = 8) -> list[str]:
    """The solution lines (whitespace dropped, as solution_lines gives them) that the hint writes out with a blank
    (___) in place of a piece: around each blank, the longest stretch of the hint on its left and on its right that
    a line holds with something in the blank's place; a line is blanked when those stretches add up to `least`
    characters or more (`offset=___)` against `np.diagonal(sims,offset=k).mean()`)."""
    text = re.sub(r"\s+", "", hint)
    found = []
    for m in BLANK.finditer(text):
        left, right = text[max(0, m.start() - 40):m.start()], text[m.end():m.end() + 40]
        for line in lines:
            best = 0
            for k in range(len(left), -1, -1):
                for j in range(len(right), -1, -1):
                    if k + j <= best or k + j < least:
                        break
                    if re.search(re.escape(left[len(left) - k:]) + r".{1,40}?" + re.escape(right[:j]), line):
                        best = k + j
                        break
            if best and line not in found:
                found.append(line)
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_second_hint_asks(lesson):
    """Hint 2 asks a question or names a step (STYLE.md habit 24); it is never a
    solution line with one piece blanked (`tanh(row W + ___)`), nor a recipe that leaves nothing to the student.
    So it holds a question mark, no blank inside code, and no blank that a solution line fills."""
    lines = solution_lines(lesson)
    bad = [(ex.id, *fault) for ex in lesson_exercises(lesson) if len(ex.hints) >= 2
           for fault in second_hint_faults(ex.hints[1], lines)]
    assert not bad, f"{lesson.name}: second hints that blank the answer or ask nothing: {bad}"


def second_hint_faults(hint: str, lines: list[str]) -> list[tuple[str, str]]:
    """What makes `hint` a bad second hint: it asks nothing, it is code with a blank, a statement (a recipe) holds a
    blank, or a solution line is written out with a blank."""
    bad = []
    if "?" not in hint:
        bad.append(("asks nothing (no question mark)", hint))
    if CODE_BLANK.search(hint):
        bad.append(("a blank inside code", CODE_BLANK.search(hint).group(0)))
    for sentence in SENTENCE.split(hint):
        if BLANK.search(sentence) and not sentence.rstrip().endswith("?"):
            bad.append(("a recipe with a blank, not a question", sentence.strip()))
    for line in blanked_lines(hint, lines):
        bad.append(("a solution line with a blank", line))
    return bad


def test_a_blanked_solution_line_is_caught():
    """The rule above can fail: a solution line with one piece blanked is caught however it is spaced, a question in
    words is not."""
    lines = ["np.array([np.diagonal(sims,offset=k).mean()forkinrange(1,33)])", "np.tanh(Z_L[0]@W+b)"]
    assert blanked_lines("which diagonal holds them (np.diagonal(sims, offset=___))?", lines) == [lines[0]]
    assert blanked_lines("and then np.tanh( Z_L[0] @ W + ___ )", lines) == [lines[1]]
    assert not blanked_lines("which diagonal holds the pairs k apart, and how many pairs has it?", lines)
    assert not blanked_lines("what is added after the product: the ___?", lines)
    for code in ("tanh(row W + ___)", "np.diagonal(P, offset=___)", "keepdims=___", "[n, ___]", "n * ___"):
        assert CODE_BLANK.search(code), code
    assert not CODE_BLANK.search("with query i's ___? and the ___ queries")
    # code with a blank, and a recipe with one number left out (both once passed as second hints)
    code = "with x and dy flattened to rows, which product of ___.T and ___ has W's shape?"
    recipe = "where does the first [SEP] sit (list.index)? then the list is ___ zeros followed by ones for the rest"
    assert [f[0] for f in second_hint_faults(code, [])] == ["a blank inside code"]
    assert [f[0] for f in second_hint_faults(recipe, [])] == ["a recipe with a blank, not a question"]
    assert not second_hint_faults("which product of x and dy, one of them transposed, has W's shape [k, m]?", [])
    assert not second_hint_faults("what is d_k here: 64, 32 or ___? and which goes first?", [])
    assert second_hint_faults("the answer is x @ W.", [])  # asks nothing


def test_close_names_known_mistakes():
    ok, detail = checks.close(np.full(3, 0.5), np.ones(3), mistakes={"you halved it": np.full(3, 0.5)})
    assert not ok and detail == "you halved it"
    ok, detail = checks.close(np.full(3, 0.7), np.ones(3), mistakes={"you halved it": np.full(3, 0.5)})
    assert not ok and "differ" in detail


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
        checks.checker(i)  # registered in notebooks/exercises/exNN.py
        assert f'check("{i}"' in "\n".join(c.source for c in nb.cells), f"{lesson.name}: nothing checks {i}"


def solution_lines(lesson: Path) -> list[str]:
    """The code of each solution line (comments dropped) and, for an assignment, its right-hand side:
    what a hint must not hold. Whitespace is dropped, so spacing cannot hide a copy."""
    out = []
    for block in solutions(lesson).values():
        for line in block.splitlines():
            code = re.sub(r"\s+#.*$|^\s*#.*$", "", line).strip().rstrip("\\").strip()
            m = re.match(r"^[\w\[\]'\", .]+?\s*(?:[-+*/]?=)(?!=)\s*(.+)$", code)
            for piece in (code, m.group(1) if m else ""):
                piece = re.sub(r"\s+", "", piece)
                if len(piece) >= 10 and not re.fullmatch(r"[\w.]+", piece):  # `n = 6`, `c = base.config`: no solution
                    out.append(piece)
    return out


def lesson_exercises(lesson: Path) -> list:
    nb = nbformat.read(lesson, as_version=4)
    return [checks._lookup(i) for i in sorted(exercise_cells(nb))]


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_hints_do_not_give_the_solution_line(lesson):
    """A hint names the idea, then a partial step; the full line lives only in solutions/."""
    lines = solution_lines(lesson)
    found = [(ex.id, line) for ex in lesson_exercises(lesson) for hint in ex.hints for line in lines
             if line in re.sub(r"\s+", "", hint)]
    assert not found, f"{lesson.name}: hints that hold a solution's code line: {found}"
    single = [ex.id for ex in lesson_exercises(lesson) if len(ex.hints) < 2 and not ex.prediction]
    assert not single, f"{lesson.name}: exercises with one hint (give the idea, then a partial step): {single}"


def test_solution_lines_are_found_in_hints():
    """The rule above can fail: a hint copied from a solution is caught, with other spacing too."""
    lesson = NOTEBOOKS / "04_one_head.ipynb"
    line = next(l for l in solutions(lesson)["04.2"].splitlines() if "@" in l)
    rhs = line.split("=", 1)[1]
    assert re.sub(r"\s+", "", rhs.replace(" ", "  ")) in solution_lines(lesson)


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_predictions_are_marked(lesson):
    """A stub that asks for a prediction is registered with prediction=True, so the solutions run checks
    that no number printed above it passes (test_lesson_runs_with_solutions)."""
    nb = nbformat.read(lesson, as_version=4)
    asks = {i for i, cell in exercise_cells(nb).items() if re.search(r"predict", cell.source, re.I)}
    marked = {ex.id for ex in lesson_exercises(lesson) if ex.prediction}
    assert asks == marked, f"{lesson.name}: stubs that ask to predict {sorted(asks)}, marked {sorted(marked)}"


def test_readme_prints_no_solution():
    text = re.sub(r"\s+", "", (NOTEBOOKS / "README.md").read_text())
    found = [(lesson.stem, line) for lesson in LESSONS
             for line in solution_lines(lesson) if line in text]
    assert not found, f"notebooks/README.md prints solution lines: {found}"


TUPLE = re.compile(r"\((\d+(?:, ?\d+)+)\)")  # a shape, (4, 6, 12, 18, 18)
NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])", re.I)


def shown_text(page) -> str:
    """The text an HTML output shows: outside its tags, scripts and styles (a saved explorer's app.js and CSS hold
    numbers no student reads), with a framed page's own (its srcdoc) shown text added."""
    page = "".join(page) if isinstance(page, list) else page
    framed = [shown_text(html.unescape(m)) for m in re.findall(r'srcdoc="([^"]*)"', page)]
    page = re.sub(r"<(script|style)\b.*?</\1\s*>", " ", page, flags=re.S | re.I)
    return " ".join([html.unescape(re.sub(r"<[^>]*>", " ", page)), *framed])


def numbers_above(nb, cell_id: str) -> list:
    """Every number and tuple of whole numbers (a shape) a student sees above the stub of `cell_id`:
    in markdown and in stored outputs."""
    seen = []
    for cell in nb.cells:
        if f"exercise-{cell_id}" in cell.metadata.get("tags", []):
            break
        texts = [cell.source] if cell.cell_type == "markdown" else []
        for o in cell.get("outputs", []):
            texts.append(o.get("text", ""))
            data = o.get("data", {})
            texts.append(data.get("text/plain", "") if "text/html" not in data else shown_text(data["text/html"]))
            texts.append(data.get("text/markdown", ""))
        for text in texts:
            text = "".join(text) if isinstance(text, list) else text
            # bare one- and two-digit whole numbers are labels (layer 5, head 11, exercise 3), left out
            seen += [float(m.replace(",", "")) for m in NUMBER.findall(text)
                     if re.search(r"[.,eE]", m) or len(m.lstrip("-")) >= 3]
            seen += [tuple(int(x) for x in m.split(",")) for m in TUPLE.findall(text)]
    numbers = sorted({x for x in seen if isinstance(x, float)})
    return numbers + sorted({x for x in seen if isinstance(x, tuple)})


def test_numbers_above_a_stub_are_those_an_output_shows():
    """A number in an HTML output's text (or a saved page's, framed in srcdoc) counts as shown above a stub; one in
    its scripts, styles or tag attributes does not (a saved explorer's app.js is full of them)."""
    page = ('<div style="width: 0.75em">shown 0.289</div><script>const w = 0.3;</script>'
            '<iframe srcdoc="&lt;p&gt;framed 1.25&lt;/p&gt;&lt;style&gt;a { opacity: 0.35 }&lt;/style&gt;"></iframe>')
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("display_data", data={"text/html": page})]),
        nbformat.v4.new_code_cell("my_prediction = ...", metadata={"tags": ["exercise-99.1"]})])
    assert numbers_above(nb, "99.1") == [0.289, 1.25]


# A is the attention map (STYLE.md habit 16); the number of heads is n_h (schema.SYMBOLS)
HEADS_AS_A = re.compile(r"\bL, ?A\b|\bA ?= ?[\w.]*num_heads\b|\bA=\d+|\bA, n, n\]|\(B, L, A\b|0 ?\.\. ?A\b|"
                        r"\bmax=A\b|\bA - 1\b|\bheads? 0\.\.A|\[B, ?A\b|\\cdot A\b")


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_no_A_for_the_number_of_heads(lesson):
    """No code, prose, repr or output of a lesson writes A for the number of heads."""
    nb = nbformat.read(lesson, as_version=4)
    texts = [c.source for c in nb.cells]
    texts += ["".join(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
              for c in nb.cells for o in c.get("outputs", [])]
    sol = SOLUTIONS / f"{lesson.stem}.py"
    texts += [sol.read_text()] if sol.exists() else []
    found = sorted({m.group(0) for t in texts for m in HEADS_AS_A.finditer(t)})
    assert not found, f"{lesson.name} writes A for the number of heads: {found}; write n_h"


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_symbol_table_as_markdown(lesson):
    """Lesson 00 carries the course's symbol table as markdown (GitHub shows
    it), today's (course.pictures.symbol_table(), from schema.SYMBOLS); every other lesson links to it instead of repeating
    its rows, and every lesson names n_h for the number of heads."""
    nb = nbformat.read(lesson, as_version=4)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    if lesson.name.startswith("00_"):
        assert any(pictures.symbol_table() in t for t in markdown), \
            f"{lesson.name}: no markdown cell holds course.pictures.symbol_table() (schema.SYMBOLS) as it is today"
    else:
        assert not any("| symbol | what it is |" in t for t in markdown), f"{lesson.name} repeats the symbol table"
        assert any("(00_quickstart.ipynb)" in t and "symbols" in t for t in markdown), \
            f"{lesson.name}: no link to lesson 00's table of symbols"
    assert any("n_h" in t for t in markdown), f"{lesson.name}: its symbols do not name n_h, the number of heads"


def test_flow_picture_is_drawn_from_the_steps():
    """Lesson 00's data-flow picture has a box for every step of schema.STEPS a BERT runs, and
    every lesson's "Where this lesson is" picture is a strip of it."""
    from bertviz_lite import BertConfig, schema

    keys = {st.key for st in schema.STEPS if not st.optional}
    assert keys - {"embed.proj"} <= set(pictures._FLOW)
    fig = pictures.flow_picture(BertConfig(), highlight=["attn.probs"])
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {pictures.LAYER_PREFIX + "attn.probs", "embed.ln", "pooler.out", "mlm.logits"} <= texts
    strip = pictures.flow_picture(BertConfig(), highlight=["attn.probs"], strip=True)
    assert strip.get_figheight() < fig.get_figheight() / 3
    with pytest.raises(ValueError, match="no step"):
        pictures.flow_picture(BertConfig(), highlight=["attn.nope"])
    for lesson in LESSONS[1:]:
        nb = nbformat.read(lesson, as_version=4)
        assert any(c.source.startswith("# PICTURE") and "flow_picture(" in c.source and "strip=True" in c.source
                   for c in nb.cells), f"{lesson.name}: no strip of the flow picture"


BERT_BASE_STRIPS = {"09", "17"}  # lessons that run BERT-base's shapes (09 counts them; 17 a family's config)


def test_strips_are_drawn_at_the_lessons_model():
    """A lesson's strip is drawn from the config of the model it runs (MiniLM: 6 layers, d_k = 32),
    not BertConfig(); a strip shows no label cut by its edge (every text lies inside the picture) and the labels on
    arrows sit on a white box, so no line runs through them."""
    for lesson in LESSONS[1:]:
        if lesson.name[:2] in BERT_BASE_STRIPS:
            continue
        nb = nbformat.read(lesson, as_version=4)
        strips = [c.source for c in nb.cells if c.source.startswith("# PICTURE") and "strip=True" in c.source]
        assert strips and all('model_config("minilm")' in s for s in strips), f"{lesson.name}: {strips}"
    config = pictures.model_config("minilm")
    assert (config.num_layers, config.head_size) == (6, 32)
    for highlight in (["attn.q", "attn.k", "attn.v", "attn.scores", "attn.probs", "attn.context"], ["pooler.out"],
                      ["attn.resid", "attn.ln", "ffn.resid", "ffn.ln"], ["embed.token", "attn.scores"]):
        fig = pictures.flow_picture(config, highlight=highlight, strip=True)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        renderer = FigureCanvasAgg(fig).get_renderer()
        box = fig.axes[0].get_window_extent(renderer)
        texts = [t for t in fig.axes[0].texts if t.get_text()]
        out = [t.get_text() for t in texts if not box.contains(*t.get_window_extent(renderer).min) or
               not box.contains(*t.get_window_extent(renderer).max)]
        assert not out, f"strip {highlight}: labels cut by the picture's edge: {out}"
        joined = " ".join(t.get_text() for t in texts)
        assert "d_k = 64" not in joined and ("split into" not in joined or "12 heads of d_k = 32" in joined), joined
        assert "L = 12" not in joined
    full = pictures.flow_picture(config, highlight=["attn.probs"])
    on_lines = [t for t in full.axes[0].texts if t.get_text() in ("[CLS] row", "every row", "layer.0 reads Z_0")]
    assert len(on_lines) == 3 and all(t.get_bbox_patch() is not None for t in on_lines)


def test_vectors_picture_draws_rows_heads_and_the_concatenation():
    """Per-token vectors as coloured rows from trace keys, the split into heads and the
    concatenation; a key drawn the wrong way is refused by name."""
    import bertviz_lite as bv

    model = bv.load("random", seed=0, config={"num_layers": 1, "hidden_size": 32, "num_heads": 4, "ffn_size": 64},
                    backend="numpy")
    tr = model.trace("the cat sat")
    fig = pictures.vectors_picture(tr, ["embed.ln", ("attn.q", "joined"), "attn.q", ("attn.concat", "joined")], layer=0)
    assert len(fig.axes) == 4
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("embed.ln  [5 x 32]") and "split into 4 heads" in titles[2], titles
    assert "[4 x 5 x 8] put side by side: [5 x 32]" in titles[1] and "[5 x 32]: the heads' blocks of d_k = 8" in titles[3]
    heads = [t.get_text() for t in fig.axes[2].texts]
    assert heads == [f"head {h}" for h in range(4)]
    assert [tick.get_text() for tick in fig.axes[0].get_yticklabels()] == list(tr.tokens)
    images = fig.axes[3].get_images()
    assert len(images) == 4 and np.allclose(np.concatenate([im.get_array() for im in images], axis=1),
                                            tr.get("attn.concat", layer=0), atol=1e-6)
    with pytest.raises(ValueError, match="vectors_picture: embed.ln is 2-d"):
        pictures.vectors_picture(tr, [("embed.ln", "heads")])


def test_lessons_show_their_figures_through_the_course():
    """No lesson saves a figure itself (its own png(mfig), a savefig into a BytesIO for a Try-it's
    widgets.Image): course.pictures.picture shows a Figure and png_bytes gives its PNG, both saved tight."""
    own = [lesson.name for lesson in LESSONS
           if any(re.search(r"def png\(|\.savefig\(", c.source) for c in nbformat.read(lesson, as_version=4).cells)]
    assert not own, f"lessons that save their own figures: {own}; use course.pictures.picture(fig) or png_bytes(fig)"


# interact/interactive draw into an Output widget, and so does any `with out:` block run while the cell runs
LIVE_OUTPUT = re.compile(r"\b(?:interactive|interact|interactive_output)\(|^[ \t]*with[ \t]+\w+[ \t]*:", re.M)


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_try_it_controls_need_no_output_widget(lesson):
    """Output captured by an Output widget makes nbclient write on the kernel's shell channel while it waits
    for the cell's reply, which can stall the run for the whole cell timeout: lessons draw their controls
    with course.controls.try_it (the run-time count is in test_lesson_runs_with_solutions)."""
    nb = nbformat.read(lesson, as_version=4)
    found = [(i, m.group(0).strip()) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             for m in LIVE_OUTPUT.finditer(cell.source)]
    assert not found, f"{lesson.name}: {found}: draw Try-it controls with course.controls.try_it(draw, name=control, ...)"


def test_try_it_captures_text_then_displays():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display

    def draw(x):
        print("x is", x)
        display({"text/plain": "a picture", "image/png": "iVBORw0KGgo="}, raw=True)

    InteractiveShell.instance()  # display() publishes through a shell, as in a kernel
    try:
        outputs = controls._captured(draw, {"x": 3})
    finally:
        InteractiveShell.clear_instance()
    assert outputs[0] == ({"text/plain": "x is 3\n"}, {})
    assert outputs[1][0]["image/png"] == "iVBORw0KGgo=" and len(outputs) == 2


def test_notebooks_folder_small():
    size = sum(p.stat().st_size for p in NOTEBOOKS.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in str(p))
    assert size <= 15 * 1024 * 1024, f"notebooks/ is {size / 2**20:.1f} MiB, more than 15"


REPLAY = """
import json
from course import checks
_accepted, _spoiled, _unnamed, _few = [], [], [], []
for _c in checks.calls():
    for _w in checks.wrong_answers(_c):
        if checks.checker(_c.id)(_w, **_c.context)[0]:
            _accepted.append([_c.id, repr(_w)[:120]])
    _ex, _named = checks._lookup(_c.id), checks.named_mistakes(_c)
    for _s, (_w, _why) in checks.left_out_mistakes(_c).items():  # left out as accepted: only the right answer itself
        if "accepts" in _why and not checks._same(_w, _c.answer):
            _accepted.append([_c.id, _s[:60], repr(_w)[:120]])
    if not (_ex.prediction or _ex.open_ended) and len(_named) < 3:
        _few.append([_c.id, len(_named)])
    for _s, _w in _named.items():  # each mistake the exercise names is answered with its own sentence
        _ok, _d = checks.checker(_c.id)(_w, **_c.context)
        if _ok or _s[:300] not in _d:
            _unnamed.append([_c.id, _s[:80], _d[:120]])
    if _ex.prediction:  # a number printed above a prediction's stub must not pass it
        _spoiled += [[_c.id, _x] for _x in _ABOVE.get(_c.id, [])
                     if checks.checker(_c.id)(tuple(_x) if isinstance(_x, list) else _x, **_c.context)[0]]
print("REPLAY " + json.dumps({"passed": sorted({c.id for c in checks.calls() if c.ok}),
                              "failed": sorted({c.id for c in checks.calls() if not c.ok}),
                              "accepted_wrong": _accepted, "spoiled": _spoiled, "unnamed": _unnamed, "few": _few}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("threads", [2, 1], ids=["2-threads", "1-thread"])
@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_lesson_runs_with_solutions(lesson, threads, monkeypatch):
    """Every lesson with its solutions, under strict checking, then every check replayed with wrong answers and
    with each mistake it names. Twice: with 2 BLAS threads and with 1, since float noise (the sign of a 1e-6
    difference, which of two near-equal entries is largest) changes with the thread count and the BLAS build,
    and a named mistake that equals the answer on one machine is accepted there."""
    from nbclient import NotebookClient

    nb = nbformat.read(lesson, as_version=4)
    cells, sols = exercise_cells(nb), solutions(lesson)
    if not cells:
        pytest.fail(f"{lesson.name} has no exercises yet")
    above = {i: numbers_above(nb, i) for i in cells}  # what the committed lesson shows above each stub
    for i, cell in cells.items():
        cell.source = sols[i]
    nb.cells.append(nbformat.v4.new_code_cell(f"_ABOVE = {json.dumps(above)}\n" + REPLAY))
    monkeypatch.setenv(checks.STRICT_ENV, "1")  # the kernel inherits it: a failed check raises
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, str(threads))  # the kernel inherits them: BLAS starts with this many threads
    # no fixed count (conftest's, for bit-for-bit comparisons): a replay compares no bits, and on a busy machine the
    # thread policy must give BLAS fewer threads (two threads on cores others hold took a replay from 33 s to 190 s)
    monkeypatch.delenv("BERTVIZ_LITE_THREADS", raising=False)
    # store_widget_state=True: nbclient's Output-widget hook raises KeyError without it (nothing is written).
    # Every write nbclient makes on the shell channel while it waits there for a cell's reply can swallow
    # the reply's wake-up (the run then idles for the whole cell timeout: the tokens, one-head and feed-forward lessons once took
    # 300 s longer). It writes only for output captured by an Output widget, so a lesson must cause none
    # (course.controls.try_it draws Try-it controls without one): counted here, and the run is not retried.
    from nbclient import output_widget
    writes = []
    publish = output_widget.OutputWidget._publish_msg
    monkeypatch.setattr(output_widget.OutputWidget, "_publish_msg",
                        lambda self, *a, **k: (writes.append(self.comm_id), publish(self, *a, **k))[1])
    run = copy.deepcopy(nb)
    # the timeout guards against a hung kernel, not a slow machine: a replay cell took 190 s beside a second test run
    client = NotebookClient(run, timeout=600, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    assert not writes, (f"{lesson.name}: an Output widget captured output while the lesson ran, so nbclient "
                        f"wrote {len(writes)} messages on the shell channel mid-cell (each can stall the run for "
                        f"the cell timeout); draw Try-it controls with course.controls.try_it")
    nb = run
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    report = json.loads(text.split("REPLAY ", 1)[1])
    assert not report["failed"], report
    assert sorted(cells) == [i for i in report["passed"] if i in cells], report
    assert not report["accepted_wrong"], f"checkers accepted wrong answers: {report['accepted_wrong']}"
    assert not report["unnamed"], f"declared mistakes answered without their sentence: {report['unnamed']}"
    assert not report["few"], f"write exercises naming fewer than 3 mistakes: {report['few']}"
    spoiled = report["spoiled"]
    assert not spoiled, (f"{lesson.name}: numbers shown above a prediction's stub (in markdown or a stored output) "
                         f"pass its checker, so the prediction is spoiled: {spoiled}")


def refresh_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("refresh_notebooks", ROOT / "scripts" / "refresh_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_refresh_script_writes_the_kernelspec_jupyterlab_writes():
    # JupyterLab writes the running kernel's spec into the notebook on open: ipykernel's python3
    ipykernel = pytest.importorskip("ipykernel.kernelspec")
    spec = ipykernel.get_kernel_dict()
    want = {"display_name": spec["display_name"], "language": spec["language"], "name": "python3"}
    assert refresh_script().KERNELSPEC == want


@pytest.mark.parametrize("lesson", LESSONS, ids=ids(LESSONS))
def test_lesson_is_stored_as_jupyterlab_saves_it(lesson):
    # opened in JupyterLab, a lesson stored otherwise is marked modified at once (closing it asks to save):
    # the kernelspec JupyterLab writes on open, nbformat 4.5 with cell ids, nbformat's serialisation
    # (tests/course/test_lessons_browser.py opens lesson 12 and checks it is not marked modified)
    text = lesson.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    assert nb.metadata.kernelspec == refresh_script().KERNELSPEC, "store it: scripts/refresh_notebooks.py --form-only"
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5) and all("id" in c for c in nb.cells)
    assert "language_info" in nb.metadata  # JupyterLab writes it too: leaving it out marks the lesson modified
    assert text == nbformat.writes(nb) + "\n", "store it: scripts/refresh_notebooks.py --form-only"
