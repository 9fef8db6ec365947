"""Edits that write into their input behind the read-only view's back are caught."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.errors import EditError

SMALL = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "ffn_size": 256}


@pytest.fixture(scope="module")
def model():
    return bv.load("random", config=SMALL, backend="numpy")


def unlock_and_write_inf(a):
    a.flags.writeable = True  # numpy allows it on a view of a writable array
    a[..., 0] = np.inf
    return a


def write_through_base(a):
    a.base[..., 0] = np.inf  # the view's base: the forward's own array
    return a


@pytest.mark.parametrize("edit", [unlock_and_write_inf, write_through_base])
def test_an_edit_that_writes_inf_in_place_fails_naming_the_key(model, edit):
    # the finite check once compared y with x, the same memory, so 81 keys filled with NaN and no error
    with pytest.raises(EditError, match="layer.0.ffn.up"):
        model.trace("the cat sat on the mat", edits={"layer.0.ffn.up": edit})


def test_unlocking_the_input_is_refused_even_without_inf(model):
    def unlock(a):
        a.flags.writeable = True
        a *= 2
        return a
    with pytest.raises(EditError, match="writeable"):
        model.trace("the cat sat on the mat", edits={"layer.1.attn.out": unlock})


def test_the_padding_minus_inf_still_passes_through_an_edit(model):
    tr = model.trace("the cat sat", pad_to=8, edits={"layer.0.attn.scores": lambda s: s * 1.0})
    assert np.isneginf(tr["layer.0.attn.scores"][..., -1]).all()
    with pytest.raises(EditError, match="infinite"):
        model.trace("the cat sat", pad_to=8, edits={"layer.0.attn.scores": lambda s: -s})  # -inf became +inf
