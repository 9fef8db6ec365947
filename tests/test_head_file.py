"""The masked-LM head file fitted on MiniLM: a checksum over its tensors, metadata parsed defensively (N7)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_lite import loading
from bertviz_lite.config import BertConfig
from bertviz_lite.errors import CheckpointError

CONFIG = BertConfig(vocab_size=9, hidden_size=4, num_layers=6, num_heads=2, ffn_size=8)


def small_head(seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=s).astype(np.float32)
            for k, s in (("mlm.W_t", (4, 4)), ("mlm.b_t", (4,)), ("mlm.ln.gamma", (4,)), ("mlm.ln.beta", (4,)),
                         ("mlm.bias", (9,)))}


def test_the_packaged_head_carries_its_checksum():
    from safetensors import safe_open
    with safe_open(str(loading.packaged_head_path()), framework="np") as f:
        about = json.loads(f.metadata()["bertviz_lite"])
        state = {k: f.get_tensor(k) for k in f.keys()}
    assert about["sha256"] == loading.head_checksum(state)


def test_a_flipped_bit_is_found(tmp_path):
    path = tmp_path / "head.safetensors"
    loading.save_mlm_head(path, small_head(), encoder=loading.MINILM_REPO, layer=5)
    assert set(loading.read_mlm_head(path, CONFIG, {})) == set(small_head())
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # a low mantissa bit of the last tensor: still finite, still the right shape
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum") as err:
        loading.read_mlm_head(path, CONFIG, {})
    assert str(path) in str(err.value)


def _write(path, about: str):
    from safetensors.numpy import save_file
    save_file(small_head(), str(path), metadata={"bertviz_lite": about})


def test_deeply_nested_metadata_is_a_checkpoint_error(tmp_path):
    # N7: metadata nested 100,000 deep gave RecursionError
    path = tmp_path / "deep.safetensors"
    _write(path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="deep.safetensors"):
        loading.read_mlm_head(path, CONFIG, {})
    path = tmp_path / "nested.safetensors"
    _write(path, "[" * 5_000 + "]" * 5_000)  # short enough to parse: nested too deeply
    with pytest.raises(CheckpointError, match="nested.safetensors"):
        loading.read_mlm_head(path, CONFIG, {})


@pytest.mark.parametrize("about", ["[1, 2]", "null", '"text"', "{not json"])
def test_metadata_that_is_not_an_object_is_named(tmp_path, about):
    path = tmp_path / "odd.safetensors"
    _write(path, about)
    with pytest.raises(CheckpointError, match="odd.safetensors"):
        loading.read_mlm_head(path, CONFIG, {})
