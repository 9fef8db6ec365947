"""Exercises of lesson 10 (pooler and masked-language modelling).

The checkers compare with the trace and name the known mistakes: the formula card's pooler without
its bias, W transposed, the MLM logits without the output bias, and GELU's tanh approximation (07.1).
They run on weights whose biases are not zero (the fitted head's, a pooler bias drawn in the lesson),
so leaving a bias out changes the answer.
"""
import numpy as np

from course.checks import close, equals, exercise
from exercises._common import f64, softmax




def _pooler_mistakes(tr, model):
    Z_L = f64(tr[f"layer.{model.config.num_layers - 1}.ffn.ln"])
    W, b = f64(model.weights["pooler.W"]), f64(model.weights["pooler.b"])
    return {"you left out the bias b, as the formula card does": np.tanh(Z_L[0] @ W),
            "you used W transposed: it is stored [input, output], so the row multiplies W as it is":
                np.tanh(Z_L[0] @ W.T + b),
            "you left out the tanh: p = tanh(Z_L[0] W + b)": Z_L[0] @ W + b,
            "you pooled the mean of the token rows: BERT's pooler reads the [CLS] row only, Z_L[0]":
                np.tanh(Z_L.mean(0) @ W + b),
            "you read the last row, [SEP]: the pooler reads the [CLS] row, Z_L[0]": np.tanh(Z_L[-1] @ W + b),
            "you pooled every row ([n, H]): the pooler reads one row, [CLS], and gives [H]": np.tanh(Z_L @ W + b)}


def _mlm_row(tr, model, m, *, gelu="erf", bias=True, ln=True, ln_first=False):
    """The head's logits at row m, computed the right way or with one known mistake."""
    import scipy.special
    w = {k: f64(v) for k, v in model.weights.items() if k.startswith("mlm.") or k == "embed.W_T"}
    x = f64(tr[f"layer.{model.config.num_layers - 1}.ffn.ln"])[m] @ w["mlm.W_t"] + w["mlm.b_t"]

    def norm(x):
        return (x - x.mean()) / np.sqrt(x.var() + model.config.layer_norm_eps) * w["mlm.ln.gamma"] + w["mlm.ln.beta"]

    if ln and ln_first:
        x = norm(x)
    if gelu == "erf":
        x = 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))
    elif gelu == "relu":
        x = np.maximum(x, 0.0)
    else:  # the tanh approximation (hugging face's gelu_new)
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if ln and not ln_first:
        x = norm(x)
    return x @ w["embed.W_T"].T + (w["mlm.bias"] if bias else 0.0)


def _mlm_mistakes(tr, m, model):
    return {"the output bias b^mlm is missing: every piece has its own": _mlm_row(tr, model, m, bias=False),
            "that is GELU's tanh approximation; BERT uses the exact form with erf (lesson 07, exercise 07.1)":
                _mlm_row(tr, model, m, gelu="tanh"),
            "you used ReLU: the head's activation is GELU, x Phi(x) (lesson 07)": _mlm_row(tr, model, m, gelu="relu"),
            "the head's LayerNorm is missing: normalise the H features (with mlm.ln's gamma and beta) before the "
            "tied output layer": _mlm_row(tr, model, m, ln=False),
            "you ran the LayerNorm before GELU: the head is dense, then GELU, then LayerNorm, then the tied output":
                _mlm_row(tr, model, m, ln_first=True),
            "you read the [CLS] row: the logits at the [MASK] come from row m of Z_L": _mlm_row(tr, model, 0),
            "those are probabilities (a softmax over the vocabulary): the answer is the logits before it":
                softmax(_mlm_row(tr, model, m))}


@exercise("10.1", hint=("the pooler reads one row of Z_L only, the [CLS] row, and gives a vector of shape [H]",
                        "which row of Z_L is [CLS], and which term of the pooler's line does the formula card leave "
                        "out?"),
          mistakes=_pooler_mistakes)
def _(answer, *, tr, model):
    return close(answer, tr["pooler.out"], atol=1e-5)


@exercise("10.2", hint=("four steps on row m of Z_L: a dense H x H layer (mlm.W_t, mlm.b_t), GELU with erf, LayerNorm "
                        "over the H features, then one score per vocabulary piece: the answer has shape [V]",
                        "the last step reuses the token table W_T (tied): which way round must it be to map H to V? "
                        "and what does every piece add on its own?"), mistakes=_mlm_mistakes)
def _(answer, *, tr, m, model):
    return close(answer, tr["mlm.logits"][m], atol=2e-4, rtol=1e-5)


@exercise("10.3", hint="run the cell: one [MASK] holds one word piece; count the pieces", prediction=True)
def _(answer, *, model, word):
    return equals(answer, len(model.tokenize(word).tokens) - 2)
