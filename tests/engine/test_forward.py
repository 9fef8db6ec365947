"""The forward pass: golden key list, shapes against declared axes, invariants, recomputation of a
head, an FFN, the pooler and the masked-LM logits from recorded inputs, activation variants. Parity
against Hugging Face transformers lives in test_parity.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.engine import gelu_sigmoid, gelu_tanh

from ..conftest import SMALL
from ..helpers import golden_keys, host


def test_trace_records_exactly_the_golden_keys_in_order(base_trace):
    assert base_trace.keys() == golden_keys(12)
    assert schema.trace_keys(12) == golden_keys(12)
    assert len(base_trace.keys()) == 5 + 12 * 15 + 1


def test_every_shape_matches_its_declared_axes(base_trace):
    c = base_trace.config
    sizes = {"token": 6, "query": 6, "key": 6, "head": 12, "hidden": 768, "embed": 768, "head_dim": 64, "ffn": 3072}
    assert base_trace.tokens == ("[CLS]", "i", "love", "machine", "learning", "[SEP]")
    for key in base_trace.keys():
        axes = base_trace.axes(key)
        assert all(a in schema.AXES for a in axes)
        assert tuple(base_trace[key].shape) == tuple(sizes[a] for a in axes), key
        assert tuple(base_trace[key].shape) == schema.shape_of(key, c, 6)
    assert base_trace.stack("attn.probs").shape == (12, 12, 6, 6)
    assert base_trace.stack_axes("attn.probs") == ("layer", "head", "query", "key")


@pytest.mark.float16
def test_pad_to_512_reproduces_the_formula_cards_shapes(base):
    tr = base.trace("I love machine learning", pad_to=512, keep=["embed.*", "attn.probs"], dtype="float16")
    assert tr["embed.sum"].shape == (512, 768)
    assert tr.get("attn.probs", layer=0).shape == (12, 512, 512)
    assert tr.n == 512 and tr.n_real == 6
    assert tr.tokens[6:] == ("[PAD]",) * 506


def test_shapes_table_lists_every_key_with_axes_and_formula(base_trace):
    table = base_trace.shapes()
    assert table.column("key") == base_trace.keys()
    rows = {r[0]: r for r in table}
    assert rows["layer.0.attn.probs"][1] == (12, 6, 6)
    assert rows["layer.0.attn.probs"][2] == "head x query x key"
    assert "softmax" in rows["layer.0.attn.probs"][3]
    assert "layer.11.ffn.ln" in str(table)


def test_attention_rows_sum_to_one(base_trace):
    probs = host(base_trace.stack("attn.probs"))
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert probs.min() >= 0


def test_padding_gets_exactly_zero_attention_and_leaves_real_tokens_unchanged(small):
    text = "the quick brown fox jumps over the lazy dog"
    plain, padded = small.trace(text), small.trace(text, pad_to=32)
    n = plain.n
    assert padded.mask == (1,) * n + (0,) * (32 - n)
    for layer in range(small.config.num_layers):
        probs = host(padded.get("attn.probs", layer=layer))
        assert np.all(probs[:, :, n:] == 0.0), "a [PAD] key received attention"
        scores = host(padded.get("attn.scores", layer=layer))
        assert np.all(np.isneginf(scores[:, :, n:]))
    for key in plain.keys():
        axes = plain.axes(key)
        real = host(padded.real(padded[key], axes))
        np.testing.assert_allclose(real, host(plain[key]), atol=1e-5, err_msg=key)


def test_layernorm_rows_are_normalised(base_trace):
    # random weights have gain 1 and bias 0, so every layernorm output row has mean 0, std 1
    for key in [k for k in base_trace.keys() if k.endswith(".ln")]:
        x = host(base_trace[key])
        np.testing.assert_allclose(x.mean(-1), 0.0, atol=1e-5, err_msg=key)
        np.testing.assert_allclose(x.std(-1), 1.0, atol=1e-4, err_msg=key)


def test_embedding_lines_add_up(base, base_trace):
    tr = base_trace
    W_T, W_P, W_S = (host(base.weights[k]) for k in ("embed.W_T", "embed.W_P", "embed.W_S"))
    np.testing.assert_array_equal(host(tr["embed.token"]), W_T[list(tr.ids)])
    np.testing.assert_array_equal(host(tr["embed.position"]), W_P[:6])
    np.testing.assert_array_equal(host(tr["embed.segment"]), W_S[list(tr.segments)])
    np.testing.assert_allclose(host(tr["embed.sum"]), W_T[list(tr.ids)] + W_P[:6] + W_S[list(tr.segments)],
                               atol=1e-6)


def test_sentence_pair_gets_segments_zero_then_one(small):
    tr = small.trace("how old are you?", pair="i am six.")
    sep = [i for i, t in enumerate(tr.tokens) if t == "[SEP]"]
    assert len(sep) == 2 and tr.tokens[0] == "[CLS]"
    assert tr.segments == (0,) * (sep[0] + 1) + (1,) * (sep[1] - sep[0])
    W_S = host(small.weights["embed.W_S"])
    np.testing.assert_array_equal(host(tr["embed.segment"])[-1], W_S[1])
    assert tr.has_pair


def test_empty_text_is_cls_sep(small):
    tr = small.trace("")
    assert tr.tokens == ("[CLS]", "[SEP]")
    assert tr["pooler.out"].shape == (small.config.hidden_size,)


@pytest.mark.parametrize("layer,head", [(0, 0), (5, 7), (11, 11)])
def test_one_head_recomputed_from_its_recorded_input(base, base_trace, layer, head):
    tr, W = base_trace, {k: host(v) for k, v in base.weights.items() if k.startswith(f"layer.{layer}.attn")}
    Z = host(tr["embed.ln"] if layer == 0 else tr[f"layer.{layer - 1}.ffn.ln"])
    cols = slice(64 * head, 64 * (head + 1))
    p = f"layer.{layer}.attn."
    q = Z @ W[p + "W_Q"][:, cols] + W[p + "b_Q"][cols]
    k = Z @ W[p + "W_K"][:, cols] + W[p + "b_K"][cols]
    v = Z @ W[p + "W_V"][:, cols] + W[p + "b_V"][cols]
    scores = q @ k.T / math.sqrt(64)
    probs = scipy.special.softmax(scores, axis=-1)
    np.testing.assert_allclose(host(tr.get("attn.q", layer=layer, head=head)), q, atol=1e-4)
    np.testing.assert_allclose(host(tr.get("attn.scores", layer=layer, head=head)), scores, atol=1e-4)
    np.testing.assert_allclose(host(tr.get("attn.probs", layer=layer, head=head)), probs, atol=1e-5)
    np.testing.assert_allclose(host(tr.get("attn.context", layer=layer, head=head)), probs @ v, atol=1e-4)
    # the concatenation puts head h's output in columns 64h .. 64h+63
    np.testing.assert_allclose(host(tr.get("attn.concat", layer=layer))[:, cols], probs @ v, atol=1e-4)


@pytest.mark.parametrize("layer", [0, 11])
def test_ffn_recomputed_from_its_recorded_input(base, base_trace, layer):
    tr, p = base_trace, f"layer.{layer}."
    W = {k[len(p):]: host(v) for k, v in base.weights.items() if k.startswith(p)}
    Z_bar = host(tr[p + "attn.ln"])
    up = Z_bar @ W["ffn.W_up"] + W["ffn.b_up"]
    act = up * 0.5 * (1 + scipy.special.erf(up / np.sqrt(2)))  # exact gelu
    down = act @ W["ffn.W_down"] + W["ffn.b_down"]
    resid = Z_bar + down
    ln = (resid - resid.mean(-1, keepdims=True)) / np.sqrt(resid.var(-1, keepdims=True) + 1e-12)
    ln = ln * W["ffn.ln.gamma"] + W["ffn.ln.beta"]
    for key, want in [("ffn.up", up), ("ffn.act", act), ("ffn.down", down), ("ffn.resid", resid), ("ffn.ln", ln)]:
        np.testing.assert_allclose(host(tr[p + key]), want, atol=1e-4, err_msg=key)


def test_pooler_and_output_projection_recomputed(base, base_trace):
    tr = base_trace
    W = {k: host(v) for k, v in base.weights.items()}
    Z_L = host(tr["layer.11.ffn.ln"])
    np.testing.assert_allclose(host(tr["pooler.out"]), np.tanh(Z_L[0] @ W["pooler.W"] + W["pooler.b"]), atol=1e-5)
    concat = host(tr["layer.3.attn.concat"])
    np.testing.assert_allclose(host(tr["layer.3.attn.out"]), concat @ W["layer.3.attn.W_O"] + W["layer.3.attn.b_O"],
                               atol=1e-4)


def test_mlm_logits_use_the_tied_token_embeddings(small_mlm):
    tr = small_mlm.trace("paris is the [MASK] of france.")
    W = {k: host(v) for k, v in small_mlm.weights.items()}
    assert tr.keys() == golden_keys(2, mlm=True)
    Z = host(tr["layer.1.ffn.ln"])
    h = Z @ W["mlm.W_t"] + W["mlm.b_t"]
    h = h * 0.5 * (1 + scipy.special.erf(h / np.sqrt(2)))
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-12) * W["mlm.ln.gamma"] + W["mlm.ln.beta"]
    np.testing.assert_allclose(host(tr["mlm.logits"]), h @ W["embed.W_T"].T + W["mlm.bias"], atol=1e-4)
    (preds,) = small_mlm.fill_mask("paris is the [MASK] of france.", top_k=5)
    probs = [p.probability for p in preds]
    assert len(preds) == 5 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    row = host(tr["mlm.logits"])[preds[0].position]
    assert preds[0].id == int(np.argmax(row))


@pytest.mark.parametrize("act,fn", [("gelu_new", gelu_tanh), ("quick_gelu", gelu_sigmoid)])
def test_activation_variants_from_hf_names(act, fn):
    m = bv.load("random", seed=0, config={**SMALL, "hidden_act": act})
    tr = m.trace("a b c")
    up = host(tr["layer.0.ffn.up"])
    np.testing.assert_allclose(host(tr["layer.0.ffn.act"]), fn(up, np), atol=1e-6)


def test_relu_variant():
    tr = bv.load("random", seed=0, config={**SMALL, "hidden_act": "relu"}).trace("a b c")
    np.testing.assert_array_equal(host(tr["layer.0.ffn.act"]), np.maximum(host(tr["layer.0.ffn.up"]), 0))
