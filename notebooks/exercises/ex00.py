"""Lesson 00 · Quickstart: the checkers."""
from bertviz_lite import analysis
from course import close, equals, exercise


@exercise("00.1", hint=("guess before you look: one token of the sentence, as a string such as \"mat\"; "
                        "a pronoun is only useful once you know what it stands for",),
          prediction=True, wrong=lambda answer, actual: ["it", "[CLS]", "mat", 0, ""])
def _(answer, *, actual):
    if not isinstance(answer, str):
        return False, f'answer a token as text (a str), e.g. "cat"; got {type(answer).__name__}'
    return equals(answer.strip().lower(), actual.lower())  # "[cls]" or "[CLS]"


@exercise("00.2", hint=("the map A is [query, key]: every query's weight on one key sits in one column of A",
                        "find the position of [SEP] in tr.tokens, take that column, then its mean over the queries"))
def _(answer, *, tr, layer, head):
    expected = analysis.attention_to(tr, "[SEP]")["[SEP]"][layer, head]
    return close(answer, expected, atol=1e-6,
                 mistakes={"you summed the column: the share is its mean over the queries": expected * tr.n})


@exercise("00.3", hint=("entropy of one row p is -sum_j p_j log p_j; the head's entropy is the mean over its rows",
                        "0 log 0 counts as 0: replace the zero weights by 1 inside the log (log 1 = 0), "
                        "sum over the last axis, then average the rows"))
def _(answer, *, tr, layer, head):
    expected = analysis.head_entropy(tr)[layer, head]
    return close(answer, expected, atol=1e-5,
                 mistakes={"you dropped the minus sign: entropy is -sum p log p": -expected,
                           "you summed the rows: average them": expected * tr.n})
