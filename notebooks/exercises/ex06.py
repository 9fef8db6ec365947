"""Lesson 06 · Residuals and LayerNorm: the checkers."""
import numpy as np

from course import close, exercise, within


def _stats(x, eps):
    x = np.asarray(x, dtype=np.float64)
    return x.mean(-1, keepdims=True), x.var(-1, keepdims=True), eps


@exercise("06.1", hint=("LayerNorm(x) = gamma * (x - mean) / sqrt(var + eps) + beta, the mean and variance of each "
                        "token's own H features",
                        "take the mean and the variance over the last axis with keepdims=True; eps is BERT's 1e-12"))
def _(answer, *, tr, layer):
    x = np.asarray(tr.get("attn.resid", layer=layer), dtype=np.float64)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + tr.config.layer_norm_eps)
    mu0, var0 = x.mean(0, keepdims=True), x.var(0, keepdims=True)
    return close(answer, tr.get("attn.ln", layer=layer), atol=1e-4, mistakes={
        "that is x_hat: multiply by gamma and add beta": x_hat,
        "you normalised over the tokens (axis 0): LayerNorm normalises each token over its features":
            (x - mu0) / np.sqrt(var0 + tr.config.layer_norm_eps)})


@exercise("06.2", hint=("undo the last step of LayerNorm: it multiplied by gamma and added beta",
                        "start from the layer's attn.ln output, subtract beta, then divide by gamma"))
def _(answer, *, tr, layer):
    resid = np.asarray(tr.get("attn.resid", layer=layer), dtype=np.float64)
    expected = (resid - resid.mean(-1, keepdims=True)) / resid.std(-1, keepdims=True)  # mean 0, std 1 per row
    return close(answer, expected, atol=1e-3)


@exercise("06.3", hint=("with gamma = 1 and beta = 0, the output is (x - mu) / sqrt(sigma^2 + eps): what standard "
                        "deviation does a row have after you divide it by its own?",),
          prediction=True, wrong=lambda answer, actual: [0.0, 0.5, 768.0])
def _(answer, *, actual):
    return within(answer, actual - 0.05, actual + 0.05, "your prediction")
