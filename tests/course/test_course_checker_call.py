"""The course checker's own call errors are errors, not "not yet" verdicts for the student."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))
from course import checks  # noqa: E402  (notebooks/course/checks.py, as the lessons import it)


def test_a_check_called_with_the_wrong_context_raises(monkeypatch, capsys):
    @checks.exercise("96.1", hint="double it")
    def _(answer, *, x):
        return checks.close(answer, 2 * x)

    monkeypatch.delenv(checks.STRICT_ENV, raising=False)
    for context in ({}, {"x": 1, "y": 2}, {"z": 1}):
        with pytest.raises(TypeError, match="not in your answer"):
            checks.check("96.1", 2, **context)
    assert "not yet" not in capsys.readouterr().out
    assert checks.check("96.1", 2, x=1) is True
    assert checks.check("96.1", None, x=1) is False  # a malformed answer is still "not yet"


def test_a_context_value_the_lesson_did_not_set_raises(monkeypatch, capsys):
    # tr=None once reached the checker, and its AttributeError was told to the
    # student as "not yet" with a hint
    class Holder:
        def get(self):
            return 3

    @checks.exercise("96.2", hint="read it from the holder")
    def _(answer, *, tr):
        return checks.close(answer, tr.get())

    monkeypatch.delenv(checks.STRICT_ENV, raising=False)
    with pytest.raises(TypeError, match=r"tr=None.*not a mistake in your answer"):
        checks.check("96.2", 3, tr=None)
    with pytest.raises(TypeError, match=r"tr= a int, which has no 'get'.*not in your answer"):
        checks.check("96.2", 3, tr=7)
    assert "not yet" not in capsys.readouterr().out
    assert checks.check("96.2", 3, tr=Holder()) is True
    assert checks.check("96.2", "x", tr=Holder()) is False  # the answer's own error is still "not yet"
