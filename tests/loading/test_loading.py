"""Loading: Hugging Face folder layouts, the name map, broken checkpoints, the embedded MiniLM,
the Hugging Face cache, and failing fast offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import bertviz_lite as bv
from bertviz_lite import loading
from bertviz_lite.backend import to_host
from bertviz_lite.weights import to_hf_state

from ..conftest import SMALL
from ..helpers import host_weights

VOCAB = Path(bv.__file__).parent / "data" / "vocab.txt"


def write_checkpoint(folder: Path, model, *, layout="BertModel", legacy_names=False, mutate=None) -> Path:
    """A Hugging Face model folder holding `model`'s weights in a given layout."""
    folder.mkdir(parents=True, exist_ok=True)
    state = to_hf_state(host_weights(model))
    if layout == "BertModel":
        state = {k.removeprefix("bert."): v for k, v in state.items() if not k.startswith("cls.")}
    elif layout == "BertForMaskedLM":
        state = {k: v for k, v in state.items() if not k.startswith(("cls.seq_relationship", "bert.pooler"))}
        state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    if layout == "BertModel":
        state["embeddings.position_ids"] = np.arange(model.config.max_positions, dtype=np.int64)[None]
    if legacy_names:
        state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                 for k, v in state.items()}
    if mutate:
        mutate(state)
    save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(model.config.to_hf_dict()))
    shutil.copy(VOCAB, folder / "vocab.txt")
    return folder


@pytest.fixture(scope="module")
def small_heads():
    return bv.load("random", seed=5, config=SMALL, mlm=True)


def traces_equal(a, b, text="loading keeps every weight in place"):
    ta, tb = a.trace(text), b.trace(text)
    assert ta.keys() == tb.keys()
    for k in ta.keys():
        np.testing.assert_array_equal(to_host(ta[k]), to_host(tb[k]), err_msg=k)


@pytest.mark.parametrize("legacy", [False, True])
def test_bertmodel_folder_round_trips(tmp_path, small, legacy):
    folder = write_checkpoint(tmp_path / "m", small, legacy_names=legacy)
    loaded = bv.load(str(folder))
    assert loaded.config == small.config
    assert not loaded.has_mlm
    traces_equal(loaded, small)


def test_pretraining_layout_with_prefix_heads_and_tied_decoder(tmp_path, small_heads):
    folder = write_checkpoint(tmp_path / "pt", small_heads, layout="BertForPreTraining")
    loaded = bv.load(folder)
    assert loaded.has_mlm and "mlm.logits" in loaded.trace("a [MASK] b").keys()
    traces_equal(loaded, small_heads, "a [MASK] here")


def test_maskedlm_layout_with_explicit_decoder_weight(tmp_path, small_heads):
    folder = write_checkpoint(tmp_path / "mlm", small_heads, layout="BertForMaskedLM")
    loaded = bv.load(folder)
    assert loaded.has_mlm and not loaded.has_nsp and not loaded.has_pooler
    ta, tb = loaded.trace("x [MASK] y"), small_heads.trace("x [MASK] y")
    assert "pooler.out" not in ta.keys() and ta.keys()[-1] == "mlm.logits"
    np.testing.assert_array_equal(to_host(ta["mlm.logits"]), to_host(tb["mlm.logits"]))
    assert bv.count_params(loaded).total == bv.count_params(small_heads).total - (64 * 64 + 64)


def test_broken_checkpoint_lists_every_problem_by_key(tmp_path, small):
    def mutate(state):
        del state["encoder.layer.0.attention.self.query.bias"]  # missing
        state["encoder.layer.1.output.dense.weight"] = np.zeros((3, 3), np.float32)  # mis-shaped
        state["embeddings.word_embeddings.weight"] = state["embeddings.word_embeddings.weight"].copy()
        state["embeddings.word_embeddings.weight"][0, 0] = np.nan  # non-finite
        state["encoder.layer.0.extra.weight"] = np.zeros(3, np.float32)  # unexpected
    folder = write_checkpoint(tmp_path / "bad", small, mutate=mutate)
    with pytest.raises(bv.CheckpointError) as e:
        bv.load(folder)
    msg = str(e.value)
    for needle in ["layer.0.attn.b_Q", "encoder.layer.1.output.dense.weight", "(3, 3)", "NaN",
                   "encoder.layer.0.extra.weight", "4 problem"]:
        assert needle in msg, (needle, msg)


def test_truncated_file_and_missing_files_fail_clearly(tmp_path, small):
    folder = write_checkpoint(tmp_path / "trunc", small)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(bv.CheckpointError, match="truncated"):
        bv.load(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(bv.CheckpointError, match="model.safetensors"):
        bv.load(folder)
    (folder / "config.json").unlink()
    with pytest.raises(bv.CheckpointError, match="config.json"):
        bv.load(folder)


def test_config_that_disagrees_with_tensors_is_refused(tmp_path, small):
    folder = write_checkpoint(tmp_path / "cfg", small)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(bv.CheckpointError, match="missing tensor for layer.2"):
        bv.load(folder)


def test_pytorch_bin_needs_torch_and_is_never_unpickled(tmp_path, small):
    folder = write_checkpoint(tmp_path / "bin", small)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not a pickle that anyone should open")
    try:
        import torch  # noqa: F401
        match = "weights_only=True"
    except ImportError:
        match = "torch is not installed"
    with pytest.raises(bv.CheckpointError, match=match):
        bv.load(folder)


def test_minilm_is_the_trained_default(minilm):
    c = minilm.config
    assert (c.num_layers, c.hidden_size, c.num_heads, c.ffn_size, c.vocab_size) == (6, 384, 12, 1536, 30522)
    groups = bv.count_params(minilm).by_group()  # the encoder as published, and the head fitted on it
    assert bv.count_params(minilm).total - groups["mlm head"] == 22_713_216
    assert groups["mlm head"] == 384 * 384 + 384 + 2 * 384 + 30522
    assert minilm.source == loading.MINILM_REPO
    tr = minilm.trace("The cat sat on the mat.")
    assert tr.tokens[:3] == ("[CLS]", "the", "cat")


def test_minilm_files_are_found_without_importing_the_package():
    import sys
    folder = loading.find_minilm()
    assert (folder / "model.safetensors").is_file()
    assert loading.MINILM_PACKAGE not in sys.modules


def make_hf_cache(cache: Path, repo: str, source: Path) -> Path:
    """The Hugging Face cache layout: models--ORG--NAME/{refs/main, snapshots/<commit>/<file>}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    root = cache / ("models--" + repo.replace("/", "--"))
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    for f in source.iterdir():
        shutil.copy(f, snap / f.name)
    return snap


def test_hub_id_loads_from_the_cache_offline(tmp_path, small, monkeypatch):
    src = write_checkpoint(tmp_path / "src", small)
    make_hf_cache(tmp_path / "hub", "someone/tiny-bert", src)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # any download attempt would fail
    loaded = bv.load("someone/tiny-bert", cache_dir=tmp_path / "hub")
    assert loaded.name == "someone/tiny-bert"
    traces_equal(loaded, small)


class Connections:
    """socket.create_connection, recorded: where each connect went and the timeout it was given; with `silent`
    a connect never answers (it waits until the test releases it), like a Hub behind a firewall that drops
    packets; `pending` counts the connects still waiting."""

    def __init__(self, monkeypatch, silent: bool = False):
        import socket
        import threading

        self.calls, self.silent, self.release, self.pending = [], silent, threading.Event(), 0
        real = socket.create_connection

        def connect(address, timeout=None, *args, **kw):
            self.calls.append((address, timeout))
            if self.silent:
                self.pending += 1
                self.release.wait(60)  # bounded, so a probe that waits for it fails the test instead of hanging
                self.pending -= 1
                raise OSError("never answered")
            return real(address, timeout, *args, **kw)

        monkeypatch.setattr(socket, "create_connection", connect)


@pytest.mark.parametrize("offline_flag", [True, False])
def test_uncached_hub_id_fails_fast_with_instructions(tmp_path, monkeypatch, offline_flag):
    """Fast means no waiting on the network: HF_HUB_OFFLINE makes no connection at all; otherwise one probe,
    with the Hub timeout, and no download is tried after it fails."""
    if offline_flag:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    connections = Connections(monkeypatch)
    monkeypatch.setattr(loading, "_download", lambda *a: pytest.fail("a download was tried"))
    with pytest.raises(bv.WeightsNotFoundError) as e:
        bv.load("google-bert/bert-base-uncased", cache_dir=tmp_path / "empty")
    assert connections.calls == ([] if offline_flag else [(("127.0.0.1", 9), loading.HUB_TIMEOUT_S)])
    msg = str(e.value)
    assert "huggingface-cli download google-bert/bert-base-uncased" in msg and "minilm" in msg


def test_hub_probe_gives_up_within_its_timeout(monkeypatch):
    """A Hub that never answers the connect (nor the name lookup, which has no timeout of its own) is given
    up on: the probe says False while its connect is still waiting, instead of waiting with it."""
    connections = Connections(monkeypatch, silent=True)
    try:
        assert loading.hub_reachable("http://hub.invalid:9", timeout=0.05) is False
        assert connections.calls == [(("hub.invalid", 9), 0.05)] and connections.pending == 1
    finally:
        connections.release.set()


def test_bad_sources_are_explained(tmp_path):
    with pytest.raises(TypeError, match="load"):
        bv.load(42)
    with pytest.raises(bv.WeightsNotFoundError, match="not 'random'"):
        bv.load("no such thing here!")
    f = tmp_path / "file.bin"
    f.write_bytes(b"x")
    with pytest.raises(bv.CheckpointError, match="folder"):
        bv.load(str(f))
    with pytest.raises(ValueError, match="only to load"):
        bv.load("minilm", config={"num_layers": 2})


@pytest.mark.parametrize("name", ["bert-base-cased", "bert-large-uncased", "distilbert-base-uncased"])
def test_a_real_hub_name_that_resembles_a_known_one_is_looked_up(monkeypatch, name):
    # a name close to 'bert-base-uncased' may be a real Hub id: the cache and the Hub are asked first
    asked = []

    def hub(repo, *a, **k):
        asked.append(repo)
        raise bv.WeightsNotFoundError("stand-in: not reachable")
    monkeypatch.setattr(loading, "hub_folder", hub)
    with pytest.raises(bv.WeightsNotFoundError):
        bv.load(name)
    assert asked == [name]


@pytest.mark.parametrize("name", ["\x00", "x" * 5000, "x" * 300, "nobody/" + "x" * 300])
def test_impossible_model_names_are_one_clear_error(name):
    # these were a raw OSError (File name too long), and HFValidationError for '\x00' and 'nobody/' + 'x' * 300
    with pytest.raises(bv.WeightsNotFoundError) as err:
        bv.load(name)
    assert len(str(err.value)) < 600


def test_a_huge_minilm_mlm_file_is_refused_before_it_is_read(tmp_path, monkeypatch, minilm):
    # a 4 GiB (sparse) minilm-mlm file was once read whole before any size check
    from bertviz_lite.errors import CheckpointError
    path = tmp_path / loading.MINILM_MLM_FILE
    with open(path, "wb") as f:
        f.truncate(4 * 2**30)  # sparse: no disk used
    path.with_suffix(".json").write_text(json.dumps({"file": {"sha256": "0" * 64}}))
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} read whole"))
    with pytest.raises(CheckpointError, match=r"4,294,967,296 bytes, more than the [\d,]+ that its tensors") as e:
        loading.read_trained("minilm-mlm", path, minilm.config)
    assert str(path) in str(e.value)
