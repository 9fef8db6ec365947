"""Exercises of lesson 11 (errata and what-ifs)."""
import numpy as np

from course import close, equals, exercise


@exercise("11.1", hint="up / (1 + np.exp(-1.702 * up)): x times the logistic sigmoid of 1.702 x")
def _(answer, *, tr):
    return close(answer, tr.get("ffn.act", layer=0), atol=1e-5)


@exercise("11.2", hint="Q @ K.transpose(0, 2, 1) / np.sqrt(H): the model width H, not the head width d_k")
def _(answer, *, tr):
    return close(answer, np.asarray(tr.get("attn.scores", layer=0), dtype=np.float64), atol=1e-4)


@exercise("11.3", hint="without W^O, attn.out is the concatenation: one head owns d_k columns; "
                       "then ffn.up reads every column of the LayerNorm's output",
          wrong=lambda answer, **ctx: [(ctx["actual"][0], ctx["actual"][0]), (0, 0), ctx["actual"][0]])
def _(answer, *, actual):
    return equals(tuple(answer) if isinstance(answer, (list, tuple)) else answer, tuple(actual))
