"""Options of the wrong type are refused by name, and so are variant / trace_ids inputs that do
not fit."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import corpus
from bertviz_lite.backend import to_host


@pytest.mark.parametrize("fast", ["no", None, 0, 1.0])
def test_fast_must_be_a_bool(small, fast):
    with pytest.raises(TypeError, match="fast must be True or False"):
        small.trace("the cat", fast=fast)


def test_fast_takes_numpys_bool_too(small):
    assert small.trace("the cat", fast=np.bool_(False)).keys()


def test_head_stats_takes_numpy_integers_and_refuses_odd_progress(small):
    r = corpus.head_stats(small, ["the cat sat.", "a dog ran."], batch_size=np.int64(2), progress=False)
    assert r.n_sentences == 2
    for bad in ("no", None, 1):
        with pytest.raises(TypeError, match="progress must be True or False"):
            corpus.head_stats(small, ["the cat sat."], progress=bad)
    with pytest.raises(TypeError, match="batch_size"):
        corpus.head_stats(small, ["the cat sat."], batch_size=2.0)


def test_variant_refuses_non_finite_weights(small):
    W = to_host(small.weights["pooler.b"]).copy()
    W[3] = np.nan
    with pytest.raises(ValueError, match="finite.*pooler.b holds 1 NaN"):
        small.variant(weights={"pooler.b": W})


def test_trace_ids_tokens_and_spans_must_match_the_ids(small):
    ids = small.tokenize("the cat").ids
    with pytest.raises(ValueError, match="tokens= has 1 entries for 4 ids"):
        small.trace_ids(ids, tokens=["x"])
    with pytest.raises(ValueError, match="spans="):
        small.trace_ids(ids, spans=[None])
    assert small.trace_ids(ids, tokens=["a", "b", "c", "d"]).tokens == ("a", "b", "c", "d")


@pytest.mark.parametrize("progress", ["no", None, 0])
def test_head_importance_progress_must_be_a_bool(small, progress):
    with pytest.raises(TypeError, match="progress must be True or False"):
        bv.analysis.head_importance(small, [("the cat sat", "a cat sat")], progress=progress)
