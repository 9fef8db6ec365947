"""Leftovers of earlier findings closed in issue 40: L8 (a path with NUL), L12 (head_stats(None, ...))."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import corpus


@pytest.fixture(scope="module")
def tiny_trace():
    return bv.Trace.from_attentions([np.full((1, 2, 4, 4), 0.25, dtype=np.float32)], ["[CLS]", "a", "b", "[SEP]"])


@pytest.mark.parametrize("write, kind", [(lambda tr, p: bv.export_html(tr, p), ".html"),
                                         (lambda tr, p: bv.views.save_png(tr, p), ".png")])
def test_a_file_name_with_nul_is_named(tmp_path, tiny_trace, write, kind):
    # L8: a raw ValueError "embedded null byte"
    for name in (str(tmp_path / f"a\x00b{kind}"), tmp_path / f"a\x00b{kind}"):
        with pytest.raises(ValueError, match=r"NUL character"):
            write(tiny_trace, name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("model", [None, "minilm", 3])
def test_head_stats_without_a_model_says_so(model):
    # L12: head_stats(None, ...) was a raw AttributeError ('NoneType' object has no attribute 'tokenize')
    with pytest.raises(TypeError, match="head_stats takes a loaded model first"):
        corpus.head_stats(model, ["The cat sat."], progress=False)
