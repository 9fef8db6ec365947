"""Checkpoint files people have (bf16, fp16, an untied decoder) and every malformed, linked or
hostile file as one clear CheckpointError. Parity of the bf16 / fp16 / untied checkpoints with
transformers is in tests/engine/test_parity.py.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import bertviz_lite as bv
from bertviz_lite import cli
from bertviz_lite.backend import to_host
from bertviz_lite.weights import to_hf_state

from ..conftest import SMALL
from ..helpers import host_weights, write_folder


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even, as torch does."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_raw_safetensors(path: Path, tensors: dict) -> None:
    """The safetensors format by hand: u64 header length, a JSON header, then the bytes. NumPy
    cannot hold bfloat16, so bf16 tensors are passed as ('BF16', shape, uint16 bit patterns)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        raw = np.ascontiguousarray(data).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_bf16_safetensors_loads_exactly_widened_to_float32(tmp_path, small):
    state = {k.removeprefix("bert."): v for k, v in to_hf_state(host_weights(small)).items()}
    bits = {k: to_bf16_bits(v) for k, v in state.items()}
    widened = {k: (b.astype(np.uint32) << 16).view(np.float32) for k, b in bits.items()}
    bf16 = write_folder(tmp_path / "bf16", small, state=state)
    write_raw_safetensors(bf16 / "model.safetensors", {k: ("BF16", b.shape, b) for k, b in bits.items()})
    with pytest.raises(TypeError):  # what safetensors' numpy reader does with it
        load_file(str(bf16 / "model.safetensors"))

    loaded = bv.load(bf16, backend="numpy")
    reference = bv.load(write_folder(tmp_path / "f32", small, state=widened), backend="numpy")
    assert loaded.weights.keys() == reference.weights.keys()
    for k, w in loaded.weights.items():
        assert w.dtype == np.float32
        np.testing.assert_array_equal(w, reference.weights[k], err_msg=k)  # exact, bit for bit
    assert not np.array_equal(loaded.weights["embed.W_T"], to_host(small.weights["embed.W_T"]))  # really bf16-rounded
    a, b = loaded.trace("bfloat16 weights, float32 compute"), reference.trace("bfloat16 weights, float32 compute")
    for k in a.keys():
        np.testing.assert_array_equal(to_host(a[k]), to_host(b[k]), err_msg=k)


def test_fp16_safetensors_loads_as_float32(tmp_path, small):
    state = {k.removeprefix("bert."): v for k, v in to_hf_state(host_weights(small)).items()}
    half = write_folder(tmp_path / "fp16", small, state={k: v.astype(np.float16) for k, v in state.items()})
    loaded = bv.load(half, backend="numpy")
    for k, w in loaded.weights.items():
        assert w.dtype == np.float32, k
    np.testing.assert_array_equal(loaded.weights["layer.1.ffn.W_up"],
                                  to_host(small.weights["layer.1.ffn.W_up"]).astype(np.float16).astype(np.float32))


def test_unsupported_dtype_is_one_checkpoint_error_naming_the_file(tmp_path, small):
    folder = write_folder(tmp_path / "f8", small)
    write_raw_safetensors(folder / "model.safetensors",
                          {"embeddings.word_embeddings.weight": ("F8_E4M3", (2, 2), np.zeros(4, np.uint8))})
    with pytest.raises(bv.CheckpointError, match="model.safetensors"):
        bv.load(folder)


@pytest.fixture(scope="module")
def untied():
    return bv.load("random", seed=7, config={**SMALL, "tie_word_embeddings": False}, mlm=True, backend="numpy")


def test_untied_decoder_is_what_the_logits_use(untied):
    W = untied.weights
    c = untied.config
    assert W["mlm.W_out"].shape == (c.hidden_size, c.vocab_size)
    tr = untied.trace("the untied decoder [MASK] its own matrix")
    from bertviz_lite import engine
    Z = np.asarray(tr["layer.1.ffn.ln"])
    h = engine.gelu(Z @ W["mlm.W_t"] + W["mlm.b_t"], np)
    h = engine.layer_norm(h, W["mlm.ln.gamma"], W["mlm.ln.beta"], c.layer_norm_eps, np)
    np.testing.assert_allclose(tr["mlm.logits"], h @ W["mlm.W_out"] + W["mlm.bias"], atol=1e-5)
    tied_logits = h @ W["embed.W_T"].T + W["mlm.bias"]
    assert np.max(np.abs(tr["mlm.logits"] - tied_logits)) > 0.1  # the tied matrix would give other logits


def test_ledger_counts_the_untied_decoder(untied):
    tied = bv.load("random", seed=7, config=SMALL, mlm=True, backend="numpy")
    a, b = bv.count_params(untied), bv.count_params(tied)
    c = untied.config
    assert a.total - b.total == c.vocab_size * c.hidden_size
    assert ("mlm.logits", "mlm.W_out", (c.hidden_size, c.vocab_size), c.vocab_size * c.hidden_size) in a.rows
    assert a.tied == () and b.tied


def test_untied_checkpoint_round_trips_and_needs_its_decoder(tmp_path, untied):
    state = to_hf_state(host_weights(untied))
    assert "cls.predictions.decoder.weight" in state and "cls.predictions.decoder.bias" in state
    cfg = {**untied.config.to_hf_dict(), "tie_word_embeddings": False}
    folder = write_folder(tmp_path / "untied", untied, config=cfg, state=state)
    loaded = bv.load(folder, backend="numpy")
    np.testing.assert_array_equal(loaded.weights["mlm.W_out"], untied.weights["mlm.W_out"])
    text = "a [MASK] decoder"
    np.testing.assert_array_equal(loaded.trace(text)["mlm.logits"], untied.trace(text)["mlm.logits"])
    # transformers 5 adds the untied decoder's own bias, not cls.predictions.bias
    state2 = dict(state, **{"cls.predictions.decoder.bias": state["cls.predictions.bias"] + 1.0})
    shifted = bv.load(write_folder(tmp_path / "bias", untied, config=cfg, state=state2), backend="numpy")
    np.testing.assert_allclose(shifted.trace(text)["mlm.logits"], untied.trace(text)["mlm.logits"] + 1.0, atol=1e-5)
    del state["cls.predictions.decoder.weight"]
    with pytest.raises(bv.CheckpointError, match="missing tensor for mlm.W_out"):
        bv.load(write_folder(tmp_path / "nodecoder", untied, config=cfg, state=state))


@pytest.mark.parametrize("file, content", [
    ("config.json", "[]"),
    ("config.json", "null"),
    ("config.json", '"bert"'),
    ("tokenizer.json", "{not json"),
    ("tokenizer.json", '{"model": {"type": "WordPiece"}}'),  # no vocab
    ("tokenizer.json", '{"model": {"type": "WordPiece", "vocab": []}}'),
    ("tokenizer_config.json", "{not json"),
    ("tokenizer_config.json", "null"),
    ("vocab.txt", b"[PAD]\n\xff\xfe caf\xe9\n"),  # latin-1, not utf-8
])
def test_malformed_files_are_one_checkpoint_error_naming_the_file(tmp_path, small, file, content):
    folder = write_folder(tmp_path / "m", small)
    if isinstance(content, bytes):
        (folder / file).write_bytes(content)
    else:
        (folder / file).write_text(content)
    with pytest.raises(bv.CheckpointError) as e:
        bv.load(folder)
    assert file in str(e.value)


@pytest.mark.parametrize("file", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_deeply_nested_json_is_one_checkpoint_error_naming_the_file(tmp_path, small, file, capsys):
    folder = write_folder(tmp_path / "m", small)
    (folder / file).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(bv.CheckpointError, match="nested too deeply") as e:
        bv.load(folder)
    assert file in str(e.value) and len(str(e.value)) < 400
    assert cli.main(["trace", "hi", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and file in err and "Traceback" not in err


SECRET = "SECRET-DO-NOT-PRINT-0123456789"


@pytest.mark.parametrize("file, content", [
    ("config.json", json.dumps(SECRET)),
    ("config.json", json.dumps({"hidden_size": SECRET})),
    ("tokenizer.json", json.dumps({"model": {"type": SECRET}})),
    ("tokenizer_config.json", json.dumps([SECRET])),
])
def test_errors_do_not_quote_a_linked_file_outside_the_model_folder(tmp_path, small, file, content):
    outside = tmp_path / "elsewhere" / "private.txt"
    outside.parent.mkdir()
    outside.write_text(content)
    folder = write_folder(tmp_path / "m", small)
    (folder / file).unlink(missing_ok=True)
    (folder / file).symlink_to(outside)
    with pytest.raises(bv.CheckpointError) as e:
        bv.load(folder)
    assert file in str(e.value) and "outside the model folder" in str(e.value)
    assert SECRET not in str(e.value) and SECRET[:6] not in str(e.value)


def test_a_hub_cache_link_into_its_blobs_keeps_the_detail(tmp_path, small):
    # the Hugging Face cache links snapshots/<rev>/config.json to ../../blobs/<hash>: the same repo
    repo = tmp_path / "models--org--name"
    folder = write_folder(repo / "snapshots" / "abc123", small)
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir()
    blob.write_text("[]")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(Path("..") / ".." / "blobs" / "0123abcd")
    with pytest.raises(bv.CheckpointError, match=r"config\.json: expected a JSON object.*got list"):
        bv.load(folder)


def test_a_pytorch_bin_holding_a_list_is_a_checkpoint_error(tmp_path, small, monkeypatch):
    folder = write_folder(tmp_path / "bin", small)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"what torch.load(weights_only=True) read as a list")
    # torch is no test dependency: a stand-in that returns what torch.load returns for torch.save([..])
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(load=lambda *a, **k: [1.0, 2.0]))
    with pytest.raises(bv.CheckpointError, match=r"pytorch_model\.bin holds a list, not a state dict"):
        bv.load(folder)


class _Marker:
    """A pickle whose unpickling would create a file: what a malicious pytorch_model.bin does."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_malicious_pickle_is_never_unpickled(tmp_path, small):
    folder = write_folder(tmp_path / "bin", small)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "was-unpickled"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"embeddings.word_embeddings.weight": _Marker(str(marker))}))
    with pytest.raises(bv.CheckpointError):  # torch missing, or torch's weights_only loader refusing it
        bv.load(folder)
    assert not marker.exists()
