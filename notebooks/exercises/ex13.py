"""Exercises of lesson 13 (errata and what-ifs)."""
import numpy as np
from scipy.special import erf

from course.checks import close, exercise, sequence
from exercises._common import f64, softmax


def _act_mistakes(tr):
    x = f64(tr.get("ffn.up", layer=0))
    return {"that is the exact erf GELU: this what-if uses the article's sigmoid form":
            0.5 * x * (1 + erf(x / np.sqrt(2))),
            "you used ReLU: this what-if uses x * sigmoid(1.702 x)": np.maximum(x, 0.0),
            "you left out the 1.702: that is x * sigmoid(x) (SiLU), not the article's GELU": x / (1 + np.exp(-x)),
            "you computed sigmoid(1.702 x) alone: multiply it by x": 1 / (1 + np.exp(-1.702 * x)),
            "that is GELU's tanh approximation: this what-if uses the article's sigmoid form, x * sigmoid(1.702 x)":
                0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
            "the sign inside exp is flipped: sigmoid(z) = 1 / (1 + exp(-z))": x / (1 + np.exp(1.702 * x))}


@exercise("13.1", hint=("the article's GELU is x times the logistic sigmoid of 1.702 x",
                        "the logistic sigmoid of z is 1 / (1 + exp(-z)): what is z here, and what multiplies the "
                        "sigmoid?"), mistakes=_act_mistakes)
def _(answer, *, tr):
    return close(answer, tr.get("ffn.act", layer=0), atol=1e-5)


def _scale_mistakes(tr):
    Q, K = f64(tr.get("attn.q", layer=0)), f64(tr.get("attn.k", layer=0))
    QK, H, d_k = Q @ K.transpose(0, 2, 1), tr.config.hidden_size, Q.shape[-1]
    return {"you divided by sqrt(d_k): this what-if divides by sqrt(H), the model width": QK / np.sqrt(d_k),
            "you did not scale at all: the erratum divides by sqrt(H)": QK,
            "you divided by H: the erratum divides by its square root": QK / H,
            "you computed K Q^T: rows are queries, so Q K^T": K @ Q.transpose(0, 2, 1) / np.sqrt(H),
            f"you divided by sqrt(768), BERT-base's width: this model's H is {H} (tr.config.hidden_size)":
                QK / np.sqrt(768),
            "those are probabilities (a softmax): the exercise asks for the scores before it":
                softmax(QK / np.sqrt(H))}


@exercise("13.2", hint=("the article's erratum divides the scores by sqrt of the model width H, not of the head "
                        "width d_k",
                        "Q and K are [head, n, d_k]: which two axes of K must swap so that each head multiplies "
                        "[n, d_k] by [d_k, n], and which width goes under the square root?"), mistakes=_scale_mistakes)
def _(answer, *, tr):
    return close(answer, tr.get("attn.scores", layer=0), atol=1e-4)


@exercise("13.3", hint=("predict first: without W^O, attn.out is the concatenation of the heads' outputs, so each "
                        "head owns its own block of columns; how wide is a block in MiniLM?",
                        "head h's block starts at column h * d_k: how many columns do two neighbouring heads own, "
                        "and where does head 5's block start?"),
          prediction=True,
          wrong=lambda answer, **ctx: [(ctx["actual"][0] // 2, ctx["actual"][1]), (ctx["actual"][0], 0),
                                       (ctx["actual"][0], ctx["actual"][1] + ctx["actual"][0] // 2),
                                       (ctx["actual"][0] * 6, 0)],
          mistakes=lambda actual: {"that is one head's block, d_k columns: two neighbouring heads own twice that":
                                   (actual[0] // 2, actual[1]),
                                   "the pair's block does not start at column 0: head h's block starts at h * d_k":
                                   (actual[0], 0)})
def _(answer, *, actual):
    return sequence(answer, tuple(actual), "your (columns, first column)")
