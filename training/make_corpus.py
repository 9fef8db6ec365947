"""Extract the corpora from WordNet 3.0 (Debian's `wordnet-base`): its example sentences (data/, which the
lessons read too), its definitions (glosses) and the words each definition defines (training/corpus/).

    apt-get install -y wordnet-base                  # WordNet 3.0 data files in /usr/share/wordnet
    .venv/bin/python training/make_corpus.py          # writes data/wordnet_examples.txt,
                                                     # training/corpus/wordnet_glosses.txt.gz, training/corpus/wordnet_headwords.txt.gz
                                                     # and the licence beside each (data/, training/corpus/)
    .venv/bin/python training/make_corpus.py --check  # exit 1 if the committed files differ

Every synset line of WordNet's data files (data.noun, data.verb, data.adj, data.adv) ends with a
gloss: a definition, then usage examples in double quotes ("I can breathe better when the air is
clean"). Most short examples are phrases ("a stiff breeze"); those that begin with a capital
letter and have at least five words are almost all whole sentences. We keep exactly those,
verbatim, in file order (noun, verb, adj, adv), each once: one sentence per line. The definitions
(the gloss without its quoted examples, "the capital and largest city of France; ...") are a larger
corpus of plain English (116,707 distinct ones) for fitting the masked-LM head
(training/train_mlm_head.py); they are stored gzip-compressed (7 MB of text, 2 MB on disk) and
compared as text by --check. A definition never shows the word it defines ("a cleaning implement for
sweeping" is broom's), so the synset's words go in a file beside them, line for line (training/corpus/wordnet_headwords.txt.gz:
"broom"; "post office, local post office"), for train_minilm_mlm.py --headwords. The licence text is copied from the header of data.noun, as WordNet's
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
GLOSSES = ROOT / "training" / "corpus" / "wordnet_glosses.txt.gz"
LICENCES = (ROOT / "data" / "LICENSE.WordNet-3.0.txt",  # the notice travels with every copy: one per folder
            ROOT / "training" / "corpus" / "LICENSE.WordNet-3.0.txt")
HEADWORDS = ROOT / "training" / "corpus" / "wordnet_headwords.txt.gz"  # line i: the words definition i of GLOSSES defines

EXAMPLE = re.compile(r'"([^"]+)"')  # a quoted usage example inside a gloss


def synset_lines(path: Path):
    """Every synset line of a WordNet data file; header lines start with two spaces."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("  ") and " | " in line:
            yield line


def glosses(path: Path):
    """The gloss of every synset line (after ' | ')."""
    for line in synset_lines(path):
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


def headwords(line: str) -> str:
    """The words of a synset line as a person writes them, in WordNet's order, joined by ', ':
    '08145553 14 n 02 post_office 1 local_post_office 0 ...' -> 'post office, local post office';
    an adjective's position marker goes ('galore(ip)' -> 'galore'). No WordNet word contains a comma."""
    fields = line.split()
    words = fields[4:4 + 2 * int(fields[3], 16):2]
    return ", ".join(re.sub(r"\([a-z]+\)$", "", w).replace("_", " ") for w in words)


def defined(wordnet: Path = WORDNET) -> list[tuple[str, str]]:
    """(definition, its synset's words) for every distinct definition, in file order (noun, verb, adj, adv);
    a definition shared by several synsets keeps the first synset's words."""
    out, seen = [], set()
    for name in FILES:
        for line in synset_lines(wordnet / name):
            d = definition(line.split(" | ", 1)[1])
            if d and d not in seen:
                seen.add(d)
                out.append((d, headwords(line)))
    return out


def definitions(wordnet: Path = WORDNET) -> list[str]:
    """Every distinct definition, in file order (noun, verb, adj, adv)."""
    return [d for d, _ in defined(wordnet)]


def read_lines(path: Path) -> list[str]:
    """A committed gzip file of training/corpus/, one item per line (write_lines writes them)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def read_glosses(path: Path = GLOSSES) -> list[str]:
    """The committed definitions, one per line."""
    return read_lines(path)


def read_headwords(path: Path = HEADWORDS) -> list[str]:
    """The committed headwords: line i is the words (', ' between them) definition i of read_glosses() defines."""
    return read_lines(path)


def write_lines(path: Path, lines: list[str]) -> None:
    """gzip with mtime=0 and no file name in the header: the same text gives the same bytes."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))


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
    pairs = defined(args.wordnet)
    defs, heads = [d for d, _ in pairs], [h for _, h in pairs]
    notice = licence(args.wordnet)
    if args.check:
        same = (OUT.read_text(encoding="utf-8") == corpus
                and all(p.exists() and p.read_text(encoding="utf-8") == notice for p in LICENCES) and GLOSSES.exists() and read_glosses() == defs and HEADWORDS.exists() and read_headwords() == heads)
        print("the corpus files match WordNet" if same else "the corpus files differ from what WordNet gives",
              file=sys.stderr)
        return 0 if same else 1
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(corpus, encoding="utf-8")
    write_lines(GLOSSES, defs)
    write_lines(HEADWORDS, heads)
    for path in LICENCES:
        path.write_text(notice, encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {corpus.count(chr(10)):,} sentences; {GLOSSES.relative_to(ROOT)}: "
          f"{len(defs):,} definitions; {HEADWORDS.relative_to(ROOT)}: their words; "
          f"{' and '.join(str(p.relative_to(ROOT)) for p in LICENCES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
