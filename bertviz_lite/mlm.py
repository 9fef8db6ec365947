"""Fitting BERT's masked-language-model head on a frozen encoder, with gradients written by hand.

The head is BERT's own (Devlin et al. 2019, section 3.1 "Task #1: Masked LM"; Hugging Face's
`BertLMPredictionHead`): a dense H x H layer, GELU, LayerNorm, then the output layer tied to the
token table W_T, plus one bias per vocabulary piece:

    a = Z W^t + b^t          [N, H]     (Z: the encoder's last layer at the chosen rows)
    g = GELU(a)              [N, H]
    h = LayerNorm(g)         [N, H]
    y = h W_T^T + b^mlm      [N, V]
    loss = mean_i -log softmax(y_i)[t_i]

The masking follows BERT's `create_pretraining_data.py`: 15% of the word pieces of a sentence
(at least one, never [CLS] or [SEP]) are chosen; of those 80% become [MASK], 10% a random piece,
10% stay as they were; the loss is taken on the chosen rows only.

Every line has its backward function below (`*_backward`), each the chain rule of one formula
line; `tests/test_mlm.py` checks each one against central finite differences in float64, and the
whole head's gradient against torch autograd (`tests/fixtures/make_mlm_reference.py`). The
decoder W_T is the encoder's own table and stays frozen (training it would change the encoder's
input too), so only W^t, b^t, the LayerNorm's gamma and beta and b^mlm are learned.
`scripts/train_mlm_head.py` fits the head that `load("minilm")` ships.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import backend, engine

MASK_RATE = 0.15  # share of word pieces chosen for prediction
P_MASK, P_RANDOM = 0.8, 0.1  # of the chosen: -> [MASK], -> a random piece; the rest stay as they are

# closed-class English words (articles, determiners, pronouns, prepositions, conjunctions, auxiliary
# and modal verbs, a few particles): a masked piece that is one of these is a "function word"; a
# whole-word alphabetic piece that is not is a "content word"; '##' pieces, digits and punctuation are "other"
FUNCTION_WORDS = frozenset("""
a an the this that these those some any no every each either neither all both half several many much few
little more most less least other another such what which whose whatever whichever
i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it its itself
we us our ours ourselves they them their theirs themselves one ones oneself who whom whoever someone anyone
everyone something anything everything nothing nobody somebody anybody everybody
of in on at by for with from to into onto upon about above below over under between among through during
before after against without within along across behind beyond near toward towards around off out up down
via per than as like unlike despite except since until till throughout beneath beside besides inside outside
and or but nor so yet if then because although though while whereas unless whether whether when where
why how whenever wherever also not too very just only even either
be am is are was were been being have has had having do does did done doing will would shall should can
could may might must ought
there here now again ever never once
""".split())


# ------------------------------------------------------------------------------------------
# masking (BERT's recipe)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Masked:
    """One sentence after masking: the input ids the encoder sees and what is to be predicted."""

    ids: list  # [n] input ids, with [MASK] / random / kept pieces at the chosen positions
    positions: list  # chosen positions, ascending
    targets: list  # the original ids there
    kinds: list  # per chosen position: "mask", "random" or "keep"


def choose_masks(ids, rng, *, vocab_size: int, mask_id: int, special_ids, rate: float = MASK_RATE) -> Masked:
    """BERT's masking of one tokenized sentence: round(rate * pieces) of them (at least one) chosen at random;
    each chosen piece becomes [MASK] with p=0.8, a random vocabulary piece with p=0.1, or stays (p=0.1)."""
    ids = [int(i) for i in ids]
    candidates = [i for i, t in enumerate(ids) if t not in special_ids]
    if not candidates:
        raise ValueError("no word piece to mask: the input holds only [CLS], [SEP] or [PAD]")
    k = max(1, int(round(len(candidates) * rate)))
    order = rng.permutation(len(candidates))
    positions = sorted(candidates[int(j)] for j in order[:k])
    out, kinds = list(ids), []
    for p in positions:
        u = rng.random()
        if u < P_MASK:
            out[p], kind = mask_id, "mask"
        elif u < P_MASK + P_RANDOM:
            out[p], kind = int(rng.integers(0, vocab_size)), "random"
        else:
            kind = "keep"
        kinds.append(kind)
    return Masked(out, positions, [ids[p] for p in positions], kinds)


def word_class(piece: str) -> str:
    """'function', 'content' or 'other' (a '##' piece, a number, punctuation) for a vocabulary piece."""
    if piece.startswith("##") or not piece.isalpha():
        return "other"
    return "function" if piece in FUNCTION_WORDS else "content"


# ------------------------------------------------------------------------------------------
# forward lines and their backward functions (the chain rule, one line at a time)
# ------------------------------------------------------------------------------------------


def matmul_backward(dy, x, W):
    """y = x W   ->   dx = dy W^T [N, k],  dW = x^T dy [k, m]."""
    return dy @ W.T, x.T @ dy


def bias_backward(dy, xp):
    """y = x + b (b broadcast over rows)   ->   dx = dy,  db = sum of dy over the rows [m]."""
    return dy, xp.sum(dy, axis=0)


def gelu_backward(dy, x, xp):
    """y = x Phi(x)   ->   dx = dy (Phi(x) + x phi(x)), phi the standard normal density."""
    cdf = 0.5 * (1.0 + engine.erf(x / engine.SQRT_2, xp))
    pdf = xp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy * (cdf + x * pdf)


def layer_norm_backward(dy, x, gamma, eps: float, xp):
    """y = (x - mu) / sqrt(var + eps) gamma + beta over the last axis   ->   (dx, dgamma, dbeta).

    With x_hat the normalised rows and g = dy gamma: dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps).
    """
    mu = xp.mean(x, axis=-1, keepdims=True)
    inv = 1.0 / xp.sqrt(xp.mean((x - mu) ** 2, axis=-1, keepdims=True) + eps)  # [N, 1]
    x_hat = (x - mu) * inv  # [N, H]
    g = dy * gamma
    dx = inv * (g - xp.mean(g, axis=-1, keepdims=True) - x_hat * xp.mean(g * x_hat, axis=-1, keepdims=True))
    return dx, xp.sum(dy * x_hat, axis=0), xp.sum(dy, axis=0)


def log_softmax(y, xp):
    """log softmax(y) row-wise, computed without overflow   [N, V]."""
    m = xp.max(y, axis=-1, keepdims=True)
    return y - m - xp.log(xp.sum(xp.exp(y - m), axis=-1, keepdims=True))


def cross_entropy(y, targets, xp):
    """mean over rows of -log softmax(y)[target]   [N, V], [N] -> scalar."""
    logp = log_softmax(y, xp)
    return -xp.mean(xp.take_along_axis(logp, xp.reshape(targets, (-1, 1)), axis=-1))


def cross_entropy_backward(y, targets, xp, logp=None):
    """d loss / d y = (softmax(y) - onehot(target)) / N   [N, V] (logp: log_softmax(y), if already computed)."""
    N, V = y.shape
    logp = log_softmax(y, xp) if logp is None else logp
    onehot = xp.astype(xp.arange(V)[None, :] == xp.reshape(targets, (-1, 1)), y.dtype)  # [N, V]
    return (xp.exp(logp) - onehot) / N


def softmax_cross_entropy(y, targets, xp):
    """(cross_entropy, cross_entropy_backward) from one log-softmax: what a training step uses."""
    logp = log_softmax(y, xp)
    loss = -xp.mean(xp.take_along_axis(logp, xp.reshape(targets, (-1, 1)), axis=-1))
    return loss, cross_entropy_backward(y, targets, xp, logp)


# ------------------------------------------------------------------------------------------
# the whole head
# ------------------------------------------------------------------------------------------


def head_forward(params: dict, Z, W_T, eps: float, xp):
    """The head's lines on rows Z [N, H] -> (logits [N, V], the intermediates backward needs)."""
    a = Z @ params["mlm.W_t"] + params["mlm.b_t"]  # [N, H]
    g = engine.gelu(a, xp)  # [N, H]
    h = engine.layer_norm(g, params["mlm.ln.gamma"], params["mlm.ln.beta"], eps, xp)  # [N, H]
    y = h @ W_T.T + params["mlm.bias"]  # [N, V]: the decoder is the token table, tied
    return y, {"Z": Z, "a": a, "g": g, "h": h}


def head_backward(dy, cache: dict, params: dict, W_T, eps: float, xp) -> dict:
    """Gradients of the loss for every learned tensor of the head, from d loss / d logits [N, V]."""
    dh, dbias = bias_backward(dy, xp)
    dh = dh @ W_T  # [N, H]: the matmul with W_T^T, backwards (W_T frozen, so no dW_T)
    dg, dgamma, dbeta = layer_norm_backward(dh, cache["g"], params["mlm.ln.gamma"], eps, xp)
    da = gelu_backward(dg, cache["a"], xp)
    da, db_t = bias_backward(da, xp)
    _, dW_t = matmul_backward(da, cache["Z"], params["mlm.W_t"])
    return {"mlm.W_t": dW_t, "mlm.b_t": db_t, "mlm.ln.gamma": dgamma, "mlm.ln.beta": dbeta, "mlm.bias": dbias}


def loss_and_grads(params: dict, Z, targets, W_T, eps: float, xp):
    """(cross-entropy on the rows, its gradient for every learned tensor)."""
    y, cache = head_forward(params, Z, W_T, eps, xp)
    loss, dy = softmax_cross_entropy(y, targets, xp)
    return loss, head_backward(dy, cache, params, W_T, eps, xp)


def init_head(hidden: int, vocab: int, rng, xp, std: float = 0.02, dtype=None) -> dict:
    """BERT's initialisation of the head: W^t ~ N(0, std), biases 0, LayerNorm 1 and 0."""
    W = backend.from_host(backend.host_random_normal((hidden, hidden), std, rng), xp)
    params = {"mlm.W_t": W, "mlm.b_t": xp.zeros(hidden, dtype=W.dtype), "mlm.ln.gamma": xp.ones(hidden, dtype=W.dtype),
              "mlm.ln.beta": xp.zeros(hidden, dtype=W.dtype), "mlm.bias": xp.zeros(vocab, dtype=W.dtype)}
    return params if dtype is None else {k: xp.astype(v, dtype) for k, v in params.items()}


# ------------------------------------------------------------------------------------------
# training and evaluation
# ------------------------------------------------------------------------------------------


class Adam:
    """Adam (Kingma and Ba 2015) with bias correction: BERT's optimiser, here without weight decay."""

    def __init__(self, params: dict, xp, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6):
        self.xp, self.b1, self.b2, self.eps, self.t = xp, b1, b2, eps, 0
        self.m = {k: xp.zeros_like(v) for k, v in params.items()}
        self.v = {k: xp.zeros_like(v) for k, v in params.items()}

    def step(self, params: dict, grads: dict, lr: float) -> dict:
        """New parameters (the old ones are not changed in place)."""
        self.t += 1
        c1, c2 = 1.0 - self.b1 ** self.t, 1.0 - self.b2 ** self.t
        new = {}
        for k, p in params.items():
            self.m[k] = self.b1 * self.m[k] + (1.0 - self.b1) * grads[k]
            self.v[k] = self.b2 * self.v[k] + (1.0 - self.b2) * grads[k] ** 2
            new[k] = p - lr * (self.m[k] / c1) / (self.xp.sqrt(self.v[k] / c2) + self.eps)
        return new


def learning_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """BERT's schedule: linear warm-up to the peak, then linear decay to 0 at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(0.0, (total - step) / max(1, total - warmup))


def fit(params: dict, Z, targets, W_T, *, eps: float, xp, rng, epochs: int = 1, batch: int = 512,
        peak_lr: float = 1e-3, warmup: float = 0.05, log_every: int = 50, on_log=None):
    """Minibatch Adam on the rows (Z [N, H], targets [N]); the rows are shuffled each epoch with rng.

    Returns (params, log): log holds (step, rows seen, mean training loss since the last entry).
    """
    N = Z.shape[0]
    steps_per_epoch = math.ceil(N / batch)
    total = epochs * steps_per_epoch
    opt, log, step, running, count = Adam(params, xp), [], 0, 0.0, 0
    for _ in range(epochs):
        order = backend.from_host(rng.permutation(N), xp)
        for s in range(steps_per_epoch):
            rows = order[s * batch:(s + 1) * batch]
            loss, grads = loss_and_grads(params, xp.take(Z, rows, axis=0), xp.take(targets, rows, axis=0), W_T,
                                         eps, xp)
            params = opt.step(params, grads, learning_rate(step, total, peak_lr, max(1, int(warmup * total))))
            running, count, step = running + float(loss), count + 1, step + 1
            if step % log_every == 0 or step == total:
                log.append((step, min(step * batch, epochs * N), running / count))
                if on_log is not None:
                    on_log(log[-1])
                running, count = 0.0, 0
    return params, log


def top_k_hits(params: dict, Z, targets, W_T, *, eps: float, xp, k: int = 5, batch: int = 1024):
    """Per row: the rank of the target among the logits (0 = top-1), and the loss, in batches."""
    ranks, losses = [], []
    for s in range(0, Z.shape[0], batch):
        y, _ = head_forward(params, Z[s:s + batch], W_T, eps, xp)
        t = targets[s:s + batch]
        yt = xp.take_along_axis(y, xp.reshape(t, (-1, 1)), axis=-1)  # [b, 1]
        ranks.append(xp.sum(xp.astype(y > yt, xp.int32), axis=-1))  # how many pieces score higher
        losses.append(-xp.take_along_axis(log_softmax(y, xp), xp.reshape(t, (-1, 1)), axis=-1)[:, 0])
    return xp.concat(ranks), xp.concat(losses)
