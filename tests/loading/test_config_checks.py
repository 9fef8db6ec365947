"""config.json values checked before anything is built: label counts, pad_token_id, architectures,
absurd sizes, eps, activation names, decoder flags. Each is one CheckpointError naming config.json, before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bertviz_lite as bv
from bertviz_lite.config import BertConfig
from bertviz_lite.errors import CheckpointError

from ..helpers import peak_bytes

FAMILY = Path(__file__).parents[1] / "fixtures" / "checkpoints" / "family"


def folder_with(tmp_path, case: str, **changes) -> Path:
    folder = tmp_path / case
    shutil.copytree(FAMILY / case, folder)
    cfg = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def refused(folder, match: str) -> str:
    """The CheckpointError of loading `folder`, raised before any work: refusing it holds under 64 MiB, reading
    config.json included (num_labels 10**9 held 3.2 GB and took 28 s; an id2label of 100,001 entries is 16 MB
    of parsed JSON)."""
    def load():
        with pytest.raises(CheckpointError, match=match) as err:
            bv.load(folder, backend="numpy")
        load.error = err.value

    assert peak_bytes(load) < 64 * 2**20
    assert "config.json" in str(load.error)
    return str(load.error)


@pytest.mark.parametrize("n", [10**9, 0, -2, 2.5, "7", True])
def test_num_labels_is_checked_before_labels_are_built(tmp_path, n):
    refused(folder_with(tmp_path, "bert_seqcls", num_labels=n, id2label=None, label2id=None), "num_labels")


@pytest.mark.parametrize("id2label, match", [
    ({"a": "x"}, "keys"), ({"0": "x", "2": "y"}, "0..1"), (["x", "y"], "id2label"),
    ({str(i): "x" for i in range(100_001)}, "at most")])
def test_id2label_is_checked(tmp_path, id2label, match):
    refused(folder_with(tmp_path, "bert_seqcls", id2label=id2label), match)


@pytest.mark.parametrize("pad", [10**9, -1, "x", 2.0, [0]])
@pytest.mark.parametrize("case", ["bert_seqcls", "roberta_seqcls"])
def test_pad_token_id_is_a_token_id(tmp_path, case, pad):
    # 10**9, -1 and 'x' once loaded, then trace_batch / head_stats failed with IndexError; RoBERTa with -3
    # failed every trace
    refused(folder_with(tmp_path, case, pad_token_id=pad), "pad_token_id")


@pytest.mark.parametrize("archs", [{"a": 1}, "BertForSequenceClassification", [1], [["BertModel"]]])
def test_architectures_must_be_a_list_of_names(tmp_path, archs):
    message = refused(folder_with(tmp_path, "bert_seqcls", architectures=archs), "architectures")
    assert "KeyError" not in message


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"])
def test_an_astronomic_size_is_named_not_an_overflow(tmp_path, field):
    # hidden_size 10**400 once gave OverflowError
    message = refused(folder_with(tmp_path, "bert_seqcls", **{field: 10**400}), "larger than any model")
    assert len(message) < 600  # the 400 digits are not printed


def test_the_defaults_and_the_fixtures_still_pass():
    BertConfig()
    assert BertConfig(vocab_size=10, pad_token_id=9).pad_token_id == 9
    with pytest.raises(ValueError, match="pad_token_id"):
        BertConfig(vocab_size=10, pad_token_id=10)
    for case in ("bert_seqcls", "roberta_mlm", "distilbert_qa", "albert_mlm", "electra_seqcls"):
        bv.load(FAMILY / case, backend="numpy")


def test_roberta_with_a_null_pad_token_id_is_refused():
    # dropped as unset it became 0 (<s>) and the positions shifted by two, silently (a reviewer's find)
    from bertviz_lite.config import BertConfig
    d = {"model_type": "roberta", "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
         "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 20,
         "pad_token_id": None}
    with pytest.raises(ValueError, match="pad_token_id null"):
        BertConfig.from_hf_dict(d)
    assert BertConfig.from_hf_dict({**d, "pad_token_id": 1}).position_offset == 2


@pytest.mark.parametrize("id2label", [5, 2.5, True])
def test_id2label_that_is_not_an_object_is_named(id2label):
    from bertviz_lite.config import read_labels
    with pytest.raises(ValueError, match="id2label must be an object"):
        read_labels({"id2label": id2label})


@pytest.mark.parametrize("eps", [float("inf"), 1e300, float("nan"), 0, -1e-12, 2.0, True, "1e-12"])
def test_layer_norm_eps_must_be_finite_and_sane(tmp_path, eps):
    # Infinity or 1e300 once loaded, and every LayerNorm gave beta (the trace off by 3.2, no warning)
    folder = folder_with(tmp_path, "bert_seqcls", layer_norm_eps=eps)
    if isinstance(eps, float) and eps != eps:
        text = (folder / "config.json").read_text()  # json.dumps writes NaN, as json.load reads it
        assert "NaN" in text
    message = refused(folder, "layer_norm_eps must be a number from 1e-30 to 1")
    assert "unhashable" not in message


@pytest.mark.parametrize("eps", [1e-12, 1e-5, 1e-6, 0.1])
def test_usual_layer_norm_eps_load(eps):
    assert BertConfig(layer_norm_eps=eps).layer_norm_eps == eps


@pytest.mark.parametrize("case, key", [("bert_seqcls", "hidden_act"), ("bert_seqcls", "model_type"),
                                       ("distilbert_seqcls", "activation")])
def test_a_list_valued_name_names_the_key_and_the_type(tmp_path, case, key):
    # once a CheckpointError whose reason was "unhashable type: 'list'"
    message = refused(folder_with(tmp_path, case, **{key: ["gelu"]}), f"{key} must be a string.*got list")
    assert "unhashable" not in message


def test_a_config_built_by_hand_names_a_list_too():
    with pytest.raises(ValueError, match="hidden_act must be a string, got list"):
        BertConfig(hidden_act=["gelu"])
    with pytest.raises(ValueError, match="model_type must be a string, got dict"):
        BertConfig(model_type={"a": 1})


@pytest.mark.parametrize("field", ["is_decoder", "add_cross_attention"])
@pytest.mark.parametrize("case", ["bert_seqcls", "roberta_mlm", "electra_discriminator"])
def test_a_decoder_config_is_refused_not_traced_as_an_encoder(tmp_path, case, field):
    # is_decoder once loaded with no word and attended both ways, where transformers masks causally (the maps
    # differed by up to 0.88); add_cross_attention adds layers the engine does not compute
    message = refused(folder_with(tmp_path, case, **{field: True}), field)
    assert "encoder" in message


@pytest.mark.parametrize("value", ["true", 1.5, [True]])
def test_is_decoder_must_be_true_or_false(tmp_path, value):
    refused(folder_with(tmp_path, "bert_seqcls", is_decoder=value), "is_decoder must be true or false")


def test_an_encoder_that_says_so_loads(tmp_path):
    bv.load(folder_with(tmp_path, "bert_seqcls", is_decoder=False, add_cross_attention=False), backend="numpy")
