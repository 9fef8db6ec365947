"""Which OpenBLAS kernel numpy runs here, and a second one this CPU also runs, for scripts/test.sh's second pass.

    .venv/bin/python scripts/blas_kernel.py            # "own: Haswell" and "second: SkylakeX" (or "second: none")
    .venv/bin/python scripts/blas_kernel.py --second   # the second kernel's name alone (empty when there is none)

OpenBLAS picks its kernels by CPU, or by OPENBLAS_CORETYPE where that is set, and two kernels round one product
apart: a test or a lesson that holds on one kernel can fail on another (PITFALLS.md, "The BLAS kernel is a property
of the CPU, not of the code"). The own kernel is what OpenBLAS reports through threadpoolctl under this
environment. The second is the first of SECOND_CHOICES that this CPU has the instructions for, that OpenBLAS
accepts by that name (it reports the name back: "Zen" reports Haswell, whose kernels it runs), that differs from
the own one, and whose product of two seeded float32 matrices agrees with float64 (an older OpenBLAS computed
wrong results on some of these CPUs). Each candidate runs in a child process: the kernel is chosen when OpenBLAS
loads, so one process cannot try two.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

# the kernels tried in order, each with the CPU flags its code needs: AVX-512 first (an AVX2 machine's second is
# the furthest from its own), then the AVX2 kernels most machines run (an AVX-512 machine's second is theirs)
SECOND_CHOICES = {
    "SkylakeX": ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma"),
    "Haswell": ("avx2", "fma"),
    "Sandybridge": ("avx",),
    "Zen": ("avx2", "fma"),
}
# a float32 product that agrees with float64 to this (relative to its largest entry) is computed right
PRODUCT_RTOL = 1e-4

PROBE = """
import json
import numpy as np
from threadpoolctl import threadpool_info
rng = np.random.default_rng(0)
a, b = rng.standard_normal((96, 200)), rng.standard_normal((200, 80))
exact = a @ b
approx = a.astype(np.float32) @ b.astype(np.float32)
err = float(np.abs(approx - exact).max() / np.abs(exact).max())
arch = [lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"]
print(json.dumps({"architecture": arch[0] if arch else None, "error": err}))
"""


def cpu_flags() -> set[str]:
    """The instruction-set flags of this CPU (Linux's /proc/cpuinfo); empty where that is not there."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def probe(coretype: str | None) -> dict | None:
    """What OpenBLAS reports in a child process with OPENBLAS_CORETYPE=coretype (None: the environment as it is),
    and how far its float32 product is from float64; None where the child fails (a crash: not this CPU's)."""
    env = dict(os.environ)
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def own_kernel() -> str | None:
    found = probe(None)
    return found["architecture"] if found else None


def second_kernel(own: str | None, flags: set[str] | None = None) -> str | None:
    """The first of SECOND_CHOICES this CPU runs, other than `own`, that computes right; None if there is none."""
    flags = cpu_flags() if flags is None else flags
    for name, needs in SECOND_CHOICES.items():
        if not set(needs) <= flags:
            continue
        found = probe(name)
        if not found or found["architecture"] is None:
            continue
        reported = found["architecture"]
        if reported.lower() != name.lower() or reported.lower() == (own or "").lower():
            continue  # OpenBLAS runs another kernel under this name, or the one it runs already
        if found["error"] <= PRODUCT_RTOL:
            return name
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--second", action="store_true",
                        help="print the second kernel's name alone (nothing when this CPU runs no other)")
    args = parser.parse_args(argv)
    own = own_kernel()
    second = second_kernel(own)
    if args.second:
        print(second or "")
    else:
        print(f"own: {own or 'unknown (no OpenBLAS found)'}")
        print(f"second: {second or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
