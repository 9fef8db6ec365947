"""The command line names its own options in errors (--pad-to, --truncate), not the library's keyword arguments."""

from __future__ import annotations

from bertviz_lite import cli


def test_pad_to_errors_name_the_options(capsys):
    code = cli.main(["trace", "the cat sat on the mat and slept", "--pad-to", "5", "--model", "random"])
    err = capsys.readouterr().err
    assert code == 2 and "--pad-to 5 is shorter" in err and "--pad-to >= " in err and "--truncate" in err
    assert "pad_to" not in err and "truncate=True" not in err
