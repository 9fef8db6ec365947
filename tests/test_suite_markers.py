"""The fast suite keeps README's promise: `-m "not slow and not browser"` starts no fresh interpreter.

A test that runs `subprocess` or `sys.executable` is marked slow (or browser); nine were not, so the fast
suite started nine interpreters while README said it started none. Read from the tests' source (their
own bodies; a fixture that starts one would need its tests marked too).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def marks(node) -> set[str]:
    """The pytest.mark names a decorator list or a `pytestmark = ...` value names."""
    return {a.attr for a in ast.walk(node) if isinstance(a, ast.Attribute)}


def fresh_interpreters_in_the_fast_suite() -> list[str]:
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue  # this file names them without starting one
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = set().union(*(marks(n.value) for n in tree.body if isinstance(n, ast.Assign)
                               and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)))
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            if {"slow", "browser"} & (module | set().union(*(marks(d) for d in node.decorator_list))):
                continue
            body = ast.unparse(node)
            if "subprocess" in body or "sys.executable" in body:
                found.append(f"{path.name}::{node.name}")
    return found


def test_the_fast_suite_starts_no_fresh_interpreter():
    assert fresh_interpreters_in_the_fast_suite() == []


def test_the_scan_finds_an_unmarked_one(tmp_path, monkeypatch):
    (tmp_path / "test_x.py").write_text("import subprocess, sys\n\n\ndef test_a():\n"
                                        "    subprocess.run([sys.executable, '-c', 'pass'])\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["TESTS"]), "TESTS", tmp_path)
    assert fresh_interpreters_in_the_fast_suite() == ["test_x.py::test_a"]
