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


@pytest.mark.parametrize("call", ["head_view", "model_view", "from_attentions"])
def test_empty_attentions_name_output_attentions(call):
    # transformers 5: AutoModel.from_pretrained(..., output_attentions=True) and then outputs[-1] is an empty
    # tuple; the message says how to get attention back, not only that one array per layer is wanted
    run = bv.Trace.from_attentions if call == "from_attentions" else getattr(bv.views, call)
    with pytest.raises(ValueError, match="attentions is empty") as told:
        run((), ["[CLS]", "hi", "[SEP]"])
    message = str(told.value)
    assert "output_attentions=True" in message and "model.config.output_attentions" in message
    assert "outputs.attentions" in message
