"""Exercises of lesson 13 (errata and what-ifs)."""
import numpy as np
from scipy.special import erf

from course import close, equals, exercise


@exercise("13.1", hint=("the article's GELU is x times the logistic sigmoid of 1.702 x",
                        "the logistic sigmoid of z is 1 / (1 + exp(-z)); here z = 1.702 x, element by element"))
def _(answer, *, tr):
    x = np.asarray(tr.get("ffn.up", layer=0), dtype=np.float64)
    return close(answer, tr.get("ffn.act", layer=0), atol=1e-5, mistakes={
        "that is the exact erf GELU: this what-if uses the article's sigmoid form": 0.5 * x * (1 + erf(x / np.sqrt(2))),
        "you used ReLU: this what-if uses x * sigmoid(1.702 x)": np.maximum(x, 0.0)})


@exercise("13.2", hint=("the article's erratum divides the scores by sqrt of the model width H, not of the head "
                        "width d_k",
                        "Q and K are [head, n, d_k]: swap the last two axes of K, multiply, then divide by sqrt(H)"))
def _(answer, *, tr):
    expected = np.asarray(tr.get("attn.scores", layer=0), dtype=np.float64)
    d_k = tr.config.hidden_size // tr.config.num_heads
    return close(answer, expected, atol=1e-4, mistakes={
        "you divided by sqrt(d_k): this what-if divides by sqrt(H), the model width":
            expected * np.sqrt(tr.config.hidden_size) / np.sqrt(d_k)})


@exercise("13.3", hint=("predict first: without W^O, attn.out is the concatenation of the heads' outputs, so each "
                        "head owns its own block of columns; how wide is a block in MiniLM?",
                        "head h's block starts at column h * d_k; two neighbouring heads own two neighbouring blocks"),
          prediction=True,
          wrong=lambda answer, **ctx: [(ctx["actual"][0] // 2, ctx["actual"][1]), (ctx["actual"][0], 0),
                                       (ctx["actual"][0], ctx["actual"][1] + ctx["actual"][0] // 2),
                                       (ctx["actual"][0] * 6, 0)])
def _(answer, *, actual):
    return equals(tuple(answer) if isinstance(answer, (list, tuple)) else answer, tuple(actual))
