"""The bertviz-lite command, what it prints and writes: shapes and parameter tables on stdout (middle layers
folded, within the width asked for, formulas in Unicode or plain where the terminal is not UTF-8), a task head's
labels, the HTML page and PNG when asked, --version, --truncate and --heads; started as `python -m`. Its refusals
are in test_cli_errors.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import bertviz_lite as bv
from bertviz_lite.cli import main

from ..helpers import ROOT, cli_run, write_folder

BASE_TOTAL = f"{bv.reconcile().rows[0][1]:,}"  # 109,482,240
RANDOM = ["--model", "random"]
pytestmark = pytest.mark.usefixtures("cli_random_is_base")  # --model random: the session's BERT-base


# ------------------------------------------------------------------------------------------
# the tables it prints
# ------------------------------------------------------------------------------------------


def test_trace_prints_shapes_and_ledger(capsys, base):
    assert main(["trace", "The cat sat on the mat.", "--model", "random"]) == 0
    out = capsys.readouterr().out
    n = len(base.tokenize("The cat sat on the mat.").tokens)
    assert "layer.11.attn.probs" in out and f"(12, {n}, {n})" in out
    assert "embed.token" in out and "pooler.out" in out
    assert "parameters by group" in out and "layer.0.attention" in out
    assert BASE_TOTAL in out


def test_params_prints_ledger_groups_and_reconciliation(capsys):
    assert main(["params", "--model", "random"]) == 0
    out = capsys.readouterr().out
    assert "parameter ledger" in out and "layer.11.ffn.W_down" in out
    assert "parameters by group" in out and BASE_TOTAL in out
    assert "BERT parameter totals reconciled" in out and "formula card as written" in out


def test_params_folds_the_middle_layers_and_fits_the_width(capsys):
    assert main(["params", "--model", "random", "--width", "100"]) == 0
    out = capsys.readouterr().out
    ledger = out.split("parameters by group")[0]
    assert "layer.1 .. layer.10  the same 16 weights as layer.0" in ledger and "layer.5." not in ledger
    assert f"{10 * (4 * (768 * 768 + 768) + 4 * 768 + 2 * 768 * 3072 + 3072 + 768):,}" in out
    assert max(map(len, out.splitlines())) <= 100
    assert main(["params", "--model", "random", "--all"]) == 0
    assert "layer.5.ffn.W_up" in capsys.readouterr().out


def test_trace_folds_the_middle_layers_of_both_tables(capsys):
    # the shape table folded, the parameter groups not: BERT-base printed 48 per-layer group rows of 98 lines
    assert main(["trace", "The cat sat on the mat.", "--model", "random"]) == 0
    out = capsys.readouterr().out
    groups = out.split("parameters by group")[1]
    assert "layer.1 .. layer.10: the same 4 groups as layer.0" in groups and "layer.5." not in groups
    assert f"{10 * (4 * (768 * 768 + 768) + 4 * 768 + 2 * 768 * 3072 + 3072 + 768):,}" in groups
    assert "layer.0.attention" in groups and "layer.11.feed-forward" in groups and BASE_TOTAL in groups
    assert len(out.splitlines()) < 60
    assert main(["trace", "The cat sat on the mat.", "--model", "random", "--all"]) == 0
    groups = capsys.readouterr().out.split("parameters by group")[1]
    assert "layer.5.feed-forward" in groups and " .. " not in groups


def test_printed_tables_are_unicode_and_fit_100_columns(small):
    # tr.shapes() and bv.reconcile() print formulas without LaTeX, within 100 columns
    text = str(small.trace("the cat sat").shapes())
    assert "\\" not in text and "{" not in text  # W^Q keeps a caret: Unicode has no superscript Q
    assert "Eₕ = Qₕ Kₕᵀ / √dₖ + M" in text
    rec = bv.reconcile()
    printed = str(rec)
    assert max(map(len, printed.splitlines())) <= 100
    for row in rec.rows:  # every number and every note still printed
        assert f"{row[1]:,}" in printed if row[1] is not None else row[3] in printed
        assert " ".join(row[4].split()[:3]) in " ".join(printed.split())


def test_trace_prints_the_task_head_with_its_labels(capsys):
    """A fine-tuned-style checkpoint: the head's labels from config.json's id2label and their probabilities."""
    from bertviz_lite.analysis import head_probabilities
    folder = ROOT / "tests" / "fixtures" / "checkpoints" / "family" / "bert_seqcls"
    assert main(["trace", "I love the movie!", "--model", str(folder)]) == 0
    out = capsys.readouterr().out
    p = head_probabilities(bv.load(folder).trace("I love the movie!"))
    first, second = sorted(zip(p.tolist(), ("neg", "pos")), reverse=True)
    assert f"head (sequence_classification): {first[1]} {first[0]:.2f}  {second[1]} {second[0]:.2f}" in out
    assert "head.logits" in out


@pytest.mark.parametrize("env", [
    {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},  # LANG=C without Python's UTF-8 rescue
    {"PYTHONIOENCODING": "latin-1"},
])
@pytest.mark.slow  # a fresh interpreter
def test_cli_works_when_stdout_is_not_utf8(tmp_path, small, env):
    folder = write_folder(tmp_path / "m", small)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO", "PYTHONUTF8"))}
    out = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "The cat sat.", "--pair", "It slept.",
                          "--model", str(folder)], capture_output=True, timeout=120,
                         env={**base, **env, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert b"layer.0.attn.probs" in out.stdout and not out.stderr
    assert b"A_h = softmax(E_h)" in out.stdout  # formulas as _x / ^x where sub/superscripts cannot be shown


# ------------------------------------------------------------------------------------------
# the files it writes
# ------------------------------------------------------------------------------------------


def test_trace_writes_html_and_png(tmp_path, capsys):
    html, png = tmp_path / "t.html", tmp_path / "t.png"
    code = main(["trace", "A dog.", "--pair", "It barked.", "--model", "random", "--pad-to", "16",
                 "--html", str(html), "--png", str(png), "--layer", "2", "--head", "5"])
    assert code == 0
    assert html.stat().st_size > 20_000 and "bvl-data" in html.read_text(encoding="utf-8")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "trace of 16 tokens" in out and str(html) in out and str(png) in out


def test_a_png_name_in_capitals_still_writes(capsys, tmp_path):
    code, out, err = cli_run(capsys, ["trace", "hi there", *RANDOM, "--png", str(tmp_path / "a.PNG")])
    assert code == 0, err
    assert (tmp_path / "a.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_heads_draws_those_heads_of_the_head_view(monkeypatch, tmp_path, capsys):
    from bertviz_lite.views.render import static
    seen = {}
    real = static.save_png

    def spy(tr, path, **kw):
        seen.update(kw)
        return real(tr, path, **kw)
    monkeypatch.setattr(static, "save_png", spy)
    png = tmp_path / "hv.png"
    code, out, err = cli_run(capsys, ["trace", "hi there", "--model", "random", "--view", "head", "--heads", "1,3",
                                      "--png", str(png)])
    assert code == 0 and png.stat().st_size > 0 and seen["heads"] == [1, 3]
    code, out, err = cli_run(capsys, ["trace", "hi there", "--model", "random", "--view", "head", "--head", "2",
                                      "--png", str(png)])
    assert code == 0 and seen["heads"] == [2]  # --head with --view head: that head, no longer ignored
    code, out, err = cli_run(capsys, ["trace", "hi", "--model", "random", "--view", "head", "--heads", "12",
                                      "--png", str(png)])
    assert code == 2 and "--heads: head 12 is out of range" in err


# ------------------------------------------------------------------------------------------
# its options and how it is started
# ------------------------------------------------------------------------------------------


def test_every_option_has_help():
    from bertviz_lite.cli import _parser
    p = _parser()
    subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"][0].choices
    for name, sub in subs.items():
        for action in sub._actions:
            assert action.help, (name, action.dest)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"bertviz-lite {bv.__version__}"


def test_truncate_cuts_a_long_input_and_the_error_names_the_option(capsys, tmp_path, small):
    small_bert = ["--model", str(write_folder(tmp_path / "m", small))]  # 512 positions, as BERT-base, 2 thin layers
    text = "word " * 600
    code, out, err = cli_run(capsys, ["trace", text, *small_bert])
    assert code == 2 and "--truncate" in err and "truncate=True" not in err and out == ""
    code, out, err = cli_run(capsys, ["trace", text, *small_bert, "--truncate"])
    assert code == 0, err
    assert "n = 512" in out


@pytest.mark.slow  # a fresh interpreter
def test_python_dash_m(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "params", "--model", "random"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert BASE_TOTAL in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "x", "--model", "no such model!"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("bertviz-lite: error:") and "Traceback" not in bad.stderr


@pytest.mark.slow  # a fresh interpreter
def test_python_dash_m_package(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bertviz_lite", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("bertviz-lite ")
