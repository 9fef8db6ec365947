"""Draw the figures of the whole forward pass from schema.STEPS: docs/forward_flow.png (the data flow) and
docs/forward_pass.png (docs/trace.md's table of every key with its shapes).

    .venv/bin/python scripts/draw_forward_pass.py                # BERT-base as data flow -> docs/forward_flow.png
    .venv/bin/python scripts/draw_forward_pass.py --table        # the table, n = 6 -> docs/forward_pass.png

The figure is notebooks/course/pictures.py's `flow_picture`, the one lesson 00 shows (later lessons show a strip of it
around their own steps); `--table` draws `forward_pass`, every key with its shapes at n and at 512 tokens.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="default docs/forward_flow.png, with --table docs/forward_pass.png")
    ap.add_argument("--table", action="store_true", help="the table of trace keys and shapes instead of the data flow")
    ap.add_argument("--n", type=int, default=6, help="tokens of the example, for --table "
                                                     "([CLS] i love machine learning [SEP])")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "notebooks"))
    from course import pictures
    from bertviz_lite import BertConfig

    fig = pictures.forward_pass(BertConfig(), args.n) if args.table else pictures.flow_picture(BertConfig())
    args.out = args.out or ROOT / "docs" / ("forward_pass.png" if args.table else "forward_flow.png")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80, facecolor="white")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
