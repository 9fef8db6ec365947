"""The fast suite keeps README's promise: `-m "not slow and not browser"` starts no fresh interpreter, and it
reads no clock (a wall-clock limit is a benchmark's job, not a unit test's).

A test that runs `subprocess` or `sys.executable` is marked slow (or browser); nine were not, so the fast
suite started nine interpreters while README said it started none. Read from the tests' source (their
own bodies; a fixture that starts one would need its tests marked too).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def marks(node) -> set[str]:
    """The pytest.mark names a decorator list or a `pytestmark = ...` value names."""
    return {a.attr for a in ast.walk(node) if isinstance(a, ast.Attribute)}


def fast_tests():
    """(file name, test name, its source) for every test of the fast suite (neither slow nor browser)."""
    for path in sorted(TESTS.rglob("test_*.py")):
        if path.name == Path(__file__).name:
            continue  # this file names what it looks for without doing it
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = set().union(*(marks(n.value) for n in tree.body if isinstance(n, ast.Assign)
                               and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)))
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            if {"slow", "browser"} & (module | set().union(*(marks(d) for d in node.decorator_list))):
                continue
            yield path.name, node.name, ast.unparse(node)


def fresh_interpreters_in_the_fast_suite() -> list[str]:
    return [f"{file}::{test}" for file, test, body in fast_tests() if "subprocess" in body or "sys.executable" in body]


CLOCKS = ("time.monotonic", "time.perf_counter", "time.time(")


def clocks_in_the_fast_suite() -> list[str]:
    """Fast tests that read a clock: a limit on seconds fails on a busy machine and passes a slow change on a
    fast one; a unit test counts the work done (tests/helpers.peak_bytes, calls recorded), and speed is
    measured in benchmarks/ against a peer in the same run."""
    return [f"{file}::{test}" for file, test, body in fast_tests() if any(c in body for c in CLOCKS)]


def test_the_fast_suite_starts_no_fresh_interpreter():
    assert fresh_interpreters_in_the_fast_suite() == []


def test_the_fast_suite_times_nothing():
    assert clocks_in_the_fast_suite() == []


def test_the_scan_finds_an_unmarked_one(tmp_path, monkeypatch):
    (tmp_path / "test_x.py").write_text("import subprocess, sys\n\n\ndef test_a():\n"
                                        "    subprocess.run([sys.executable, '-c', 'pass'])\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["TESTS"]), "TESTS", tmp_path)
    assert fresh_interpreters_in_the_fast_suite() == ["test_x.py::test_a"]


def test_the_scan_finds_a_clock(tmp_path, monkeypatch):
    (tmp_path / "test_x.py").write_text("import time\n\n\ndef test_a():\n    t = time.monotonic()\n"
                                        "    assert time.monotonic() - t < 5\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["TESTS"]), "TESTS", tmp_path)
    assert clocks_in_the_fast_suite() == ["test_x.py::test_a"]
