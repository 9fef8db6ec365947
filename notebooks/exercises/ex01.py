"""Lesson 01 · Tokens: the checkers."""
import numpy as np

from course.checks import close, exercise, sequence


def _segment_mistakes(tr):
    n, first = tr.n, list(tr.tokens).index("[SEP]")
    rest = n - first - 1
    return {"the first [SEP] belongs to sentence A: it closes segment 0": [0] * first + [1] * (rest + 1),
            "the closing [SEP] belongs to sentence B: it is segment 1 too": [0] * (first + 1) + [1] * (rest - 1) + [0],
            "you gave every token segment 0: the second sentence's tokens are segment 1": [0] * n,
            "segment ids count from 0: sentence A is 0 and sentence B is 1": [1] * (first + 1) + [2] * rest,
            "you left out the closing [SEP]: every token has a segment id, n in all":
                [0] * (first + 1) + [1] * (rest - 1)}


@exercise("01.1", hint=("segment 0 runs from [CLS] up to and including the first [SEP]; segment 1 is the rest, "
                        "its closing [SEP] included",
                        "where does the first [SEP] sit (list.index)? so how many tokens, counting [CLS] and that "
                        "[SEP], belong to segment 0, and how many to segment 1?"), mistakes=_segment_mistakes)
def _(answer, *, tr):
    if isinstance(answer, (list, tuple)) and any(isinstance(x, str) for x in answer):
        return False, "your list holds text (str) items; give whole numbers 0 and 1"
    return sequence(answer, list(tr.segments), "your segment list")


def _mask_mistakes(tr):
    keep = np.array(tr.mask) == 1
    return {"you used -1e9, the article's mask: BERT's softmax gets exactly 0 from -inf (the check needs -inf)":
            np.where(keep, 0.0, -1e9),
            "-1e4 is the old TensorFlow mask; here the masked score is -inf": np.where(keep, 0.0, -1e4),
            "your mask is the other way round: -inf goes where the mask is 0 ([PAD])": np.where(keep, -np.inf, 0.0),
            "that is the 0/1 attention mask itself; the additive mask is 0 or -inf": keep.astype(float),
            "-1 barely moves a score: exp(score - 1) is still far from 0; the masked score is -inf":
                np.where(keep, 0.0, -1.0),
            "that is [n, n], every query's copy of the row: the sentence's additive mask is the one row [n] (the "
            "scores broadcast it over the queries)": np.broadcast_to(np.where(keep, 0.0, -np.inf), (len(keep),) * 2)}


@exercise("01.2", hint=("the additive mask is 0 where a key may be attended to and -inf where it is [PAD], "
                        "so exp(score + mask) is exactly 0 there",
                        "tr_pad.mask is 1 for real tokens and 0 for [PAD]: which value goes where the mask is 1, "
                        "and which where it is 0, so that exp gives exactly 0 at [PAD]?"), mistakes=_mask_mistakes)
def _(answer, *, tr):
    return close(answer, np.where(np.array(tr.mask) == 1, 0.0, -np.inf))


PUNCT = ("punctuation splits text into words before WordPiece runs (a.b.c.d and well-to-do are several words): "
         "give one word of letters that WordPiece itself cuts into ## pieces")


def _word_mistakes(tokenizer, shown=()):
    return {PUNCT: "well-to-do"}


@exercise("01.3", hint=("long, rare or made-up words split most: try a chemistry word, or a word with several "
                        "prefixes and suffixes",
                        "pieces that start with ## continue a word: into how many pieces does the tokenizer cut "
                        "your candidate, and does every piece after the first start with ##?"),
          wrong=lambda answer, tokenizer, shown=(): ["playing", "two words", "", 42, "a.b.c.d", "well-to-do",
                                                     *shown[1:2]],
          mistakes=_word_mistakes, open_ended=True)
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
    if any(not p.startswith("##") for p in pieces[1:]):
        return False, PUNCT
    if len(pieces) < 4:
        return False, f"{answer!r} -> {pieces}: {len(pieces)} piece(s)"
    return True, f"{answer!r} -> {pieces}"
