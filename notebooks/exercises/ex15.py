"""Exercises of lesson 15 (sentence embeddings)."""
import re

import numpy as np

from bertviz_lite import analysis
from course.checks import close, equals, exercise
from exercises._common import f64


def _pool_mistakes(tr):
    Z = f64(tr.get("ffn.ln", layer=tr.num_layers - 1))
    m = f64(tr.mask)
    return {"you averaged over [PAD] too: weight each row by the mask and divide by the real tokens": Z.mean(axis=0),
            "you took the [CLS] row: this model's sentence vector is the mean of its real tokens": Z[0],
            "you summed the real rows: divide by the number of real tokens, m.sum()": (Z * m[:, None]).sum(0),
            "you masked the [PAD] rows but divided by n, [PAD] included: divide by the real tokens, m.sum()":
                (Z * m[:, None]).sum(0) / len(m),
            "you averaged over the features (axis -1): the sentence vector has H numbers, one per feature": Z.mean(-1)}


@exercise("15.1", hint=("mean pooling averages the last layer's rows of the real tokens only: [PAD] rows get weight 0",
                        "what does multiplying each row by its mask value m (0 or 1) do to the [PAD] rows, and what "
                        "do you divide the sum by: n or ___?"), mistakes=_pool_mistakes)
def _(answer, *, tr):
    return close(answer, analysis.sentence_embedding(tr), atol=1e-5)


def _embeddings(model, pairs):
    keep = [f"layer.{model.config.num_layers - 1}.ffn.ln"]
    texts = {s for pair in pairs for s in pair}
    return {s: f64(analysis.sentence_embedding(model.trace(s, keep=keep))) for s in texts}


def _sim_mistakes(model, pairs):
    emb = _embeddings(model, pairs)
    dots = np.array([emb[a] @ emb[b] for a, b in pairs])
    norms = np.array([np.linalg.norm(emb[a]) * np.linalg.norm(emb[b]) for a, b in pairs])
    return {"those are dot products: divide each by the two lengths to get the cosine": dots,
            "that is 1 - cos, the cosine distance: the exercise asks for the similarity itself": 1 - dots / norms,
            "those are Euclidean distances: the cosine compares directions, a . b / (|a| |b|)":
                np.array([np.linalg.norm(emb[a] - emb[b]) for a, b in pairs]),
            "you divided by the squared lengths: the cosine divides by the lengths themselves": dots / norms ** 2}


@exercise("15.2", hint=("the cosine of two sentence vectors: dot product over the product of lengths, one per pair",
                        "for a pair (a, b), which two vectors of emb do you compare, and what do you divide their "
                        "dot product by?"), mistakes=_sim_mistakes)
def _(answer, *, model, pairs):
    return close(answer, [analysis.pair_similarity(model, a, b) for a, b in pairs], atol=1e-5)


def _words(s):
    return set(re.findall(r"[a-z0-9']+", s.lower()))


def _pair_wrong(answer, **ctx):
    a = answer[0] if isinstance(answer, (tuple, list)) and answer else "A man is playing a guitar."
    return [(a, a), (a, "The stock market fell sharply today."), "one sentence", (a,)]


@exercise("15.3", hint=("two sentences with the same meaning in different words, e.g. a paraphrase with synonyms",
                        "which words do your two sentences still share ('the' and 'a' count)? what synonym could "
                        "replace each one?"), wrong=_pair_wrong, open_ended=True,
          mistakes=lambda model: {"give a pair of two non-empty sentences: (\"...\", \"...\")": "one sentence"})
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
