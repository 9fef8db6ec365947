"""Exercises of lesson 03 (positions)."""
import numpy as np

from course.checks import close, equals, exercise
from exercises._common import f64


def _sinusoids(n, d, *, swap=False, half=False, start=0, blocks=False):
    i2 = np.arange(0, d, 2) if not half else np.arange(d // 2)  # 2i (right) or i (the exponent halved)
    angle = np.arange(start, start + n)[:, None] / 10000 ** (i2[None, :] / d)
    sin, cos = (np.cos(angle), np.sin(angle)) if swap else (np.sin(angle), np.cos(angle))
    if blocks:
        return np.concatenate([sin, cos], axis=1)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = sin, cos
    return pe


def _sinusoids_times(n, d):
    angle = np.arange(n)[:, None] * 10000 ** (np.arange(0, d, 2)[None, :] / d)
    pe = np.zeros((n, d))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def _pe_mistakes():
    return {"sin and cos are swapped: even columns (0, 2, ...) hold sin, odd columns cos":
            _sinusoids(64, 16, swap=True),
            "the exponent is 2i / d with 2i = 0, 2, ..., 14; you used i = 0, 1, ..., 7": _sinusoids(64, 16, half=True),
            "positions start at 0, not 1": _sinusoids(64, 16, start=1),
            "sin and cos interleave (columns 0::2 and 1::2); you put all the sines first, then the cosines":
                _sinusoids(64, 16, blocks=True),
            "you multiplied p by 10000^(2i/d): the angle divides it, p / 10000^(2i/d)":
                _sinusoids_times(64, 16),
            "every column holds a sine: the odd columns 1, 3, ... hold the cosine of the same angle":
                np.sin(np.arange(64)[:, None] / 10000 ** ((np.arange(16) // 2 * 2)[None, :] / 16))}


@exercise("03.1", hint=("PE[p, 2i] = sin(p / 10000^(2i/d)) and PE[p, 2i+1] = cos of the same angle, "
                        "for p in 0..63 and d = 16",
                        "how many different angles does one position have when d = 16, and which columns of PE take "
                        "the sin?"),
          mistakes=_pe_mistakes)
def _(answer):
    return close(answer, _sinusoids(64, 16), atol=1e-6)


def _diagonals(c, ks):
    return np.array([np.diagonal(c, offset=k).mean() for k in ks])


def _decay_mistakes(W_P):
    W_P = f64(W_P)
    u = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
    c = u @ u.T
    return {"those are dot products: normalise the rows first so each pair gives a cosine":
            _diagonals(W_P @ W_P.T, range(1, 33)),
            "your offsets are 0..31: k = 0 is each position with itself (1.0); the offsets are 1..32":
                _diagonals(c, range(0, 32)),
            "you summed each diagonal: average it (its length shrinks as k grows)":
                np.array([np.diagonal(c, offset=k).sum() for k in range(1, 33)]),
            "you stopped at k = 31: the offsets run 1..32, range(1, 33)": _diagonals(c, range(1, 32)),
            "you normalised the columns (axis 0): a position is a row of W_P, so make each row a unit vector":
                _diagonals((W_P / np.linalg.norm(W_P, axis=0)) @ (W_P / np.linalg.norm(W_P, axis=0)).T, range(1, 33))}


@exercise("03.2", hint=("the cosine of positions p and p + k, averaged over p, for k = 1..32",
                        "after normalising the rows of W_P, one matrix product gives every pair's cosine: where in "
                        "that table do the pairs k apart sit, and how many pairs are there for each k?"),
          mistakes=_decay_mistakes)
def _(answer, *, W_P):
    W_P = f64(W_P)
    u = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
    return close(answer, _diagonals(u @ u.T, range(1, 33)), atol=1e-6)


@exercise("03.3", hint=("predict first: are the learned table's neighbours more alike than the sinusoids'? "
                        "answer True or False",),
          prediction=True, wrong=lambda answer, **ctx: [not answer, "yes"])
def _(answer, *, learned, sine):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__}"
    return equals(bool(answer), bool(learned > sine))
