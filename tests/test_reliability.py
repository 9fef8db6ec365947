"""Reliability (issue 15): every checkpoint people have (bf16, fp16, an untied decoder), no hang on
a Hub endpoint that never answers, one clear error for malformed files and arguments, the CLI
without the [views] extra, absurd configs refused before allocating, any integer type accepted.

Parity of the bf16 / fp16 / untied checkpoints with transformers is in tests/test_parity.py
(fixtures tiny_*.npz and tests/fixtures/checkpoints/, written by make_reference.py).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import bertviz_lite as bv
from bertviz_lite.cli import main
from bertviz_lite.errors import ModelTooLargeError
from bertviz_lite.weights import to_hf_state

from .conftest import SMALL

VOCAB = Path(bv.__file__).parent / "data" / "vocab.txt"
ROOT = Path(__file__).resolve().parents[1]


def write_folder(folder: Path, model, *, config: dict | None = None, state: dict | None = None) -> Path:
    """A BertModel-layout folder of `model` (float32 safetensors, config.json, vocab.txt)."""
    folder.mkdir(parents=True, exist_ok=True)
    if state is None:
        state = {k.removeprefix("bert."): v for k, v in to_hf_state(
            {k: np.asarray(v) for k, v in model.weights.items()}).items()}
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config or model.config.to_hf_dict()))
    shutil.copy(VOCAB, folder / "vocab.txt")
    return folder


# ---------------------------------------------------------------------------------------------
# 1. bfloat16 and float16 checkpoints
# ---------------------------------------------------------------------------------------------


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
    state = {k.removeprefix("bert."): np.asarray(v) for k, v in to_hf_state(
        {k: np.asarray(v) for k, v in small.weights.items()}).items()}
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
    assert not np.array_equal(loaded.weights["embed.W_T"], small.weights["embed.W_T"])  # really bf16-rounded
    a, b = loaded.trace("bfloat16 weights, float32 compute"), reference.trace("bfloat16 weights, float32 compute")
    for k in a.keys():
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)


def test_fp16_safetensors_loads_as_float32(tmp_path, small):
    state = {k.removeprefix("bert."): np.asarray(v) for k, v in to_hf_state(
        {k: np.asarray(v) for k, v in small.weights.items()}).items()}
    half = write_folder(tmp_path / "fp16", small, state={k: v.astype(np.float16) for k, v in state.items()})
    loaded = bv.load(half, backend="numpy")
    for k, w in loaded.weights.items():
        assert w.dtype == np.float32, k
    np.testing.assert_array_equal(loaded.weights["layer.1.ffn.W_up"],
                                  np.asarray(small.weights["layer.1.ffn.W_up"]).astype(np.float16).astype(np.float32))


def test_unsupported_dtype_is_one_checkpoint_error_naming_the_file(tmp_path, small):
    folder = write_folder(tmp_path / "f8", small)
    write_raw_safetensors(folder / "model.safetensors",
                          {"embeddings.word_embeddings.weight": ("F8_E4M3", (2, 2), np.zeros(4, np.uint8))})
    with pytest.raises(bv.CheckpointError, match="model.safetensors"):
        bv.load(folder)


# ---------------------------------------------------------------------------------------------
# 2. an untied masked-lm decoder
# ---------------------------------------------------------------------------------------------


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
    state = to_hf_state({k: np.asarray(v) for k, v in untied.weights.items()})
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


# ---------------------------------------------------------------------------------------------
# 3. a Hub endpoint that accepts the connection and never answers
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def silent_server(silent_port):
    """A Hugging Face endpoint that accepts every connection and never answers (conftest's silent_port)."""
    port, held = silent_port
    return f"http://127.0.0.1:{port}", held


def test_hub_that_never_answers_fails_within_seconds_with_the_advice(tmp_path, silent_server):
    url, held = silent_server
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=url, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT))
    code = textwrap.dedent("""
        import time, bertviz_lite as bv
        t = time.monotonic()
        try:
            bv.load("someone/never-answers")
        except bv.WeightsNotFoundError as e:
            print(f"{time.monotonic() - t:.1f}"); print(e)
        else:
            print("loaded?!")
    """)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=40)
    assert time.monotonic() - start < 20, "the load did not fail within 20 s"
    assert out.returncode == 0, out.stderr
    seconds, message = out.stdout.split("\n", 1)
    assert float(seconds) < 20
    assert held, "the test server saw no connection: the test did not exercise the hang"
    assert "huggingface-cli download someone/never-answers" in message and "minilm" in message


# ---------------------------------------------------------------------------------------------
# 5. malformed files and arguments: one clear error naming the file or argument
# ---------------------------------------------------------------------------------------------


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


def test_cli_prints_one_line_for_a_malformed_config(tmp_path, small, capsys):
    folder = write_folder(tmp_path / "m", small)
    (folder / "config.json").write_text("[]")
    assert main(["trace", "hi", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err and "Traceback" not in err


def test_bad_arguments_name_themselves(small):
    with pytest.raises(ValueError, match="seed"):
        bv.load("random", seed=-1, config=SMALL)
    with pytest.raises(TypeError, match="seed"):
        bv.load("random", seed=1.5, config=SMALL)
    with pytest.raises(TypeError, match="dtype"):
        small.trace("hi", dtype=["float16"])
    with pytest.raises(TypeError, match="max_bytes"):
        small.trace("hi", max_bytes="1e9")
    with pytest.raises(ValueError, match="max_bytes"):
        small.trace("hi", max_bytes=-1)
    assert small.trace("hi", max_bytes=1e9).keys()  # a float number of bytes is fine


# ---------------------------------------------------------------------------------------------
# 6. the command line without the [views] extra
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--png"])  # --html needs no extra since the page is drawn by views/assets/app.js
def test_cli_without_views_extra_says_which_extra(tmp_path, small, option):
    folder = write_folder(tmp_path / "m", small)
    code = textwrap.dedent(f"""
        import sys
        class NoViews:  # as if `pip install bertviz-lite` without [views]
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("plotly", "matplotlib", "ipywidgets", "anywidget"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, NoViews())
        from bertviz_lite.cli import main
        sys.exit(main(["trace", "hi", "--model", {str(folder)!r}, {option!r}, {str(tmp_path / "out")!r}]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert "bertviz-lite[views]" in out.stderr and option in out.stderr


# ---------------------------------------------------------------------------------------------
# 7. absurd configs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [
    {"num_layers": 10**5},
    {"num_layers": 10**7, "hidden_size": 4, "num_heads": 1, "ffn_size": 4, "vocab_size": 8, "max_positions": 8},
    {"vocab_size": 10**10},
])
def test_absurd_random_config_is_refused_before_allocating(config):
    start = time.monotonic()
    with pytest.raises(ModelTooLargeError) as e:
        bv.load("random", config=config)
    assert time.monotonic() - start < 5
    msg = str(e.value)
    assert len(msg) < 500 and "GiB" in msg and "num_hidden_layers" in msg
    assert isinstance(e.value, bv.BertVizError) and isinstance(e.value, MemoryError)


@pytest.mark.parametrize("layers", [10**5, 10**7])
def test_absurd_config_json_gives_a_short_error_quickly(tmp_path, small, layers):
    folder = write_folder(tmp_path / "m", small)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": layers}))
    start = time.monotonic()
    with pytest.raises(bv.BertVizError) as e:
        bv.load(folder)
    assert time.monotonic() - start < 15
    assert len(str(e.value)) < 5000, f"{len(str(e.value)):,} characters"
    assert "num_hidden_layers" in str(e.value)


# ---------------------------------------------------------------------------------------------
# 8. any integer type
# ---------------------------------------------------------------------------------------------


def test_numpy_integers_are_accepted(small):
    tr = small.trace("numpy integers", pad_to=np.int64(12))
    assert len(tr.tokens) == 12
    assert small.tokenize("numpy integers", pad_to=np.int32(10)).ids[-1] == 0
    np.testing.assert_array_equal(tr.get("attn.probs", layer=np.int64(1), head=np.int8(2)),
                                  tr.get("attn.probs", layer=1, head=2))
    for bad in (np.float64(1.0), True, "1"):
        with pytest.raises(TypeError, match="layer"):
            tr.get("attn.probs", layer=bad)
        with pytest.raises(TypeError, match="pad_to"):
            small.trace("x", pad_to=bad)
    with pytest.raises(bv.OutOfRangeError):
        tr.get("attn.probs", layer=np.int64(2))
