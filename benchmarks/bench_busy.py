"""Traces on a busy machine: the thread policy of threads.threads_for_load against fixed threads.

    .venv/bin/python benchmarks/bench_busy.py                 # MiniLM, a 13-token sentence
    .venv/bin/python benchmarks/bench_busy.py --model random --traces 20

Each measurement runs in a fresh process: `--traces` traces of one sentence, the median time per trace.
The machine is made busy by 0, cores - 1 and cores other processes that spin (`while True: pass`),
started before and stopped after each measurement. Two ways of running the traces are compared in the
same conditions:
  - policy: the package as it is (each forward uses the cores other runnable tasks leave free);
  - fixed: BERTVIZ_LITE_THREADS set to the number of cores, which turns the policy off (BLAS and the fast
    kernels use every core whatever else runs), as before the policy existed.
The ratio fixed / policy is how many times slower a trace is without the policy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from bertviz_lite import threads

SENTENCE = "The cat sat on the mat because it was tired."
CHILD = """
import json, statistics, sys, time
import bertviz_lite as bv
m = bv.load(sys.argv[1])
for _ in range(3):
    m.trace(sys.argv[2])
times = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    m.trace(sys.argv[2])
    times.append(time.perf_counter() - t0)
print(json.dumps(statistics.median(times) * 1e3))
"""


def measure(model: str, traces: int, busy: int, fixed: bool, cores: int) -> float:
    env = dict(os.environ)
    env.pop("BERTVIZ_LITE_THREADS", None)
    if fixed:
        env["BERTVIZ_LITE_THREADS"] = str(cores)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.3)
        out = subprocess.run([sys.executable, "-c", CHILD, model, SENTENCE, str(traces)], env=env,
                             capture_output=True, text=True, check=True, timeout=900)
        return float(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--traces", type=int, default=40)
    args = ap.parse_args(argv)
    cores = threads.cores()
    print(f"{args.model}, {args.traces} traces of {SENTENCE!r}; {cores} cores; load average {os.getloadavg()}")
    print(f"{'other busy processes':>22} {'policy ms/trace':>16} {'fixed ms/trace':>15} {'fixed / policy':>15}")
    for busy in sorted({0, max(0, cores - 1), cores}):
        policy = measure(args.model, args.traces, busy, False, cores)
        fixed = measure(args.model, args.traces, busy, True, cores)
        print(f"{busy:>22} {policy:>16.1f} {fixed:>15.1f} {fixed / policy:>15.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
