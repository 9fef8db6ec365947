"""Lesson 01 · Tokens: the checkers."""
import numpy as np

from course import close, equals, exercise


@exercise("01.1", hint=("segment 0 runs from [CLS] up to and including the first [SEP]; segment 1 is the rest, "
                        "its closing [SEP] included",
                        "find where the first [SEP] sits (list.index), then build a list of 0s of that length + 1 "
                        "followed by 1s for the remaining tokens"))
def _(answer, *, tr):
    if not isinstance(answer, (list, tuple)):
        return False, f"answer a list of 0s and 1s, one per token; got {type(answer).__name__}"
    if any(isinstance(x, str) for x in answer):
        return False, "your list holds text (str) items; give whole numbers 0 and 1"
    expected = list(tr.segments)
    got = [int(x) for x in answer]
    first_sep = list(tr.tokens).index("[SEP]")
    if got == [0] * first_sep + [1] * (len(expected) - first_sep):
        return False, "the first [SEP] belongs to sentence A: it closes segment 0"
    return equals(got, expected)


@exercise("01.2", hint=("the additive mask is 0 where a key may be attended to and -inf where it is [PAD], "
                        "so exp(score + mask) is exactly 0 there",
                        "tr_pad.mask is 1 for real tokens and 0 for [PAD]: turn it into an array and pick 0.0 or "
                        "-np.inf element by element"))
def _(answer, *, tr):
    keep = np.array(tr.mask) == 1
    expected = np.where(keep, 0.0, -np.inf)
    return close(answer, expected, mistakes={
        "you used -1e9, the article's mask: BERT's softmax gets exactly 0 from -inf (the check needs -inf)":
            np.where(keep, 0.0, -1e9),
        "-1e4 is the old TensorFlow mask; here the masked score is -inf": np.where(keep, 0.0, -1e4),
        "your mask is the other way round: -inf goes where the mask is 0 ([PAD])": np.where(keep, -np.inf, 0.0),
        "that is the 0/1 attention mask itself; the additive mask is 0 or -inf": keep.astype(float)})


@exercise("01.3", hint=("long, rare or made-up words split most: try a chemistry word, or a word with several "
                        "prefixes and suffixes",
                        "pieces that start with ## continue a word; tokenizer.tokenize(word) shows them"),
          wrong=lambda answer, tokenizer, shown=(): ["playing", "two words", "", 42, *shown[1:2]])
def _(answer, *, tokenizer, shown=()):
    if not isinstance(answer, str):
        return False, f"answer one word as text (a str); got {type(answer).__name__}"
    if not answer or " " in answer.strip():
        return False, "answer one word, as a string without spaces"
    if answer.strip().lower() in {w.lower() for w in shown}:
        return False, f"{answer!r} is printed in Run already: find a word of your own"
    pieces = tokenizer.tokenize(answer.strip())
    if "[UNK]" in pieces:
        return False, f"{answer!r} -> {pieces}: it has [UNK]"
    if len(pieces) < 4:
        return False, f"{answer!r} -> {pieces}: {len(pieces)} piece(s)"
    return True, f"{answer!r} -> {pieces}"
