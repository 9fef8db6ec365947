"""Lesson 02 · Embeddings: the checkers."""
import numpy as np

import bertviz_lite as bv
from course import close, equals, exercise, formula


@exercise("02.1", hint=("X = T + P + S: three lookups, each [n, H], added",
                        "T takes the rows tr.ids of W_T, P the first n rows of W_P, S the rows tr.segments of W_S"))
def _(answer, *, tr):
    T, P, S = (np.asarray(tr[k], dtype=np.float64) for k in ("embed.token", "embed.position", "embed.segment"))
    return close(answer, tr["embed.sum"], atol=1e-5, mistakes={
        "you added T + P without S, the segment embeddings (the card leaves them out; BERT adds them)": T + P,
        "you left out P, the position embeddings": T + S})


@exercise("02.2", hint=("LayerNorm per token: subtract the row's mean, divide by sqrt(variance + eps), "
                        "then scale by gamma and shift by beta",
                        "mean and variance over the last axis with keepdims=True, so they broadcast over the H features"))
def _(answer, *, tr):
    X = np.asarray(tr["embed.sum"], dtype=np.float64)
    x_hat = (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + tr.config.layer_norm_eps)
    return close(answer, tr["embed.ln"], atol=1e-4, mistakes={
        "that is x_hat: LayerNorm then multiplies by gamma and adds beta": x_hat,
        "you normalised each feature over the tokens (axis 0): LayerNorm normalises each token over its features":
            (X - X.mean(0, keepdims=True)) / np.sqrt(X.var(0, keepdims=True) + tr.config.layer_norm_eps)})


@exercise("02.3", hint=("does layer 0's attention let one sentence's tokens read the other's?",),
          prediction=True)
def _(answer, *, actual):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__} {answer!r}"[:200]
    return equals(bool(answer), actual)


def _cases(config):
    small = bv.BertConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, ffn_size=256,
                          max_positions=128, type_vocab_size=3)
    return [({"c": c}, bv.params.ledger_for_config(c).by_group()["embeddings"]) for c in (config, bv.BertConfig(), small)]


@exercise("02.4", hint=("three tables, each (rows x H), and the embedding LayerNorm's gamma and beta (H each)",
                        "the rows are c.vocab_size, c.max_positions and c.type_vocab_size; multiply their sum by "
                        "c.hidden_size and add the LayerNorm's parameters"))
def _(answer, *, config):
    return formula(answer, _cases(config), "my_count(c)")
