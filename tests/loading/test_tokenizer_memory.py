"""RoBERTa's and ALBERT's tokenizers (the `tokenizers` library) cannot eat the machine.

The library's own truncation builds every overflowing piece of a pair: `trace("hello world " * 4000,
pair="the cat sat " * 4000, truncate=True)` peaked at 1.3 GB (ALBERT 3.4 GB) to keep 40 tokens, and a
tokenizer.json with a 1,000,000-character Prepend normalizer reached 23 GB at load. Each text is now cut to
a character budget before the library sees it, truncation is done by bertviz-lite, and such files are refused.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import bertviz_lite as bv
from bertviz_lite import library_tokenizer as LT
from bertviz_lite.errors import CheckpointError

tokenizers = pytest.importorskip("tokenizers")
ROOT = Path(__file__).resolve().parents[2]
FAMILY = ROOT / "tests" / "fixtures" / "checkpoints" / "family"
LIBRARY_FAMILIES = ["roberta_mlm", "albert_mlm"]
PEAK_MB = 300
LIMIT_MB = 1500  # the child's address-space limit: before the fix it aborted under it (SIGABRT from Rust)

CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit} << 20,) * 2)
import bertviz_lite as bv
{body}
# VmHWM, this process's own peak: ru_maxrss keeps the parent's high-water mark across fork and exec (a child of a
# 2 GB pytest process reported 2.2 GB)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"peak_mb": hwm / 1024, "result": result}}))
"""


def run_child(body: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD.format(limit=LIMIT_MB, body=body)], capture_output=True,
                         text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, f"the child failed (rc {out.returncode}): {out.stderr[-2000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh interpreter under an address-space limit (run_child)
@pytest.mark.parametrize("family", LIBRARY_FAMILIES)
def test_a_long_pair_truncated_stays_small(family):
    got = run_child(f"m = bv.load({str(FAMILY / family)!r}, backend='numpy')\n"
                    "tr = m.trace('hello world ' * 4000, pair='the cat sat ' * 4000, truncate=True)\n"
                    "result = tr.n")
    assert got["result"] == 40
    assert got["peak_mb"] < PEAK_MB, got


@pytest.mark.slow  # a fresh interpreter under an address-space limit (run_child)
def test_a_huge_prepend_normalizer_is_refused_at_load_with_the_reason(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(FAMILY / "roberta_mlm", folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "Prepend", "prepend": "ab" * 500_000}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    got = run_child("try:\n"
                    f"    bv.load({str(folder)!r}, backend='numpy'); result = 'loaded'\n"
                    "except bv.CheckpointError as e:\n"
                    "    result = str(e)")
    assert "1,000,000-character string" in got["result"] and "normalizer" in got["result"], got
    assert "abab" not in got["result"]  # the file is never quoted
    assert got["peak_mb"] < PEAK_MB, got


@pytest.mark.parametrize("step, value", [
    ("pre_tokenizer", {"type": "Split", "pattern": {"String": "x" * 5000}, "behavior": "Isolated",
                       "invert": False}),
    ("normalizer", {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": " "}, "content": "y" * 2000}]}),
])
def test_long_strings_in_any_text_step_are_refused(tmp_path, step, value):
    folder = tmp_path / "m"
    shutil.copytree(FAMILY / "roberta_mlm", folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok[step] = value
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match=f"its {step} holds a .*-character string"):
        bv.load(folder, backend="numpy")


def test_replace_steps_that_multiply_every_text_are_refused(tmp_path):
    # each string is short, but two Replace steps of " " -> 999 spaces make a text ~10**6 times longer
    step = {"type": "Replace", "pattern": {"String": " "}, "content": " " * 999}
    folder = tmp_path / "m"
    shutil.copytree(FAMILY / "roberta_mlm", folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "Sequence", "normalizers": [step, step]}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match="Replace steps can make a text 998,001 times longer"):
        bv.load(folder, backend="numpy")
    # the real files' Replace steps: ALBERT's `` -> " and '' -> ", and SentencePiece's " " -> "\u2581"
    real = {"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
        {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}}
    assert LT.oversized_step(real) is None


def test_albert_precompiled_charsmap_is_not_a_long_string():
    # SentencePiece's character map is a table (a long base64 string): real ALBERT files hold one
    d = {"normalizer": {"type": "Precompiled", "precompiled_charsmap": "A" * 100_000}}
    assert LT.oversized_step(d) is None


def precompiled(out: str, key: str = "a") -> dict:
    """A SentencePiece Precompiled normalizer mapping one ASCII character to `out`: the blob is a little-endian
    u32 trie size, a darts double-array trie (u32 units) holding the one key, then the NUL-ended strings."""
    units = [0] * 512
    units[0] = 1 << 10  # the root: its children sit at 1 ^ byte
    units[1 ^ ord(key)] = (1 << 10) | (1 << 8) | ord(key)  # the key's node: a leaf below it, at its ^ 1
    trie = struct.pack(f"<{len(units)}I", *units)  # units[(1 ^ ord(key)) ^ 1] = 0: the value, offset 0 in the pool
    blob = struct.pack("<I", len(trie)) + trie + out.encode() + b"\0"
    return {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}


def albert_with_normalizer(tmp_path, normalizer) -> Path:
    folder = tmp_path / "m"
    shutil.copytree(FAMILY / "albert_mlm", folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "Sequence", "normalizers": [normalizer, tok["normalizer"]]}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    return folder


def test_a_precompiled_charsmap_that_multiplies_every_text_is_refused(tmp_path):
    # the character map's strings were once exempt: one mapping "a" to 1,000,000 characters (a 1.3 MB file)
    # aborted ALBERT's load at 3.8 GB and RoBERTa's first trace of "a " * 100 at 3.3 GB
    hostile = precompiled("b" * 1_000_000)
    why = LT.oversized_step({"normalizer": {"type": "Sequence", "normalizers": [hostile]}})
    assert why is not None and "precompiled character map" in why and "1,000,000 times longer" in why
    with pytest.raises(CheckpointError, match="precompiled character map can make a text 1,000,000 times longer"):
        bv.load(albert_with_normalizer(tmp_path, hostile), backend="numpy")
    # growth multiplies with the Replace steps': 8 x 10 is over 64
    double = {"type": "Replace", "pattern": {"String": "c"}, "content": "c" * 8}
    assert "80 times" in LT.oversized_step({"normalizer": {"type": "Sequence", "normalizers": [
        double, precompiled("b" * 10)]}})
    # a map that cannot be read is named, not guessed at
    assert "cannot be read" in LT.oversized_step({"normalizer": {"type": "Precompiled", "precompiled_charsmap": "%"}})


def test_a_charsmap_of_real_size_loads_and_runs(tmp_path):
    # real tables map a character to a few (the longest in SentencePiece's nmt_nfkc: U+FDFA, 18 characters)
    model = bv.load(albert_with_normalizer(tmp_path, precompiled("bb")), backend="numpy")
    assert model.tokenize("a").tokens == model.tokenize("bb").tokens


def _words(rng, n):
    words = ["hello", "world", "the", "cat", "sat", "caf\u00e9", "na\u00efve", "\u65e5\u672c\u8a9e", "\U0001f600",
             "<mask>", "[MASK]", "a" * 150, ",", "!!", "\t", "  ", "\n", "x"]
    return "".join(rng.choice(words) + rng.choice([" ", "", "  "]) for _ in range(n))


@pytest.mark.parametrize("family", LIBRARY_FAMILIES)
def test_bounded_truncation_equals_the_librarys(family, monkeypatch):
    # small character budgets, so that texts are cut before tokenizing in most cases; the result must be
    # the library's own truncation of the whole texts, token for token and span for span. The one allowed
    # difference: both texts of a pair over the budget, one cut, and an odd budget, where the odd piece's
    # side is decided on the pieces read (the library counts whole texts); it is counted, not compared
    path = FAMILY / family / "tokenizer.json"
    mine = LT.LibraryTokenizer.from_tokenizer_json(path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    rng = random.Random(0)
    compared = 0
    for _ in range(150):
        a = _words(rng, rng.randint(0, 40))
        b = _words(rng, rng.randint(0, 40)) if rng.random() < 0.6 else None
        length = rng.choice([8, 20, 40, 65])
        cpt = rng.choice([1, 2, 4, 16])
        monkeypatch.setattr(LT, "CHARS_PER_TOKEN", cpt)
        ref.enable_truncation(length, strategy="longest_first")
        try:
            r = ref.encode(a, b)
        finally:
            ref.no_truncation()
        got = mine.encode(a, b, max_length=length, truncate=True)
        budget = length - ref.num_special_tokens_to_add(b is not None)
        over = b is not None and min(len(ref.encode(t, add_special_tokens=False).ids) for t in (a, b)) > budget
        if over and budget % 2 and max(len(a), len(b)) > (budget + 1) * cpt:
            assert len(got.ids) == len(r.ids)
            continue
        spans = [None if s is None or special else (s, x, y)
                 for s, special, (x, y) in zip(r.sequence_ids, r.special_tokens_mask, r.offsets)]
        assert (got.tokens, got.ids, got.segments, got.spans) == (r.tokens, r.ids, r.type_ids, spans), (a, b)
        compared += 1
    assert compared > 100


@pytest.mark.parametrize("family", LIBRARY_FAMILIES)
def test_a_text_that_fits_is_the_librarys_encoding(family):
    path = FAMILY / family / "tokenizer.json"
    mine = LT.LibraryTokenizer.from_tokenizer_json(path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    text, pair = "Hello, world! The cat sat on the mat.", "It purred: 42 times?"
    r = ref.encode(text, pair)
    got = mine.encode(text, pair)
    assert (got.tokens, got.ids, got.segments, got.truncated) == (r.tokens, r.ids, r.type_ids, 0)


def test_too_long_without_truncate_says_so_without_reading_it_all():
    tok = LT.LibraryTokenizer.from_tokenizer_json(FAMILY / "roberta_mlm" / "tokenizer.json")
    with pytest.raises(bv.InputTooLongError, match="more than 512 tokens.*truncate=True"):
        tok.encode("hello world " * 100_000)
    with pytest.raises(bv.InputTooLongError, match="the input is 3002 tokens"):
        tok.encode("hello " * 600)
