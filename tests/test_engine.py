"""The engine: golden key list, shapes against declared axes, invariants, recomputation of a
head and an FFN from recorded inputs, backends, bad input. Parity against Hugging Face
transformers lives in test_parity.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.special

import bertviz_lite as bv
from bertviz_lite import backend, engine, schema
from bertviz_lite.engine import gelu_sigmoid, gelu_tanh
from bertviz_lite.params import component_counts, convention_total, formula_total
from bertviz_lite.trace import estimate_trace_bytes

from .conftest import SMALL

# the golden key list: the order of one layer's steps, written out by hand
LAYER_KEYS = ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.probs", "attn.context", "attn.concat",
              "attn.out", "attn.resid", "attn.ln", "ffn.up", "ffn.act", "ffn.down", "ffn.resid", "ffn.ln"]
EMBED_KEYS = ["embed.token", "embed.position", "embed.segment", "embed.sum", "embed.ln"]


def golden_keys(L, mlm=False):
    keys = EMBED_KEYS + [f"layer.{l}.{k}" for l in range(L) for k in LAYER_KEYS] + ["pooler.out"]
    return keys + (["mlm.logits"] if mlm else [])


def host(x):
    return np.asarray(backend.to_host(x), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# keys and shapes
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# invariants
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# recompute a head and an ffn from recorded inputs, in float64 with library functions
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# the trace as a container
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# weights and parameter counts
# ---------------------------------------------------------------------------------------------


def test_random_weights_follow_berts_initialisation(base):
    W = base.weights
    assert abs(float(np.std(W["layer.4.ffn.W_up"])) - 0.02) < 2e-4
    assert float(np.max(np.abs(W["layer.4.ffn.b_up"]))) == 0.0
    assert np.all(W["layer.4.attn.ln.gamma"] == 1) and np.all(W["layer.4.attn.ln.beta"] == 0)
    again = bv.load("random", seed=0, config=SMALL)
    other = bv.load("random", seed=1, config=SMALL)
    first = bv.load("random", seed=0, config=SMALL)
    np.testing.assert_array_equal(again.weights["layer.1.attn.W_Q"], first.weights["layer.1.attn.W_Q"])
    assert not np.array_equal(other.weights["layer.1.attn.W_Q"], first.weights["layer.1.attn.W_Q"])


def test_parameter_ledger_of_bert_base(base):
    ledger = bv.count_params(base)
    parts = component_counts()
    assert ledger.total == formula_total(base.config) == convention_total(base.config)
    assert ledger.total == parts["embeddings"] + parts["all encoder layers"] + parts["pooler"]
    assert ledger.total == 109_482_240  # the seed fact for Hugging Face BertModel
    by_step = ledger.by_step()
    assert by_step["embed.token"] == parts["token embeddings"]
    assert by_step["layer.0.attn.q"] == parts["one of Q, K, V"]
    assert by_step["layer.11.ffn.up"] == parts["ffn up"]
    assert sum(by_step.values()) == ledger.total
    # every step that reads weights has a ledger row, and no other step does
    for step in schema.STEPS:
        if step.optional:
            continue
        key = step.key if step.scope == "model" else f"layer.0.{step.key}"
        assert (key in by_step) == bool(step.reads), key
    assert [w for w, _, _ in ledger.for_step("layer.2.attn.out")] == ["layer.2.attn.W_O", "layer.2.attn.b_O"]


def test_reconcile_reproduces_every_popular_total():
    table = bv.reconcile()
    totals = [t for t in table.column("total") if t is not None]
    # the totals the popular sources print (seed facts); each row is computed from its convention
    assert sorted(totals) == sorted([109_482_240, 110_106_428, 109_705_010, 108_853_248, 102_326_784, 110_617_344])
    # the paper's sizes are two significant figures: which conventions round to them is computed, not asserted
    paper = dict(zip(table.column("source"), table.rows))["the BERT paper"]
    assert paper[1] is None and paper[3] == "110M"
    agree = [r[0] for r in table.rows if r[1] is not None and f"{float(f'{r[1]:.2g}'):.0f}" == "110000000"]
    assert len(agree) == 5 and "formula card as written" not in agree and all(name in paper[4] for name in agree)
    large = bv.reconcile(bv.BertConfig(hidden_size=1024, num_layers=24, num_heads=16, ffn_size=4096))
    rows = dict(zip(large.column("source"), large.rows))
    assert rows["Hugging Face BertModel"][1] == 335_141_888 and rows["Hugging Face BertForPreTraining"][1] == 336_226_108
    assert rows["the BERT paper"][3] == "340M" and "Hugging Face BertModel" in rows["the BERT paper"][4]
    small = bv.reconcile(bv.BertConfig(num_layers=6, hidden_size=384, ffn_size=1536))
    assert "the BERT paper" not in small.column("source")  # the paper names no 6-layer model


def test_ledger_counts_mlm_head_with_tied_decoder_once(small_mlm):
    ledger = bv.count_params(small_mlm)
    H, V = small_mlm.config.hidden_size, small_mlm.config.vocab_size
    plain = bv.count_params(bv.load("random", seed=4, config=SMALL)).total
    assert ledger.total - plain == H * H + H + 2 * H + V  # transform + layernorm + bias, no V x H matrix


def test_random_bert_for_pretraining_holds_the_seed_total():
    # both heads on BERT-base: the arrays themselves add up to BertForPreTraining's total
    model = bv.load("random", seed=0, mlm=True, nsp=True)
    assert model.has_mlm and model.has_nsp
    total = bv.count_params(model).total
    assert total == formula_total(model.config, mlm=True, nsp=True) == 110_106_428
    rows = dict(zip(bv.reconcile().column("source"), bv.reconcile().column("total")))
    assert total == rows["Hugging Face BertForPreTraining"]
    with pytest.raises(ValueError, match="nsp= apply only"):
        bv.load("minilm", nsp=True)


def test_random_next_sentence_head_is_traced():
    # a random BertForPreTraining records its NSP head like any task head: head.logits from the pooled [CLS]
    model = bv.load("random", seed=1, config={"num_layers": 1}, nsp=True)
    assert model.config.head == "next_sentence"
    tr = model.trace("the cat sat", "on the mat")
    expected = tr.get("pooler.out").astype(np.float64) @ model.weights["nsp.W"] + model.weights["nsp.b"]
    np.testing.assert_allclose(tr.get("head.logits"), expected, rtol=1e-5, atol=1e-6)
    assert bv.params.step_of_param("nsp.W") == "head.logits"


# ---------------------------------------------------------------------------------------------
# backends
# ---------------------------------------------------------------------------------------------


def test_rational_erf_is_within_its_bound_of_scipy():
    x = np.linspace(-6, 6, 200_001)
    approx = engine.rational_erf(x, backend.get_namespace("numpy"))
    assert np.max(np.abs(approx - scipy.special.erf(x))) < 1.5e-7


def test_numpy_gelu_is_within_the_erf_bound_everywhere():
    # the fast kernel computes max(x, 0) - |x| Phi(-|x|) with the same rational erf: its error
    # is |x| * 1.5e-7 / 2 from the formula plus float32 rounding, on both sides of zero and out
    # where Phi(-|x|) underflows
    x = np.concatenate([np.linspace(-30, 30, 600_001), [0.0, -0.0, 1e-30, -1e-30, 3e4, -3e4]]).astype(np.float32)
    exact = x.astype(np.float64) * 0.5 * scipy.special.erfc(-x.astype(np.float64) / np.sqrt(2))
    fast = engine.gelu(x, np)
    assert fast.dtype == np.float32
    assert np.max(np.abs(fast - exact) / np.maximum(1.0, np.abs(x))) < 2.5e-7
    assert np.all(fast[x >= 0] >= 0) and np.all(fast[x < 0] <= 0)  # the sign branch


def test_kernels_split_over_threads_give_the_same_bits(monkeypatch):
    # a large input is split by rows over kernel_threads() threads; each row (each element, for gelu)
    # goes through the same ufuncs as on one thread, so the results are bitwise equal. Small blocks
    # make a small input "large" here, with uneven cuts and a ragged last block.
    from bertviz_lite import kernels, threads
    monkeypatch.setattr(kernels, "_BLOCK", 64)
    rng = np.random.default_rng(7)
    s = (rng.standard_normal((3, 41, 41)) * 4).astype(np.float32)
    s[..., 3] = -np.inf
    x = (rng.standard_normal((37, 29)) * 3).astype(np.float32)
    g, b = rng.standard_normal(29).astype(np.float32), rng.standard_normal(29).astype(np.float32)
    runs = {}
    for count in ("1", "3"):
        monkeypatch.setenv("BERTVIZ_LITE_THREADS", count)
        assert threads.kernel_threads() == int(count)
        runs[count] = (kernels.numpy_softmax(s), kernels.numpy_gelu(x), kernels.numpy_layer_norm(x, g, b, 1e-12))
    used = []
    real_split = kernels._split
    monkeypatch.setattr(kernels, "_split", lambda work, n, *a: (used.append(n), real_split(work, n, *a)))
    kernels.numpy_softmax(s)
    assert used == [3 * 41]  # the rows, not the elements, are cut for softmax
    for one, three in zip(runs["1"], runs["3"]):
        assert one.dtype == np.float32 and np.array_equal(one, three)


# the thread policy's tests (kernel_threads, threads_for_load, other_runnable_tasks): tests/test_threads.py


@pytest.mark.parametrize("shape", [(3, 5, 7), (12, 37, 37), (2, 300, 300), (1, 1, 1)])
def test_numpy_kernels_compute_the_array_api_lines(shape):
    # the fast numpy paths of softmax, gelu and layernorm against the engine's own array-api
    # lines (run through array_api_strict), on sizes that do and do not fill whole blocks
    strict = backend.get_namespace("array_api_strict")
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[..., 0] = -np.inf if shape[-1] > 1 else x[..., 0]  # a masked key in every row
    s = strict.asarray(x)
    np.testing.assert_allclose(engine.softmax(x, np), backend.to_host(engine.softmax(s, strict)), atol=2e-7)
    assert np.all(engine.softmax(x, np)[..., 0] == 0) or shape[-1] == 1
    y = np.where(np.isfinite(x), x, 1.5).astype(np.float32)
    np.testing.assert_allclose(engine.gelu(y, np), backend.to_host(engine.gelu(strict.asarray(y), strict)),
                               atol=1e-6, rtol=1e-6)
    exact = y * 0.5 * (1 + scipy.special.erf(y.astype(np.float64) / np.sqrt(2)))
    assert np.max(np.abs(engine.gelu(y, np) - exact)) < 1e-6 * max(1.0, np.abs(y).max())
    gamma = rng.standard_normal(shape[-1]).astype(np.float32)
    beta = rng.standard_normal(shape[-1]).astype(np.float32)
    fast = engine.layer_norm(y, gamma, beta, 1e-12, np)
    slow = engine.layer_norm(strict.asarray(y), strict.asarray(gamma), strict.asarray(beta), 1e-12, strict)
    np.testing.assert_allclose(fast, backend.to_host(slow), atol=2e-6, rtol=1e-5)
    for out in (engine.softmax(x, np), engine.gelu(y, np), fast):
        assert out.shape == x.shape and out.dtype == np.float32


def test_engine_runs_under_array_api_strict(small):
    strict = bv.load("random", seed=3, config=SMALL, backend="array_api_strict")
    assert strict.backend == "array_api_strict"
    a, b = strict.trace("strict arrays only, please"), small.trace("strict arrays only, please")
    assert a.keys() == b.keys()
    for key in a.keys():
        np.testing.assert_allclose(backend.to_host(a[key]), backend.to_host(b[key]), atol=1e-5, err_msg=key)


@pytest.mark.gpu
@pytest.mark.skipif(not backend.cupy_available(), reason="needs cupy and a CUDA GPU (cupy.is_available() is False)")
def test_cupy_matches_numpy():
    text = "The same trace on a GPU."
    cpu = bv.load("random", seed=0, backend="numpy").trace(text)
    gpu = bv.load("random", seed=0, backend="cupy").trace(text)
    assert gpu.backend == "cupy"
    worst = max(float(np.max(np.abs(backend.to_host(gpu[k]) - cpu[k]))) for k in cpu.keys())
    assert worst < 1e-4, worst


def test_cupy_backend_refused_clearly_without_gpu():
    if backend.cupy_available():
        pytest.skip("a GPU is present")
    with pytest.raises(bv.BackendError, match="GPU"):
        bv.load("random", config=SMALL, backend="cupy")


def test_engine_imports_and_runs_with_widget_libraries_blocked():
    code = textwrap.dedent("""
        import sys
        BLOCKED = ("plotly", "ipywidgets", "matplotlib", "IPython", "anywidget")
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is blocked in this test")
        sys.meta_path.insert(0, Block())
        import bertviz_lite as bv
        m = bv.load("random", seed=0, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256})
        tr = m.trace("no widgets here")
        print(len(tr.keys()), bv.count_params(m).total)
        assert not [k for k in sys.modules if k.split(".")[0] in BLOCKED]
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == str(len(golden_keys(2)))


def test_only_backend_module_names_numpy_cupy_or_scipy():
    import pathlib
    import re
    pkg = pathlib.Path(bv.__file__).parent
    offenders = []
    for path in pkg.glob("*.py"):  # the engine; views/ is the widget side
        if path.name in ("backend.py", "kernels.py"):
            continue
        for line in path.read_text().splitlines():
            if re.match(r"\s*(import|from)\s+(numpy|cupy|cupyx|scipy)\b", line):
                offenders.append(f"{path.name}: {line.strip()}")
    assert not offenders, offenders
