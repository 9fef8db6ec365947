"""Exercises of lesson 10 (exploring attention)."""
import numpy as np

from bertviz_lite import analysis
from course import close, equals, exercise

TARGETS = ("[CLS]", "[SEP]", "punct", "prev", "next")


@exercise("10.1", hint="-np.sum(P * np.log(P)) / n, with the 0 log 0 entries left out (np.where(P > 0, ...))")
def _(answer, *, tr, layer, head):
    return close(answer, analysis.head_entropy(tr)[layer, head], atol=1e-6)


@exercise("10.2", hint="np.diagonal(P0, axis1=1, axis2=2).mean(axis=1): A[q, q] averaged over the queries")
def _(answer, *, tr):
    return close(answer, analysis.attention_to(tr, ["self"])["self"][0], atol=1e-6)


@exercise("10.3", hint="run the cell and read the largest of the five means",
          wrong=lambda answer, **ctx: [t for t in TARGETS if t != answer][:2] + [3])
def _(answer, *, tr, layer):
    share = analysis.attention_to(tr, TARGETS)
    return equals(answer, max(TARGETS, key=lambda t: float(np.mean(share[t][layer]))))
