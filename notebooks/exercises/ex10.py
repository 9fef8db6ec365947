"""Exercises of lesson 10 (pooler and masked-language modelling).

The checkers compare with the trace and name the known mistakes: the formula card's pooler without
its bias, the MLM logits without the output bias, and GELU's tanh approximation (as 06.1 does).
They run on weights whose biases are not zero (the fitted head's, a pooler bias drawn in the lesson),
so leaving a bias out changes the answer.
"""
import numpy as np

from course import close, equals, exercise


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def _pooler_without_bias(tr, model):
    Z_L = _f64(tr[f"layer.{model.config.num_layers - 1}.ffn.ln"])
    return np.tanh(Z_L[0] @ _f64(model.weights["pooler.W"]))


def _mlm_row(tr, model, m, *, gelu="erf", bias=True):
    """The head's logits at row m, computed the right way or with one known mistake."""
    import scipy.special
    w = {k: _f64(v) for k, v in model.weights.items() if k.startswith("mlm.") or k == "embed.W_T"}
    x = _f64(tr[f"layer.{model.config.num_layers - 1}.ffn.ln"])[m] @ w["mlm.W_t"] + w["mlm.b_t"]
    if gelu == "erf":
        x = 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))
    else:  # the tanh approximation (hugging face's gelu_new)
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    x = (x - x.mean()) / np.sqrt(x.var() + model.config.layer_norm_eps) * w["mlm.ln.gamma"] + w["mlm.ln.beta"]
    return x @ w["embed.W_T"].T + (w["mlm.bias"] if bias else 0.0)


def _named(answer, expected, mistakes, atol, rtol=1e-4):
    """close(answer, expected), and when it is not, the name of a known mistake the answer matches."""
    ok, detail = close(answer, expected, atol=atol, rtol=rtol)
    if ok:
        return ok, detail
    for what, wrong in mistakes:
        if close(answer, wrong, atol=atol, rtol=rtol)[0]:
            return False, what
    return ok, detail


@exercise("10.1", hint=("the pooler reads one row of Z_L only, the [CLS] row, and gives a vector of shape [H]",
                        "that row times the pooler's matrix, plus its bias, then tanh: the formula card drops the bias"),
          wrong=lambda answer, tr, model: [_pooler_without_bias(tr, model), np.tanh(_f64(answer))])
def _(answer, *, tr, model):
    return _named(answer, tr["pooler.out"], [("you left out the bias b, as the formula card does",
                                              _pooler_without_bias(tr, model))], atol=1e-5)


@exercise("10.2", hint=("four steps on row m of Z_L: a dense H x H layer (mlm.W_t, mlm.b_t), GELU with erf, LayerNorm "
                        "over the H features, then one score per vocabulary piece: the answer has shape [V]",
                        "the last step reuses the token table W_T (tied): which way round must it be to map H to V? "
                        "and every piece has its own output bias"),
          wrong=lambda answer, tr, m, model: [_mlm_row(tr, model, m, bias=False),
                                               _mlm_row(tr, model, m, gelu="tanh"), _f64(answer)[::-1]])
def _(answer, *, tr, m, model):
    mistakes = [("the output bias b^mlm is missing: every piece has its own", _mlm_row(tr, model, m, bias=False)),
                ("that is GELU's tanh approximation; BERT uses the exact form with erf (see 06.1)",
                 _mlm_row(tr, model, m, gelu="tanh"))]
    return _named(answer, tr["mlm.logits"][m], mistakes, atol=2e-4, rtol=1e-5)


@exercise("10.3", hint="run the cell: one [MASK] holds one word piece; count the pieces", prediction=True)
def _(answer, *, model, word):
    return equals(answer, len(model.tokenize(word).tokens) - 2)
