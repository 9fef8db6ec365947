"""Shared fixtures: models are expensive to build (BERT-base random weights take ~1.5 s), so
each is built once per session."""

from __future__ import annotations

import socket
import threading

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


@pytest.fixture
def silent_port():
    """A 127.0.0.1 port that accepts every connection and never writes a byte, stopped after the test:
    yields (port, the connections it holds)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    held, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], held
    stop.set()
    t.join(2)
    for conn in held:
        conn.close()
    srv.close()
