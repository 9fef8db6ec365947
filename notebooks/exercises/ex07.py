"""Lesson 07 · The feed-forward block: the checkers."""
import numpy as np
from scipy.special import erf

from course.checks import close, exercise, within
from exercises._common import f64, gain_bias, normalise


def _gelu_mistakes(tr, layer):
    x = f64(tr.get("ffn.up", layer=layer))
    return {"you used ReLU, max(0, x) (the card's activation): BERT uses GELU": np.maximum(x, 0.0),
            "you used the tanh approximation of GELU: BERT-base uses the exact erf form":
                0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
            "you used the sigmoid approximation x * sigmoid(1.702 x): BERT-base uses the exact erf form":
                x / (1 + np.exp(-1.702 * x)),
            "you computed Phi(x) alone: GELU is x * Phi(x)": 0.5 * (1 + erf(x / np.sqrt(2))),
            "you divided by 2 inside erf: Phi(x) = (1 + erf(x / sqrt(2))) / 2": 0.5 * x * (1 + erf(x / 2)),
            "you left out the 1/2: Phi(x) = (1 + erf(x / sqrt(2))) / 2 runs from 0 to 1": x * (1 + erf(x / np.sqrt(2))),
            "you applied GELU to ffn.act, the activation's output: GELU reads the up-projection ffn.up":
                0.5 * f64(tr.get("ffn.act", layer=layer)) * (1 + erf(f64(tr.get("ffn.act", layer=layer)) / np.sqrt(2)))}


@exercise("07.1", hint=("BERT's GELU is exact: x times Phi(x), the standard normal's cumulative distribution, "
                        "which is written with erf",
                        "erf is the error function of a normal with variance 1/2: how must x be scaled inside erf "
                        "to give the standard normal's Phi(x), and what multiplies Phi(x)?"),
          mistakes=_gelu_mistakes)
def _(answer, *, tr, layer):
    return close(answer, tr.get("ffn.act", layer=layer), atol=1e-5)


@exercise("07.2", hint=("ReLU drops the negative side, where most pre-activations are (the Check section): "
                        "how far does that turn the block's output?",),
          prediction=True, wrong=lambda answer, actual: [1.0, -1.0, 2.0, "0.5", actual + 0.15, actual - 0.15])
def _(answer, *, actual):
    return within(answer, actual - 0.1, actual + 0.1, "your prediction")


def _block_mistakes(tr, layer):
    eps = tr.config.layer_norm_eps
    down, resid = f64(tr.get("ffn.down", layer=layer)), f64(tr.get("ffn.resid", layer=layer))
    g, b = gain_bias(resid, tr.get("ffn.ln", layer=layer), eps)
    layer_in = f64(tr["embed.ln"] if layer == 0 else tr.get("ffn.ln", layer=layer - 1))
    ga, ba = gain_bias(tr.get("attn.resid", layer=layer), tr.get("attn.ln", layer=layer), eps)
    return {"the residual is missing: LayerNorm reads attn.ln + the down-projection, not the down-projection alone":
            g * normalise(down, eps) + b,
            "wrong stream: the residual adds this block's input, attn.ln (Z-bar), not the layer's input Z_(l-1)":
                g * normalise(layer_in + down, eps) + b,
            "the LayerNorm is missing: that is the residual sum ffn.resid; normalise it with ffn.ln's gamma and beta":
                resid,
            "that is x_hat: the LayerNorm then multiplies by gamma and adds beta": normalise(resid, eps),
            "you used attn.ln's gamma and beta: this LayerNorm has its own, ffn.ln's": ga * normalise(resid, eps) + ba,
            "your LayerNorm used ddof=1 (divides by H - 1): LayerNorm divides by H":
                g * normalise(resid, eps, ddof=1) + b}


@exercise("07.3", hint=("the block's output is LayerNorm(its input + W_down applied to the activations), "
                        "every row on its own",
                        "which array is the residual that skips the feed-forward block, the layer's input or "
                        "attn.ln, and which LayerNorm's gamma and beta normalise the sum?"),
          mistakes=_block_mistakes)
def _(answer, *, tr, layer):
    return close(answer, tr.get("ffn.ln", layer=layer), atol=1e-4)
