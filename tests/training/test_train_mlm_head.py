"""training/train_mlm_head.py is as careful as train_minilm_mlm.py: its arguments, --out and its .json and the
cache are checked before any work, each refusal is one line, and the head and its JSON are written whole, as a
pair, with the mode a new file or the replaced one should have."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.training  # scripts/test.sh runs this folder in its own step

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "training"))
import train_mlm_head as T  # noqa: E402

sys.path.remove(str(ROOT / "training"))

from ..helpers import OUT_PLANTS, plant_at_out  # noqa: E402


@pytest.fixture
def no_work(monkeypatch):
    monkeypatch.setattr(T, "run", lambda args: pytest.fail("work started"), raising=False)
    monkeypatch.setattr(T, "encode", lambda *a: pytest.fail("work started"))


def refused(args, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        T.main(args)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert e.value.code == 2 and "Traceback" not in err and "error: " in last, err  # the usage and one line
    return last


@pytest.mark.parametrize("args, message", [
    (["--sentences", "0"], "expected >= 40"), (["--sentences", "-5"], "expected >= 40"),  # these never stopped
    (["--epochs", "0"], "expected 1..50"), (["--epochs", "x"], "whole number"),  # these were raw tracebacks
    (["--layer", "99"], "expected 0..5"), (["--layer", "-1"], "expected 0..5"),
    (["--seed", "-1"], "expected >= 0"),
    (["--out", "head.bin"], ".safetensors"),
    (["--out", "/nonexistent/dir/h.safetensors"], "does not exist"),
    (["--out", "a\x00b.safetensors"], "NUL"), (["--out", "x" * 300 + ".safetensors"], "255"),
    (["--check", "--out", "/nonexistent/h.safetensors"], "does not exist"),  # --check without files
    (["--report", "--out", "/nonexistent/h.safetensors"], "does not exist"),  # --report without files
    (["--check", "--report"], "not allowed with"),
])
def test_bad_arguments_are_refused_before_any_work(args, message, capsys, no_work, tmp_path):
    assert message in refused(args + (["--cache", str(tmp_path / "c")] if "--cache" not in args else []), capsys)


@pytest.mark.parametrize("which", ["weights", "json"])
@pytest.mark.parametrize("plant", OUT_PLANTS)
def test_out_is_only_a_regular_file_or_a_new_name(tmp_path, capsys, no_work, which, plant):
    # the .json was written with write_text: through a link (the target overwritten), into a FIFO (a hang);
    # and an --out that is a folder was a raw traceback after the work
    out = tmp_path / "h.safetensors"
    victim = plant_at_out(out, which, plant)
    err = refused(["--out", str(out), "--cache", str(tmp_path / "c")], capsys)
    assert "only onto a regular file" in err and victim.read_bytes() == b"keep me"


def test_a_report_whose_json_is_a_fifo_or_not_a_run_is_one_line(tmp_path, capsys):
    # --report on a FIFO hung; on a file that is no run's JSON it was a raw traceback
    out = tmp_path / "h.safetensors"
    os.mkfifo(out.with_suffix(".json"))
    assert "regular file" in refused(["--report", "--out", str(out)], capsys)
    out.with_suffix(".json").unlink()
    for text in ("not json", '{"heldout": 5}', "[" * 100_000 + "]" * 100_000):
        out.with_suffix(".json").write_text(text)
        assert T.main(["--report", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "is not a run's JSON" in err or "nested too deeply" in err
        assert err.count("\n") == 1


def test_a_full_disk_stops_the_run_before_any_work(tmp_path, capsys, monkeypatch):
    # a full disk was a raw traceback after the whole fit
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=2**20))
    monkeypatch.setattr(T, "encode", lambda *a: pytest.fail("work started"))
    out = tmp_path / "h.safetensors"
    assert T.main(["--sentences", "40", "--out", str(out), "--cache", str(tmp_path / "c")]) == 1
    assert "not enough disk space" in capsys.readouterr().err and not out.exists()


def test_a_small_run_writes_the_pair_whole_with_the_mode_it_should_have(tmp_path, capsys, minilm):
    # the head and its JSON written whole (no temporary file left), the JSON last, mode by the umask
    from bertviz_lite import loading
    out = tmp_path / "h.safetensors"
    out.with_suffix(".json").write_text("{}")
    out.with_suffix(".json").chmod(0o640)
    before = os.umask(0o022)
    try:
        code = T.main(["--sentences", "40", "--epochs", "1", "--out", str(out), "--cache", str(tmp_path / "c")])
    finally:
        os.umask(before)
    assert code == 0, capsys.readouterr()
    assert stat.S_IMODE(out.stat().st_mode) == 0o644 and stat.S_IMODE(out.with_suffix(".json").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "h.json", "h.safetensors"]
    info = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert info["sentences"] == 40 and info["layer"] == 5
    assert info["file"] == {"name": "h.safetensors", "bytes": out.stat().st_size,
                            "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}  # what the package checks
    head = loading.read_trained("head", out, minilm.config)
    assert all(np.isfinite(v).all() for v in head.values())
