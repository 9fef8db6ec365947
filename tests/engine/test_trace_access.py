"""Reading a trace (get, stack, item access, near-match errors, ranges), what it records (keep=,
float16, read-only tensors, no weights), and bad input refused before the forward pass.
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import backend
from bertviz_lite.trace import estimate_trace_bytes

from ..helpers import LAYER_KEYS, host


def test_get_and_stack_agree_with_item_access(base_trace):
    tr = base_trace
    assert tr.get("attn.probs", layer=3) is tr["layer.3.attn.probs"]
    np.testing.assert_array_equal(host(tr.stack("ffn.ln"))[7], host(tr["layer.7.ffn.ln"]))
    assert tr.get("embed.sum") is tr["embed.sum"]
    np.testing.assert_array_equal(host(tr.get("attn.k", layer=2, head=5)), host(tr["layer.2.attn.k"])[5])


def test_unknown_keys_name_near_matches(base_trace):
    with pytest.raises(KeyError, match="layer.3.attn.probs"):
        base_trace["layer.3.attn.prob"]
    with pytest.raises(KeyError, match="attn.probs"):
        base_trace.stack("attn.prob")
    with pytest.raises(KeyError, match="masked-lm head"):
        base_trace["mlm.logits"]


def test_layer_and_head_out_of_range_name_the_valid_range(base_trace):
    with pytest.raises(bv.OutOfRangeError, match=r"12 layers, 0\.\.11"):
        base_trace.get("attn.probs", layer=12)
    with pytest.raises(bv.OutOfRangeError, match=r"12 heads, 0\.\.11"):
        base_trace.get("attn.probs", layer=0, head=40)
    with pytest.raises(TypeError, match="layer="):
        base_trace.get("attn.probs")


def test_keep_records_only_what_is_asked(small):
    tr = small.trace("hello world", keep=["attn.probs", "embed.sum"])
    assert tr.keys() == ["embed.sum", "layer.0.attn.probs", "layer.1.attn.probs"]
    with pytest.raises(KeyError, match="keep="):
        tr["layer.0.ffn.ln"]
    assert small.trace("hello world", keep=[]).keys() == []
    assert small.trace("hello", keep="layer.1.*").keys() == [f"layer.1.{k}" for k in LAYER_KEYS]


@pytest.mark.float16
def test_float16_storage_halves_memory_and_estimate_is_exact(small):
    full = small.trace("hello world")
    half = small.trace("hello world", dtype="float16")
    assert half.nbytes * 2 == full.nbytes
    assert full.nbytes == estimate_trace_bytes(small.config, full.n)
    assert str(half["layer.1.ffn.ln"].dtype) == "float16"
    np.testing.assert_allclose(host(half["layer.1.ffn.ln"]), host(full["layer.1.ffn.ln"]), atol=1e-2)


def test_recorded_tensors_are_never_changed_later(small):
    first = small.trace("the first sentence")
    snapshot = {k: host(v).copy() for k, v in first._values.items()}
    small.trace("a different second sentence, longer than the first one")
    for k, v in snapshot.items():
        np.testing.assert_array_equal(host(first[k]), v, err_msg=k)


def test_trace_holds_no_model_and_shares_no_weights(small):
    tr = small.trace("hello")
    assert not any(isinstance(v, bv.Bert) for v in vars(tr).values())
    for key in tr.keys():
        for w in small.weights.values():
            assert not np.shares_memory(backend.to_host(tr[key]), backend.to_host(w)), key


def test_to_host_returns_numpy(small):
    tr = small.trace("hello").to_host()
    assert all(isinstance(tr[k], np.ndarray) for k in tr.keys())
    assert tr.backend == "numpy"


def test_too_long_input_names_count_and_limit(small):
    text = "word " * 600
    with pytest.raises(bv.InputTooLongError, match=r"602.*512|512.*602") as e:
        small.trace(text)
    assert "truncate=True" in str(e.value)
    assert small.trace(text, truncate=True, keep=["embed.sum"]).n == 512


def test_non_string_text_is_a_type_error(small):
    with pytest.raises(TypeError, match="int"):
        small.trace(42)
    with pytest.raises(TypeError):
        small.trace(["a", "list"])


def test_trace_over_the_memory_budget_is_refused_before_running(base):
    with pytest.raises(bv.TraceTooLargeError, match="keep=") as e:
        base.trace("hello world", max_bytes=1_000_000)
    assert "MiB" in str(e.value) and "float16" in str(e.value)
    need = estimate_trace_bytes(base.config, 512)
    assert 600 * 2**20 < need < 800 * 2**20  # a full 512-token trace is ~0.7 GB


def test_bad_ids_and_dtype_are_refused(small):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        small.trace_ids([101, 40000, 102])
    with pytest.raises(ValueError, match="segment"):
        small.trace_ids([101, 102], segments=[0, 5])
    with pytest.raises(ValueError, match="float16"):
        small.trace("hi", dtype="int8")


@pytest.mark.float16
def test_float16_overflow_is_warned_at_trace_time_naming_the_key():
    # values above 65,504 were once stored as +-inf without a word, and the views then blamed "an edit or a
    # checkpoint"; the forward itself runs in float32, so only what is stored overflows
    model = bv.load("random", config={"hidden_size": 32, "num_layers": 1, "num_heads": 2, "ffn_size": 64},
                    backend="numpy")
    model.weights["layer.0.ffn.W_up"] = model.weights["layer.0.ffn.W_up"] * 1e6
    with pytest.warns(RuntimeWarning, match=r"65,504.*layer\.0\.ffn\.up.*dtype='float32'") as seen:
        tr = model.trace("the cat sat", dtype="float16")
    assert np.isinf(host(tr["layer.0.ffn.up"])).any()
    assert not any("overflow encountered in cast" in str(w.message) for w in seen)  # numpy's, without the key
    full = model.trace("the cat sat")
    np.testing.assert_allclose(host(tr["layer.0.ffn.ln"]), host(full["layer.0.ffn.ln"]), atol=1e-2)
