"""training/private_files.py: the training scripts' feature cache is private and checked before use, and their
files are written whole. train_mlm_head.py used to cache its features as .npy files in a
predictable folder of the shared temporary directory, read without a check: anyone could plant them there."""

from __future__ import annotations

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
import private_files as files  # noqa: E402
import train_mlm_head  # noqa: E402

sys.path.remove(str(ROOT / "training"))

from ..helpers import FOLDER_PLANTS, plant_folder, rewrite_npz  # noqa: E402

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


def test_the_head_script_exits_2_on_a_cache_folder_that_is_a_link(tmp_path, capsys, monkeypatch):
    # --cache was checked only after the whole corpus was tokenized
    monkeypatch.setattr(train_mlm_head, "encode", lambda *a: pytest.fail("work started"))
    elsewhere = plant_folder(tmp_path / "cache", "symlink")
    out = tmp_path / "head.safetensors"
    with pytest.raises(SystemExit) as e:
        train_mlm_head.main(["--sentences", "40", "--cache", str(tmp_path / "cache"), "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--cache" in err and "a symbolic link" in err
    assert list(elsewhere.iterdir()) == [] and not out.exists()


def test_the_other_script_checks_its_cache_before_any_work(tmp_path, capsys, monkeypatch):
    # the same for train_minilm_mlm.py
    import train_minilm_mlm
    monkeypatch.setattr(train_minilm_mlm, "prepare", lambda *a: pytest.fail("work started"))
    plant_folder(tmp_path / "cache", "open to others")
    with pytest.raises(SystemExit) as e:
        train_minilm_mlm.main(["--sentences", "40", "--cache", str(tmp_path / "cache"),
                               "--out", str(tmp_path / "m.safetensors")])
    assert e.value.code == 2 and "open to others" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# the mode of what is written, a header that lies, a folder in the way, a cache in a folder others can
# rename, the encoder's weights in the key
# ------------------------------------------------------------------------------------------


def test_a_new_file_follows_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path):
    # mkstemp made every output 0600, whatever the umask or the old file's mode
    new, old = tmp_path / "new.safetensors", tmp_path / "old.safetensors"
    old.write_bytes(b"old")
    old.chmod(0o664)
    before = os.umask(0o022)
    try:
        files.write_atomic(new, b"new weights")
        files.write_atomic(old, b"new weights")
        files.write_pair(tmp_path / "pair.safetensors", b"weights", "{}\n")
    finally:
        os.umask(before)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 and stat.S_IMODE(old.stat().st_mode) == 0o664
    for name in ("pair.safetensors", "pair.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_a_cache_file_whose_header_declares_too_many_rows_is_made_afresh(tmp_path):
    # a header declaring 10**12 rows gave a raw MemoryError
    import zipfile
    cache, make = tmp_path / "cache", Maker()
    cached(cache, make)
    path = the_file(cache)
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    import io
    header = io.BytesIO()  # rows.npy's header declaring 10**12 rows, its 48 bytes after it
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 3)})
    members["rows.npy"] = header.getvalue() + np.arange(12, dtype=np.float32).tobytes()
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    said = []
    again = cached(cache, make, said)
    assert make.calls == 2 and any("cannot be used" in s for s in said), said
    np.testing.assert_array_equal(again["rows"], Maker()()["rows"])


def test_a_folder_at_the_cache_files_name_names_the_cache(tmp_path):
    # a folder at the cache file's name was told to "choose another --out"
    cache, make = tmp_path / "cache", Maker()
    cached(cache, make)
    path = the_file(cache)
    path.unlink()
    path.mkdir()
    with pytest.raises(files.UnsafePath) as e:
        cached(cache, make)
    assert "--cache" in str(e.value) and "--out" not in str(e.value) and str(path) in str(e.value)


def test_a_cache_in_a_folder_others_can_rename_it_in_is_refused(tmp_path):
    # a cache inside another user's non-sticky 0777 folder was accepted: its owner (or anyone) can
    # rename our folder away and put a link in its place
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root (CI runs as root)")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 12345, 12345)
    shared.chmod(0o777)
    with pytest.raises(files.UnsafePath, match="others can rename"):
        files.private_folder(shared / "cache")
    assert not (shared / "cache").exists()  # refused before it was made
    os.chown(shared, 0, 0)
    shared.chmod(0o1777)  # root's and sticky, as /tmp: only the owner of an entry may rename it
    assert files.private_folder(shared / "cache") == shared / "cache"


def test_the_head_features_are_keyed_on_the_encoders_weights(minilm, encs, tmp_path, capsys):
    # the key was (seed, layer, source name, ids): an encoder with one weight changed got another's features
    import bertviz_lite as bv
    from bertviz_lite.backend import to_host
    cache = tmp_path / "cache"
    first = head_features(minilm, encs, cache)
    weights = {k: to_host(v).copy() for k, v in minilm.weights.items()}
    weights["layer.5.ffn.W_down"][0, 0] += 1.0
    changed = bv.Bert(minilm.config, weights, minilm.tokenizer, name=minilm.name, backend_name="numpy",
                      source=minilm.source)
    other = head_features(changed, encs, cache)
    assert len(list(cache.glob("head-input-*.npz"))) == 2  # its own file, not the first model's
    assert not np.array_equal(first[0], other[0])
