"""Lesson 07 · The feed-forward block: the checkers."""
import numpy as np
from scipy.special import erf

from course import close, exercise, within


@exercise("07.1", hint=("BERT's GELU is exact: x times Phi(x), the standard normal's cumulative distribution, "
                        "which is written with erf",
                        "Phi(x) = (1 + erf(x / sqrt(2))) / 2; apply it to the layer's ffn.up, element by element"))
def _(answer, *, tr, layer):
    x = np.asarray(tr.get("ffn.up", layer=layer), dtype=np.float64)
    return close(answer, tr.get("ffn.act", layer=layer), atol=1e-5, mistakes={
        "you used ReLU, max(0, x) (the card's activation): BERT uses GELU": np.maximum(x, 0.0),
        "you used the tanh approximation of GELU: BERT-base uses the exact erf form": 0.5 * x * (
            1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
        "you used the sigmoid approximation x * sigmoid(1.702 x): BERT-base uses the exact erf form":
            x / (1 + np.exp(-1.702 * x)),
        "you computed Phi(x) alone: GELU is x * Phi(x)": 0.5 * (1 + erf(x / np.sqrt(2)))})


@exercise("07.2", hint=("ReLU drops the negative side, where most pre-activations are (the Check section): "
                        "how far does that turn the block's output?",),
          prediction=True, wrong=lambda answer, actual: [1.0, -1.0, 2.0, "0.5", actual + 0.15, actual - 0.15])
def _(answer, *, actual):
    return within(answer, actual - 0.1, actual + 0.1, "your prediction")


@exercise("07.3", hint=("the block's output is LayerNorm(its input + W_down applied to the activations), "
                        "every row on its own",
                        "down-project ffn.act with W_down and b_down, add the layer's attn.ln (the residual), "
                        "then the LayerNorm with the ffn.ln gamma and beta"))
def _(answer, *, tr, layer):
    return close(answer, tr.get("ffn.ln", layer=layer), atol=1e-4)
