"""The fast tier is held at run time (tests/tiers.py): a test marked neither slow nor browser that starts a
process or reads a clock fails with a message naming the test and the mark to add, whether the call is in the
test, a helper it calls or a fixture it uses; library code reading clocks for itself is left alone, and tests
marked slow or browser may do both. And every test of the training workspace is marked training, the step
scripts/test.sh runs it in.

The tests here that need no second pytest run are themselves fast tests: each call below is refused before it
does anything (no process starts). The run of a folder of planted tests starts pytest, so it is marked slow."""

from __future__ import annotations

import ast
import asyncio
import logging
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import pytest

from .. import tiers
from ..helpers import ROOT


@pytest.mark.parametrize("clock", tiers.CLOCKS)
def test_a_fast_test_reading_a_clock_is_refused(request, clock):
    with tiers.refused() as info:
        getattr(time, clock)()
    message = str(info.value)
    assert request.node.nodeid in message and f"read a clock (time.{clock}, at tests/tools/test_tiers.py:" in message
    assert "@pytest.mark.slow" in message


def test_a_clock_imported_by_name_is_refused_too():
    from time import perf_counter  # bound after pytest started: the guarded one
    with tiers.refused():
        perf_counter()


def test_a_fast_test_starting_a_process_is_refused_before_it_starts(tmp_path, request):
    marker = tmp_path / "started"
    child = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    with tiers.refused() as info:
        subprocess.run(child, timeout=60)
    assert request.node.nodeid in str(info.value) and "started a process (subprocess.Popen" in str(info.value)
    with tiers.refused():
        subprocess.check_output(child, timeout=60)
    with tiers.refused():
        os.popen(" ".join(child))
    with tiers.refused():
        os.system(f"touch {marker}")
    with tiers.refused():
        multiprocessing.get_context("spawn").Process(target=print).start()

    async def shell():
        await asyncio.create_subprocess_exec(*child)
    with tiers.refused():
        asyncio.run(shell())
    assert not marker.exists()  # refused before anything ran


def test_fork_is_refused_before_it_forks():
    with tiers.refused() as info:
        pid = os.fork()
        if pid == 0:  # only if the guard let it through: the child leaves at once, and refused() fails the test
            os._exit(0)
        os.waitpid(pid, 0)
    assert "os.fork" in str(info.value)


def test_library_code_may_read_clocks_for_itself():
    logging.makeLogRecord({"msg": "x"})  # logging stamps each record with time.time_ns()
    assert tiers.GUARDS and tiers.GUARDS[-1].item is not None  # armed, and it said nothing


def test_the_guard_is_armed_for_this_fast_test_and_nothing_is_pending(request):
    guard = tiers.GUARDS[-1]
    assert guard.item is request.node and guard.pending == []


@pytest.mark.slow  # a slow test: the guard lets it read clocks
def test_a_slow_test_may_read_a_clock():
    assert time.monotonic() <= time.monotonic() and tiers.GUARDS[-1].item is None


PLANTED = {
    "conftest.py": """
        from pathlib import Path

        import pytest

        from tests import tiers


        def pytest_configure(config):
            tiers.register(config, [Path(__file__).parent])


        @pytest.fixture
        def timed():
            import time
            return time.perf_counter()  # a fixture reading a clock
    """,
    "helper.py": """
        import subprocess
        import sys


        def start_one():
            return subprocess.run([sys.executable, "-c", "pass"], timeout=120).returncode
    """,
    "test_planted.py": """
        import logging
        import subprocess
        import sys
        import threading
        import time

        import pytest

        from helper import start_one


        def test_fast_starts():
            subprocess.run([sys.executable, "-c", "pass"], timeout=120)


        def test_fast_helper_starts():
            start_one()


        def test_fast_reads():
            time.monotonic()


        def test_fast_fixture(timed):
            pass


        def test_fast_swallows():
            try:
                time.time()
            except Exception:
                pass


        def test_fast_library_clocks():
            threading.Event().wait(0.01)
            logging.getLogger("planted").warning("a record stamped with the time")


        @pytest.mark.slow
        def test_slow_does_both(timed):
            assert start_one() == 0 and time.monotonic() > 0


        @pytest.mark.browser
        def test_browser_does_both():
            assert start_one() == 0 and time.time() > 0


        @pytest.mark.slow
        @pytest.mark.parametrize("n", [1])
        def test_slow_parametrized(n):
            assert start_one() == 0
    """,
}


@pytest.mark.slow  # starts pytest
def test_a_run_of_planted_tests_fails_the_fast_ones_and_passes_the_marked(tmp_path):
    for name, text in PLANTED.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-W", "ignore",
                          "test_planted.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    out = run.stdout
    outcomes = {(line.split(" ")[0], line.split(" ")[1].removeprefix("test_planted.py::")) for line in out.splitlines()
                if line.startswith(("PASSED ", "FAILED ", "ERROR "))}
    assert outcomes == {
        ("FAILED", "test_fast_starts"), ("FAILED", "test_fast_helper_starts"), ("FAILED", "test_fast_reads"),
        ("ERROR", "test_fast_fixture"),  # refused while its fixture was set up
        ("PASSED", "test_fast_swallows"), ("ERROR", "test_fast_swallows"),  # its call passed; reported at teardown
        ("PASSED", "test_fast_library_clocks"),
        ("PASSED", "test_slow_does_both"), ("PASSED", "test_browser_does_both"),
        ("PASSED", "test_slow_parametrized[1]"),
    }, out + run.stderr
    assert ("test_planted.py::test_fast_starts is in the fast tier (not marked slow or browser) and started a process "
            "(subprocess.Popen, from test_planted.py:") in out
    assert "test_planted.py::test_fast_helper_starts is in the fast tier" in out and "from helper.py:" in out
    assert "read a clock (time.monotonic, at test_planted.py:" in out
    assert "test_planted.py::test_fast_fixture is in the fast tier" in out and "at conftest.py:" in out
    assert "the test caught this error; it still counts" in out
    assert out.count("Mark the test @pytest.mark.slow") >= 2 and "mark the test @pytest.mark.slow if it must" in out


def test_every_training_test_is_marked_training():
    """scripts/test.sh runs tests/training as its own step (-m training) and leaves it out of the others."""
    unmarked = []
    for path in sorted((ROOT / "tests" / "training").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marks = {a.attr for n in tree.body if isinstance(n, ast.Assign)
                        and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                        for a in ast.walk(n.value) if isinstance(a, ast.Attribute)}
        if "training" not in module_marks:
            unmarked.append(path.name)
    assert unmarked == []
