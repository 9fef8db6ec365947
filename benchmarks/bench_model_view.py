"""The plotly model view (`bv.views.model_view_figure`) against the plain plotly way of drawing the
same grid, measured in the same run: `make_subplots(rows=L, cols=H)` and one `fig.add_trace(go.Heatmap)`
per map, with nothing else (the view also computes its view data: block means, labels, the outline).
tests/views/test_bertviz_calls.py checks, without a clock, that the view makes no per-map add_trace calls.

    .venv/bin/python benchmarks/bench_model_view.py [--layers 6] [--heads 12] [--n 14] [--repeat 5]

Attention maps are random rows that sum to 1, at MiniLM's size by default (6 x 12 maps of 14 tokens).
Prints the best of --repeat for each and the ratio (model_view_figure / plain plotly); the machine's
load average is printed too: on a shared 2-core machine other work inflates both figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bertviz_lite as bv  # noqa: E402
from tests.views.test_bertviz_calls import attentions  # noqa: E402  (random rows that sum to 1)


def plain_plotly(maps: list[np.ndarray], tokens: list[str]):
    """The peer: one subplot per (layer, head), one add_trace each."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    L, H = len(maps), maps[0].shape[1]
    fig = make_subplots(rows=L, cols=H, horizontal_spacing=0.005, vertical_spacing=0.01)
    for layer, a in enumerate(maps):
        for head in range(H):
            fig.add_trace(go.Heatmap(z=a[0, head], x=tokens, y=tokens, coloraxis="coloraxis",
                                     meta={"layer": layer, "head": head}), row=layer + 1, col=head + 1)
    return fig


def best_of(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--n", type=int, default=14, help="tokens")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    maps = attentions(n=args.n, layers=args.layers, heads=args.heads)
    tokens = [f"t{i}" for i in range(args.n)]
    tr = bv.Trace.from_attentions(maps, tokens)
    bv.views.model_view_figure(tr, progress=False)  # plotly's first figure loads its validators
    ours = best_of(lambda: bv.views.model_view_figure(tr, progress=False), args.repeat)
    peer = best_of(lambda: plain_plotly(maps, tokens), args.repeat)
    print(f"{args.layers} x {args.heads} maps of {args.n} tokens, best of {args.repeat}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  bv.views.model_view_figure   {ours * 1e3:8.1f} ms")
    print(f"  plain plotly (add_trace)     {peer * 1e3:8.1f} ms")
    print(f"  ratio                        {ours / peer:8.2f}  (below 1: the view is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
