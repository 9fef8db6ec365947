"""Exercises of lesson 11 (training): a whole encoder layer's backward, written by the student, then an
optimiser and a training loop.

Every backward exercise asks for a function. Its checker calls it on small seeded float64 inputs (a batch of
two, non-zero biases, LayerNorm gains away from 1, a [PAD] key in the second example) and compares each
gradient it returns, in the order the gradient flows, with two references: `bertviz_lite.backward` (the
package's backward, one function per forward line) and central finite differences of the forward line (a
loss sum(G * output) for a fixed random G). The first gradient that differs is named; if the whole answer
equals a mistake the lesson knows, the mistake is named too. Each mistake below differs from the answer by
construction (a missing term, a factor sqrt(d_k), a transpose, a masked key, a second path), never by
rounding. The message of a right answer shows the backward line, once it is yours.
"""
import math

import numpy as np
from scipy.special import erf
from threadpoolctl import threadpool_limits

from bertviz_lite import backward, engine, mlm, tasks
from bertviz_lite.config import BertConfig
from bertviz_lite.trace import NullRecorder, Recorder
from course.checks import STUB, close, equals, exercise
from exercises._common import f64, softmax

H_STEP = 1e-6
FD_ENTRIES = 5  # entries per gradient checked by finite differences (the references agree on every entry)


# ------------------------------------------------------------------------------------------
# the machinery: call a function answer, compare its gradients in flow order, name the mistake
# ------------------------------------------------------------------------------------------


def _copies(args):
    return [{k: np.array(v) for k, v in a.items()} if isinstance(a, dict) else
            (np.array(a) if isinstance(a, np.ndarray) else a) for a in args]


def _tol(ref):
    return 1e-6 * max(1.0, float(np.max(np.abs(ref)))) if np.size(ref) else 1e-6


def _agree(a, ref) -> tuple[bool, str]:
    try:
        a = f64(a)
    except Exception:
        return False, f"not an array of numbers ({type(a).__name__})"
    if a.shape != np.shape(ref):
        return False, f"shape {a.shape}, expected {np.shape(ref)}"
    return close(a, ref, atol=_tol(ref), rtol=1e-6)


def _slopes(loss, x, entries):
    """Central finite differences of loss(x) at the entries of x (float64, copied)."""
    x = np.array(x, dtype=np.float64)
    out = []
    for idx in entries:
        old = x[idx]
        x[idx] = old + H_STEP
        up = loss(x)
        x[idx] = old - H_STEP
        down = loss(x)
        x[idx] = old
        out.append((up - down) / (2 * H_STEP))
    return np.array(out)


def _some_entries(shape, seed):
    rng = np.random.default_rng(seed)
    return sorted({tuple(int(rng.integers(0, s)) for s in shape) for _ in range(FD_ENTRIES)})


def _judge(answer, args, flatten, reference, mistakes, fd, right_line, what):
    """The verdict on a function answer: its outputs (flatten(out) -> {name: array}, in the order the gradient
    flows) against reference(*args), then against finite differences (fd: {name: (loss of that input, the
    input)}); if wrong, the first wrong name and, when the whole answer makes one, the mistake's sentence."""
    if not callable(answer):
        return False, f"write a function, {what}: ..., and pass the function itself (no parentheses)"
    out = answer(*_copies(args))
    if out is Ellipsis:
        return False, STUB
    if isinstance(out, tuple) and any(o is Ellipsis for o in out):
        return False, "your function still returns ... somewhere: replace every ... with your line"
    try:
        got = flatten(out)
    except Exception as e:
        return False, f"your function returned {type(out).__name__}, which does not unpack as {what} says ({e})"
    ref = flatten(reference(*_copies(args)))
    first = None
    for name, r in ref.items():
        if name not in got:
            return False, f"{name} is missing from what your function returns"
        ok, detail = _agree(got[name], r)
        if not ok:
            first = (name, detail)
            break
    if first is None:
        for name, (loss, x) in fd.items():
            entries = _some_entries(np.shape(x), len(name))
            slopes = _slopes(loss, x, entries)
            ok, detail = close(np.array([f64(got[name])[e] for e in entries]), slopes,
                               atol=1e-5, rtol=1e-4)
            if not ok:
                return False, f"{name} agrees with bertviz_lite.backward but not with finite differences: {detail}"
        return True, f"every gradient equals bertviz_lite.backward's and the finite differences. The line: {right_line}"
    name, detail = first
    for sentence, wrong in mistakes.items():
        w = flatten(wrong(*_copies(args)))
        if all(k in got and _agree(got[k], v)[0] for k, v in w.items()):
            return False, f"{name} is the first gradient that is off: {sentence}"
    return False, f"{name} is the first gradient that is off ({detail}); the ones before it are right"


def _rng(seed):
    return np.random.default_rng([11, seed])


# ------------------------------------------------------------------------------------------
# 11.1  the loss's gradient: d loss / d logits
# ------------------------------------------------------------------------------------------


def _onehot(shape, targets):
    o = np.zeros(shape)
    o[np.arange(len(targets)), targets] = 1.0
    return o


def _ce(y, targets):
    return float(mlm.cross_entropy(y, np.asarray(targets), np))


def _dlogits_case():
    rng = _rng(1)
    return [rng.normal(0, 2, (4, 9)), np.array([3, 0, 8, 3])]


def _dlogits_mistakes(**context):
    def n_times(y, t):
        return softmax(y) - _onehot(y.shape, t)

    def flipped(y, t):
        return (_onehot(y.shape, t) - softmax(y)) / len(t)

    def no_onehot(y, t):
        return softmax(y) / len(t)

    def columns(y, t):
        return (softmax(y, axis=0) - _onehot(y.shape, t)) / len(t)

    return {"right up to a factor N: the loss is the mean over the N rows": n_times,
            "the sign is flipped: that is the direction that lowers the loss, not the gradient": flipped,
            "you left out the -1 at each row's target: -log p_t falls when y_t rises": no_onehot,
            "your softmax ran down the columns (over the rows): each row's softmax is over the vocabulary": columns}


@exercise("11.1", hint=("the loss is the mean over the N chosen rows of -log softmax(y_i)[t_i]; differentiate one row "
                        "first: the answer has y's shape (N, V)",
                        "for one row, how does -log softmax(y)_t move when y_t rises a little, and when another y_j "
                        "rises? and what does the mean over N rows do to each row's gradient?"),
          mistakes=_dlogits_mistakes)
def _(answer):
    y, t = _dlogits_case()
    return _judge(answer, [y, t], lambda o: {"dy": o}, lambda y, t: mlm.cross_entropy_backward(y, t, np),
                  _dlogits_mistakes(), {"dy": (lambda x: _ce(x, t), y)}, "dy = (softmax(y) - onehot(t)) / N",
                  "my_dlogits(y, targets) -> dy")


# ------------------------------------------------------------------------------------------
# 11.2  BERT's masking count (a prediction)
# ------------------------------------------------------------------------------------------


@exercise("11.2", hint=("BERT's recipe chooses 15% of the word pieces: what is 15% of 3, and of 33, before rounding?",
                        "what does 4.95 round to, and can a sentence end up with no piece to predict at all?"),
          prediction=True, wrong=lambda answer, pieces: [(0, 5), (1, 4), (0, 4), 5])
def _(answer, *, pieces):
    actual = tuple(max(1, int(round(0.15 * p))) for p in pieces)
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[0] == 0:
        return False, "15% of 3 rounds to 0, but the recipe takes at least one piece: a sentence always has a target"
    return equals(tuple(answer) if isinstance(answer, (tuple, list)) else answer, actual)


# ------------------------------------------------------------------------------------------
# 11.3  LayerNorm, backwards
# ------------------------------------------------------------------------------------------


def _ln_case():
    rng = _rng(5)
    x = rng.normal(size=(2, 3, 6)) * rng.uniform(0.5, 3, (2, 3, 1)) + rng.normal(0, 2, (2, 3, 1))
    return [rng.normal(size=(2, 3, 6)), x, rng.uniform(0.5, 2.0, 6), 1e-12]  # dy, x, gamma, eps


def _ln_ref(dy, x, gamma, eps):
    return backward.layer_norm_backward(dy, x, gamma, eps, np)


def _ln_flat(o):
    dx, dgamma, dbeta = o
    return {"dbeta": dbeta, "dgamma": dgamma, "dx": dx}


def _ln_parts(dy, x, gamma, eps):
    mu = x.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mu) * inv, inv, dy * gamma


def _ln_mistakes(**context):
    def no_mean(dy, x, gamma, eps):
        xh, inv, g = _ln_parts(dy, x, gamma, eps)
        dx = inv * (g - xh * (g * xh).mean(-1, keepdims=True))
        return dx, *_ln_ref(dy, x, gamma, eps)[1:]

    def no_var(dy, x, gamma, eps):
        xh, inv, g = _ln_parts(dy, x, gamma, eps)
        return inv * (g - g.mean(-1, keepdims=True)), *_ln_ref(dy, x, gamma, eps)[1:]

    def no_gamma(dy, x, gamma, eps):
        dx, dgamma, dbeta = _ln_ref(dy, x, np.ones_like(gamma), eps)
        return dx, _ln_ref(dy, x, gamma, eps)[1], dbeta

    def dgamma_plain(dy, x, gamma, eps):
        dx, _, dbeta = _ln_ref(dy, x, gamma, eps)
        return dx, dbeta, dbeta

    return {"you dropped LayerNorm's mean term: every x_j moves the row's mean, so each row's gradient loses its "
            "average": no_mean,
            "you dropped the variance term: every x_j moves the row's standard deviation too": no_var,
            "you forgot gamma: the gradient reaches x_hat through gamma * x_hat": no_gamma,
            "dgamma is dbeta: gamma multiplies x_hat, so each token's dy is weighted by its x_hat": dgamma_plain}


@exercise("11.3", hint=("y = gamma x_hat + beta with x_hat = (x - mean) / sqrt(var + eps): x reaches y three ways, "
                        "straight through x - mean, through the mean, and through the variance",
                        "besides its own x_hat_j, which two numbers of its row does every x_j move? each of them "
                        "sends a share of every other entry's gradient back to x_j: what does each share average?"),
          mistakes=_ln_mistakes)
def _(answer):
    dy, x, gamma, eps = _ln_case()
    beta = np.zeros_like(gamma)

    def out(x_, g_):
        return float((dy * engine.layer_norm.formula(x_, g_, beta, eps, np)).sum())

    return _judge(answer, [dy, x, gamma, eps], _ln_flat, _ln_ref, _ln_mistakes(),
                  {"dx": (lambda v: out(v, gamma), x), "dgamma": (lambda g: out(x, g), gamma)},
                  "g = dy gamma; dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps); dgamma = sum of dy x_hat; "
                  "dbeta = sum of dy", "my_layer_norm_backward(dy, x, gamma, eps) -> (dx, dgamma, dbeta)")


# ------------------------------------------------------------------------------------------
# 11.4  GELU, backwards
# ------------------------------------------------------------------------------------------


def _gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _gelu_slope(x):
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _gelu_case():
    rng = _rng(4)
    return [rng.normal(size=(2, 3, 6)), rng.normal(0, 1.5, (2, 3, 6))]  # dy, x


def _gelu_mistakes(**context):
    return {"you kept Phi(x) and dropped x phi(x): GELU is a product, x times Phi(x), so both factors move":
                lambda dy, x: dy * 0.5 * (1.0 + erf(x / math.sqrt(2.0))),
            "you returned GELU's slope alone: multiply it by the gradient that arrives, dy":
                lambda dy, x: _gelu_slope(x),
            "you took the slope at GELU's output: the derivative is taken at its input x":
                lambda dy, x: dy * _gelu_slope(_gelu(x))}


@exercise("11.4", hint=("GELU(x) = x Phi(x), with Phi the standard normal's cumulative distribution and phi = Phi' its "
                        "density: a product of two factors that both depend on x",
                        "x Phi(x) is a product: what does the product rule give, and what is Phi's own "
                        "derivative? then what multiplies the slope on the way back?"), mistakes=_gelu_mistakes)
def _(answer):
    dy, x = _gelu_case()
    return _judge(answer, [dy, x], lambda o: {"dx": o}, lambda dy, x: backward.gelu_backward(dy, x, np),
                  _gelu_mistakes(), {"dx": (lambda v: float((dy * _gelu(v)).sum()), x)},
                  "dx = dy (Phi(x) + x phi(x))", "my_gelu_backward(dy, x) -> dx")


# ------------------------------------------------------------------------------------------
# 11.5  a linear line y = x W + b, backwards
# ------------------------------------------------------------------------------------------


def _linear_case():
    rng = _rng(3)
    return [rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4))]  # dy, x, W


def _linear_ref(dy, x, W):
    return backward.linear_backward(dy, x, W, np)


def _linear_flat(o):
    dx, dW, db = o
    return {"db": db, "dW": dW, "dx": dx}


def _linear_mistakes(**context):
    def transposed(dy, x, W):
        dx, dW, db = _linear_ref(dy, x, W)
        return dx, dW.T, db

    def averaged(dy, x, W):
        dx, dW, db = _linear_ref(dy, x, W)
        return dx, dW, db / (dy.shape[0] * dy.shape[1])

    def first_only(dy, x, W):
        dx, dW, db = _linear_ref(dy, x, W)
        return dx, x[0].T @ dy[0], dy[0].sum(0)

    return {"dW is transposed: it must have W's shape [k, m], input rows by output columns": transposed,
            "db is averaged over the rows: d loss / d y already holds the loss's 1/N, so the rows' gradients add up":
                averaged,
            "dW and db hold the first example only: a weight is used by every token of every example, so every one "
            "of them adds to its gradient": first_only}


@exercise("11.5", hint=("y = x W + b touches W once per token (of every example) and b once per token: each use adds "
                        "a term to the gradient. Shapes: dx like x, dW like W [k, m], db like b [m]",
                        "with x and dy flattened to rows ([tokens, k] and [tokens, m]), which product of ___.T and "
                        "___ has W's shape? and which weight does dy meet on its way back to x?"),
          mistakes=_linear_mistakes)
def _(answer):
    dy, x, W = _linear_case()
    return _judge(answer, [dy, x, W], _linear_flat, _linear_ref, _linear_mistakes(),
                  {"dW": (lambda w: float((dy * (x @ w)).sum()), W), "dx": (lambda v: float((dy * (v @ W)).sum()), x)},
                  "dx = dy W^T, dW = x^T dy, db = sum of dy over the rows (x, dy flattened to rows)",
                  "my_linear_backward(dy, x, W) -> (dx, dW, db)")


# ------------------------------------------------------------------------------------------
# 11.6  the masked-LM head, backwards (from d loss / d logits to d Z at the chosen rows)
# ------------------------------------------------------------------------------------------

HEAD_KEYS = ("mlm.bias", "mlm.ln.beta", "mlm.ln.gamma", "mlm.b_t", "mlm.W_t")  # in the order the gradient meets them
SMALL = BertConfig(vocab_size=11, hidden_size=8, num_layers=1, num_heads=2, ffn_size=16, max_positions=8)


def _head_case():
    rng = _rng(6)
    H, V = SMALL.hidden_size, SMALL.vocab_size
    W = {"mlm.W_t": rng.normal(0, 0.5, (H, H)), "mlm.b_t": rng.normal(0, 0.5, H),
         "mlm.ln.gamma": rng.uniform(0.5, 2, H),
         "mlm.ln.beta": rng.normal(0, 0.5, H), "mlm.bias": rng.normal(0, 0.5, V), "embed.W_T": rng.normal(0, 1, (V, H))}
    Z = rng.normal(size=(4, H))
    targets = np.array([1, 7, 7, 2])
    tape = Recorder(np)
    y = engine.mlm_head(W, Z, SMALL, tape, np, tape=tape)
    return [mlm.cross_entropy_backward(y, targets, np), W, tape.store, Z, SMALL.layer_norm_eps], targets


def _head_flat(o):
    dZ, grads = o
    return {**{k: grads[k] for k in HEAD_KEYS}, "dZ": dZ}


def _head_ref(dy, W, tape, Z, eps, *, ln_at="mlm.act", gelu_at="mlm.dense", gelu=True):
    g = {"mlm.bias": dy.sum(0)}
    dh = dy @ W["embed.W_T"]
    dact, g["mlm.ln.gamma"], g["mlm.ln.beta"] = backward.layer_norm_backward(dh, tape[ln_at], W["mlm.ln.gamma"], eps,
                                                                            np)
    ddense = backward.gelu_backward(dact, tape[gelu_at], np) if gelu else dact
    dZ, g["mlm.W_t"], g["mlm.b_t"] = backward.linear_backward(ddense, Z, W["mlm.W_t"], np)
    return dZ, g


def _head_mistakes(**context):
    return {"you skipped GELU's backward: the gradient passes GELU's slope on the way from the LayerNorm to the "
            "dense line": lambda *a: _head_ref(*a, gelu=False),
            "LayerNorm's backward read its output (mlm.transform): it needs its input, the GELU's output (mlm.act)":
                lambda *a: _head_ref(*a, ln_at="mlm.transform"),
            "GELU's backward read its output (mlm.act): its slope is taken at its input, the dense line (mlm.dense)":
                lambda *a: _head_ref(*a, gelu_at="mlm.act")}


@exercise("11.6", hint=("go up the head's lines from the top: the logits' line (bias, then the tied decoder W_T), the "
                        "LayerNorm, the GELU, the dense line; each is one of your functions, read from the tape at "
                        "that line's input",
                        "the logits are h W_T^T + b: with dy [N, V] and W_T [V, H], which product has dh's shape "
                        "[N, H]? and which tape key holds each line's input?"), mistakes=_head_mistakes)
def _(answer):
    args, targets = _head_case()
    dy, W, tape, Z, eps = args
    return _judge(answer, args, _head_flat, lambda *a: backward.mlm_head_backward(
        a[0], a[1], a[2].__getitem__, a[3], SMALL, np), _head_mistakes(),
        {"mlm.W_t": (lambda w: _ce(engine.mlm_head({**W, "mlm.W_t": w}, Z, SMALL, NullRecorder(np), np), targets),
                     W["mlm.W_t"]),
         "dZ": (lambda z: _ce(engine.mlm_head(W, z, SMALL, NullRecorder(np), np), targets), Z)},
        "db^mlm = sum of dy; dh = dy W_T; LayerNorm back to d act; GELU back to d dense; the dense line back to dZ, "
        "dW^t, db^t", "my_head_backward(dy, W, tape, Z, eps) -> (dZ, grads)")


# ------------------------------------------------------------------------------------------
# 11.7  the softmax, backwards
# ------------------------------------------------------------------------------------------


def _softmax_case():
    rng = _rng(7)
    s = rng.normal(0, 1.5, (2, 2, 4, 4))
    s[1, ..., 3] = -np.inf  # a [PAD] key in the second example: p = 0 there
    return [rng.normal(size=(2, 2, 4, 4)), softmax(s)]  # dP, P


def _softmax_mistakes(**context):
    return {"you left out the subtraction: raising one score lowers every other weight of its row":
                lambda dP, P: P * dP,
            "you left out the factor p: a weight near 0 barely moves when its score moves":
                lambda dP, P: dP - (dP * P).sum(-1, keepdims=True),
            "your sum ran over the queries (axis -2): each row's softmax mixes only that row's keys":
                lambda dP, P: P * (dP - (dP * P).sum(-2, keepdims=True)),
            "you kept only the diagonal of the Jacobian, p (1 - p): every key's score moves every weight of its row":
                lambda dP, P: P * (1 - P) * dP}


@exercise("11.7", hint=("A = softmax(E) row by row: raising one score raises its own weight and lowers every other "
                        "weight of the same row",
                        "if every score of a row rises by the same amount, do the weights change? so what must each "
                        "row of dE sum to, and which term of yours makes it so?"), mistakes=_softmax_mistakes)
def _(answer):
    dP, P = _softmax_case()
    s = np.log(np.where(P > 0, P, 1.0))  # scores whose softmax is P (the [PAD] key at -inf)
    s[P == 0] = -np.inf
    return _softmax_judge(answer, dP, P, s)


def _softmax_judge(answer, dP, P, s):
    # finite differences on the first example (no -inf there: nudging a masked score is meaningless)
    dP0 = dP[0]
    fd = {"dE": (lambda v: float((dP0 * softmax(v)).sum()), s[0])}
    verdict = _judge(answer, [dP, P], lambda o: {"dE": o}, lambda dP, P: backward.softmax_backward(dP, P, np),
                     _softmax_mistakes(), {}, "", "my_softmax_backward(dA, A) -> dE")
    if not verdict[0]:
        return verdict
    got = f64(answer(dP.copy(), P.copy()))[0]
    entries = _some_entries(s[0].shape, 7)
    ok, detail = close(np.array([got[e] for e in entries]), _slopes(fd["dE"][0], s[0], entries), atol=1e-5, rtol=1e-4)
    if not ok:
        return False, f"dE agrees with bertviz_lite.backward but not with finite differences: {detail}"
    return True, ("dE equals bertviz_lite.backward's and the finite differences, and is 0 on the [PAD] key. The line: "
                  "dE = A * (dA - sum over the keys of dA * A)")


# ------------------------------------------------------------------------------------------
# 11.8  attention's core, backwards: C = softmax(Q K^T / sqrt(d_k) + M) V  ->  dQ, dK, dV
# ------------------------------------------------------------------------------------------


def _attn_case():
    rng = _rng(8)
    Q, K, V, dC = (rng.normal(size=(2, 2, 5, 3)) for _ in range(4))
    M = np.zeros((2, 1, 1, 5))
    M[1, ..., 3:] = -np.inf  # the second example's last two keys are [PAD]
    return [dC, Q, K, V, M]


def _attn_ref(dC, Q, K, V, M, *, scale=True, mask=True, dK_t=True, dV_t=True):
    s = 1.0 / math.sqrt(Q.shape[-1])
    P = softmax(Q * s @ np.swapaxes(K, -1, -2) + (M if mask else 0.0))
    dP = dC @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(P, -1, -2) @ dC if dV_t else P @ dC
    dE = backward.softmax_backward(dP, P, np)
    k = s if scale else 1.0
    dQ = k * (dE @ K)
    dK = k * (np.swapaxes(dE, -1, -2) @ Q if dK_t else dE @ Q)
    return dQ, dK, dV


def _attn_flat(o):
    dQ, dK, dV = o
    return {"dV": dV, "dQ": dQ, "dK": dK}


def _attn_mistakes(**context):
    return {"you forgot the scale: the scores are Q K^T times 1/sqrt(d_k), so dQ and dK carry that factor too":
                lambda *a: _attn_ref(*a, scale=False),
            "you forgot the mask: the map you differentiate must be the forward's, with M's -inf on the [PAD] keys":
                lambda *a: _attn_ref(*a, mask=False),
            "dK is transposed the wrong way: key j's gradient collects column j of dE, every query's "
            "look at key j": lambda *a: _attn_ref(*a, dK_t=False),
            "dV sums over the wrong index of the map: value row j reaches every query i through A[i, j]":
                lambda *a: _attn_ref(*a, dV_t=False)}


def _attn_loss(dC, Q, K, V, M):
    s = 1.0 / math.sqrt(Q.shape[-1])
    return float((dC * (softmax(Q * s @ np.swapaxes(K, -1, -2) + M) @ V)).sum())


@exercise("11.8", hint=("run the forward's lines backwards: C = A V gives dA and dV; A = softmax(E) gives dE (your "
                        "11.7); E = Q K^T / sqrt(d_k) + M gives dQ and dK. Recompute A first, as the forward did",
                        "E[i, j] = q_i . k_j / sqrt(d_k): which entries of dE does q_i get a gradient from, and "
                        "which does k_j? what factor do both carry?"), mistakes=_attn_mistakes)
def _(answer):
    dC, Q, K, V, M = _attn_case()
    return _judge(answer, [dC, Q, K, V, M], _attn_flat, _attn_ref, _attn_mistakes(),
                  {"dQ": (lambda q: _attn_loss(dC, q, K, V, M), Q), "dK": (lambda k: _attn_loss(dC, Q, k, V, M), K),
                   "dV": (lambda v: _attn_loss(dC, Q, K, v, M), V)},
                  "A = softmax(Q K^T / sqrt(d_k) + M); dA = dC V^T; dV = A^T dC; dE = A * (dA - rowsum(dA * A)); "
                  "dQ = dE K / sqrt(d_k); dK = dE^T Q / sqrt(d_k)",
                  "my_attention_backward(dC, Q, K, V, M) -> (dQ, dK, dV)")


# ------------------------------------------------------------------------------------------
# 11.9  a whole encoder layer, backwards
# ------------------------------------------------------------------------------------------

# the gradients of a layer in the order the gradient meets them (feed-forward first, then attention)
LAYER_KEYS = ("ffn.ln.beta", "ffn.ln.gamma", "ffn.b_down", "ffn.W_down", "ffn.b_up", "ffn.W_up", "attn.ln.beta",
              "attn.ln.gamma", "attn.b_O", "attn.W_O", "attn.b_V", "attn.W_V", "attn.b_Q", "attn.W_Q", "attn.b_K",
              "attn.W_K")


def _layer_case():
    rng = _rng(9)
    c, H, F = SMALL, SMALL.hidden_size, SMALL.ffn_size
    W = {}
    for name in ("Q", "K", "V", "O"):
        W[f"attn.W_{name}"], W[f"attn.b_{name}"] = rng.normal(0, 0.4, (H, H)), rng.normal(0, 0.3, H)
    W["ffn.W_up"], W["ffn.b_up"] = rng.normal(0, 0.4, (H, F)), rng.normal(0, 0.3, F)
    W["ffn.W_down"], W["ffn.b_down"] = rng.normal(0, 0.4, (F, H)), rng.normal(0, 0.3, H)
    for ln in ("attn.ln", "ffn.ln"):
        W[f"{ln}.gamma"], W[f"{ln}.beta"] = rng.uniform(0.5, 2, H), rng.normal(0, 0.3, H)
    Z = rng.normal(size=(2, 5, H))
    M = np.zeros((2, 1, 1, 5))
    M[1, ..., 3:] = -np.inf
    tape = Recorder(np)
    engine.encoder_layer(W, Z, M, c, tape, np)
    return [rng.normal(size=(2, 5, H)), W, tape.store, Z, M, c.num_heads, c.layer_norm_eps]


def _layer_flat(o):
    dZ, grads = o
    return {**{k: grads[k] for k in LAYER_KEYS}, "dZ": dZ}


def _layer_ref(dy, W, tape, Z, M, n_h, eps, *, ffn_resid=True, attn_resid=True, plain=False, up_reads="attn.ln"):
    """The layer's backward from backward.*'s lines, with switches that make the named mistakes."""
    g = {}
    dres, g["ffn.ln.gamma"], g["ffn.ln.beta"] = backward.layer_norm_backward(dy, tape["ffn.resid"], W["ffn.ln.gamma"],
                                                                          eps, np)
    dact, g["ffn.W_down"], g["ffn.b_down"] = backward.linear_backward(dres, tape["ffn.act"], W["ffn.W_down"], np)
    dup = backward.gelu_backward(dact, tape["ffn.up"], np)
    dZbar, g["ffn.W_up"], g["ffn.b_up"] = backward.linear_backward(dup, tape[up_reads], W["ffn.W_up"], np)
    dZbar = dZbar + dres if ffn_resid else dZbar
    dres, g["attn.ln.gamma"], g["attn.ln.beta"] = backward.layer_norm_backward(dZbar, tape["attn.resid"],
                                                                            W["attn.ln.gamma"], eps, np)
    dconcat, g["attn.W_O"], g["attn.b_O"] = backward.linear_backward(dres, tape["attn.concat"], W["attn.W_O"], np)
    if plain:
        B, n, H = dconcat.shape
        dC = np.reshape(dconcat, (B, n_h, n, H // n_h))
    else:
        dC = engine.split_heads(dconcat, n_h, np)
    dQ, dK, dV = _attn_ref(dC, tape["attn.q"], tape["attn.k"], tape["attn.v"], M)
    dZ = dres if attn_resid else np.zeros_like(dres)
    for name, d in (("Q", dQ), ("K", dK), ("V", dV)):
        dpart, g[f"attn.W_{name}"], g[f"attn.b_{name}"] = backward.linear_backward(engine.merge_heads(d, np), Z,
                                                                                  W[f"attn.W_{name}"], np)
        dZ = dZ + dpart
    return dZ, g


def _layer_mistakes(**context):
    return {"you forgot the feed-forward residual's second path: Z-bar reaches the output straight "
            "(Z-bar + FFN(Z-bar)) as well as through the FFN, so its gradient is the sum of both":
                lambda *a: _layer_ref(*a, ffn_resid=False),
            "you forgot the attention residual's second path: Z_(l-1) reaches attn.resid straight as well as through "
            "Q, K and V": lambda *a: _layer_ref(*a, attn_resid=False),
            "you cut the heads apart with a plain reshape: the forward merged [n_h, n, d_k] into [n, H] with a "
            "transpose, "
            "so undoing it needs the transpose too (engine.split_heads)": lambda *a: _layer_ref(*a, plain=True),
            "the up-projection's backward read the layer's input Z_(l-1): the FFN reads Z-bar, attn.ln":
                lambda *a: _layer_ref(*a, up_reads="attn.resid")}


def _layer_loss(dy, W, Z, M):
    return float((dy * engine.encoder_layer(W, Z, M, SMALL, NullRecorder(np), np)).sum())


@exercise("11.9", hint=("the layer's lines bottom-up, from d Z_l: the FFN's LayerNorm, its residual, W^down, GELU, "
                        "W^up; "
                        "then attention's LayerNorm, its residual, W^O, the heads cut apart again, your 11.8, and the "
                        "three projections Q, K, V, which all read Z_(l-1)",
                        "a value that several lines read (Z-bar; Z_(l-1)) gets a gradient from each of them: how "
                        "do they combine, and which lines read Z_(l-1)?"), mistakes=_layer_mistakes)
def _(answer, *, real):
    args = _layer_case()
    dy, W, tape, Z, M, n_h, eps = args
    fd = {"dZ": (lambda z: _layer_loss(dy, W, z, M), Z),
          "attn.W_Q": (lambda w: _layer_loss(dy, {**W, "attn.W_Q": w}, Z, M), W["attn.W_Q"]),
          "ffn.ln.gamma": (lambda w: _layer_loss(dy, {**W, "ffn.ln.gamma": w}, Z, M), W["ffn.ln.gamma"])}
    ref = lambda *a: backward.encoder_layer_backward(a[0], a[1], a[2].__getitem__, a[3], SMALL, np)  # noqa: E731
    ok, detail = _judge(answer, args, _layer_flat, ref, _layer_mistakes(), fd,
                        "every line's backward, in reverse; a value read twice sums its gradients",
                        "my_layer_backward(dy, W, tape, Z, M, n_h, eps) -> (dZ, grads)")
    if not ok:
        return ok, detail
    # the real sentence: minilm-mlm's last layer on a masked sentence, against backward.encoder_layer_backward
    dy, W, tape, Z, M, n_h, eps, c = real
    got = _layer_flat(answer(*_copies([dy, W, tape, Z, M, n_h, eps])))
    want = _layer_flat(backward.encoder_layer_backward(dy, W, tape.__getitem__, Z, c, np))
    worst = max(float(np.abs(np.asarray(got[k]) - want[k]).max() / max(1.0, np.abs(want[k]).max())) for k in want)
    if worst > 1e-6:
        return False, f"right on the small layer, but on the real sentence a gradient differs by {worst:.2g}"
    return True, (f"{detail}; on the real sentence every gradient equals backward.encoder_layer_backward's within "
                  f"{worst:.0e}")


# ------------------------------------------------------------------------------------------
# 11.10  Adam's step for one tensor
# ------------------------------------------------------------------------------------------

B1, B2, ADAM_EPS = 0.9, 0.999, 1e-6  # mlm.Adam's


def _adam_case():
    rng = _rng(10)
    return rng.normal(size=(3, 4)), [rng.normal(size=(3, 4)) for _ in range(3)], 0.01


def _adam_run(step, p, grads, lr):
    """Three steps from m = v = 0 (t = 1, 2, 3) with `step(p, g, m, v, t, lr) -> (p, m, v)`."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p, m, v = step(p.copy(), g.copy(), m.copy(), v.copy(), t, lr)
    return p, m, v


def _adam_package(p, grads, lr):
    """Three steps of mlm.Adam (the package's optimiser) on one tensor: (p, m, v) after them."""
    opt, params = mlm.Adam({"p": p}, np, B1, B2, ADAM_EPS), {"p": p}
    for g in grads:
        params = opt.step(params, {"p": g}, lr)
    return params["p"], opt.m["p"], opt.v["p"]


def _adam_ref(p, g, m, v, t, lr, *, correct_m=True, correct_v=True, root=True, sign=1.0):
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    mh = m / (1 - B1 ** t) if correct_m else m
    vh = v / (1 - B2 ** t) if correct_v else v
    return p - sign * lr * mh / ((np.sqrt(vh) if root else vh) + ADAM_EPS), m, v


def _adam_mistakes(**context):
    return {"you left out the bias correction: m and v start at 0, so early on they are too small by 1 - beta^t":
                lambda *a: _adam_ref(*a, correct_m=False, correct_v=False),
            "you corrected m but not v: both start at 0": lambda *a: _adam_ref(*a, correct_v=False),
            "you divided by v, not by its square root: the step is m over the gradient's typical size, sqrt(v)":
                lambda *a: _adam_ref(*a, root=False),
            "the sign is flipped: a step goes against the gradient": lambda *a: _adam_ref(*a, sign=-1.0)}


@exercise("11.10", hint=("Adam keeps two running averages per number, of the gradient (m) and of its square (v), "
                         "and steps by the first over the square root of the second; both averages start at 0",
                         "m and v start at 0: after the first step, how far below the gradient's size is m, and "
                         "what undoes that at every t? where does ADAM_EPS keep the division safe?"),
          mistakes=_adam_mistakes)
def _(answer):
    p, grads, lr = _adam_case()
    if not callable(answer):
        return False, "write a function, my_adam_step(p, g, m, v, t, lr) -> (p, m, v)"
    if answer(p.copy(), grads[0].copy(), np.zeros_like(p), np.zeros_like(p), 1, lr) is Ellipsis:
        return False, STUB
    runner = lambda step: (lambda p0, gs, lr_: _adam_run(step, p0, gs, lr_))  # noqa: E731
    verdict = _judge(runner(answer), [p, grads, lr], lambda o: dict(zip("pmv", o)), _adam_package,
                     {s: runner(f) for s, f in _adam_mistakes().items()}, {},
                     "m = B1 m + (1 - B1) g; v = B2 v + (1 - B2) g^2; p -= lr (m / (1 - B1^t)) / "
                     "(sqrt(v / (1 - B2^t)) + ADAM_EPS)", "my_adam_step(p, g, m, v, t, lr) -> (p, m, v)")
    return verdict[0], verdict[1].replace("first gradient that is off", "first output that is off").replace(
        "every gradient equals bertviz_lite.backward's and the finite differences", "three steps equal mlm.Adam's")


# ------------------------------------------------------------------------------------------
# 11.11  the training loop
# ------------------------------------------------------------------------------------------


def _loop_mistakes(**context):
    def one_batch(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
        batch = minibatch(rng)
        return tasks.fit(params, step, steps, rng, minibatch=lambda r: batch, grad_fn=grad_fn, heldout=heldout,
                         every=every)

    def no_update(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
        def fn(p, g):
            step(p, g)
            return p
        return tasks.fit(params, fn, steps, rng, minibatch=minibatch, grad_fn=grad_fn, heldout=heldout, every=every)

    def last_loss(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
        curve, losses = [], []
        for s in range(1, steps + 1):
            loss, grads = grad_fn(params, minibatch(rng))
            params = step(params, grads)
            if s % every == 0 or s == steps:
                curve.append((s, float(loss), heldout(params)))
        return params, curve

    return {"you drew one minibatch and trained on it every step: draw a fresh one inside the loop": one_batch,
            "the parameters never change: keep what the step returns (params = step(params, grads))": no_update,
            "the curve's training loss is the last step's: a row holds the mean over the steps since the last row":
                last_loss}


@exercise("11.11", hint=("a step is: a fresh minibatch, its loss and gradients, the optimiser's step; a row of the "
                         "curve every `every` steps and after the last, with the training losses since the last row "
                         "averaged and the held-out number of the parameters now",
                         "inside the loop over the steps, what does params become after the step, and which step "
                         "numbers put a row on the curve (think of the last step when steps is not a multiple of "
                         "every)?"), mistakes=_loop_mistakes)
def _(answer, *, params, minibatch, grad_fn, heldout):
    if not callable(answer):
        return False, "write a function, my_train(params, step, steps, rng, *, minibatch, grad_fn, heldout, every)"
    sgd = lambda p, g: {k: p[k] - 0.5 * g[k] for k in p}  # noqa: E731  a stateless step: every run is comparable
    if answer(dict(params), sgd, 0, np.random.default_rng(0), minibatch=minibatch, grad_fn=grad_fn, heldout=heldout,
              every=1) is Ellipsis:
        return False, STUB

    def runner(fn):
        def run(seed):
            p, curve = fn(dict(params), sgd, 3, np.random.default_rng(seed), minibatch=minibatch, grad_fn=grad_fn,
                          heldout=heldout, every=2)
            return p, curve
        return run

    def flat(o):
        p, curve = o
        curve = [tuple(r) for r in curve]
        return {"curve's steps": np.array([r[0] for r in curve], dtype=float),
                "curve's training losses": np.array([r[1] for r in curve], dtype=float),
                "curve's held-out numbers": np.array([r[2] for r in curve], dtype=float),
                **{f"params[{k!r}]": p[k] for k in sorted(p)}}

    with threadpool_limits(1):  # tiny products: BLAS threads only wait on each other (and on a busy machine, long)
        ok, detail = _judge(runner(answer), [5], flat, runner(tasks.fit),
                            {s: runner(f) for s, f in _loop_mistakes().items()}, {}, "",
                            "my_train(params, step, steps, rng, ...) -> (params, curve)")
    if ok:
        return True, "three SGD steps from the same seed give tasks.fit's parameters and curve"
    return False, detail.replace("first gradient that is off", "first thing that differs from tasks.fit's")


# ------------------------------------------------------------------------------------------
# 11.12  which pattern will a head learn on the mirror task (a prediction)
# ------------------------------------------------------------------------------------------

PATTERNS = ("diagonal", "previous token", "anti-diagonal", "[CLS]", "uniform")


@exercise("11.12", hint=("the answer to a hidden letter sits in plain sight at one position: which one, for the letter "
                         "at position i of 2 half + 2?",
                         "mark, in each row of the 14 x 14 square, the column where that row's answer sits: what line "
                         "do the marks make?"),
          prediction=True, wrong=lambda answer, found: [p for p in PATTERNS if p != found])
def _(answer, *, found):
    # found: the best fit of the [MASK] rows of the head this run's model needs (the one whose ablation breaks it)
    if not isinstance(answer, str) or answer.strip().lower() not in [p.lower() for p in PATTERNS]:
        return False, f"answer with one of {list(PATTERNS)}"
    ok, _detail = equals(answer.strip().lower(), found.lower())
    if ok:
        return True, f"the [MASK] rows of the head this model needs (found by ablation) fit the {found} best"
    return False, (f"the [MASK] rows of the head this model needs (found by ablation) fit another pattern better than "
                   f"{answer.strip()!r}")
