"""training/train_minilm_mlm.py, the script that makes minilm-mlm: it refuses bad arguments before any work,
reproduces its committed smoke log, is safe to run (a hostile cache or --out, a diverged run, a full disk, a
run stopped between two renames) and scores what it made."""
from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from bertviz_lite import loading

from ..helpers import FOLDER_PLANTS, OUT_PLANTS, copy_minilm_mlm, plant_at_out, plant_folder, rewrite_npz

pytestmark = pytest.mark.training  # scripts/test.sh runs this folder in its own step

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "training" / "train_minilm_mlm.py"
SHIPPED = loading.packaged_minilm_mlm_path()




# ------------------------------------------------------------------------------------------
# the training script
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(ROOT / "training"))
    try:
        import train_minilm_mlm
    finally:
        sys.path.remove(str(ROOT / "training"))
    return train_minilm_mlm


@pytest.fixture(scope="module")
def files(script):
    return sys.modules["private_files"]  # training/private_files.py, as the script imported it


@pytest.mark.parametrize("args, message", [
    (["--layers", "0"], "expected 1..6"), (["--layers", "x"], "whole number"), (["--lr-head", "-1"], "learning rate"),
    (["--lr-layers", "nan"], "learning rate"), (["--sentences", "5"], "expected >= 40"),
    (["--out", "/nonexistent/dir/m.safetensors"], "does not exist"), (["--out", "m.bin"], ".safetensors"),
    (["--write-log"], "goes with --smoke"), (["--check", "--out", "/nonexistent/m.safetensors"], "does not exist"),
    (["--out", "a\x00b.safetensors"], "NUL"), (["--out", "x" * 300 + ".safetensors"], "at most 255"),
    (["--init", "a\x00b.safetensors"], "NUL"),
])
def test_training_script_refuses_bad_arguments_before_any_work(script, args, message, capsys, monkeypatch):
    monkeypatch.setattr(script, "run", lambda args: pytest.fail("work started"))
    with pytest.raises(SystemExit) as e:
        script.main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_smoke_run_matches_the_committed_log(script, tmp_path, capsys):
    """A few fixed-seed steps on a tiny subset (under 20 s): the losses of tests/fixtures/mlm/train_smoke_log.json."""
    assert script.main(["--smoke", "--cache", str(tmp_path)]) == 0, capsys.readouterr().out



# ------------------------------------------------------------------------------------------
# the training script is safe to run (a hostile cache or --out, a diverged run, small runs)
# ------------------------------------------------------------------------------------------


def smoke(script, cache):
    return script.main(["--smoke", "--cache", str(cache)])


def the_cache_file(cache: Path) -> Path:
    (path,) = cache.glob("layer-input-*.npz")
    return path


@pytest.mark.parametrize("plant", FOLDER_PLANTS)
def test_a_cache_folder_that_is_not_private_is_refused(script, tmp_path, capsys, plant):
    cache = tmp_path / "cache"
    elsewhere = plant_folder(cache, plant)
    with pytest.raises(SystemExit) as e:  # refused with the arguments, before any work
        smoke(script, cache)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--cache" in err and str(cache) in err
    assert list(elsewhere.iterdir()) == [] and not list(tmp_path.glob("**/*.npz"))  # nothing written through


def test_the_cache_is_private_and_written_whole(script, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert smoke(script, cache) == 0
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    path = the_cache_file(cache)
    assert [p.name for p in cache.iterdir()] == [path.name]  # no temporary file left beside it
    with np.load(path) as f:
        assert set(f.files) == {"key", "offsets", "Z", "sha256"} and f["Z"].dtype == np.float32


@pytest.mark.parametrize("damage, why", [
    ("zeros", "sha256"), ("nan with its own sha256", "NaN"), ("half written", "unreadable"),
    ("other inputs", "other inputs"), ("float64", "expected float32"),
])
def test_planted_or_broken_features_are_not_trained_on(script, files, tmp_path, capsys, damage, why):
    cache = tmp_path / "cache"
    assert smoke(script, cache) == 0
    path = the_cache_file(cache)
    with np.load(path) as f:
        Z = f["Z"]
    if damage == "zeros":
        rewrite_npz(path, Z=np.zeros_like(Z))
    elif damage == "nan with its own sha256":
        bad = np.full_like(Z, np.nan)
        with np.load(path) as f:
            offsets = f["offsets"]
        rewrite_npz(path, Z=bad, sha256=np.array(files.sha256_of({"offsets": offsets, "Z": bad})))
    elif damage == "half written":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "other inputs":
        rewrite_npz(path, key=np.array("0" * 64))
    else:
        rewrite_npz(path, Z=Z.astype(np.float64))
    capsys.readouterr()
    assert smoke(script, cache) == 0  # made afresh: the same losses as the committed log
    out = capsys.readouterr().out
    assert "cannot be used" in out and why in out and "match" in out
    with np.load(the_cache_file(cache)) as f:
        np.testing.assert_array_equal(f["Z"], Z)  # and replaced by the right features


@pytest.mark.parametrize("plant", ["fifo", "symlink"])
def test_a_fifo_or_link_in_the_cache_is_refused_without_hanging(script, tmp_path, capsys, plant):
    cache = tmp_path / "cache"
    assert smoke(script, cache) == 0
    path = the_cache_file(cache)
    path.unlink()
    if plant == "fifo":
        os.mkfifo(path)
    else:
        target = tmp_path / "target.npz"
        target.write_bytes(b"not features")
        path.symlink_to(target)
    assert smoke(script, cache) == 2
    assert "refused" in capsys.readouterr().err
    if plant == "symlink":
        assert (tmp_path / "target.npz").read_bytes() == b"not features"


@pytest.mark.parametrize("which", ["weights", "json"])
@pytest.mark.parametrize("plant", OUT_PLANTS)
def test_out_is_only_a_regular_file_or_a_new_name(script, tmp_path, capsys, monkeypatch, which, plant):
    monkeypatch.setattr(script, "run", lambda args: pytest.fail("work started"))
    out = tmp_path / "m.safetensors"
    victim = plant_at_out(out, which, plant)
    with pytest.raises(SystemExit) as e:
        script.main(["--out", str(out)])
    assert e.value.code == 2 and "only onto a regular file" in capsys.readouterr().err
    assert victim.read_bytes() == b"keep me"


def test_a_full_disk_stops_the_run_before_any_work(script, tmp_path, capsys, monkeypatch):
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=2**20))
    monkeypatch.setattr(script, "features", lambda *a, **k: pytest.fail("work started"))
    out = tmp_path / "m.safetensors"
    assert script.main(["--sentences", "40", "--out", str(out), "--cache", str(tmp_path / "c")]) == 1
    assert "not enough disk space" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("how", ["loss", "weight"])
def test_a_diverged_run_exits_1_and_writes_nothing(script, tmp_path, capsys, monkeypatch, how):
    def diverging(params, frozen, batches, c, xp, *, on_log, **kw):
        if how == "loss":
            on_log((1, float("nan"), None))
        return {k: v * np.nan for k, v in params.items()}, [(1, 5.0, None)]
    monkeypatch.setattr(script.mlm, "train", diverging)
    out = tmp_path / "m.safetensors"
    code = script.main(["--sentences", "40", "--layers", "1", "--batch", "8", "--steps", "2", "--out", str(out),
                        "--cache", str(tmp_path / "cache")])
    assert code == 1 and "diverged" in capsys.readouterr().err
    assert not out.exists() and not out.with_suffix(".json").exists()


@pytest.mark.slow  # about 5 s: a small training or scoring run through the frozen encoder
def test_a_small_run_writes_loadable_files_and_reports_empty_groups(script, tmp_path, capsys, minilm):
    out = tmp_path / "m.safetensors"
    code = script.main(["--sentences", "40", "--layers", "1", "--batch", "8", "--steps", "2", "--out", str(out),
                        "--cache", str(tmp_path / "cache")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    info = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert info["heldout_sentences"] == 2 and any(g["rows"] == 0 for g in info["heldout"]["unigram"].values())
    assert "| - |" in printed or " - /" in printed  # an empty held-out group prints as '-', not a crash
    trained = loading.read_trained("minilm-mlm", out, minilm.config)
    assert {k.split(".")[1] for k in trained if k.startswith("layer.")} == {"5"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    cl = info["cloze"]["minilm-mlm"]
    for name in ("everyday", "cloze_sentences"):
        assert cl[name]["sentences"] == 30 and 0 <= cl[name]["echo"] <= 1


def test_a_step_too_large_for_memory_is_refused_with_its_estimate(script, capsys, monkeypatch):
    monkeypatch.setattr(script, "run", lambda args: pytest.fail("work started"))
    monkeypatch.setattr(script, "available_memory", lambda: 6 * 2**30)
    with pytest.raises(SystemExit) as e:
        script.main(["--batch", "4096", "--layers", "6"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "GiB" in err and "lower --batch or --layers" in err
    need = float(err.split("needs about ")[1].split(" GiB")[0])
    assert need == pytest.approx(script.step_bytes(4096, 6) / 2**30, abs=0.05) and need > 6


def test_echo_and_the_everyday_set(script):
    items = script.read_cloze(script.EVERYDAY)
    assert len(items) == 30 and all(len(ok) >= 1 for _, ok in items)
    vocab = set((ROOT / "bertviz_lite" / "data" / "vocab.txt").read_text(encoding="utf-8").splitlines())
    assert all(a in vocab for _, ok in items for a in ok)  # every answer is one word piece
    words = script.sentence_words("We eat soup with a [MASK].")
    assert words == {"we", "eat", "soup", "with", "a"}
    assert script.is_echo("soup", ["spoon"], words) and not script.is_echo("spoon", ["spoon"], words)
    assert not script.is_echo("fork", ["spoon"], words)


@pytest.mark.slow  # a fresh interpreter per script
@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "training").glob("*.py")))
def test_scripts_parse_their_arguments_before_any_work(name, tmp_path):
    """--help prints the usage and does nothing else, and an unknown option is refused: no file written here,
    in training/ or in the package's data."""
    import subprocess
    watched = [*(ROOT / "bertviz_lite" / "data").iterdir(), *(ROOT / "training").rglob("*")]
    before = {p: p.stat().st_mtime_ns for p in watched if p.is_file()}
    run = subprocess.run([sys.executable, str(ROOT / "training" / name), "--help"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and run.stdout.startswith("usage:"), run.stderr[-500:]
    refused = subprocess.run([sys.executable, str(ROOT / "training" / name), "--no-such-option"], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert refused.returncode == 2 and "unrecognized arguments: --no-such-option" in refused.stderr, refused.stderr
    assert {p: p.stat().st_mtime_ns for p in watched if p.is_file()} == before and list(tmp_path.iterdir()) == []


def test_the_usage_examples_are_what_wordnet_gives(script, tmp_path):
    if not Path("/usr/share/wordnet/data.noun").exists():
        pytest.skip("WordNet's data files are not installed (Debian's wordnet-base)")
    out = tmp_path / "usage.txt.gz"
    assert script.make_usage(out=out) == 0
    assert out.read_bytes() == script.USAGE.read_bytes()  # the committed file, byte for byte


@pytest.mark.slow  # about 5 s: a small training or scoring run through the frozen encoder
def test_evaluate_scores_a_file_beside_the_frozen_head(script, capsys):
    assert script.main(["--evaluate", "--sentences", "40"]) == 0  # the shipped file, on a small held-out split
    out = capsys.readouterr().out
    assert "everyday (30): top-1 / top-5 / echo" in out and "| model |" in out and "| frozen head |" in out


@pytest.mark.parametrize("text", ["a domesticated animal", "the act of running, etc.", "Who is there?",
                                  "children play in the park"])
def test_end_period_is_the_tokenization_of_the_text_with_a_period(script, minilm, text):
    """--end-period inserts "." before [SEP] of a training line: the same pieces as tokenizing the line with a
    period after it, and nothing added to a line that already ends with . ! or ?."""
    e = minilm.tokenize(text)
    got = script.end_with_period(minilm, e)
    want = minilm.tokenize(text if text[-1] in script.ENDINGS else text + ".")
    assert (got.tokens, got.ids, got.segments, got.mask, got.n_real) == (
        want.tokens, want.ids, want.segments, want.mask, want.n_real)
    assert (got is e) == (text[-1] in script.ENDINGS)


def test_headwords_write_a_training_definition_after_its_word(script, minilm):
    """--headwords: a WordNet definition of the corpus becomes 'word: definition' (the committed headwords
    line up with the committed definitions); an example sentence, and a line that would pass MAX_TOKENS
    pieces with its word, stay as they were."""
    corpus, heads = script.T.corpus(), script.MC.read_headwords()
    assert len(heads) == len(script.MC.read_glosses()) < len(corpus)
    i = heads.index("broom")
    assert corpus[i].startswith("a cleaning implement for sweeping")
    got = script.with_headword(minilm, corpus, i, minilm.tokenize(corpus[i]))
    assert got.ids == minilm.tokenize("broom: " + corpus[i]).ids
    j = heads.index("post office, local post office")
    for which, words in (("first", "post office"), ("all", "post office, local post office")):
        got = script.with_headword(minilm, corpus, j, minilm.tokenize(corpus[j]), which)
        assert got.ids == minilm.tokenize(f"{words}: {corpus[j]}").ids
    example = len(heads)  # the first example sentence
    e = minilm.tokenize(corpus[example])
    assert script.with_headword(minilm, corpus, example, e) is e
    # the first definition that fits alone and not with its word (only long ones can: tokenizing all 116,707
    # definitions took most of a minute)
    long = next(j for j, d in enumerate(corpus[:len(heads)]) if "," not in heads[j] and len(d.split()) >= 20
                and len(minilm.tokenize(d).ids) <= script.T.MAX_TOKENS < len(minilm.tokenize(f"{heads[j]}: {d}").ids))
    e = minilm.tokenize(corpus[long])
    assert script.with_headword(minilm, corpus, long, e) is e


def test_headwords_leave_the_held_out_split_as_it_is(script, minilm, tmp_path):
    """The held-out lines and draws are the same with and without --headwords; training definitions change."""
    runs = [script.prepare(script.parse_args(["--sentences", "400", "--out", str(tmp_path / "m.safetensors"),
                                              *flag]), minilm) for flag in ([], ["--headwords", "all"])]
    (encs0, n_held, *_, draws0, held0, _), (encs1, n_held1, *_, draws1, held1, _) = runs
    assert n_held == n_held1 and held0 == held1
    assert [e.ids for e in encs0[:n_held]] == [e.ids for e in encs1[:n_held]]
    assert [draws0[j][1].ids for j in held0] == [draws1[j][1].ids for j in held1]
    longer = sum(len(b.ids) > len(a.ids) for a, b in zip(encs0[n_held:], encs1[n_held:]))
    assert longer > (len(encs0) - n_held) // 2  # most training lines are definitions


def test_a_held_out_draw_ended_with_a_period_keeps_its_rows(script, minilm):
    """--evaluate's second held-out table: the same chosen rows and targets, "." before [SEP], the ids of
    end_with_period; a line that ends with "." (even when that piece is chosen) is left as it is."""
    tok = minilm.tokenizer
    common = {"vocab_size": minilm.config.vocab_size, "mask_id": tok.token_to_id("[MASK]"),
              "special_ids": {tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")}}
    e = minilm.tokenize("a domesticated animal kept for milk or meat")
    m = script.mlm.choose_masks(e.ids, np.random.default_rng(0), **common)
    got = script.period_draw(minilm, m)
    assert (got.positions, got.targets, got.kinds) == (m.positions, m.targets, m.kinds)
    assert got.ids == m.ids[:-1] + [tok.token_to_id(".")] + m.ids[-1:]
    ended = minilm.tokenize("a domesticated animal.")
    last = script.mlm.Masked(ids=ended.ids[:-2] + [tok.token_to_id("[MASK]")] + ended.ids[-1:],
                             positions=[len(ended.ids) - 2], targets=[ended.ids[-2]], kinds=["mask"])
    assert script.period_draw(minilm, last) is last


# ------------------------------------------------------------------------------------------
# an --out folder it cannot write, --report / --evaluate / --init errors, the weights and JSON as one pair
# ------------------------------------------------------------------------------------------


def test_an_out_folder_it_cannot_write_is_refused_before_any_work(script, tmp_path, capsys, monkeypatch):
    # a read-only folder (or another user's) was found only after the whole run; root may write anywhere,
    # so the check (os.access) is told the folder is read-only
    monkeypatch.setattr(script, "run", lambda args: pytest.fail("work started"))
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == tmp_path / "ro" else real(p, mode, **k))
    (tmp_path / "ro").mkdir()
    with pytest.raises(SystemExit) as e:
        script.main(["--out", str(tmp_path / "ro" / "m.safetensors"), "--cache", str(tmp_path / "c")])
    assert e.value.code == 2 and "cannot write into the folder" in capsys.readouterr().err


def _user_file(tmp_path) -> Path:
    path = copy_minilm_mlm(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def test_evaluate_and_init_errors_are_one_line_naming_the_users_file(script, tmp_path, capsys, monkeypatch):
    # these were raw CheckpointError tracebacks, whose advice named the shipped file (git checkout) for the user's own
    monkeypatch.setattr(script, "prepare", lambda *a: pytest.fail("work started"))
    path = _user_file(tmp_path)
    for args in (["--evaluate", "--out", str(path)],
                 ["--init", str(path), "--out", str(tmp_path / "new.safetensors"), "--cache", str(tmp_path / "c")]):
        assert script.main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("refused:") and err.count("\n") == 1 and str(path) in err, err
        assert "git checkout" not in err and "another minilm-mlm file" in err


@pytest.mark.parametrize("text", ["not json", '{"heldout": {}}', "[" * 100_000 + "]" * 100_000])
def test_a_report_of_a_file_that_is_no_runs_json_is_one_line(script, tmp_path, capsys, text):
    # these were a raw JSONDecodeError / KeyError / RecursionError
    out = tmp_path / "m.safetensors"
    out.with_suffix(".json").write_text(text)
    assert script.main(["--report", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("is not a run's JSON" in err or "nested too deeply" in err), err


def _new_pair(script, tmp_path):
    """The shipped weights at tmp_path (the old pair), and new weights (one tensor changed) with their JSON."""
    import hashlib
    from safetensors.numpy import load_file
    out = copy_minilm_mlm(tmp_path)
    tensors = load_file(str(SHIPPED))
    tensors["mlm.bias"] = (tensors["mlm.bias"] + 1).astype(tensors["mlm.bias"].dtype)
    first = min(int(k.split(".")[1]) for k in tensors if k.startswith("layer."))
    fresh = tmp_path / "fresh" / loading.MINILM_MLM_FILE
    fresh.parent.mkdir()
    script.WF.save_minilm_mlm(fresh, tensors, first=first)
    data = fresh.read_bytes()
    return out, data, json.dumps({"file": {"sha256": hashlib.sha256(data).hexdigest()}}) + "\n", tensors


def test_a_run_stopped_between_the_two_renames_leaves_a_pair_that_loads(script, tmp_path, minilm, monkeypatch):
    # weights and JSON were two renames; a kill between them left new weights beside the old JSON: refused
    out, data, info, tensors = _new_pair(script, tmp_path)
    real = os.replace

    def killed(src, dst):
        if Path(dst) == out.with_suffix(".json"):
            raise KeyboardInterrupt  # the run stopped just before the JSON's rename
        real(src, dst)
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        script.write_outputs(out, data, info)
    monkeypatch.setattr(os, "replace", real)
    got = loading.read_trained("minilm-mlm", out, minilm.config)  # the new pair
    np.testing.assert_array_equal(got["mlm.bias"], tensors["mlm.bias"].astype(np.float32))
    script.write_outputs(out, data, info)  # the next run finishes the job and leaves nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["minilm_mlm.json", loading.MINILM_MLM_FILE]


def test_a_full_disk_while_writing_leaves_the_earlier_pair_as_it_was(script, files, tmp_path, minilm, monkeypatch):
    # "any earlier file is unchanged" was not true when the JSON's write failed after the weights' rename
    import errno
    out, data, info, _ = _new_pair(script, tmp_path)
    before = {p: p.read_bytes() for p in (out, out.with_suffix(".json"))}
    real = files.write_beside

    def full(target, text, sync=False):
        if Path(target).suffix == ".json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(target, text, sync=sync)
    monkeypatch.setattr(files, "write_beside", full)
    with pytest.raises(OSError):
        script.write_outputs(out, data, info)
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["minilm_mlm.json", loading.MINILM_MLM_FILE]
    loading.read_trained("minilm-mlm", out, minilm.config)
