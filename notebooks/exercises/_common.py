"""Helpers the checkers share: float64 reads of the trace, LayerNorm, softmax, and a LayerNorm's gain and
bias recovered from its own input and output (so a checker can rebuild a mistake without the weights)."""
import numpy as np


def f64(x):
    return np.asarray(x, dtype=np.float64)


def normalise(x, eps, *, axis=-1, ddof=0):
    """(x - mean) / sqrt(var + eps) over `axis`."""
    x = f64(x)
    return (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, ddof=ddof, keepdims=True) + eps)


def gain_bias(x, out, eps):
    """The per-feature gamma and beta with out = gamma * normalise(x) + beta, fitted over the tokens
    (exact up to the trace's float32 rounding: a straight line per feature through n points)."""
    xh, out = normalise(x, eps), f64(out)
    xc, oc = xh - xh.mean(0), out - out.mean(0)
    gamma = (xc * oc).sum(0) / (xc * xc).sum(0)
    return gamma, out.mean(0) - gamma * xh.mean(0)


def softmax(s, axis=-1):
    s = f64(s)
    s = s - np.max(np.where(np.isfinite(s), s, -np.inf), axis=axis, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)
