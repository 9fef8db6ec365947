"""Exercises of lesson 12 (exploring attention)."""
import numpy as np

from bertviz_lite import analysis
from course import close, equals, exercise

TARGETS = ("[CLS]", "[SEP]", "punct", "prev", "next")


@exercise("12.1", hint=("a row's entropy is -sum_j p_j log p_j; the head's entropy is the mean over the n rows",
                        "0 log 0 counts as 0: keep only the entries where A > 0 (np.where) before the log"))
def _(answer, *, tr, layer, head):
    expected = analysis.head_entropy(tr)[layer, head]
    return close(answer, expected, atol=1e-6, mistakes={"you dropped the minus sign": -expected,
                                                       "you summed over the rows: divide by n": expected * tr.n})


@exercise("12.2", hint=("attention to itself is the map's diagonal, A[q, q]; average it over the queries, one "
                        "number per head",
                        "P0 is [head, query, key]: np.diagonal with axis1 and axis2 the query and key axes gives "
                        "[head, n]"))
def _(answer, *, tr):
    return close(answer, analysis.attention_to(tr, ["self"])["self"][0], atol=1e-6)


@exercise("12.3", hint=("predict first: in a middle layer, which of the five targets gets the most weight on "
                        "average? one of " + ", ".join(TARGETS),),
          prediction=True, wrong=lambda answer, **ctx: [t for t in TARGETS if t != answer][:2] + [3])
def _(answer, *, tr, layer):
    if not isinstance(answer, str):
        return False, f"answer one of {TARGETS} as text (a str); got {type(answer).__name__}"
    share = analysis.attention_to(tr, TARGETS)
    return equals(answer, max(TARGETS, key=lambda t: float(np.mean(share[t][layer]))))
