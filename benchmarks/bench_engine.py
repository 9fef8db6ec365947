"""Speed and memory of the engine against its peers, for n = 32, 128, 512 tokens (BERT-base, batch 1).

    .venv/bin/python benchmarks/bench_engine.py                     # engine and numpy floor only
    .venv/bin/python benchmarks/bench_engine.py --peer-python /path/to/venv-with-torch/bin/python

Per round, and per n, it runs one engine process and one Hugging Face process, alternating, so
that both see the same machine state. The engine process times:
  - trace:   model.trace_ids(ids), recording every key (float32)
  - nokeep:  model.trace_ids(ids, keep=[]), the same forward recording nothing
  - ablate:  the trace with one head ablated (edits=bv.ablate(heads={6: [6]})): what an edit costs
  - formula: the trace with fast=False: engine.py's formula lines as written, no fused kernels
  - floor:   the same matrix products in plain numpy (QKV, QK^T, AV, W^O, FFN up/down), nothing else
and where a trace's time goes (softmax, gelu and layernorm kernels against the rest), and
measures the trace's memory: bytes its tensors hold (tr.nbytes) against the bytes the
process keeps while holding it (tracemalloc), and peak RSS. The peer process times Hugging Face
transformers BertModel (eager attention, output_attentions and output_hidden_states, torch CPU,
the same thread count). Ratios are per round; the summary prints their median and spread.

The peer is never a dependency of bertviz-lite. To install it (in its own venv; torch and numpy in
one process slow each other down, so the peer runs in separate processes anyway):
    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install torch==2.13.0 transformers==5.23.0
Threads: both sides use the same count (OMP/OPENBLAS/MKL_NUM_THREADS, default: all cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _median_time(fn, reps: int) -> float:
    fn()  # warm up: first-touch page faults, thread pools, caches
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# workers (each runs in its own process)
# ---------------------------------------------------------------------------------------------


def worker_engine(n: int, reps: int) -> dict:
    import gc
    import resource
    import tracemalloc

    sys.path.insert(0, ROOT)
    import bertviz_lite as bv  # first, as a user's script would: it sets OpenBLAS's spin time (__init__.py)
    import numpy as np

    model = bv.load("random", seed=0, backend="numpy")
    ids = [101] + list(np.random.default_rng(n).integers(1000, 30000, n - 2)) + [102]
    W = model.weights
    L, A = model.config.num_layers, model.config.num_heads
    Z0 = np.random.default_rng(1).standard_normal((n, 768), dtype=np.float32)

    # Each layer's output is scaled back to unit rms (scales found once, untimed). A fixed
    # factor is not enough: values that drift into float32's subnormal range (below 1.2e-38)
    # make every later product several times slower, and an early version of this floor
    # lost ~40% that way at 512 tokens, flattering every ratio against it.
    scales = [np.float32(1.0)] * L

    def floor(measure: bool = False):  # the matrix products of one forward, at numpy's own matmul speed
        Z = Z0
        for layer in range(L):
            p = f"layer.{layer}."
            q, k, v = (Z @ W[p + f"attn.W_{x}"] for x in "QKV")
            qh, kh, vh = (t.reshape(n, A, -1).transpose(1, 0, 2) for t in (q, k, v))
            ctx = (qh @ kh.transpose(0, 2, 1)) @ vh
            Z = ctx.transpose(1, 0, 2).reshape(n, -1) @ W[p + "attn.W_O"]
            Z = (Z @ W[p + "ffn.W_up"]) @ W[p + "ffn.W_down"]
            if measure:
                scales[layer] = np.float32(1.0 / np.sqrt(np.mean(np.square(Z, dtype=np.float64))))
            Z = Z * scales[layer]
        return Z

    floor(measure=True)
    tiny = np.finfo(np.float32).tiny
    assert all(np.isfinite(s) and s > 0 for s in scales) and np.abs(floor()).max() > tiny * 1e6

    one_head = bv.ablate(heads={L // 2: [A // 2]})
    out = {
        "trace_s": _median_time(lambda: model.trace_ids(ids), reps),
        "ablate_s": _median_time(lambda: model.trace_ids(ids, edits=one_head), reps),
        "formula_s": _median_time(lambda: model.trace_ids(ids, fast=False), reps),
        "nokeep_s": _median_time(lambda: model.trace_ids(ids, keep=[]), reps),
        "floor_s": _median_time(floor, reps),
        "trace16_s": _median_time(lambda: model.trace_ids(ids, dtype="float16"), reps),
    }
    out["kernels_s"] = kernel_breakdown(model, ids, reps)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tr = model.trace_ids(ids)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    tr16 = model.trace_ids(ids, dtype="float16")
    probs_only = model.trace_ids(ids, keep=["attn.probs"])
    out.update(trace_bytes=tr.nbytes, held_bytes=held, trace16_bytes=tr16.nbytes, probs_bytes=probs_only.nbytes,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def kernel_breakdown(model, ids, reps: int) -> dict:
    """Where a trace's time goes: seconds per trace inside the three elementwise kernels (softmax,
    gelu, layernorm), the rest (matrix products, bias adds, residuals, recording) and the total."""
    from bertviz_lite import kernels

    names = ("softmax", "gelu", "layer_norm")  # whichever kernel kernels.FUSED names for each
    spent = dict.fromkeys(names, 0.0)
    originals = {name: kernels.FUSED[(name, "numpy", "float32")] for name in names}

    def timed(name):
        fn = originals[name]

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t
        return wrapper

    try:
        for name in names:
            kernels.FUSED[(name, "numpy", "float32")] = timed(name)
        model.trace_ids(ids)  # warm up
        spent.update(dict.fromkeys(names, 0.0))
        t = time.perf_counter()
        for _ in range(reps):
            model.trace_ids(ids)
        total = (time.perf_counter() - t) / reps
    finally:
        for name, fn in originals.items():
            kernels.FUSED[(name, "numpy", "float32")] = fn
    out = {name: spent[name] / reps for name in names}
    out.update(total=total, rest=total - sum(out.values()))
    return out


def worker_hf(n: int, reps: int) -> dict:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(attn_implementation="eager")
    model = BertModel(cfg).eval()
    ids = torch.randint(1000, 30000, (1, n))
    ids[0, 0], ids[0, -1] = 101, 102

    def run():
        with torch.inference_mode():
            return model(input_ids=ids, output_attentions=True, output_hidden_states=True)

    return {"hf_s": _median_time(run, reps), "torch": torch.__version__,
            "threads": torch.get_num_threads()}


# ---------------------------------------------------------------------------------------------
# the orchestrator
# ---------------------------------------------------------------------------------------------


def run_worker(python: str, kind: str, n: int, reps: int, env: dict) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", kind, "--n", str(n), "--reps", str(reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32,128,512")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--peer-python", default=None, help="a python with torch + transformers (the peer)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--worker", choices=["engine", "hf"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        result = (worker_engine if args.worker == "engine" else worker_hf)(args.n, args.reps)
        print(json.dumps(result))
        return

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE")
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, list[tuple[dict, dict | None]]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        for n in sizes:
            hf = run_worker(args.peer_python, "hf", n, args.reps, env) if args.peer_python else None
            eng = run_worker(sys.executable, "engine", n, args.reps, env)
            results[n].append((eng, hf))
            line = (f"round {r + 1} n={n:4d}: trace {eng['trace_s'] * 1e3:7.1f} ms  nokeep {eng['nokeep_s'] * 1e3:7.1f} ms"
                    f"  floor {eng['floor_s'] * 1e3:7.1f} ms")
            if hf:
                line += f"  hf {hf['hf_s'] * 1e3:7.1f} ms"
            print(line, flush=True)

    spin = os.environ.get("OPENBLAS_THREAD_TIMEOUT", "4, bertviz_lite's default")
    print(f"\nBERT-base, batch 1, float32, {args.threads} threads, OPENBLAS_THREAD_TIMEOUT {spin}; "
          "ratios per round: median [min-max]")
    head = f"{'n':>4}  {'trace/floor':>18}  {'nokeep/floor':>18}  {'trace/hf':>18}  {'trace ms':>9}  {'floor ms':>9}  {'hf ms':>9}"
    print(head)
    for n in sizes:
        rows = results[n]
        tf = [e["trace_s"] / e["floor_s"] for e, _ in rows]
        nf = [e["nokeep_s"] / e["floor_s"] for e, _ in rows]
        th = [e["trace_s"] / h["hf_s"] for e, h in rows if h]
        hf_ms = f"{statistics.median([h['hf_s'] for _, h in rows if h]) * 1e3:9.1f}" if th else f"{'-':>9}"
        print(f"{n:>4}  {spread(tf):>18}  {spread(nf):>18}  {spread(th) if th else '-':>18}  "
              f"{statistics.median([e['trace_s'] for e, _ in rows]) * 1e3:9.1f}  "
              f"{statistics.median([e['floor_s'] for e, _ in rows]) * 1e3:9.1f}  {hf_ms}")
    print(f"\n{'n':>4}  {'ablate/trace':>18}  {'formula/trace':>18}  (edits and the formula path against a plain trace)")
    for n in sizes:
        rows = results[n]
        print(f"{n:>4}  {spread([e['ablate_s'] / e['trace_s'] for e, _ in rows]):>18}  "
              f"{spread([e['formula_s'] / e['trace_s'] for e, _ in rows]):>18}")
    print(f"\n{'n':>4}  {'trace MiB':>10}  {'held/bytes':>10}  {'fp16/fp32':>9}  {'probs-only MiB':>14}  {'peak RSS MiB':>12}")
    for n in sizes:
        e = results[n][-1][0]
        print(f"{n:>4}  {e['trace_bytes'] / 2**20:10.1f}  {e['held_bytes'] / e['trace_bytes']:10.3f}  "
              f"{e['trace16_bytes'] / e['trace_bytes']:9.3f}  {e['probs_bytes'] / 2**20:14.1f}  {e['peak_rss_mb']:12.0f}")
    print("\nwhere a trace's time goes (last round, ms per trace; 'rest' is the matrix products, bias adds,"
          "\nresiduals and recording, to compare with the floor)")
    print(f"{'n':>4}  {'total':>8}  {'softmax':>8}  {'gelu':>8}  {'layernorm':>9}  {'rest':>8}  {'floor':>8}  {'rest/floor':>10}")
    for n in sizes:
        e = results[n][-1][0]
        k = {name: v * 1e3 for name, v in e["kernels_s"].items()}
        print(f"{n:>4}  {k['total']:8.1f}  {k['softmax']:8.1f}  {k['gelu']:8.1f}  {k['layer_norm']:9.1f}  "
              f"{k['rest']:8.1f}  {e['floor_s'] * 1e3:8.1f}  {k['rest'] / (e['floor_s'] * 1e3):10.2f}")
    if not args.peer_python:
        print("\n(no --peer-python: Hugging Face transformers not measured; see the docstring to install it)")


if __name__ == "__main__":
    main()
