"""Head statistics over a corpus: each statistic against its definition computed sentence by
sentence, streaming (memory flat in the corpus size), determinism, bad input, the data/ corpus,
and the same run on a two-worker Dask LocalCluster."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import analysis, corpus

from ..helpers import host

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "wordnet_examples.txt"
SENTENCES = CORPUS.read_text(encoding="utf-8").splitlines()
# a slice of the real corpus plus punctuation-heavy and one-word inputs
SAMPLE = SENTENCES[:10] + ["Hello, world! (Yes) -- it's 5 o'clock...", "Stop.", "", "Why?!?"]


def reference_stats(model, sentences) -> dict:
    """Each statistic by its definition, one trace and one float64 map at a time."""
    sums = dict.fromkeys(corpus.STATS, 0.0)
    for s in sentences:
        tr = model.trace(s, keep=["attn.probs"])
        A = host(tr.stack("attn.probs"))  # [L, H, n, n]
        n = A.shape[-1]
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        key_is = {"cls": [t == "[CLS]" for t in tr.tokens], "sep": [t == "[SEP]" for t in tr.tokens],
                  "punct": [analysis.is_punctuation(t) for t in tr.tokens]}
        per_query = {name: (A * np.array(flags, dtype=float)).sum(-1) for name, flags in key_is.items()}
        per_query["self"] = np.diagonal(A, 0, -2, -1)
        per_query["prev"] = np.concatenate([np.zeros(A.shape[:-2] + (1,)), np.diagonal(A, -1, -2, -1)], -1)
        per_query["next"] = np.concatenate([np.diagonal(A, 1, -2, -1), np.zeros(A.shape[:-2] + (1,))], -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_query["entropy"] = -np.where(A > 0, A * np.log(A), 0.0).sum(-1)
        per_query["distance"] = (A * np.abs(i - j)).sum(-1)
        for name in corpus.STATS:
            sums[name] = sums[name] + per_query[name].mean(-1)  # mean over the queries i
    return {name: v / len(sentences) for name, v in sums.items()}


def test_each_statistic_matches_its_definition(minilm):
    r = corpus.head_stats(minilm, SAMPLE, batch_size=7, progress=False)
    ref = reference_stats(minilm, [s for s in SAMPLE if s.strip()])  # a blank line is no sentence
    assert r.n_sentences == len(SAMPLE) - 1 and r.skipped == (SAMPLE.index(""),)
    assert r.keys() == list(corpus.STATS)
    for name in corpus.STATS:
        assert r[name].shape == (6, 12)
        np.testing.assert_allclose(r[name], ref[name], atol=1e-6, err_msg=name)
    # and against the analysis module's one-trace functions
    traces = [minilm.trace(s, keep=["attn.probs"]) for s in SAMPLE[:5]]
    one = corpus.head_stats(minilm, SAMPLE[:5], progress=False)
    np.testing.assert_allclose(one["prev"], np.mean([analysis.attention_to(t, "prev")["prev"] for t in traces], 0),
                               atol=1e-6)
    np.testing.assert_allclose(one["entropy"], np.mean([analysis.head_entropy(t) for t in traces], 0), atol=1e-5)


def test_invariants_and_ranking(minilm):
    r = corpus.head_stats(minilm, SAMPLE, progress=False)
    for name in ("cls", "sep", "punct", "self", "prev", "next"):
        assert np.all((r[name] >= -1e-7) & (r[name] <= 1 + 1e-6)), name
    assert np.all(r["entropy"] >= 0) and np.all(r["distance"] >= 0)
    top = r.top("prev", 5)
    values = [v for _, _, v in top]
    assert values == sorted(values, reverse=True) and values[0] == pytest.approx(float(r["prev"].max()))
    assert r.top("entropy", 1, largest=False)[0][2] == pytest.approx(float(r["entropy"].min()))
    assert len(r.table(k=3)) == 15 and "over 13 sentences, 1 skipped" in repr(r)
    with pytest.raises(KeyError, match="head_stats computes"):
        r["clss"]


def test_deterministic_and_independent_of_batch_size(small, monkeypatch):
    # the same bits twice is a claim for a pinned thread count only: unpinned, the forward gives BLAS the cores
    # a busy machine leaves free (threads.threads_for_load), and two thread counts round apart (1.9e-10 seen)
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    a = corpus.head_stats(small, SENTENCES[:50], batch_size=8, progress=False)
    b = corpus.head_stats(small, SENTENCES[:50], batch_size=8, progress=False)
    c = corpus.head_stats(small, SENTENCES[:50], batch_size=50, progress=False)  # other batches: other products
    for name in corpus.STATS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        np.testing.assert_allclose(a[name], c[name], atol=1e-6, err_msg=name)


def test_a_batch_over_the_budget_is_traced_in_pieces(small):
    whole = corpus.batch_sums(small, SAMPLE)
    one_trace = bv.trace.estimate_trace_bytes(small.config, 40, keep=["attn.probs"]) + \
        bv.trace.estimate_working_bytes(small.config, 40) + corpus._stats_bytes(small.config, 40)
    pieces = corpus.batch_sums(small, SAMPLE, max_bytes=3 * one_trace)  # three sentences at a time
    assert pieces.n_sentences == whole.n_sentences
    for name in corpus.STATS:
        np.testing.assert_allclose(pieces.sums[name], whole.sums[name], atol=1e-6)


def test_any_batch_size_is_cut_into_pieces_the_budget_allows(small, monkeypatch):
    """batch_size=10**9 is one batch; it is traced in pieces, each padded to its own longest input,
    whose attention maps, working memory and statistics fit the budget (they once reached 6.7 GB)."""
    ref = corpus.head_stats(small, SENTENCES[:60], batch_size=8, progress=False)
    seen = []
    real = corpus.trace_encodings

    def spy(model, encs, texts, **kw):
        seen.append((len(encs), len(encs[0].ids)))
        return real(model, encs, texts, **kw)

    monkeypatch.setattr(corpus, "trace_encodings", spy)
    budget = 4 * 2**20
    r = corpus.head_stats(small, SENTENCES[:60], batch_size=10**9, progress=False, max_bytes=budget)
    c = small.config
    assert len(seen) > 1 and sum(b for b, _ in seen) == 60
    for b, n in seen:
        per_input = bv.trace.estimate_trace_bytes(c, n, keep=["attn.probs"]) + bv.trace.estimate_working_bytes(c, n)
        assert b * per_input <= budget
    for name in corpus.STATS:
        np.testing.assert_allclose(r[name], ref[name], atol=1e-6)


@pytest.mark.cpu_path("host memory: on a GPU the traces live in device memory, which tracemalloc does not "
                     "see (test_device_memory_is_flat_in_the_corpus_size)")
def test_memory_is_flat_in_the_corpus_size(small):
    """Peak memory with 4x the sentences (same lengths) stays within 10%: one batch at a time."""
    def peak(sentences):
        tracemalloc.start()
        corpus.head_stats(small, sentences, batch_size=4, progress=False)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top

    few, many = SENTENCES[:16], SENTENCES[:16] * 4
    peak(few)  # warm up caches
    assert peak(many) < 1.10 * peak(few)


@pytest.mark.gpu
@pytest.mark.skipif(not bv.backend.cupy_available(), reason="needs cupy and a CUDA GPU (cupy.is_available() is False)")
def test_device_memory_is_flat_in_the_corpus_size():
    """On a GPU: the memory pool (which keeps what it freed, so what it holds is the peak) grows under 10% with
    4x the sentences. Not run where no GPU is: unverified until a GPU run."""
    import cupy
    gpu = bv.load("random", seed=3, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256},
                  backend="cupy")
    pool = cupy.get_default_memory_pool()

    def held(sentences):
        pool.free_all_blocks()
        corpus.head_stats(gpu, sentences, batch_size=4, progress=False)
        return pool.total_bytes()

    few, many = SENTENCES[:16], SENTENCES[:16] * 4
    held(few)
    assert held(many) < 1.10 * held(few)


def test_too_long_sentences_are_skipped_and_counted_or_refused(small):
    long = "word " * 600
    r = corpus.head_stats(small, ["short one", long, "another short one"], progress=False)
    assert r.n_sentences == 2 and r.skipped == (1,) and "1 skipped" in repr(r)
    np.testing.assert_allclose(r["cls"], corpus.head_stats(small, ["short one", "another short one"],
                                                           progress=False)["cls"], atol=1e-7)
    with pytest.raises(bv.InputTooLongError, match="sentence 1 of the corpus"):
        corpus.head_stats(small, ["short one", long], too_long="error", progress=False)
    with pytest.raises(bv.BertVizError, match="every sentence"):
        corpus.head_stats(small, [long], progress=False)


@pytest.mark.parametrize("sentences, kw, err, match", [
    ([], {}, ValueError, "corpus is empty"),
    (iter([]), {}, ValueError, "corpus is empty"),
    ("one string", {}, TypeError, "not one string"),
    (["fine", None], {}, TypeError, "sentence 1 is a NoneType"),
    (42, {}, TypeError, "list of strings"),
    (["fine"], {"batch_size": 0}, ValueError, "batch_size"),
    (["fine"], {"too_long": "truncate"}, ValueError, "too_long"),
    pytest.param(["fine"], {"client": "tcp://127.0.0.1:9"}, bv.BertVizError, "could not reach a Dask scheduler",
                 marks=[pytest.mark.slow,  # waits for Dask's connect timeout
                        pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                           reason="needs dask.distributed (without it head_stats says 'client= needs "
                                                  "Dask')")],
                 id="unreachable-scheduler"),
])
def test_bad_input_is_refused_before_anything_runs(small, monkeypatch, sentences, kw, err, match):
    monkeypatch.setattr(corpus, "CONNECT_TIMEOUT", "1s")
    with pytest.raises(err, match=match):
        corpus.head_stats(small, sentences, progress=False, **kw)


def test_progress_bar_only_when_asked(small, capsys):
    corpus.head_stats(small, SENTENCES[:8], progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # a fresh interpreter imports the package
def test_importing_the_engine_loads_neither_dask_nor_tqdm():
    code = textwrap.dedent("""
        import sys
        import bertviz_lite as bv
        print(sorted({k.split(".")[0] for k in sys.modules} & {"dask", "distributed", "tqdm"}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# the data/ corpus
# ---------------------------------------------------------------------------------------------


def test_the_corpus_is_real_sentences_one_per_line():
    assert len(SENTENCES) >= 2000
    assert len(set(SENTENCES)) == len(SENTENCES)
    assert all(s and s == s.strip() and "\t" not in s for s in SENTENCES)
    assert all(s[0].isupper() and len(s.split()) >= 5 for s in SENTENCES)
    assert (ROOT / "data" / "LICENSE.WordNet-3.0.txt").read_text().count("Princeton University") >= 3
    readme = (ROOT / "data" / "README.md").read_text()
    assert "wordnet_examples.txt" in readme and "wordnet-base" in readme and "data/lessons/" in readme


# (the corpus is made by training/make_corpus.py; its regeneration test is tests/training/test_corpus_files.py)


# ---------------------------------------------------------------------------------------------
# on a Dask cluster (two worker processes on 127.0.0.1)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as lc:
        yield lc


@pytest.mark.slow  # the cluster fixture starts two worker processes
def test_dask_run_equals_the_local_run(small, cluster):
    from distributed import Client
    sentences = SENTENCES[:60] + SAMPLE
    local = corpus.head_stats(small, sentences, batch_size=8, progress=False)
    with Client(cluster, set_as_default=False) as client:
        client.get_task_stream(start=time.time())  # starts the scheduler's task-stream recording
        start = time.time()
        remote = corpus.head_stats(small, sentences, batch_size=8, client=client, progress=False)
        assert client.status == "running"  # a client we were given stays open
        stream = client.get_task_stream(start=start)
    # the batches ran on both workers, and the partial sums were added there
    ran = {}
    for t in stream:
        ran.setdefault(str(t["key"]).split("-")[0], set()).add(t["worker"])
    assert len(ran.get("batch_sums", ())) == 2 and "add" in ran, ran
    assert remote.n_sentences == local.n_sentences
    for name in corpus.STATS:
        np.testing.assert_allclose(remote[name], local[name], rtol=0, atol=1e-6, err_msg=name)
    # a scheduler address instead of a client: we connect, run, and close our own client
    by_address = corpus.head_stats(small, sentences[:20], batch_size=8, client=cluster.scheduler_address,
                                   progress=False)
    np.testing.assert_allclose(by_address["sep"], corpus.head_stats(small, sentences[:20], batch_size=8,
                                                                    progress=False)["sep"], atol=1e-6)


@pytest.mark.slow  # the cluster fixture starts two worker processes
def test_dask_errors_are_clear(small, cluster):
    from distributed import Client
    with Client(cluster, set_as_default=False) as client:
        with pytest.raises(bv.InputTooLongError, match="sentence 1 of the corpus"):
            corpus.head_stats(small, ["fine", "word " * 600], client=client, too_long="error", progress=False)
    # the client is closed now: refused before anything is sent
    with pytest.raises(bv.BertVizError, match="client is closed"):
        corpus.head_stats(small, ["fine"], client=client, progress=False)
    with pytest.raises(TypeError, match="dask.distributed.Client or a scheduler address"):
        corpus.head_stats(small, ["fine"], client=object(), progress=False)


@pytest.mark.slow  # starts a Dask cluster
def test_a_cluster_without_workers_is_an_error_not_a_hang(small, monkeypatch):
    distributed = pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    monkeypatch.setattr(corpus, "NO_WORKERS_TIMEOUT", 1.0)
    monkeypatch.setattr(corpus, "POLL_SECONDS", 0.5)
    with distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0") as empty, \
            distributed.Client(empty, set_as_default=False) as client:
        t = time.monotonic()
        with pytest.raises(bv.BertVizError, match="no workers"):
            corpus.head_stats(small, ["fine"], client=client, progress=False)
        assert time.monotonic() - t < 30
