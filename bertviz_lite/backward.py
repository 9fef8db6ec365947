"""The backward pass: one function per formula line of engine.py, in the same order and under the
same section headers, so each `*_backward` reads beside the forward line it undoes (micrograd keeps
a value's forward and `_backward` together; here they sit in two files with one layout).

Each function is the chain rule of one line: it takes d loss / d (the line's output), written `dy`,
and the tensors the forward recorded, and returns d loss / d (each input). The recorder the forward
wrote through is the tape. What the tape does not hold is recomputed from the recorded inputs: a
LayerNorm's row mean, variance and x_hat (`layer_norm_backward`) and GELU's Phi(x) (`gelu_backward`)
are inner values of one line, not trace keys, so they cost a few element-wise passes here rather than
a key per line in every trace. `engine.encoder_layer`
records `attn.q`, `attn.probs`, `attn.resid`, `ffn.up`, ... under `layer.{l}.`; `encoder_layer_backward`
reads exactly those keys back (`TAPE_KEYS`). Shapes in brackets as in engine.py; a leading batch
axis `[B, ...]` flows through every line, and a weight's gradient sums over every leading axis.

The whole chain, for the last k layers and the masked-LM head (bertviz_lite.mlm runs it):

    loss  <- logits = h W_T^T + b^mlm  <- h = LN(GELU(Z W^t + b^t))  <- Z rows at the chosen positions
          <- layer L-1 <- ... <- layer L-k  (each: attention then feed-forward, each with residual + LN)

Checked in tests/engine/test_backward.py: every function against central finite differences in float64, and
one whole encoder layer plus the head against torch autograd (tests/fixtures/make_backward_reference.py).
The embeddings and the layers below the trained ones are frozen, so they have no backward here.
"""

from __future__ import annotations

import math

from . import engine, schema

# ------------------------------------------------------------------------------------------
# building blocks
# ------------------------------------------------------------------------------------------


def layer_norm_backward(dy, x, gamma, eps: float, xp):
    """y = (x - mu) / sqrt(var + eps) gamma + beta   ->   (dx, dgamma, dbeta).

    With x_hat the normalised rows and g = dy gamma:
    dx = (g - mean(g) - x_hat mean(g x_hat)) / sqrt(var + eps) (the means over the last axis);
    dgamma = sum of dy x_hat, dbeta = sum of dy over every leading axis   [..., H] -> [H].
    mu, var and x_hat are recomputed here from the recorded input x (they are not trace keys).
    """
    mu = xp.mean(x, axis=-1, keepdims=True)  # [..., 1]
    inv = 1.0 / xp.sqrt(xp.mean((x - mu) ** 2, axis=-1, keepdims=True) + eps)  # [..., 1]
    x_hat = (x - mu) * inv  # [..., H]
    g = dy * gamma
    dx = inv * (g - xp.mean(g, axis=-1, keepdims=True) - x_hat * xp.mean(g * x_hat, axis=-1, keepdims=True))
    return dx, _sum_leading(dy * x_hat, xp), _sum_leading(dy, xp)


def softmax_backward(dp, p, xp):
    """p = softmax(s) row-wise   ->   ds = p (dp - sum_j dp_j p_j)   [..., n] -> [..., n].

    A key the padding mask removed has p = 0 exactly, so its score gets ds = 0: no gradient flows
    to (or through) a [PAD] key.
    """
    return p * (dp - xp.sum(dp * p, axis=-1, keepdims=True))


def gelu_backward(dy, x, xp):
    """y = x Phi(x)   ->   dx = dy (Phi(x) + x phi(x)), phi the standard normal density   (x: the input `up`)."""
    cdf = 0.5 * (1.0 + engine.erf(x / engine.SQRT_2, xp))
    pdf = xp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return dy * (cdf + x * pdf)


def matmul_backward(dy, x, W, xp):
    """y = x W   ->   dx = dy W^T [..., k],  dW = x^T dy [k, m] (summed over every leading axis)."""
    k, m = W.shape
    x2, dy2 = xp.reshape(x, (-1, k)), xp.reshape(dy, (-1, m))  # [B n, k], [B n, m]: one 2-d product each
    dx = xp.reshape(dy2 @ xp.matrix_transpose(W), (*dy.shape[:-1], k))  # (a 3-d @ 2-d product is far slower)
    return dx, xp.matrix_transpose(x2) @ dy2


def bias_backward(dy, xp):
    """y = x + b (b broadcast over the leading axes)   ->   dx = dy,  db = sum of dy over them   [m]."""
    return dy, _sum_leading(dy, xp)


def linear_backward(dy, x, W, xp, need_dx: bool = True):
    """y = x W + b (matmul, then bias)   ->   (dx, dW, db); dx is None when the input is frozen data
    (need_dx=False: the product dy W^T is not computed to be thrown away)."""
    dxW, db = bias_backward(dy, xp)
    if not need_dx:
        k, m = W.shape
        return None, xp.matrix_transpose(xp.reshape(x, (-1, k))) @ xp.reshape(dxW, (-1, m)), db  # dW only
    dx, dW = matmul_backward(dxW, x, W, xp)
    return dx, dW, db


def split_heads_backward(dheads, xp):
    """[..., n, H] -> [..., n_h, n, d_k] is a reshape and a transpose: undo both (= merge_heads)."""
    return engine.merge_heads(dheads, xp)


def merge_heads_backward(dconcat, num_heads: int, xp):
    """[..., n_h, n, d_k] -> [..., n, H] is a transpose and a reshape: undo both (= split_heads)."""
    return engine.split_heads(dconcat, num_heads, xp)


def scores_backward(ds, Q, K, scale: float, xp):
    """s = (Q scale) K^T (+ the mask, a constant)   ->   dQ = scale ds K,  dK = scale ds^T Q   [..., n_h, n, d_k]."""
    return scale * (ds @ K), scale * (xp.matrix_transpose(ds) @ Q)


def context_backward(dc, P, V, xp):
    """c = P V   ->   dP = dc V^T [..., n_h, n, n],  dV = P^T dc [..., n_h, n, d_k]."""
    return dc @ xp.matrix_transpose(V), xp.matrix_transpose(P) @ dc


def residual_backward(dy):
    """y = x + f(x): the gradient reaches x twice, once straight (returned here) and once through f."""
    return dy


def _sum_leading(a, xp):
    """Sum over every axis but the last   [..., m] -> [m]."""
    return xp.sum(xp.reshape(a, (-1, a.shape[-1])), axis=0)


# ------------------------------------------------------------------------------------------
# the forward pass, backwards (the embeddings are frozen: no backward)
# ------------------------------------------------------------------------------------------

# the keys encoder_layer records that its backward reads (under layer.{l}.): the tape
TAPE_KEYS = ("attn.q", "attn.k", "attn.v", "attn.probs", "attn.concat", "attn.resid", "attn.ln",
             "ffn.up", "ffn.act", "ffn.resid")


def attention_backward(dy, W: dict, tape, Z, c, xp):
    """Multi-head self-attention and its residual + LayerNorm, backwards: d Z_bar -> (d Z, grads).

    Z is the layer's input [..., n, H]; `tape(key)` returns what the forward recorded under this
    layer's prefix. grads holds d loss / d every weight of the block under its layer-relative name.
    """
    n_h, scale = c.num_heads, c.scale
    g = {}
    # ln = LayerNorm(resid)
    dresid, g["attn.ln.gamma"], g["attn.ln.beta"] = layer_norm_backward(dy, tape("attn.resid"), W["attn.ln.gamma"],
                                                                        c.layer_norm_eps, xp)
    # resid = Z + out
    dZ = residual_backward(dresid)
    # out = concat W_O + b_O
    dconcat, g["attn.W_O"], g["attn.b_O"] = linear_backward(dresid, tape("attn.concat"), W["attn.W_O"], xp)
    # concat = merge_heads(context)
    dcontext = merge_heads_backward(dconcat, n_h, xp)  # [..., n_h, n, d_k]
    # context = probs V
    dprobs, dV = context_backward(dcontext, tape("attn.probs"), tape("attn.v"), xp)
    # probs = softmax(scores)
    dscores = softmax_backward(dprobs, tape("attn.probs"), xp)  # [..., n_h, n, n], 0 on [PAD] keys
    # scores = (Q scale) K^T + mask
    dQ, dK = scores_backward(dscores, tape("attn.q"), tape("attn.k"), scale, xp)
    # Q, K, V = split_heads(Z W + b)
    for name, d in (("Q", dQ), ("K", dK), ("V", dV)):
        dZ_part, g[f"attn.W_{name}"], g[f"attn.b_{name}"] = linear_backward(split_heads_backward(d, xp), Z,
                                                                            W[f"attn.W_{name}"], xp)
        dZ = dZ + dZ_part
    return dZ, g


def _require_exact_gelu(c) -> None:
    """gelu_backward is exact GELU's derivative; a relu or tanh-approximation model would get wrong gradients."""
    if c.activation != "gelu":
        raise NotImplementedError(f"the backward is written for exact gelu; this model uses {c.activation!r}")


def feed_forward_backward(dy, W: dict, tape, c, xp):
    """Position-wise feed-forward and its residual + LayerNorm, backwards: d Z_l -> (d Z_bar, grads)."""
    _require_exact_gelu(c)
    g = {}
    # ln = LayerNorm(resid)
    dresid, g["ffn.ln.gamma"], g["ffn.ln.beta"] = layer_norm_backward(dy, tape("ffn.resid"), W["ffn.ln.gamma"],
                                                                      c.layer_norm_eps, xp)
    # resid = Z_bar + down
    dZ = residual_backward(dresid)
    # down = act W_down + b_down
    dact, g["ffn.W_down"], g["ffn.b_down"] = linear_backward(dresid, tape("ffn.act"), W["ffn.W_down"], xp)
    # act = gelu(up)
    dup = gelu_backward(dact, tape("ffn.up"), xp)
    # up = Z_bar W_up + b_up
    dZ_part, g["ffn.W_up"], g["ffn.b_up"] = linear_backward(dup, tape("attn.ln"), W["ffn.W_up"], xp)
    return dZ + dZ_part, g


def encoder_layer_backward(dy, W: dict, tape, Z, c, xp):
    """One post-LN layer, backwards (feed-forward first, then attention): d Z_l -> (d Z_{l-1}, grads)."""
    dZ_bar, g_ffn = feed_forward_backward(dy, W, tape, c, xp)
    dZ, g_attn = attention_backward(dZ_bar, W, tape, Z, c, xp)
    return dZ, {**g_attn, **g_ffn}


def layers_backward(dy, weights: dict, store: dict, Z_first, first: int, c, xp):
    """The loop over the trained layers in reverse (ML-From-Scratch's `for layer in reversed(self.layers)`):
    layers first .. L-1 from d Z_L to d Z_{first} (the input of the first trained layer).

    store: the recorder's dict (keys `layer.{l}.attn.q`, ...); Z_first the input to layer `first`.
    Returns (d Z_first, grads under full weight names `layer.{l}.attn.W_Q`, ...).
    """
    grads = {}
    for layer in reversed(range(first, c.num_layers)):
        prefix = schema.layer_prefix(layer)
        Z_in = Z_first if layer == first else store[f"{schema.layer_prefix(layer - 1)}ffn.ln"]
        tape = lambda k: store[prefix + k]  # noqa: E731  this layer's recorded tensors
        dy, g = encoder_layer_backward(dy, engine.LayerWeights(weights, layer), tape, Z_in, c, xp)
        grads.update({prefix + k: v for k, v in g.items()})
    return dy, grads


def mlm_head_backward(dy, W: dict, tape, Z_rows, c, xp, need_dZ: bool = True):
    """The masked-LM head, backwards, from d loss / d logits [N, V] -> (d Z rows [N, H], grads of the five
    learned tensors). The decoder is the token table W_T (tied, frozen): it passes the gradient on and
    learns nothing. tape(key) returns the head's inner lines `mlm.dense`, `mlm.act`, `mlm.transform`.
    need_dZ=False (the head trained alone on fixed rows): d Z is None, not computed."""
    _require_exact_gelu(c)
    g = {}
    # logits = h W_T^T + b^mlm (W_T frozen: only dh)
    dh, g["mlm.bias"] = bias_backward(dy, xp)
    dh = dh @ W["embed.W_T"]  # [N, V] @ [V, E] -> [N, E]
    # h = LayerNorm(act)
    dact, g["mlm.ln.gamma"], g["mlm.ln.beta"] = layer_norm_backward(dh, tape("mlm.act"), W["mlm.ln.gamma"],
                                                                    c.layer_norm_eps, xp)
    # act = gelu(dense)
    ddense = gelu_backward(dact, tape("mlm.dense"), xp)
    # dense = Z W^t + b^t
    dZ, g["mlm.W_t"], g["mlm.b_t"] = linear_backward(ddense, Z_rows, W["mlm.W_t"], xp, need_dZ)
    return dZ, g
