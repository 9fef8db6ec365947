"""Exercises of lesson 12 (exploring attention)."""
import numpy as np

from bertviz_lite import analysis
from course.checks import close, equals, exercise
from exercises._common import f64

TARGETS = ("[CLS]", "[SEP]", "punct", "prev", "next")


def _entropy_mistakes(tr, layer, head):
    A = f64(tr.get("attn.probs", layer=layer, head=head))
    h = -(A * np.log(np.where(A > 0, A, 1.0))).sum(-1).mean()
    return {"you dropped the minus sign": -h,
            "you summed over the rows: divide by n": h * tr.n,
            "you used log base 2 (bits): entropy here is in nats, np.log": h / np.log(2),
            "you averaged p log p over the keys: a row's entropy sums over its keys": h / tr.n,
            "you took the largest row entropy: the head's entropy is the mean over its rows":
                -(A * np.log(np.where(A > 0, A, 1.0))).sum(-1).max()}


@exercise("12.1", hint=("a row's entropy is -sum_j p_j log p_j; the head's entropy is the mean over the n rows",
                        "0 log 0 counts as 0: how do you keep the zero weights away from the log, and how do the "
                        "n row entropies become the head's one number?"), mistakes=_entropy_mistakes)
def _(answer, *, tr, layer, head):
    return close(answer, analysis.head_entropy(tr)[layer, head], atol=1e-6)


def _self_mistakes(tr):
    A0 = f64(tr.get("attn.probs", layer=0))  # [n_h, n, n]
    diag = np.diagonal(A0, axis1=1, axis2=2)  # [n_h, n]
    return {"you summed the diagonal: average it over the n queries": diag.sum(1),
            "that is the weight on [CLS] (the first key column), not on the query itself": A0[:, :, 0].mean(1),
            "every number of yours is 1/n, the mean of whole rows of the map (the whole map averaged, or the diagonal "
            "of axes 0 and 1, head and query, averaged over the keys): a token's weight on itself is A[h, q, q], the "
            "diagonal of axes 1 and 2": A0.mean((1, 2)),
            "you averaged over the heads: the answer has one number per head, [n_h]": diag.mean(0),
            "that is the last layer's map: this exercise reads layer 0":
                np.diagonal(f64(tr.get("attn.probs", layer=tr.num_layers - 1)), axis1=1, axis2=2).mean(1)}


@exercise("12.2", hint=("attention to itself is the map's diagonal, A[q, q]; average it over the queries, one "
                        "number per head",
                        "A0 is [head, query, key]: which two axes hold a token's weight on itself, A[h, q, q], and "
                        "which axis is left to average once you take that diagonal?"), mistakes=_self_mistakes)
def _(answer, *, tr):
    return close(answer, analysis.attention_to(tr, ["self"])["self"][0], atol=1e-6)


SPELLING = "write the target as the lesson names it, with its brackets: '[CLS]' or '[SEP]' (a string from TARGETS)"


@exercise("12.3", hint=("predict first: in a middle layer, which of the five targets gets the most weight on "
                        "average? one of " + ", ".join(TARGETS),),
          prediction=True, wrong=lambda answer, **ctx: [t for t in TARGETS if t != answer][:2] + [3, "cls"],
          mistakes=lambda tr, layer: {SPELLING: "cls"})
def _(answer, *, tr, layer):
    if not isinstance(answer, str):
        return False, f"answer one of {TARGETS} as text (a str); got {type(answer).__name__}"
    if answer not in TARGETS and answer.strip().strip("[]").upper() in ("CLS", "SEP"):
        return False, SPELLING
    share = analysis.attention_to(tr, TARGETS)
    return equals(answer, max(TARGETS, key=lambda t: float(np.mean(share[t][layer]))))
