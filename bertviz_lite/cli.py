"""The `bertviz-lite` command: trace a sentence or count a model's parameters from a shell.

    bertviz-lite trace "The cat sat on the mat." [--pair TEXT] [--model minilm] [--pad-to N]
                 [--html out.html] [--png out.png --layer L --head H]
    bertviz-lite params [--model random]

Errors (a model that cannot be loaded, an input that is too long) print one line to
stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import BertVizError
from .trace import Table


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bertviz-lite", description="Watch BERT compute: trace a sentence, "
                                "count parameters, export views.")
    sub = p.add_subparsers(dest="command", required=True)
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--model", default="minilm",
                       help="minilm (default, trained), random (BERT-base, seeded), a folder or a Hub id")
    model.add_argument("--seed", type=int, default=0, help="seed for --model random")
    t = sub.add_parser("trace", parents=[model], help="run the forward pass and print every tensor's shape")
    t.add_argument("text")
    t.add_argument("--pair", default=None, help="second sentence (segment B)")
    t.add_argument("--pad-to", type=int, default=None, help="pad with [PAD] to this many tokens")
    t.add_argument("--html", default=None, help="write a self-contained HTML page of every view")
    t.add_argument("--png", default=None, help="write a PNG of one head's attention map")
    t.add_argument("--layer", type=int, default=0)
    t.add_argument("--head", type=int, default=0)
    sub.add_parser("params", parents=[model], help="print the parameter ledger and the popular totals")
    return p


def _load(args):
    from .loading import load
    if args.model == "random":
        return load("random", seed=args.seed)
    return load(args.model)


def _views_function(module: str, name: str, option: str):
    """bertviz_lite.views.<module>.<name>; without the [views] extra, one BertVizError saying what to install."""
    import importlib
    try:
        return getattr(importlib.import_module(f".views.{module}", __package__), name)
    except ModuleNotFoundError as e:
        if (e.name or "").startswith(__package__):
            raise
        raise BertVizError(f"{option} needs the views extra ({e.name} is not installed): "
                           "pip install 'bertviz-lite[views]'") from e


def _groups(ledger) -> Table:
    rows = list(ledger.by_group().items()) + [("total", ledger.total)]
    return Table(("group", "parameters"), rows, title="parameters by group")


def cmd_trace(args, out) -> None:
    from .params import count_params
    model = _load(args)
    tr = model.trace(args.text, pair=args.pair, pad_to=args.pad_to)
    ledger = count_params(model)
    print(tr.shapes(), file=out)
    print(file=out)
    print(_groups(ledger), file=out)
    if args.html:
        export_html = _views_function("export", "export_html", "--html")
        print(f"\nwrote {export_html(tr, args.html, ledger=ledger)}", file=out)
    if args.png:
        save_png = _views_function("static", "save_png", "--png")
        print(f"wrote {save_png(tr, args.png, view='heatmap', layer=args.layer, head=args.head)}", file=out)


def cmd_params(args, out) -> None:
    from .params import count_params, reconcile
    model = _load(args)
    ledger = count_params(model)
    print(ledger.table(), file=out)
    print(file=out)
    print(_groups(ledger), file=out)
    print(file=out)
    print(reconcile(model.config), file=out)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 on a usage or input error)."""
    args = _parser().parse_args(argv)
    try:
        {"trace": cmd_trace, "params": cmd_params}[args.command](args, sys.stdout)
    except (BertVizError, ValueError, TypeError, KeyError, OSError) as e:
        message = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
        print(f"bertviz-lite: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
