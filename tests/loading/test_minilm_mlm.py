"""load("minilm-mlm"): MiniLM with its last layers trained with the masked-LM head (training/train_minilm_mlm.py).
The published layers stay exact, the file is checked (sha256, shapes) with one CheckpointError naming it,
bv.compare works across the two models, and the command line fills [MASK] with it by default. (The training
script's own tests: tests/training/test_train_minilm_mlm.py.)"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import loading, trained
from bertviz_lite.backend import to_host
from bertviz_lite.errors import CheckpointError, EditError

from ..helpers import copy_minilm_mlm, write_trained


ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "training" / "train_minilm_mlm.py"
TEXT = "The capital of France is [MASK]."


@pytest.fixture(scope="module")
def minilm_mlm():
    return bv.load("minilm-mlm")


@pytest.fixture(scope="module")
def info():
    return json.loads(loading.packaged_minilm_mlm_path().with_suffix(".json").read_text(encoding="utf-8"))


def test_only_the_trained_layers_and_the_head_differ(minilm_mlm, minilm, info):
    first = info["trained_layers"][0]
    assert info["trained_layers"] == list(range(first, 6)) and len(info["trained_layers"]) == info["k"]
    changed = {k for k in minilm_mlm.weights if k not in minilm.weights or
               not np.array_equal(to_host(minilm_mlm.weights[k]), to_host(minilm.weights[k]))}
    trained = {k for k in changed if k.startswith("layer.")}
    assert {int(k.split(".")[1]) for k in trained} == set(info["trained_layers"])
    assert changed - trained <= set(bv.weights.MLM_LEARNED)
    assert "minilm-mlm" in repr(minilm_mlm) and "not the published encoder" in repr(minilm_mlm)
    assert minilm_mlm.has_mlm and "+mlm head" in repr(minilm_mlm)


def test_published_minilm_is_unchanged(minilm, minilm_mlm, info):
    a, b = minilm.trace(TEXT), minilm_mlm.trace(TEXT)
    first = info["trained_layers"][0]
    below = "embed.ln" if first == 0 else f"layer.{first - 1}.ffn.ln"  # the first trained layer's input
    np.testing.assert_array_equal(to_host(a[below]), to_host(b[below]))
    assert not np.allclose(to_host(a["layer.5.ffn.ln"]), to_host(b["layer.5.ffn.ln"]), atol=1e-3)
    assert "minilm-mlm" not in repr(minilm)


def test_compare_across_the_two_models(minilm, minilm_mlm, info):
    cmp = bv.compare(minilm.trace(TEXT), minilm_mlm.trace(TEXT), model=minilm)
    moved = {row[0]: row[1] for row in cmp.layers().rows}
    first = info["trained_layers"][0]
    assert moved["embeddings"] == 0 and all(moved[layer] == 0 for layer in range(first))
    assert all(moved[layer] > 0.01 for layer in range(first, 6))
    probs = {row[0]: row[1] for row in cmp.rows if row[0].endswith("attn.probs")}
    assert probs[f"layer.{first}.attn.probs"] > 0 and all(probs[f"layer.{layer}.attn.probs"] == 0
                                                           for layer in range(first))
    assert "minilm-mlm" in cmp.title and cmp.mask_changes  # the top 5 at [MASK] before and after
    with pytest.raises(EditError, match="same tokens"):
        bv.compare(minilm.trace("The cat sat on a [MASK]."), minilm_mlm.trace("The dog sat on a [MASK]."))


def test_the_shipped_numbers(info):
    held = info["heldout"]
    assert held["minilm-mlm"]["content"]["top5"] > held["frozen head"]["content"]["top5"]
    assert held["minilm-mlm"]["all"]["top5"] > held["unigram"]["all"]["top5"]
    assert info["file"]["bytes"] == loading.packaged_minilm_mlm_path().stat().st_size
    assert info["loss_curve"][-1][1] < info["loss_curve"][0][1]


SHIPPED = loading.packaged_minilm_mlm_path()




def test_missing_or_corrupt_file_is_one_checkpoint_error(tmp_path, monkeypatch, minilm):
    path = copy_minilm_mlm(tmp_path)
    monkeypatch.setattr(trained, "DATA", tmp_path)  # the package's data folder, for this test
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in a tensor
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted.*sha256") as e:
        bv.load("minilm-mlm")
    assert str(path) in str(e.value) and "git checkout" in str(e.value) and "train_minilm_mlm.py" in str(e.value)
    path.write_bytes(bytes(data[:1000]))  # truncated
    with pytest.raises(CheckpointError, match="corrupted"):
        bv.load("minilm-mlm")
    path.unlink()
    with pytest.raises(CheckpointError, match="is missing") as e:
        bv.load("minilm-mlm")
    assert str(path) in str(e.value)
    copy_minilm_mlm(tmp_path).with_suffix(".json").unlink()
    with pytest.raises(CheckpointError, match="records the sha256"):
        bv.load("minilm-mlm")
    with pytest.raises(ValueError, match="mlm=False"):
        bv.load("minilm-mlm", mlm=False)


def test_a_file_that_does_not_fit_names_each_problem(tmp_path, minilm):
    from safetensors.numpy import load_file
    good = load_file(str(loading.packaged_minilm_mlm_path()))
    first = min(int(k.split(".")[1]) for k in good if k.startswith("layer."))
    bad = {k: v for k, v in good.items() if k != "mlm.bias"}
    bad[f"layer.{first}.attn.W_Q"] = bad[f"layer.{first}.attn.W_Q"][:, :10].copy()
    about = {"format": loading.MINILM_MLM_FORMAT, "encoder": bv.model.MINILM_REPO, "first": str(first)}
    path = write_trained(tmp_path / loading.MINILM_MLM_FILE, bad, about)
    with pytest.raises(CheckpointError) as e:
        loading.read_trained("minilm-mlm", path, minilm.config)
    assert "missing tensor mlm.bias" in str(e.value) and f"layer.{first}.attn.W_Q has shape (384, 10)" in str(e.value)


def test_fill_mask_on_the_command_line_uses_minilm_mlm(capsys, minilm_mlm):
    from bertviz_lite import cli
    assert cli.main(["fill-mask", TEXT, "--top-k", "3"]) == 0
    out = capsys.readouterr().out
    want = [p.token for p in minilm_mlm.fill_mask(TEXT, top_k=3)[0]]
    assert out.startswith("[MASK] at 6: ") and all(t in out for t in want)
    assert cli.main(["fill-mask", "no mask here"]) == 2
    assert "no [MASK]" in capsys.readouterr().err


def _write_minilm_mlm(tmp_path, tensors: dict, about: dict, sha256=None) -> Path:
    """A minilm-mlm file with these tensors and metadata, and its JSON recording its sha256 (or `sha256`)."""
    import hashlib
    from safetensors.numpy import save_file
    path = tmp_path / loading.MINILM_MLM_FILE
    save_file(tensors, str(path), metadata={"bertviz_lite": json.dumps(about)})
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if sha256 is None else sha256
    path.with_suffix(".json").write_text(json.dumps({"file": {"sha256": digest}}))
    return path


@pytest.mark.parametrize("first", ["abc", "3.0", [3], "-1", "99", None])
def test_minilm_mlm_metadata_first_that_is_no_layer_is_named(tmp_path, minilm, first):
    # "abc", "3.0" or [3] once gave a raw ValueError / TypeError
    from safetensors.numpy import load_file
    about = {"format": loading.MINILM_MLM_FORMAT, "encoder": bv.model.MINILM_REPO, "first": first}
    path = _write_minilm_mlm(tmp_path, load_file(str(SHIPPED)), about)
    with pytest.raises(CheckpointError, match=r"metadata first .* is not a layer number 0\.\.5") as e:
        loading.read_trained("minilm-mlm", path, minilm.config)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("record", [5, None, "abc", ["x"], {"a": 1}])
def test_minilm_mlm_json_sha256_of_the_wrong_type_is_named(tmp_path, minilm, record):
    # sha256: 5 once gave a raw TypeError
    path = copy_minilm_mlm(tmp_path)
    path.with_suffix(".json").write_text(json.dumps({"file": {"sha256": record}}))
    with pytest.raises(CheckpointError, match="records the sha256.*could not be read"):
        loading.read_trained("minilm-mlm", path, minilm.config)


def test_minilm_mlm_json_nested_deeply_is_named(tmp_path, minilm):
    # nested 100,000 deep once gave a RecursionError
    path = copy_minilm_mlm(tmp_path)
    path.with_suffix(".json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="nested too deeply"):
        loading.read_trained("minilm-mlm", path, minilm.config)


def test_minilm_mlm_tensor_dtypes_are_checked(tmp_path, minilm):
    # the dtypes were once not checked: an integer tensor was widened to float32 silently
    from safetensors.numpy import load_file
    tensors = load_file(str(SHIPPED))
    tensors["mlm.bias"] = tensors["mlm.bias"].astype(np.int32)
    first = min(int(k.split(".")[1]) for k in tensors if k.startswith("layer."))
    about = {"format": loading.MINILM_MLM_FORMAT, "encoder": bv.model.MINILM_REPO, "first": str(first)}
    path = _write_minilm_mlm(tmp_path, tensors, about)
    with pytest.raises(CheckpointError, match="mlm.bias has dtype int32, expected float16 or float32"):
        loading.read_trained("minilm-mlm", path, minilm.config)
