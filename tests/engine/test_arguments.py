"""Arguments name themselves when they are wrong; any integer type is accepted.
"""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite.backend import to_host

from ..conftest import SMALL


def test_bad_arguments_name_themselves(small):
    with pytest.raises(ValueError, match="seed"):
        bv.load("random", seed=-1, config=SMALL)
    with pytest.raises(TypeError, match="seed"):
        bv.load("random", seed=1.5, config=SMALL)
    with pytest.raises(TypeError, match="dtype"):
        small.trace("hi", dtype=["float16"])
    with pytest.raises(TypeError, match="max_bytes"):
        small.trace("hi", max_bytes="1e9")
    with pytest.raises(ValueError, match="max_bytes"):
        small.trace("hi", max_bytes=-1)
    assert small.trace("hi", max_bytes=1e9).keys()  # a float number of bytes is fine


def test_numpy_integers_are_accepted(small):
    tr = small.trace("numpy integers", pad_to=np.int64(12))
    assert len(tr.tokens) == 12
    assert small.tokenize("numpy integers", pad_to=np.int32(10)).ids[-1] == 0
    np.testing.assert_array_equal(to_host(tr.get("attn.probs", layer=np.int64(1), head=np.int8(2))),
                                  to_host(tr.get("attn.probs", layer=1, head=2)))
    for bad in (np.float64(1.0), True, "1"):
        with pytest.raises(TypeError, match="layer"):
            tr.get("attn.probs", layer=bad)
        with pytest.raises(TypeError, match="pad_to"):
            small.trace("x", pad_to=bad)
    with pytest.raises(bv.OutOfRangeError):
        tr.get("attn.probs", layer=np.int64(2))
