"""Exercises of lesson 13 (batching and masks)."""
import numpy as np
import scipy.special

from course import close, equals, exercise


@exercise("13.1", hint="np.where(np.array(mask[b])[None, :] == 0, -np.inf, 0.0) broadcast to (n, n): "
                       "the same row for every query",
          wrong=lambda answer, **ctx: [np.zeros_like(np.asarray(answer, dtype=float)),
                                       np.asarray(answer, dtype=float).T])
def _(answer, *, tr):
    scores = np.asarray(tr.get("attn.scores", layer=0, head=0), dtype=np.float64)
    expected = np.where(np.isneginf(scores), -np.inf, 0.0)
    return close(answer, expected)


@exercise("13.2", hint="E0 + np.where(np.triu(np.ones((n, n), bool), k=1), -np.inf, 0), then "
                       "scipy.special.softmax(..., axis=-1)")
def _(answer, *, tr):
    s = np.asarray(tr.get("attn.scores", layer=0), dtype=np.float64)
    n = s.shape[-1]
    expected = scipy.special.softmax(s + np.where(np.triu(np.ones((n, n), bool), k=1), -np.inf, 0.0), axis=-1)
    return close(answer, expected, atol=1e-6)


@exercise("13.3", hint="batch first, then what t.stack adds: (B, layer, head, query, key)")
def _(answer, *, actual):
    return equals(tuple(answer) if isinstance(answer, (list, tuple)) else answer, tuple(actual))
