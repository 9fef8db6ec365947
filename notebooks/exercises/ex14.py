"""Exercises of lesson 14 (batching and masks)."""
import numpy as np
import scipy.special

from course.checks import close, exercise, sequence
from exercises._common import f64


def _expected_mask(tr):
    scores = f64(tr.get("attn.scores", layer=0, head=0))
    return np.where(np.isneginf(scores), -np.inf, 0.0)


def _mask_mistakes(tr, others=()):
    expected = _expected_mask(tr)
    hidden = np.isneginf(expected)
    out = {"your mask is transposed: it hides [PAD] queries (rows); it must hide [PAD] keys (columns)": expected.T,
           "you used -1e9 (the article's mask): BERT adds -inf, so a [PAD] key gets exactly 0":
               np.where(hidden, -1e9, 0.0),
           "you used -1e4 (old TensorFlow BERT's mask): here the masked score is -inf": np.where(hidden, -1e4, 0.0),
           "that is the 0/1 mask itself: the additive mask is 0 for a real key and -inf for [PAD]":
               np.where(hidden, 0.0, 1.0),
           "that is one row, [n]: the map's mask is [n, n], the same row repeated for every query": expected[0],
           "your mask is the other way round: -inf goes on the [PAD] keys, 0 on the real ones":
               np.where(hidden, 0.0, -np.inf)}
    for other in others:  # another sentence of the batch: the same n, other [PAD] columns
        theirs = _expected_mask(other)
        if not np.array_equal(np.isneginf(theirs), hidden):
            out["that mask belongs to another sentence of the batch: take the row of mask for sentence b"] = theirs
            break
    return out


@exercise("14.1", hint=("a [PAD] key is hidden from every query: the mask is one row, the same for every query, "
                        "0 for a real key and -inf for [PAD]",
                        "which row of mask belongs to sentence b, and how do you turn that [n] row into an [n, n] "
                        "array whose every row is the same?"),
          wrong=lambda answer, **ctx: [np.zeros_like(np.asarray(answer, dtype=float)),
                                       np.asarray(answer, dtype=float).T],
          mistakes=_mask_mistakes)
def _(answer, *, tr, others=()):
    return close(answer, _expected_mask(tr))


def _causal_mistakes(tr):
    s = f64(tr.get("attn.scores", layer=0))
    n = s.shape[-1]
    future = np.triu(np.ones((n, n), bool), k=1)

    def soft(hide, axis=-1):
        return scipy.special.softmax(s + np.where(hide, -np.inf, 0.0), axis=axis)

    return {"your mask is the lower triangle: it hides the past; hide the keys after the query (np.triu, k=1)":
            soft(future.T),
            "you took the softmax over the queries (axis -2): each query's row sums to 1": soft(future, axis=-2),
            "that is the softmax without any mask: BERT's own map; add -inf above the diagonal first":
                soft(np.zeros((n, n), bool)),
            "you hid the diagonal too (k=0): a query may see itself; hide only the keys after it (k=1)":
                soft(np.triu(np.ones((n, n), bool), k=0)),
            "those are the masked scores: the map is their softmax over the keys": s + np.where(future, -np.inf, 0.0)}


@exercise("14.2", hint=("a causal mask hides the future: query i may see keys 0..i only, so -inf above the diagonal",
                        "which entries of the [n, n] map lie above the diagonal (a key after its query), and over "
                        "which axis must the softmax run so each query's row sums to 1?"), mistakes=_causal_mistakes)
def _(answer, *, tr):
    s = f64(tr.get("attn.scores", layer=0))
    n = s.shape[-1]
    future = np.triu(np.ones((n, n), bool), k=1)
    return close(answer, scipy.special.softmax(s + np.where(future, -np.inf, 0.0), axis=-1), atol=1e-6)


@exercise("14.3", hint=("predict first: batch first, then what t.stack adds: (B, layer, head, query, key)",),
          prediction=True,
          mistakes=lambda actual: {"the batch axis comes first: (B, layer, head, query, key)":
                                   (actual[1], actual[0], *actual[2:]),
                                   "t.stack adds the layer axis before the heads: (B, layer, head, query, key)":
                                   (actual[0], actual[2], actual[1], *actual[3:]),
                                   "the batch keeps its own axis in front: five axes, (B, layer, head, query, key)":
                                   tuple(actual[1:])})
def _(answer, *, actual):
    return sequence(answer, tuple(actual), "your shape")
