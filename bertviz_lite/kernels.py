"""The numpy kernels of the fast path: each computes exactly what a formula function in engine.py
computes (tests hold them equal), faster. Which one replaces which line, for which backend and
dtype, is decided in one table, `backend.FUSED`; `model.trace(..., fast=False)` runs none of them.
"""

from __future__ import annotations

import glob
import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np

# abramowitz & stegun 7.1.26 (backend.rational_erf's formula): |error| <= 1.5e-7 for every x
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
SQRT_2 = math.sqrt(2.0)



# ------------------------------------------------------------------------------------------
# numpy kernels: the engine's elementwise lines, fast. Each computes exactly what the
# array-api line beside it in engine.py computes (tests compare them), but block by block into
# one output buffer instead of a fresh array per operation, and, on large inputs, over all the
# threads BLAS may use: numpy releases the GIL inside each ufunc, so two threads each running a
# block loop over their half of the rows use two cores.
#
# Block size (benchmarks/bench_kernels.py, BERT-base at 512 tokens, 2 cores): with 32 Ki-element
# blocks two threads gained little (softmax 8.8 -> 6.0 ms, gelu 7.3 -> 5.0): a ufunc call on 128 KiB
# is so short that the threads queue for the GIL between calls. With 64 Ki elements (256 KiB: a block
# and its three scratch blocks fit a core's 1 MiB l2) softmax takes 4.9 ms and gelu 4.3 ms; at 128
# tokens gelu goes from 1.7 to 1.1 ms. A second thread only helps when the core is free: OpenBLAS
# spins its idle workers after every matrix product unless OPENBLAS_THREAD_TIMEOUT is small (the
# package sets 4 when it is imported before numpy: see __init__.py).
# ------------------------------------------------------------------------------------------

_BLOCK = 1 << 16  # float32 elements per block (256 KiB)
_POOLS: dict[int, ThreadPoolExecutor] = {}


def kernel_threads() -> int:
    """How many threads the kernels split a large input over: within a forward on a busy machine, the
    cores left free (threads_for_load); else BERTVIZ_LITE_THREADS if set, else the limit the environment
    gives BLAS (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS: Dask's workers set 1, the
    benchmarks their --threads), else the cores this process may run on."""
    if _BUSY:  # inside threads_for_load() on a busy machine
        return _BUSY[-1]
    for name in ("BERTVIZ_LITE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        count = _env_count(name)
        if count:
            return count
    return cores()


def _env_count(name: str) -> int | None:
    """The positive whole number an environment variable holds, else None."""
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


# ------------------------------------------------------------------------------------------
# threads on a busy machine. Each matrix product of a trace is split over BLAS's threads, and the
# fast kernels over kernel_threads(); every split waits for its slowest thread. When other processes
# keep the cores busy, a thread waits for the scheduler at every product, and a trace becomes many
# times slower than on fewer threads. So each forward counts the tasks the kernel is running besides
# this one (/proc/loadavg, instantaneous) and uses only the cores left free, at least one.
# benchmarks/bench_busy.py, MiniLM, 13 tokens, this 2-core machine, ms a trace, this policy against
# every core whatever else runs: quiet 18.7 / 18.7; one other busy process 26.4 / 33.7; two 33.1 / 460.
# ------------------------------------------------------------------------------------------

_BUSY: list[int] = []  # the thread limit of the forward running now (kernel_threads() reads it)
_CONTROLLER = None


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on linux
        return os.cpu_count() or 1


def other_runnable_tasks() -> int | None:
    """How many tasks of other processes the kernel is running or ready to run right now: the 4th field
    of /proc/loadavg ("runnable/total") minus this process's own running threads (this one, and a BLAS
    worker still spinning after the last product, which is no one else's load); None where there is no
    /proc (not linux)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            runnable = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    own = 0
    for stat in glob.glob("/proc/self/task/*/stat"):
        try:
            with open(stat, encoding="ascii", errors="replace") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"  # the state field follows "(comm)"
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
    return max(0, runnable - max(1, own))


@contextmanager
def threads_for_load():
    """For the duration of one forward pass: BLAS and the fast kernels use at most the cores that other
    runnable tasks leave free (at least one), when that is fewer than they would use. On a quiet machine
    it changes nothing; with BERTVIZ_LITE_THREADS set (an explicit count), or where /proc/loadavg or
    threadpoolctl is missing, nothing either."""
    wanted = kernel_threads()
    explicit = _env_count("BERTVIZ_LITE_THREADS") is not None
    others = other_runnable_tasks() if wanted > 1 and not explicit else None
    free = wanted if others is None else max(1, min(wanted, cores() - others))
    if free >= wanted:
        yield wanted
        return
    global _CONTROLLER
    try:
        if _CONTROLLER is None:
            from threadpoolctl import ThreadpoolController  # the BLAS libraries numpy (or scipy) loaded

            _CONTROLLER = ThreadpoolController()
        limit = _CONTROLLER.limit(limits=free, user_api="blas")
    except ImportError:
        limit = nullcontext()
    _BUSY.append(free)
    try:
        with limit:
            yield free
    finally:
        _BUSY.pop()


def _split(work, n: int, *arrays: np.ndarray) -> None:
    """work(*(a[lo:hi] for a in arrays)) for consecutive ranges of the n leading rows, on
    kernel_threads() threads when every thread gets at least a block, else at once here."""
    threads = min(kernel_threads(), 16)
    size = arrays[0].size
    if threads < 2 or size < threads * _BLOCK:
        work(*arrays)
        return
    pool = _POOLS.get(threads) or _POOLS.setdefault(threads, ThreadPoolExecutor(threads, "bertviz-kernel"))
    cuts = [n * i // threads for i in range(threads + 1)]
    for f in [pool.submit(work, *(a[lo:hi] for a in arrays)) for lo, hi in zip(cuts, cuts[1:])]:
        f.result()  # re-raises a worker's exception here


# gelu(x) = x Phi(x). With h = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 = t P(t) e^{-x^2/2} / 2 (the rational
# form above), Phi(x) = 1 - h for x >= 0 and h for x < 0, so gelu(x) = max(x, 0) - |x| h: the same
# formula and error bound as x/2 (1 + erf(x / sqrt 2)), with no sign flip (copysign costs ~5
# multiplies here) and three fewer passes.
_AS_P_GELU = np.float32(ERF_P / SQRT_2)  # p |x| / sqrt 2 = p' |x|
_AS_A_HALF = tuple(np.float32(a / 2) for a in ERF_A)  # the 1/2 of erfc / 2, folded in


def _gelu_into(flat: np.ndarray, out: np.ndarray) -> None:
    a_, t_, e_ = (np.empty(min(_BLOCK, flat.size), dtype=flat.dtype) for _ in range(3))
    for i in range(0, flat.size, _BLOCK):
        j = min(i + _BLOCK, flat.size)
        xb, ob, a, t, e = flat[i:j], out[i:j], a_[: j - i], t_[: j - i], e_[: j - i]
        np.abs(xb, out=a)  # |x|
        np.multiply(a, np.float32(-0.5), out=e)
        np.multiply(e, a, out=e)
        np.exp(e, out=e)  # e^{-x^2 / 2}
        np.multiply(a, _AS_P_GELU, out=t)
        np.add(t, np.float32(1.0), out=t)
        np.divide(np.float32(1.0), t, out=t)  # t = 1 / (1 + p |x| / sqrt 2)
        np.multiply(t, _AS_A_HALF[4], out=ob)
        for c in _AS_A_HALF[3::-1]:  # horner, as in the erf above, into out
            np.add(ob, c, out=ob)
            np.multiply(ob, t, out=ob)
        np.multiply(ob, e, out=ob)  # h = Phi(-|x|)
        np.multiply(ob, a, out=ob)  # |x| h
        np.maximum(xb, np.float32(0.0), out=a)  # |x| is no longer needed: max(x, 0) in its place
        np.subtract(a, ob, out=ob)


def numpy_gelu(x: np.ndarray) -> np.ndarray:
    """Exact-form gelu x Phi(x) for float32, as max(x, 0) - |x| Phi(-|x|), block by block in one buffer."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _split(_gelu_into, flat.size, flat, out)
    return out.reshape(x.shape)


def _rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x as a contiguous [rows, width] view and a fresh output of that shape."""
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    return rows, np.empty_like(rows)


def _row_blocks(rows: np.ndarray, out: np.ndarray):
    """(input, output) blocks of whole rows, small enough to stay in l2 while a kernel makes its passes."""
    step = max(1, _BLOCK // max(1, rows.shape[-1]))  # rows per block
    return ((rows[i:i + step], out[i:i + step]) for i in range(0, rows.shape[0], step))


def _softmax_into(rows: np.ndarray, out: np.ndarray) -> None:
    for sb, eb in _row_blocks(rows, out):
        np.subtract(sb, sb.max(axis=-1, keepdims=True), out=eb)
        np.exp(eb, out=eb)
        np.divide(eb, eb.sum(axis=-1, keepdims=True), out=eb)


def numpy_softmax(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax, e = exp(s - max); e / sum(e), a block of rows at a time into one buffer."""
    rows, out = _rows(s)
    _split(_softmax_into, rows.shape[0], rows, out)
    return out.reshape(s.shape)


def numpy_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis, into one buffer."""
    width = np.float32(x.shape[-1])

    def work(rows, out):
        for xb, ob in _row_blocks(rows, out):
            np.subtract(xb, xb.mean(axis=-1, keepdims=True), out=ob)  # x - mu
            var = np.vecdot(ob, ob)[:, None] / width  # biased, as bert and torch; no squared copy
            np.multiply(ob, np.float32(1.0) / np.sqrt(var + np.float32(eps)), out=ob)  # eps inside the sqrt
            np.multiply(ob, gamma, out=ob)
            np.add(ob, beta, out=ob)

    rows, out = _rows(x)
    _split(work, rows.shape[0], rows, out)
    return out.reshape(x.shape)


def numpy_matmul(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """x @ W with x's leading axes (a batch) folded into one [B*n, k] product: numpy would run
    one small product per example instead (1.7x slower for 32 sentences of 14 tokens here)."""
    if x.ndim <= 2:
        return x @ W
    return (x.reshape(-1, x.shape[-1]) @ W).reshape(*x.shape[:-1], W.shape[-1])


