"""Fit BERT's masked-LM head on the frozen all-MiniLM-L6-v2 and write the file `load("minilm")` ships.

    .venv/bin/python training/train_mlm_head.py            # fit, write bertviz_lite/data/minilm_mlm_head.*
    .venv/bin/python training/train_mlm_head.py --check    # fit again, exit 1 unless the bytes are the same
    .venv/bin/python training/train_mlm_head.py --sentences 2000 --out /tmp/h  # a small run elsewhere

What it does (every choice and its reason is in training/JOURNAL.md, "The masked-LM head"):
1. the corpus: WordNet 3.0's definitions and example sentences (data/, training/make_corpus.py),
   tokenized; sentences of more than MAX_TOKENS pieces are left out; a seeded permutation puts
   HELDOUT of them aside, never trained on;
2. BERT's masking (bertviz_lite.mlm.choose_masks: 15% of the pieces, 80% [MASK] / 10% random /
   10% kept), one draw per sentence, seeded;
3. the frozen encoder's last layer Z_L at the chosen positions, batched through
   `trace_encodings` (model.trace_batch's path for ready inputs) with keep= only that layer;
   cached in a private folder (training/private_files.py: mode 0700, yours, no links, written atomically,
   checked before use), one file per key of everything that determines it;
4. the head (bertviz_lite.mlm: dense H x H, GELU, LayerNorm, decoder tied to W_T, output bias)
   trained with minibatch Adam and BERT's linear warm-up/decay on the cross-entropy of the
   chosen rows, gradients written by hand; the output bias starts at the log-frequency of the
   training targets (the unigram model), every other tensor at BERT's initialisation;
5. held-out top-1/top-5 of the fitted head against the unigram baseline and the untrained head,
   by word class (content, function, other) and by what the encoder saw ([MASK], random, kept);
6. the head as safetensors (float32, the five learned tensors: W_T is MiniLM's own) and a JSON
   beside it with the settings, the loss curve, the held-out numbers and example predictions,
   replaced as a pair (private_files.write_pair). The arguments, --out, its .json and the cache
   are checked before any work.

NumPy with OpenBLAS on 2 threads; the same machine, library versions and thread count give the
same bytes (--check). Takes about 7 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
from make_corpus import OUT as EXAMPLES, read_glosses  # noqa: E402
from private_files import (CACHE, cache_problem, cached_arrays, check_free_space, model_sha256,  # noqa: E402
                           output_problem, path_argument, read_regular, read_run_json, refusals_as_lines,
                           whole_number, write_pair)

import weights_files as WF  # noqa: E402  (the writer of what the package reads)
import bertviz_lite as bv  # noqa: E402
from bertviz_lite import loading, mlm  # noqa: E402
from bertviz_lite.batch import pad_encoding, trace_encodings  # noqa: E402

OUT = ROOT / "bertviz_lite" / "data" / loading.MINILM_HEAD_FILE
SEED = 0
SENTENCES = 20_000  # sentences tokenized and split (train + held-out), from the shuffled corpus
HELDOUT = 0.05  # share of them set aside for the held-out numbers
MAX_TOKENS = 48  # longer definitions (about 1%) are left out: they cost the most per masked piece
EPOCHS = 3
BATCH = 256  # masked rows per Adam step
PEAK_LR = 2e-3
FORWARD_BATCH = 256  # sentences per encoder forward
EXAMPLES_TO_SHOW = ("The capital of France is [MASK].", "The cat sat on the [MASK].",
                    "Paris is the [MASK] of France.", "She drank a cup of hot [MASK].",
                    "He played the [MASK] in the orchestra.", "I love machine [MASK].")


def corpus() -> list[str]:
    """WordNet's definitions, then its example sentences (data/)."""
    return read_glosses() + EXAMPLES.read_text(encoding="utf-8").splitlines()


def sample(model, sentences, limit: int, rng) -> list[tuple[int, object]]:
    """A seeded sample of `limit` sentences: (index in `sentences`, encoding); those over MAX_TOKENS pieces
    are dropped."""
    out = []
    for i in rng.permutation(len(sentences)):
        e = model.tokenize(sentences[int(i)])
        if len(e.ids) <= MAX_TOKENS:
            out.append((int(i), e))
        if len(out) == limit:
            break
    return out


def encode(model, sentences, limit: int, rng):
    """A seeded sample of `limit` sentences, tokenized; those over MAX_TOKENS pieces are dropped."""
    return [e for _, e in sample(model, sentences, limit, rng)]


def features(model, encs, rng, layer: int, progress: bool = True):
    """Mask each encoding once (BERT's recipe) and run the frozen encoder: (Z rows [N, H], targets [N],
    kinds [N] (0 [MASK], 1 random, 2 kept), sentence index [N])."""
    tok = model.tokenizer
    special = {tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")}
    masked = [mlm.choose_masks(e.ids, rng, vocab_size=model.config.vocab_size, mask_id=tok.token_to_id("[MASK]"),
                               special_ids=special) for e in encs]
    key = f"layer.{layer}.ffn.ln"
    lengths = np.array([len(e.ids) for e in encs])
    order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
    rows, targets, kinds, which = [], [], [], []
    kind_code = {"mask": 0, "random": 1, "keep": 2}
    t0 = time.perf_counter()
    for b in range(0, len(order), FORWARD_BATCH):
        idx = [int(i) for i in order[b:b + FORWARD_BATCH]]
        n = int(lengths[idx].max())
        batch = [pad_encoding(replace(encs[i], ids=masked[i].ids), n, tok.token_to_id("[PAD]")) for i in idx]
        Z = np.asarray(trace_encodings(model, batch, [("",)] * len(batch), keep=[key])[key])  # [B, n, H]
        for j, i in enumerate(idx):
            rows.append(Z[j, masked[i].positions])
            targets += masked[i].targets
            kinds += [kind_code[k] for k in masked[i].kinds]
            which += [i] * len(masked[i].positions)
        if progress and (b // FORWARD_BATCH) % 40 == 0:
            print(f"  encoder: {b + len(idx):,} / {len(order):,} sentences, {time.perf_counter() - t0:.0f} s",
                  flush=True)
    return (np.concatenate(rows).astype(np.float32), np.array(targets, dtype=np.int64),
            np.array(kinds, dtype=np.int8), np.array(which, dtype=np.int64))


FEATURES = {"Z": np.float32, "targets": np.int64, "kinds": np.int8, "which": np.int64}  # features()'s arrays


def cached_features(model, encs, seed: int, layer: int, cache: Path, progress: bool = True):
    """features(), cached in the private folder `cache` (private_files.cached_arrays: mode 0700, ours, no link
    followed, written atomically) under a key of everything that determines them; a cached file is used only if
    its arrays have features()'s dtypes and one row each, and hold targets in the vocabulary, kinds 0-2 and
    sentence numbers of these encodings (and everything cached_arrays checks); otherwise made afresh."""
    key = hashlib.sha256(json.dumps([seed, layer, model.source, model_sha256(model),  # the weights too
                                     [e.ids for e in encs]]).encode()).hexdigest()
    c = model.config

    def make() -> dict:
        return dict(zip(FEATURES, features(model, encs, np.random.default_rng([seed, 1]), layer, progress)))

    def problem(f: dict):
        n = len(f["Z"])
        for name, dtype in FEATURES.items():
            want = (n, c.hidden_size) if name == "Z" else (n,)
            if f[name].dtype != dtype or f[name].shape != want:
                return f"{name} is {f[name].dtype} {f[name].shape}, expected {np.dtype(dtype)} {want}"
        for name, top in (("targets", c.vocab_size), ("kinds", 3), ("which", len(encs))):
            if n and not (0 <= f[name].min() and f[name].max() < top):
                return f"{name} holds values outside 0..{top - 1}"
        return None

    f = cached_arrays(cache, "head-input", key, tuple(FEATURES), make, problem, say=lambda s: print(s, flush=True))
    return tuple(f[name] for name in FEATURES)


def evaluate(params, Z, targets, W_T, c):
    ranks, losses = mlm.top_k_hits(params, Z, targets, W_T, c, xp=np)
    return ranks, losses


def summarise(ranks, losses, groups: dict) -> dict:
    """top-1, top-5 and mean loss over all rows and over each group of rows (a boolean mask)."""
    out = {}
    for name, sel in {"all": np.ones(len(ranks), bool), **groups}.items():
        n = int(sel.sum())
        out[name] = {"rows": n, "top1": float(np.mean(ranks[sel] < 1)) if n else None,
                     "top5": float(np.mean(ranks[sel] < 5)) if n else None,
                     "loss": float(np.mean(losses[sel])) if n else None}
    return out


def unigram_ranks(train_targets, targets, V: int):
    """The rank each target gets from the unigram model (training-target frequency, ties by id)."""
    counts = np.bincount(train_targets, minlength=V)
    order = np.lexsort((np.arange(V), -counts))  # most frequent first
    rank_of = np.empty(V, dtype=np.int64)
    rank_of[order] = np.arange(V)
    logp = np.log((counts + 1) / (counts.sum() + V))  # add-one smoothing, for the loss
    return rank_of[targets], -logp[targets]


def report(info: dict) -> str:
    """The held-out numbers and example predictions of a run's JSON as markdown tables (for the READMEs)."""
    held = info["heldout"]
    groups = ("all", "content", "function", "other", "[MASK]", "content [MASK]", "function [MASK]")
    lines = ["| held-out, top-1 / top-5 | " + " | ".join(f"{g} ({held['unigram'][g]['rows']:,})" for g in groups) + " |",
             "|---" * (len(groups) + 1) + "|"]
    for who in ("fitted head", "unigram", "untrained head"):
        lines.append(f"| {who} | " + " | ".join(f"{100 * held[who][g]['top1']:.1f}% / {100 * held[who][g]['top5']:.1f}%"
                                               for g in groups) + " |")
    lines.append("| held-out loss (nats) | " + " | ".join(
        " / ".join(f"{held[w][g]['loss']:.2f}" for w in ("fitted head", "unigram", "untrained head")) for g in groups) + " |")
    lines += ["", "| sentence | the fitted head's top 5 |", "|---|---|"]
    lines += [f"| {s} | " + ", ".join(f"{t} ({p:.2f})" for t, p in top) + " |" for s, top in info["examples"].items()]
    return "\n".join(lines)


LAYERS = 6  # all-MiniLM-L6-v2's layers (the config is checked against it in run)


def parse_args(argv=None):
    """The arguments, every one checked before any work: ranges, --out and its .json (a regular file or a new
    name, in a folder that exists and can be written), the cache folder."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=whole_number(40), default=SENTENCES,
                    help="sentences sampled (5%% held out); at least 40")
    ap.add_argument("--epochs", type=whole_number(1, 50), default=EPOCHS)
    ap.add_argument("--layer", type=whole_number(0, LAYERS - 1), default=None,
                    help=f"encoder layer that feeds the head, 0..{LAYERS - 1} (default: the last)")
    ap.add_argument("--seed", type=whole_number(0), default=SEED)
    ap.add_argument("--out", type=path_argument, default=OUT,
                    help="the .safetensors file to write (a .json goes beside it)")
    ap.add_argument("--cache", type=path_argument, default=CACHE,
                    help="a private folder (mode 0700, yours, not a link) for the encoder's features; made if "
                         "missing (default: %(default)s)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="fit again and compare with the file at --out")
    what.add_argument("--report", action="store_true", help="print the JSON's numbers as markdown tables, fit nothing")
    args = ap.parse_args(argv)
    reads = "--check" if args.check else "--report" if args.report else None
    problem = output_problem(args.out, reads) or (None if args.report else cache_problem(args.cache))
    if problem:
        ap.error(problem)
    return args


HEAD_BYTES = 2**21  # the head's file (five float32 tensors, about 0.7 MB) and its JSON, at most


def main(argv=None) -> int:
    args = parse_args(argv)

    def work() -> int:
        if args.report:
            print(read_run_json(args.out.with_suffix(".json"), report))
            return 0
        if not args.check:  # the head and its JSON must fit, before any work
            check_free_space(args.out.parent, HEAD_BYTES)
        return run(args)
    return refusals_as_lines(work)


def head_bytes(fitted: dict, layer: int) -> bytes:
    """The head as weights_files.save_mlm_head writes it."""
    return WF.as_bytes(WF.save_mlm_head, fitted, encoder=loading.MINILM_REPO, layer=layer)


def run(args) -> int:
    t_start = time.perf_counter()
    model = bv.load("minilm", mlm=False, backend="numpy")
    c, tok = model.config, model.tokenizer
    if c.num_layers != LAYERS:
        raise AssertionError(f"--layer's range assumes {LAYERS} layers; MiniLM has {c.num_layers}")
    layer = c.num_layers - 1 if args.layer is None else args.layer
    rng = np.random.default_rng(args.seed)
    sentences = corpus()
    encs = encode(model, sentences, args.sentences, rng)
    n_held = int(round(HELDOUT * len(encs)))
    print(f"corpus: {len(sentences):,} sentences; {len(encs):,} sampled ({n_held:,} held out); "
          f"tokenized in {time.perf_counter() - t_start:.0f} s", flush=True)
    t_feat = time.perf_counter()
    Z, targets, kinds, which = cached_features(model, encs, args.seed, layer, args.cache)
    feat_s = time.perf_counter() - t_feat
    held = which < n_held
    train = ~held
    print(f"features: {len(Z):,} masked rows ({int(train.sum()):,} train, {int(held.sum()):,} held out) "
          f"in {feat_s:.0f} s", flush=True)

    W_T = np.asarray(model.weights["embed.W_T"])  # [V, H] the tied decoder, frozen
    init_rng = np.random.default_rng([args.seed, 2])
    untrained = mlm.init_head(c.hidden_size, c.vocab_size, init_rng, np)  # BERT's initialisation
    counts = np.bincount(targets[train], minlength=c.vocab_size)
    start = {**untrained, "mlm.bias": np.log((counts + 1) / (counts.sum() + c.vocab_size)).astype(np.float32)}
    t_fit = time.perf_counter()
    params, log = mlm.fit(start, Z[train], targets[train], W_T, c, xp=np, rng=np.random.default_rng([args.seed, 3]),
                          epochs=args.epochs, batch=BATCH, peak_lr=PEAK_LR, log_every=50,
                          on_log=lambda e: print(f"  step {e[0]:>6,}  rows {e[1]:>9,}  loss {e[2]:.3f}", flush=True)
                          if e[0] % 500 == 0 else None)
    fit_s = time.perf_counter() - t_fit

    # held-out numbers
    words = np.array([mlm.word_class(tok.id_to_token(int(t))) for t in targets[held]])
    kh = kinds[held]
    groups = {"content": words == "content", "function": words == "function", "other": words == "other",
              "content [MASK]": (words == "content") & (kh == 0), "function [MASK]": (words == "function") & (kh == 0),
              "[MASK]": kh == 0, "random": kh == 1, "kept": kh == 2}
    results = {}
    for name, p in (("fitted head", params), ("untrained head", untrained)):
        results[name] = summarise(*evaluate(p, Z[held], targets[held], W_T, c), groups)
    results["unigram"] = summarise(*unigram_ranks(targets[train], targets[held], c.vocab_size), groups)
    total_s = time.perf_counter() - t_start

    fitted = {k: np.ascontiguousarray(np.asarray(v, dtype=np.float32)) for k, v in params.items()}
    head_model = bv.Bert(c, {**{k: np.asarray(v) for k, v in model.weights.items()}, **fitted}, tok, name=model.name,
                         backend_name="numpy", source=model.source)
    shown = {s: [(p.token, round(p.probability, 4)) for p in head_model.fill_mask(s, top_k=5)[0]]
             for s in EXAMPLES_TO_SHOW}
    meta = {
        "encoder": loading.MINILM_REPO, "layer": layer, "seed": args.seed, "sentences": len(encs),
        "heldout_sentences": n_held, "max_tokens": MAX_TOKENS, "epochs": args.epochs, "batch": BATCH,
        "peak_lr": PEAK_LR, "masked_rows": {"train": int(train.sum()), "heldout": int(held.sum())},
        "seconds": {"features": round(feat_s, 1), "fit": round(fit_s, 1), "total": round(total_s, 1)},
        "threads": os.environ.get("OMP_NUM_THREADS", "default"), "numpy": np.__version__,
        "loss_curve": [[s, r, round(l, 4)] for s, r, l in log], "heldout": results, "examples": shown,
    }
    data = head_bytes(fitted, layer)
    meta["file"] = WF.file_record(args.out.name, data)  # what the package checks the bytes against
    if args.check:
        same = data == read_regular(args.out)
        print(f"{args.out}: {'the same bytes' if same else 'DIFFERENT bytes'} after fitting again "
              f"({total_s:.0f} s)")
        return 0 if same else 1
    write_pair(args.out, data, json.dumps(meta, indent=1) + "\n")
    print(json.dumps({k: results[k]["all"] | {"content": results[k]["content"]["top5"],
                                              "function": results[k]["function"]["top5"]} for k in results}, indent=1))
    for s, top in shown.items():
        print(f"{s:<45} {', '.join(t for t, _ in top)}")
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes) and its .json; {total_s:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
