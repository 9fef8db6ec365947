"""The bertviz-lite command's refusals: one line on stderr starting "bertviz-lite: error:", exit status 2, no
traceback, and nothing printed or loaded before the options are checked. Out-of-range indices, a text too long,
a malformed config, a missing [views] extra, "did you mean" for a mistyped command, option or model name, output
file names (.png, .html, a missing folder, an empty name, a name too long for the file system), --width,
--pad-to and fill-mask's messages named as the command line's own options, a folder holding only a zip."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import bertviz_lite as bv
from bertviz_lite.cli import main

from ..helpers import ROOT, cli_run, write_folder

RANDOM = ["--model", "random"]
pytestmark = pytest.mark.usefixtures("cli_random_is_base")  # --model random: the session's BERT-base


@pytest.fixture
def no_forward(monkeypatch):
    """Fails the test if a model is loaded or a forward pass runs."""
    from bertviz_lite import loading

    def refuse(*a, **k):
        raise AssertionError("work began before the options were checked")

    monkeypatch.setattr(loading, "load", refuse)


# ------------------------------------------------------------------------------------------
# one line, exit status 2, before any work
# ------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("argv, message", [
    (["trace", "hi", "--model", ""], "--model needs a name"),
    (["trace", "hi", "--model", "minilm", "--seed", "3"], "--seed only applies to --model random"),
    (["fill-mask", "a [MASK]", "--model", "random"], "fill-mask needs a model with a masked-LM head"),
    (["trace", ""], "trace needs a text with at least one word"),
    (["trace", "   "], "trace needs a text with at least one word"),
    (["fill-mask", ""], "fill-mask needs a text"),
    (["trace", "hi", "--pad-to", "-5"], "argument --pad-to: -5 is not a number of tokens"),
    (["trace", "hi", "--html", "page.txt"], "--html writes an HTML page; 'page.txt' does not end in .html"),
    (["trace", "hi", "--heads", "1"], "--heads goes with --view head"),
    (["trace", "hi", "--view", "head", "--heads", "a,b"], "not a list of head indices"),
])
def test_bad_options_are_refused_in_one_line_before_any_work(capsys, no_forward, argv, message):
    code, out, err = cli_run(capsys, argv)
    assert code == 2 and out == "" and message in err
    assert len([x for x in err.splitlines() if "error" in x]) == 1


@pytest.mark.parametrize("width", ["-5", "0", "10", "wide"])
def test_width_is_checked_before_printing(capsys, width):
    # params --width -5 once printed the tables, then exited 2
    with pytest.raises(SystemExit) as e:
        main(["params", *RANDOM, "--width", width])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "--width" in err


def test_cli_prints_one_line_for_a_malformed_config(tmp_path, small, capsys):
    folder = write_folder(tmp_path / "m", small)
    (folder / "config.json").write_text("[]")
    assert main(["trace", "hi", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err and "Traceback" not in err


@pytest.mark.slow  # a fresh interpreter
@pytest.mark.parametrize("option", ["--png"])  # --html needs no extra since the page is drawn by views/render/assets/app.js
def test_cli_without_views_extra_says_which_extra(tmp_path, small, option):
    folder = write_folder(tmp_path / "m", small)
    code = textwrap.dedent(f"""
        import sys
        class NoViews:  # as if `pip install bertviz-lite` without [views]
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("plotly", "matplotlib", "ipywidgets", "anywidget"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, NoViews())
        from bertviz_lite.cli import main
        sys.exit(main(["trace", "hi", "--model", {str(folder)!r}, {option!r}, {str(tmp_path / "out")!r}]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert "bertviz-lite[views]" in out.stderr and option in out.stderr


# ------------------------------------------------------------------------------------------
# "did you mean": a mistyped command, option or model name
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, hint", [
    (["trac", "hi"], "did you mean 'trace'?"),
    (["fill-msk", "a [MASK]"], "did you mean 'fill-mask'?"),
    (["trace", "hi", "--modle", "minilm"], "did you mean --model for --modle?"),
    (["trace", "hi", "--head", "1", "--veiw", "head"], "did you mean --view for --veiw?"),
    (["fill-mask", "a [MASK]", "--topk", "3"], "did you mean --top-k for --topk?"),
])
def test_a_mistyped_command_or_option_gets_did_you_mean(capsys, no_forward, argv, hint):
    code, out, err = cli_run(capsys, argv)
    assert code == 2 and out == "" and hint in err


def not_on_the_hub(repo, *a, **k):
    """loading.hub_folder where the Hub cannot be reached: its download advice, which a typo must not get."""
    raise bv.WeightsNotFoundError(f"{repo} is not in the Hugging Face cache and the Hub cannot be reached; "
                                  f"huggingface-cli download {repo}")


@pytest.mark.parametrize("typo, meant", [("minlm", "minilm"), ("MiniLM", "minilm"), ("randm", "random"),
                                         ("bert-base-uncase", "bert-base-uncased")])
def test_a_typo_of_a_model_name_gets_one_message_did_you_mean(capsys, monkeypatch, typo, meant):
    # "did you mean" alone, not followed by the Hub's download advice for the typo
    from bertviz_lite import loading
    monkeypatch.setattr(loading, "hub_folder", not_on_the_hub)
    code, out, err = cli_run(capsys, ["params", "--model", typo])
    assert code == 2 and f"did you mean '{meant}'" in err
    assert "huggingface-cli" not in err and len(err.strip().splitlines()) == 1


def test_a_typo_of_a_model_in_trace_gets_one_message(capsys, monkeypatch):
    from bertviz_lite import loading
    monkeypatch.setattr(loading, "hub_folder", not_on_the_hub)
    code, out, err = cli_run(capsys, ["trace", "hi", "--model", "minlm"])
    assert code == 2 and "did you mean 'minilm'?" in err
    assert "huggingface-cli" not in err and len(err.strip().splitlines()) == 1


def test_a_folder_holding_only_a_zip_gets_a_hint(tmp_path, capsys):
    (tmp_path / "model.zip").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    code, out, err = cli_run(capsys, ["params", "--model", str(tmp_path)])
    assert code == 2 and "model.zip" in err and "unzip" in err


# ------------------------------------------------------------------------------------------
# output file names, checked before any output
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x", "x.html"])
def test_png_must_be_a_png_file_name(capsys, tmp_path, no_forward, name):
    code, out, err = cli_run(capsys, ["trace", "hi", "--png", str(tmp_path / name)])
    assert code == 2 and ".png" in err and out == ""
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("option", ["--html", "--png"])
def test_a_missing_folder_is_refused_before_any_output(capsys, tmp_path, no_forward, option):
    # the whole trace was once printed, then the write failed
    target = tmp_path / "nowhere" / ("x.html" if option == "--html" else "x.png")
    code, out, err = cli_run(capsys, ["trace", "hi", option, str(target)])
    assert code == 2 and "does not exist" in err and out == ""


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_html_name_is_refused(capsys, no_forward, value):
    # --html '' once wrote nothing and exited 0
    code, out, err = cli_run(capsys, ["trace", "hi", "--html", value])
    assert code == 2 and "empty" in err and out == ""


def test_a_name_too_long_for_the_file_system_is_refused_before_work(capsys, no_forward, tmp_path):
    code, out, err = cli_run(capsys, ["trace", "hi", "--html", str(tmp_path / ("a" * 300 + ".html"))])
    assert code == 2 and out == "" and "the file name is 305 bytes long" in err and "OSError" not in err


# ------------------------------------------------------------------------------------------
# the command line's own option names, not the library's keyword arguments
# ------------------------------------------------------------------------------------------


def test_pad_to_errors_name_the_options(capsys):
    code, out, err = cli_run(capsys, ["trace", "the cat sat on the mat and slept", "--pad-to", "5", *RANDOM])
    assert code == 2 and "--pad-to 5 is shorter" in err and "--pad-to >= " in err and "--truncate" in err
    assert "pad_to" not in err and "truncate=True" not in err


def test_the_pad_to_keyword_is_reported_as_the_flag(capsys):
    code, out, err = cli_run(capsys, ["trace", "a b c d e", *RANDOM, "--pad-to", "2"])
    assert code == 2 and "--pad-to 2" in err and "pad_to" not in err


def test_fill_masks_too_long_message_suggests_no_truncate(capsys, monkeypatch):
    from bertviz_lite import cli

    class TooLong:
        has_mlm = True

        def fill_mask(self, text, top_k):
            raise bv.InputTooLongError("the input is 603 tokens but the model takes at most 512 (including [CLS] "
                                       "and [SEP]); shorten the text, or pass truncate=True to keep the first 512 "
                                       "tokens")
    monkeypatch.setattr(cli, "_load", lambda args: TooLong())
    code, out, err = cli_run(capsys, ["fill-mask", "a [MASK]"])
    assert code == 2 and "shorten the text" in err and "truncate" not in err
