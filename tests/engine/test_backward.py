"""The backward pass (bertviz_lite.backward, bertviz_lite.mlm's training step): every backward function
against central finite differences in float64; the last encoder layers plus the head, through the tape
the forward recorded, against finite differences; one whole encoder layer plus the head against torch
autograd (a committed fixture made by tests/fixtures/make_backward_reference.py); the training loop's
first steps against a committed log (scripts/train_minilm_mlm.py --smoke)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.special

from bertviz_lite import backward, engine, mlm, schema
from bertviz_lite.config import BertConfig
from bertviz_lite.weights import param_shapes

from ..helpers import numeric_grad

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mlm" / "layer_head_grad.npz"
xp = np
EPS = 1e-12


def close(a, b, rtol=1e-6, atol=1e-8, what=""):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


@pytest.fixture
def rng():
    return np.random.default_rng(29)


@pytest.fixture
def exact_erf(monkeypatch):
    """scipy's erf in place of the engine's rational form (|error| <= 1.5e-7): the forward and gelu_backward's
    Phi then agree to float64 precision, so whole-layer gradients can be held to 1e-5 relative."""
    monkeypatch.setattr(engine, "erf", lambda x, xp: scipy.special.erf(x))


# ------------------------------------------------------------------------------------------
# building blocks, each against finite differences (float64), with a leading batch axis
# ------------------------------------------------------------------------------------------


def test_layer_norm_backward(rng):
    x, r = rng.normal(1, 2, (2, 4, 6)), rng.normal(size=(2, 4, 6))
    g, b = 1 + rng.normal(0, 0.3, 6), rng.normal(0, 0.3, 6)
    loss = lambda: float(np.sum(r * engine.layer_norm.formula(x, g, b, 1e-5, xp)))  # noqa: E731  a random read-out
    dx, dg, db = backward.layer_norm_backward(r, x, g, 1e-5, xp)
    close(dx, numeric_grad(loss, x))
    close(dg, numeric_grad(loss, g))
    close(db, numeric_grad(loss, b))


def test_softmax_backward_with_the_padding_mask(rng):
    s, r = rng.normal(0, 2, (2, 3, 4, 5)), rng.normal(size=(2, 3, 4, 5))
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])  # the second input's last two keys are [PAD]
    add = engine.padding_mask(mask, xp, s.dtype)  # [2, 1, 1, 5]: 0 or -inf
    loss = lambda: float(np.sum(r * engine.softmax.formula(s + add, xp)))  # noqa: E731
    p = engine.softmax.formula(s + add, xp)
    ds = backward.softmax_backward(r, p, xp)
    close(ds, numeric_grad(loss, s))
    assert np.all(ds[1, :, :, 3:] == 0)  # masked keys get exactly zero gradient
    assert np.all(np.isfinite(ds))


def test_gelu_backward(rng):
    x, r = rng.normal(0, 2, (3, 5, 6)), rng.normal(size=(3, 5, 6))
    exact = lambda: float(np.sum(r * x * 0.5 * (1 + scipy.special.erf(x / np.sqrt(2)))))  # noqa: E731
    # the engine's erf is a rational form with |error| <= 1.5e-7: its slope differs from Phi by as little
    close(backward.gelu_backward(r, x, xp), numeric_grad(exact, x), rtol=1e-6, atol=1e-6)
    tanh = lambda: float(np.sum(r * engine.gelu_tanh(x, xp)))  # noqa: E731  another function: caught
    assert not np.allclose(backward.gelu_backward(r, x, xp), numeric_grad(tanh, x), rtol=1e-6, atol=1e-6)


def test_matmul_bias_and_linear_backward(rng):
    x, W, b, r = rng.normal(size=(2, 4, 5)), rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=(2, 4, 3))
    loss = lambda: float(np.sum(r * (x @ W + b)))  # noqa: E731
    dx, dW = backward.matmul_backward(r, x, W, xp)
    close(dx, numeric_grad(loss, x))
    close(dW, numeric_grad(loss, W))
    same, db = backward.bias_backward(r, xp)
    assert same is r
    close(db, numeric_grad(loss, b))
    dx2, dW2, db2 = backward.linear_backward(r, x, W, xp)
    close(dx2, dx), close(dW2, dW), close(db2, db)
    none, dW3, _ = backward.linear_backward(r, x, W, xp, need_dx=False)
    assert none is None
    close(dW3, dW)


def test_split_and_merge_heads_backward(rng):
    x, r = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 3, 4, 2))  # n_h = 3, d_k = 2
    loss = lambda: float(np.sum(r * engine.split_heads(x, 3, xp)))  # noqa: E731
    close(backward.split_heads_backward(r, xp), numeric_grad(loss, x))
    z, r2 = rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(2, 4, 6))
    loss2 = lambda: float(np.sum(r2 * engine.merge_heads(z, xp)))  # noqa: E731
    close(backward.merge_heads_backward(r2, 3, xp), numeric_grad(loss2, z))


def test_scores_and_context_backward(rng):
    Q, K, r = rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(2, 3, 4, 4))
    scale = 1 / math.sqrt(2)
    loss = lambda: float(np.sum(r * ((Q * scale) @ np.swapaxes(K, -1, -2))))  # noqa: E731
    dQ, dK = backward.scores_backward(r, Q, K, scale, xp)
    close(dQ, numeric_grad(loss, Q))
    close(dK, numeric_grad(loss, K))
    P, V, r2 = rng.random((2, 3, 4, 4)), rng.normal(size=(2, 3, 4, 2)), rng.normal(size=(2, 3, 4, 2))
    loss2 = lambda: float(np.sum(r2 * (P @ V)))  # noqa: E731
    dP, dV = backward.context_backward(r2, P, V, xp)
    close(dP, numeric_grad(loss2, P))
    close(dV, numeric_grad(loss2, V))


def test_cross_entropy_and_its_backward(rng):
    y, t = rng.normal(0, 3, size=(5, 9)), rng.integers(0, 9, 5)
    loss = lambda: float(mlm.cross_entropy(y, t, xp))  # noqa: E731
    close(mlm.cross_entropy_backward(y, t, xp), numeric_grad(loss, y), atol=1e-9)
    logp = mlm.log_softmax(y, xp)  # computed once in a training step: the same numbers
    assert float(mlm.cross_entropy(y, t, xp, logp)) == float(mlm.cross_entropy(y, t, xp))
    np.testing.assert_array_equal(mlm.cross_entropy_backward(y, t, xp, logp), mlm.cross_entropy_backward(y, t, xp))
    assert float(mlm.cross_entropy(y, t, xp)) == pytest.approx(
        -np.mean(np.log(scipy.special.softmax(y, axis=-1)[np.arange(5), t])), rel=1e-12)


def test_chosen_rows_backward(rng):
    Z, rows, r = rng.normal(size=(2, 4, 3)), np.array([1, 6, 7]), rng.normal(size=(3, 3))
    loss = lambda: float(np.sum(r * mlm.chosen_rows(Z, rows, xp)))  # noqa: E731
    close(mlm.chosen_rows_backward(r, rows, Z.shape, xp), numeric_grad(loss, Z))


# ------------------------------------------------------------------------------------------
# the last layers and the head together, through the tape
# ------------------------------------------------------------------------------------------

TINY = BertConfig(vocab_size=23, hidden_size=8, num_layers=3, num_heads=2, ffn_size=16, max_positions=16,
                  layer_norm_eps=1e-5)


def tiny_weights(rng, c=TINY) -> dict:
    """Every tensor random and non-zero (biases, LayerNorm too: a gradient that forgets one is caught)."""
    out = {}
    for k, shape in param_shapes(c, mlm=True).items():
        base = 1.0 if k.endswith("gamma") else 0.0
        out[k] = base + rng.normal(0, 0.4 if len(shape) > 1 else 0.2, shape)
    return out


def tiny_batch(rng, first: int, c=TINY) -> mlm.Batch:
    B, n = 2, 5
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    rows = np.array([1, 3, 5 + 2])  # positions (0, 1), (0, 3), (1, 2)
    return mlm.Batch(rng.normal(0, 1, (B, n, c.hidden_size)), mask, rows, rng.integers(0, c.vocab_size, 3), first)


def test_the_tape_holds_what_the_backward_reads(rng):
    W, batch = tiny_weights(rng), tiny_batch(rng, first=1)
    _, tape = mlm.forward(W, batch, TINY, xp)
    for layer in (1, 2):
        for k in backward.TAPE_KEYS:
            assert f"{schema.layer_prefix(layer)}{k}" in tape
    assert {"mlm.rows", "mlm.dense", "mlm.act", "mlm.transform", "mlm.logits"} <= set(tape)


@pytest.mark.parametrize("key", ["layer.1.attn.W_Q", "layer.1.attn.b_K", "layer.1.attn.W_V", "layer.1.attn.b_O",
                                 "layer.1.attn.ln.gamma", "layer.1.ffn.W_up", "layer.1.ffn.b_down",
                                 "layer.2.attn.W_K", "layer.2.attn.b_Q", "layer.2.ffn.ln.beta", "layer.2.ffn.W_down",
                                 "mlm.W_t", "mlm.ln.gamma", "mlm.ln.beta", "mlm.b_t", "mlm.bias"])
def test_layers_and_head_match_finite_differences(rng, key, exact_erf):
    W, batch = tiny_weights(rng), tiny_batch(rng, first=1)
    trained = [k for k in W if k.startswith(("layer.1.", "layer.2.", "mlm."))]
    params = {k: W[k] for k in trained}
    frozen = {k: v for k, v in W.items() if k not in params}
    _, grads = mlm.loss_and_grads(params, frozen, batch, TINY, xp)
    assert set(grads) == set(params)
    num = numeric_grad(lambda: float(mlm.loss_and_grads(params, frozen, batch, TINY, xp)[0]), params[key])
    close(grads[key], num, rtol=1e-5, atol=1e-8, what=key)


def test_gradient_reaches_the_input_of_the_first_trained_layer_and_not_padding(rng, exact_erf):
    W, batch = tiny_weights(rng), tiny_batch(rng, first=1)
    logits, tape = mlm.forward(W, batch, TINY, xp)
    logp = mlm.log_softmax(logits, xp)
    dy = mlm.cross_entropy_backward(logits, batch.targets, xp, logp)
    drows, _ = backward.mlm_head_backward(dy, W, tape.__getitem__, tape["mlm.rows"], TINY, xp)
    dZ, _ = backward.layers_backward(mlm.chosen_rows_backward(drows, batch.rows, batch.Z.shape, xp), W, tape,
                                     batch.Z, 1, TINY, xp)
    Z = batch.Z.copy()

    def loss():
        b = mlm.Batch(Z, batch.mask, batch.rows, batch.targets, 1)
        return float(mlm.cross_entropy(mlm.forward(W, b, TINY, xp)[0], batch.targets, xp))
    close(dZ, numeric_grad(loss, Z), rtol=1e-5, atol=1e-8)
    assert np.all(dZ[1, 3:] == 0)  # [PAD] positions: no key reads them, no loss is taken there


def test_head_alone_fit_learns_rows_by_heart(rng):
    W = tiny_weights(rng)
    Z, t = rng.normal(size=(7, TINY.hidden_size)), rng.integers(0, TINY.vocab_size, 7)
    head = {k: W[k] for k in W if k.startswith("mlm.")}
    fitted, log = mlm.fit(head, Z, t, W["embed.W_T"], TINY, xp=xp, rng=np.random.default_rng(0), epochs=30, batch=4,
                          peak_lr=3e-2, log_every=5)
    assert log[-1][2] < 0.5 * log[0][2]
    ranks, losses = mlm.top_k_hits(fitted, Z, t, W["embed.W_T"], TINY, xp=xp)
    assert ranks.shape == (7,) and float(np.mean(losses)) < 0.5 * log[0][2]


# ------------------------------------------------------------------------------------------
# one whole encoder layer plus the head against torch autograd
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ref():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def test_layer_and_head_match_torch_autograd(ref, exact_erf):
    meta = json.loads(ref["meta"].item())
    c = BertConfig(vocab_size=meta["V"], hidden_size=meta["H"], num_layers=1, num_heads=meta["heads"],
                   ffn_size=meta["F"], max_positions=meta["n"], layer_norm_eps=meta["eps"])
    params = {k[len("param."):]: ref[k] for k in ref if k.startswith("param.")}
    batch = mlm.Batch(ref["Z"], ref["mask"], ref["rows"], ref["targets"], 0)
    logits, _ = mlm.forward({**params, "embed.W_T": ref["W_T"]}, batch, c, xp)
    close(logits, ref["logits"], rtol=1e-9, atol=1e-10, what="logits")  # hugging face's BertLayer + head
    loss, grads = mlm.loss_and_grads(params, {"embed.W_T": ref["W_T"]}, batch, c, xp)
    assert float(loss) == pytest.approx(float(ref["loss"]), rel=1e-10)
    assert set(grads) == set(params)
    for k in grads:
        close(grads[k], ref[f"grad.{k}"], rtol=1e-8, atol=1e-10, what=k)


def test_batches_by_length_pad_and_index_the_chosen_rows(rng):
    masked = [mlm.Masked(list(range(n)), [1, n - 2], [7, 8], ["mask", "keep"]) for n in (6, 4, 9, 5)]
    Zs = [rng.normal(size=(len(m.ids), 3)).astype(np.float32) for m in masked]
    batches = mlm.batches_by_length(masked, Zs, 2, first=4)
    assert [b.Z.shape for b in batches] == [(2, 5, 3), (2, 9, 3)]  # lengths 4, 5 together; 6, 9 together
    b = batches[0]
    np.testing.assert_array_equal(b.mask, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    np.testing.assert_array_equal(mlm.chosen_rows(b.Z, b.rows, xp), np.stack([Zs[1][1], Zs[1][2], Zs[3][1], Zs[3][3]]))
    assert list(b.targets) == [7, 8, 7, 8] and b.first == 4 and np.all(b.Z[0, 4] == 0)


def test_train_asks_for_each_epochs_batches_once(rng):
    W, batch = tiny_weights(rng), tiny_batch(rng, first=2)
    params = {k: W[k] for k in W if k.startswith("mlm.")}
    frozen = {k: v for k, v in W.items() if k not in params}
    calls = []

    def batches(epoch):  # a shuffle drawn per call: asking twice for one epoch would change the run
        calls.append(epoch)
        return [batch, batch]
    _, log = mlm.train(params, frozen, batches, TINY, xp, rng=np.random.default_rng(0), epochs=3, log_every=1,
                       heldout=lambda p: float(mlm.loss_and_grads(p, frozen, batch, TINY, xp)[0]), heldout_every=2)
    assert calls == [0, 1, 2] and [e[0] for e in log] == [1, 2, 3, 4, 5, 6]
    assert [e[2] is not None for e in log] == [True, True, False, True, False, True]  # first, every 2nd, last
