"""Tracing from several threads gives bit-identical traces (the thread policy itself: tests/engine/test_threads.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bertviz_lite.backend import to_host


def test_threads_give_bit_identical_traces(small, monkeypatch):
    # a fixed thread count: on a busy machine the thread policy gives BLAS fewer threads, whose rounding
    # may differ (docs/benchmarks.md, "What is bit-stable"); what is tested here is that threads share nothing
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    sentences = [f"thread {i}: the cat sat on the mat" + " and slept" * (i % 4) for i in range(12)]
    alone = [small.trace(s) for s in sentences]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(small.trace, sentences))
        batches = list(pool.map(lambda s: small.trace_batch([s, sentences[0]]), sentences))
    for a, b, bt in zip(alone, together, batches):
        for key in a.keys():
            assert np.array_equal(to_host(a[key]), to_host(b[key])), key
        assert np.array_equal(to_host(bt[0]["layer.1.attn.probs"]),
                              to_host(small.trace_batch([a.texts[0], sentences[0]])[0]["layer.1.attn.probs"]))
