"""What is bit-stable, as docs/benchmarks.md ("What is bit-stable") and head_stats' docstring promise, and a
worker lost while the model is sent to the cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import corpus
from bertviz_lite.backend import to_host

CORPUS = Path(__file__).resolve().parents[2] / "data" / "wordnet_examples.txt"
SENTENCES = CORPUS.read_text(encoding="utf-8").splitlines()[:50]


def test_the_same_trace_twice_gives_the_same_bits(small, monkeypatch):
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")  # the thread count fixed: the policy changes nothing
    a = small.trace_batch(SENTENCES[:6])
    b = small.trace_batch(SENTENCES[:6])
    assert all(np.array_equal(to_host(a[k]), to_host(b[k])) for k in a.keys())


def test_blas_threads_change_bits_only_by_rounding(small, monkeypatch):
    # what is not bit-stable: a matrix product's rounding may depend on BLAS's thread count, which the
    # busy-machine policy lowers; the traces agree to float32 rounding
    from threadpoolctl import threadpool_limits
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    two = small.trace("the cat sat on the mat because it was warm")
    with threadpool_limits(1, user_api="blas"):
        one = small.trace("the cat sat on the mat because it was warm")
    for k in two.keys():
        np.testing.assert_allclose(to_host(one[k]), to_host(two[k]), rtol=1e-5, atol=1e-5, err_msg=k)


def test_head_stats_adds_the_batches_in_the_clusters_order(small, monkeypatch):
    # the local run adds the partial sums in pairwise_sum's tree, as the cluster does (it added them one
    # after another before, 4.4e-15 from the cluster's result while the docstring promised the same).
    # A fixed thread count: bits are promised when BLAS runs the same threads (docs/benchmarks.md, "What is bit-stable");
    # on a busy machine the thread policy would change them between the two runs
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    groups = corpus.batches(SENTENCES, 8)
    assert len(groups) >= 5  # an odd level on the way
    parts = [corpus.batch_sums(small, [SENTENCES[i] for i in idx], idx) for idx in groups]
    expected = corpus.HeadStats.from_sums(corpus.pairwise_sum(parts), small.name)
    got = corpus.head_stats(small, SENTENCES, batch_size=8, progress=False)
    for name in corpus.STATS:
        assert np.array_equal(got[name], expected[name]), name


def test_pairwise_sum_is_the_documented_tree():
    assert corpus.pairwise_sum(["a", "b", "c", "d", "e"], lambda *p: "(" + "+".join(p) + ")") == \
        "(((a+b)+(c+d))+((e)))"


class FlakyClient:
    """Stands in for a dask Client whose first scatter loses a worker mid-send."""

    status = "running"

    def __init__(self, failures: int):
        self.failures, self.scatters, self.waits = failures, 0, 0

    def scatter(self, data, broadcast, hash):
        self.scatters += 1
        if self.scatters <= self.failures:
            raise OSError("Stream is closed: the worker died while receiving")  # CommClosedError is an OSError
        return ("remote", data)

    def wait_for_workers(self, n, timeout):
        self.waits += 1


def test_a_worker_lost_while_the_model_is_sent_is_survived():
    # a worker killed while the model was scattered once failed the whole run
    client = FlakyClient(failures=1)
    assert corpus._scatter_model(client, "model") == ("remote", "model")
    assert client.scatters == 2 and client.waits == 1
    client = FlakyClient(failures=corpus.SCATTER_TRIES)  # the cluster keeps failing: the error comes through
    with pytest.raises(OSError):
        corpus._scatter_model(client, "model")
    assert client.scatters == corpus.SCATTER_TRIES


DASK_SAME_BITS = """
import os, sys
import numpy as np
from threadpoolctl import threadpool_limits
import bertviz_lite as bv
from bertviz_lite import corpus
from distributed import Client, LocalCluster

def main():
    model = bv.load("random", seed=3, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256})
    sentences = open(sys.argv[1], encoding="utf-8").read().splitlines()[:50]
    with threadpool_limits(1, user_api="blas"):
        local = corpus.head_stats(model, sentences, batch_size=8, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as lc, Client(lc) as client:
        remote = corpus.head_stats(model, sentences, batch_size=8, client=client, progress=False)
    print(all(np.array_equal(local[k], remote[k]) for k in corpus.STATS))

if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_head_stats_on_dask_equals_local_bit_for_bit_on_the_same_threads(tmp_path):
    # the promise of head_stats' docstring: one BLAS thread here and on the workers, the same bits
    pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    script = tmp_path / "same_bits.py"
    script.write_text(DASK_SAME_BITS)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "BERTVIZ_LITE_THREADS": "1"}
    out = subprocess.run([sys.executable, str(script), str(CORPUS)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"
