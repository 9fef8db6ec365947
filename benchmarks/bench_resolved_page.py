"""What the exported page would weigh if Python resolved every layout it offers (issue 41, item 4).

    .venv/bin/python benchmarks/bench_resolved_page.py

The page's front-end resolves a view's layout for the selection the reader picks (app.js's `resolve`, the
same language as `panels.resolve`), because the page has no kernel to ask. "Resolve layouts in Python and ship
the resolved numbers" means shipping `panels.resolve`'s figure for every selection the page lets a reader
pick. This script builds the 13-token MiniLM page of tests/views/test_page_size.py (the page with the 0.5 MB
budget), resolves every figure its tabs offer, and prints what they weigh, gzip-compressed as the page packs
its payloads: once with the numbers at 16 bits (as the page's maps travel) and once with every array left out
(titles, notes, labels, grid and panel specs only). It is a lower bound: the head view is counted one head at
a time and with all heads (the page lets any subset be picked), and a single sentence has no pair filter.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from pathlib import Path

import numpy as np

import bertviz_lite as bv
from bertviz_lite.views.model import data, panels

SENTENCE = "The children walked to school in the rain every day."  # tests/views/test_page_size.py's page
PAGE_BUDGET = 500_000


def figures(trace, ledger):
    """(view, resolved figure) for every selection the page's tabs offer."""
    L, H, n = trace.num_layers, trace.config.num_heads, trace.n_real
    kinds = data.recorded_kinds(trace)
    for layer in range(L):
        by_kind = {kind: data.view_data(trace, "attention", layer=layer, kind=kind) for kind in kinds}
        for vd in by_kind.values():
            for h in range(H):
                yield "attention", panels.resolve(vd, "attention", head=h)
        for heads in [[h] for h in range(H)] + [list(range(H))]:  # the head view draws the attention view's probs
            yield "head", panels.resolve(by_kind["probs"], "head", heads=heads)
        vd = data.view_data(trace, "neuron", layer=layer)
        for h in range(H):
            for q in range(n):
                yield "neuron", panels.resolve(vd, "neuron", head=h, query=q)
    for kind in kinds:
        yield "model", panels.resolve(data.view_data(trace, "model", kind=kind), "model")
    for q in range(n):
        yield "token", panels.resolve(data.view_data(trace, "token", query=q), "token")
    for key in data.stepper_steps(trace):
        yield "step", panels.resolve(data.view_data(trace, "step", key=key, ledger=ledger), "step")
    yield "params", panels.resolve(data.view_data(trace, "params", ledger=ledger), "params")


def as_json(fig: dict, numbers: bool) -> bytes:
    def default(o):
        if isinstance(o, np.ndarray):
            if not numbers:
                return list(o.shape)
            with np.errstate(over="ignore"):  # a -inf mask stays -inf; |x| > 65504 becomes inf, as at 16 bits
                return np.nan_to_num(o.astype(np.float16), nan=0.0, posinf=65504, neginf=-65504).tolist()
        if isinstance(o, (np.floating, np.integer, np.bool_)):
            return o.item()
        raise TypeError(type(o).__name__)
    return json.dumps(fig, default=default, separators=(",", ":")).encode()


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    model = bv.load("minilm")
    trace, ledger = model.trace(SENTENCE), bv.count_params(model)
    with tempfile.TemporaryDirectory() as d:
        page = bv.export_html(trace, Path(d) / "page.html", ledger=ledger, progress=False).stat().st_size
    print(f"the page as built: {page:,} bytes; {PAGE_BUDGET - page:,} spare under its {PAGE_BUDGET:,}")
    figs = list(figures(trace, ledger))
    print("| view | resolved figures | JSON with numbers | gzip | JSON without arrays | gzip |")
    print("|---|---|---|---|---|---|")
    rows = {}
    for view, fig in figs:
        rows.setdefault(view, []).append((as_json(fig, True), as_json(fig, False)))
    for view, pairs in list(rows.items()) + [("all", None)]:
        pairs = pairs or [p for ps in rows.values() for p in ps]
        with_n, without = (b"\n".join(p[i] for p in pairs) for i in (0, 1))
        print(f"| {view} | {len(pairs):,} | {len(with_n):,} | {len(gzip.compress(with_n, 9)):,} | {len(without):,} | "
              f"{len(gzip.compress(without, 9)):,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
