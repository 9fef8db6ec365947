"""Lesson 00 · Quickstart: the checkers."""
import numpy as np

from bertviz_lite import analysis
from course.checks import close, equals, exercise
from exercises._common import f64


@exercise("00.1", hint=("guess before you look: one token of the sentence, as a string such as \"mat\"; "
                        "a pronoun is only useful once you know what it stands for",),
          prediction=True, wrong=lambda answer, actual: ["it", "[CLS]", "mat", 0, ""],
          mistakes=lambda actual: {"'it' is the query itself: the question is which other token its row sends the most "
                                   "weight to (the word 'it' stands for)": "it",
                                   "[SEP] is where a head parks weight it does not need; this head's row for 'it' "
                                   "goes mostly elsewhere": "[SEP]"})
def _(answer, *, actual):
    if not isinstance(answer, str):
        return False, f'answer a token as text (a str), e.g. "cat"; got {type(answer).__name__}'
    return equals(answer.strip().lower(), actual.lower())  # "[cls]" or "[CLS]"


def _map(tr, layer, head):
    return f64(tr.get("attn.probs", layer=layer, head=head))


def _sep_mistakes(tr, layer, head):
    A, sep = _map(tr, layer, head), tr.tokens.index("[SEP]")
    words = [i for i, t in enumerate(tr.tokens) if t not in ("[CLS]", "[SEP]")]
    return {
        "you averaged over the word queries only, leaving out the [CLS] and [SEP] rows: the share averages every "
        "query, specials included (the small difference is not rounding)": A[words, sep].mean(),
        "you summed the column: the share is its mean over the queries": A[:, sep].sum(),
        "you took [SEP]'s row (where [SEP] looks; every row averages 1/n), not its column (who looks at [SEP])":
            A[sep, :].mean(),
        "you took the column's largest weight: the share is its mean": A[:, sep].max(),
        "that is the [CLS] column (key 0): [SEP] is the last key, tr.tokens.index('[SEP]')": A[:, 0].mean()}


@exercise("00.2", hint=("the map A is [query, key]: every query's weight on one key sits in one column of A",
                        "which column of A belongs to [SEP] (tr.tokens.index tells you), and do you add that column "
                        "up or average it over the ___ queries?"), mistakes=_sep_mistakes)
def _(answer, *, tr, layer, head):
    return close(answer, analysis.attention_to(tr, "[SEP]")["[SEP]"][layer, head], atol=1e-6)


def _entropy_mistakes(tr, layer, head):
    A = _map(tr, layer, head)
    plogp = A * np.log(np.where(A > 0, A, 1.0))
    h = -plogp.sum(-1).mean()
    return {"you dropped the minus sign: entropy is -sum p log p, a positive number": -h,
            "you summed the rows: the head's entropy is the mean over its rows": h * tr.n,
            "you used log base 2 (bits): the course measures entropy in nats, np.log": h / np.log(2),
            "you averaged p log p over the keys: a row's entropy sums over its keys": h / tr.n,
            "you took the largest row entropy: the head's entropy is the mean over its rows": -plogp.sum(-1).max()}


@exercise("00.3", hint=("entropy of one row p is -sum_j p_j log p_j; the head's entropy is the mean over its rows",
                        "0 log 0 counts as 0: what can you put inside the log where A is 0 so that the term "
                        "vanishes? and once each row has its entropy, how do n of them become one "
                        "number?"), mistakes=_entropy_mistakes)
def _(answer, *, tr, layer, head):
    return close(answer, analysis.head_entropy(tr)[layer, head], atol=1e-5)
