"""Extract the corpus in data/ from WordNet 3.0's example sentences (Debian's `wordnet-base`).

    apt-get install -y wordnet-base                  # WordNet 3.0 data files in /usr/share/wordnet
    .venv/bin/python scripts/make_corpus.py          # writes data/wordnet_examples.txt and the licence
    .venv/bin/python scripts/make_corpus.py --check  # exit 1 if the committed files differ

Every synset line of WordNet's data files (data.noun, data.verb, data.adj, data.adv) ends with a
gloss: a definition, then usage examples in double quotes ("I can breathe better when the air is
clean"). Most short examples are phrases ("a stiff breeze"); those that begin with a capital
letter and have at least five words are almost all whole sentences. We keep exactly those,
verbatim, in file order (noun, verb, adj, adv), each once: one sentence per line. The licence
text is copied from the header of data.noun, as WordNet's licence asks for every copy.
Nothing here is typed in or generated: rerunning this script gives the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDNET = Path("/usr/share/wordnet")
FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
MIN_WORDS = 5
OUT = ROOT / "data" / "wordnet_examples.txt"
LICENCE = ROOT / "data" / "LICENSE.WordNet-3.0.txt"

EXAMPLE = re.compile(r'"([^"]+)"')  # a quoted usage example inside a gloss


def glosses(path: Path):
    """The gloss of every synset line (after ' | '); header lines start with two spaces."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("  ") and " | " in line:
            yield line.split(" | ", 1)[1]


def is_sentence(example: str) -> bool:
    return example[:1].isupper() and len(example.split()) >= MIN_WORDS


def sentences(wordnet: Path = WORDNET) -> list[str]:
    out, seen = [], set()
    for name in FILES:
        for gloss in glosses(wordnet / name):
            for ex in EXAMPLE.findall(gloss):
                ex = " ".join(ex.split())  # one line each: no tabs or double spaces
                if is_sentence(ex) and ex not in seen:
                    seen.add(ex)
                    out.append(ex)
    return out


def licence(wordnet: Path = WORDNET) -> str:
    """The numbered licence lines at the top of data.noun, without their numbers."""
    lines = []
    for line in (wordnet / "data.noun").read_text(encoding="utf-8").splitlines():
        if not line.startswith("  "):
            break
        lines.append(re.sub(r"^\s+\d+ ?", "", line).rstrip())
    return "\n".join(lines).strip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wordnet", type=Path, default=WORDNET, help="folder with WordNet 3.0's data.* files")
    ap.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = ap.parse_args(argv)
    if not (args.wordnet / "data.noun").exists():
        print(f"no WordNet data files in {args.wordnet}: install Debian's wordnet-base "
              "(apt-get install -y wordnet-base) or pass --wordnet", file=sys.stderr)
        return 2
    corpus = "\n".join(sentences(args.wordnet)) + "\n"
    notice = licence(args.wordnet)
    if args.check:
        same = OUT.read_text(encoding="utf-8") == corpus and LICENCE.read_text(encoding="utf-8") == notice
        print("data/ matches WordNet" if same else "data/ differs from what WordNet gives", file=sys.stderr)
        return 0 if same else 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(corpus, encoding="utf-8")
    LICENCE.write_text(notice, encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {corpus.count(chr(10)):,} sentences; {LICENCE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
