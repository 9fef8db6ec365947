"""Batched traces: the same formula lines with a leading batch axis; each example equals its own
trace; the memory budget covers the batch; bad input is refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import backend, engine, kernels, schema

from ..conftest import SMALL
from ..helpers import host

TEXTS = ["The cat sat on the mat.", "I love machine learning", "Hello, world! How are you doing on this fine day?"]
PAIRS = ["It purred.", None, "Very well, thank you."]


def assert_same_trace(a, b):
    """a (from a batch) equals b (traced alone): keys, tokens, and every tensor."""
    assert a.keys() == b.keys()
    assert (a.tokens, a.ids, a.segments, a.mask, a.spans, a.texts) == (b.tokens, b.ids, b.segments, b.mask, b.spans,
                                                                       b.texts)
    for key in b.keys():
        assert a[key].shape == b[key].shape, key
        # rtol: the residual stream reaches ~200, where one float32 ulp is 1.5e-5 (float16 storage: 1e-3)
        tol = 2e-3 if backend.itemsize(a[key]) == 2 else 1e-5
        np.testing.assert_allclose(host(a[key]), host(b[key]), rtol=tol, atol=tol, err_msg=key)
    for layer in range(b.num_layers):
        pa = a.get("attn.probs", layer=layer)
        np.testing.assert_allclose(host(pa), host(b.get("attn.probs", layer=layer)), rtol=0,
                                   atol=1e-3 if backend.itemsize(pa) == 2 else 1e-5)


def test_every_key_gets_a_leading_batch_axis(minilm):
    btr = minilm.trace_batch(TEXTS)
    one = minilm.trace(TEXTS[0])
    assert btr.keys() == one.keys()  # the same formula lines, the same golden key list
    n = max(len(minilm.tokenize(t).ids) for t in TEXTS)
    assert len(btr) == 3 and btr.n == n
    for key in btr.keys():
        assert btr.axes(key) == ("batch",) + one.axes(key)
        assert tuple(btr[key].shape) == (3,) + schema.shape_of(key, minilm.config, n), key
    assert btr.stack("attn.probs").shape == (3, 6, 12, n, n)
    assert btr.stack_axes("attn.probs") == ("batch", "layer", "head", "query", "key")
    assert btr.get("attn.probs", layer=2, head=5).shape == (3, n, n)
    assert btr.n_real == tuple(len(minilm.tokenize(t).ids) for t in TEXTS)
    assert all(m[:r] == (1,) * r and set(m[r:]) <= {0} for m, r in zip(btr.mask, btr.n_real))
    assert "batch" in schema.AXES
    table = btr.shapes()
    assert table.column("key") == btr.keys() and len(table) == len(one.keys())
    assert dict((r[0], r[2]) for r in table)["layer.0.attn.probs"] == "batch x head x query x key"


@pytest.mark.parametrize("pairs, pad_to, fast", [(None, None, True), (PAIRS, 40, True), (None, None, False)])
def test_each_example_equals_its_own_trace(minilm, pairs, pad_to, fast):
    btr = minilm.trace_batch(TEXTS, pairs, pad_to=pad_to, fast=fast)
    if pad_to:
        assert btr.n == pad_to
    for i, text in enumerate(TEXTS):
        assert_same_trace(btr[i], minilm.trace(text, None if pairs is None else pairs[i]))
    assert_same_trace(btr[-1], minilm.trace(TEXTS[-1], None if pairs is None else pairs[-1]))
    assert [tr.tokens for tr in btr] == [btr[i].tokens for i in range(3)]


def test_padded_keys_get_exactly_zero_attention_in_a_batch(small):
    btr = small.trace_batch(["short", "a much longer sentence than the first one"])
    probs = host(btr.stack("attn.probs"))  # [B, L, A, n, n]
    r = btr.n_real[0]
    assert np.all(probs[0, ..., r:] == 0.0)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)


def test_batch_runs_under_array_api_strict(small):
    strict = bv.load("random", seed=3, config=SMALL, backend="array_api_strict")
    a = strict.trace_batch(TEXTS)
    b = small.trace_batch(TEXTS)
    for key in b.keys():
        np.testing.assert_allclose(host(a[key]), host(b[key]), atol=1e-5, err_msg=key)


@pytest.mark.float16
def test_batch_with_keep_and_float16(small):
    kept = small.trace_batch(TEXTS, keep=["attn.probs"], dtype="float16")
    assert kept.keys() == [f"layer.{l}.attn.probs" for l in range(2)]
    assert str(kept["layer.0.attn.probs"].dtype) == "float16"
    assert kept[1].keys() == kept.keys() and kept.nbytes == sum(v.size * 2 for v in kept._values.values())
    with pytest.raises(KeyError, match="keep="):
        kept["layer.0.attn.q"]


def test_pooler_and_mlm_read_each_examples_own_tokens(small_mlm):
    btr = small_mlm.trace_batch(["the [MASK] sat down", "a dog"])
    for i, text in enumerate(["the [MASK] sat down", "a dog"]):
        one = small_mlm.trace(text)
        np.testing.assert_allclose(host(btr["pooler.out"][i, ...]), host(one["pooler.out"]), atol=1e-5)
        np.testing.assert_allclose(host(btr[i]["mlm.logits"]), host(one["mlm.logits"]), atol=1e-4, rtol=1e-5)


def test_shape_agnostic_lines_keep_the_single_input_shapes():
    xp = backend.get_namespace("numpy")
    x = np.arange(2 * 3 * 5 * 8, dtype=np.float32).reshape(2, 3, 5, 8)  # [B, extra, n, H]
    heads = engine.split_heads(x, 4, xp)  # [B, extra, A, n, d]
    assert heads.shape == (2, 3, 4, 5, 2)
    np.testing.assert_array_equal(heads[1, 2], engine.split_heads(x[1, 2], 4, xp))
    np.testing.assert_array_equal(engine.merge_heads(heads, xp), x)
    assert engine.padding_mask([1, 1, 0], xp, np.float32).shape == (1, 1, 3)
    m = engine.padding_mask([[1, 1, 0], [1, 1, 1]], xp, np.float32)
    assert m.shape == (2, 1, 1, 3) and m[0, 0, 0, 2] == -np.inf and m[1].max() == 0
    W = np.random.default_rng(0).standard_normal((8, 3), dtype=np.float32)
    folded = engine.matmul(x, W, xp)  # the fused kernel folds [2, 3, 5] into one [30, 8] product
    with kernels.fast_path(False):
        as_written = engine.matmul(x, W, xp)  # x @ W, one product per leading index
    assert folded.shape == as_written.shape == (2, 3, 5, 3)
    np.testing.assert_allclose(folded, as_written, rtol=1e-6, atol=1e-4)


def test_the_memory_budget_covers_the_whole_batch(base):
    texts = ["a sentence of a few words"] * 8
    one = bv.trace.estimate_trace_bytes(base.config, 8) + bv.trace.estimate_working_bytes(base.config, 8)
    base.trace(texts[0], max_bytes=2 * one)  # one fits
    with pytest.raises(bv.TraceTooLargeError, match=r"batch of 8 traces.*at most 2 texts"):
        base.trace_batch(texts, max_bytes=2 * one)
    with pytest.raises(bv.TraceTooLargeError, match="batch of 64 traces of 512 tokens"):
        base.trace_batch(["x"] * 64, pad_to=512)  # refused before anything runs


@pytest.mark.parametrize("texts, pairs, kw, err, match", [
    ("one string", None, {}, TypeError, "list of texts"),
    ([], None, {}, ValueError, "empty"),
    (["fine", 3], None, {}, TypeError, r"texts\[1\] is a int"),
    (["a", "b"], ["only one"], {}, ValueError, "one text .or None. per text"),
    (["a", "b"], ["x", 7], {}, TypeError, r"pairs\[1\]"),
    (["a rather long input sentence"], None, {"pad_to": 3}, ValueError, "pad_to=3 is shorter"),
    (["a"], None, {"pad_to": 600}, bv.InputTooLongError, "512 positions"),
    (["a"], None, {"pad_to": "8"}, TypeError, "pad_to must be an int"),
    (["a"], None, {"dtype": "int8"}, ValueError, "storage type"),
    (["a"], None, {"keep": ["attn.prbs"]}, bv.PatternError, "did you mean"),
    (["word " * 600], None, {}, bv.InputTooLongError, "truncate=True"),
])
def test_bad_batches_are_refused_clearly(small, texts, pairs, kw, err, match):
    with pytest.raises(err, match=match):
        small.trace_batch(texts, pairs, **kw)


def test_bad_example_index(small):
    btr = small.trace_batch(["a", "b"])
    with pytest.raises(bv.OutOfRangeError, match="0..1"):
        btr[2]
    with pytest.raises(TypeError, match="example number"):
        btr[1.5]


# ---------------------------------------------------------------------------------------------
# one runner: every option works the same for one sentence and many
# ---------------------------------------------------------------------------------------------


def sharpen(a):
    """Each attention row squared and renormalised (an edit written against the array API: any backend)."""
    xp = backend.namespace_of(a)
    return a ** 2 / xp.sum(a ** 2, axis=-1, keepdims=True)


@pytest.mark.parametrize("kw", [
    {"edits": bv.ablate(heads={1: [2]}, how="mean")},
    {"edits": bv.scale("ffn.act", 0.5) | {"layer.0.attn.probs": sharpen}},
    pytest.param({"keep": ["attn.probs", "ffn.ln"], "dtype": "float16", "fast": False}, marks=pytest.mark.float16),
])
def test_a_batch_takes_every_option_and_each_example_equals_its_own_trace(minilm, kw):
    btr = minilm.trace_batch(TEXTS, **kw)
    for i, text in enumerate(TEXTS):
        one = minilm.trace(text, **kw)
        assert btr[i].edits == one.edits
        assert_same_trace(btr[i], one)
    assert btr.edits == one.edits and (bool(btr.edits) == ("edits" in kw))


def test_a_batch_can_be_patched_from_a_trace_of_the_same_length(small):
    texts = ["the cat sat down", "the dog ran off"]
    assert len({len(small.tokenize(t).ids) for t in texts}) == 1
    donor = small.trace(texts[0])
    btr = small.trace_batch(texts, patch_from=donor, patch=["layer.0.ffn.ln"])
    for i, text in enumerate(texts):
        one = small.trace(text, patch_from=donor, patch=["layer.0.ffn.ln"])
        assert_same_trace(btr[i], one)
        np.testing.assert_array_equal(host(btr[i]["layer.0.ffn.ln"]), host(donor["layer.0.ffn.ln"]))


@pytest.mark.parametrize("kw, err, match", [
    ({"dtype": ["float16"]}, TypeError, "dtype must be the string"),
    ({"max_bytes": "1e9"}, TypeError, "max_bytes must be a number"),
    ({"max_bytes": float("nan")}, ValueError, "max_bytes must be >= 0"),
    ({"pad_to": 2.5}, TypeError, "pad_to must be an int"),
])
def test_trace_and_trace_batch_share_one_validator(small, kw, err, match):
    for call in (lambda: small.trace("a", **kw), lambda: small.trace_batch(["a"], **kw)):
        with pytest.raises(err, match=match):
            call()


def test_a_numpy_int_pad_to_works_and_an_over_long_text_is_named_by_its_index(small):
    assert small.trace_batch(["a", "b c"], pad_to=np.int64(9)).n == 9
    assert small.trace("a", pad_to=np.int64(9)).n == 9
    with pytest.raises(bv.InputTooLongError, match=r"texts\[1\]: .*truncate=True"):
        small.trace_batch(["fine", "word " * 600])


def test_the_budget_covers_the_forward_pass_working_memory(base):
    # recording nothing still needs the scores, maps and feed-forward activations of one layer
    work = bv.trace.estimate_working_bytes(base.config, 512)
    assert work >= 4 * (2 * 12 * 512 * 512 + 2 * 512 * 3072)
    with pytest.raises(bv.TraceTooLargeError, match="working memory"):
        base.trace("hello", pad_to=512, keep=[], max_bytes=work // 2)
    with pytest.raises(bv.TraceTooLargeError, match="working memory"):
        base.trace_batch(["hello"] * 4, pad_to=512, keep=[], max_bytes=3 * work)
