"""The parameter ledger: BERT's initialisation, the totals of BERT-base and the popular sources,
heads counted once, count_params of something that is not a model.
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import schema
from bertviz_lite.params import component_counts, convention_total, formula_total

from ..conftest import SMALL
from ..helpers import host, host_weights


def test_random_weights_follow_berts_initialisation(base):
    W = host_weights(base)
    assert abs(float(np.std(W["layer.4.ffn.W_up"])) - 0.02) < 2e-4
    assert float(np.max(np.abs(W["layer.4.ffn.b_up"]))) == 0.0
    assert np.all(W["layer.4.attn.ln.gamma"] == 1) and np.all(W["layer.4.attn.ln.beta"] == 0)
    again = bv.load("random", seed=0, config=SMALL)
    other = bv.load("random", seed=1, config=SMALL)
    first = bv.load("random", seed=0, config=SMALL)
    W_Q = [host(m.weights["layer.1.attn.W_Q"]) for m in (again, other, first)]
    np.testing.assert_array_equal(W_Q[0], W_Q[2])
    assert not np.array_equal(W_Q[1], W_Q[2])


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
    expected = host(tr.get("pooler.out")) @ host(model.weights["nsp.W"]) + host(model.weights["nsp.b"])
    np.testing.assert_allclose(host(tr.get("head.logits")), expected, rtol=1e-5, atol=1e-6)
    assert bv.params.step_of_param("nsp.W") == "head.logits"


@pytest.mark.parametrize("thing", ["minilm", None, bv.BertConfig()])
def test_count_params_of_something_else_names_what_it_needs(thing):
    with pytest.raises(TypeError, match="count_params counts a loaded model"):
        bv.count_params(thing)


def test_count_params_of_a_hand_built_model_with_a_wrong_shape(small):
    weights = host_weights(small)
    weights["layer.1.ffn.b_up"] = np.zeros(7, np.float32)
    odd = bv.Bert(small.config, weights, small.tokenizer)
    with pytest.raises(bv.CheckpointError, match=r"layer\.1\.ffn\.b_up \(7,\), the config needs \(256,\)"):
        bv.count_params(odd)
