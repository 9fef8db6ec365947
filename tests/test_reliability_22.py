"""Reliability round 3 (issue 22): exports never replace what is not theirs, pages follow the
umask, a Dask address that accepts and never answers fails in seconds, blank corpus lines are
skipped, `$` in PNG titles is text, malformed or linked files give one clear error, the CLI on
a terminal that is not UTF-8, clear errors from variant / count_params / a .bin holding a list,
and the guarantees that already held (no injected script runs, no pickle is unpickled, an
interrupted export keeps the old page, threads give bit-identical traces, a killed Dask worker
changes no result).

Device nodes, FIFOs, sockets and symlinks are made inside tmp_path, never in the real /dev
(CI runs as root: a mistake there would replace a system file).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import cli, corpus
from bertviz_lite.errors import NotARegularFileError
from bertviz_lite.views import export, export_html, save_png

from .test_reliability import write_folder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tr(small):
    return small.trace("Pages are written whole or not at all.")


# ---------------------------------------------------------------------------------------------
# 1. export_html / --html replace only a regular file (or write through a symlink to one)
# ---------------------------------------------------------------------------------------------


def make_target(tmp_path: Path, kind: str) -> Path:
    """Something that is not a regular file, made in tmp_path (never the real /dev)."""
    if kind in ("device", "link-to-device"):
        node = tmp_path / "null"
        try:  # a private character device with /dev/null's numbers (1, 3)
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root (CI runs as root)")
    elif kind in ("fifo", "link-to-fifo"):
        node = tmp_path / "pipe"
        os.mkfifo(node)
    elif kind == "socket":
        node = tmp_path / "sock"
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(node))
        except OSError as e:  # a path over the 107 bytes AF_UNIX allows
            pytest.skip(f"cannot bind a unix socket in tmp_path ({e})")
        finally:
            s.close()
    elif kind == "dangling-link":
        node = tmp_path / "nothing-here"
    if kind.startswith(("link", "dangling")):
        link = tmp_path / "page.html"
        link.symlink_to(node)
        return link
    return node


NOT_FILES = ["device", "fifo", "socket", "link-to-device", "link-to-fifo", "dangling-link"]


def _snapshot(tmp_path: Path) -> dict:
    return {p.name: (os.lstat(p).st_mode, os.lstat(p).st_ino, os.lstat(p).st_rdev) for p in tmp_path.iterdir()}


@pytest.mark.parametrize("writer", ["export_html", "save_png"])
@pytest.mark.parametrize("kind", NOT_FILES)
def test_writers_refuse_what_is_not_a_regular_file_before_any_work(tr, tmp_path, monkeypatch, kind, writer):
    # a page or a PNG written into a FIFO nobody reads would block for ever: both are refused before work
    from bertviz_lite.views import static
    module, stage, write = {"export_html": (export, "build_payloads", export_html),
                            "save_png": (static, "to_png", static.save_png)}[writer]
    target = make_target(tmp_path, kind)
    before = _snapshot(tmp_path)
    monkeypatch.setattr(module, stage, lambda *a, **k: pytest.fail(f"{writer} started its work"))
    with pytest.raises(NotARegularFileError) as e:
        write(tr, target)
    assert str(target) in str(e.value) and writer in str(e.value) and len(str(e.value)) < 300
    assert isinstance(e.value, bv.BertVizError) and isinstance(e.value, OSError)
    assert _snapshot(tmp_path) == before  # nothing replaced, nothing left behind


def test_export_refuses_a_folder_and_a_link_to_one(tr, tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    for target in (tmp_path / "folder", tmp_path / "link"):
        with pytest.raises(IsADirectoryError, match="is a folder"):
            export_html(tr, target)
    assert list((tmp_path / "folder").iterdir()) == []


def test_export_writes_through_a_symlink_and_keeps_the_mode(tr, tmp_path):
    real = tmp_path / "pages" / "real.html"
    real.parent.mkdir()
    real.write_text("the page from before")
    real.chmod(0o640)
    link = tmp_path / "page.html"
    link.symlink_to(real)
    assert export_html(tr, link) == link
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link is still the link
    assert real.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.html"]  # no temp file left


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_page_follows_the_umask(tr, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = export_html(tr, tmp_path / "new.html")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_an_overwritten_page_keeps_its_mode(tr, tmp_path):
    path = tmp_path / "page.html"
    path.write_text("old")
    path.chmod(0o604)
    export_html(tr, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o604 and path.read_text().startswith("<!DOCTYPE html>")


def test_root_overwriting_another_users_page_keeps_its_owner(tr, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user (CI runs as root)")
    path = tmp_path / "page.html"
    path.write_text("old")
    os.chown(path, 12345, 23456)
    export_html(tr, path)
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)


def test_export_errors_name_the_target_not_the_temp_file(tr, tmp_path):
    target = tmp_path / "missing-folder" / "page.html"
    with pytest.raises(FileNotFoundError) as e:
        export_html(tr, target)
    assert str(target) in str(e.value) and ".part" not in str(e.value)


def test_an_interrupted_export_keeps_the_old_page(tr, tmp_path, monkeypatch):
    path = tmp_path / "page.html"
    path.write_text("the page from before")

    def interrupt(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(export.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        export_html(tr, path)
    assert path.read_text() == "the page from before"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_cli_html_refuses_a_fifo_before_loading_the_model(tmp_path, monkeypatch, capsys):
    fifo = make_target(tmp_path, "fifo")
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded"))
    assert cli.main(["trace", "hi", "--html", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(fifo) in err and "FIFO" in err and "Traceback" not in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_save_png_writes_whole_through_a_symlink(tr, tmp_path):
    from bertviz_lite.views import static
    real = tmp_path / "real.png"
    real.write_bytes(b"old")
    link = tmp_path / "view.png"
    link.symlink_to(real)
    assert static.save_png(tr, link, view="attention") == link
    assert link.is_symlink() and real.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.png", "view.png"]  # no temp file left


def test_cli_png_refuses_a_fifo_before_loading_the_model(tmp_path, monkeypatch, capsys):
    fifo = make_target(tmp_path, "fifo")
    monkeypatch.setattr(cli, "_load", lambda args: pytest.fail("the model was loaded"))
    assert cli.main(["trace", "hi", "--png", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(fifo) in err and "FIFO" in err and "--png" in err


# ---------------------------------------------------------------------------------------------
# 2. a scheduler address that accepts the connection and never answers
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def silent_tcp(silent_port):
    """A scheduler address that accepts every connection and never answers (conftest's silent_port)."""
    port, held = silent_port
    return f"tcp://127.0.0.1:{port}", held


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


# ---------------------------------------------------------------------------------------------
# 3. blank lines in a corpus
# ---------------------------------------------------------------------------------------------


def test_blank_lines_are_skipped_and_counted(small):
    text = ["The cat sat on the mat.", "", "   \t", "A dog ran home, fast.", "\n"]
    r = corpus.head_stats(small, text, batch_size=2, progress=False)
    clean = corpus.head_stats(small, [text[0], text[3]], batch_size=2, progress=False)
    assert r.n_sentences == 2 and r.skipped == (1, 2, 4) and r.n_skipped == 3
    for name in corpus.STATS:
        np.testing.assert_allclose(r[name], clean[name], rtol=0, atol=1e-6, err_msg=name)
    assert "3 skipped (blank or too long)" in repr(r)
    with pytest.raises(bv.BertVizError, match="blank"):
        corpus.head_stats(small, ["", " "], progress=False)


# ---------------------------------------------------------------------------------------------
# 4. `$...$` in a sentence is text in a PNG, not matplotlib mathtext
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sentence", ["half is $\\frac{1}{2}$ here", "$" + "{" * 60 + "$", "costs $5 and $6"])
def test_dollar_signs_in_png_titles_are_text(small, tmp_path, monkeypatch, sentence):
    import matplotlib.mathtext

    def parse(*args, **kwargs):
        raise AssertionError("a sentence went through mathtext")
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", parse)
    a = small.trace(sentence)
    b = small.trace(sentence, edits=bv.ablate(heads={0: [1]}))
    # the compare view's title holds both sentences (the other views label single tokens: one `$` is text)
    path = save_png(a, tmp_path / "compare.png", view="compare", compare=b)
    assert path.stat().st_size > 1000


# ---------------------------------------------------------------------------------------------
# 5. malformed and linked checkpoint files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_deeply_nested_json_is_one_checkpoint_error_naming_the_file(tmp_path, small, file, capsys):
    folder = write_folder(tmp_path / "m", small)
    (folder / file).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(bv.CheckpointError, match="nested too deeply") as e:
        bv.load(folder)
    assert file in str(e.value) and len(str(e.value)) < 400
    assert cli.main(["trace", "hi", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and file in err and "Traceback" not in err


SECRET = "SECRET-DO-NOT-PRINT-0123456789"


@pytest.mark.parametrize("file, content", [
    ("config.json", json.dumps(SECRET)),
    ("config.json", json.dumps({"hidden_size": SECRET})),
    ("tokenizer.json", json.dumps({"model": {"type": SECRET}})),
    ("tokenizer_config.json", json.dumps([SECRET])),
])
def test_errors_do_not_quote_a_linked_file_outside_the_model_folder(tmp_path, small, file, content):
    outside = tmp_path / "elsewhere" / "private.txt"
    outside.parent.mkdir()
    outside.write_text(content)
    folder = write_folder(tmp_path / "m", small)
    (folder / file).unlink(missing_ok=True)
    (folder / file).symlink_to(outside)
    with pytest.raises(bv.CheckpointError) as e:
        bv.load(folder)
    assert file in str(e.value) and "outside the model folder" in str(e.value)
    assert SECRET not in str(e.value) and SECRET[:6] not in str(e.value)


def test_a_hub_cache_link_into_its_blobs_keeps_the_detail(tmp_path, small):
    # the Hugging Face cache links snapshots/<rev>/config.json to ../../blobs/<hash>: the same repo
    repo = tmp_path / "models--org--name"
    folder = write_folder(repo / "snapshots" / "abc123", small)
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir()
    blob.write_text("[]")
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to(Path("..") / ".." / "blobs" / "0123abcd")
    with pytest.raises(bv.CheckpointError, match=r"config\.json: expected a JSON object.*got list"):
        bv.load(folder)


def test_a_pytorch_bin_holding_a_list_is_a_checkpoint_error(tmp_path, small, monkeypatch):
    folder = write_folder(tmp_path / "bin", small)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"what torch.load(weights_only=True) read as a list")
    # torch is no test dependency: a stand-in that returns what torch.load returns for torch.save([..])
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(load=lambda *a, **k: [1.0, 2.0]))
    with pytest.raises(bv.CheckpointError, match=r"pytorch_model\.bin holds a list, not a state dict"):
        bv.load(folder)


class _Marker:
    """A pickle whose unpickling would create a file: what a malicious pytorch_model.bin does."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_malicious_pickle_is_never_unpickled(tmp_path, small):
    folder = write_folder(tmp_path / "bin", small)
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "was-unpickled"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"embeddings.word_embeddings.weight": _Marker(str(marker))}))
    with pytest.raises(bv.CheckpointError):  # torch missing, or torch's weights_only loader refusing it
        bv.load(folder)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# 6. variant() and count_params(): clear errors, not raw ones
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(weights={"layer.0.attn.W_O": "abc"}), TypeError, r"variant weight 'layer\.0\.attn\.W_O'.*real numbers"),
    (dict(weights=[("layer.0.attn.W_O", 1)]), TypeError, r"weights=\) takes a dict"),
    (dict(weights="layer.0.attn.W_O"), TypeError, r"weights=\) takes a dict"),
    (dict(weights={"layer.0.attn.W_O": 1.0}), ValueError, r"layer\.0\.attn\.W_O has \(1,\), the config needs \(64, 64\)"),
    (dict(foo=1), TypeError, r"\['foo'\], which are not config fields"),
    (dict(num_layers=5), ValueError, r"variant\(num_layers=5\).*layer\.2\.attn\.W_Q \(64, 64\) is missing"),
    (dict(hidden_size=32), ValueError, r"embed\.W_T has \(30522, 64\), the config needs \(30522, 32\)"),
    (dict(ffn_size=128), ValueError, r"layer\.0\.ffn\.W_up has \(64, 256\), the config needs \(64, 128\)"),
    (dict(attention_scale="x"), ValueError, r"attention_scale must be None"),
])
def test_variant_errors_name_what_is_wrong(small, kwargs, error, match):
    with pytest.raises(error, match=match):
        small.variant(**kwargs)


def test_variant_takes_nested_lists_and_keeps_shape_preserving_changes(small):
    W = np.asarray(small.weights["layer.0.attn.W_O"])
    v = small.variant(weights={"layer.0.attn.W_O": (2 * W).tolist()}, num_heads=2, attention_scale=0.5)
    np.testing.assert_array_equal(v.weights["layer.0.attn.W_O"], 2 * W)
    assert v.config.num_heads == 2 and bv.count_params(v).total == bv.count_params(small).total


@pytest.mark.parametrize("thing", ["minilm", None, bv.BertConfig()])
def test_count_params_of_something_else_names_what_it_needs(thing):
    with pytest.raises(TypeError, match="count_params counts a loaded model"):
        bv.count_params(thing)


def test_count_params_of_a_hand_built_model_with_a_wrong_shape(small):
    weights = {k: np.asarray(v) for k, v in small.weights.items()}
    weights["layer.1.ffn.b_up"] = np.zeros(7, np.float32)
    odd = bv.Bert(small.config, weights, small.tokenizer)
    with pytest.raises(bv.CheckpointError, match=r"layer\.1\.ffn\.b_up \(7,\), the config needs \(256,\)"):
        bv.count_params(odd)


# ---------------------------------------------------------------------------------------------
# 7. the command line on a terminal that is not UTF-8
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", [
    {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},  # LANG=C without Python's UTF-8 rescue
    {"PYTHONIOENCODING": "latin-1"},
])
def test_cli_works_when_stdout_is_not_utf8(tmp_path, small, env):
    folder = write_folder(tmp_path / "m", small)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO", "PYTHONUTF8"))}
    out = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "The cat sat.", "--pair", "It slept.",
                          "--model", str(folder)], capture_output=True, timeout=120,
                         env={**base, **env, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert b"layer.0.attn.probs" in out.stdout and not out.stderr
    assert b"A_h = softmax(E_h)" in out.stdout  # formulas as _x / ^x where sub/superscripts cannot be shown


# ---------------------------------------------------------------------------------------------
# 8. what already held: no injected script runs in the page; threads give bit-identical traces;
#    a killed Dask worker changes no result
# ---------------------------------------------------------------------------------------------


HOSTILE = ('x </script><script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
           '<b onmouseover="window.__pwned = 3">bold</b> $1 & "quotes" \u2028 y')


@pytest.mark.browser
def test_no_injected_script_runs_in_the_exported_page(small, tmp_path):
    chromium = "/usr/bin/chromium"
    if not os.path.exists(chromium):
        pytest.skip(f"{chromium} is missing: the browser tests drive the system chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    import tempfile
    model = small.variant(name='<img src=x onerror="window.__pwned = 4">')
    tr = model.trace(HOSTILE, pair='<svg onload="window.__pwned = 5">', pad_to=128)
    other = model.trace(HOSTILE, pair='<svg onload="window.__pwned = 5">', pad_to=128, edits=bv.ablate(heads={0: [1]}))
    path = export_html(tr, tmp_path / "page.html", ledger=bv.count_params(model), compare=other,
                       title='</title><script>window.__pwned = 6</script>')
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(), executable_path=chromium, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"])
        try:
            page = ctx.new_page()
            dialogs, errors = [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri())
            page.wait_for_function("() => document.querySelector('.bvl-attn-heat')?.bvl !== undefined",
                                   timeout=30_000)
            for tab in ("attention", "head", "token", "model", "neuron", "step", "params", "compare"):
                page.click(f".bvl-x-tab[data-tab='{tab}']")
                page.wait_for_timeout(150)
                page.mouse.move(400, 400)
            page.wait_for_timeout(300)
            assert page.evaluate("() => window.__pwned") is None
            assert page.evaluate("() => document.querySelectorAll('#bvl-app img, #bvl-app svg[onload], "
                                 "#bvl-app b[onmouseover], body > script:not([type])').length") == 0
            shown = page.inner_text("body")  # the compare tab's sentences, the model's name: drawn as text
            assert 'onerror="window.__pwned = 2"' in shown and "<svg onload=" in shown, shown[:2000]
            assert not dialogs and not errors, (dialogs, errors)
        finally:
            ctx.close()


def test_threads_give_bit_identical_traces(small, monkeypatch):
    # a fixed thread count: on a busy machine the thread policy gives BLAS fewer threads, whose rounding
    # may differ (README, "What is bit-stable"); what is tested here is that threads share nothing
    monkeypatch.setenv("BERTVIZ_LITE_THREADS", "2")
    sentences = [f"thread {i}: the cat sat on the mat" + " and slept" * (i % 4) for i in range(12)]
    alone = [small.trace(s) for s in sentences]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(small.trace, sentences))
        batches = list(pool.map(lambda s: small.trace_batch([s, sentences[0]]), sentences))
    for a, b, bt in zip(alone, together, batches):
        for key in a.keys():
            assert np.array_equal(np.asarray(a[key]), np.asarray(b[key])), key
        assert np.array_equal(np.asarray(bt[0]["layer.1.attn.probs"]),
                              np.asarray(small.trace_batch([a.texts[0], sentences[0]])[0]["layer.1.attn.probs"]))


def _batches_done(client) -> int:
    """How many batch_sums tasks the scheduler holds results of."""
    return client.run_on_scheduler(lambda dask_scheduler: sum(
        1 for key, t in dask_scheduler.tasks.items() if str(key).startswith("batch_sums") and t.state == "memory"))


@pytest.mark.slow
def test_a_killed_dask_worker_changes_no_result(small):
    distributed = pytest.importorskip("distributed", reason="needs the [cluster] extra (dask, distributed)")
    from .test_corpus import SENTENCES
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
