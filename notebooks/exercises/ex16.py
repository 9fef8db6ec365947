"""Lesson 16 · What heads look at across a corpus: the checkers."""
import numpy as np

from course.checks import close, equals, exercise
from exercises._common import f64


def _next_mistakes(expected, A=None):
    if A is None:
        return {}
    A = f64(A)
    n = len(A)
    return {"that is the diagonal below the main one, A[i, i-1]: the previous token; the next is A[i, i+1] (offset=1)":
            np.diagonal(A, offset=-1).sum() / n,
            "you divided by n - 1 (the diagonal's length): the last token counts too, with 0, so divide by n":
                np.diagonal(A, offset=1).mean(),
            "that is the main diagonal, each token's weight on itself: the next token is one to the right":
                np.diagonal(A).mean(),
            "you summed the diagonal: divide by n, the number of tokens": np.diagonal(A, offset=1).sum()}


@exercise("16.1", hint=("query i's weight on the next token is A[i, i+1]: those entries form the diagonal just above "
                        "the main one",
                        "that diagonal has n - 1 entries, since the last token has no next one: do you divide its "
                        "sum by n - 1 or by n, and why?"), mistakes=_next_mistakes)
def _(answer, *, expected, A=None):
    return close(answer, expected, atol=1e-6)


def _focused(r, k=3):
    return [(layer, head) for layer, head, _ in r.top("entropy", k, largest=False)]


def _focus_mistakes(r):
    right = _focused(r)
    return {"those are the broadest heads (the highest entropy): the most focused have the lowest":
            [(l, h) for l, h, _ in r.top("entropy", 3)],
            "the right heads, in the wrong order: the most focused (lowest entropy) first": right[::-1],
            "your pairs are (head, layer): write (layer, head)": [(h, l) for l, h in right]}


@exercise("16.2", hint=("the most focused heads have the lowest mean entropy; r['entropy'] is [layer, head]",
                        "np.argsort(..., axis=None) orders every head of the flattened table: how do you turn a flat "
                        "index k back into (layer, head), with ___ heads per layer?"),
          wrong=lambda answer, r: [_focused(r)[::-1], [(0, 0)] * 3, [(l, h) for l, h, _ in r.top("entropy", 3)],
                                   "L0H2"], mistakes=_focus_mistakes)
def _(answer, *, r):
    if isinstance(answer, np.ndarray):
        answer = answer.tolist()
    if not isinstance(answer, (list, tuple)) or not all(isinstance(p, (list, tuple, np.ndarray)) and len(p) == 2
                                                        for p in answer):
        return False, "answer a list of three (layer, head) pairs"
    return equals([tuple(int(x) for x in p) for p in answer], _focused(r))
