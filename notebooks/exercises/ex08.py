"""Exercises of lesson 08 (the stack)."""
import numpy as np

from bertviz_lite import analysis
from course import close, equals, exercise


@exercise("08.1", hint=("cosine similarity: the dot product of the two vectors divided by the product of their lengths",
                        "np.linalg.norm gives a vector's length; both vectors are [H]"))
def _(answer, *, tr, t):
    return close(answer, analysis.representation_similarity(tr, against="input")[tr.num_layers, t], atol=1e-6)


@exercise("08.2", hint=("make every row a unit vector; then one matrix product gives every pair's cosine, [n, n]",
                        "average the off-diagonal entries only: the diagonal is each token with itself (1); "
                        "there are n * (n - 1) of them"))
def _(answer, *, tr):
    Z = np.asarray(tr.get("ffn.ln", layer=tr.num_layers - 1), dtype=np.float64)
    U = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    n = len(U)
    return close(answer, analysis.mean_token_similarity(tr)[tr.num_layers], atol=1e-6, mistakes={
        "you averaged the diagonal in too (each token with itself, cos 1): leave it out": (U @ U.T).mean()})


@exercise("08.3", hint=("predict first: the layer (1..L) whose output is least like its input, "
                        "cos(Z_l, Z_l-1) smallest; a whole number",),
          prediction=True, wrong=lambda answer, tr: [answer - 1, answer + 1, str(answer)])
def _(answer, *, tr):
    to_prev = np.asarray(analysis.representation_similarity(tr, against="previous"))
    return equals(answer, int(np.argmin(to_prev.mean(axis=1)[1:])) + 1)
