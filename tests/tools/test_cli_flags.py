"""Command-line flags and checks before any output (issue 32 §4, issue 31 L7, L10): --version,
--truncate, a PNG target that is not .png, a target folder that does not exist, an empty --html,
a negative --width, a typo of a model name, a folder holding only a zip."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bertviz_lite as bv
from bertviz_lite.cli import main

RANDOM_SMALL = ["--model", "random"]


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_forward(monkeypatch):
    """Fails the test if a model is loaded or a forward pass runs."""
    from bertviz_lite import loading

    def refuse(*a, **k):
        raise AssertionError("work began before the options were checked")

    monkeypatch.setattr(loading, "load", refuse)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"bertviz-lite {bv.__version__}"


def test_truncate_cuts_a_long_input_and_the_error_names_the_option(capsys):
    text = "word " * 600
    code, out, err = run(capsys, ["trace", text, *RANDOM_SMALL])
    assert code == 2 and "--truncate" in err and "truncate=True" not in err and out == ""
    code, out, err = run(capsys, ["trace", text, *RANDOM_SMALL, "--truncate"])
    assert code == 0, err
    assert "n = 512" in out


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x", "x.html"])
def test_png_must_be_a_png_file_name(capsys, tmp_path, no_forward, name):
    code, out, err = run(capsys, ["trace", "hi", "--png", str(tmp_path / name)])
    assert code == 2 and ".png" in err and out == ""
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("option", ["--html", "--png"])
def test_a_missing_folder_is_refused_before_any_output(capsys, tmp_path, no_forward, option):
    # L7: the whole trace was printed, then the write failed
    target = tmp_path / "nowhere" / ("x.html" if option == "--html" else "x.png")
    code, out, err = run(capsys, ["trace", "hi", option, str(target)])
    assert code == 2 and "does not exist" in err and out == ""


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_html_name_is_refused(capsys, no_forward, value):
    # L7: --html '' wrote nothing and exited 0
    code, out, err = run(capsys, ["trace", "hi", "--html", value])
    assert code == 2 and "empty" in err and out == ""


@pytest.mark.parametrize("width", ["-5", "0", "10", "wide"])
def test_width_is_checked_before_printing(capsys, width):
    # L7: params --width -5 printed the tables, then exited 2
    with pytest.raises(SystemExit) as e:
        main(["params", *RANDOM_SMALL, "--width", width])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "--width" in err


@pytest.mark.parametrize("typo, meant", [("minlm", "minilm"), ("MiniLM", "minilm"), ("randm", "random"),
                                         ("bert-base-uncase", "bert-base-uncased")])
def test_a_typo_of_a_model_name_gets_one_message_did_you_mean(capsys, monkeypatch, typo, meant):
    # issue 39 item 10: "did you mean" alone, not followed by the Hub's download advice for the typo
    from bertviz_lite import loading

    def not_on_the_hub(repo, *a, **k):
        raise bv.WeightsNotFoundError(f"{repo} is not in the Hugging Face cache and the Hub cannot be reached; "
                                      "huggingface-cli download ...")
    monkeypatch.setattr(loading, "hub_folder", not_on_the_hub)
    code, out, err = run(capsys, ["params", "--model", typo])
    assert code == 2 and f"did you mean '{meant}'" in err
    assert "huggingface-cli" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["bert-base-cased", "bert-large-uncased", "distilbert-base-uncased"])
def test_a_real_hub_name_that_resembles_a_known_one_is_looked_up(monkeypatch, name):
    # a name close to 'bert-base-uncased' may be a real Hub id: the cache and the Hub are asked first
    from bertviz_lite import loading
    asked = []

    def hub(repo, *a, **k):
        asked.append(repo)
        raise bv.WeightsNotFoundError("stand-in: not reachable")
    monkeypatch.setattr(loading, "hub_folder", hub)
    with pytest.raises(bv.WeightsNotFoundError):
        bv.load(name)
    assert asked == [name]


@pytest.mark.parametrize("name", ["\x00", "x" * 5000, "x" * 300, "nobody/" + "x" * 300])
def test_impossible_model_names_are_one_clear_error(name):
    # L10: a raw OSError (File name too long), HFValidationError for '\x00' and 'nobody/' + 'x' * 300
    with pytest.raises(bv.WeightsNotFoundError) as err:
        bv.load(name)
    assert len(str(err.value)) < 600


def test_a_folder_holding_only_a_zip_gets_a_hint(tmp_path, capsys):
    (tmp_path / "model.zip").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    code, out, err = run(capsys, ["params", "--model", str(tmp_path)])
    assert code == 2 and "model.zip" in err and "unzip" in err


@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_python_dash_m_package(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bertviz_lite", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("bertviz-lite ")


def test_a_good_png_and_html_still_write(capsys, tmp_path):
    code, out, err = run(capsys, ["trace", "hi there", *RANDOM_SMALL, "--png", str(tmp_path / "a.PNG")])
    assert code == 0, err
    assert (tmp_path / "a.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
