"""Draw README's data-flow figure of the whole forward pass (docs/forward_pass.png) from schema.STEPS.

    .venv/bin/python scripts/draw_forward_pass.py                # BERT-base, n = 6 ("I love machine learning")
    .venv/bin/python scripts/draw_forward_pass.py --out /tmp/x.png --n 13

The figure is notebooks/course.py's `forward_pass`, the one lesson 00 shows (later lessons highlight their steps).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "forward_pass.png")
    ap.add_argument("--n", type=int, default=6, help="tokens of the example ([CLS] i love machine learning [SEP])")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "notebooks"))
    import course
    from bertviz_lite import BertConfig

    fig = course.forward_pass(BertConfig(), args.n)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80, facecolor="white")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
