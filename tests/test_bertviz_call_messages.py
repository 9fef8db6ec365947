"""bertviz's calls name themselves in their errors, and neuron_view says what it needs (a reviewer's find:
neuron_view(attentions) suggested neuron_view(outputs.attentions, tokens), itself a TypeError)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("anywidget")

import bertviz_lite as bv  # noqa: E402


def attentions(n=5, L=2, h=2):
    a = np.random.default_rng(0).random((L, 1, h, n, n)).astype(np.float32)
    return list(a / a.sum(-1, keepdims=True))


@pytest.mark.parametrize("view", ["head_view", "model_view"])
def test_a_call_without_tokens_names_itself(view):
    with pytest.raises(TypeError, match=rf"^{view}\(\) takes a Trace"):
        getattr(bv.views, view)(attentions())


def test_neuron_view_on_attention_says_it_needs_a_trace():
    with pytest.raises(TypeError, match="neuron_view\\(\\) takes a Trace from model.trace") as e:
        bv.views.neuron_view(attentions())
    assert "tokens)" not in str(e.value)  # no call that would fail in turn
