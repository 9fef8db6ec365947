"""Lesson 02 · Embeddings: the checkers."""
import numpy as np

import bertviz_lite as bv
from course.checks import close, equals, exercise, formula
from exercises._common import f64, gain_bias


def _sum_mistakes(tr, weights=None):
    T, P, S = (f64(tr[k]) for k in ("embed.token", "embed.position", "embed.segment"))
    W_P = f64(weights["embed.W_P"]) if weights is not None else None
    out = {"you added T + P without S, the segment embeddings (the card leaves them out; BERT adds them)": T + P,
           "you left out P, the position embeddings": T + S,
           "you left out T, the token embeddings: the rows of W_T at tr.ids": P + S}
    if W_P is not None and len(W_P) > tr.n:
        out["your positions are off by one: token i reads row i of W_P, starting at row 0"] = T + W_P[1:tr.n + 1] + S
    if weights is not None:  # differs from the answer by construction: the lesson checks a pair (two segments)
        W_S = f64(weights["embed.W_S"])
        out["every token read row 0 of W_S: the second sentence's tokens (segment id 1) read row 1"] = T + P + W_S[0]
        out["every token read row 1 of W_S: the first sentence's tokens, [CLS] and its [SEP] (segment id 0) read "
            "row 0"] = T + P + W_S[1]
    out["that is Z_0 = embed.ln, after the embedding LayerNorm: X is the plain sum before it"] = tr["embed.ln"]
    return out


@exercise("02.1", hint=("X = T + P + S: three lookups, each [n, H], added",
                        "which rows of W_T does a sentence read, which rows of W_P (starting where?), and which "
                        "row of W_S does a token of the second sentence read?"), mistakes=_sum_mistakes)
def _(answer, *, tr, weights=None):
    return close(answer, tr["embed.sum"], atol=1e-5)


def _ln_mistakes(tr, weights=None):
    X = f64(tr["embed.sum"])
    eps = tr.config.layer_norm_eps
    g, b = gain_bias(X, tr["embed.ln"], eps)  # the embedding LayerNorm's gamma and beta, from its input and output

    def ln(x_hat):
        return x_hat * g + b

    mu, var = X.mean(-1, keepdims=True), X.var(-1, keepdims=True)
    return {"that is x_hat: LayerNorm then multiplies by gamma and adds beta": (X - mu) / np.sqrt(var + eps),
            "you normalised each feature over the tokens (axis 0): LayerNorm normalises each token over its features":
                ln((X - X.mean(0, keepdims=True)) / np.sqrt(X.var(0, keepdims=True) + eps)),
            "you used ddof=1 (the sample variance, dividing by H - 1): LayerNorm divides by H":
                ln((X - mu) / np.sqrt(X.var(-1, ddof=1, keepdims=True) + eps)),
            "you divided by the variance: LayerNorm divides by its square root, the standard deviation":
                ln((X - mu) / (var + eps)),
            "you added beta before multiplying by gamma: LayerNorm scales by gamma first, then adds beta":
                ((X - mu) / np.sqrt(var + eps) + b) * g,
            "you did not subtract the row's mean: x_hat = (x - mean) / sqrt(var + eps)": ln(X / np.sqrt(var + eps))}


@exercise("02.2", hint=("LayerNorm per token: subtract the row's mean, divide by sqrt(variance + eps), "
                        "then scale by gamma and shift by beta",
                        "over which axis do a token's H features lie, and how do you keep the mean's axis so that "
                        "it broadcasts back over the row?"), mistakes=_ln_mistakes)
def _(answer, *, tr, weights=None):
    return close(answer, tr["embed.ln"], atol=1e-4)


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


def _count_mistakes(config):
    return {"you left out the embedding LayerNorm's gamma and beta (2 H; the card has no LayerNorm)":
            lambda c: (c.vocab_size + c.max_positions + c.type_vocab_size) * c.hidden_size,
            "you left out the segment table W_S (type_vocab_size rows; the card has no S)":
                lambda c: (c.vocab_size + c.max_positions) * c.hidden_size + 2 * c.hidden_size,
            "you left out the position table W_P (max_positions rows)":
                lambda c: (c.vocab_size + c.type_vocab_size) * c.hidden_size + 2 * c.hidden_size,
            "the LayerNorm has a gain and a bias per feature: 2 H, not H":
                lambda c: (c.vocab_size + c.max_positions + c.type_vocab_size) * c.hidden_size + c.hidden_size,
            "you wrote 2 segment rows: read c.type_vocab_size (the small model of the check has 3)":
                lambda c: (c.vocab_size + c.max_positions + 2) * c.hidden_size + 2 * c.hidden_size}


@exercise("02.4", hint=("three tables, each (rows x H), and the embedding LayerNorm's gamma and beta (H each)",
                        "which three sizes in c give the tables' rows, and what does the LayerNorm add on top of "
                        "the three tables?"), mistakes=_count_mistakes)
def _(answer, *, config):
    return formula(answer, _cases(config), "my_count(c)", mistakes=_count_mistakes(config))
