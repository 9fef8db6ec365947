"""Q, K and V from one product (kernels.numpy_qkv, the fast path) against the three products it replaced,
on numpy, BERT-base (random weights, seed 0), in one process, A and B alternating within each round:

  - kernel: Q, K, V of one layer from Z [n, 768] (or a batch [B, n, 768]): one [768, 2304] product and
    one bias add, against the old fast path's three `split_heads(folded_matmul(Z, W) + b)`;
  - trace:  model.trace_ids(ids) with every key recorded, with the queries_keys_values kernel in the FUSED
    table (new) and taken out of it for the run (old: the three formula lines on the fast path's matmul).

    .venv/bin/python benchmarks/bench_qkv.py [--sizes 32,128,512] [--rounds 5] [--reps 5] [--clock cpu] [--json out.json]

Prints, per size and round, the median milliseconds of old and new and their ratio new / old, then the
median ratio over the rounds. Compare within a round: the machine may be shared. --clock cpu times the
process's CPU seconds (time.process_time) instead of the wall clock: on a busy shared machine, with one
thread (OPENBLAS_NUM_THREADS=1 BERTVIZ_LITE_THREADS=1), that counts the work done and not the waiting.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bertviz_lite as bv  # noqa: E402  first, as a user's script would (it sets OpenBLAS's spin time)
import numpy as np  # noqa: E402
from bertviz_lite import engine, kernels  # noqa: E402

QKV_KERNEL = ("queries_keys_values", "numpy", "float32")


@contextlib.contextmanager
def without_qkv_kernel():
    """The fast path as it was before: no queries_keys_values kernel, so its three formula lines run."""
    kernel = kernels.FUSED.pop(QKV_KERNEL)
    try:
        yield
    finally:
        kernels.FUSED[QKV_KERNEL] = kernel


CLOCK = time.perf_counter  # main() sets time.process_time for --clock cpu


def median_ms(fn, reps: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(reps):
        t = CLOCK()
        fn()
        times.append(CLOCK() - t)
    return 1e3 * statistics.median(times)


def old_qkv(Z, W, n_h):
    """What the fast path ran before: the three lines of engine.queries_keys_values on folded_matmul."""
    return tuple(engine.split_heads(kernels.folded_matmul(Z, W[f"attn.W_{x}"]) + W[f"attn.b_{x}"], n_h, np)
                 for x in "QKV")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="32,128,512", help="token counts, comma-separated")
    ap.add_argument("--batch", type=int, default=8, help="sentences in the kernel's batch case (0: none)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: time.perf_counter; cpu: the process's CPU time (use with one thread)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    model = bv.load("random", seed=0, backend="numpy")
    W, n_h = model.layer_weights[0], model.config.num_heads
    rng = np.random.default_rng(0)
    cases = []
    for n in (int(s) for s in args.sizes.split(",")):
        ids = [101] + [int(i) for i in rng.integers(1000, 30000, n - 2)] + [102]
        Z = rng.standard_normal((n, model.config.hidden_size), dtype=np.float32)
        for a, b in zip(old_qkv(Z, W, n_h), kernels.numpy_qkv(Z, W, n_h)):  # the same numbers, to float32 rounding
            assert np.allclose(a, b, rtol=1e-5, atol=1e-5)
        cases.append((f"kernel n={n}", lambda Z=Z: old_qkv(Z, W, n_h), lambda Z=Z: kernels.numpy_qkv(Z, W, n_h)))
        if args.batch and n <= 128:
            Zb = rng.standard_normal((args.batch, n, model.config.hidden_size), dtype=np.float32)
            cases.append((f"kernel B={args.batch} n={n}", lambda Zb=Zb: old_qkv(Zb, W, n_h),
                          lambda Zb=Zb: kernels.numpy_qkv(Zb, W, n_h)))

        def old_trace(ids=ids):
            with without_qkv_kernel():
                model.trace_ids(ids)

        cases.append((f"trace n={n}", old_trace, lambda ids=ids: model.trace_ids(ids)))
    results = {name: [] for name, _, _ in cases}
    for r in range(args.rounds):
        for name, old, new in cases:
            if r % 2:  # alternate which runs first
                t_new, t_old = median_ms(new, args.reps), median_ms(old, args.reps)
            else:
                t_old, t_new = median_ms(old, args.reps), median_ms(new, args.reps)
            results[name].append({"old_ms": t_old, "new_ms": t_new, "ratio": t_new / t_old})
            print(f"round {r}  {name:<20} old {t_old:8.2f} ms  new {t_new:8.2f} ms  new/old {t_new / t_old:.3f}",
                  flush=True)
    print("\nmedian over rounds (new / old; < 1 is faster):")
    summary = {}
    for name, rows in results.items():
        ratios = [row["ratio"] for row in rows]
        summary[name] = {"ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                         "ratio_max": max(ratios), "old_ms_median": statistics.median(r["old_ms"] for r in rows),
                         "new_ms_median": statistics.median(r["new_ms"] for r in rows)}
        s = summary[name]
        print(f"  {name:<20} {s['ratio_median']:.3f}  (rounds {s['ratio_min']:.3f} .. {s['ratio_max']:.3f}; "
              f"old {s['old_ms_median']:.2f} ms, new {s['new_ms_median']:.2f} ms)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"clock": args.clock, "cpus": os.cpu_count(),
                       "threads": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "BERTVIZ_LITE_THREADS")},
                       "rounds": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
