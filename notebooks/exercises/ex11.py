"""Exercises of lesson 11 (training the output layer): gradients checked against central finite differences.

The checkers never look at bertviz_lite.mlm's backward functions: they nudge the input one entry at a time
(up and down by h) and compare the slope of the loss with the student's gradient at those entries: every
target piece, each row's highest logit, and a seeded sample of other pieces.
"""
import numpy as np

from course import close, equals, exercise

H_STEP = 1e-6


def _entries(shape, targets, rng, per_row=12):
    """(row, piece) pairs to differentiate at: the targets, each row's first piece, and a sample of others."""
    rows, V = shape
    picks = [(i, int(t)) for i, t in enumerate(targets)] + [(i, 0) for i in range(rows)]
    picks += [(i, int(j)) for i in range(rows) for j in rng.integers(0, V, per_row)]
    return sorted(set(picks))


def _slopes(loss, x, entries):
    """Central finite differences of loss(x) at the entries of x (x float64, copied)."""
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


def _ce(y, targets):
    m = y.max(axis=-1, keepdims=True)
    logp = y - m - np.log(np.exp(y - m).sum(axis=-1, keepdims=True))
    return -np.mean(logp[np.arange(len(targets)), targets])


def _compare(answer, shape, entries, slopes, mistakes):
    a = np.asarray(answer, dtype=np.float64) if hasattr(answer, "__array__") else None
    if a is None or a.shape != shape:
        got = "not an array" if a is None else f"shape {a.shape}"
        return False, f"{got}, expected {shape}"
    picked = np.array([a[e] for e in entries])
    ok, detail = close(picked, slopes, atol=1e-6, rtol=1e-4)
    if ok:
        return True, f"matches the finite differences at {len(entries)} entries within 1e-6"
    for what, transform in mistakes:
        if close(transform(picked), slopes, atol=1e-6, rtol=1e-4)[0]:
            return False, what
    return False, f"against finite differences at {len(entries)} entries: {detail}"


def _wrong_dy(answer, **context):
    a = np.asarray(answer, dtype=np.float64)
    return [a * len(a), -a, np.exp(a)]


def _softmax(y):
    e = np.exp(y - y.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _onehot(shape, targets):
    o = np.zeros(shape)
    o[np.arange(len(targets)), targets] = 1.0
    return o


def _dy_mistakes(y, targets):
    y = np.asarray(y, dtype=np.float64)
    p, o, n = _softmax(y), _onehot(y.shape, targets), len(targets)
    return {"right up to a factor N: the loss is the mean over the rows, so divide by N": p - o,
            "the sign is flipped: onehot - softmax is the gradient of -loss (the direction to step in)": (o - p) / n,
            "you left out the -1 at each row's target: d(-log p_t)/dy = softmax - onehot": p / n,
            "your softmax ran down the columns (over the rows): each row's softmax is over the vocabulary":
                (np.exp(y - y.max(0)) / np.exp(y - y.max(0)).sum(0) - o) / n}


@exercise("11.1", hint=("the loss is the mean over the N chosen rows of -log softmax(y_i)[t_i]; differentiate one row "
                        "first: the answer has y's shape (N, V)",
                        "for one row, what is d(-log softmax(y)_t)/dy: softmax(y) minus ___? and what does the mean "
                        "over N rows do to each row's gradient?"), wrong=_wrong_dy, mistakes=_dy_mistakes)
def _(answer, *, y, targets):
    y = np.asarray(y, dtype=np.float64)
    entries = _entries(y.shape, targets, np.random.default_rng(17))
    slopes = _slopes(lambda x: _ce(x, targets), y, entries)
    return _compare(answer, y.shape, entries, slopes, [])


def _head_loss(params, Z, targets, W_T, eps):
    import scipy.special
    a = Z @ params["mlm.W_t"] + params["mlm.b_t"]
    g = 0.5 * a * (1 + scipy.special.erf(a / np.sqrt(2)))
    mu, var = g.mean(-1, keepdims=True), g.var(-1, keepdims=True)
    h = (g - mu) / np.sqrt(var + eps) * params["mlm.ln.gamma"] + params["mlm.ln.beta"]
    return _ce(h @ W_T.T + params["mlm.bias"], targets)


def _wrong_dbias(answer, **context):
    a = np.asarray(answer, dtype=np.float64)
    return [a / len(context["targets"]), -a, a[:-1]]


def _head_dy(params, Z, targets, W_T, eps):
    """The head's logits' gradient (softmax - onehot) / N, from a float64 forward of the head."""
    import scipy.special
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    Z, W_T = np.asarray(Z, dtype=np.float64), np.asarray(W_T, dtype=np.float64)
    a = Z @ p["mlm.W_t"] + p["mlm.b_t"]
    g = 0.5 * a * (1 + scipy.special.erf(a / np.sqrt(2)))
    h = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps) * p["mlm.ln.gamma"] + p["mlm.ln.beta"]
    y = h @ W_T.T + p["mlm.bias"]
    return (_softmax(y) - _onehot(y.shape, targets)) / len(targets)


def _dbias_mistakes(params, Z, targets, W_T, eps):
    dy = _head_dy(params, Z, targets, W_T, eps)
    return {"divided by N twice: d loss / d y already holds the 1/N of the mean; sum its rows": dy.sum(0) / len(dy),
            "the sign is flipped": -dy.sum(0),
            "you took one row's gradient: the bias is added to every row, so every row contributes": dy[0]}


@exercise("11.2", hint=("the output bias is added to every row of y: which rows does one bias entry touch? "
                        "the answer is one number per vocabulary piece, shape (V,)",
                        "each row's d loss / d y passes straight to the bias: do you add the rows' contributions "
                        "or average them, given that d loss / d y already holds ___?"),
          wrong=_wrong_dbias, mistakes=_dbias_mistakes)
def _(answer, *, params, Z, targets, W_T, eps):
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    Z, W_T = np.asarray(Z, dtype=np.float64), np.asarray(W_T, dtype=np.float64)
    entries = [e[1] for e in _entries((len(targets), W_T.shape[0]), targets, np.random.default_rng(172), 8)]
    entries = sorted(set(entries))

    def loss(b):
        return _head_loss({**p, "mlm.bias": b}, Z, targets, W_T, eps)

    slopes = _slopes(loss, p["mlm.bias"], [(j,) for j in entries])
    return _compare(answer, p["mlm.bias"].shape, [(j,) for j in entries], slopes, [])


@exercise("11.3", hint=("BERT's recipe chooses 15% of the word pieces: what is 15% of 3, and of 33, before rounding?",
                        "what does 4.95 round to, and can a sentence end up with no piece to predict at all?"),
          prediction=True, wrong=lambda answer, pieces: [(0, 5), (1, 4), (0, 4), 5])
def _(answer, *, pieces):
    actual = tuple(max(1, int(round(0.15 * p))) for p in pieces)
    if isinstance(answer, (tuple, list)) and len(answer) == 2 and answer[0] == 0:
        return False, "15% of 3 rounds to 0, but the recipe takes at least one piece: a sentence always has a target"
    return equals(tuple(answer) if isinstance(answer, (tuple, list)) else answer, actual)


# ------------------------------------------------------------------------------------------
# backprop through one attention head: Z_h = A_h V_h with A_h = softmax(E_h); the loss is taken as
# L = sum(G * Z_h) for the fixed upstream gradient G = dC the lesson draws (any loss above reaches Z_h as some G)
# ------------------------------------------------------------------------------------------


def _row_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _against_every_slope(answer, x, loss):
    """The answer against the central-difference slope of `loss` at every entry of x."""
    entries = [tuple(int(i) for i in idx) for idx in np.ndindex(*x.shape)]
    return _compare(answer, x.shape, entries, _slopes(loss, x, entries), [])


def _dV_mistakes(P, V, dC):
    P, dC = np.asarray(P, dtype=np.float64), np.asarray(dC, dtype=np.float64)
    return {"you used A, not A^T: V's row j reaches every query i through A[i, j], so dV = A^T dC": P @ dC,
            "the sign is flipped: dV = A^T dC (the loss grows along it)": -(P.T @ dC),
            "you passed dC straight through: V reaches the output through the map, so multiply by A^T": dC}


@exercise("11.4", hint=("Z_h = A_h V_h: each value row v_j is added into every output row i with the weight A[i, j]; "
                        "collect, for row j, what all the output rows send back",
                        "dC is [n, d_k] and A is [n, n]: which of A or A^T, multiplied with dC, sums over the queries "
                        "i for each key j (A___ @ dC)?"), mistakes=_dV_mistakes)
def _(answer, *, P, V, dC):
    P, V, dC = (np.asarray(a, dtype=np.float64) for a in (P, V, dC))
    return _against_every_slope(answer, V, lambda v: float((dC * (P @ v)).sum()))


def _dS_mistakes(S, V, dC):
    P = _row_softmax(np.asarray(S, dtype=np.float64))
    dP = np.asarray(dC, dtype=np.float64) @ np.asarray(V, dtype=np.float64).T
    inner = (dP * P).sum(-1, keepdims=True)
    return {"you left out the subtraction: softmax's Jacobian is diag(p) - p p^T, so ds = p * (dp - sum_j dp_j p_j)":
            P * dP,
            "you left out the factor p: ds = p * (dp - sum_j dp_j p_j)": dP - inner,
            "your sum ran over the queries (axis 0): each row's softmax mixes only that row's keys":
                P * (dP - (dP * P).sum(0, keepdims=True)),
            "you kept only the diagonal of the Jacobian, p (1 - p): every key's score moves every weight of its row":
                P * (1 - P) * dP}


@exercise("11.5", hint=("A = softmax(E) row by row: raising one score raises its own weight and lowers every other "
                        "weight of the same row",
                        "for one row, d p_j / d s_k = p_j (1[j = k] - p_k): what does sum_j dp_j * that give for s_k, "
                        "written with p * (dp - ___)?"), mistakes=_dS_mistakes)
def _(answer, *, S, V, dC):
    S, V, dC = (np.asarray(a, dtype=np.float64) for a in (S, V, dC))
    return _against_every_slope(answer, S, lambda s: float((dC * (_row_softmax(s) @ V)).sum()))
