"""Extract the corpora in data/ from WordNet 3.0 (Debian's `wordnet-base`): its example sentences and
its definitions (glosses).

    apt-get install -y wordnet-base                  # WordNet 3.0 data files in /usr/share/wordnet
    .venv/bin/python scripts/make_corpus.py          # writes data/wordnet_examples.txt,
                                                     # data/wordnet_glosses.txt.gz and the licence
    .venv/bin/python scripts/make_corpus.py --check  # exit 1 if the committed files differ

Every synset line of WordNet's data files (data.noun, data.verb, data.adj, data.adv) ends with a
gloss: a definition, then usage examples in double quotes ("I can breathe better when the air is
clean"). Most short examples are phrases ("a stiff breeze"); those that begin with a capital
letter and have at least five words are almost all whole sentences. We keep exactly those,
verbatim, in file order (noun, verb, adj, adv), each once: one sentence per line. The definitions
(the gloss without its quoted examples, "the capital and largest city of France; ...") are a larger
corpus of plain English (116,707 distinct ones) for fitting the masked-LM head
(scripts/train_mlm_head.py); they are stored gzip-compressed (7 MB of text, 2 MB on disk) and
compared as text by --check. The licence text is copied from the header of data.noun, as WordNet's
licence asks for every copy.
Nothing here is typed in or generated: rerunning this script gives the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDNET = Path("/usr/share/wordnet")
FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
MIN_WORDS = 5
OUT = ROOT / "data" / "wordnet_examples.txt"
GLOSSES = ROOT / "data" / "wordnet_glosses.txt.gz"
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


def definition(gloss: str) -> str:
    """A gloss without its quoted examples: 'capital of France; "Paris is lovely"' -> 'capital of France'."""
    text = " ".join(EXAMPLE.sub("", gloss).split())  # one line, single spaces
    text = re.sub(r"\s*;[\s;]*", "; ", text)  # the ';' that separated the examples, once each
    return text.strip("; ")


def definitions(wordnet: Path = WORDNET) -> list[str]:
    """Every distinct definition, in file order (noun, verb, adj, adv)."""
    out, seen = [], set()
    for name in FILES:
        for gloss in glosses(wordnet / name):
            d = definition(gloss)
            if d and d not in seen:
                seen.add(d)
                out.append(d)
    return out


def read_glosses(path: Path = GLOSSES) -> list[str]:
    """The committed definitions, one per line."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


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
    defs = definitions(args.wordnet)
    notice = licence(args.wordnet)
    if args.check:
        same = (OUT.read_text(encoding="utf-8") == corpus and LICENCE.read_text(encoding="utf-8") == notice
                and GLOSSES.exists() and read_glosses() == defs)
        print("data/ matches WordNet" if same else "data/ differs from what WordNet gives", file=sys.stderr)
        return 0 if same else 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(corpus, encoding="utf-8")
    # mtime=0 and no file name in the header: the same text gives the same bytes
    with open(GLOSSES, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                   compresslevel=9) as f:
        f.write(("\n".join(defs) + "\n").encode("utf-8"))
    LICENCE.write_text(notice, encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {corpus.count(chr(10)):,} sentences; {GLOSSES.relative_to(ROOT)}: "
          f"{len(defs):,} definitions; {LICENCE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
