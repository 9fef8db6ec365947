"""Trace.from_attentions refuses what it cannot hold, at the call: a trace over the
memory budget, tokens that are all padding; and it reads the GPU stand-in's arrays."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.trace import DEFAULT_MAX_TRACE_BYTES, estimate_trace_bytes


def uniform(layers: int, heads: int, n: int) -> list:
    """L maps [1, heads, n, n] of 1/n each, as read-only views of one number: nothing n x n is allocated."""
    one = np.full((1, 1, 1, 1), 1 / n, dtype=np.float32)
    return [np.broadcast_to(one, (1, heads, n, n)) for _ in range(layers)]


@pytest.mark.parametrize("layers, heads, n", [(1, 1, 30_000), (12, 12, 100_000), (10_000, 1, 512)])
def test_attention_over_the_budget_is_refused_before_it_is_copied(layers, heads, n):
    # 30,000 tokens once made a 3.4 GB trace (4.3 GB peak), 100,000 tried 37.3 GiB, 10,000 layers x 512
    # tokens reached 6 GB and a raw MemoryError
    with pytest.raises(bv.TraceTooLargeError) as err:
        bv.Trace.from_attentions(uniform(layers, heads, n), [f"t{i}" for i in range(n)])
    mib = 4 * layers * heads * n * n / 2**20
    assert f"{layers:,} layers x {heads:,} heads over {n:,} tokens" in str(err.value)
    assert f"{mib:,.0f} MiB" in str(err.value) and "max_bytes=" in str(err.value)


def test_the_estimate_is_the_projects_and_max_bytes_moves_the_limit():
    maps, tokens = uniform(2, 3, 40), [f"t{i}" for i in range(40)]
    need = 4 * 2 * 3 * 40 * 40
    config = bv.BertConfig(num_layers=2, num_heads=3, hidden_size=192, ffn_size=768)
    assert estimate_trace_bytes(config, 40, keep=["attn.probs"]) == need < DEFAULT_MAX_TRACE_BYTES
    assert bv.Trace.from_attentions(maps, tokens, max_bytes=need).num_layers == 2
    with pytest.raises(bv.TraceTooLargeError, match="over the budget of 0 MiB"):
        bv.Trace.from_attentions(maps, tokens, max_bytes=need - 1)


@pytest.mark.parametrize("max_bytes, error", [("1e9", TypeError), (True, TypeError), (float("nan"), ValueError),
                                              (-1, ValueError)])
def test_max_bytes_is_checked(max_bytes, error):
    with pytest.raises(error, match="max_bytes"):
        bv.Trace.from_attentions(uniform(1, 1, 4), list("abcd"), max_bytes=max_bytes)


@pytest.mark.parametrize("pad", ["[PAD]", "<pad>"])
def test_all_padding_tokens_are_refused_at_the_call(pad):
    # once accepted, then every view failed with a cast error
    with pytest.raises(ValueError, match="no real token"):
        bv.Trace.from_attentions(uniform(1, 2, 6), [pad] * 6)
    assert bv.Trace.from_attentions(uniform(1, 2, 6), ["[CLS]"] + [pad] * 5).n_real == 1


@pytest.mark.parametrize("stacked", [False, True])
def test_the_gpu_standins_arrays_are_taken_as_cupys_are(stacked):
    # the stand-in's arrays were once refused ("could not read a array_api_strict ... Array"), though CuPy's,
    # which it stands in for, are read
    pytest.importorskip("array_api_strict")
    from bertviz_lite import backend
    xp = backend.gpu_standin()
    host = [np.random.default_rng(i).dirichlet(np.ones(4), size=(1, 2, 4)).astype(np.float32) for i in range(3)]
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    on_device = xp.asarray(np.stack(host)) if stacked else [xp.asarray(a) for a in host]
    got = bv.Trace.from_attentions(on_device, tokens)
    want = bv.Trace.from_attentions(host, tokens)
    assert got.num_layers == 3
    for layer in range(3):
        assert np.allclose(backend.to_host(got.get("attn.probs", layer=layer)),
                           backend.to_host(want.get("attn.probs", layer=layer)), atol=1e-7)


def test_a_stacked_standin_array_over_the_budget_is_refused():
    pytest.importorskip("array_api_strict")
    from bertviz_lite import backend
    stacked = backend.gpu_standin().asarray(np.full((2, 1, 2, 40, 40), 1 / 40, dtype=np.float32))
    with pytest.raises(bv.TraceTooLargeError, match="2 layers x 2 heads over 40 tokens"):
        bv.Trace.from_attentions(stacked, [f"t{i}" for i in range(40)], max_bytes=100)
