"""The fast path's elementwise kernels (kernels.FUSED) against the candidates for replacing them,
on BERT-base shapes at 512 tokens, in one process, alternating:

  - numexpr (`pip install numexpr`; not a dependency): softmax as exp(s - max) / sum, gelu as the
    same rational form (float32 constants, so nothing widens to float64), layernorm's affine part;
  - the same numpy kernels on one thread (BERTVIZ_LITE_THREADS=1) against the default: their rows split
    over kernel_threads() threads (numpy releases the GIL inside a ufunc).

    .venv/bin/python benchmarks/bench_kernels.py [--rounds 3]

Prints the median milliseconds of each per round; compare within a round (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bertviz_lite import kernels as K, threads  # noqa: E402

def one_thread(f):
    """f with the kernels held to one thread."""
    def run(*args):
        os.environ["BERTVIZ_LITE_THREADS"] = "1"
        try:
            return f(*args)
        finally:
            del os.environ["BERTVIZ_LITE_THREADS"]
    return run


def numexpr_kernels():
    import numexpr as ne
    P = np.float32(K.ERF_P / K.SQRT_2)
    A = [np.float32(v / 2) for v in K.ERF_A]

    def softmax(s):
        m = s.max(axis=-1, keepdims=True)
        e = ne.evaluate("exp(s - m)")
        z = e.sum(axis=-1, keepdims=True)
        return ne.evaluate("e / z", out=e)

    def gelu(x):
        t = ne.evaluate("1 / (1 + P * abs(x))", local_dict=dict(P=P, x=x))
        return ne.evaluate("where(x > 0, x, 0) - abs(x) * exp(h * x * x) * t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))",
                           local_dict=dict(x=x, t=t, h=np.float32(-0.5), a1=A[0], a2=A[1], a3=A[2], a4=A[3], a5=A[4]),
                           out=t)

    def layer_norm(x, g, b, eps):
        mu = x.mean(axis=-1, keepdims=True)
        d = ne.evaluate("x - mu")
        r = np.float32(1.0) / np.sqrt(np.vecdot(d, d)[:, None] / np.float32(x.shape[-1]) + np.float32(eps))
        return ne.evaluate("d * r * g + b", out=d)

    return ne, softmax, gelu, layer_norm


def median_ms(f, *args, reps: int = 9) -> float:
    f(*args)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t)
    return sorted(times)[reps // 2] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    s = rng.standard_normal((12, 512, 512), dtype=np.float32)  # one layer's scores
    x = rng.standard_normal((512, 3072), dtype=np.float32)  # one layer's feed-forward up
    h = rng.standard_normal((512, 768), dtype=np.float32) * 3  # a residual stream
    g, b = rng.standard_normal(768, dtype=np.float32), rng.standard_normal(768, dtype=np.float32)
    cases = [("softmax", K.numpy_softmax, (s,)), ("gelu", K.numpy_gelu, (x,)),
             ("layer_norm", K.numpy_layer_norm, (h, g, b, 1e-12))]
    try:
        ne, *ne_fns = numexpr_kernels()
    except ImportError:
        ne, ne_fns = None, []
    print(f"load average {os.getloadavg()}; numexpr {'not installed' if ne is None else ne.__version__}")
    for rnd in range(args.rounds):
        row = []
        for (name, fn, a), ne_fn in zip(cases, ne_fns or [None] * 3):
            row.append(f"{name}: numpy 1 thread {median_ms(one_thread(fn), *a):.1f}")
            row.append(f"numpy {threads.kernel_threads()} threads {median_ms(fn, *a):.1f}")
            if ne_fn is not None:
                for th in (1, 2):
                    ne.set_num_threads(th)
                    row.append(f"numexpr {th}t {median_ms(ne_fn, *a):.1f}")
        print(f"round {rnd}: " + ", ".join(row) + " (ms)")


if __name__ == "__main__":
    main()
