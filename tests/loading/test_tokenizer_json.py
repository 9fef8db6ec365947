"""tokenizer.json files run by the `tokenizers` library (RoBERTa's BPE, ALBERT's Unigram) are checked at
load: anything the library raises, its Rust panics included, is one CheckpointError naming the file and
never quoting it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import bertviz_lite as bv
from bertviz_lite.errors import BertVizError, CheckpointError

from ..helpers import peak_bytes

pytest.importorskip("tokenizers")
ROBERTA = Path(__file__).parents[1] / "fixtures" / "checkpoints" / "family" / "roberta_mlm"
SECRET = "TOPSECRETzzq"


def folder_with(tmp_path, change, name="m") -> Path:
    folder = tmp_path / name
    shutil.copytree(ROBERTA, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    change(tok)
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    return folder


BROKEN = {
    # a merge of tokens not in the vocabulary: the library raised a bare Exception quoting the token
    "merge with unknown tokens": lambda t: t["model"]["merges"].append([SECRET, SECRET + "b"]),
    "vocabulary of the wrong type": lambda t: t["model"].__setitem__("vocab", [SECRET, 2]),
    "merges of the wrong type": lambda t: t["model"].__setitem__("merges", {SECRET: 1}),
    "unknown normalizer": lambda t: t.__setitem__("normalizer", {"type": SECRET}),
    # loads, then panics in Rust (pyo3's PanicException, a BaseException) on every text
    "replace of the empty string": lambda t: t.__setitem__(
        "normalizer", {"type": "Replace", "pattern": {"String": ""}, "content": SECRET}),
    # loads, then a backtracking pre-tokenizer regex panics past oniguruma's retry limit
    "backtracking regex": lambda t: t.__setitem__(
        "pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}),
}


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_a_broken_tokenizer_json_is_one_checkpoint_error_at_load(tmp_path, what):
    folder = folder_with(tmp_path, BROKEN[what])
    with pytest.raises(CheckpointError) as err:
        bv.load(folder, backend="numpy")
    message = str(err.value)
    assert str(folder / "tokenizer.json") in message
    assert SECRET not in message and "(a+)+" not in message  # the file is never quoted


def test_a_tokenizer_that_panics_later_fails_with_an_error_not_a_panic(tmp_path):
    # a regex the probe sentences do not trip: the panic comes at trace time, as a BertVizError
    # (which `except Exception` and the CLI catch) instead of pyo3's PanicException
    regex = {"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated", "invert": False}
    folder = folder_with(tmp_path, lambda t: t.__setitem__("pre_tokenizer", regex))
    model = bv.load(folder, backend="numpy")
    model.trace("the cat sat")
    with pytest.raises(BertVizError, match="tokenizers library"):
        model.trace("x" * 200)


def test_the_error_never_shows_a_linked_files_content(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text(f'{{"model": {{"type": "BPE", "vocab": {{"{SECRET}": 0}}, "merges": [["{SECRET}", "q"]]}}}}')
    folder = folder_with(tmp_path, lambda t: None)
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer.json").symlink_to(outside)
    with pytest.raises(CheckpointError) as err:
        bv.load(folder, backend="numpy")
    assert SECRET not in str(err.value) and "tokenizer.json" in str(err.value)


@pytest.mark.parametrize("pad", [10**9, -1, "x", 1.5])
def test_pad_token_id_outside_the_vocabulary_is_refused_at_load(tmp_path, pad):
    # such a file once loaded, then trace_batch and head_stats failed with IndexError (RoBERTa with -3: every trace)
    folder = folder_with(tmp_path, lambda t: None)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["pad_token_id"] = pad
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="pad_token_id"):
        bv.load(folder, backend="numpy")


def test_the_good_fixture_still_loads_and_matches(tmp_path):
    model = bv.load(folder_with(tmp_path, lambda t: None), backend="numpy")
    assert model.tokenize("the cat sat").tokens[0] == "<s>"


PANICS = {
    "load": {"normalizer": {"type": "Replace", "pattern": {"String": ""}, "content": "x"}},  # the probe panics
    "trace": {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated",
                                "invert": False}},  # the probes pass, the traced text panics
}


@pytest.mark.slow  # a fresh interpreter
@pytest.mark.parametrize("when", sorted(PANICS))
def test_a_caught_panic_prints_no_panic_text_in_the_cli(tmp_path, when):
    # a caught panic still had Rust's panic hook wrote ~60 lines (panic text, "stack backtrace") to fd 2
    import os
    import subprocess
    import sys
    folder = folder_with(tmp_path, lambda t: t.update(PANICS[when]))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RUST_BACKTRACE": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "bertviz_lite", "trace", "x" * 200, "--model", str(folder)],
                         capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert out.returncode != 0 and "tokenizers library" in out.stderr
    assert "panicked" not in out.stderr and "backtrace" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2, out.stderr


def test_a_caught_panic_prints_nothing_in_python(tmp_path, capfd):
    model = bv.load(folder_with(tmp_path, lambda t: t.update(PANICS["trace"])), backend="numpy")
    capfd.readouterr()
    with pytest.raises(BertVizError, match="tokenizers library"):
        model.trace("x" * 200)
    assert capfd.readouterr().err == ""


BERT_CASED = Path(__file__).parents[1] / "fixtures" / "checkpoints" / "family" / "bert_cased"


@pytest.mark.parametrize("bad_id", [10**12, 138, -1, "7", 2.0, None])
def test_a_wordpiece_vocab_id_outside_the_vocabulary_is_refused_before_building(tmp_path, bad_id):
    # an id of 10**12 once gave a raw MemoryError (a list of 10**12 entries was built first)
    folder = tmp_path / "m"
    shutil.copytree(BERT_CASED, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["model"]["vocab"][next(reversed(tok["model"]["vocab"]))] = bad_id
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match=r"tokenizer.json.*the ids must be the whole numbers 0\.\.137"):
        bv.load(folder, backend="numpy")


def test_tokenizing_works_with_no_stderr_to_hold(tmp_path, monkeypatch):
    # the panic guard redirects fd 2 while the library runs; where that cannot be done it runs as is
    from bertviz_lite import library_tokenizer as LT

    def no_fd(fd):
        raise OSError(9, "Bad file descriptor")

    model = bv.load(ROBERTA, backend="numpy")
    expected = model.tokenize("the cat sat", pair="on the mat").tokens
    monkeypatch.setattr(LT.os, "dup", no_fd)
    assert model.tokenize("the cat sat", pair="on the mat").tokens == expected


@pytest.mark.parametrize("value, match", [(-1, "-1"), ("100", "str '100'"), (10**9, "1000000000"), (0, "int 0"),
                                          (True, "bool"), (100.0, "float")])
def test_max_input_chars_per_word_is_checked_at_load(tmp_path, value, match):
    # 10**9 once made greedy longest-match take minutes on one long word (truncate= did not help), -1 made every
    # word [UNK] silently, "100" gave a raw TypeError at the first trace
    folder = tmp_path / "m"
    shutil.copytree(BERT_CASED, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["model"]["max_input_chars_per_word"] = value
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(CheckpointError, match=f"max_input_chars_per_word must be a whole number 1 to 1,000.*{match}"):
        bv.load(folder, backend="numpy")


def test_max_input_chars_per_word_of_real_files_loads(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(BERT_CASED, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["model"]["max_input_chars_per_word"] = 200
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    assert bv.load(folder, backend="numpy").tokenizer.max_input_chars_per_word == 200


def _roberta_with_file(tmp_path, write) -> Path:
    folder = tmp_path / "m"
    shutil.copytree(ROBERTA, folder)
    (folder / "tokenizer.json").unlink()
    write(folder / "tokenizer.json")
    return folder


UNREADABLE = {
    # each was once reported as "this folder's tokenizer.json names another model"
    "truncated": (lambda p: p.write_bytes((ROBERTA / "tokenizer.json").read_bytes()[:5000]),
                  "is not complete JSON.*cut short"),
    "not UTF-8": (lambda p: p.write_bytes(b'{"model": {"type": "BPE", "vocab": {"\xff\xfe": 0}}}'),
                  r"is not UTF-8 text \(byte 37 "),
    "a FIFO": (lambda p: os.mkfifo(p), "is not a regular file \\(a FIFO\\)"),
    "a folder": (lambda p: p.mkdir(), "is not a regular file \\(a folder\\)"),
}


@pytest.mark.parametrize("what", sorted(UNREADABLE))
def test_an_unreadable_tokenizer_json_is_named_for_what_it_is(tmp_path, what):
    write, match = UNREADABLE[what]
    with pytest.raises(CheckpointError, match=match) as err:
        bv.load(_roberta_with_file(tmp_path, write), backend="numpy")
    assert "another model" not in str(err.value) and "tokenizer.json" in str(err.value)


def test_a_huge_tokenizer_json_is_refused_before_it_is_read(tmp_path):
    # 600 MB was once a raw MemoryError; 123 MiB took 17 s and 2.2 GB before its vocabulary was refused
    def sparse(path):
        with open(path, "wb") as f:
            f.truncate(200 * 2**20)  # a sparse file: no disk used, no byte read

    folder = _roberta_with_file(tmp_path, sparse)

    def load():
        with pytest.raises(CheckpointError, match="200 MiB.*at most 64 MiB"):
            bv.load(folder, backend="numpy")

    assert peak_bytes(load) < 16 * 2**20
