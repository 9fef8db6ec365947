"""One Trace type with a batch axis (STYLE 23): what model.trace_batch returns is a Trace that knows it has
one, tr[i] is one input without its padding, trace_batch shows a progress bar over its layers,
padding is written once (tokenizer.pad_encoding), and head_importance runs one batched, edited pass per head."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import analysis, batch
from bertviz_lite.errors import OutOfRangeError
from bertviz_lite.tokenizer import pad_encoding

from ..helpers import host

TEXTS = ["The cat sat.", "I love machine learning very much", "Paris is in France."]


@pytest.fixture(scope="module")
def btr(small):
    return small.trace_batch(TEXTS)


def test_a_batch_is_a_trace_with_a_batch_axis(small, btr):
    one = small.trace(TEXTS[0])
    assert isinstance(btr, bv.Trace) and btr.has_batch and not one.has_batch
    assert isinstance(btr, bv.BatchTrace)  # the old name still answers isinstance
    B, n = len(TEXTS), btr.n
    assert len(btr) == B and btr.n_real == tuple(len(small.tokenize(t).ids) for t in TEXTS) and max(btr.n_real) == n
    key = "layer.1.attn.probs"
    assert btr.axes(key) == ("batch",) + one.axes(key) and btr[key].shape == (B, 4, n, n)
    assert btr.get("attn.probs", layer=-1, head=2).shape == (B, n, n)
    assert btr.stack("attn.probs").shape == (B, 2, 4, n, n)
    assert btr.stack_axes("attn.probs") == ("batch",) + one.stack_axes("attn.probs")
    assert btr.shapes().title.startswith(f"batch of {B} inputs x {n} tokens")
    assert "batch x head x query x key" in btr.shapes().column("axes")
    assert repr(btr).startswith(f"<Trace {small.name}: batch of {B} inputs")


def test_one_input_is_a_trace_without_its_padding(small, btr):
    for i, text in enumerate(TEXTS):
        alone = small.trace(text)
        for got in (btr[i], btr.example(i), list(btr)[i], btr[i - len(TEXTS)]):
            assert not got.has_batch and got.tokens == alone.tokens and got.mask == alone.mask
            for key in ("layer.1.attn.probs", "layer.1.ffn.ln", "pooler.out"):
                np.testing.assert_allclose(host(got[key]), host(alone[key]), atol=1e-5, err_msg=key)
    padded = btr.example(0, keep_padding=True)
    assert padded.n == btr.n and padded.n_real == btr.n_real[0]
    with pytest.raises(OutOfRangeError, match="3 inputs"):
        btr[3]
    with pytest.raises(TypeError, match="no batch axis"):
        small.trace(TEXTS[0]).example(0)
    with pytest.raises(TypeError, match="batch axis of 3 inputs"):
        btr.real_positions


def test_a_long_batch_shows_a_bar_over_its_layers(small, monkeypatch):
    """trace_batch of hundreds of sentences: one forward, a bar that advances once per layer."""
    steps = []

    class Bar:
        def __init__(self, total, enabled, desc, unit="layer"):
            steps.append(("open", total, enabled, desc))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            steps.append(("close",))

        def update(self, k):
            steps.append(("step", k))

    monkeypatch.setattr(batch, "progress_bar", Bar)
    texts = [f"sentence {i} is{' very' * (i % 5)} short" for i in range(7)]
    small.trace_batch(texts, keep=["layer.1.ffn.ln"])
    assert steps == []  # a few sentences: no bar
    monkeypatch.setattr(batch, "PROGRESS_FROM", 7)
    shown = small.trace_batch(texts, keep=["layer.1.ffn.ln"])
    L = small.config.num_layers
    assert steps == [("open", L, True, "trace_batch (7 inputs)")] + [("step", 1)] * L + [("close",)]
    steps.clear()
    quiet = small.trace_batch(texts, keep=["layer.1.ffn.ln"], progress=False)
    small.trace(texts[0])
    assert steps == []  # progress=False, and a single trace: no bar at all
    np.testing.assert_array_equal(host(shown["layer.1.ffn.ln"]), host(quiet["layer.1.ffn.ln"]))


def test_the_bar_is_quiet_with_progress_false_and_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not batch.progress_bar(500, True, "x").disable
    assert batch.progress_bar(500, False, "x").disable
    monkeypatch.setenv("CI", "true")
    assert batch.progress_bar(500, True, "x").disable


def test_padding_is_written_once(small):
    enc = small.tokenize("The cat sat.")
    padded = small.tokenize("The cat sat.", pad_to=9)
    assert pad_encoding(enc, 9, small.config.pad_token_id, "[PAD]") == padded
    assert batch.pad_encoding is pad_encoding
    assert padded.tokens[enc.n_real:] == ["[PAD]"] * (9 - enc.n_real) and padded.mask == [1] * enc.n_real + [0] * 3
    with pytest.raises(ValueError, match="shorter than the input's 6 tokens"):
        pad_encoding(enc, 4, 0)
    with pytest.raises(bv.InputTooLongError, match="more than the model's 12 positions"):
        pad_encoding(enc, 13, 0, max_length=12)


def test_head_importance_is_one_batched_edited_run_per_head(small, monkeypatch):
    pairs = [("a cat sat", "a dog sat on the mat"), ("rain falls", "the sun shines")]
    runs = []
    real = small.trace_batch.__func__

    def counted(self, texts, *a, **kw):
        runs.append((len(texts), kw.get("edits") is not None))
        return real(self, texts, *a, **kw)

    monkeypatch.setattr(type(small), "trace_batch", counted)
    monkeypatch.setattr(type(small), "trace", lambda *a, **kw: pytest.fail("head_importance traced one input"))
    imp = analysis.head_importance(small, pairs, progress=False)
    monkeypatch.undo()
    L, n_h = small.config.num_layers, small.config.num_heads
    assert runs == [(4, False)] + [(4, True)] * (L * n_h)
    want = [[np.mean([abs(analysis.pair_similarity(small, a, b, edits=bv.ablate(heads={ly: [h]}))
                           - analysis.pair_similarity(small, a, b)) for a, b in pairs]) for h in range(n_h)]
            for ly in range(L)]
    np.testing.assert_allclose(imp, want, atol=1e-6)
    embeddings = analysis.sentence_embeddings(small.trace_batch(["a cat sat", "rain"]))
    np.testing.assert_allclose(embeddings[1], analysis.sentence_embedding(small.trace("rain")), atol=1e-5)
