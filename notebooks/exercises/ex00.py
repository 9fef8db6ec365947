"""Lesson 00 · Quickstart: the checkers."""
from bertviz_lite import analysis
from course import close, equals, exercise


@exercise("00.1", hint="read the row of 'tired' in the picture: its darkest cell")
def _(answer, *, actual):
    if not isinstance(answer, str):
        return False, 'answer a token as a string, e.g. "cat"'
    return equals(answer.strip().lower(), actual.lower())  # "[cls]" or "[CLS]"


@exercise("00.2", hint="A[:, sep].mean(): column sep of the map holds every query's weight on [SEP]")
def _(answer, *, tr, layer, head):
    return close(answer, analysis.attention_to(tr, "[SEP]")["[SEP]"][layer, head], atol=1e-6)


@exercise("00.3", hint="safe = np.where(A > 0, A, 1.0); -(A * np.log(safe)).sum(axis=-1).mean()")
def _(answer, *, tr, layer, head):
    return close(answer, analysis.head_entropy(tr)[layer, head], atol=1e-5)
