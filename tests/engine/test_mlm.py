"""The masked-LM head: BERT's masking, the whole head's gradient against torch autograd
(tests/fixtures/make_mlm_reference.py) and central finite differences (float64),
the head MiniLM ships, fill_mask, and the errors for bad input and bad head files."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import loading, mlm
from bertviz_lite.backend import to_host
from bertviz_lite.config import BertConfig
from bertviz_lite.errors import BertVizError, CheckpointError

from ..helpers import numeric_grad, write_trained

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mlm" / "mlm_head_grad.npz"
xp = np
EPS = 1e-12


@pytest.fixture
def rng():
    return np.random.default_rng(3)


# ------------------------------------------------------------------------------------------
# the whole head: against torch autograd (a committed fixture) and finite differences
# (each backward function on its own: tests/engine/test_backward.py)
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ref():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def head_config(ref, eps=None):
    meta = json.loads(ref["meta"].item())
    return BertConfig(vocab_size=meta["V"], hidden_size=meta["H"], num_layers=1, num_heads=1, ffn_size=4 * meta["H"],
                      layer_norm_eps=meta["eps"] if eps is None else eps)


def test_whole_head_matches_torch_autograd(ref):
    params = {k: ref[k] for k in bv.weights.MLM_LEARNED}
    c = head_config(ref)
    batch = mlm.rows_batch(ref["Z"], ref["targets"], xp, c.num_layers)
    y, _ = mlm.forward({**params, "embed.W_T": ref["W_T"]}, batch, c, xp)
    np.testing.assert_allclose(y, ref["logits"], rtol=1e-6, atol=1e-6)  # hugging face's BertLMPredictionHead
    loss, grads = mlm.loss_and_grads(params, {"embed.W_T": ref["W_T"]}, batch, c, xp)
    assert float(loss) == pytest.approx(float(ref["loss"]), rel=1e-6)
    assert set(grads) == set(bv.weights.MLM_LEARNED)
    for k in grads:
        np.testing.assert_allclose(grads[k], ref[f"grad.{k}"], rtol=1e-5, atol=1e-6, err_msg=k)


def test_whole_head_matches_finite_differences(ref):
    params = {k: ref[k].copy() for k in bv.weights.MLM_LEARNED}
    c = head_config(ref, EPS)
    batch, frozen = mlm.rows_batch(ref["Z"], ref["targets"], xp, c.num_layers), {"embed.W_T": ref["W_T"]}
    _, grads = mlm.loss_and_grads(params, frozen, batch, c, xp)
    for k in ("mlm.b_t", "mlm.ln.gamma", "mlm.bias"):  # W_t is covered by torch; these are quick
        num = numeric_grad(lambda: float(mlm.loss_and_grads(params, frozen, batch, c, xp)[0]), params[k])
        np.testing.assert_allclose(grads[k], num, rtol=1e-5, atol=1e-6, err_msg=k)


def test_a_step_against_the_gradient_lowers_the_loss(ref):
    params = {k: ref[k] for k in bv.weights.MLM_LEARNED}
    c = head_config(ref, EPS)
    batch, frozen = mlm.rows_batch(ref["Z"], ref["targets"], xp, c.num_layers), {"embed.W_T": ref["W_T"]}
    loss, grads = mlm.loss_and_grads(params, frozen, batch, c, xp)
    stepped = {k: params[k] - 0.05 * grads[k] for k in params}
    assert float(mlm.loss_and_grads(stepped, frozen, batch, c, xp)[0]) < float(loss)
    fitted, log = mlm.fit(params, ref["Z"], ref["targets"], ref["W_T"], c, xp=xp, rng=np.random.default_rng(0),
                          epochs=30, batch=4, peak_lr=3e-2, log_every=5)
    assert log[-1][2] < 0.5 * log[0][2]  # it can learn 7 rows by heart
    assert float(mlm.loss_and_grads(fitted, frozen, batch, c, xp)[0]) < 0.5 * float(loss)


# ------------------------------------------------------------------------------------------
# BERT's masking
# ------------------------------------------------------------------------------------------


def test_masking_follows_bert():
    rng = np.random.default_rng(0)
    special = {101, 102}
    ids = [101] + list(range(2000, 2040)) + [102]  # 40 word pieces
    kinds = []
    for _ in range(500):
        m = mlm.choose_masks(ids, rng, vocab_size=30522, mask_id=103, special_ids=special)
        assert len(m.positions) == 6  # round(0.15 * 40)
        assert 0 not in m.positions and len(ids) - 1 not in m.positions  # never [CLS] or [SEP]
        assert m.targets == [ids[p] for p in m.positions]
        for p, kind in zip(m.positions, m.kinds):
            assert (m.ids[p] == 103) == (kind == "mask")
            assert kind != "keep" or m.ids[p] == ids[p]
        assert all(m.ids[i] == ids[i] for i in range(len(ids)) if i not in m.positions)
        kinds += m.kinds
    share = {k: kinds.count(k) / len(kinds) for k in ("mask", "random", "keep")}
    assert abs(share["mask"] - 0.8) < 0.03 and abs(share["random"] - 0.1) < 0.02 and abs(share["keep"] - 0.1) < 0.02
    short = mlm.choose_masks([101, 7, 102], rng, vocab_size=10, mask_id=3, special_ids=special)
    assert short.positions == [1]  # at least one piece
    with pytest.raises(ValueError, match="no word piece"):
        mlm.choose_masks([101, 102], rng, vocab_size=10, mask_id=3, special_ids=special)


def test_word_classes():
    assert [mlm.word_class(p) for p in ("paris", "the", "##ing", ",", "1990", "of")] == \
        ["content", "function", "other", "other", "other", "function"]


# ------------------------------------------------------------------------------------------
# the head minilm ships
# ------------------------------------------------------------------------------------------


def test_minilm_has_the_fitted_head(minilm):
    assert minilm.has_mlm and "+mlm" in repr(minilm)
    path = loading.packaged_head_path()
    assert path.stat().st_size < 3 * 2**20  # the five learned tensors, not the tied 30,522 x 384 decoder
    tr = minilm.trace("The capital of France is [MASK].")
    assert tr.keys()[-1] == "mlm.logits" and tr["mlm.logits"].shape == (tr.n, 30522)
    for k in ("mlm.b_t", "mlm.ln.beta", "mlm.bias"):  # trained: no bias is left at BERT's zero init
        assert np.abs(to_host(minilm.weights[k])).max() > 0.01, k
    bare = bv.load("minilm", mlm=False)
    assert not bare.has_mlm and "mlm.logits" not in bare.trace("a [MASK] b").keys()
    assert bv.count_params(minilm).total - bv.count_params(bare).total == 384 * 384 + 384 + 2 * 384 + 30522
    np.testing.assert_array_equal(to_host(tr["layer.5.ffn.ln"]),
                                  to_host(bare.trace("The capital of France is [MASK].")["layer.5.ffn.ln"]))


def test_shipped_numbers_beside_the_head():
    info = json.loads(loading.packaged_head_path().with_suffix(".json").read_text())
    held = info["heldout"]
    assert held["fitted head"]["content"]["top5"] > held["unigram"]["content"]["top5"]
    assert held["fitted head"]["all"]["top5"] > held["untrained head"]["all"]["top5"]
    assert info["loss_curve"][-1][2] < info["loss_curve"][0][2]


def test_fill_mask_gives_words_and_probabilities(minilm):
    preds = minilm.fill_mask("The cat sat on the [MASK].", top_k=5)
    assert len(preds) == 1 and len(preds[0]) == 5
    probs = [p.probability for p in preds[0]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    assert all(p.position == 6 for p in preds[0])
    two = minilm.fill_mask("The [MASK] sat on the [MASK].", top_k=3)
    assert [len(p) for p in two] == [3, 3]


def test_fill_mask_bad_input(minilm):
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        minilm.fill_mask("The cat sat on the mat.")
    for bad in (0, -1, 30523, 2.5, True, "5"):
        with pytest.raises(ValueError, match="top_k"):
            minilm.fill_mask("The cat sat on the [MASK].", top_k=bad)
    with pytest.raises(BertVizError, match="no masked-lm head.*mlm=False"):
        bv.load("minilm", mlm=False).fill_mask("The cat sat on the [MASK].")


def _write_head(path, tensors, **meta):
    about = {"format": loading.HEAD_FORMAT, "encoder": loading.MINILM_REPO, "layer": "5", **meta}
    write_trained(path, tensors, about)


@pytest.fixture(scope="module")
def minilm_parts():
    return loading.read_folder(loading.find_minilm())


def test_bad_head_files_name_the_file(tmp_path, minilm_parts):
    config, _, _ = minilm_parts
    good = loading.read_trained("head", loading.packaged_head_path(), config)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(loading.packaged_head_path().read_bytes()[:5000])
    record = {"sha256": hashlib.sha256(truncated.read_bytes()).hexdigest()}  # recorded: the bytes are the problem
    truncated.with_suffix(".json").write_text(json.dumps({"file": record}))
    with pytest.raises(CheckpointError, match="truncated.safetensors could not be read"):
        loading.read_trained("head", truncated, config)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="garbage.safetensors"):
        loading.read_trained("head", garbage, config)
    cases = {
        "shape": ({**good, "mlm.W_t": good["mlm.W_t"][:, :100].copy()}, {}, r"mlm.W_t has shape \(384, 100\)"),
        "missing": ({k: v for k, v in good.items() if k != "mlm.bias"}, {}, "missing tensor mlm.bias"),
        "extra": ({**good, "mlm.W_out": np.zeros((2, 2), np.float32)}, {}, "unexpected tensor mlm.W_out"),
        "nan": ({**good, "mlm.b_t": np.full(384, np.nan, np.float32)}, {}, "NaN"),
        "encoder": (good, {"encoder": "google-bert/bert-base-uncased"}, "for encoder 'google-bert/bert-base-uncased'"),
        "layer": (good, {"layer": "3"}, "fitted on layer '3'"),
    }
    for name, (tensors, meta, message) in cases.items():
        path = tmp_path / f"{name}.safetensors"
        _write_head(path, tensors, **meta)
        with pytest.raises(CheckpointError, match=message) as e:
            loading.read_trained("head", path, config)
        assert str(path) in str(e.value)
    with pytest.raises(CheckpointError, match="missing"):
        loading.read_trained("head", tmp_path / "nowhere.safetensors", config)


def test_mlm_flag_on_other_sources(tmp_path):
    with pytest.raises(TypeError, match="mlm must be"):
        bv.load("minilm", mlm="yes")
    assert not bv.load("random", config={"num_layers": 1, "hidden_size": 32, "num_heads": 2, "ffn_size": 64}).has_mlm


def test_head_is_skipped_when_logits_are_not_recorded(minilm):
    tr = minilm.trace("The cat sat on the [MASK].", keep=["attn.probs"])
    assert "mlm.logits" not in tr.keys()
    btr = minilm.trace_batch(["a [MASK] b", "the cat"], keep=["mlm.logits"])
    assert btr["mlm.logits"].shape[-1] == 30522


# ------------------------------------------------------------------------------------------
# whole-word masking and the masking rates; a position chosen twice; an all-padding sentence;
# a diverged model's ranks; the mlm functions called by hand check their arguments
# ------------------------------------------------------------------------------------------


def test_whole_word_masking_chooses_whole_words():
    rng = np.random.default_rng(1)
    tokens = ["[CLS]", "the", "un", "##believ", "##able", "cat", "sat", "on", "the", "mat", "##s", "today", "[SEP]"]
    ids = [101] + list(range(2000, 2011)) + [102]
    words = mlm.word_ids(tokens)
    assert words == [0, 1, 2, 2, 2, 3, 4, 5, 6, 7, 7, 8, 9]
    for _ in range(200):
        m = mlm.choose_masks(ids, rng, vocab_size=30522, mask_id=103, special_ids={101, 102}, words=words)
        chosen = set(m.positions)
        for w in set(words[p] for p in chosen):  # every piece of a chosen word is chosen
            assert {i for i, x in enumerate(words) if x == w} <= chosen
        assert 0 not in chosen and 12 not in chosen
    m = mlm.choose_masks(ids, np.random.default_rng(0), vocab_size=30522, mask_id=103, special_ids={101, 102},
                         p_mask=1.0, p_random=0.0)
    assert set(m.kinds) == {"mask"} and all(m.ids[p] == 103 for p in m.positions)
    # words=None and the default rates draw exactly as before (the held-out rows of every run stay the same)
    a = mlm.choose_masks(ids, np.random.default_rng(5), vocab_size=30522, mask_id=103, special_ids={101, 102})
    b = mlm.choose_masks(ids, np.random.default_rng(5), vocab_size=30522, mask_id=103, special_ids={101, 102},
                         p_mask=mlm.P_MASK, p_random=mlm.P_RANDOM, words=None)
    assert a == b


def tiny():
    """A 1-layer BERT small enough for finite differences, its head included."""
    c = BertConfig(vocab_size=40, hidden_size=8, num_layers=1, num_heads=2, ffn_size=16, max_positions=16,
                   layer_norm_eps=EPS)
    model = bv.load("random", config=c, mlm=True, seed=2, backend="numpy")  # float64 numpy, for finite differences
    weights = {k: np.asarray(v, dtype=np.float64) for k, v in model.weights.items()}
    params = {k: v for k, v in weights.items() if k.startswith(("layer.0.", "mlm."))}
    frozen = {"embed.W_T": weights["embed.W_T"]}
    return c, params, frozen


def test_a_position_chosen_twice_gets_the_sum_of_its_gradients():
    c, params, frozen = tiny()
    Z = np.random.default_rng(0).normal(size=(1, 5, 8))
    mask = np.ones((1, 5), dtype=np.int64)
    both = mlm.Batch(Z, mask, np.array([2, 2]), np.array([7, 11]), 0)
    loss, grads = mlm.loss_and_grads(params, frozen, both, c, xp)
    singles = [mlm.loss_and_grads(params, frozen, mlm.Batch(Z, mask, np.array([2]), np.array([t]), 0), c, xp)
               for t in (7, 11)]
    assert float(loss) == pytest.approx((float(singles[0][0]) + float(singles[1][0])) / 2, rel=1e-12)
    for k in ("layer.0.attn.W_Q", "layer.0.ffn.W_up", "mlm.W_t"):  # the mean's gradient: the average of the two
        np.testing.assert_allclose(grads[k], (singles[0][1][k] + singles[1][1][k]) / 2, rtol=1e-9, atol=1e-12,
                                   err_msg=k)
    num = numeric_grad(lambda: float(mlm.loss_and_grads(params, frozen, both, c, xp)[0]), params["layer.0.attn.W_V"])
    np.testing.assert_allclose(grads["layer.0.attn.W_V"], num, rtol=1e-5, atol=1e-8)


def test_an_all_padding_sentence_is_refused_not_turned_into_nan_gradients():
    c, params, frozen = tiny()
    Z = np.random.default_rng(0).normal(size=(2, 4, 8))
    mask = np.array([[1, 1, 1, 0], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match="sentence 1 of the batch is all padding"):
        mlm.loss_and_grads(params, frozen, mlm.Batch(Z, mask, np.array([1]), np.array([3]), 0), c, xp)
    with pytest.raises(ValueError, match="padding position"):
        mlm.loss_and_grads(params, frozen, mlm.Batch(Z[:1], mask[:1], np.array([3]), np.array([3]), 0), c, xp)


def test_a_diverged_model_ranks_last_not_first():
    c, params, frozen = tiny()
    batch = mlm.Batch(np.ones((1, 3, 8)), np.ones((1, 3), dtype=np.int64), np.array([1]), np.array([5]), 0)
    broken = {**params, "mlm.W_t": np.full_like(params["mlm.W_t"], np.nan)}
    ranks, losses, top1 = mlm.ranks_and_losses(broken, frozen, [batch], c, xp, top1=True)
    assert ranks.tolist() == [c.vocab_size] and np.isinf(losses).all() and top1.tolist() == [-1]
    ranks, losses = mlm.ranks_and_losses(params, frozen, [batch], c, xp)
    assert 0 <= ranks[0] < c.vocab_size and np.isfinite(losses).all()


def bad_calls():
    c, params, frozen = tiny()
    Z, mask = np.ones((1, 3, 8)), np.ones((1, 3), dtype=np.int64)
    good = mlm.Batch(Z, mask, np.array([1]), np.array([5]), 0)

    def step(rows, targets, config=c):
        return lambda: mlm.loss_and_grads(params, frozen, mlm.Batch(Z, mask, np.array(rows, dtype=np.int64),
                                                                    np.array(targets, dtype=np.int64), 0), config, xp)

    def train(**kw):
        return lambda: mlm.train(params, frozen, [good], c, xp, rng=np.random.default_rng(0), **kw)

    y = np.zeros((2, c.vocab_size))
    return {
        "zero-length batch": (step([], []), "no chosen row"),
        "target -1": (step([1], [-1]), "id -1 at row 0 is outside the vocabulary 0 .. 39"),
        "target V": (step([1], [c.vocab_size]), "id 40 at row 0 is outside the vocabulary"),
        "cross_entropy target -1": (lambda: mlm.cross_entropy(y, np.array([0, -1]), xp), "outside the vocabulary"),
        "cross_entropy zero rows": (lambda: mlm.cross_entropy_backward(y[:0], np.array([], dtype=np.int64), xp),
                                    "no chosen row"),
        "row outside the batch": (step([3], [5]), "flat positions"),
        "shared_layers with gelu": (step([1], [5], c.replace(shared_layers=True)), "shared_layers=True"),
        "untied decoder": (step([1], [5], c.replace(tie_word_embeddings=False)), "tied decoder"),
        "train(steps=-1)": (train(steps=-1), "steps must be a whole number >= 1"),
        "train(steps=0)": (train(steps=0), "steps must be a whole number >= 1"),
        "train(epochs=0)": (train(epochs=0), "epochs must be"),
        "peak_lr=nan": (train(peak_lr=float("nan")), "peak_lr must be a finite number > 0"),
        "peak_lr per key inf": (train(peak_lr=lambda k: float("inf")), "peak_lr for "),
        "peak_lr=0": (train(peak_lr=0.0), "peak_lr must be"),
        "warmup=1": (train(warmup=1.0), "warmup"),
        "no batches": (lambda: mlm.train(params, frozen, [], c, xp, rng=np.random.default_rng(0)), "no batches"),
    }


BAD_CALLS = ("zero-length batch", "target -1", "target V", "cross_entropy target -1", "cross_entropy zero rows",
       "row outside the batch", "shared_layers with gelu", "untied decoder", "train(steps=-1)", "train(steps=0)",
       "train(epochs=0)", "peak_lr=nan", "peak_lr per key inf", "peak_lr=0", "warmup=1", "no batches")


@pytest.mark.parametrize("name", BAD_CALLS)
def test_mlm_functions_called_by_hand_check_their_arguments(name):
    call, message = bad_calls()[name]
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        call()


def test_a_tie_is_not_a_hit():
    # a collapsed head (LayerNorm gamma = beta = 0, bias 0) gives every piece the same logit: the target ranks
    # after every lower id, as an argmax (the first of equal logits) orders them, and top-1 is id 0
    c, params, frozen = tiny()
    collapsed = {**params, **{k: np.zeros_like(params[k]) for k in ("mlm.ln.gamma", "mlm.ln.beta", "mlm.bias")}}
    batch = mlm.Batch(np.ones((1, 3, 8)), np.ones((1, 3), dtype=np.int64), np.array([0, 1, 2]), np.array([0, 5, 39]), 0)
    ranks, losses, top1 = mlm.ranks_and_losses(collapsed, frozen, [batch], c, xp, top1=True)
    assert ranks.tolist() == [0, 5, 39] and top1.tolist() == [0, 0, 0]
    assert np.allclose(losses, np.log(c.vocab_size), atol=1e-9)


def masking_and_batching_calls():
    rng = np.random.default_rng(0)

    def choose(**kw):
        args = {"vocab_size": 40, "mask_id": 3, "special_ids": {1, 2}, **kw}
        return lambda: mlm.choose_masks([1, 5, 6, 7, 2], rng, **args)

    one = mlm.Masked([1, 5, 2], [1], [5], ["mask"])
    return {
        "rate=nan": (choose(rate=float("nan")), "rate must be a number in 0 < rate <= 1, got nan"),
        "rate=0": (choose(rate=0.0), "rate must be a number in 0 < rate <= 1"),
        "rate=1.5": (choose(rate=1.5), "rate must be a number in 0 < rate <= 1"),
        "p_mask=nan": (choose(p_mask=float("nan")), "p_mask must be a number in 0 <= p_mask <= 1"),
        "p_mask + p_random > 1": (choose(p_mask=0.8, p_random=0.5), r"p_mask \+ p_random .* at most 1"),
        "vocab_size=0": (choose(vocab_size=0), "vocab_size must be a whole number >= 1, got 0"),
        "batches of nothing": (lambda: mlm.batches_by_length([], [], 4, 0), "no masked sentence"),
        "size=0": (lambda: mlm.batches_by_length([one], [np.zeros((3, 8))], 0, 0), "size must be a whole number >= 1"),
        "features not one per sentence": (lambda: mlm.batches_by_length([one, one], [np.zeros((3, 8))], 2, 0),
                                          "one feature array per masked sentence"),
    }


@pytest.mark.parametrize("name", list(masking_and_batching_calls()))
def test_masking_and_batching_check_their_arguments(name):
    call, message = masking_and_batching_calls()[name]
    with pytest.raises(ValueError, match=message):
        call()
