"""The fast tier, held at run time: a test not marked slow or browser that starts a process or reads a clock
fails, and the message names the test, the call, the line that made it, and the mark to add.

Why: the fast tier (`pytest -m "not slow and not browser"`) is the one run after every edit. A fresh interpreter
costs one to several seconds of import on a busy machine, and a clock makes a test's verdict depend on the load
beside it (a limit on seconds fails on a busy machine and passes a slow change on a quiet one). A unit test
counts the work done instead (tests/helpers.peak_bytes, calls recorded); speed is measured in benchmarks/.

What is caught, while a fast test is set up, run and torn down (its fixtures of every scope included):

- starting a process: subprocess.Popen (so run, call, check_output, os.popen and asyncio's subprocesses, which
  all make one), os.system, os.fork, os.forkpty, os.posix_spawn(p) (and os.spawn*, which fork), and
  multiprocessing's Process.start (its pools and concurrent.futures' process pool start those). Caught when
  test code is anywhere on the calling thread's stack: a library the test called starts the process on the
  test's behalf, and the process costs the same. The call is refused before anything starts.
- reading a clock: time.time, time.monotonic, time.perf_counter, time.process_time, time.thread_time and their
  _ns forms. Caught only when the line that reads it is test code. The standard library, site-packages,
  bertviz_lite and the repository's scripts/ read clocks for their own purposes (threading's timed waits,
  logging's record times, pytest's durations, hypothesis' deadlines, the cluster's no-workers timeout in
  bertviz_lite.corpus, the seconds a training script reports for its run); a test that calls them times nothing
  itself, and what a program does with its own clock is part of what it does.

Test code: files under the folders the guard is given (this repository's tests/: the tests, their conftest and
fixtures, tests/helpers.py). The clocks and process starters are replaced once, when pytest starts (so `from time import
perf_counter` in a test module gets the guarded one); the guard is armed only around a fast test. A refusal a
test swallows (`except Exception`) is reported again when the test is torn down.

What it cannot see: a clock read from C (datetime.now(), a C extension's timer) and a name bound to the real
function before pytest started (the standard library's own `from time import monotonic`, which is library code
anyway).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ALLOWED_TIERS = ("slow", "browser")  # the marks whose tests may start processes and read clocks

PROCESS_STARTERS = [  # (owner, attribute, the name shown in the message)
    (subprocess.Popen, "_execute_child", "subprocess.Popen"),
    (os, "system", "os.system"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (multiprocessing.process.BaseProcess, "start", "multiprocessing Process.start"),
]
CLOCKS = ["time", "monotonic", "perf_counter", "process_time", "thread_time"]
CLOCKS += [f"{name}_ns" for name in CLOCKS]

HERE = os.path.realpath(__file__)


class FastTierError(Exception):
    """A fast test (marked neither slow nor browser) started a process or read a clock."""


class FastTierGuard:
    """A pytest plugin: arms the guard around each fast test's setup, call and teardown."""

    def __init__(self, code_dirs):
        self.code_dirs = tuple(os.path.realpath(d) + os.sep for d in code_dirs)
        self.item = None  # the fast test running now, or None
        self.pending: list[FastTierError] = []  # refusals not yet reported by the phase that raised them
        self.saved: list[tuple[object, str, object]] = []
        self._is_code: dict[str, bool] = {}  # filename -> under a test folder (realpath is a system call)
        self._is_here: dict[str, bool] = {}

    # ---- what is test code --------------------------------------------------------------------------------

    def is_test_code(self, filename: str) -> bool:
        known = self._is_code.get(filename)
        if known is None:
            path = os.path.realpath(filename)
            known = self._is_code[filename] = path != HERE and path.startswith(self.code_dirs)
        return known

    def test_code_on_stack(self, frame):
        """The innermost frame of test code on the stack from `frame` outwards, or None."""
        while frame is not None:
            if self.is_test_code(frame.f_code.co_filename):
                return frame
            frame = frame.f_back
        return None

    def is_here(self, filename: str) -> bool:
        """Whether a frame is this file's own (a guard's wrapper, when a nested pytest run installs a second)."""
        here = self._is_here.get(filename)
        if here is None:
            here = self._is_here[filename] = os.path.realpath(filename) == HERE
        return here

    def first_outside_here(self, frame):
        while frame is not None and self.is_here(frame.f_code.co_filename):
            frame = frame.f_back
        return frame

    # ---- the refusal --------------------------------------------------------------------------------------

    def refuse(self, what: str, call: str, frame) -> FastTierError:
        item = self.item
        where = f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"
        if what == "process":
            why = (f"started a process ({call}, from {where}); the fast tier starts none. Mark the test "
                   "@pytest.mark.slow (a fresh interpreter costs seconds), or do the work in this process.")
        else:
            why = (f"read a clock ({call}, at {where}); the fast tier reads none: a limit on seconds passes or "
                   "fails with the machine's load. Count the work instead (tests/helpers.peak_bytes, calls "
                   "recorded), or mark the test @pytest.mark.slow if it must time something.")
        err = FastTierError(f"{item.nodeid} is in the fast tier (not marked {' or '.join(ALLOWED_TIERS)}) and {why}")
        self.pending.append(err)
        return err

    def guard_process(self, call: str, original):
        def start(*args, **kwargs):
            if self.item is not None:
                frame = self.test_code_on_stack(sys._getframe(1))
                if frame is not None:
                    raise self.refuse("process", call, frame)
            return original(*args, **kwargs)
        start.__wrapped__ = original
        return start

    def guard_clock(self, call: str, original):
        def read(*args, **kwargs):
            if self.item is not None:
                frame = self.first_outside_here(sys._getframe(1))
                if frame is not None and self.is_test_code(frame.f_code.co_filename):
                    raise self.refuse("clock", call, frame)
            return original(*args, **kwargs)
        read.__wrapped__ = original
        return read

    # ---- installing, arming -------------------------------------------------------------------------------

    def install(self):
        for owner, name, call in PROCESS_STARTERS:
            if hasattr(owner, name):
                original = getattr(owner, name)
                self.saved.append((owner, name, original))
                setattr(owner, name, self.guard_process(call, original))
        for name in CLOCKS:
            if hasattr(time, name):
                original = getattr(time, name)
                self.saved.append((time, name, original))
                setattr(time, name, self.guard_clock(f"time.{name}", original))

    def uninstall(self):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()

    def pytest_configure(self, config):
        self.install()

    def pytest_unconfigure(self, config):
        self.uninstall()

    @contextlib.contextmanager
    def armed(self, item):
        ours = self.is_test_code(str(item.path))  # a notebook under nbval, say, is not a test of this folder
        fast = ours and not any(item.get_closest_marker(tier) for tier in ALLOWED_TIERS)
        self.item = item if fast else None
        try:
            yield
        finally:
            self.item = None

    def reported(self, excinfo):
        """Drops the refusal a phase failed with: pytest reports it already."""
        if excinfo is not None:
            self.pending[:] = [e for e in self.pending if e is not excinfo]

    def guarded(self, item):
        """One phase of a test (setup, call or teardown) run armed; its own refusal is reported once."""
        with self.armed(item):
            try:
                return (yield)
            except FastTierError as e:
                self.reported(e)
                raise

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        return (yield from self.guarded(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from self.guarded(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        result = yield from self.guarded(item)
        swallowed, self.pending[:] = list(self.pending), []
        if swallowed:  # caught by the test (except Exception) or raised in a thread: reported here
            raise FastTierError("; ".join(map(str, swallowed)) + " (the test caught this error; it still counts)")
        return result


GUARDS: list[FastTierGuard] = []


def register(config, code_dirs) -> FastTierGuard:
    """Installs the guard for this pytest run (from a conftest's pytest_configure)."""
    guard = FastTierGuard([Path(d) for d in code_dirs])
    config.pluginmanager.register(guard, "fast-tier-guard")
    GUARDS.append(guard)
    return guard


@contextlib.contextmanager
def refused():
    """For the guard's own tests: the block must be refused with FastTierError; the refusal is expected, so it
    is not reported again at teardown. Yields pytest's ExceptionInfo."""
    with pytest.raises(FastTierError) as info:
        yield info
    for guard in GUARDS:
        guard.reported(info.value)
