"""BertConfig: clear errors, reading Hugging Face's config.json, absurd sizes refused before anything
is allocated.
"""

from __future__ import annotations

import json
import time

import pytest

import bertviz_lite as bv
from bertviz_lite.engine import gelu_tanh
from bertviz_lite.errors import ModelTooLargeError

from .helpers import write_folder


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
