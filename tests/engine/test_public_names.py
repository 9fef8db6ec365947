"""dir(bv) and __all__ show what a user calls: the functions, classes and errors, the
views' entry points (loaded on first use) and the modules a user reaches into; not the package's insides."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bertviz_lite as bv

INSIDES = ("backend", "kernels", "threads", "loading", "weights", "families", "foreign", "batch", "trace", "errors",
           "_os", "_sys", "_SET_TIMEOUT", "__getattr__")


def test_dir_lists_what_a_user_calls_and_nothing_inside():
    names = dir(bv)
    for name in ("load", "Trace", "explore", "head_view", "model_view", "neuron_view", "export_html", "views",
                 "analysis", "corpus", "compare", "Comparison", "__version__"):
        assert name in names, name
    assert [n for n in INSIDES if n in names] == []
    assert set(bv.__all__) <= set(names) and all(hasattr(bv, n) for n in bv.__all__)
    assert "data" not in dir(bv.views) and "head_view" in dir(bv.views)


@pytest.mark.slow  # a fresh interpreter
def test_a_star_import_loads_no_widget_library():
    code = ("import sys; from bertviz_lite import *; head_view; "
            "print(sorted(m for m in ('anywidget', 'plotly', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bertvizs_imports_have_drop_ins():
    # bertviz: from bertviz import head_view, model_view; from bertviz.neuron_view import show
    from bertviz_lite import head_view, model_view
    from bertviz_lite.neuron_view import show
    assert head_view is bv.views.head_view and model_view is bv.views.model_view and callable(show)


@pytest.mark.slow  # a fresh interpreter
def test_bertvizs_imports_load_no_widget_library():
    code = ("import sys; from bertviz_lite import head_view, model_view; from bertviz_lite.neuron_view import show; "
            "print(sorted(m for m in ('anywidget', 'plotly', 'matplotlib', 'ipywidgets', 'IPython') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
