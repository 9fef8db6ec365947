"""head_stats' input: blank lines are skipped and counted; a first argument that is not a loaded model is named.
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import corpus


def test_blank_lines_are_skipped_and_counted(small):
    text = ["The cat sat on the mat.", "", "   \t", "A dog ran home, fast.", "\n"]
    r = corpus.head_stats(small, text, batch_size=2, progress=False)
    clean = corpus.head_stats(small, [text[0], text[3]], batch_size=2, progress=False)
    assert r.n_sentences == 2 and r.skipped == (1, 2, 4) and r.n_skipped == 3
    for name in corpus.STATS:
        np.testing.assert_allclose(r[name], clean[name], rtol=0, atol=1e-6, err_msg=name)
    assert "3 skipped (blank or too long)" in repr(r)
    with pytest.raises(bv.BertVizError, match="blank"):
        corpus.head_stats(small, ["", " "], progress=False)


@pytest.mark.parametrize("model", [None, "minilm", 3])
def test_head_stats_without_a_model_says_so(model):
    # head_stats(None, ...) was a raw AttributeError ('NoneType' object has no attribute 'tokenize')
    with pytest.raises(TypeError, match="head_stats takes a loaded model first"):
        corpus.head_stats(model, ["The cat sat."], progress=False)
