"""Exercises of lesson 15 (positions)."""
import numpy as np

from course import close, equals, exercise


def _sinusoids(n, d):
    angle = np.arange(n)[:, None] / 10000 ** (np.arange(0, d, 2)[None, :] / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


@exercise("15.1", hint="angle = p / 10000 ** (2i / d) for p in 0..63 (rows) and 2i in 0, 2, ..., 14 (columns); "
                       "even columns sin(angle), odd columns cos(angle)")
def _(answer):
    return close(answer, _sinusoids(64, 16), atol=1e-6)


@exercise("15.2", hint="normalise the rows of W_P, then for each k take the mean of np.diagonal(U @ U.T, offset=k)")
def _(answer, *, W_P):
    u = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
    c = u @ u.T
    return close(answer, [np.diagonal(c, offset=k).mean() for k in range(1, 33)], atol=1e-6)


@exercise("15.3", hint="compare the two numbers the cell prints: the sinusoids' neighbours are more alike",
          wrong=lambda answer, **ctx: [not answer, "yes"])
def _(answer, *, learned, sine):
    return equals(answer, bool(learned > sine))
