"""Shared fixtures: models are expensive to build (BERT-base random weights take ~1.5 s), so
each is built once per session."""

from __future__ import annotations

import pytest

import bertviz_lite as bv

# a small BERT-base-shaped config (same vocabulary, so text works) for fast invariant tests
SMALL = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256}


@pytest.fixture(scope="session")
def base():
    """BERT-base with seeded random weights."""
    return bv.load("random", seed=0)


@pytest.fixture(scope="session")
def small():
    return bv.load("random", seed=3, config=SMALL)


@pytest.fixture(scope="session")
def small_mlm():
    return bv.load("random", seed=4, config=SMALL, mlm=True)


@pytest.fixture(scope="session")
def minilm():
    return bv.load("minilm")


@pytest.fixture(scope="session")
def base_trace(base):
    return base.trace("I love machine learning")
