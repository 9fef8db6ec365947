"""Lesson 01 · Tokens: the checkers."""
import numpy as np

from course import close, equals, exercise


@exercise("01.1", hint="first_sep = tokens.index('[SEP]'); [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)")
def _(answer, *, tr):
    if not isinstance(answer, (list, tuple)):
        return False, "answer a list of 0s and 1s, one per token"
    return equals([int(x) for x in answer], list(tr.segments))


@exercise("01.2", hint="np.where(np.array(tr_pad.mask) == 1, 0.0, -np.inf)")
def _(answer, *, tr):
    expected = np.where(np.array(tr.mask) == 1, 0.0, -np.inf)
    return close(answer, expected)


@exercise("01.3", hint="long, rare or made-up words split most: try a chemistry word, or a word with several "
                       "prefixes and suffixes", wrong=lambda answer, tokenizer: ["playing", "two words", "", 42])
def _(answer, *, tokenizer):
    if not isinstance(answer, str) or not answer or " " in answer.strip():
        return False, "answer one word, as a string without spaces"
    pieces = tokenizer.tokenize(answer.strip())
    if "[UNK]" in pieces:
        return False, f"{answer!r} -> {pieces}: it has [UNK]"
    if len(pieces) < 4:
        return False, f"{answer!r} -> {pieces}: {len(pieces)} piece(s)"
    return True, f"{answer!r} -> {pieces}"
