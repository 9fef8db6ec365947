"""The command line, bertviz users round 2 (issue 39 item 10, issue 40 N30): "did you mean" for a command and
an option, one message for a typo'd model, --heads for --view head, --seed refused where it means
nothing, fill-mask on a model without a head and an empty text refused before any work, --model '',
--pad-to -5 named as the flag, --html's extension and a name too long for the file system checked first,
and fill-mask's too-long message suggesting no --truncate it does not have."""

from __future__ import annotations

import pytest

import bertviz_lite as bv
from bertviz_lite.cli import main

from .test_cli_flags import no_forward  # noqa: F401 (a fixture: fails the test if a model is loaded)


def run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, hint", [
    (["trac", "hi"], "did you mean 'trace'?"),
    (["fill-msk", "a [MASK]"], "did you mean 'fill-mask'?"),
    (["trace", "hi", "--modle", "minilm"], "did you mean --model for --modle?"),
    (["trace", "hi", "--head", "1", "--veiw", "head"], "did you mean --view for --veiw?"),
    (["fill-mask", "a [MASK]", "--topk", "3"], "did you mean --top-k for --topk?"),
])
def test_a_mistyped_command_or_option_gets_did_you_mean(capsys, no_forward, argv, hint):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == "" and hint in err


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
    code, out, err = run(capsys, argv)
    assert code == 2 and out == "" and message in err
    assert len([x for x in err.splitlines() if "error" in x]) == 1


def test_a_name_too_long_for_the_file_system_is_refused_before_work(capsys, no_forward, tmp_path):
    code, out, err = run(capsys, ["trace", "hi", "--html", str(tmp_path / ("a" * 300 + ".html"))])
    assert code == 2 and out == "" and "the file name is 305 bytes long" in err and "OSError" not in err


def test_a_typo_of_a_model_gets_one_message(capsys, monkeypatch):
    from bertviz_lite import loading

    def not_on_the_hub(repo, *a, **k):
        raise bv.WeightsNotFoundError(f"{repo} is not in the Hugging Face cache; huggingface-cli download {repo}")
    monkeypatch.setattr(loading, "hub_folder", not_on_the_hub)
    code, out, err = run(capsys, ["trace", "hi", "--model", "minlm"])
    assert code == 2 and "did you mean 'minilm'?" in err
    assert "huggingface-cli" not in err and len(err.strip().splitlines()) == 1


def test_the_pad_to_keyword_is_reported_as_the_flag(capsys):
    code, out, err = run(capsys, ["trace", "a b c d e", "--model", "random", "--pad-to", "2"])
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
    code, out, err = run(capsys, ["fill-mask", "a [MASK]"])
    assert code == 2 and "shorten the text" in err and "truncate" not in err


def test_heads_draws_those_heads_of_the_head_view(monkeypatch, tmp_path, capsys):
    from bertviz_lite.views.render import static
    seen = {}
    real = static.save_png

    def spy(tr, path, **kw):
        seen.update(kw)
        return real(tr, path, **kw)
    monkeypatch.setattr(static, "save_png", spy)
    png = tmp_path / "hv.png"
    code, out, err = run(capsys, ["trace", "hi there", "--model", "random", "--view", "head", "--heads", "1,3",
                                  "--png", str(png)])
    assert code == 0 and png.stat().st_size > 0 and seen["heads"] == [1, 3]
    code, out, err = run(capsys, ["trace", "hi there", "--model", "random", "--view", "head", "--head", "2",
                                  "--png", str(png)])
    assert code == 0 and seen["heads"] == [2]  # --head with --view head: that head, no longer ignored
    code, out, err = run(capsys, ["trace", "hi", "--model", "random", "--view", "head", "--heads", "12",
                                  "--png", str(png)])
    assert code == 2 and "--heads: head 12 is out of range" in err
