"""Exercises of lesson 07 (the stack)."""
import numpy as np

from bertviz_lite import analysis
from course import close, equals, exercise


@exercise("07.1", hint="z0 @ zL / (np.linalg.norm(z0) * np.linalg.norm(zL))")
def _(answer, *, tr, t):
    return close(answer, analysis.representation_similarity(tr, against="input")[tr.num_layers, t], atol=1e-6)


@exercise("07.2", hint="U = Z / norms (rows); sims = U @ U.T; (sims.sum() - np.trace(sims)) / (n * (n - 1))")
def _(answer, *, tr):
    return close(answer, analysis.mean_token_similarity(tr)[tr.num_layers], atol=1e-6)


@exercise("07.3", hint="run the cell: the smallest cos(Z_l, Z_l-1) column of the table above")
def _(answer, *, tr):
    to_prev = np.asarray(analysis.representation_similarity(tr, against="previous"))
    return equals(answer, int(np.argmin(to_prev.mean(axis=1)[1:])) + 1)
