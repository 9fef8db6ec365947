"""The `bertviz-lite` command: trace a sentence or count a model's parameters from a shell.

    bertviz-lite trace "The cat sat on the mat." [--pair TEXT] [--model minilm] [--pad-to N] [--truncate] [--all]
                 [--html out.html] [--png out.png --view attention --layer L --head H]
                 [--png out.png --view head --heads 2,5]
    bertviz-lite params [--model random]
    bertviz-lite --version
    bertviz-lite fill-mask "The capital of France is [MASK]." [--model minilm-mlm] [--top-k 5]

A mistyped command or option gets "did you mean"; bad options are refused before any model is loaded.
Output fits the terminal's width (or $COLUMNS); formulas are printed with Unicode sub- and
superscripts. Errors (a model that cannot be loaded, an input that is too long) print one
line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import codecs
import os
import re
import shutil
import sys
import textwrap

from .errors import BertVizError
from .foreign import prettify_token
from .table import Table
from .views.model.records import ONE_TRACE_VIEWS

VIEWS = ONE_TRACE_VIEWS  # the views one trace can draw (the view records'; compare needs a second trace)
MIN_WIDTH = 20  # characters per line: narrower and no table fits


def _width_arg(text: str) -> int:
    """--width: a whole number of characters, at least MIN_WIDTH (checked before any output)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of characters") from None
    if value < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"{value} is too narrow; give at least {MIN_WIDTH} characters")
    return value


def _pad_to_arg(text: str) -> int:
    """--pad-to: a whole number of tokens, at least 1 (checked before any work)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a number of tokens; give at least the input's length")
    return value


def _heads_arg(text: str) -> list[int]:
    """--heads: head indices separated by commas ("2,5")."""
    try:
        heads = [int(h) for h in text.split(",") if h.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of head indices such as 2,5") from None
    if not heads:
        raise argparse.ArgumentTypeError("give at least one head index, such as 2 or 2,5")
    return heads


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors add "did you mean" for a mistyped command or option."""

    argv: list[str] | None = None  # the command line (main sets it), to find the chosen subcommand's options

    def error(self, message: str):
        import difflib
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2))
            near = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
            if near:
                message += f"; did you mean {near[0]!r}?"
        m = re.match(r"unrecognized arguments: (.*)", message)
        if m:
            options = [o for action in self._all_actions() for o in action.option_strings if o.startswith("--")]
            hints = []
            for word in m.group(1).split():
                near = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6) \
                    if word.startswith("-") else []
                if near:
                    hints.append(f"{near[0]} for {word}")
            if hints:
                message += f"; did you mean {', '.join(hints)}?"
        super().error(message)

    def _all_actions(self):
        """This parser's actions and those of the subcommand the user chose (argparse reports unknown options
        from the top parser)."""
        yield from self._actions
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = [a for a in (self.argv or []) if a in action.choices]
                for name in chosen[:1]:
                    yield from action.choices[name]._actions


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    p = Parser(prog="bertviz-lite", description="Watch BERT compute: trace a sentence, "
               "count parameters, export views.")
    p.add_argument("--version", action="version", version=f"bertviz-lite {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    model = argparse.ArgumentParser(add_help=False)
    model.add_argument("--model", default="minilm",
                       help="minilm (default, trained), random (BERT-base, seeded), a folder or a Hub id")
    model.add_argument("--seed", type=int, default=None, help="seed for --model random (default 0)")
    model.add_argument("--all", action="store_true",
                       help="list every layer (default: the first and the last, the middle layers folded)")
    model.add_argument("--width", type=_width_arg, default=None,
                       help=f"characters per line, at least {MIN_WIDTH} (default: the terminal's)")
    t = sub.add_parser("trace", parents=[model], help="run the forward pass: the tokens and every tensor's shape")
    t.add_argument("text", help="the sentence to trace (sentence A)")
    t.add_argument("--pair", default=None, help="second sentence (segment B)")
    t.add_argument("--pad-to", type=_pad_to_arg, default=None, help="pad with [PAD] to this many tokens")
    t.add_argument("--truncate", action="store_true",
                   help="cut an input longer than the model takes (512 tokens) instead of refusing it")
    t.add_argument("--html", default=None, help="write a self-contained HTML page of every view")
    t.add_argument("--png", default=None,
                   help="write a PNG (a .png file name) of one view (--view, default one head's attention map)")
    t.add_argument("--view", default="attention", choices=VIEWS, help="the view --png draws")
    t.add_argument("--layer", type=int, default=0, help="layer --png draws (0..L-1; default 0)")
    t.add_argument("--head", type=int, default=None, help="head --png draws (0..n_h-1; default 0); with --view head "
                   "the one head shown (as --heads H)")
    t.add_argument("--heads", type=_heads_arg, default=None,
                   help="heads --view head draws, separated by commas (e.g. 2,5; default every head)")
    t.add_argument("--query", type=int, default=0,
                   help="token index for --view token / neuron (0..n-1 among the real tokens; default 0)")
    sub.add_parser("params", parents=[model], help="print the parameter ledger and the popular totals")
    f = sub.add_parser("fill-mask", help="the most likely word pieces at each [MASK] of a sentence")
    f.add_argument("text", help="a sentence with [MASK] where a word should be predicted")
    f.add_argument("--model", default="minilm-mlm", help="minilm-mlm (default: MiniLM trained to fill [MASK]), "
                   "minilm (the published encoder + a head fitted on it), a folder or a Hub id with a masked-LM head")
    f.add_argument("--seed", type=int, default=None, help="seed for --model random (default 0)")
    f.add_argument("--top-k", type=int, default=5, help="how many candidates per [MASK] (default 5)")
    return p


def check_model_args(args) -> None:
    """--model and --seed checked before any work: a name, --seed only where it means something, and
    fill-mask only on a model that can have a masked-LM head."""
    if not args.model.strip():
        raise BertVizError("--model needs a name: minilm, random, a folder or a Hub id (got an empty one)")
    if args.seed is not None and args.model != "random":
        raise BertVizError(f"--seed only applies to --model random (its weights are drawn from the seed); "
                           f"{args.model!r} has its own weights")
    if args.command == "fill-mask" and args.model == "random":
        raise BertVizError("fill-mask needs a model with a masked-LM head; --model random has none (its head would "
                           "be untrained): use --model minilm-mlm (the default) or minilm")


def _load(args):
    from .errors import WeightsNotFoundError
    from .loading import did_you_mean, known_names, load
    check_model_args(args)
    if args.model == "random":
        return load("random", seed=args.seed or 0)
    try:
        return load(args.model)
    except WeightsNotFoundError:
        near = did_you_mean(args.model)
        if not near:
            raise
        # one message: the name it is a typo of, not the Hub's advice for the typo as well
        raise BertVizError(f"--model {args.model!r} is not a model bertviz-lite knows and not a folder; did you mean "
                           f"{near!r}? (names: {', '.join(known_names())}; a folder; or a Hub id such as "
                           "google-bert/bert-base-uncased)") from None


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


def tokens_text(tr, width: int) -> str:
    """The tokens with their positions, sentence B marked, wrapped to the width."""
    words = []
    for i, (t, s, m) in enumerate(zip(tr.tokens, tr.segments, tr.mask)):
        if m:
            words.append(f"{i}:{prettify_token(t)}" + ("\u1d2e" if s == 1 else ""))
    pads = tr.n - tr.n_real
    head = f"tokens (n = {tr.n_real}{f', + {pads} [PAD]' if pads else ''}"
    head += ", \u1d2e = sentence B):" if tr.has_pair else "):"
    return head + "\n" + textwrap.fill("  ".join(words), width=width, initial_indent="  ", subsequent_indent="  ",
                                       break_on_hyphens=False)


def fold_layers(rows, L: int, key_of, folded_row) -> list:
    """rows with those of layers 1..L-2 replaced by one line, folded_row(count of layer 1's rows)
    (the shape table and the parameter table both fold this way; --all keeps every row)."""
    from . import schema
    out, done = [], False
    middle = [r for r in rows if (schema.split_key(key_of(r))[0] or 0) == 1]
    for r in rows:
        layer = schema.split_key(key_of(r))[0]
        if layer is not None and 0 < layer < L - 1:
            if not done:
                out.append(folded_row(len(middle)))
                done = True
            continue
        out.append(r)
    return out


def shapes_table(tr, everything: bool = False, unicode: bool = True) -> Table:
    """Every recorded key with its shape and formula (Unicode sub/superscripts, or _x / ^x where the
    terminal cannot show them); the middle layers folded into one line unless `everything`."""
    from . import schema
    from .schema_text import plain_formula
    L = tr.num_layers
    rows = [(key, tuple(tr[key].shape),
             plain_formula(schema.formula_of(key, tr.config), html=False, unicode=unicode))
            for key in tr.keys()]
    if not everything:
        rows = fold_layers(rows, L, lambda r: r[0], lambda k: (
            f"layer.1 .. layer.{L - 2}", "", f"the same {k} steps and shapes as layer.0 (--all lists them)"))
    return Table(("key", "shape", "formula"), rows,
                 title=f"trace of {tr.n} tokens, {len(tr.keys())} tensors, {tr.nbytes / 2**20:,.1f} MiB")


def params_table(ledger, L: int, everything: bool = False) -> Table:
    """The parameter ledger, the middle layers folded into one line unless `everything`."""
    table = ledger.table()
    if everything:
        return table
    per_layer = sum(r[3] for r in ledger.rows if r[1].startswith("layer.1."))
    rows = fold_layers(list(table.rows), L, lambda r: r[0], lambda k: (
        f"layer.1 .. layer.{L - 2}", f"the same {k} weights as layer.0", "", per_layer * (L - 2)))
    return Table(table.columns, rows, title=table.title + (" (--all lists every layer)" if L > 2 else ""))


def groups_table(ledger, L: int, everything: bool = False) -> Table:
    """Parameters by group (embeddings, each layer's attention, feed-forward and layernorms, the heads),
    the middle layers folded into one line unless `everything`."""
    rows = list(ledger.by_group().items()) + [("total", ledger.total)]
    folded = not everything and L > 2
    if folded:
        per_layer = sum(count for group, count in rows if group.startswith("layer.1."))
        rows = fold_layers(rows, L, lambda r: r[0], lambda k: (
            f"layer.1 .. layer.{L - 2}: the same {k} groups as layer.0", per_layer * (L - 2)))
    return Table(("group", "parameters"), rows,
                 title="parameters by group" + (" (--all lists every layer)" if folded else ""))


def check_selection(args, model, tr=None) -> None:
    """--layer, --head and --query checked against the model (and the tokens) before any work:
    one line naming the option and its range."""
    c = model.config
    if not 0 <= args.layer < c.num_layers:
        raise BertVizError(f"--layer {args.layer} is out of range: this model has {c.num_layers} layers, "
                           f"0..{c.num_layers - 1}")
    if not 0 <= args.head < c.num_heads:
        raise BertVizError(f"--head {args.head} is out of range: this model has {c.num_heads} heads, "
                           f"0..{c.num_heads - 1}")
    if tr is not None:
        n = sum(tr.mask)
        if not 0 <= args.query < n:
            raise BertVizError(f"--query {args.query} is out of range: the input has {n} tokens, 0..{n - 1} "
                               f"({' '.join(t for t, m in zip(tr.tokens, tr.mask) if m)})")


def check_output(path: str | None, option: str, kind: str) -> None:
    """An --html / --png file name checked before any work or output: not empty, the right kind of file,
    in a folder that exists and can be written, and not something a page may not replace (a folder, a
    device, a FIFO: views.wire.files.check_target)."""
    if path is None:
        return
    check_target = _views_function("wire.files", "check_target", option)
    if kind == ".png":
        _views_function("render.static", "save_png", option)  # without the views extra: say so first
    if not path.strip():
        raise BertVizError(f"{option} needs a file name, got an empty one")
    name = os.path.basename(path)
    try:
        longest = os.pathconf(os.path.dirname(os.path.abspath(path)) or ".", "PC_NAME_MAX")
    except (OSError, ValueError):  # a folder that does not exist: said below
        longest = 255
    if len(os.fsencode(name)) > longest:
        raise BertVizError(f"{option}: the file name is {len(os.fsencode(name))} bytes long; this file system takes "
                           f"at most {longest}: give a shorter name")
    check_target(path, what=option, kind=kind)  # a folder, a device, a FIFO there: named as such
    if kind == ".html" and os.path.splitext(path)[1].lower() not in (".html", ".htm"):
        raise BertVizError(f"{option} writes an HTML page; {path!r} does not end in .html (give e.g. "
                           f"{os.path.splitext(path)[0] + '.html'!r})")
    if kind == ".png" and os.path.splitext(path)[1].lower() != ".png":
        raise BertVizError(f"{option} writes PNG images; {path!r} does not end in .png (give e.g. "
                           f"{os.path.splitext(path)[0] + '.png'!r}, or convert the PNG afterwards)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise BertVizError(f"{option} {path!r}: the folder {folder!r} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise BertVizError(f"{option} {path!r}: the folder {folder!r} cannot be written")


def check_text(text: str, command: str) -> None:
    if not text.strip():
        raise BertVizError(f"{command} needs a text with at least one word, got {'an empty one' if not text else repr(text)}")


def head_choice(args) -> list[int] | None:
    """The head view's heads from --heads, or --head with --view head (None: every head)."""
    if args.heads is not None and args.view != "head":
        raise BertVizError(f"--heads goes with --view head (the head view's heads); --view {args.view} draws one "
                           "head: use --head")
    if args.view == "head":
        return args.heads if args.heads is not None else ([args.head] if args.head is not None else None)
    return None


def cmd_trace(args, out) -> None:
    from .params import count_params
    check_text(args.text, "trace")
    check_output(args.html, "--html", ".html")  # refused before any work and any output
    check_output(args.png, "--png", ".png")  # (a FIFO would block for ever)
    heads = head_choice(args)
    args.head = 0 if args.head is None else args.head
    model = _load(args)
    check_selection(args, model, model.tokenize(args.text, args.pair, pad_to=args.pad_to, truncate=args.truncate))
    for h in heads or ():
        if not 0 <= h < model.config.num_heads:
            raise BertVizError(f"--heads: head {h} is out of range: this model has {model.config.num_heads} heads, "
                               f"0..{model.config.num_heads - 1}")
    tr = model.trace(args.text, pair=args.pair, pad_to=args.pad_to, truncate=args.truncate)
    ledger = count_params(model)
    width = _width(args)
    print(tokens_text(tr, width), file=out)
    print(file=out)
    print(shapes_table(tr, args.all, unicode=_shows(out, "\u2080\u1d40")).format(width), file=out)
    print(file=out)
    print(groups_table(ledger, model.config.num_layers, args.all).format(width), file=out)
    if "head.logits" in tr:  # the task head's labels (config.json's id2label), e.g. "pos 0.91  neg 0.09"
        from .analysis import head_summary
        print(f"\nhead ({model.config.head}): {head_summary(tr)}", file=out)
    if args.html:
        export_html = _views_function("wire.export", "export_html", "--html")
        print(f"\nwrote {export_html(tr, args.html, ledger=ledger)}", file=out)
    if args.png:
        save_png = _views_function("render.static", "save_png", "--png")
        path = save_png(tr, args.png, view=args.view, layer=args.layer, head=args.head, query=args.query,
                        ledger=ledger, heads=heads)
        print(f"wrote {path}", file=out)


def cmd_params(args, out) -> None:
    from .params import count_params, reconcile
    model = _load(args)
    ledger = count_params(model)
    width = _width(args)
    print(params_table(ledger, model.config.num_layers, args.all).format(width), file=out)
    print(file=out)
    print(groups_table(ledger, model.config.num_layers, args.all).format(width), file=out)
    print(file=out)
    if model.config.model_type != "bert":  # the sources' totals are BERT's; the family's are in family_ledgers
        from .params import family_ledgers
        print(family_ledgers().format(width), file=out)
        return
    print(reconcile(model.config).format(width), file=out)  # the prose columns wrap under the numbers


def cmd_fill_mask(args, out) -> None:
    check_text(args.text, "fill-mask")
    model = _load(args)
    if not model.has_mlm:
        raise BertVizError(f"fill-mask needs a model with a masked-LM head; --model {args.model} has none: use "
                           "--model minilm-mlm (the default), minilm, or a folder of a *ForMaskedLM / "
                           "BertForPreTraining checkpoint")
    for preds in model.fill_mask(args.text, top_k=args.top_k):
        print(f"[MASK] at {preds[0].position}: " + ", ".join(map(str, preds)), file=out)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 on a usage or input error)."""
    parser = _parser()
    parser.argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if getattr(sys.stdout, "encoding", None) and codecs.lookup(sys.stdout.encoding).name != "utf-8" and \
            hasattr(sys.stdout, "reconfigure"):  # LANG=C, a latin-1 pipe: '?' for what it cannot show, no crash
        sys.stdout.reconfigure(errors="replace")
    try:
        {"trace": cmd_trace, "params": cmd_params, "fill-mask": cmd_fill_mask}[args.command](args, sys.stdout)
    except BrokenPipeError:  # `bertviz-lite trace ... | head`: the reader has what it wanted
        sys.stderr.close()
        return 0
    except (BertVizError, ValueError, TypeError, KeyError, OSError) as e:
        message = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
        # the command's options, not the keyword arguments the library's messages name
        message = re.sub(r"\bpad_to=(?=-?\d)", "--pad-to ", message).replace("pad_to>=", "--pad-to >= ")
        if args.command == "fill-mask":  # it has no --truncate: the text must be shorter
            message = re.sub(r",? or pass truncate=True[^;)]*", "", message)
        message = message.replace("pass truncate=True", "pass --truncate").replace("truncate=True", "--truncate")
        print(f"bertviz-lite: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
