"""head_stats on a Dask cluster: an address that accepts and never answers fails in seconds, a killed
worker changes no result.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import corpus

from ..helpers import host


@pytest.fixture
def silent_tcp(silent_port):
    """A scheduler address that accepts every connection and never answers (conftest's silent_port)."""
    port, held = silent_port
    return f"tcp://127.0.0.1:{port}", held


@pytest.mark.slow  # waits for Dask's connect timeout
def test_a_silent_scheduler_address_fails_within_the_connect_timeout(small, silent_tcp, monkeypatch):
    pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    address, held = silent_tcp
    monkeypatch.setattr(corpus, "CONNECT_TIMEOUT", "1s")  # README promises 10 s; the same bound, shorter
    outcome = []

    def run():
        try:
            corpus.head_stats(small, ["fine"], client=address, progress=False)
            outcome.append("returned")
        except Exception as e:  # noqa: BLE001 - the test reads what came back
            outcome.append(e)

    start = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "head_stats still waits on a silent address after 20 s"
    assert time.monotonic() - start < 10
    assert held, "the test server saw no connection: the test did not exercise the handshake"
    err = outcome[0]
    assert isinstance(err, bv.BertVizError), err
    assert address in str(err) and "handshake" in str(err) and "dask scheduler" in str(err)


def _batches_done(client) -> int:
    """How many batch_sums tasks the scheduler holds results of."""
    return client.run_on_scheduler(lambda dask_scheduler: sum(
        1 for key, t in dask_scheduler.tasks.items() if str(key).startswith("batch_sums") and t.state == "memory"))


@pytest.mark.slow
def test_a_killed_dask_worker_changes_no_result(small):
    distributed = pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    from ..test_corpus import SENTENCES
    sentences = SENTENCES[:240]
    local = corpus.head_stats(small, sentences, batch_size=4, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as lc, \
            distributed.Client(lc, set_as_default=False) as client:
        pids = client.run(os.getpid)  # worker address -> its process id
        result = []
        run = threading.Thread(target=lambda: result.append(
            corpus.head_stats(small, sentences, batch_size=4, client=client, progress=False)), daemon=True)
        run.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _batches_done(client) < 2:
            time.sleep(0.05)
        assert _batches_done(client) < 60, "the run ended before a worker could be killed"
        os.kill(next(iter(pids.values())), signal.SIGKILL)  # mid-run: some batches done, others not
        run.join(120)
        assert not run.is_alive() and result, "head_stats did not finish after a worker was killed"
        assert set(client.run(os.getpid).values()) != set(pids.values())  # a worker really was replaced
    remote = result[0]
    assert remote.n_sentences == local.n_sentences
    for name in corpus.STATS:
        np.testing.assert_allclose(remote[name], local[name], rtol=0, atol=1e-6, err_msg=name)
