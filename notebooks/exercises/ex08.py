"""Exercises of lesson 08 (the stack)."""
import numpy as np

from bertviz_lite import analysis
from course.checks import close, equals, exercise
from exercises._common import f64


def _cos_mistakes(tr, t):
    z0, zL = f64(tr["embed.ln"])[t], f64(tr.get("ffn.ln", layer=tr.num_layers - 1))[t]
    cos = z0 @ zL / (np.linalg.norm(z0) * np.linalg.norm(zL))
    X = f64(tr["embed.sum"])[t]
    zp = f64(tr.get("ffn.ln", layer=tr.num_layers - 2))[t]
    return {"that is the dot product: divide it by the two lengths to get the cosine": z0 @ zL,
            "that is the angle (arccos of the cosine): the exercise asks for the cosine itself": np.arccos(cos),
            "you compared with X = T + P + S before the embedding LayerNorm: Z_0 is embed.ln":
                X @ zL / (np.linalg.norm(X) * np.linalg.norm(zL)),
            "you divided by the squared lengths: the cosine divides by the lengths themselves":
                z0 @ zL / (z0 @ z0 * (zL @ zL)),
            "that is 1 - cos, the cosine distance: the exercise asks for the cosine itself": 1 - cos,
            "you compared with the second-last layer's output: Z_L is the last layer's, ffn.ln of trace layer L - 1":
                z0 @ zp / (np.linalg.norm(z0) * np.linalg.norm(zp))}


@exercise("08.1", hint=("cosine similarity: the dot product of the two vectors divided by the product of their lengths",
                        "both vectors are [H]: what gives a vector's length, and which two lengths do you divide "
                        "the dot product by?"), mistakes=_cos_mistakes)
def _(answer, *, tr, t):
    return close(answer, analysis.representation_similarity(tr, against="input")[tr.num_layers, t], atol=1e-6)


def _alike_mistakes(tr):
    Z = f64(tr.get("ffn.ln", layer=tr.num_layers - 1))
    U = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    n, S, D = len(U), U @ U.T, Z @ Z.T
    return {"you averaged the diagonal in too (each token with itself, cos 1): leave it out": S.mean(),
            "you divided the off-diagonal sum by n * n: there are n * (n - 1) pairs of different tokens":
                (S.sum() - np.trace(S)) / (n * n),
            "those are dot products, not cosines: make every row a unit vector first":
                (D.sum() - np.trace(D)) / (n * (n - 1)),
            "you summed the cosines of the pairs: average them over the n * (n - 1) pairs": S.sum() - np.trace(S),
            "that is the upper triangle's sum, each pair once: average the pairs' cosines": np.triu(S, 1).sum()}


@exercise("08.2", hint=("make every row a unit vector; then one matrix product gives every pair's cosine, [n, n]",
                        "which entries of that [n, n] table compare a token with itself, and how many entries are "
                        "left once you drop them?"), mistakes=_alike_mistakes)
def _(answer, *, tr):
    return close(answer, analysis.mean_token_similarity(tr)[tr.num_layers], atol=1e-6)


@exercise("08.3", hint=("predict first: the layer (1..L) whose output is least like its input, "
                        "cos(Z_l, Z_l-1) smallest; a whole number",),
          prediction=True, wrong=lambda answer, tr: [answer - 1, answer + 1, str(answer)],
          mistakes=lambda tr: {"layers count 1..L here: formula layer l is trace layer.{l-1}, so a trace index k is "
                               "layer k + 1": _least_alike(tr) - 1})
def _(answer, *, tr):
    return equals(answer, _least_alike(tr))


def _least_alike(tr):
    """The layer 1..L whose output is least like its input."""
    to_prev = np.asarray(analysis.representation_similarity(tr, against="previous"))
    return int(np.argmin(to_prev.mean(axis=1)[1:])) + 1
