"""Lesson 11's small BERT at several seeds: which heads the mirror task needs, found by ablation, not by attention.

    PYTHONPATH=$PWD .venv/bin/python scripts/sweep_lesson11_seeds.py                 # SEED 0-9, as the lesson
    PYTHONPATH=$PWD .venv/bin/python scripts/sweep_lesson11_seeds.py --seeds 0 1 --json out.json
    OPENBLAS_CORETYPE=SkylakeX PYTHONPATH=$PWD .venv/bin/python scripts/sweep_lesson11_seeds.py   # another kernel

Each seed runs what notebooks/11_backward_and_training.ipynb runs at that `SEED` (its constants are repeated
here: keep them equal): the same small BERT (2 layers, 4 heads, width 64), the same held-out sentences, Adam for
300 steps, then plain SGD from the same start. Then, on the held-out sentences:

- every head's attention from the [MASK] row onto the mirror position;
- the accuracy without each head, and without each pair of heads (a head ablated by zeroing the rows of W^O that
  read its slice of attn.context: what `bv.ablate(how="zero")` does, on the whole batch at once);
- the rule's head(s): the one head whose ablation breaks the task (accuracy below `BREAK`), else the pair whose
  ablation hurts most; the control: the head the task does not need (accuracy without it at least `KEEP`) that
  looks at the mirror most;
- the pattern of a head's [MASK] rows (row i: where a [MASK] at position i looks, averaged over the sentences
  masked there) against the five patterns of exercise 11.12;
- how far SGD and Adam moved W^Q and W^K (the norm of the change over the norm at the start).

It prints a table (markdown) and, with --json, writes every number. Nothing in the package is written.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path

# the lesson's constants (cell 1 of lesson 11)
HALF, LETTERS = 6, 16
WIDTH, HEADS, LAYERS = 64, 4, 2
BATCH, EVERY, TEST = 64, 10, 400
SGD_LR = 0.5
ADAM_STEPS, ADAM_LR = 300, 3e-3
BREAK = 0.3  # an ablation "breaks the task" below this held-out accuracy (chance is 1/16)
KEEP = 0.9  # the task "does not need" a head when accuracy without it stays at least this


def patterns(n: int) -> dict:
    """The five patterns of exercise 11.12 as [n, n] maps (each row sums to 1)."""
    import numpy as np
    return {"diagonal": np.eye(n), "previous token": np.eye(n, k=-1) + np.eye(n)[:, :1] * np.eye(n)[:1].T,
            "anti-diagonal": np.fliplr(np.eye(n)), "[CLS]": np.eye(n)[[0] * n], "uniform": np.full((n, n), 1 / n)}


def run_seed(seed: int, steps: int = ADAM_STEPS, sgd_steps: int | None = None) -> dict:
    import numpy as np

    import bertviz_lite as bv
    from bertviz_lite import mlm, tasks

    sgd_steps = steps if sgd_steps is None else sgd_steps
    task = tasks.MirrorTask(half=HALF, letters=LETTERS)
    small = bv.load("random", config=task.config(hidden=WIDTH, heads=HEADS, layers=LAYERS), mlm=True, seed=seed,
                    backend="numpy")
    sc = small.config
    start = {k: v for k, v in small.weights.items() if k.startswith("layer.") or k in bv.weights.MLM_LEARNED}
    frozen = {"embed.W_T": small.weights["embed.W_T"]}
    test_sentences = task.sample(TEST, np.random.default_rng([seed, 7]))
    test_batch = task.batch(small, test_sentences)

    def heldout(params):
        return tasks.accuracy(params, frozen, test_batch, sc, np)

    def train(step, n):
        return tasks.fit(dict(start), step, n, np.random.default_rng([seed, 8]),
                         minibatch=lambda rng: task.batch(small, task.sample(BATCH, rng)),
                         grad_fn=lambda p, b: mlm.loss_and_grads(p, frozen, b, sc, np), heldout=heldout, every=EVERY)

    opt = mlm.Adam(start, np, 0.9, 0.999, 1e-6)
    clock = time.perf_counter()
    trained, adam_curve = train(lambda p, g: opt.step(p, g, ADAM_LR), steps)
    adam_s = time.perf_counter() - clock
    sgd_params, sgd_curve = train(lambda p, g: {k: p[k] - SGD_LR * g[k] for k in p}, sgd_steps)

    def moved(params, kind):  # |theta - theta_0| / |theta_0| over every layer's W^Q or W^K
        keys = [f"layer.{l}.attn.{kind}" for l in range(LAYERS)]
        return float(math.sqrt(sum(float(np.sum((np.asarray(params[k]) - np.asarray(start[k])) ** 2)) for k in keys))
                     / math.sqrt(sum(float(np.sum(np.asarray(start[k]) ** 2)) for k in keys)))

    dk = WIDTH // HEADS
    heads = [(l, h) for l in range(LAYERS) for h in range(HEADS)]

    def without(hs):
        p = dict(trained)
        for l, h in hs:
            W = np.array(p[f"layer.{l}.attn.W_O"])
            W[h * dk:(h + 1) * dk] = 0  # W^O reads nothing from head h: its context slice might as well be zero
            p[f"layer.{l}.attn.W_O"] = W
        return heldout(p)

    _, tape = mlm.forward({**small.weights, **trained}, test_batch, sc, np)
    q = np.array([m.positions[0] for m in test_sentences])
    b = np.arange(len(q))
    n = task.length
    probs = {l: np.asarray(tape[f"layer.{l}.attn.probs"]) for l in range(LAYERS)}
    mirror = {hh: float(probs[hh[0]][b, hh[1], q, 2 * HALF + 1 - q].mean()) for hh in heads}

    def mask_rows_fit(l, h):
        rows = probs[l][b, h, q]  # [B, n]: each sentence's [MASK] row
        M = np.stack([rows[q == i].mean(axis=0) for i in range(1, n - 1)])  # [n - 2, n]: row i - 1: a [MASK] at i
        return {name: float((M * T[1:n - 1]).sum(axis=-1).mean()) for name, T in patterns(n).items()}

    whole = heldout(trained)
    alone = {hh: without([hh]) for hh in heads}
    pairs = {pp: without(list(pp)) for pp in itertools.combinations(heads, 2)}
    worst = min(alone, key=alone.get)
    pair = min(pairs, key=pairs.get)
    rule = [worst] if alone[worst] < BREAK else sorted(pair, key=alone.get)  # the one missed most first
    rule_acc = alone[worst] if len(rule) == 1 else pairs[pair]
    free = [hh for hh in heads if hh not in rule and alone[hh] >= KEEP]
    control = max(free, key=mirror.get) if free else None
    fit = mask_rows_fit(*rule[0])
    name = lambda hh: f"L{hh[0]}H{hh[1]}"  # noqa: E731
    return {
        "seed": seed, "adam_s": adam_s, "whole": whole, "before": heldout(start),
        "adam_reached_95": next((s for s, _, a in adam_curve if a >= 0.95), None), "adam_final": adam_curve[-1][2],
        "sgd_final": sgd_curve[-1][2], "sgd_final_loss": sgd_curve[-1][1], "log_letters": math.log(LETTERS),
        "moved": {"sgd": {k: moved(sgd_params, k) for k in ("W_Q", "W_K")},
                  "adam": {k: moved(trained, k) for k in ("W_Q", "W_K")}},
        "mirror": {name(hh): v for hh, v in mirror.items()},
        "without_one": {name(hh): v for hh, v in alone.items()},
        "without_two": {f"{name(a)}+{name(c)}": v for (a, c), v in pairs.items()},
        "rule": [name(hh) for hh in rule], "without_rule": rule_acc,
        "rule_alone": {name(hh): alone[hh] for hh in rule},
        "pattern": max(fit, key=fit.get), "pattern_fit": fit,
        "attention_pick": name(max(heads, key=mirror.get)),
        "control": name(control) if control else None,
        "control_mirror": mirror[control] if control else None,
        "without_control": alone[control] if control else None,
    }


def table(results: list) -> str:
    lines = ["| SEED | head(s) by ablation | alone | [MASK]-row pattern (fit) | accuracy without it/them | "
             "most attention | control (mirror) | without control | Adam 95% at | SGD | SGD moved W^Q |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        alone = ", ".join(f"{v:.0%}" for v in r["rule_alone"].values())
        lines.append(
            f"| {r['seed']} | {' + '.join(r['rule'])} | {alone} | {r['pattern']} ({r['pattern_fit'][r['pattern']]:.2f}) "
            f"| {r['without_rule']:.0%} | {r['attention_pick']} ({r['mirror'][r['attention_pick']]:.2f}) "
            + (f"| {r['control']} ({r['control_mirror']:.2f}) | {r['without_control']:.0%} " if r["control"] else "| none | ")
            + f"| {r['adam_reached_95']} "
            f"| {r['sgd_final']:.0%} | {r['moved']['sgd']['W_Q']:.0e} (Adam {r['moved']['adam']['W_Q']:.1f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)), help="the lesson's SEEDs to run")
    ap.add_argument("--steps", type=int, default=ADAM_STEPS, help="Adam's (and SGD's) steps; the lesson's by default")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (the lesson trains with 1)")
    ap.add_argument("--json", type=Path, help="write every number here")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.threads < 1:
        ap.error("--steps and --threads take a whole number, 1 or more")

    from threadpoolctl import threadpool_limits

    results = []
    with threadpool_limits(args.threads):
        for seed in args.seeds:
            results.append(run_seed(seed, args.steps))
            r = results[-1]
            print(f"SEED {seed}: the rule's head(s) {' + '.join(r['rule'])}, without them {r['without_rule']:.0%} "
                  f"(whole {r['whole']:.0%}); control {r['control']}; {r['adam_s']:.1f} s", flush=True)
    print()
    print(table(results))
    broken = [r["seed"] for r in results if not (r["without_rule"] < BREAK and r["control"] is not None
                                                  and r["pattern"] == "anti-diagonal")]
    print(f"\nthe story (ablation breaks the task below {BREAK:.0%}, a control keeps at least {KEEP:.0%}, the [MASK] "
          f"rows of the rule's head fit the anti-diagonal) holds at {len(results) - len(broken)} of {len(results)} "
          "seeds" + (f"; not at {broken}" if broken else ""))
    if args.json:
        tmp = args.json.with_name(args.json.name + ".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
