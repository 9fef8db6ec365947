"""The fast path's kernels: the rational erf and GELU within their bound, kernels split over threads
give the same bits, and each kernel computes its array API formula line.
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.special

from bertviz_lite import backend, engine


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


@pytest.mark.parametrize("lead", [(), (3,)])
def test_q_k_v_from_one_product_are_the_three_formula_lines_to_float32_rounding(lead):
    # kernels.numpy_qkv (one product with [W^Q | W^K | W^V]) against engine.queries_keys_values' three lines,
    # run through array_api_strict; a batch axis (lead) too. Each output is a sum of H products: the bound is
    # float32's rounding of that sum, H eps (|Z| |W| + |b|) (the two paths may add in another order).
    from bertviz_lite import kernels
    H, n_h, n = 48, 4, 9
    rng = np.random.default_rng(11)
    weights = {f"layer.0.{k}": rng.standard_normal((H, H) if ".W_" in k else H).astype(np.float32)
               for k in kernels.QKV_WEIGHTS}
    packed = kernels.pack_qkv(weights, "layer.0.")
    weights.update(zip((f"layer.0.{k}" for k in kernels.QKV_WEIGHTS), packed.views))
    W = engine.LayerWeights(weights, 0, packed)
    Z = rng.standard_normal((*lead, n, H)).astype(np.float32)
    fast = kernels.numpy_qkv(Z, W, n_h)
    assert fast is not None and np.shares_memory(packed.W, W["attn.W_Q"])
    strict = backend.get_namespace("array_api_strict")
    formula = engine.queries_keys_values.formula(strict.asarray(Z), {k: strict.asarray(v) for k, v in W.items()},
                                                 n_h, strict)
    eps = np.finfo(np.float32).eps
    for name, f, s in zip("QKV", fast, formula):
        assert f.shape == (*lead, n_h, n, H // n_h) and f.dtype == np.float32, name
        w, b = W[f"attn.W_{name}"], W[f"attn.b_{name}"]
        bound = engine.split_heads(np.abs(Z) @ np.abs(w) + np.abs(b), n_h, np) * H * eps
        assert np.all(np.abs(f - backend.to_host(s)) <= bound), name
    # a weight replaced by another array (not the packed view any more): the kernel declines, the lines run
    weights["layer.0.attn.W_K"] = np.array(weights["layer.0.attn.W_K"])
    assert kernels.numpy_qkv(Z, W, n_h) is None


@pytest.mark.cpu_path("numpy's views (.base): the one product is numpy's fast path")
def test_keeping_q_alone_holds_no_k_or_v(small):
    # Q, K, V are views of one [n, 3H] product on the fast path: a trace keeping attn.q alone stores its own
    # copy, so it holds what the budget counts for the key, not the buffer three times its size
    tr = small.trace("the cat sat on the mat", keep=["layer.0.attn.q"])
    q = tr["layer.0.attn.q"]
    assert q.base is None or q.base.nbytes == q.nbytes
    every = small.trace("the cat sat on the mat")
    assert every["layer.0.attn.q"].base.nbytes == 3 * q.nbytes  # every key kept: the views, no copies
    np.testing.assert_array_equal(q, every["layer.0.attn.q"])
