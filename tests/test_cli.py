"""The bertviz-lite command: shapes and parameter tables on stdout, files when asked, one-line
errors with exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bertviz_lite as bv
from bertviz_lite.cli import main

BASE_TOTAL = f"{bv.reconcile().rows[0][1]:,}"  # 109,482,240


def test_trace_prints_shapes_and_ledger(capsys):
    assert main(["trace", "The cat sat on the mat.", "--model", "random"]) == 0
    out = capsys.readouterr().out
    n = len(bv.load("random").tokenize("The cat sat on the mat.").tokens)
    assert "layer.11.attn.probs" in out and f"(12, {n}, {n})" in out
    assert "embed.token" in out and "pooler.out" in out
    assert "parameters by group" in out and "layer.0.attention" in out
    assert BASE_TOTAL in out


def test_trace_writes_html_and_png(tmp_path, capsys):
    html, png = tmp_path / "t.html", tmp_path / "t.png"
    code = main(["trace", "A dog.", "--pair", "It barked.", "--model", "random", "--pad-to", "16",
                 "--html", str(html), "--png", str(png), "--layer", "2", "--head", "5"])
    assert code == 0
    assert html.stat().st_size > 20_000 and "bvl-data" in html.read_text(encoding="utf-8")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "trace of 16 tokens" in out and str(html) in out and str(png) in out


def test_params_prints_ledger_groups_and_reconciliation(capsys):
    assert main(["params", "--model", "random"]) == 0
    out = capsys.readouterr().out
    assert "parameter ledger" in out and "layer.11.ffn.W_down" in out
    assert "parameters by group" in out and BASE_TOTAL in out
    assert "BERT parameter totals reconciled" in out and "formula card as written" in out


@pytest.mark.parametrize("argv, words", [
    (["trace", "hi", "--model", "no such model!"], "no such model"),
    (["trace", " ".join(["word"] * 600), "--model", "random"], "512"),
    (["params", "--model", "/nonexistent/folder/"], "nonexistent"),
])
def test_errors_are_one_line_and_exit_2(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertviz-lite: error:") and words in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_python_dash_m(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "params", "--model", "random"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert BASE_TOTAL in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "x", "--model", "no such model!"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("bertviz-lite: error:") and "Traceback" not in bad.stderr


def test_trace_prints_the_task_head_with_its_labels(capsys):
    """A fine-tuned-style checkpoint: the head's labels from config.json's id2label and their probabilities."""
    from pathlib import Path

    from bertviz_lite.analysis import head_probabilities
    folder = Path(__file__).parent / "fixtures" / "checkpoints" / "family" / "bert_seqcls"
    assert main(["trace", "I love the movie!", "--model", str(folder)]) == 0
    out = capsys.readouterr().out
    p = head_probabilities(bv.load(folder).trace("I love the movie!"))
    first, second = sorted(zip(p.tolist(), ("neg", "pos")), reverse=True)
    assert f"head (sequence_classification): {first[1]} {first[0]:.2f}  {second[1]} {second[0]:.2f}" in out
    assert "head.logits" in out
