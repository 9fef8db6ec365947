"""bertviz_lite.analysis against direct NumPy computations on the same trace."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bertviz_lite import analysis as A
from bertviz_lite.backend import to_host

from ..helpers import host


@pytest.fixture(scope="module")
def tr(small):
    return small.trace("The cat sat on the mat, and it purred.", pad_to=16)


def real_maps(tr, layer):
    real = [i for i, m in enumerate(tr.mask) if m]
    p = host(tr.get("attn.probs", layer=layer))
    return p[:, real][:, :, real]


def test_head_entropy_is_mean_row_entropy(tr):
    h = A.head_entropy(tr)
    assert h.shape == (tr.num_layers, tr.config.num_heads)
    for layer in range(tr.num_layers):
        p = real_maps(tr, layer)
        expected = (-(p * np.log(np.where(p > 0, p, 1))).sum(-1)).mean(-1)
        np.testing.assert_allclose(h[layer], expected, rtol=1e-10)
    hn = A.head_entropy(tr, normalize=True)
    np.testing.assert_allclose(hn, h / math.log(tr.n_real))
    assert (hn > 0).all() and (hn <= 1 + 1e-12).all()


def test_max_weight(tr):
    m = A.max_weight(tr)
    np.testing.assert_allclose(m[1], real_maps(tr, 1).max(-1).mean(-1), rtol=1e-10)
    assert (m >= 1 / tr.n_real - 1e-12).all() and (m <= 1).all()


def test_attention_to_targets(tr):
    shares = A.attention_to(tr)
    p = real_maps(tr, 0)
    real_tokens = [t for t, m in zip(tr.tokens, tr.mask) if m]
    np.testing.assert_allclose(shares["[CLS]"][0], p[:, :, 0].mean(-1), rtol=1e-10)
    np.testing.assert_allclose(shares["[SEP]"][0], p[:, :, -1].mean(-1), rtol=1e-10)
    np.testing.assert_allclose(shares["self"][0], np.einsum("hqq->hq", p).mean(-1), rtol=1e-10)
    n = p.shape[-1]
    prev = np.array([[p[h, q, q - 1] if q > 0 else 0 for q in range(n)] for h in range(p.shape[0])])
    np.testing.assert_allclose(shares["prev"][0], prev.mean(-1), rtol=1e-10)
    punct = [i for i, t in enumerate(real_tokens) if t in {",", "."}]
    assert len(punct) == 2
    np.testing.assert_allclose(shares["punct"][0], p[:, :, punct].sum(-1).mean(-1), rtol=1e-10)
    per_q = A.attention_to(tr, "[CLS]", per_query=True)["[CLS]"]
    assert per_q.shape == (tr.num_layers, tr.config.num_heads, tr.n_real)
    with pytest.raises(ValueError, match="unknown target 'nouns'"):
        A.attention_to(tr, "nouns")


def test_punctuation_matches_the_tokenizer():
    assert A.is_punctuation(",") and A.is_punctuation("##!") and A.is_punctuation("$")
    assert not A.is_punctuation("cat") and not A.is_punctuation("##") and not A.is_punctuation("a.")


def test_representation_and_token_similarity(tr):
    z = np.stack([host(tr["embed.ln"])] +
                 [host(tr.get("ffn.ln", layer=layer)) for layer in range(tr.num_layers)])
    z = z[:, :tr.n_real]
    cos = lambda a, b: (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)  # noqa: E731
    s = A.representation_similarity(tr, "input")
    np.testing.assert_allclose(s, cos(z, z[:1]), rtol=1e-10)
    np.testing.assert_allclose(s[0], 1)
    prev = A.representation_similarity(tr, "previous")
    np.testing.assert_allclose(prev[2], cos(z[2], z[1]), rtol=1e-10)
    t = A.token_similarity(tr, layer=1)
    unit = z[2] / np.linalg.norm(z[2], axis=-1, keepdims=True)
    np.testing.assert_allclose(t, unit @ unit.T, rtol=1e-10, atol=1e-12)
    mean = A.mean_token_similarity(tr)
    n = tr.n_real
    np.testing.assert_allclose(mean[2], (t.sum() - np.trace(t)) / (n * (n - 1)), rtol=1e-10)
    with pytest.raises(ValueError, match="against must be"):
        A.representation_similarity(tr, "first")


def test_layer_norm_stats(tr):
    st = A.layer_norm_stats(tr, "layer.1.attn.ln")
    x = host(tr.get("attn.resid", layer=1))[:tr.n_real]
    np.testing.assert_allclose(st["input_mean"], x.mean(-1), rtol=1e-10)
    np.testing.assert_allclose(st["input_std"], x.std(-1), rtol=1e-10)
    # random init: gain 1, bias 0, so the output is standardised
    np.testing.assert_allclose(st["output_mean"], 0, atol=1e-6)
    np.testing.assert_allclose(st["output_std"], 1, atol=1e-4)
    with pytest.raises(ValueError, match="not a layernorm step"):
        A.layer_norm_stats(tr, "layer.1.ffn.up")


def test_max_abs_difference(small, tr):
    assert A.max_abs_difference(tr, tr, "layer.1.ffn.ln") == 0.0
    unpadded = small.trace("The cat sat on the mat, and it purred.")
    assert A.max_abs_difference(tr, unpadded, "layer.1.attn.probs") < 1e-5
    relu = small.variant(hidden_act="relu").trace("The cat sat on the mat, and it purred.", pad_to=16)
    d = A.max_abs_difference(tr, relu, "layer.1.ffn.act")
    ours = to_host(tr.get("ffn.act", layer=1))[:tr.n_real]
    theirs = to_host(relu.get("ffn.act", layer=1))[:tr.n_real]
    assert d == pytest.approx(float(np.abs(ours.astype(np.float64) - theirs).max()))
    assert d > 0


def test_weighted_value_norms(small):
    tr = small.trace("The cat sat on the mat.", pad_to=12)
    n = tr.n_real
    real = [i for i, m in enumerate(tr.mask) if m]
    got = A.weighted_value_norms(tr, 1, 2)
    assert got.shape == (n, n)
    probs = host(tr.get("attn.probs", layer=1, head=2))[np.ix_(real, real)]
    v = host(tr.get("attn.v", layer=1, head=2))[real]
    i, j = 2, 4  # one cell from the definition: the norm of the weighted value vector
    assert np.isclose(got[i, j], np.linalg.norm(probs[i, j] * v[j]))
    np.testing.assert_allclose(got, probs * np.linalg.norm(v, axis=-1)[None, :], rtol=1e-6)
    W_O = host(small.weights["layer.1.attn.W_O"])
    d = v.shape[-1]
    through = A.weighted_value_norms(tr, 1, 2, W_O=W_O)
    np.testing.assert_allclose(through[i, j], np.linalg.norm(probs[i, j] * v[j] @ W_O[2 * d:3 * d]), rtol=1e-6)
    assert not np.allclose(through, got)
    with pytest.raises((ValueError, IndexError)):
        A.weighted_value_norms(tr, 99, 0)
