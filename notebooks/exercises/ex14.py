"""Exercises of lesson 14 (batching and masks)."""
import numpy as np
import scipy.special

from course import close, equals, exercise


@exercise("14.1", hint=("a [PAD] key is hidden from every query: the mask is one row, the same for every query, "
                        "0 for a real key and -inf for [PAD]",
                        "build that row from mask[b] with np.where, then broadcast it to (n, n) with a new first axis"),
          wrong=lambda answer, **ctx: [np.zeros_like(np.asarray(answer, dtype=float)),
                                       np.asarray(answer, dtype=float).T])
def _(answer, *, tr):
    scores = np.asarray(tr.get("attn.scores", layer=0, head=0), dtype=np.float64)
    expected = np.where(np.isneginf(scores), -np.inf, 0.0)
    return close(answer, expected, mistakes={
        "your mask is transposed: it hides [PAD] queries (rows); it must hide [PAD] keys (columns)": expected.T,
        "you used -1e9 (the article's mask): BERT adds -inf, so a [PAD] key gets exactly 0":
            np.where(np.isneginf(expected), -1e9, 0.0)})


@exercise("14.2", hint=("a causal mask hides the future: query i may see keys 0..i only, so -inf above the diagonal",
                        "np.triu(..., k=1) marks the entries above the diagonal; add the mask to E0 and take the "
                        "softmax over the keys (the last axis)"))
def _(answer, *, tr):
    s = np.asarray(tr.get("attn.scores", layer=0), dtype=np.float64)
    n = s.shape[-1]
    future = np.triu(np.ones((n, n), bool), k=1)
    expected = scipy.special.softmax(s + np.where(future, -np.inf, 0.0), axis=-1)
    return close(answer, expected, atol=1e-6, mistakes={
        "your mask hides the past (below the diagonal): hide the keys after the query":
            scipy.special.softmax(s + np.where(future.T, -np.inf, 0.0), axis=-1),
        "you took the softmax over the queries (axis -2): each query's row sums to 1":
            scipy.special.softmax(s + np.where(future, -np.inf, 0.0), axis=-2)})


@exercise("14.3", hint=("predict first: batch first, then what t.stack adds: (B, layer, head, query, key)",),
          prediction=True)
def _(answer, *, actual):
    return equals(tuple(answer) if isinstance(answer, (list, tuple)) else answer, tuple(actual))
