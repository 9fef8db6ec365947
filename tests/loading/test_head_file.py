"""The trained files the package ships (bertviz_lite.trained): one reader, one checksum rule (the JSON beside the
weights records the sha256 of their bytes), metadata parsed defensively. The files are written here without
training's writer (tests/helpers.write_trained), so the reader is held to the format, not to its twin."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bertviz_lite import loading, trained
from bertviz_lite.config import BertConfig
from bertviz_lite.errors import CheckpointError

from ..helpers import write_trained

CONFIG = BertConfig(vocab_size=9, hidden_size=4, num_layers=6, num_heads=2, ffn_size=8)
HEAD = {"format": trained.KINDS["head"].format, "encoder": loading.MINILM_REPO, "layer": "5"}


def small_head(seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=s).astype(np.float32)
            for k, s in (("mlm.W_t", (4, 4)), ("mlm.b_t", (4,)), ("mlm.ln.gamma", (4,)), ("mlm.ln.beta", (4,)),
                         ("mlm.bias", (9,)))}


@pytest.mark.parametrize("kind", sorted(trained.KINDS))
def test_each_packaged_file_is_the_bytes_its_json_records(kind):
    path = trained.packaged_path(kind)
    record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))["file"]
    assert record["name"] == path.name and record["bytes"] == path.stat().st_size
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == trained.file_sha256(path)


def test_a_head_written_by_the_format_reads_back(tmp_path):
    path = write_trained(tmp_path / "head.safetensors", small_head(), HEAD)
    got = trained.read_trained("head", path, CONFIG)
    assert set(got) == set(small_head())
    for k, v in small_head().items():
        np.testing.assert_array_equal(got[k], v)


def test_a_flipped_bit_is_found(tmp_path):
    path = write_trained(tmp_path / "head.safetensors", small_head(), HEAD)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # a low mantissa bit of the last tensor: still finite, still the right shape
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted: its sha256 is not") as err:
        trained.read_trained("head", path, CONFIG)
    assert str(path) in str(err.value)


def test_a_file_its_json_does_not_record_is_refused_and_a_waiting_json_is_taken(tmp_path):
    path = write_trained(tmp_path / "head.safetensors", small_head(), HEAD)
    record = path.with_suffix(".json").read_text(encoding="utf-8")
    write_trained(path, small_head(seed=1), HEAD)  # new weights ...
    path.with_suffix(".json.next").write_text(path.with_suffix(".json").read_text(encoding="utf-8"))
    path.with_suffix(".json").write_text(record)  # ... and their JSON still waiting: a run stopped between renames
    np.testing.assert_array_equal(trained.read_trained("head", path, CONFIG)["mlm.bias"], small_head(seed=1)["mlm.bias"])
    path.with_suffix(".json.next").unlink()
    with pytest.raises(CheckpointError, match="corrupted"):
        trained.read_trained("head", path, CONFIG)


def test_deeply_nested_metadata_is_a_checkpoint_error(tmp_path):
    # metadata nested 100,000 deep gave RecursionError
    path = write_trained(tmp_path / "deep.safetensors", small_head(), "[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="deep.safetensors"):
        trained.read_trained("head", path, CONFIG)
    path = write_trained(tmp_path / "nested.safetensors", small_head(), "[" * 5_000 + "]" * 5_000)  # parses: too deep
    with pytest.raises(CheckpointError, match="nested.safetensors"):
        trained.read_trained("head", path, CONFIG)


@pytest.mark.parametrize("about", ["[1, 2]", "null", '"text"', "{not json"])
def test_metadata_that_is_not_an_object_is_named(tmp_path, about):
    path = write_trained(tmp_path / "odd.safetensors", small_head(), about)
    with pytest.raises(CheckpointError, match="odd.safetensors"):
        trained.read_trained("head", path, CONFIG)


def test_a_head_is_not_read_as_minilm_mlm(tmp_path):
    path = write_trained(tmp_path / "head.safetensors", small_head(), HEAD)
    with pytest.raises(CheckpointError, match="expected 'bertviz-lite minilm-mlm 1'"):
        trained.read_trained("minilm-mlm", path, CONFIG)
