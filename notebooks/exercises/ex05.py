"""Lesson 05 · Residuals and LayerNorm: the checkers."""
import numpy as np

from course import close, exercise, within


@exercise("05.1", hint="x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps); "
                       "then gamma * x_hat + beta")
def _(answer, *, tr, layer):
    return close(answer, tr.get("attn.ln", layer=layer), atol=1e-4)


@exercise("05.2", hint="(tr.get('attn.ln', layer=LAYER) - beta) / gamma")
def _(answer, *, tr, layer):
    resid = np.asarray(tr.get("attn.resid", layer=layer), dtype=np.float64)
    expected = (resid - resid.mean(-1, keepdims=True)) / resid.std(-1, keepdims=True)  # mean 0, std 1 per row
    return close(answer, expected, atol=1e-3)


@exercise("05.3", hint="with gamma = 1 and beta = 0, the output is (x - mu) / sqrt(sigma^2 + eps): what std "
                       "does that have?", wrong=lambda answer, actual: [0.0, 0.5, 768.0])
def _(answer, *, actual):
    return within(answer, actual - 0.05, actual + 0.05, "your prediction")
