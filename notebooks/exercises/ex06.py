"""Lesson 06 · Residuals and LayerNorm: the checkers."""
from course.checks import close, exercise, within
from exercises._common import f64, gain_bias, normalise


def _ln_mistakes(tr, layer):
    x, eps = f64(tr.get("attn.resid", layer=layer)), tr.config.layer_norm_eps
    g, b = gain_bias(x, tr.get("attn.ln", layer=layer), eps)
    return {"that is x_hat: multiply by gamma and add beta": normalise(x, eps),
            "you normalised over the tokens (axis 0): LayerNorm normalises each token over its features":
                g * normalise(x, eps, axis=0) + b,
            "you used ddof=1 (the sample variance, dividing by H - 1): LayerNorm divides by H":
                g * normalise(x, eps, ddof=1) + b,
            "you divided by the variance: LayerNorm divides by its square root":
                g * (x - x.mean(-1, keepdims=True)) / (x.var(-1, keepdims=True) + eps) + b,
            "the residual is missing: this LayerNorm reads attn.resid = Z_(l-1) + attn.out, not attn.out alone":
                g * normalise(tr.get("attn.out", layer=layer), eps) + b,
            "you left out beta: after multiplying by gamma, add beta": g * normalise(x, eps)}


@exercise("06.1", hint=("LayerNorm(x) = gamma * (x - mean) / sqrt(var + eps) + beta, the mean and variance of each "
                        "token's own H features",
                        "over which axis lie a token's H features, and how do you keep that axis in the mean so "
                        "that it broadcasts back over the row?"), mistakes=_ln_mistakes)
def _(answer, *, tr, layer):
    return close(answer, tr.get("attn.ln", layer=layer), atol=1e-4)


def _x_hat_mistakes(tr, layer):
    x, z, eps = f64(tr.get("attn.resid", layer=layer)), f64(tr.get("attn.ln", layer=layer)), tr.config.layer_norm_eps
    g, b = gain_bias(x, z, eps)
    return {"you multiplied by gamma: undo it by dividing": (z - b) * g,
            "you divided before subtracting beta: beta was added last, so take it off first": z / g - b,
            "that is the LayerNorm's output itself: take beta off and divide by gamma": z,
            "you normalised attn.ln again: gamma and beta differ per feature, so undo them instead": normalise(z, eps),
            "you took beta off but did not divide by gamma": z - b,
            "you divided by gamma but did not take beta off first": z / g}


@exercise("06.2", hint=("undo the last step of LayerNorm: it multiplied by gamma and added beta",
                        "which was done last, the multiplication by gamma or the addition of beta, and so which do "
                        "you undo first?"), mistakes=_x_hat_mistakes)
def _(answer, *, tr, layer):
    resid = f64(tr.get("attn.resid", layer=layer))
    expected = (resid - resid.mean(-1, keepdims=True)) / resid.std(-1, keepdims=True)  # mean 0, std 1 per row
    return close(answer, expected, atol=1e-3)


@exercise("06.3", hint=("with gamma = 1 and beta = 0, the output is (x - mu) / sqrt(sigma^2 + eps): what standard "
                        "deviation does a row have after you divide it by its own?",),
          prediction=True, wrong=lambda answer, actual: [0.0, 0.5, 768.0],
          mistakes=lambda actual: {"0 is a normalised row's mean: the question asks for its standard deviation": 0.0})
def _(answer, *, actual):
    return within(answer, actual - 0.05, actual + 0.05, "your prediction")
