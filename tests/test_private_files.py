"""scripts/private_files.py: the training scripts' feature cache is private and checked before use, and their
files are written whole (issue 38 item 6). train_mlm_head.py used to cache its features as .npy files in a
predictable folder of the shared temporary directory, read without a check: anyone could plant them there."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import private_files as files  # noqa: E402
import train_mlm_head  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))

from .helpers import FOLDER_PLANTS, plant_folder, rewrite_npz  # noqa: E402

NAMES = ("rows", "ids")


class Maker:
    """make() for cached_arrays, counting its calls: the work a cache saves or redoes."""

    def __init__(self):
        self.calls = 0

    def __call__(self) -> dict:
        self.calls += 1
        return {"rows": np.arange(12, dtype=np.float32).reshape(4, 3), "ids": np.arange(4, dtype=np.int64)}


def shapes_fit(f: dict):
    return None if f["rows"].shape == (4, 3) and f["rows"].dtype == np.float32 else \
        f"rows is {f['rows'].dtype} {f['rows'].shape}, expected float32 (4, 3)"


def cached(cache: Path, make: Maker, said: list | None = None, key: str = "k" * 64) -> dict:
    return files.cached_arrays(cache, "test", key, NAMES, make, shapes_fit,
                               say=(said.append if said is not None else print))


def the_file(cache: Path) -> Path:
    (path,) = cache.glob("test-*.npz")
    return path


def test_the_cache_is_private_written_whole_and_reused(tmp_path):
    cache, make = tmp_path / "cache", Maker()
    first = cached(cache, make)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert [p.name for p in cache.iterdir()] == [the_file(cache).name]  # no temporary file left beside it
    again = cached(cache, make)
    assert make.calls == 1  # the second call read the file
    for name in NAMES:
        np.testing.assert_array_equal(again[name], first[name])
        assert again[name].dtype == first[name].dtype


@pytest.mark.parametrize("plant", FOLDER_PLANTS)
def test_a_cache_folder_that_is_not_private_is_refused(tmp_path, plant):
    cache = tmp_path / "cache"
    elsewhere = plant_folder(cache, plant)
    make = Maker()
    with pytest.raises(files.UnsafePath, match=str(cache)):
        cached(cache, make)
    assert make.calls == 0 and list(elsewhere.iterdir()) == [] and not list(tmp_path.glob("**/*.npz"))


@pytest.mark.parametrize("plant", ["fifo", "symlink", "someone else's"])
def test_a_planted_cache_file_is_refused_without_hanging(tmp_path, plant):
    cache = tmp_path / "cache"
    cached(cache, Maker())
    path = the_file(cache)
    target = tmp_path / "target.npz"
    if plant == "fifo":
        path.unlink()
        os.mkfifo(path)  # opened for reading without O_NONBLOCK, this would wait for a writer forever
    elif plant == "symlink":
        shutil.move(path, target)  # a good file, even: read through a link it is still refused
        path.symlink_to(target)
    else:
        if os.getuid() != 0:
            pytest.skip("giving a file to another user needs root (CI runs as root)")
        os.chown(path, 12345, 12345)
    make = Maker()
    with pytest.raises(files.UnsafePath, match="the feature cache"):
        cached(cache, make)
    assert make.calls == 0
    if plant == "symlink":
        assert path.is_symlink() and target.stat().st_size > 0  # neither followed nor replaced


@pytest.mark.parametrize("damage, why", [
    ("zeros", "sha256"), ("nan with its own sha256", "NaN"), ("half written", "unreadable"),
    ("other inputs", "other inputs"), ("float64 with its own sha256", "expected float32"),
    ("an extra array", "arrays"), ("not a zip", "unreadable"),
])
def test_a_broken_or_planted_cache_file_is_replaced(tmp_path, damage, why):
    cache = tmp_path / "cache"
    right = cached(cache, Maker())
    path = the_file(cache)
    if damage == "zeros":
        rewrite_npz(path, rows=np.zeros((4, 3), np.float32))  # the sha256 stored is the right arrays'
    elif damage == "nan with its own sha256":
        bad = {"rows": np.full((4, 3), np.nan, np.float32), "ids": right["ids"]}
        rewrite_npz(path, **bad, sha256=np.array(files.sha256_of(bad)))
    elif damage == "half written":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "other inputs":
        rewrite_npz(path, key=np.array("0" * 64))
    elif damage == "float64 with its own sha256":
        bad = {"rows": right["rows"].astype(np.float64), "ids": right["ids"]}
        rewrite_npz(path, **bad, sha256=np.array(files.sha256_of(bad)))
    elif damage == "an extra array":
        rewrite_npz(path, evil=np.zeros(1))
    else:
        path.write_bytes(b"not features")
    make, said = Maker(), []
    fresh = cached(cache, make, said)
    assert make.calls == 1 and len(said) == 1 and "cannot be used" in said[0] and why in said[0], said
    for name in NAMES:
        np.testing.assert_array_equal(fresh[name], right[name])
    again = Maker()
    cached(cache, again)
    assert again.calls == 0  # and the file was replaced by the right arrays


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path, monkeypatch):
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    said, make = [], Maker()
    out = cached(tmp_path / "cache", make, said)
    assert make.calls == 1 and out["rows"].shape == (4, 3)
    assert "not cached" in said[0] and list((tmp_path / "cache").iterdir()) == []


def test_writes_are_whole_or_nothing(tmp_path, monkeypatch):
    out = tmp_path / "m.safetensors"
    out.write_bytes(b"the old weights")
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    with pytest.raises(OSError, match="MiB free"):
        files.write_atomic(out, b"x" * 5000)  # refused before writing: the disk is full
    monkeypatch.setattr(shutil, "disk_usage", real)

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)  # the disk fills up while writing
    with pytest.raises(OSError, match="No space"):
        files.write_atomic(out, b"the new weights")
    assert out.read_bytes() == b"the old weights" and [p.name for p in tmp_path.iterdir()] == [out.name]
    monkeypatch.undo()
    files.write_atomic(out, b"the new weights")
    assert out.read_bytes() == b"the new weights" and [p.name for p in tmp_path.iterdir()] == [out.name]


# ------------------------------------------------------------------------------------------
# train_mlm_head.py's features go through it
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encs(minilm):
    return [minilm.tokenize(s) for s in ("The cat sat on the mat.", "Paris is the capital of France.",
                                         "She drank a cup of hot tea.", "He played the violin.")]


def head_features(minilm, encs, cache):
    return train_mlm_head.cached_features(minilm, encs, 0, minilm.config.num_layers - 1, cache, progress=False)


def test_the_head_scripts_features_are_cached_privately(minilm, encs, tmp_path, capsys):
    cache = tmp_path / "cache"
    first = head_features(minilm, encs, cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    (path,) = cache.glob("head-input-*.npz")
    mtime = path.stat().st_mtime_ns
    again = head_features(minilm, encs, cache)
    assert path.stat().st_mtime_ns == mtime and "cannot be used" not in capsys.readouterr().out  # read, not made
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("plant", ["fifo", "symlink"])
def test_the_head_script_refuses_a_planted_cache_file(minilm, encs, tmp_path, plant):
    cache = tmp_path / "cache"
    head_features(minilm, encs, cache)
    (path,) = cache.glob("head-input-*.npz")
    path.unlink()
    if plant == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "planted").write_bytes(b"planted features")
        path.symlink_to(tmp_path / "planted")
    with pytest.raises(files.UnsafePath):
        head_features(minilm, encs, cache)
    if plant == "symlink":
        assert (tmp_path / "planted").read_bytes() == b"planted features"


def test_the_head_script_replaces_features_that_do_not_fit(minilm, encs, tmp_path, capsys):
    cache = tmp_path / "cache"
    right = head_features(minilm, encs, cache)
    (path,) = cache.glob("head-input-*.npz")
    bad = dict(zip(train_mlm_head.FEATURES, right))
    bad["which"] = bad["which"] + len(encs)  # rows of sentences these encodings do not have, with their sha256
    rewrite_npz(path, **bad, sha256=np.array(files.sha256_of(bad)))
    fresh = head_features(minilm, encs, cache)
    assert "which holds values outside" in capsys.readouterr().out
    for a, b in zip(right, fresh):
        np.testing.assert_array_equal(a, b)


def test_the_head_script_exits_2_on_a_cache_folder_that_is_a_link(tmp_path, capsys):
    elsewhere = plant_folder(tmp_path / "cache", "symlink")
    out = tmp_path / "head.safetensors"
    code = train_mlm_head.main(["--sentences", "8", "--cache", str(tmp_path / "cache"), "--out", str(out)])
    assert code == 2 and "refused" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == [] and not out.exists()
