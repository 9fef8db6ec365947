"""How many threads a forward pass uses: the busy-machine thread policy, per forward, on a ContextVar.

Each matrix product of a trace is split over BLAS's threads, and the fast kernels (kernels.py) over
`kernel_threads()`; every split waits for its slowest thread. When other processes keep the cores
busy, a thread waits for the scheduler at every product, and a trace becomes many times slower than
on fewer threads. So each forward counts the tasks the kernel is running besides this one
(/proc/loadavg, instantaneous) and uses only the cores left free, at least one.
benchmarks/bench_busy.py, MiniLM, 13 tokens, a 2-core machine, ms a trace, this policy against
every core whatever else runs: quiet 18.7 / 18.7; one other busy process 26.4 / 33.7; two 33.1 / 460.

The kernels' count lives on a ContextVar, so it belongs to the forward that set it: two threads
tracing at once each see their own. BLAS has one process-wide setting, so the limits of forwards
that overlap are held together (`_BlasLimits`): BLAS runs on the smallest limit any running forward
asked for, and when the last of them ends, on the thread counts it had before the first began,
whatever order they end in.
"""

from __future__ import annotations

import contextvars
import os
import threading
from contextlib import contextmanager

_LIMIT = contextvars.ContextVar("bertviz_lite_threads", default=None)  # this forward's count, or None


def kernel_threads() -> int:
    """How many threads the kernels split a large input over: within a forward on a busy machine, the
    cores left free (threads_for_load); else BERTVIZ_LITE_THREADS if set, else the limit the environment
    gives BLAS (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS: Dask's workers set 1, the
    benchmarks their --threads), else the cores this process may run on."""
    limit = _LIMIT.get()
    if limit is not None:  # inside threads_for_load() on a busy machine
        return limit
    for name in ("BERTVIZ_LITE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        count = env_count(name)
        if count:
            return count
    return cores()


def env_count(name: str) -> int | None:
    """The positive whole number an environment variable holds, else None."""
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on linux
        return os.cpu_count() or 1


# a process with thousands of threads would read thousands of stat files per forward (0.3-1.2 s with
# 2,000 threads): only the calling thread and the oldest threads are read, where numpy's BLAS workers
# are (they start when numpy loads); a thread started later that spins is counted as someone else's load
SCANNED_THREADS = 64


def other_runnable_tasks() -> int | None:
    """How many tasks of other processes the kernel is running or ready to run right now: the 4th field
    of /proc/loadavg ("runnable/total") minus this process's own running threads (this one, and a BLAS
    worker still spinning after the last product, which is no one else's load); None where there is no
    /proc (not linux). At most SCANNED_THREADS + 1 of this process's threads are read."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            runnable = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    if runnable <= 1:
        return 0  # only this thread: nothing to subtract
    try:
        tids = sorted((t for t in os.listdir("/proc/self/task") if t.isdigit()), key=int)
    except OSError:
        tids = []
    me = str(threading.get_native_id())
    scan = [me] + [t for t in tids[:SCANNED_THREADS] if t != me]
    own = 0
    for tid in scan:
        if own >= runnable:
            break  # every runnable task is ours already
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"  # the state field follows "(comm)"
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
    return max(0, runnable - max(1, own))


class _BlasLimits:
    """BLAS's one process-wide thread count, shared by the forwards that run at once: while any runs
    with a limit, BLAS uses the smallest limit among them; after the last, what it used before the first.

    Only forwards in the main thread change it. OpenBLAS (0.3.31 here) does not reliably take a count
    set from another thread: ignored once the main thread has set one, and even before that a give-back
    from a worker thread was lost in about 1 run in 6 of 4 threads x 60 forwards (tests/engine/test_threads.py),
    leaving every later product on one thread. So forwards in other threads (a notebook's background
    work, Dask's worker threads) leave BLAS alone, and their kernels still follow their own limit."""

    def __init__(self):
        self._lock = threading.Lock()
        self._active: dict[object, int] = {}  # one entry per forward holding a limit (contexts may overlap)
        self._libs = None  # threadpoolctl's BLAS libraries, found on first use
        self._saved: list[int] | None = None  # their thread counts before the first of the running forwards
        self._applied: list[int] | None = None  # what this set last (None: nothing, or given back)

    def _find_libs(self) -> None:
        if self._libs is None:
            try:
                from threadpoolctl import ThreadpoolController  # the BLAS libraries numpy (or scipy) loaded
                self._libs = list(ThreadpoolController().select(user_api="blas").lib_controllers)
            except ImportError:
                self._libs = []

    def _set(self, counts) -> None:
        # only when the count changes: overlapping forwards change it as rarely as they can
        counts = list(counts)
        if counts == self._applied:
            return
        for lib, n in zip(self._libs, counts):
            lib.set_num_threads(n)
        self._applied = counts

    def _limit_to(self, limit: int) -> None:
        # never more than a library had before: a limit only lowers
        self._set([min(limit, n) for n in self._saved])

    @contextmanager
    def hold(self, limit: int):
        if threading.current_thread() is not threading.main_thread():  # see the class's docstring
            yield
            return
        key = object()
        with self._lock:
            self._find_libs()
            if not self._active:  # what to give back after the last forward: the setting as it is now
                self._saved = [lib.num_threads for lib in self._libs]
            self._active[key] = limit
            self._limit_to(min(self._active.values()))
        try:
            yield
        finally:
            with self._lock:
                del self._active[key]
                if self._active:
                    self._limit_to(min(self._active.values()))
                else:
                    self._set(self._saved)
                    self._applied = None  # the user's own setting from here on


_BLAS = _BlasLimits()


@contextmanager
def threads_for_load():
    """For the duration of one forward pass: BLAS and the fast kernels use at most the cores that other
    runnable tasks leave free (at least one), when that is fewer than they would use. On a quiet machine
    it changes nothing; with BERTVIZ_LITE_THREADS set (an explicit count), or where /proc/loadavg or
    threadpoolctl is missing, nothing either. Forwards that overlap (threads, Dask workers with several
    threads) nest: each keeps its own kernel count, and BLAS gets its thread counts back after the last."""
    wanted = kernel_threads()
    explicit = env_count("BERTVIZ_LITE_THREADS") is not None
    others = other_runnable_tasks() if wanted > 1 and not explicit else None
    free = wanted if others is None else max(1, min(wanted, cores() - others))
    if free >= wanted:
        yield wanted
        return
    token = _LIMIT.set(free)
    try:
        with _BLAS.hold(free):
            yield free
    finally:
        _LIMIT.reset(token)
