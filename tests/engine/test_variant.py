"""model.variant: errors name what is wrong; nested lists and shape-preserving changes are kept.
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.backend import to_host


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(weights={"layer.0.attn.W_O": "abc"}), TypeError, r"variant weight 'layer\.0\.attn\.W_O'.*real numbers"),
    (dict(weights=[("layer.0.attn.W_O", 1)]), TypeError, r"weights=\) takes a dict"),
    (dict(weights="layer.0.attn.W_O"), TypeError, r"weights=\) takes a dict"),
    (dict(weights={"layer.0.attn.W_O": 1.0}), ValueError, r"layer\.0\.attn\.W_O has \(1,\), the config needs \(64, 64\)"),
    (dict(foo=1), TypeError, r"\['foo'\], which are not config fields"),
    (dict(num_layers=5), ValueError, r"variant\(num_layers=5\).*layer\.2\.attn\.W_Q \(64, 64\) is missing"),
    (dict(hidden_size=32), ValueError, r"embed\.W_T has \(30522, 64\), the config needs \(30522, 32\)"),
    (dict(ffn_size=128), ValueError, r"layer\.0\.ffn\.W_up has \(64, 256\), the config needs \(64, 128\)"),
    (dict(attention_scale="x"), ValueError, r"attention_scale must be None"),
])
def test_variant_errors_name_what_is_wrong(small, kwargs, error, match):
    with pytest.raises(error, match=match):
        small.variant(**kwargs)


def test_variant_takes_nested_lists_and_keeps_shape_preserving_changes(small):
    W = to_host(small.weights["layer.0.attn.W_O"])
    v = small.variant(weights={"layer.0.attn.W_O": (2 * W).tolist()}, num_heads=2, attention_scale=0.5)
    np.testing.assert_array_equal(to_host(v.weights["layer.0.attn.W_O"]), 2 * W)
    assert v.config.num_heads == 2 and bv.count_params(v).total == bv.count_params(small).total
