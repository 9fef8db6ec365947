"""Exercises of lesson 03 (positions)."""
import numpy as np

from course import close, equals, exercise


def _sinusoids(n, d):
    angle = np.arange(n)[:, None] / 10000 ** (np.arange(0, d, 2)[None, :] / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


@exercise("03.1", hint=("PE[p, 2i] = sin(p / 10000^(2i/d)) and PE[p, 2i+1] = cos of the same angle, "
                        "for p in 0..63 and d = 16",
                        "build the angles as a [64, 8] table by broadcasting a column of positions against a row "
                        "of 2i = 0, 2, ..., 14; fill columns 0::2 with sin and 1::2 with cos"))
def _(answer):
    return close(answer, _sinusoids(64, 16), atol=1e-6)


@exercise("03.2", hint=("the cosine of positions p and p + k, averaged over p, for k = 1..32",
                        "normalise the rows of W_P; one matrix product gives every pair's cosine; the k-th "
                        "diagonal above the main one holds the pairs k apart (np.diagonal(..., offset=k))"))
def _(answer, *, W_P):
    u = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
    c = u @ u.T
    return close(answer, [np.diagonal(c, offset=k).mean() for k in range(1, 33)], atol=1e-6)


@exercise("03.3", hint=("predict first: are the learned table's neighbours more alike than the sinusoids'? "
                        "answer True or False",),
          prediction=True, wrong=lambda answer, **ctx: [not answer, "yes"])
def _(answer, *, learned, sine):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__}"
    return equals(bool(answer), bool(learned > sine))
