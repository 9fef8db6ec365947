"""The command line's errors: one line for a malformed config, the [views] extra named when it is
missing, and a terminal that is not UTF-8.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from bertviz_lite.cli import main

from ..helpers import ROOT, write_folder


def test_cli_prints_one_line_for_a_malformed_config(tmp_path, small, capsys):
    folder = write_folder(tmp_path / "m", small)
    (folder / "config.json").write_text("[]")
    assert main(["trace", "hi", "--model", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config.json" in err and "Traceback" not in err


@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
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


@pytest.mark.parametrize("env", [
    {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},  # LANG=C without Python's UTF-8 rescue
    {"PYTHONIOENCODING": "latin-1"},
])
@pytest.mark.slow  # a fresh interpreter (README: the fast suite starts none)
def test_cli_works_when_stdout_is_not_utf8(tmp_path, small, env):
    folder = write_folder(tmp_path / "m", small)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "PYTHONIO", "PYTHONUTF8"))}
    out = subprocess.run([sys.executable, "-m", "bertviz_lite.cli", "trace", "The cat sat.", "--pair", "It slept.",
                          "--model", str(folder)], capture_output=True, timeout=120,
                         env={**base, **env, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert b"layer.0.attn.probs" in out.stdout and not out.stderr
    assert b"A_h = softmax(E_h)" in out.stdout  # formulas as _x / ^x where sub/superscripts cannot be shown
