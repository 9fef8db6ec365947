"""Exercises of lesson 14 (sentence embeddings)."""
import re

import numpy as np

from bertviz_lite import analysis
from course import close, exercise


@exercise("14.1", hint="(Z_L * m[:, None]).sum(axis=0) / m.sum(): the [PAD] rows get weight 0")
def _(answer, *, tr):
    return close(answer, analysis.sentence_embedding(tr), atol=1e-5)


@exercise("14.2", hint="for (a, b) in pairs: emb[a] @ emb[b] / (norm(emb[a]) * norm(emb[b]))")
def _(answer, *, model, pairs):
    expected = [analysis.pair_similarity(model, a, b) for a, b in pairs]
    return close(answer, expected, atol=1e-5)


def _words(s):
    return set(re.findall(r"[a-z0-9']+", s.lower()))


def _pair_wrong(answer, **ctx):
    a = answer[0] if isinstance(answer, (tuple, list)) and answer else "A man is playing a guitar."
    return [(a, a), (a, "The stock market fell sharply today."), "one sentence", (a,)]


@exercise("14.3", hint="two sentences with the same meaning in different words, e.g. a paraphrase with synonyms; "
                       "no word may appear in both (case and punctuation ignored)", wrong=_pair_wrong)
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
