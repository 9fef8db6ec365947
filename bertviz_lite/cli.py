"""The `bertviz-lite` command: trace a sentence or count a model's parameters from a shell.

    bertviz-lite trace "The cat sat on the mat." [--pair TEXT] [--model minilm] [--pad-to N] [--all]
                 [--html out.html] [--png out.png --view attention --layer L --head H]
    bertviz-lite params [--model random]

Output fits the terminal's width (or $COLUMNS); formulas are printed with Unicode sub- and
superscripts. Errors (a model that cannot be loaded, an input that is too long) print one
line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import codecs
import shutil
import sys
import textwrap

from .errors import BertVizError
from .table import Table

VIEWS = ("attention", "model", "head", "token", "neuron", "step", "params")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bertviz-lite", description="Watch BERT compute: trace a sentence, "
                                "count parameters, export views.")
    sub = p.add_subparsers(dest="command", required=True)
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--model", default="minilm",
                       help="minilm (default, trained), random (BERT-base, seeded), a folder or a Hub id")
    model.add_argument("--seed", type=int, default=0, help="seed for --model random")
    model.add_argument("--width", type=int, default=None, help="characters per line (default: the terminal's)")
    t = sub.add_parser("trace", parents=[model], help="run the forward pass: the tokens and every tensor's shape")
    t.add_argument("text")
    t.add_argument("--pair", default=None, help="second sentence (segment B)")
    t.add_argument("--pad-to", type=int, default=None, help="pad with [PAD] to this many tokens")
    t.add_argument("--all", action="store_true", help="list every layer's steps (default: the first and the last)")
    t.add_argument("--html", default=None, help="write a self-contained HTML page of every view")
    t.add_argument("--png", default=None, help="write a PNG of one view (--view, default one head's attention map)")
    t.add_argument("--view", default="attention", choices=VIEWS, help="the view --png draws")
    t.add_argument("--layer", type=int, default=0)
    t.add_argument("--head", type=int, default=0)
    t.add_argument("--query", type=int, default=0, help="token index for --view token / neuron")
    sub.add_parser("params", parents=[model], help="print the parameter ledger and the popular totals")
    return p


def _load(args):
    from .loading import load
    if args.model == "random":
        return load("random", seed=args.seed)
    return load(args.model)


def _width(args) -> int:
    return args.width or max(60, shutil.get_terminal_size((100, 24)).columns)


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


def _shows(out, chars: str) -> bool:
    """Whether the output's encoding can write these characters (not on LANG=C or a latin-1 pipe)."""
    try:
        chars.encode(getattr(out, "encoding", None) or "utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _groups(ledger) -> Table:
    rows = list(ledger.by_group().items()) + [("total", ledger.total)]
    return Table(("group", "parameters"), rows, title="parameters by group")


def tokens_text(tr, width: int) -> str:
    """The tokens with their positions, sentence B marked, wrapped to the width."""
    words = []
    for i, (t, s, m) in enumerate(zip(tr.tokens, tr.segments, tr.mask)):
        if m:
            words.append(f"{i}:{t}" + ("\u1d2e" if s == 1 else ""))
    pads = tr.n - tr.n_real
    head = f"tokens (n = {tr.n_real}{f', + {pads} [PAD]' if pads else ''}"
    head += ", \u1d2e = sentence B):" if tr.has_pair else "):"
    return head + "\n" + textwrap.fill("  ".join(words), width=width, initial_indent="  ", subsequent_indent="  ",
                                       break_on_hyphens=False)


def shapes_table(tr, everything: bool = False, unicode: bool = True) -> Table:
    """Every recorded key with its shape and formula (Unicode sub/superscripts, or _x / ^x where the
    terminal cannot show them); the middle layers folded into one line unless `everything`."""
    from . import schema
    from .views.data import plain_formula
    L = tr.num_layers
    rows, folded = [], False
    for key in tr.keys():
        layer, _ = schema.split_key(key)
        if not everything and layer is not None and 0 < layer < L - 1:
            if not folded:
                steps = sum(1 for k in tr.keys() if k.startswith("layer.1."))
                rows.append((f"layer.1 .. layer.{L - 2}", "", f"the same {steps} steps and shapes as layer.0 (--all "
                             "lists them)"))
                folded = True
            continue
        rows.append((key, tuple(tr[key].shape),
                     plain_formula(schema.step_of(key, tr.config).formula, html=False, unicode=unicode)))
    return Table(("key", "shape", "formula"), rows,
                 title=f"trace of {tr.n} tokens, {len(tr.keys())} tensors, {tr.nbytes / 2**20:,.1f} MiB")


def cmd_trace(args, out) -> None:
    from .params import count_params
    if args.html:  # a target that is not a page's to replace is refused before any work
        _views_function("export", "check_target", "--html")(args.html)
    model = _load(args)
    tr = model.trace(args.text, pair=args.pair, pad_to=args.pad_to)
    ledger = count_params(model)
    width = _width(args)
    print(tokens_text(tr, width), file=out)
    print(file=out)
    print(shapes_table(tr, args.all, unicode=_shows(out, "\u2080\u1d40")).format(width), file=out)
    print(file=out)
    print(_groups(ledger).format(width), file=out)
    if "head.logits" in tr:  # the task head's labels (config.json's id2label), e.g. "pos 0.91  neg 0.09"
        from .analysis import head_summary
        print(f"\nhead ({model.config.head}): {head_summary(tr)}", file=out)
    if args.html:
        export_html = _views_function("export", "export_html", "--html")
        print(f"\nwrote {export_html(tr, args.html, ledger=ledger)}", file=out)
    if args.png:
        save_png = _views_function("static", "save_png", "--png")
        path = save_png(tr, args.png, view=args.view, layer=args.layer, head=args.head, query=args.query,
                        ledger=ledger)
        print(f"wrote {path}", file=out)


def cmd_params(args, out) -> None:
    from .params import count_params, reconcile
    model = _load(args)
    ledger = count_params(model)
    width = _width(args)
    print(ledger.table().format(width), file=out)
    print(file=out)
    print(_groups(ledger).format(width), file=out)
    print(file=out)
    if model.config.model_type != "bert":  # the sources' totals are BERT's; the family's are in family_ledgers
        from .params import family_ledgers
        print(family_ledgers().format(width), file=out)
        return
    rec = reconcile(model.config)
    numbers = Table(rec.columns[:4], [r[:4] for r in rec.rows], title=rec.title)
    print(numbers.format(width), file=out)
    for row in rec.rows:
        print(textwrap.fill(f"{row[0]}: includes {row[4]}; leaves out {row[5]}", width=width, initial_indent="- ",
                            subsequent_indent="  "), file=out)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 on a usage or input error)."""
    args = _parser().parse_args(argv)
    if getattr(sys.stdout, "encoding", None) and codecs.lookup(sys.stdout.encoding).name != "utf-8" and \
            hasattr(sys.stdout, "reconfigure"):  # LANG=C, a latin-1 pipe: '?' for what it cannot show, no crash
        sys.stdout.reconfigure(errors="replace")
    try:
        {"trace": cmd_trace, "params": cmd_params}[args.command](args, sys.stdout)
    except BrokenPipeError:  # `bertviz-lite trace ... | head`: the reader has what it wanted
        sys.stderr.close()
        return 0
    except (BertVizError, ValueError, TypeError, KeyError, OSError) as e:
        message = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
        print(f"bertviz-lite: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
