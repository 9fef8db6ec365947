"""The GPU path against its peers, in one run: issue 42's table and its goals (BERT-base, random weights,
seed 0, batch 1, float32 unless said; every time a median of --reps runs, the device synchronised after each).

    .venv/bin/python benchmarks/bench_gpu.py                         # needs cupy and a CUDA GPU
    .venv/bin/python benchmarks/bench_gpu.py --json gpu.json         # the same, every number also as JSON
    .venv/bin/python benchmarks/bench_gpu.py --check --json gpu.json # parity first, the cupy kernels on (below)

--check runs the cupy kernels (BERTVIZ_LITE_CUPY_KERNELS=1 in every worker) and, before the table, checks them:
  - every kernel of kernels.FUSED for cupy against the formula line it replaces (engine.<line>.formula), on the
    GPU, on shapes that do and do not fill a warp, with masked keys; and the float16 narrowing against astype;
  - every trace key on the GPU against the numpy engine (same weights): 32 and 512 token ids, a padded sentence
    pair, a batch of four sentences, each with the kernels and with the formula lines (fast=False), and a
    float16 trace; relative error = max |gpu - numpy| / max |numpy| per key, at most 1e-5 (float16: 1e-3);
then the table. It exits with status 1 when any check fails, after printing which. About 3 minutes on an H100.

Each side runs in its own process (one after the other), so no side's memory pool or threads slow another:
  - cupy (the engine on the GPU), per n: trace_ids recording every key; keep=[]; dtype='float16'; the floor
    (the same matrix products in cupy alone: Q, K, V, QK^T, AV, W^O, FFN up and down, nothing else);
    then tr.to_host() of the 512-token trace in GB/s, against one .get() per key (pageable memory, as before);
    trace_batch of 64 sentences; head_stats over 256 sentences (data/wordnet_examples.txt)
  - torch (the peer, on the same GPU), per n: transformers' BertModel with eager attention returning
    attentions and hidden states (what a trace records, roughly), and with sdpa returning neither (keep=[]'s peer)
  - numpy (the engine on the CPU, every core), per n: trace_ids; and the same trace_batch and head_stats
torch is a peer, never a dependency: without torch and transformers in this python (or --peer-python) its
columns are left out, and so are the goals measured against it.

Without a GPU (cupy missing, or cupy.is_available() False) it measures nothing and exits with status 2.
`--dry-run` needs no GPU: it runs every part of this script at tiny sizes (8 and 16 tokens, 1 rep, 4 and 8
sentences), the cupy worker's code on the CPU's GPU stand-in (array_api_strict's device1) and the numpy worker,
then the table, the goals and --json: a check that the script will not fail on first use, with no timing
worth reading (tests/tools/test_scripts.py runs it). With --check, the check's code runs too: the trace keys on
the stand-in against numpy, and the kernel check over numpy's FUSED kernels (the stand-in has none).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(ROOT, "data", "wordnet_examples.txt")

# issue 42, measured on an H100 at f44e7d1, before the GPU-path work: (now, goal, which way is better)
GOALS = [
    ("trace, 512 tokens, every key / torch eager with outputs", 2.92, 0.6, "lower"),
    ("trace, 32 tokens / torch eager with outputs", 2.74, 1.0, "lower"),
    ("keep=[], 512 / torch sdpa", 3.25, 1.2, "lower"),
    ("float16 trace / float32 trace, 512", 1.22, 0.7, "lower"),
    ("to_host of a 512-token trace, GB/s", 8.8, 20.0, "higher"),
    ("head_stats, 256 sentences, numpy / GPU time", 6.8, 15.0, "higher"),
]


def median_time(fn, reps: int, sync=lambda: None) -> float:
    fn()  # warm up: kernels compiled, memory pools filled, caches
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def token_ids(n: int) -> list[int]:
    import random
    rng = random.Random(n)
    return [101] + [rng.randrange(1000, 30000) for _ in range(n - 2)] + [102]


def corpus(count: int) -> list[str]:
    with open(CORPUS, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:count]


# ---------------------------------------------------------------------------------------------
# workers (each runs in its own process and prints one JSON line)
# ---------------------------------------------------------------------------------------------


def floor(model, n: int):
    """The forward's matrix products alone, in the model's namespace, as a function to time. Each layer's
    output is scaled back to unit rms (scales found once, untimed), so no value drifts far from 1."""
    xp, W, c = model.xp, model.weights, model.config
    L, A = c.num_layers, c.num_heads
    from bertviz_lite import backend
    import numpy as np
    Z0 = backend.from_host(np.random.default_rng(1).standard_normal((n, c.hidden_size), dtype=np.float32), xp)
    scales = [1.0] * L

    def products(measure: bool = False):
        Z = Z0
        for layer in range(L):
            p = f"layer.{layer}."
            q, k, v = (Z @ W[p + f"attn.W_{x}"] for x in "QKV")
            qh, kh, vh = (xp.permute_dims(xp.reshape(t, (n, A, -1)), (1, 0, 2)) for t in (q, k, v))
            ctx = (qh @ xp.permute_dims(kh, (0, 2, 1))) @ vh  # [A, n, d]
            Z = xp.reshape(xp.permute_dims(ctx, (1, 0, 2)), (n, -1)) @ W[p + "attn.W_O"]
            Z = (Z @ W[p + "ffn.W_up"]) @ W[p + "ffn.W_down"]
            if measure:
                scales[layer] = 1.0 / float(backend.to_host(xp.sqrt(xp.mean(Z * Z))))
            Z = Z * scales[layer]
        return Z

    products(measure=True)
    return products


def worker_engine(backend_name: str, sizes: list[int], reps: int, batch_sentences: int, stats_sentences: int) -> dict:
    """The engine on one backend: per n trace, keep=[], float16, the formula lines (fast=False) and (on a device)
    the floor; to_host; batches. numpy (every core, ~0.5 s a 512-token trace) runs at most 3 reps."""
    sys.path.insert(0, ROOT)
    import bertviz_lite as bv
    from bertviz_lite import backend, corpus as bv_corpus, kernels

    reps = reps if backend_name != "numpy" else min(reps, 3)
    model = bv.load("random", seed=0, backend=backend_name)
    sync = lambda: None  # noqa: E731
    if backend_name == "cupy":
        import cupy
        sync = cupy.cuda.Device().synchronize
    device = backend_name in backend.DEVICE_BACKENDS
    out: dict = {"backend": backend_name, "per_n": {}, "reps": reps,
                 "cupy_kernels": backend_name == "cupy" and kernels.cupy_kernels_enabled()}
    for n in sizes:
        ids = token_ids(n)
        row = {"trace_s": median_time(lambda: model.trace_ids(ids), reps, sync)}
        if device:
            row["nokeep_s"] = median_time(lambda: model.trace_ids(ids, keep=[]), reps, sync)
            if hasattr(model.xp, "float16"):
                row["trace16_s"] = median_time(lambda: model.trace_ids(ids, dtype="float16"), reps, sync)
            row["formula_s"] = median_time(lambda: model.trace_ids(ids, fast=False), reps, sync)
            row["floor_s"] = median_time(floor(model, n), reps, sync)
        out["per_n"][str(n)] = row
    if device:
        tr = model.trace_ids(token_ids(max(sizes)))
        sync()
        per_key = lambda: {k: backend.to_host(tr[k]) for k in tr.keys()}  # noqa: E731  (the old way)
        out["to_host"] = {"n": max(sizes), "bytes": tr.nbytes,
                          "to_host_s": median_time(tr.to_host, reps), "per_key_get_s": median_time(per_key, reps)}
    texts = corpus(batch_sentences)
    out["trace_batch_s"] = median_time(lambda: model.trace_batch(texts, progress=False), reps, sync)
    stats_texts = corpus(stats_sentences)
    out["head_stats_s"] = median_time(lambda: bv_corpus.head_stats(model, stats_texts, progress=False),
                                      max(1, reps // 2), sync)
    stats = bv_corpus.head_stats(model, stats_texts, progress=False)
    out["head_stats"] = {name: backend.to_host(stats[name]).tolist() for name in bv_corpus.STATS}
    return out


def worker_torch(sizes: list[int], reps: int) -> dict:
    """transformers' BertModel on the GPU: eager attention with attentions and hidden states, and sdpa with none."""
    import torch
    from transformers import BertConfig, BertModel

    dev = torch.device("cuda")
    torch.manual_seed(0)
    eager = BertModel(BertConfig(attn_implementation="eager")).eval().to(dev)
    sdpa = BertModel(BertConfig(attn_implementation="sdpa")).eval().to(dev)
    out = {"torch": torch.__version__, "tf32": torch.backends.cuda.matmul.allow_tf32, "per_n": {}}
    for n in sizes:
        ids = torch.tensor([token_ids(n)], device=dev)

        def with_outputs():
            with torch.inference_mode():
                return eager(input_ids=ids, output_attentions=True, output_hidden_states=True)

        def no_outputs():
            with torch.inference_mode():
                return sdpa(input_ids=ids)

        out["per_n"][str(n)] = {"eager_s": median_time(with_outputs, reps, torch.cuda.synchronize),
                                "sdpa_s": median_time(no_outputs, reps, torch.cuda.synchronize)}
    return out


# ---------------------------------------------------------------------------------------------
# --check: the kernels against their formula lines, every trace key against numpy
# ---------------------------------------------------------------------------------------------

KEY_TOLERANCE = 1e-5  # relative (to the key's largest |value|), the bar for turning the kernels on
FLOAT16_TOLERANCE = 1e-3  # a float16 trace against numpy's float16 trace: rounding to 11 bits, 2^-11 ~ 4.9e-4
# shapes the kernels are checked on: some fill no warp, one is BERT-base's scores at 512 tokens
KERNEL_SHAPES = [(3, 5, 7), (12, 37, 37), (2, 300, 300), (1, 12, 512, 512), (1, 1, 1), (2, 7, 768), (5, 33)]


def relative_error(got, want, floor: float = 0.0) -> float:
    """max |got - want| / max(max |want|, floor) over the finite entries (0 when both are 0 everywhere); inf when
    the two disagree on which entries are finite (a -inf on a [PAD] key must stay where it was). floor=1 makes
    it an absolute error for values below 1 (probabilities; a gelu of one small value)."""
    import numpy as np
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.array_equal(np.isfinite(got), np.isfinite(want)) \
            or not np.array_equal(got[~np.isfinite(got)], want[~np.isfinite(want)]):
        return float("inf")
    finite = np.isfinite(want)
    if not finite.any():
        return 0.0
    diff = np.abs(got[finite] - want[finite]).max()
    scale = max(float(np.abs(want[finite]).max()), floor)
    return float(diff / scale) if scale > 0 else (0.0 if diff == 0 else float("inf"))


def kernel_inputs(shape, seed: int):
    """Host float32 inputs: scores s with a masked (-inf) key in every row, finite values y, gamma and beta."""
    import numpy as np
    rng = np.random.default_rng(seed)
    s = (rng.standard_normal(shape) * 4).astype(np.float32)
    if shape[-1] > 1:
        s[..., 0] = -np.inf
    y = np.where(np.isfinite(s), s, 1.5).astype(np.float32)
    gamma, beta = (rng.standard_normal(shape[-1]).astype(np.float32) for _ in range(2))
    return s, y, gamma, beta


def check_kernels(backend_name: str) -> list[dict]:
    """Every kernels.FUSED kernel for backend_name (float32) against the formula line it replaces, run in that
    backend on the same arrays, and (cupy) the float16 narrowing against astype. One row per kernel and input."""
    import numpy as np
    from bertviz_lite import backend, engine, kernels, schema
    xp = backend.get_namespace(backend_name)
    put = lambda a: backend.from_host(a, xp)  # noqa: E731
    host = backend.to_host
    rows = []

    def row(kernel, shape, error, tolerance, note=""):
        rows.append({"kernel": kernel, "shape": list(shape), "error": error, "tolerance": tolerance,
                     "held": bool(error <= tolerance), "note": note})

    names = {name for name, b, dt in kernels.FUSED if b == backend_name and dt == "float32"}
    for i, shape in enumerate(KERNEL_SHAPES):
        s, y, gamma, beta = (put(a) for a in kernel_inputs(shape, i))
        if "softmax" in names:
            fused = host(kernels.FUSED[("softmax", backend_name, "float32")](s, xp))
            masked_zero = shape[-1] == 1 or bool(np.all(fused[..., 0] == 0))
            err = relative_error(fused, host(engine.softmax.formula(s, xp)), floor=1.0)
            row("softmax", shape, err if masked_zero else float("inf"), 2e-7, "" if masked_zero else "[PAD] not 0")
        if "gelu" in names:
            fused = host(kernels.FUSED[("gelu", backend_name, "float32")](y, xp))
            row("gelu", shape, relative_error(fused, host(engine.gelu.formula(y, xp)), floor=1.0), 2e-6)
        if "layer_norm" in names:
            fused = kernels.FUSED[("layer_norm", backend_name, "float32")](y, gamma, beta, 1e-12, xp)
            formula = engine.layer_norm.formula(y, gamma, beta, 1e-12, xp)
            row("layer_norm", shape, relative_error(host(fused), host(formula), floor=1.0), 2e-6)
    rng = np.random.default_rng(7)
    for lead, n, H, n_h in [((), 5, 64, 4), ((3,), 37, 128, 4), ((), 512, 768, 12), ((2,), 9, 768, 12)]:
        Z = put((rng.standard_normal((*lead, n, H)) * 0.5).astype(np.float32))
        if "matmul" in names:
            W = put((rng.standard_normal((H, 2 * H)) / np.sqrt(H)).astype(np.float32))
            fused = kernels.FUSED[("matmul", backend_name, "float32")](Z, W, xp)
            row("matmul", (*lead, n, H), relative_error(host(fused), host(engine.matmul.formula(Z, W, xp))), 1e-5)
        if "queries_keys_values" in names:
            weights = {f"layer.0.attn.W_{x}": put((rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32))
                       for x in "QKV"}
            weights.update({f"layer.0.attn.b_{x}": put(rng.standard_normal(H).astype(np.float32)) for x in "QKV"})
            packed = kernels.pack_qkv(weights, schema.layer_prefix(0))
            weights.update(zip((schema.layer_prefix(0) + k for k in kernels.QKV_WEIGHTS), packed.views))
            W = engine.LayerWeights(weights, 0, packed)
            fused = kernels.FUSED[("queries_keys_values", backend_name, "float32")](Z, W, n_h, xp)
            formula = engine.queries_keys_values.formula(Z, W, n_h, xp)
            row("queries_keys_values", (*lead, n, H),
                max(relative_error(host(a), host(b)) for a, b in zip(fused, formula)), 1e-5)
    if backend_name == "cupy":  # the float16 narrowing: the same bits as astype, and the same overflow flag
        from bertviz_lite import cuda_kernels
        for shape, big in [((7, 33), False), ((12, 512, 512), False), ((3, 768), True)]:
            x = rng.standard_normal(shape).astype(np.float32) * 300
            if big:
                x[0, :5] = [7e4, -7e4, np.inf, -np.inf, 65504.0]
            half, flag = cuda_kernels.narrow_half(put(x))
            want = x.astype(np.float16)
            same_bits = np.array_equal(host(half).view(np.uint16), want.view(np.uint16))
            flag_right = bool(host(flag)) == bool(np.any(np.isinf(want) & np.isfinite(x)))
            row("narrow float16", shape, 0.0 if same_bits and flag_right else float("inf"), 0.0,
                "" if same_bits and flag_right else f"same bits {same_bits}, flag right {flag_right}")
    return rows


def check_trace_keys(backend_name: str, sizes: list[int]) -> list[dict]:
    """Every trace key on backend_name against the numpy engine with the same weights (load('random', seed=0)),
    with the fast path (the kernels) and with the formula lines; one row per input and path: its worst key."""
    import bertviz_lite as bv
    device = bv.load("random", seed=0, backend=backend_name)
    cpu = bv.load("random", seed=0, backend="numpy")
    small, big = min(sizes), max(sizes)
    pair = ("The cat sat on the mat because it was warm.", "It purred.")
    texts = corpus(4)
    inputs = [
        (f"{small} token ids", lambda m, **o: m.trace_ids(token_ids(small), **o)),
        (f"{big} token ids", lambda m, **o: m.trace_ids(token_ids(big), **o)),
        ("a sentence pair padded to 64", lambda m, **o: m.trace(*pair, pad_to=64, **o)),
        ("a batch of 4 sentences", lambda m, **o: m.trace_batch(texts, progress=False, **o)),
    ]
    rows = []
    for what, run in inputs:
        want = run(cpu)
        for path, options in (("kernels", {}), ("formula lines", {"fast": False})):
            got = run(device, **options).to_host()
            errors = {key: relative_error(got[key], want[key]) for key in want.keys()}
            missing = sorted(set(want.keys()) ^ set(got.keys()))
            worst = max(errors, key=errors.get)
            rows.append({"input": what, "path": path, "keys": len(errors), "worst_key": worst,
                         "error": errors[worst] if not missing else float("inf"), "tolerance": KEY_TOLERANCE,
                         "held": bool(errors[worst] <= KEY_TOLERANCE and not missing),
                         "note": f"keys missing on one side: {missing[:4]}" if missing else ""})
    if hasattr(device.xp, "float16"):
        want = cpu.trace_ids(token_ids(small), dtype="float16")
        got = device.trace_ids(token_ids(small), dtype="float16").to_host()
        errors = {key: relative_error(got[key], want[key]) for key in want.keys()}
        worst = max(errors, key=errors.get)
        rows.append({"input": f"{small} token ids, stored as float16", "path": "kernels", "keys": len(errors),
                     "worst_key": worst, "error": errors[worst], "tolerance": FLOAT16_TOLERANCE,
                     "held": bool(errors[worst] <= FLOAT16_TOLERANCE), "note": ""})
    return rows


def worker_check(backend_name: str, sizes: list[int]) -> dict:
    """--check's worker: the kernels against their lines (numpy's on the stand-in, which has no kernels of its
    own: a dry run of the code) and every trace key against numpy."""
    sys.path.insert(0, ROOT)
    from bertviz_lite import kernels
    kernel_backend = "numpy" if backend_name == "gpu_standin" else backend_name
    return {"backend": backend_name, "kernels_on": kernels.cupy_kernels_enabled(),
            "kernel_rows": check_kernels(kernel_backend), "key_rows": check_trace_keys(backend_name, sizes)}


def print_check(check: dict) -> bool:
    """The check's rows as two tables; True when every row held."""
    e = lambda v: "inf" if v == float("inf") else f"{v:.1e}"  # noqa: E731
    print(f"\nkernels against their formula lines ({check['backend'] if check['backend'] != 'gpu_standin' else 'numpy'}"
          f"): relative error (max |kernel - line| / max |line|)")
    for k in dict.fromkeys(r["kernel"] for r in check["kernel_rows"]):
        rows = [r for r in check["kernel_rows"] if r["kernel"] == k]
        r = max(rows, key=lambda x: x["error"])
        bad = [x for x in rows if not x["held"]]
        print(f"  {k:<22} worst {e(r['error']):>8} at {tuple(r['shape'])}, tolerance {e(r['tolerance'])}: "
              f"{'held' if not bad else 'FAILED on ' + ', '.join(str(tuple(x['shape'])) for x in bad)} {r['note']}")
    paths = "the stand-in has no kernels: both paths run the formula lines" if check["backend"] != "cupy" else \
        f"cupy kernels {'on' if check['kernels_on'] else 'off'} on the fast path"
    print(f"\nevery trace key on {check['backend']} against numpy ({paths}): worst key per input")
    for r in check["key_rows"]:
        print(f"  {r['input']:<36} {r['path']:<14} {r['keys']:>4} keys, worst {e(r['error']):>8} "
              f"({r['worst_key']}), tolerance {e(r['tolerance'])}: {'held' if r['held'] else 'FAILED'} {r['note']}")
    held = all(r["held"] for r in check["kernel_rows"] + check["key_rows"])
    print(f"\nPARITY {'HELD' if held else 'FAILED'}")
    return held


# ---------------------------------------------------------------------------------------------
# the orchestrator
# ---------------------------------------------------------------------------------------------


def run_worker(python: str, kind: str, args) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", kind, "--sizes", args.sizes, "--reps", str(args.reps),
           "--batch-sentences", str(args.batch_sentences), "--stats-sentences", str(args.stats_sentences)]
    env = dict(os.environ)
    if args.check:  # the check measures and checks the cupy kernels, whatever their default
        env["BERTVIZ_LITE_CUPY_KERNELS"] = "1"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"the {kind} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def has_torch_cuda(python: str) -> bool:
    code = "import torch, transformers; raise SystemExit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def goals(gpu: dict, cpu: dict, peer: dict | None, sizes: list[int]) -> list[dict]:
    """The issue's goals, each measured in this run (None where a side is missing)."""
    def at(side, n, key):
        return side["per_n"].get(str(n), {}).get(key) if side else None

    def ratio(a, b):
        return None if a is None or b is None else a / b

    big, small = max(sizes), min(sizes)
    th = gpu.get("to_host")
    measured = [
        ratio(at(gpu, big, "trace_s"), at(peer, big, "eager_s")),
        ratio(at(gpu, small, "trace_s"), at(peer, small, "eager_s")),
        ratio(at(gpu, big, "nokeep_s"), at(peer, big, "sdpa_s")),
        ratio(at(gpu, big, "trace16_s"), at(gpu, big, "trace_s")),
        th["bytes"] / th["to_host_s"] / 1e9 if th else None,
        ratio(cpu["head_stats_s"], gpu["head_stats_s"]),
    ]
    rows = []
    for (what, now, goal, better), value in zip(GOALS, measured):
        met = None if value is None else (value <= goal if better == "lower" else value >= goal)
        rows.append({"goal": what, "before (H100, f44e7d1)": now, "target": goal, "measured": value, "met": met})
    return rows


def flat(nested) -> list[float]:
    """A nested list of numbers (a statistic as JSON) as one flat list."""
    return [y for x in nested for y in flat(x)] if isinstance(nested, list) else [float(nested)]


def gpu_name() -> str:
    try:
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    except Exception as e:  # noqa: BLE001  (only a label)
        return f"unknown ({type(e).__name__})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32,128,512")
    ap.add_argument("--reps", type=int, default=20, help="runs per GPU timing (numpy's: at most 3)")
    ap.add_argument("--check", action="store_true",
                    help="first check the cupy kernels against their formula lines and every trace key against "
                         "numpy (exit status 1 if any fails), and time with the kernels on")
    ap.add_argument("--batch-sentences", type=int, default=64, help="sentences in the trace_batch timing")
    ap.add_argument("--stats-sentences", type=int, default=256, help="sentences in the head_stats timing")
    ap.add_argument("--json", default=None, help="also write every number to this file")
    ap.add_argument("--peer-python", default=sys.executable, help="a python with torch + transformers (the peer)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: every part of the script at tiny sizes, the GPU's code on the CPU's "
                         "GPU stand-in; no timing worth reading")
    ap.add_argument("--worker", choices=["cupy", "numpy", "torch", "gpu_standin", "check-cupy", "check-gpu_standin"],
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dry_run:
        args.sizes, args.reps, args.batch_sentences, args.stats_sentences = "8,16", 1, 4, 8
    sizes = [int(s) for s in args.sizes.split(",")]

    if args.worker:
        if args.worker.startswith("check-"):
            result = worker_check(args.worker[len("check-"):], sizes)
        elif args.worker == "torch":
            result = worker_torch(sizes, args.reps)
        else:
            result = worker_engine(args.worker, sizes, args.reps, args.batch_sentences, args.stats_sentences)
        print(json.dumps(result))
        return 0

    sys.path.insert(0, ROOT)
    from bertviz_lite import backend
    if not args.dry_run and not backend.cupy_available():
        print("bench_gpu.py measures the GPU path: it needs cupy and a CUDA GPU (cupy.is_available() is False "
              "here, or cupy is not installed). Nothing was measured. (--dry-run checks the script without one.)",
              file=sys.stderr)
        return 2

    device = "the GPU stand-in (array_api_strict on the CPU): a DRY RUN, no timing worth reading" if args.dry_run \
        else gpu_name()
    print(f"GPU: {device}; cpu cores: {os.cpu_count()}; python {platform.python_version()}", flush=True)
    check, held = None, True
    if args.check:
        check = run_worker(sys.executable, "check-gpu_standin" if args.dry_run else "check-cupy", args)
        held = print_check(check)
    gpu = run_worker(sys.executable, "gpu_standin" if args.dry_run else "cupy", args)
    print("cupy done" if not args.dry_run else "the GPU worker's code done on the stand-in", flush=True)
    peer = run_worker(args.peer_python, "torch", args) if not args.dry_run and has_torch_cuda(args.peer_python) \
        else None
    print("torch done" if peer else "torch: not measured (no torch/transformers with CUDA in --peer-python)",
          flush=True)
    cpu = run_worker(sys.executable, "numpy", args)

    ms = lambda s: "-" if s is None else f"{s * 1e3:.1f}"  # noqa: E731
    kernels_state = "the stand-in: no kernels" if gpu["backend"] != "cupy" else \
        f"cupy kernels {'on' if gpu.get('cupy_kernels') else 'off'}"
    print(f"\nthe engine on the GPU ({kernels_state}); ms, median of "
          f"{gpu['reps']} (numpy: of {cpu['reps']})")
    print(f"{'n':>4}  {'trace':>8}  {'keep=[]':>8}  {'float16':>8}  {'formula':>8}  {'floor':>8}  {'torch eager':>11}  "
          f"{'torch sdpa':>10}  {'numpy':>8}")
    for n in sizes:
        g, p, c = gpu["per_n"][str(n)], (peer or {}).get("per_n", {}).get(str(n), {}), cpu["per_n"][str(n)]
        print(f"{n:>4}  {ms(g['trace_s']):>8}  {ms(g.get('nokeep_s')):>8}  {ms(g.get('trace16_s')):>8}  "
              f"{ms(g.get('formula_s')):>8}  {ms(g['floor_s']):>8}  {ms(p.get('eager_s')):>11}  {ms(p.get('sdpa_s')):>10}  "
              f"{ms(c['trace_s']):>8}")
    th = gpu["to_host"]
    print(f"\nto_host of a {th['n']}-token trace ({th['bytes'] / 1e6:.0f} MB): {th['bytes'] / th['to_host_s'] / 1e9:.1f} "
          f"GB/s; one .get() per key: {th['bytes'] / th['per_key_get_s'] / 1e9:.1f} GB/s")
    print(f"trace_batch of {args.batch_sentences} sentences: {gpu['trace_batch_s']:.3f} s on the GPU, "
          f"{cpu['trace_batch_s']:.3f} s on numpy ({cpu['trace_batch_s'] / gpu['trace_batch_s']:.1f}x)")
    stats_diff = max(abs(a - b) for name in gpu["head_stats"]
                     for a, b in zip(flat(gpu["head_stats"][name]), flat(cpu["head_stats"][name])))
    print(f"head_stats over {args.stats_sentences} sentences: {gpu['head_stats_s']:.2f} s on the GPU, "
          f"{cpu['head_stats_s']:.2f} s on numpy ({cpu['head_stats_s'] / gpu['head_stats_s']:.1f}x); "
          f"the statistics differ by {stats_diff:.1e} at most")
    table = goals(gpu, cpu, peer, sizes)
    if args.dry_run:  # the stand-in's numbers meet or miss nothing
        table = [{**r, "met": None} for r in table]
    print(f"\n{'goal':<58} {'before':>7} {'target':>7} {'now':>7}  met")
    for r in table:
        now = "-" if r["measured"] is None else f"{r['measured']:.2f}"
        print(f"{r['goal']:<58} {r['before (H100, f44e7d1)']:>7} {r['target']:>7} {now:>7}  "
              f"{'-' if r['met'] is None else ('yes' if r['met'] else 'no')}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"gpu": device, "dry_run": args.dry_run, "cpu_cores": os.cpu_count(), "sizes": sizes, "reps": args.reps,
                       "check": check, "parity_held": held if args.check else None,
                       "cupy": gpu, "torch": peer, "numpy": cpu, "head_stats_max_difference": stats_diff,
                       "goals": table}, f, indent=1, default=str)
        print(f"\nwritten: {args.json}")
    if not held:
        print("PARITY FAILED (above): the cupy kernels must stay off by default", file=sys.stderr)
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
