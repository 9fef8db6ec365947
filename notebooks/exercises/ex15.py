"""Exercises of lesson 15 (sentence embeddings)."""
import re

import numpy as np

from bertviz_lite import analysis
from course import close, equals, exercise


@exercise("15.1", hint=("mean pooling averages the last layer's rows of the real tokens only: [PAD] rows get weight 0",
                        "multiply each row by its mask value (0 or 1), sum over the tokens, divide by the number of "
                        "real tokens"))
def _(answer, *, tr):
    Z = np.asarray(tr.get("ffn.ln", layer=tr.num_layers - 1), dtype=np.float64)
    return close(answer, analysis.sentence_embedding(tr), atol=1e-5, mistakes={
        "you averaged over [PAD] too: weight each row by the mask and divide by the real tokens": Z.mean(axis=0),
        "you took the [CLS] row: this model's sentence vector is the mean of its real tokens": Z[0]})


@exercise("15.2", hint=("the cosine of two sentence vectors: dot product over the product of lengths, one per pair",
                        "loop over pairs, look both sentences up in emb, and give a list or array of the cosines"))
def _(answer, *, model, pairs):
    expected = [analysis.pair_similarity(model, a, b) for a, b in pairs]
    return close(answer, expected, atol=1e-5)


def _words(s):
    return set(re.findall(r"[a-z0-9']+", s.lower()))


def _pair_wrong(answer, **ctx):
    a = answer[0] if isinstance(answer, (tuple, list)) and answer else "A man is playing a guitar."
    return [(a, a), (a, "The stock market fell sharply today."), "one sentence", (a,)]


@exercise("15.3", hint=("two sentences with the same meaning in different words, e.g. a paraphrase with synonyms",
                        "no word may appear in both (case and punctuation ignored): swap every word, 'the' and 'a' "
                        "included"), wrong=_pair_wrong)
def _(answer, *, model):
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2 and all(isinstance(s, str) and s.strip()
                                                                          for s in answer)):
        return False, "give a pair of two non-empty sentences: (\"...\", \"...\")"
    a, b = answer
    shared = _words(a) & _words(b)
    if shared:
        return False, f"they share {sorted(shared)}"
    s = analysis.pair_similarity(model, a, b)
    return (s > 0.5), f"cos = {s:.3f}" + ("" if s > 0.5 else ", not above 0.5 yet")


@exercise("15.4", hint=("predict first: the mean of the token vectors; in a role swap the tokens are the same words, "
                        "each moved a little by its new context",),
          prediction=True, wrong=lambda answer, actual: [not actual, "True", 1])
def _(answer, *, actual):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__}"
    return equals(bool(answer), actual)
