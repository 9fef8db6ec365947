"""Regenerate bertviz_lite/data/unicode_overrides.json: where `tokenizers` classifies a character
differently from this Python's `unicodedata`.

    .venv/bin/python scripts/make_unicode_table.py

BERT's rules are written in terms of Unicode categories (punctuation P*, control C*, non-spacing
mark Mn) and lower-case mappings. The `tokenizers` library (what BertTokenizerFast runs) reads
categories from old Unicode tables (about Unicode 8) and case mappings from new ones, while Python
3.11's `unicodedata` is Unicode 14. For the few hundred characters whose answer changed between
those versions, the tokenizer follows `tokenizers`, so that it gives the tokens BERT was actually
trained and evaluated with. This script probes every code point through each `tokenizers` step on
its own and writes the characters where the answer differs from the rule applied to unicodedata.
"""
from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import normalizers, pre_tokenizers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bertviz_lite import tokenizer as T  # noqa: E402

OUT = ROOT / "bertviz_lite" / "data" / "unicode_overrides.json"


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)  # first: --help does no work
    for table in T.OVERRIDES.values():
        table.clear()  # probe the plain rules, not the previous overrides
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                       lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                       lowercase=False)
    lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False,
                                       lowercase=True)
    split = pre_tokenizers.BertPreTokenizer()
    table = {"control": {}, "whitespace": {}, "punctuation": {}, "mark": {}, "strip": {}, "lower": {}}
    decomposing = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates cannot be in a str that tokenizers accepts
        c = chr(cp)
        cleaned = clean.normalize_str(f"a{c}b")
        ref_control, ref_space = cleaned == "ab", cleaned == "a b" and c != " "
        if ref_control != (c in "\x00\ufffd" or T.is_control(c)):
            table["control"][cp] = ref_control
        if not ref_control and ref_space != (T.is_whitespace(c) and c != " "):
            table["whitespace"][cp] = ref_space
        words = [w for w, _ in split.pre_tokenize_str(f"a{c}b")]
        ref_punct = words == ["a", c, "b"]
        if ref_punct != T.is_punctuation(c) and not T.is_whitespace(c):
            table["punctuation"][cp] = ref_punct
        stripped = strip.normalize_str(c)
        if unicodedata.normalize("NFD", c) == c:  # no decomposition: stripped or kept whole
            if (stripped == "") != (unicodedata.category(c) == "Mn"):
                table["mark"][cp] = stripped == ""
            if stripped not in ("", c):
                table["strip"][cp] = stripped     # a decomposition this Python does not know
        else:
            decomposing.append((c, stripped))
        lowered = lower.normalize_str(c)
        if lowered != c.lower():
            table["lower"][cp] = lowered
    T.OVERRIDES["mark"].update({chr(cp): v for cp, v in table["mark"].items()})
    for c, stripped in decomposing:           # with the marks settled, compare whole decompositions
        if stripped != "".join(d for d in unicodedata.normalize("NFD", c) if not T.is_nonspacing_mark(d)):
            table["strip"][ord(c)] = stripped
    data = {"unicodedata": unicodedata.unidata_version, "tokenizers": tokenizers.__version__,
            **{k: {str(cp): v for cp, v in sorted(d.items())} for k, d in table.items()}}
    OUT.write_text(json.dumps(data, ensure_ascii=True, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: " + ", ".join(f"{k} {len(d)}" for k, d in table.items()))


if __name__ == "__main__":
    main()
