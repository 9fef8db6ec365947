"""Exercises of lesson 11 (training): a whole encoder layer's backward, written by the student, then an
optimiser and a training loop.

Every backward exercise asks for a function. Its checker calls it on small seeded float64 inputs (a batch of
two, non-zero biases, LayerNorm gains away from 1, a [PAD] key in the second example) and compares every
gradient it returns with two references: `bertviz_lite.backward` (the package's backward, one function per
forward line) and central finite differences of the forward line (a loss sum(G * output) for a fixed random G).
A wrong answer is matched against the mistakes the lesson knows, one at a time and two at once (each mistake is
a switch of the reference's own lines), and the message names every gradient that is off and every mistake that
makes it. Each mistake differs from the answer by construction (a missing term, a factor sqrt(d_k), a transpose,
a masked key, an eps that matters because some gradients are tiny or zero), never by rounding. A function that
changes its inputs in place, returns a key it should not or lacks one is told so by name. The message of a right
answer shows the student's own lines beside the reference's.
"""
import inspect
import itertools
import math
import re

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
# the machinery: call a function answer, compare its outputs, name every mistake it makes
# ------------------------------------------------------------------------------------------


class Unpack(Exception):
    """What the answer returned does not have the structure asked for; the message says what is missing."""


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


def _arg_names(what):
    """'my_f(dy, x, W) -> ...' -> ['dy', 'x', 'W']."""
    inside = what.split("(", 1)[1].split(")", 1)[0]
    return [a.strip() for a in inside.split(",") if a.strip() and "*" not in a]


def _changed(before, after, names):
    """The name of the first argument the answer changed in place (a dict's entry named by its key), or ''."""
    for name, b, a in zip(names, before, after):
        if isinstance(b, dict):
            for k in b:
                if isinstance(b[k], np.ndarray) and not np.array_equal(b[k], a.get(k), equal_nan=True):
                    return f"{name}[{k!r}]"
        elif isinstance(b, np.ndarray) and not np.array_equal(b, a, equal_nan=True):
            return name
    return ""


def _are(names):
    if len(names) > 4:  # in the order the gradient flows: the first one off, and how many after it
        return f"{names[0]} and {len(names) - 1} more after it are"
    return f"{names[0]} is" if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]} are"


def _shape_sentence(name, got, want):
    if len(want) == 1 and got != want:
        return (f"{name} has shape {got}, expected {want}: a bias's or a gain's gradient has one number per feature, "
                "added up over every example and every token")
    if len(want) == 2 and got == want[::-1]:
        return f"{name} is transposed (shape {got}): a weight's gradient has the weight's shape {want}, in by out"
    return f"{name} has shape {got}, expected {want}: a gradient has the shape of what it is the gradient of"


def your_lines(answer, limit=170):
    """The student's function as one line of code (no def, docstring or comments), or '' if it cannot be read."""
    try:
        src = inspect.getsource(answer)
    except (OSError, TypeError):
        return ""
    body = re.sub(r'(?s)^[^\n]*?:\s*\n\s*(""".*?"""|\'\'\'.*?\'\'\')?', "", src, count=1)
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for ln in body.splitlines()]
    text = "; ".join(ln for ln in lines if ln and not ln.startswith("#"))
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _judge(answer, args, flatten, reference, switches, fd, right_line, what, *, ref=None, shown=None):
    """The verdict on a function answer. flatten(out) -> {name: array} (raising Unpack with a sentence when the
    structure is wrong); ref(*args) the right outputs (default: reference(*args)); reference(*args, **switch) the
    outputs of a mistake, with switches {sentence: keyword switches}; fd: {name: (loss of that input, the input)}
    for finite differences. A wrong answer is named by one mistake, or by two at once."""
    if not callable(answer):
        return False, f"write a function, {what}: ..., and pass the function itself (no parentheses)"
    mine = _copies(args)
    try:
        out = answer(*mine)
    except Unpack as e:
        return False, str(e)
    if out is Ellipsis:
        return False, STUB
    if isinstance(out, tuple) and any(o is Ellipsis for o in out):
        return False, "your function still returns ... somewhere: replace every ... with your line"
    moved = _changed(args, mine, _arg_names(what))
    if moved:
        return False, (f"your function changed its input {moved} in place (an -=, *= or [...] = on it): the caller and "
                       "the tape still need it as the forward left it; compute into a new array")
    try:
        got = flatten(out)
    except Unpack as e:
        return False, str(e)
    except Exception as e:
        return False, f"your function returned {type(out).__name__}, which does not unpack as {what} says ({e})"
    want = flatten((ref or reference)(*_copies(args)))
    off = {}
    for name, r in want.items():
        ok, detail = _agree(got[name], r)
        if not ok:
            off[name] = detail
    if not off:
        for name, (loss, x) in fd.items():
            entries = _some_entries(np.shape(x), len(name))
            slopes = _slopes(loss, x, entries)
            ok, detail = close(np.array([f64(got[name])[e] for e in entries]), slopes, atol=1e-5, rtol=1e-4)
            if not ok:
                return False, f"{name} agrees with bertviz_lite.backward but not with finite differences: {detail}"
        yours = your_lines(shown or answer)
        return True, (f"every output equals the reference's, within 1e-6 on every case here. The reference: "
                      f"{right_line}" + (f". Yours, written your way: {yours}" if yours else ""))
    names = list(off)
    swap = {k: next((j for j in want if np.shape(want[j]) == f64(got[k]).shape and _agree(got[k], want[j])[0]), None)
            for k in off}
    if all(swap.values()) and sorted(swap.values()) == sorted(swap):
        return False, (f"the right values in the wrong places: what you return as {', '.join(swap)} is "
                       f"{', '.join(swap.values())}; {what} gives the order")
    made = {}

    def makes(sw):
        key = tuple(sorted(sw.items(), key=lambda kv: kv[0]))
        if key not in made:
            try:
                w = flatten(reference(*_copies(args), **sw))
                made[key] = all(_agree(got[k], v)[0] for k, v in w.items())
            except Exception:
                made[key] = False
        return made[key]

    for sentence, sw in switches.items():
        if makes(sw):
            return False, f"{_are(names)} off: {sentence}"
    for (s1, a), (s2, b) in itertools.combinations(switches.items(), 2):
        if not set(a) & set(b) and makes({**a, **b}):
            return False, f"{_are(names)} off, from two mistakes. First, {s1}. Second, {s2}"
    shaped = [n for n in names if f64(got[n]).shape != np.shape(want[n])]
    if shaped:
        return False, "; ".join(_shape_sentence(n, f64(got[n]).shape, np.shape(want[n])) for n in shaped)
    first = names[0]
    rest = f"; {', '.join(names[1:])} too" if len(names) > 1 else ""
    return False, f"{first} is off ({off[first]}){rest}; the others are right"


def _named(reference, switches):
    """The mistakes as the course's `mistakes=` wants them: {sentence: a function answer that makes it}."""
    return {s: (lambda *a, _sw=sw: reference(*a, **_sw)) for s, sw in switches.items()}


def _keys(grads, keys, what, frozen=()):
    """grads (a dict) holds exactly `keys`, or Unpack says which are missing or extra."""
    if not isinstance(grads, dict):
        raise Unpack(f"the second thing your function returns is {type(grads).__name__}; {what} asks for a dict "
                     "of gradients, one per parameter name")
    missing, extra = [k for k in keys if k not in grads], [k for k in grads if k not in keys]
    if missing:
        raise Unpack(f"your gradients lack {', '.join(map(repr, missing))}: every learned tensor of these lines "
                     f"gets a gradient ({len(keys)} of them)")
    if extra:
        why = [f"{k!r} is frozen (the decoder is the token table, tied and not trained here)" if k in frozen else
               f"{k!r} is not a parameter of these lines" for k in extra]
        raise Unpack(f"your gradients hold a key too many: {'; '.join(why)}")
    return grads


def _pair(o, what):
    if not isinstance(o, (tuple, list)) or len(o) != 2:
        n = len(o) if isinstance(o, (tuple, list)) else None
        raise Unpack(f"your function returned {type(o).__name__}" + (f" of {n} things" if n is not None else "") +
                     f"; {what} asks for a pair: the input's gradient first, then the dict of gradients")
    if isinstance(o[0], dict) and not isinstance(o[1], dict):
        raise Unpack("your pair is the wrong way round: the input's gradient first, then the dict of gradients")
    return o


def _triple(o, names):
    if not isinstance(o, (tuple, list)) or len(o) != len(names):
        raise Unpack(f"your function returned {type(o).__name__}" +
                     (f" of {len(o)} things" if isinstance(o, (tuple, list)) else "") +
                     f"; return the {len(names)} of them, in this order: ({', '.join(names)})")
    return o


def _rng(seed):
    return np.random.default_rng([11, seed])


# ------------------------------------------------------------------------------------------
# each forward line's backward, with switches that make the mistakes (float64, NumPy)
# ------------------------------------------------------------------------------------------


def _ln_back(dy, x, gamma, eps, *, mean=True, var=True, use_gamma=True, dgamma="x_hat", reduce="sum", average=True,
             var_sign=1.0, root=True, ddof=0):
    H = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).sum(-1, keepdims=True) / (H - ddof) + eps)
    xh = (x - mu) * inv
    g = dy * gamma if use_gamma else dy
    avg = (lambda v: v.mean(-1, keepdims=True)) if average else (lambda v: v.sum(-1, keepdims=True))
    dx = g - (avg(g) if mean else 0.0) - (var_sign * xh * avg(g * xh) if var else 0.0)
    dx = dx * (inv if root else inv ** 2)
    rows = dy.reshape(-1, H)
    red = (lambda v: v.sum(0)) if reduce == "sum" else (lambda v: v.mean(0))
    dg = red((dy * xh).reshape(-1, H)) if dgamma == "x_hat" else (red(rows) if dgamma == "dbeta" else
                                                                  red((dy * x).reshape(-1, H)))
    return dx, dg, red(rows)


def _gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _gelu_back(dy, x, *, product=True, times_dy=True, density=1.0 / math.sqrt(2.0 * math.pi), half=0.5,
               form="erf", root2=True, exp_half=True):
    if form == "tanh":  # the derivative of lesson 07's tanh approximation
        c = math.sqrt(2.0 / math.pi)
        u = c * (x + 0.044715 * x ** 3)
        slope = 0.5 * (1.0 + np.tanh(u)) + 0.5 * x * (1.0 - np.tanh(u) ** 2) * c * (1.0 + 3 * 0.044715 * x ** 2)
    elif form == "relu":
        slope = (x > 0).astype(float)
    elif form == "forward":
        slope = _gelu(x)
    else:
        Phi = half * (1.0 + erf(x / (math.sqrt(2.0) if root2 else 2.0)))
        slope = Phi + (x * density * np.exp((-0.5 if exp_half else -1.0) * x * x) if product else 0.0)
    return dy * slope if times_dy else slope


def _lin_back(dy, x, W, *, dW_t=False, db="sum", rows="all", dx_t=False, dW_mean=False):
    k, m = W.shape
    X, D = x.reshape(-1, k), dy.reshape(-1, m)
    if rows == "first":
        X, D = x[0].reshape(-1, k), dy[0].reshape(-1, m)
    dW = X.T @ D
    dW = dW.T if dW_t else dW
    dW = dW / len(D) if dW_mean else dW
    dbv = D.sum(0) if db == "sum" else D.mean(0)
    dx = dy @ (W if dx_t and k == m else W.T)
    return dx, dW, dbv


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


def _dlogits(y, t, *, n=True, sign=1.0, onehot=True, axis=-1, divide="N", log=False):
    p = softmax(y, axis=axis)
    p = np.log(p) if log else p
    d = sign * (p - (_onehot(y.shape, t) if onehot else 0.0))
    return d / {"N": len(t), "NV": y.size, "V": y.shape[1], "1": 1}[divide if n else "1"]


DLOGITS = {"right up to a factor N: the loss is the mean over the N rows, so each row's gradient carries 1/N":
           {"n": False},
           "the sign is flipped: that is the direction that lowers the loss, not the gradient": {"sign": -1.0},
           "you left out the -1 at each row's target: -log p_t falls when y_t rises": {"onehot": False},
           "your softmax ran down the columns (over the rows): each row's softmax is over the vocabulary":
               {"axis": 0},
           "you divided by every entry's count, N V: the loss averages over the N rows only, the vocabulary is "
           "summed inside each row's softmax": {"divide": "NV"},
           "you divided by V, the vocabulary's size: the loss is a mean over the N rows": {"divide": "V"},
           "you used log-probabilities where the gradient has probabilities: differentiate -log softmax(y)[t] "
           "by y once more; no log is left in it": {"log": True}}


@exercise("11.1", hint=("the loss is the mean over the N chosen rows of -log softmax(y_i)[t_i]; differentiate one row "
                        "first: the answer has y's shape (N, V)",
                        "for one row, how does -log softmax(y)_t move when y_t rises a little, and when another y_j "
                        "rises? and what does the mean over N rows do to each row's gradient?"),
          mistakes=lambda **context: _named(_dlogits, DLOGITS))
def _(answer):
    y, t = _dlogits_case()
    return _judge(answer, [y, t], lambda o: {"dy": o}, _dlogits, DLOGITS, {"dy": (lambda x: _ce(x, t), y)},
                  "dy = (softmax(y) - onehot(t)) / N", "my_dlogits(y, targets) -> dy",
                  ref=lambda y, t: mlm.cross_entropy_backward(y, t, np))


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
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[1] == 4:
        return False, "15% of 33 is 4.95: the recipe rounds it to the nearest whole number, it does not cut it down"
    if isinstance(answer, (tuple, list)) and any(isinstance(a, float) and not float(a).is_integer() for a in answer):
        return False, "a count of pieces is a whole number: the recipe rounds 15% of the pieces"
    return equals(tuple(answer) if isinstance(answer, (tuple, list)) else answer, actual)


# ------------------------------------------------------------------------------------------
# 11.3  LayerNorm, backwards
# ------------------------------------------------------------------------------------------


def _ln_case():
    rng = _rng(5)
    x = rng.normal(size=(2, 3, 6)) * rng.uniform(0.5, 3, (2, 3, 1)) + rng.normal(0, 2, (2, 3, 1))
    return [rng.normal(size=(2, 3, 6)), x, rng.uniform(0.5, 2.0, 6), 1e-12]  # dy, x, gamma, eps


def _ln_flat(o):
    dx, dgamma, dbeta = _triple(o, ["dx", "dgamma", "dbeta"])
    return {"dbeta": dbeta, "dgamma": dgamma, "dx": dx}


LN = {"you dropped LayerNorm's mean term: every x_j moves the row's mean, so each row's gradient loses its "
      "average": {"mean": False},
      "you dropped the variance term: every x_j moves the row's standard deviation too": {"var": False},
      "you forgot gamma: the gradient reaches x_hat through gamma * x_hat": {"use_gamma": False},
      "dgamma is dbeta: gamma multiplies x_hat, so each token's dy is weighted by its x_hat": {"dgamma": "dbeta"},
      "dgamma weights dy by x itself: gamma multiplies the normalised x_hat": {"dgamma": "x"},
      "dgamma and dbeta are averaged over the tokens: every token adds its share, so they are sums":
          {"reduce": "mean"},
      "your mean and variance terms add up over the row where they average: each of the H entries carries 1/H of "
      "the row's mean and variance": {"average": False},
      "the variance term has the wrong sign: raising x_j's deviation raises the standard deviation, which shrinks "
      "every x_hat": {"var_sign": -1.0},
      "you divided by the variance, not by the standard deviation: x_hat divides by sqrt(var + eps)":
          {"root": False},
      "your variance divides by H - 1 (ddof=1): LayerNorm's divides by H": {"ddof": 1}}


@exercise("11.3", hint=("y = gamma x_hat + beta with x_hat = (x - mean) / sqrt(var + eps): x reaches y three ways, "
                        "straight through x - mean, through the mean, and through the variance",
                        "besides its own x_hat_j, which two numbers of its row does every x_j move? each of them "
                        "sends a share of every other entry's gradient back to x_j: what does each share average?"),
          mistakes=lambda **context: _named(_ln_back, LN))
def _(answer):
    dy, x, gamma, eps = _ln_case()
    beta = np.zeros_like(gamma)

    def out(x_, g_):
        return float((dy * engine.layer_norm.formula(x_, g_, beta, eps, np)).sum())

    return _judge(answer, [dy, x, gamma, eps], _ln_flat, _ln_back, LN,
                  {"dx": (lambda v: out(v, gamma), x), "dgamma": (lambda g: out(x, g), gamma)},
                  "g = dy gamma; dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps); dgamma = sum of dy x_hat; "
                  "dbeta = sum of dy", "my_layer_norm_backward(dy, x, gamma, eps) -> (dx, dgamma, dbeta)",
                  ref=lambda dy, x, gamma, eps: backward.layer_norm_backward(dy, x, gamma, eps, np))


# ------------------------------------------------------------------------------------------
# 11.4  GELU, backwards
# ------------------------------------------------------------------------------------------


def _gelu_case():
    rng = _rng(4)
    return [rng.normal(size=(2, 3, 6)), rng.normal(0, 1.5, (2, 3, 6))]  # dy, x


def _gelu_ref(dy, x, *, at="input", **sw):
    return _gelu_back(dy, _gelu(x) if at == "output" else x, **sw)


GELU = {"you differentiated one factor of GELU only: it is a product of two factors that both depend on x, so the "
        "product rule gives two terms": {"product": False},
        "you returned GELU's slope alone: multiply it by the gradient that arrives, dy": {"times_dy": False},
        "you took the slope at GELU's output: the derivative is taken at its input x": {"at": "output"},
        "you differentiated the tanh approximation (lesson 07): BERT's GELU is the exact one, with erf":
            {"form": "tanh"},
        "you used ReLU's slope (0 or 1): GELU bends smoothly through 0": {"form": "relu"},
        "phi lacks its 1/sqrt(2 pi): the standard normal's density integrates to 1": {"density": 1.0},
        "Phi lacks its 1/2: the standard normal's cumulative distribution runs from 0 to 1, not to 2": {"half": 1.0},
        "you multiplied dy by GELU's value, the forward: the backward multiplies by its slope": {"form": "forward"},
        "your erf(x / 2) is the cumulative distribution of a normal of variance 2: Phi is the standard normal's": {"root2": False},
        "phi's exponent lacks its 1/2: phi is the standard normal's density, of variance 1":
            {"exp_half": False}}


@exercise("11.4", hint=("GELU(x) = x Phi(x), with Phi the standard normal's cumulative distribution and phi = Phi' its "
                        "density: a product of two factors that both depend on x",
                        "x Phi(x) is a product: what does the product rule give, and what is Phi's own "
                        "derivative? then what multiplies the slope on the way back?"),
          mistakes=lambda **context: _named(_gelu_ref, GELU))
def _(answer):
    dy, x = _gelu_case()
    return _judge(answer, [dy, x], lambda o: {"dx": o}, _gelu_ref, GELU,
                  {"dx": (lambda v: float((dy * _gelu(v)).sum()), x)},
                  "dx = dy (Phi(x) + x phi(x))", "my_gelu_backward(dy, x) -> dx",
                  ref=lambda dy, x: backward.gelu_backward(dy, x, np))


# ------------------------------------------------------------------------------------------
# 11.5  a linear line y = x W + b, backwards
# ------------------------------------------------------------------------------------------


def _linear_case():
    rng = _rng(3)
    return [rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 5)), rng.normal(size=(5, 4))]  # dy, x, W


def _linear_flat(o):
    dx, dW, db = _triple(o, ["dx", "dW", "db"])
    return {"db": db, "dW": dW, "dx": dx}


LINEAR = {"dW is transposed: it must have W's shape [k, m], input rows by output columns": {"dW_t": True},
          "db is averaged over the rows: d loss / d y already holds the loss's 1/N, so the rows' gradients add up":
              {"db": "mean"},
          "dW is averaged over the rows: every token's use of W adds its share, so the rows' gradients add up":
              {"dW_mean": True},
          "dW and db hold the first example only: a weight is used by every token of every example, so every one "
          "of them adds to its gradient": {"rows": "first"}}


@exercise("11.5", hint=("y = x W + b touches W once per token (of every example) and b once per token: each use adds "
                        "a term to the gradient. Shapes: dx like x, dW like W [k, m], db like b [m]",
                        "with x and dy flattened to rows ([tokens, k] and [tokens, m]), which one must be transposed "
                        "so that their product has W's shape [k, m]? and which weight does dy meet on its way back "
                        "to x?"),
          mistakes=lambda **context: _named(_lin_back, LINEAR))
def _(answer):
    dy, x, W = _linear_case()
    return _judge(answer, [dy, x, W], _linear_flat, _lin_back, LINEAR,
                  {"dW": (lambda w: float((dy * (x @ w)).sum()), W), "dx": (lambda v: float((dy * (v @ W)).sum()), x)},
                  "dx = dy W^T, dW = x^T dy, db = sum of dy over the rows (x, dy flattened to rows)",
                  "my_linear_backward(dy, x, W) -> (dx, dW, db)",
                  ref=lambda dy, x, W: backward.linear_backward(dy, x, W, np))


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
    dZ, grads = _pair(o, "my_head_backward(dy, W, tape, Z, eps) -> (dZ, grads)")
    grads = _keys(grads, HEAD_KEYS, "my_head_backward", frozen=("embed.W_T", "mlm.W_T", "W_T"))
    return {**{k: grads[k] for k in HEAD_KEYS}, "dZ": dZ}


def _head_ref(dy, W, tape, Z, eps, *, ln_at="mlm.act", gelu_at="mlm.dense", gelu=True, bias="sum", ln_mean=True,
              ln_var=True, dW_t=False, dx_t=False):
    g = {"mlm.bias": dy.sum(0) if bias == "sum" else dy.mean(0)}
    dh = dy @ W["embed.W_T"]
    dact, g["mlm.ln.gamma"], g["mlm.ln.beta"] = _ln_back(dh, tape[ln_at], W["mlm.ln.gamma"], eps, mean=ln_mean,
                                                         var=ln_var)
    ddense = _gelu_back(dact, tape[gelu_at]) if gelu else dact
    dZ, g["mlm.W_t"], g["mlm.b_t"] = _lin_back(ddense, Z, W["mlm.W_t"], dW_t=dW_t, dx_t=dx_t)
    return dZ, g


HEAD = {"you skipped GELU's backward: the gradient passes GELU's slope on the way from the LayerNorm to the "
        "dense line": {"gelu": False},
        "LayerNorm's backward read its output (mlm.transform): it needs its input, the GELU's output (mlm.act)":
            {"ln_at": "mlm.transform"},
        "GELU's backward read its output (mlm.act): its slope is taken at its input, the dense line (mlm.dense)":
            {"gelu_at": "mlm.act"},
        "GELU's backward read the LayerNorm's output (mlm.transform): its slope is taken at its input, the dense "
        "line (mlm.dense)": {"gelu_at": "mlm.transform"},
        "the gradient of mlm.bias is averaged over the rows: each chosen row adds its own share, so it is a sum":
            {"bias": "mean"},
        "mlm.W_t's gradient is transposed: a weight's gradient is input rows by output columns, x^T dy (11.5)":
            {"dW_t": True},
        "the gradient went back through the dense line's W_t untransposed: dy meets W^T on its way back to x (11.5)":
            {"dx_t": True},
        "your LayerNorm backward drops the mean term (11.3): every entry moves its row's mean":
            {"ln_mean": False},
        "your LayerNorm backward drops the variance term (11.3): every entry moves its row's standard deviation":
            {"ln_var": False}}


@exercise("11.6", hint=("go up the head's lines from the top: the logits' line (bias, then the tied decoder W_T), the "
                        "LayerNorm, the GELU, the dense line; each is one of your functions, read from the tape at "
                        "that line's input",
                        "the logits are h W_T^T + b: with dy [N, V] and W_T [V, H], which product has dh's shape "
                        "[N, H]? and which tape key holds each line's input?"),
          mistakes=lambda **context: _named(_head_ref, HEAD))
def _(answer):
    args, targets = _head_case()
    dy, W, tape, Z, eps = args
    return _judge(answer, args, _head_flat, _head_ref, HEAD,
                  {"mlm.W_t": (lambda w: _ce(engine.mlm_head({**W, "mlm.W_t": w}, Z, SMALL, NullRecorder(np), np),
                                             targets), W["mlm.W_t"]),
                   "dZ": (lambda z: _ce(engine.mlm_head(W, z, SMALL, NullRecorder(np), np), targets), Z)},
                  "db^mlm = sum of dy; dh = dy W_T; LayerNorm back to d act; GELU back to d dense; the dense line "
                  "back to dZ, dW^t, db^t", "my_head_backward(dy, W, tape, Z, eps) -> (dZ, grads)",
                  ref=lambda *a: backward.mlm_head_backward(a[0], a[1], a[2].__getitem__, a[3], SMALL, np))


# ------------------------------------------------------------------------------------------
# 11.7  the softmax, backwards
# ------------------------------------------------------------------------------------------


def _softmax_case():
    rng = _rng(7)
    s = rng.normal(0, 1.5, (2, 2, 4, 4))
    s[1, ..., 3] = -np.inf  # a [PAD] key in the second example: p = 0 there
    return [rng.normal(size=(2, 2, 4, 4)), softmax(s)]  # dP, P


def _soft_back(dP, P, *, sub=True, factor=True, axis=-1, diagonal=False, sign=1.0):
    if diagonal:
        return P * (1 - P) * dP
    s = (dP * P).sum(axis, keepdims=True) if sub else 0.0
    return (P if factor else 1.0) * (dP - sign * s)


SOFTMAX = {"you left out the subtraction: raising one score lowers every other weight of its row": {"sub": False},
           "you left out the factor p: a weight near 0 barely moves when its score moves": {"factor": False},
           "your sum ran over the queries (axis -2): each row's softmax mixes only that row's keys": {"axis": -2},
           "you kept only the diagonal of the Jacobian, p (1 - p): every key's score moves every weight of its row":
               {"diagonal": True},
           "the subtracted term has the wrong sign: raising one score takes weight from the others": {"sign": -1.0}}


@exercise("11.7", hint=("A = softmax(E) row by row: raising one score raises its own weight and lowers every other "
                        "weight of the same row",
                        "if every score of a row rises by the same amount, do the weights change? so what must each "
                        "row of dE sum to, and which term of yours makes it so?"),
          mistakes=lambda **context: _named(_soft_back, SOFTMAX))
def _(answer):
    dP, P = _softmax_case()
    s = np.log(np.where(P > 0, P, 1.0))  # scores whose softmax is P (the [PAD] key at -inf)
    s[P == 0] = -np.inf
    return _softmax_judge(answer, dP, P, s)


def _softmax_judge(answer, dP, P, s):
    # finite differences on the first example (no -inf there: nudging a masked score is meaningless)
    dP0 = dP[0]
    fd = {"dE": (lambda v: float((dP0 * softmax(v)).sum()), s[0])}
    verdict = _judge(answer, [dP, P], lambda o: {"dE": o}, _soft_back, SOFTMAX, {},
                     "dE = A * (dA - sum over the keys of dA * A)", "my_softmax_backward(dA, A) -> dE",
                     ref=lambda dP, P: backward.softmax_backward(dP, P, np))
    if not verdict[0]:
        return verdict
    got = f64(answer(dP.copy(), P.copy()))[0]
    entries = _some_entries(s[0].shape, 7)
    ok, detail = close(np.array([got[e] for e in entries]), _slopes(fd["dE"][0], s[0], entries), atol=1e-5, rtol=1e-4)
    if not ok:
        return False, f"dE agrees with bertviz_lite.backward but not with finite differences: {detail}"
    return True, verdict[1].replace("every output equals the reference's",
                                    "dE equals bertviz_lite.backward's and the finite differences, and is 0 on the "
                                    "[PAD] key")


# ------------------------------------------------------------------------------------------
# 11.8  attention's core, backwards: C = softmax(Q K^T / sqrt(d_k) + M) V  ->  dQ, dK, dV
# ------------------------------------------------------------------------------------------


def _attn_case():
    rng = _rng(8)
    Q, K, V, dC = (rng.normal(size=(2, 2, 5, 3)) for _ in range(4))
    M = np.zeros((2, 1, 1, 5))
    M[1, ..., 3:] = -np.inf  # the second example's last two keys are [PAD]
    return [dC, Q, K, V, M]


def _attn_ref(dC, Q, K, V, M, *, scale="d_k", mask=True, dK_t=True, dV_t=True, soft=True, scale_dV=False,
              soft_axis=-1):
    d = {"d_k": Q.shape[-1], "H": Q.shape[-3] * Q.shape[-1], "none": 1.0, "d_k^2": Q.shape[-1] ** 2}[scale]
    s = 1.0 / math.sqrt(d)
    P = softmax(Q * (1.0 / math.sqrt(Q.shape[-1])) @ np.swapaxes(K, -1, -2) + (M if mask else 0.0))
    dP = dC @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(P, -1, -2) @ dC if dV_t else P @ dC
    dV = dV * s if scale_dV else dV
    dE = _soft_back(dP, P, axis=soft_axis) if soft else dP
    dQ = s * (dE @ K)
    dK = s * (np.swapaxes(dE, -1, -2) @ Q if dK_t else dE @ Q)
    return dQ, dK, dV


def _attn_flat(o):
    dQ, dK, dV = _triple(o, ["dQ", "dK", "dV"])
    return {"dV": dV, "dQ": dQ, "dK": dK}


ATTN = {"you forgot the scale: the scores are Q K^T times 1/sqrt(d_k), so dQ and dK carry that factor too":
        {"scale": "none"},
        "you scaled by 1/sqrt(H), the model's width: the scores of one head divide by sqrt(d_k), the head's size":
            {"scale": "H"},
        "you scaled by 1/d_k: the scores divide by the square root of d_k": {"scale": "d_k^2"},
        "you forgot the mask: the map you differentiate must be the forward's, with M's -inf on the [PAD] keys":
            {"mask": False},
        "dK is transposed the wrong way: key j's gradient collects column j of dE, every query's "
        "look at key j": {"dK_t": False},
        "dV sums over the wrong index of the map: value row j reaches every query i through A[i, j]":
            {"dV_t": False},
        "you skipped the softmax's backward (11.7): dA is the gradient of the weights, not of the scores":
            {"soft": False},
        "dV carries the scale too: V enters after the softmax, untouched by 1/sqrt(d_k)": {"scale_dV": True},
        "your softmax backward summed over the queries (axis -2): each row's softmax mixes that row's keys":
            {"soft_axis": -2}}


def _attn_loss(dC, Q, K, V, M):
    s = 1.0 / math.sqrt(Q.shape[-1])
    return float((dC * (softmax(Q * s @ np.swapaxes(K, -1, -2) + M) @ V)).sum())


@exercise("11.8", hint=("run the forward's lines backwards: C = A V gives dA and dV; A = softmax(E) gives dE (your "
                        "11.7); E = Q K^T / sqrt(d_k) + M gives dQ and dK. Recompute A first, as the forward did",
                        "E[i, j] = q_i . k_j / sqrt(d_k): which entries of dE does q_i get a gradient from, and "
                        "which does k_j? what factor do both carry?"),
          mistakes=lambda **context: _named(_attn_ref, ATTN))
def _(answer):
    dC, Q, K, V, M = _attn_case()
    return _judge(answer, [dC, Q, K, V, M], _attn_flat, _attn_ref, ATTN,
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
    dZ, grads = _pair(o, "my_layer_backward(dy, W, tape, Z, M, n_h, eps) -> (dZ, grads)")
    grads = _keys(grads, LAYER_KEYS, "my_layer_backward")
    return {**{k: grads[k] for k in LAYER_KEYS}, "dZ": dZ}


def _layer_ref(dy, W, tape, Z, M, n_h, eps, *, ffn_resid=True, attn_resid=True, plain=False, up_reads="attn.ln",
               ln_at="input", gelu_at="ffn.up", down_reads="ffn.act", qkv_reads="Z", scale="d_k", mask=True,
               dW_t=False, qkv_sum=True):
    """The layer's backward from this module's switchable lines: with no switch, backward.encoder_layer_backward."""
    g = {}
    lin = lambda d, x, w: _lin_back(d, x, w, dW_t=dW_t)  # noqa: E731
    ffn_in, attn_in = ("ffn.resid", "attn.resid") if ln_at == "input" else ("ffn.ln", "attn.ln")
    dres, g["ffn.ln.gamma"], g["ffn.ln.beta"] = _ln_back(dy, tape[ffn_in], W["ffn.ln.gamma"], eps)
    dact, g["ffn.W_down"], g["ffn.b_down"] = lin(dres, tape[down_reads], W["ffn.W_down"])
    dup = _gelu_back(dact, tape[gelu_at])
    dZbar, g["ffn.W_up"], g["ffn.b_up"] = lin(dup, tape[up_reads], W["ffn.W_up"])
    dZbar = dZbar + dres if ffn_resid else dZbar
    dres, g["attn.ln.gamma"], g["attn.ln.beta"] = _ln_back(dZbar, tape[attn_in], W["attn.ln.gamma"], eps)
    dconcat, g["attn.W_O"], g["attn.b_O"] = lin(dres, tape["attn.concat"], W["attn.W_O"])
    if plain:
        B, n, H = dconcat.shape
        dC = np.reshape(dconcat, (B, n_h, n, H // n_h))
    else:
        dC = engine.split_heads(dconcat, n_h, np)
    dQ, dK, dV = _attn_ref(dC, tape["attn.q"], tape["attn.k"], tape["attn.v"], M, scale=scale, mask=mask)
    dZ = dres if attn_resid else np.zeros_like(dres)
    x = Z if qkv_reads == "Z" else tape[qkv_reads]
    for name, d in (("Q", dQ), ("K", dK), ("V", dV)):
        dpart, g[f"attn.W_{name}"], g[f"attn.b_{name}"] = lin(engine.merge_heads(d, np), x, W[f"attn.W_{name}"])
        dZ = dZ + dpart if (qkv_sum or name == "V") else dZ
    return dZ, g


LAYER = {"you forgot the feed-forward residual's second path: Z-bar reaches the output straight "
         "(Z-bar + FFN(Z-bar)) as well as through the FFN, so its gradient is the sum of both": {"ffn_resid": False},
         "you forgot the attention residual's second path: Z_(l-1) reaches attn.resid straight as well as through "
         "Q, K and V": {"attn_resid": False},
         "you cut the heads apart with a plain reshape: the forward merged [n_h, n, d_k] into [n, H] with a "
         "transpose, so undoing it needs the transpose too (engine.split_heads)": {"plain": True},
         "the up-projection's backward read the layer's input Z_(l-1): the FFN reads Z-bar, attn.ln":
             {"up_reads": "attn.resid"},
         "the LayerNorms' backward read their outputs (ffn.ln, attn.ln): a LayerNorm's backward needs its input, "
         "the residual sum (ffn.resid, attn.resid), as in 11.6": {"ln_at": "output"},
         "GELU's backward read its output (ffn.act): its slope is taken at its input, ffn.up, as in 11.6":
             {"gelu_at": "ffn.act"},
         "W_down's backward read ffn.up: the down-projection reads the GELU's output, ffn.act":
             {"down_reads": "ffn.up"},
         "the projections Q, K, V read attn.ln in your backward: they read the layer's input Z_(l-1)":
             {"qkv_reads": "attn.ln"},
         "your attention scaled by 1/sqrt(H): one head's scores divide by sqrt(d_k), the head's size":
             {"scale": "H"},
         "your attention forgot the mask: the map you differentiate is the forward's, -inf on the [PAD] keys":
             {"mask": False},
         "the weights' gradients are transposed: each has its weight's shape, x^T dy (11.5)": {"dW_t": True},
         "Z_(l-1) got the gradient of the V projection only: Q, K and V all read it, so their three gradients "
         "add up (with the residual's)": {"qkv_sum": False}}


def _layer_loss(dy, W, Z, M):
    return float((dy * engine.encoder_layer(W, Z, M, SMALL, NullRecorder(np), np)).sum())


@exercise("11.9", hint=("the layer's lines bottom-up, from d Z_l: the FFN's LayerNorm, its residual, W^down, GELU, "
                        "W^up; "
                        "then attention's LayerNorm, its residual, W^O, the heads cut apart again, your 11.8, and the "
                        "three projections Q, K, V, which all read Z_(l-1)",
                        "a value that several lines read (Z-bar; Z_(l-1)) gets a gradient from each of them: how "
                        "do they combine, and which lines read Z_(l-1)?"),
          mistakes=lambda **context: _named(_layer_ref, LAYER))
def _(answer, *, real):
    args = _layer_case()
    dy, W, tape, Z, M, n_h, eps = args
    fd = {"dZ": (lambda z: _layer_loss(dy, W, z, M), Z),
          "attn.W_Q": (lambda w: _layer_loss(dy, {**W, "attn.W_Q": w}, Z, M), W["attn.W_Q"]),
          "ffn.ln.gamma": (lambda w: _layer_loss(dy, {**W, "ffn.ln.gamma": w}, Z, M), W["ffn.ln.gamma"])}
    ok, detail = _judge(answer, args, _layer_flat, _layer_ref, LAYER, fd,
                        "every line's backward, in reverse; a value read twice sums its gradients",
                        "my_layer_backward(dy, W, tape, Z, M, n_h, eps) -> (dZ, grads)",
                        ref=lambda *a: backward.encoder_layer_backward(a[0], a[1], a[2].__getitem__, a[3], SMALL, np))
    if not ok:
        return ok, detail
    # the real sentence: minilm-mlm's last layer on a masked sentence, against backward.encoder_layer_backward
    dy, W, tape, Z, M, n_h, eps, c = real
    got = _layer_flat(answer(*_copies([dy, W, tape, Z, M, n_h, eps])))
    want = _layer_flat(backward.encoder_layer_backward(dy, W, tape.__getitem__, Z, c, np))
    worst = max(float(np.abs(np.asarray(got[k]) - want[k]).max() / max(1.0, np.abs(want[k]).max())) for k in want)
    if worst > 1e-6:
        return False, "right on the small layer, but on the real sentence a gradient differs by more than 1e-6"
    return True, f"{detail}; on the real sentence every gradient equals backward.encoder_layer_backward's within 1e-6"


# ------------------------------------------------------------------------------------------
# 11.10  Adam's step for one tensor
# ------------------------------------------------------------------------------------------

B1, B2, ADAM_EPS = 0.9, 0.999, 1e-6  # mlm.Adam's


def _adam_case():
    """p and three steps' gradients: row 0 ordinary (N(0, 1)), row 1 tiny (1e-6 N(0, 1): there eps is as large as
    sqrt(v), so where eps goes and how large it is sets the step), row 2 zero until the last step (0 / 0 without
    eps)."""
    rng = _rng(10)
    p = rng.normal(size=(3, 4))
    grads = [rng.normal(size=(3, 4)) * np.array([[1.0], [1e-6], [0.0]]) for _ in range(3)]
    grads[2][2] = rng.normal(size=4)
    return p, grads, 0.01


def _adam_run(step, p, grads, lr):
    """Three steps from m = v = 0 (t = 1, 2, 3) with `step(p, g, m, v, t, lr) -> (p, m, v)`."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        out = step(p.copy(), g.copy(), m.copy(), v.copy(), t, lr)
        if not isinstance(out, (tuple, list)) or len(out) != 3:
            raise Unpack(f"your step returned {type(out).__name__}" +
                         (f" of {len(out)} things" if isinstance(out, (tuple, list)) else "") +
                         "; it returns the three new (p, m, v): the next step needs m and v")
        p, m, v = (f64(o) for o in out)
    return p, m, v


def _adam_package(p, grads, lr):
    """Three steps of mlm.Adam (the package's optimiser) on one tensor: (p, m, v) after them."""
    opt, params = mlm.Adam({"p": p}, np, B1, B2, ADAM_EPS), {"p": p}
    for g in grads:
        params = opt.step(params, {"p": g}, lr)
    return params["p"], opt.m["p"], opt.v["p"]


def _adam_ref(p, g, m, v, t, lr, *, correct_m=True, correct_v=True, root=True, sign=1.0, eps="after", t_off=0,
              keep="raw", m_rate=True, betas="right", square=True, use_lr=True):
    b1, b2 = (B1, B2) if betas == "right" else (B2, B1)
    m = b1 * m + ((1 - b1) if m_rate else 1.0) * g
    v = b2 * v + (1 - b2) * (g * g if square else np.abs(g))
    tt = t + t_off
    mh = m / (1 - b1 ** tt) if correct_m else m
    vh = v / (1 - b2 ** tt) if correct_v else v
    rate = lr if use_lr else 1.0
    if eps == "inside":
        den = np.sqrt(vh + ADAM_EPS)
    elif eps == "paper":  # Kingma and Ba's faster form: the corrections folded into the rate, eps on sqrt(v)
        return p - sign * rate * math.sqrt(1 - b2 ** tt) / (1 - b1 ** tt) * m / (np.sqrt(v) + ADAM_EPS), m, v
    else:
        den = (np.sqrt(vh) if root else vh) + {"after": ADAM_EPS, "none": 0.0, "1e-8": 1e-8}[eps]
    new = p - sign * rate * mh / den
    return (new, mh, vh) if keep == "hat" else (new, m, v)


ADAM = {"you left out the bias correction: m and v start at 0, so early on they are too small by 1 - beta^t":
        {"correct_m": False, "correct_v": False},
        "you corrected m but not v: both start at 0": {"correct_v": False},
        "you corrected v but not m: both start at 0": {"correct_m": False},
        "you divided by v, not by its square root: the step is m over the gradient's typical size": {"root": False},
        "the sign is flipped: a step goes against the gradient": {"sign": -1.0},
        "you put eps under the square root: mlm.Adam adds it to the root, and where a gradient is tiny the two "
        "steps differ widely": {"eps": "inside"},
        "you left out eps: where a gradient is 0 the step is 0 / 0 (nan), where it is tiny the step is too large":
            {"eps": "none"},
        "your eps is 1e-8 (PyTorch's default): mlm.Adam's is ADAM_EPS, 1e-6, and where a gradient is tiny it sets "
        "the step": {"eps": "1e-8"},
        "you used the paper's faster form (the corrections folded into the rate, eps added to the uncorrected "
        "root): mlm.Adam adds eps after correcting v, which differs where a gradient is tiny": {"eps": "paper"},
        "your bias correction counts t from 0: the first step is t = 1": {"t_off": -1},
        "your bias correction counts one step too many: the first step's correction divides by 1 - beta":
            {"t_off": 1},
        "you returned the corrected averages as the new m and v: the running averages stay uncorrected, and each "
        "step corrects them afresh": {"keep": "hat"},
        "your m adds the whole gradient: a running average weighs the new gradient by 1 - B1": {"m_rate": False},
        "you swapped the two betas: m, the gradient's average, forgets fast (B1 = 0.9); v slowly (B2 = 0.999)":
            {"betas": "swapped"},
        "v averages the gradient's size, not its square: the step divides by the root of the squares' average":
            {"square": False},
        "you left out the learning rate: the step is lr times the normalised average": {"use_lr": False}}


def _adam_runner(step):
    return lambda p0, gs, lr_: _adam_run(step, p0, gs, lr_)


@exercise("11.10", hint=("Adam keeps two running averages per number, of the gradient (m) and of its square (v), "
                         "and steps by the first over the square root of the second; both averages start at 0",
                         "m and v start at 0: after the first step, how far below the gradient's size is m, and "
                         "what undoes that at every t? where does ADAM_EPS keep the division safe?"),
          mistakes=lambda **context: _named(_adam_ref, ADAM))
def _(answer):
    p, grads, lr = _adam_case()
    if not callable(answer):
        return False, "write a function, my_adam_step(p, g, m, v, t, lr) -> (p, m, v)"
    if answer(p.copy(), grads[0].copy(), np.zeros_like(p), np.zeros_like(p), 1, lr) is Ellipsis:
        return False, STUB
    ok, detail = _judge(_adam_runner(answer), [p, grads, lr], lambda o: dict(zip("pmv", o)),
                        lambda p0, gs, lr_, **sw: _adam_run(lambda *a: _adam_ref(*a, **sw), p0, gs, lr_), ADAM, {},
                        "m = B1 m + (1 - B1) g; v = B2 v + (1 - B2) g^2; p - lr (m / (1 - B1^t)) / "
                        "(sqrt(v / (1 - B2^t)) + ADAM_EPS)", "my_adam_step(p, g, m, v, t, lr) -> (p, m, v)",
                        ref=_adam_package, shown=answer)
    if ok:
        detail = detail.replace("every output equals the reference's", "three steps equal mlm.Adam's, with ordinary, "
                                "tiny and zero gradients").replace("The reference", "mlm.Adam's")
    return ok, detail


# ------------------------------------------------------------------------------------------
# 11.11  the training loop
# ------------------------------------------------------------------------------------------

LOOP_STEPS, LOOP_EVERY = 5, 2  # 5 is not a multiple of 2: the last step's row is a row of its own


def _loop_ref(params, step, steps, rng, *, minibatch, grad_fn, heldout, every, fresh=True, update=True, loss="mean",
              reset=True, held="after", last_row=True, start=1, extra=0, rows="every", order="step-loss-held"):
    """tasks.fit's loop with switches that make the mistakes."""
    curve, losses = [], []
    batch = minibatch(rng) if not fresh else None
    for s in range(start, steps + start + extra):
        b = minibatch(rng) if fresh else batch
        before = heldout(params) if held == "before" else None
        value, grads = grad_fn(params, b)
        new = step(params, grads)
        params = new if update else params
        losses.append(float(value))
        if (s % every == 0 or (last_row and s == steps)) if rows == "every" else True:
            mean = {"mean": sum(losses) / len(losses), "last": losses[-1], "sum": sum(losses),
                    "first": losses[0]}[loss]
            h = before if held == "before" else heldout(params)
            curve.append((s, mean, h) if order == "step-loss-held" else (s, h, mean))
            losses = losses if not reset else []
    return params, curve


LOOP = {"you drew one minibatch and trained on it every step: draw a fresh one inside the loop": {"fresh": False},
        "the parameters never change: the step returns new parameters, and your loop drops them": {"update": False},
        "the curve's training loss is the last step's: a row holds the mean over the steps since the last row":
            {"loss": "last"},
        "the curve's training loss is a sum: a row holds the mean over the steps since the last row": {"loss": "sum"},
        "the curve's training loss is the first step's since the last row: a row holds their mean": {"loss": "first"},
        "the training losses are never emptied after a row: each row averages only the steps since the last row":
            {"reset": False},
        "the held-out number was measured before the step: a row reports the parameters as they are after it":
            {"held": "before"},
        "no row after the last step: when steps is not a multiple of every, the last step still gets its row":
            {"last_row": False},
        "your steps are numbered from 0: the first step is step 1, so rows fall at every, 2 every, ... and the last":
            {"start": 0},
        "your loop runs one step too many: it runs `steps` steps, numbered from 1": {"extra": 1},
        "your loop runs one step too few: the steps are numbered 1 to steps, both included": {"extra": -1},
        "a row after every step: rows go on the curve every `every` steps and after the last": {"rows": "all"},
        "a row's numbers are in the wrong order: (step, training loss, held-out number)": {"order": "step-held-loss"}}


class _Exact:
    """A problem whose every number is exact in float64 (whole numbers and halves), so every loop-order mistake moves
    a number of the curve by construction: the loss grad_fn reports is (k + 1)^2 for the parameters made by step k,
    and the held-out number is k itself."""

    def __init__(self):
        self.made = []  # the parameters each step returned, in order

    def start(self):
        return {"w": np.array([4.0, -2.0, 1.0])}

    def minibatch(self, rng):
        return rng.integers(-4, 5, size=3).astype(float)

    def index(self, p):
        w = f64(p["w"])
        for k in range(len(self.made), 0, -1):
            if np.array_equal(self.made[k - 1], w):
                return k
        return 0 if np.array_equal(w, self.start()["w"]) else -1

    def grad_fn(self, p, batch):
        return float((self.index(p) + 1) ** 2), {"w": f64(p["w"]) - batch}

    def step(self, p, g):
        new = {"w": f64(p["w"]) - 0.5 * f64(g["w"])}
        self.made.append(new["w"].copy())
        return new

    def heldout(self, p):
        return float(self.index(p))


def _loop_exact(fn, seed):
    e = _Exact()
    params = e.start()
    out = fn(params, e.step, LOOP_STEPS, np.random.default_rng(seed), minibatch=e.minibatch, grad_fn=e.grad_fn,
             heldout=e.heldout, every=LOOP_EVERY)
    if not np.array_equal(params["w"], e.start()["w"]):
        raise Unpack("your loop changed the parameters it was given in place: the step returns new ones, keep them")
    return out


def _loop_flat(o):
    if not isinstance(o, (tuple, list)) or len(o) != 2 or not isinstance(o[0], dict):
        raise Unpack("your loop returns (params, curve): the parameters after the last step, then the curve's rows")
    p, curve = o
    curve = [tuple(r) for r in curve]
    if any(len(r) != 3 for r in curve):
        raise Unpack("each row of the curve is (step, mean training loss since the last row, held-out number): "
                     "three numbers")
    return {"the curve's step column": np.array([r[0] for r in curve], dtype=float),
            "the curve's training-loss column": np.array([r[1] for r in curve], dtype=float),
            "the curve's held-out column": np.array([r[2] for r in curve], dtype=float),
            **{f"params[{k!r}]": p[k] for k in sorted(p)}}


@exercise("11.11", hint=("a step is: a fresh minibatch, its loss and gradients, the optimiser's step; a row of the "
                         "curve every `every` steps and after the last, with the training losses since the last row "
                         "averaged and the held-out number of the parameters now",
                         "inside the loop over the steps, what does params become after the step, and which step "
                         "numbers put a row on the curve (think of the last step when steps is not a multiple of "
                         "every)?"),
          mistakes=lambda **context: {s: (lambda *a, _sw=sw, **k: _loop_ref(*a, **k, **_sw)) for s, sw in LOOP.items()})
def _(answer, *, params, minibatch, grad_fn, heldout):
    if not callable(answer):
        return False, "write a function, my_train(params, step, steps, rng, *, minibatch, grad_fn, heldout, every)"
    e = _Exact()
    if answer(e.start(), e.step, 0, np.random.default_rng(0), minibatch=e.minibatch, grad_fn=e.grad_fn,
              heldout=e.heldout, every=1) is Ellipsis:
        return False, STUB
    ok, detail = _judge(lambda seed: _loop_exact(answer, seed), [5], _loop_flat,
                        lambda seed, **sw: _loop_exact(lambda *a, **k: _loop_ref(*a, **k, **sw), seed), LOOP, {},
                        "tasks.fit's loop", "my_train(params, step, steps, rng, ...) -> (params, curve)",
                        ref=lambda seed: _loop_exact(tasks.fit, seed), shown=answer)
    if not ok:
        return False, detail
    # the lesson's own model: three SGD steps from the same seed, against tasks.fit's
    sgd = lambda p, g: {k: p[k] - 0.5 * g[k] for k in p}  # noqa: E731  a stateless step: every run is comparable

    def run(fn):
        return fn({k: np.array(v) for k, v in params.items()}, sgd, 3, np.random.default_rng(5), minibatch=minibatch,
                  grad_fn=grad_fn, heldout=heldout, every=2)

    with threadpool_limits(1):  # tiny products: BLAS threads only wait on each other (and on a busy machine, long)
        got, want = _loop_flat(run(answer)), _loop_flat(run(tasks.fit))
    off = [k for k in want if not _agree(got[k], want[k])[0]]
    if off:
        return False, f"right on the exact problem, but on the lesson's model {_are(off)} not tasks.fit's"
    yours = your_lines(answer)
    return True, ("on an exact problem and on the lesson's model your loop gives tasks.fit's parameters and curve" +
                  (f". Yours: {yours}" if yours else ""))


# ------------------------------------------------------------------------------------------
# 11.12  which pattern will a head learn on the mirror task (a prediction)
# ------------------------------------------------------------------------------------------

PATTERNS = ("diagonal", "previous token", "anti-diagonal", "[CLS]", "uniform")


@exercise("11.12", hint=("the answer to a hidden letter sits in plain sight at one position: which one, for the letter "
                         "at position i of a sentence of 2 HALF + 2 tokens ([CLS], the letters, [SEP])?",
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
