"""BertConfig: clear errors, reading Hugging Face's config.json, absurd sizes refused before anything
is allocated.
"""

from __future__ import annotations

import json

import pytest

import bertviz_lite as bv
from bertviz_lite.engine import gelu_tanh
from bertviz_lite.errors import ModelTooLargeError

from ..helpers import peak_bytes, write_folder


def test_config_errors_are_clear():
    with pytest.raises(ValueError, match="divisible"):
        bv.BertConfig(hidden_size=100, num_heads=12)
    with pytest.raises(ValueError, match="hidden_act"):
        bv.BertConfig(hidden_act="swish")


def test_config_reads_hf_json(tmp_path):
    d = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
         "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu_new",
         "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12}
    (tmp_path / "config.json").write_text(json.dumps(d))
    c = bv.BertConfig.from_json(tmp_path / "config.json")
    assert (c.num_layers, c.hidden_size, c.head_size, c.activation) == (6, 384, 32, "gelu_tanh")
    assert bv.BertConfig.from_hf_dict(c.to_hf_dict()) == c


def refused(error, load):
    def call():
        with pytest.raises(error) as e:
            load()
        call.error = e.value
    return call


@pytest.mark.parametrize("config", [
    {"num_layers": 10**5},
    {"num_layers": 10**7, "hidden_size": 4, "num_heads": 1, "ffn_size": 4, "vocab_size": 8, "max_positions": 8},
    {"vocab_size": 10**10},
])
def test_absurd_random_config_is_refused_before_allocating(config):
    call = refused(ModelTooLargeError, lambda: bv.load("random", config=config))
    assert peak_bytes(call) < 2**20  # a model it refuses needs GiB; the refusal reads the sizes only
    msg = str(call.error)
    assert len(msg) < 500 and "GiB" in msg and "num_hidden_layers" in msg
    assert isinstance(call.error, bv.BertVizError) and isinstance(call.error, MemoryError)


@pytest.mark.parametrize("layers", [10**5, 10**7])
def test_absurd_config_json_gives_a_short_error_without_work_per_layer(tmp_path, small, layers):
    """num_hidden_layers=100000 over a 2-layer checkpoint listed every tensor of every layer it lacks: 1.6 million
    problems, 0.46 GB and minutes, for an error that shows 40 of them. Refusing it now costs no more memory than
    refusing one layer too many (the checkpoint's own read), whatever the number of layers."""
    folder = write_folder(tmp_path / "m", small)
    cfg = json.loads((folder / "config.json").read_text())

    def with_layers(n):
        (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": n}))
        call = refused(bv.BertVizError, lambda: bv.load(folder))
        return peak_bytes(call), str(call.error)

    one_more, _ = with_layers(small.config.num_layers + 1)
    peak, message = with_layers(layers)
    assert peak < 1.5 * one_more, f"{peak:,} bytes at {layers:,} layers, {one_more:,} at one layer too many"
    assert len(message) < 5000, f"{len(message):,} characters"
    assert "num_hidden_layers" in message


def test_the_layers_a_checkpoint_lacks_are_said_once(tmp_path, small):
    folder = write_folder(tmp_path / "m", small)
    cfg = json.loads((folder / "config.json").read_text())
    held, named = small.config.num_layers, 1000
    (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": named}))
    with pytest.raises(bv.CheckpointError) as e:
        bv.load(folder)
    msg = str(e.value)
    assert f"num_hidden_layers={named}, the checkpoint holds {held} layer(s)" in msg
    assert f"missing tensor for layer.{held}.attn.W_Q" in msg  # the first layer it lacks, tensor by tensor
    assert f"layer.{held + 1} to layer.{named - 1} either ({named - held - 1:,} more layers)" in msg
    assert f"layer.{held + 1}.attn" not in msg
