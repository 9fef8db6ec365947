"""Lesson 16 · What heads look at across a corpus: the checkers."""
from course import close, equals, exercise


@exercise("16.1", hint=("query i's weight on the next token is A[i, i+1]: those entries form the diagonal just above "
                        "the main one",
                        "sum that diagonal and divide by n, the number of tokens (the last token has no next key: "
                        "it counts as 0)"))
def _(answer, *, expected):
    return close(answer, expected, atol=1e-6)


def _focused(r, k=3):
    return [(layer, head) for layer, head, _ in r.top("entropy", k, largest=False)]


@exercise("16.2", hint=("the most focused heads have the lowest mean entropy; r['entropy'] is [layer, head]",
                        "np.argsort(..., axis=None) orders every head of the flattened table; a flat index k is the "
                        "pair (k // heads, k % heads), heads per layer"),
          wrong=lambda answer, r: [_focused(r)[::-1], [(0, 0)] * 3, [(l, h) for l, h, _ in r.top("entropy", 3)],
                                   "L0H2"])
def _(answer, *, r):
    if not isinstance(answer, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in answer):
        return False, "answer a list of three (layer, head) pairs"
    return equals([tuple(int(x) for x in p) for p in answer], _focused(r))
