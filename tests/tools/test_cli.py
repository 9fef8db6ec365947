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
    (["trace", "the cat", "--model", "random", "--query", "50"], "--query 50 is out of range: the input has 4 tokens"),
    (["trace", "the cat", "--model", "random", "--layer", "12"], "--layer 12 is out of range: this model has 12"),
    (["trace", "the cat", "--model", "random", "--head", "-1"], "--head -1 is out of range"),
])
def test_errors_are_one_line_and_exit_2(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertviz-lite: error:") and words in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_options_fail_before_any_work(capsys, monkeypatch):
    # the check runs on the tokens, before the forward pass
    from bertviz_lite.model import Bert

    def no_forward(*a, **k):
        raise AssertionError("traced before checking --query")
    monkeypatch.setattr(Bert, "trace", no_forward)
    assert main(["trace", "the cat", "--model", "random", "--query", "4", "--png", "x.png"]) == 2
    assert "--query 4 is out of range" in capsys.readouterr().err


def test_every_option_has_help():
    from bertviz_lite.cli import _parser
    p = _parser()
    subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"][0].choices
    for name, sub in subs.items():
        for action in sub._actions:
            assert action.help, (name, action.dest)


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


@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_python_dash_m(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "params", "--model", "random"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert BASE_TOTAL in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "x", "--model", "no such model!"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("bertviz-lite: error:") and "Traceback" not in bad.stderr


def test_printed_tables_are_unicode_and_fit_100_columns():
    # tr.shapes() and bv.reconcile() print formulas without LaTeX, within 100 columns
    model = bv.load("random", seed=0, config={"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256})
    text = str(model.trace("the cat sat").shapes())
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
    from pathlib import Path

    from bertviz_lite.analysis import head_probabilities
    folder = Path(__file__).parents[1] / "fixtures" / "checkpoints" / "family" / "bert_seqcls"
    assert main(["trace", "I love the movie!", "--model", str(folder)]) == 0
    out = capsys.readouterr().out
    p = head_probabilities(bv.load(folder).trace("I love the movie!"))
    first, second = sorted(zip(p.tolist(), ("neg", "pos")), reverse=True)
    assert f"head (sequence_classification): {first[1]} {first[0]:.2f}  {second[1]} {second[0]:.2f}" in out
    assert "head.logits" in out
