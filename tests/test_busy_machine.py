"""The thread policy on a busy machine and tracing from several threads: fewer threads, the same
numbers, bit-identical traces.
"""

from __future__ import annotations

import importlib.util
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import bertviz_lite as bv

from .conftest import SMALL

# where the thread policy lives: its own module once it has one (tests/test_threads.py tests it there)
POLICY_MODULE = importlib.util.find_spec("bertviz_lite.threads") is not None
moved = pytest.mark.skipif(POLICY_MODULE, reason="tests/test_threads.py tests the thread policy in its own module")


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


@moved
def test_a_busy_machine_gets_fewer_threads_and_the_same_numbers(monkeypatch):
    # kernels.threads_for_load: with other runnable tasks holding the cores, a forward uses the cores
    # left free (at least one) for BLAS and the fast kernels, then gives the threads back; quiet, it
    # changes nothing, and an explicit BERTVIZ_LITE_THREADS is obeyed as it is
    from bertviz_lite import kernels
    for name in ("BERTVIZ_LITE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(kernels, "cores", lambda: 4)
    monkeypatch.setattr(kernels, "kernel_threads", lambda real=kernels.kernel_threads: real() if kernels._BUSY else 4)
    before = _blas_threads()
    seen = {}
    for others, expected in ((0, 4), (1, 3), (3, 1), (9, 1), (None, 4)):
        monkeypatch.setattr(kernels, "other_runnable_tasks", lambda others=others: others)
        with kernels.threads_for_load() as threads:
            seen[others] = (threads, kernels._BUSY[-1] if kernels._BUSY else None, _blas_threads())
        assert threads == expected, (others, threads)
        assert _blas_threads() == before and not kernels._BUSY  # given back
    assert seen[9][1] == 1 and seen[9][2] == 1  # kernels and BLAS on one thread
    assert seen[0][1] is None and seen[0][2] == before  # quiet: nothing touched
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    monkeypatch.setattr(kernels, "other_runnable_tasks", lambda: 9)
    with kernels.threads_for_load() as threads:
        assert threads == 4 and not kernels._BUSY  # an explicit count is obeyed (the lambda above gives 4)


@moved
def test_a_trace_on_a_busy_machine_equals_the_quiet_one(monkeypatch):
    from bertviz_lite import kernels
    model = bv.load("random", config=SMALL)
    quiet = model.trace("the cat sat on the mat", keep=["layer.1.ffn.ln", "layer.0.attn.probs"])
    used = []
    real = kernels.threads_for_load

    def busy():
        used.append(1)
        return real()

    monkeypatch.delenv("BERTVIZ_LITE_THREADS", raising=False)
    monkeypatch.setattr(kernels, "other_runnable_tasks", lambda: 64)
    monkeypatch.setattr(kernels, "threads_for_load", busy)
    loaded = model.trace("the cat sat on the mat", keep=["layer.1.ffn.ln", "layer.0.attn.probs"])
    assert used == [1]  # the one runner asks
    for key in quiet.keys():
        np.testing.assert_allclose(loaded[key], quiet[key], rtol=1e-6, atol=1e-6)


def test_other_runnable_tasks_reads_proc_loadavg(monkeypatch, tmp_path):
    """Against a known /proc/loadavg (the 4th field is runnable/total): it can fail if the file is not read."""
    try:  # the thread policy's own module where it has one (helper B's split), else the kernels'
        from bertviz_lite import threads as kernels
    except ImportError:
        from bertviz_lite import kernels
    loadavg, real_open = tmp_path / "loadavg", open
    monkeypatch.setattr("builtins.open", lambda path, *a, **kw: real_open(
        loadavg if path == "/proc/loadavg" else path, *a, **kw))
    loadavg.write_text("0.50 0.40 0.30 1/300 4242\n")
    assert kernels.other_runnable_tasks() == 0  # only this thread runs
    loadavg.write_text("0.50 0.40 0.30 9/300 4242\n")
    assert 7 <= kernels.other_runnable_tasks() <= 8  # this thread (and maybe a spinning BLAS worker) are ours
    loadavg.write_text("garbage\n")
    assert kernels.other_runnable_tasks() is None


def test_threads_give_bit_identical_traces(small, monkeypatch):
    # a fixed thread count: on a busy machine the thread policy gives BLAS fewer threads, whose rounding
    # may differ (README, "What is bit-stable"); what is tested here is that threads share nothing
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    sentences = [f"thread {i}: the cat sat on the mat" + " and slept" * (i % 4) for i in range(12)]
    alone = [small.trace(s) for s in sentences]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(small.trace, sentences))
        batches = list(pool.map(lambda s: small.trace_batch([s, sentences[0]]), sentences))
    for a, b, bt in zip(alone, together, batches):
        for key in a.keys():
            assert np.array_equal(np.asarray(a[key]), np.asarray(b[key])), key
        assert np.array_equal(np.asarray(bt[0]["layer.1.attn.probs"]),
                              np.asarray(small.trace_batch([a.texts[0], sentences[0]])[0]["layer.1.attn.probs"]))
