"""threads.other_runnable_tasks (the load check each forward makes) in a process with many threads, against
its peer measured in the same run: the scan it replaced, which read every thread's /proc stat file.
tests/engine/test_threads.py checks, without a clock, that it reads at most SCANNED_THREADS + 1 of them.

    .venv/bin/python benchmarks/bench_proc_scan.py [--threads 2000] [--repeat 20]

/proc/loadavg is read as it is: where it shows one runnable task, the check stops before any scan (the
printed runnable count says so). Prints the median of --repeat for each and the ratio
(other_runnable_tasks / full scan); on a shared machine other work inflates both.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import _median_time as median_time  # noqa: E402  (warm-up, then the median of repeats)


def full_scan() -> int:
    """The peer: every thread's state, as the check read it before it stopped at SCANNED_THREADS."""
    own = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return own


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2000, help="idle threads started first (default 2000)")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args(argv)
    if not os.path.exists("/proc/self/task"):
        ap.exit(0, "no /proc here: nothing to measure\n")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bertviz_lite import threads

    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(args.threads)]
    for t in idle:
        t.start()
    try:
        count = len(os.listdir("/proc/self/task"))
        ours = median_time(threads.other_runnable_tasks, args.repeat)
        peer = median_time(full_scan, args.repeat)
    finally:
        stop.set()
    with open("/proc/loadavg", encoding="ascii") as f:
        runnable = f.read().split()[3]
    print(f"runnable/total tasks {runnable}; {count} threads in this process")
    print(f"other_runnable_tasks {ours * 1e3:.2f} ms, full scan {peer * 1e3:.2f} ms, ratio {ours / peer:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
