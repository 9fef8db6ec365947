"""Check that moving text between README.md and the docs lost no fact: split the old text into sentences
(and code lines), take each one's key items (code spans, numbers, commands, link targets) and look for every
item in the new pages.

    git show main:README.md > /tmp/README.old.md
    .venv/bin/python scripts/check_docs_facts.py /tmp/README.old.md              # README.md + docs/ + notebooks/README.md
    .venv/bin/python scripts/check_docs_facts.py OLD.md --pages README.md docs/gpu.md

A sentence with no such item must be found as written. Prints how many sentences and items it checked and every
sentence with an item found nowhere; exits 1 if there is one. Whitespace is ignored (a code span may wrap), and
so is a phrase that names an issue number or a round (history lives in git, not in the docs): such phrases are
left out of the old text before it is split.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAGES = ["README.md", "docs/*.md", "notebooks/README.md"]

# history the docs leave out on purpose: "(issue 42)", "issue 42's goals", "round 3"
HISTORY = re.compile(r"\(?\b[Ii]ssue \d+(?:'s)?(?: item \d+)?\)?|\b[Rr]ound \d+\b")
CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a number as a reader would look it up: 109,482,240  1e-5  0.6x  8.8  2,048  512
NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?:e-?\d+)?(?![\d])")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`*\"])")


def squash(text: str) -> str:
    """Text with every run of whitespace made one space."""
    return re.sub(r"\s+", " ", text)


def units(markdown: str) -> list[str]:
    """The old text as sentences of prose and lines of code: a fenced block gives one unit per line."""
    out, fenced, prose = [], False, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if line.strip():
                out.append("CODE " + line)
            continue
        if not line.strip() or line.startswith(("#", "|")):
            out += SENTENCE_END.split(squash(" ".join(prose)).strip()) if prose else []
            prose = []
            if line.startswith(("#", "|")):
                out.append(line)  # a heading or a table row is one unit
            continue
        prose.append(line)
    out += SENTENCE_END.split(squash(" ".join(prose)).strip()) if prose else []
    return [u for u in out if u.strip()]


def items(unit: str) -> list[str]:
    """What a unit must keep: its code spans, numbers and link targets; a code line's code itself."""
    if unit.startswith("CODE "):
        line = unit[5:]
        code, _, comment = line.partition("  #")
        found = [squash(code).strip()] if code.strip() else []
        return found + [m.group(0) for m in NUMBER.finditer(comment)] + CODE_SPAN.findall(comment)
    spans = CODE_SPAN.findall(unit)
    rest = CODE_SPAN.sub(" ", unit)
    targets = LINK.findall(rest)
    return [squash(s).strip() for s in spans] + targets + [m.group(0) for m in NUMBER.finditer(LINK.sub("", rest))]


# what a unit without code, numbers or links must keep: its words as written, unless it is a heading (pages have
# their own titles), a table's header or rule, or a pointer to another section of the old page
STRUCTURE = re.compile(r"^(#+ |\|[-|]+\|$|\| path \| what \|$)|^More in \"[^\"]+\" (below|above)\.$")


def found(item: str, corpus: str) -> bool:
    if NUMBER.fullmatch(item):
        return re.search(r"(?<![\d])" + re.escape(item) + r"(?![\d])", corpus) is not None
    return item in corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path, nargs="?", help="the text before the move (`git show main:README.md > old.md`)")
    ap.add_argument("--pages", nargs="+", default=DEFAULT_PAGES,
                    help="the pages after the move, globs from the repository root (default: %(default)s)")
    args = ap.parse_args()
    if args.old is None:
        ap.error("give the text before the move: git show main:README.md > /tmp/README.old.md, then pass that path")
    if not args.old.is_file():
        ap.error(f"{args.old} is not a file; write the old text first: git show main:README.md > {args.old}")
    pages = sorted({p for pattern in args.pages for p in ROOT.glob(pattern) if p.is_file()})
    if not pages:
        ap.error(f"no page matches {args.pages} under {ROOT}")
    texts = [p.read_text(encoding="utf-8") for p in pages]
    # a relative link keeps its target as a path from the root too (docs/trace.md's forward_pass.png is
    # docs/forward_pass.png, its ../notebooks/README.md is notebooks/README.md)
    targets = [os.path.relpath(os.path.normpath(p.parent / t), ROOT) for p, text in zip(pages, texts)
               for t in LINK.findall(text) if "://" not in t]
    corpus = squash(" ".join(texts + targets))
    old = HISTORY.sub("", args.old.read_text(encoding="utf-8"))
    checked = missing_items = 0
    missing = []
    for unit in units(old):
        wanted = items(unit)
        if not wanted and not STRUCTURE.search(unit):
            wanted = [squash(unit).strip()]  # a sentence of words only: kept verbatim
        checked += len(wanted)
        lost = [w for w in dict.fromkeys(wanted) if not found(w, corpus)]
        if lost:
            missing_items += len(lost)
            missing.append((unit, lost))
    n_units = len(units(old))
    print(f"{n_units} sentences and code lines, {checked} items (code spans, numbers, commands, links, "
          f"sentences of words only), "
          f"looked up in {len(pages)} pages: {', '.join(str(p.relative_to(ROOT)) for p in pages)}")
    for unit, lost in missing:
        print(f"\nMISSING {lost}\n  in: {unit[:300]}")
    print(f"\n{len(missing)} sentences with {missing_items} items found nowhere" if missing
          else "every item found")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
