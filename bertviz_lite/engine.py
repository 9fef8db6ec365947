"""The BERT forward pass, one function per formula line (Devlin et al. 2019, section 3;
Vaswani et al. 2017, section 3.2), matching Hugging Face transformers' `BertModel`
(eager attention) to float32 precision.

Every function takes the array namespace `xp` (array API standard) and never changes
an array in place, so every recorded tensor stays as it was computed. Shapes in
brackets, in the course's symbols (schema.SYMBOLS): n tokens, H hidden, n_h heads, d_k = H / n_h
per head, d_ffnn feed-forward width. A batch
(`model.trace_batch`) runs the same lines with one more leading axis on every shape.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from . import backend, kernels, schema
from .config import BertConfig
from .trace import NullRecorder, Recorder

# ------------------------------------------------------------------------------------------
# building blocks
# ------------------------------------------------------------------------------------------


def fusable(formula):
    """Marks a formula function that a fused kernel may replace on the fast path.

    Which kernel, for which backend and dtype, is decided in one table, `kernels.FUSED`; a kernel
    may decline (return None, e.g. Q, K, V's when a weight was replaced), and the line runs.
    `model.trace(..., fast=False)` switches every replacement off, so the lines below run
    exactly as written (edit one and the trace changes).
    """
    @functools.wraps(formula)
    def run(x, *args):
        kernel = kernels.fused_kernel(formula.__name__, x)
        out = None if kernel is None else kernel(x, *args)  # a kernel may decline (None): the line runs
        return formula(x, *args) if out is None else out
    run.formula = formula  # the undecorated line, for tests and the curious
    return run


@fusable
def layer_norm(x, gamma, beta, eps: float, xp):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis; gamma, beta are learned."""
    mu = xp.mean(x, axis=-1, keepdims=True)  # [..., n, 1]
    var = xp.mean((x - mu) ** 2, axis=-1, keepdims=True)  # biased variance, as bert and torch
    return (x - mu) / xp.sqrt(var + eps) * gamma + beta  # eps inside the sqrt, not added to std


@fusable
def softmax(s, xp):
    """Row-wise softmax; subtracting the row max changes nothing but keeps exp finite."""
    e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
    return e / xp.sum(e, axis=-1, keepdims=True)


@fusable
def gelu(x, xp):
    """Exact gelu, x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)): what bert was trained with."""
    return 0.5 * x * (1.0 + erf(x / SQRT_2, xp))


SQRT_2 = math.sqrt(2.0)


def erf(x, xp):
    """erf for any backend (the array API has none): the library's own on cupy, else rational_erf.
    (On numpy float32 the fast path replaces the whole gelu line, erf included: kernels.numpy_gelu.)"""
    own = backend.library_erf(xp)
    return rational_erf(x, xp) if own is None else own(x)


def rational_erf(x, xp):
    """erf(x) from array-api operations alone (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7 for every x,
    tested against scipy): 1 - t(a1 + t(a2 + ...)) e^{-x^2}, t = 1/(1 + p|x|). The constants are the
    kernels' (kernels.ERF_P, kernels.ERF_A), whose gelu uses them too."""
    ax = xp.abs(x)
    t = 1.0 / (1.0 + kernels.ERF_P * ax)
    poly = kernels.ERF_A[4]
    for a in kernels.ERF_A[3::-1]:  # horner: a1 + t (a2 + t (a3 + t (a4 + t a5)))
        poly = a + t * poly
    y = 1.0 - (t * poly) * xp.exp(-ax * ax)
    return xp.where(x < 0, -y, y)


def gelu_tanh(x, xp):
    """The tanh approximation (hugging face 'gelu_new')."""
    return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_sigmoid(x, xp):
    """The sigmoid approximation x * sigmoid(1.702 x) that the illustrated article gives."""
    return x / (1.0 + xp.exp(-1.702 * x))


def relu(x, xp):
    """max(0, x): what the formula card and the count note write."""
    return xp.maximum(x, xp.zeros_like(x))


def tanh(x, xp):
    """tanh: bert's pooler nonlinearity."""
    return xp.tanh(x)


ACTIVATIONS = ("gelu", "gelu_tanh", "gelu_sigmoid", "relu")  # config.activation names one of these functions


def activation(c: BertConfig):
    """The activation function the config names, looked up when the forward runs (an edited line counts)."""
    return globals()[c.activation]


def pooler_activation(c: BertConfig):
    """The pooler's nonlinearity: tanh (BERT), relu (DistilBERT's pre_classifier), gelu (ELECTRA's classifier)."""
    return globals()[c.pooler_act]


@fusable
def matmul(x, W, xp):
    """x W: every token's vector times a weight matrix   [..., k] @ [k, m] -> [..., m]."""
    return x @ W


def split_heads(x, num_heads: int, xp):
    """[..., n, H] -> [..., n_h, n, d_k]: head h owns columns h*d_k .. (h+1)*d_k (leading axes: a batch)."""
    *lead, n, H = x.shape
    r = len(lead)
    x = xp.reshape(x, (*lead, n, num_heads, H // num_heads))  # [..., n, n_h, d_k]
    return xp.permute_dims(x, (*range(r), r + 1, r, r + 2))


def merge_heads(z, xp):
    """[..., n_h, n, d_k] -> [..., n, n_h*d_k]: the heads' outputs side by side (concatenation)."""
    *lead, n_h, n, d_k = z.shape
    r = len(lead)
    return xp.reshape(xp.permute_dims(z, (*range(r), r + 1, r, r + 2)), (*lead, n, n_h * d_k))


def padding_mask(mask, xp, dtype):
    """Additive mask [..., 1, 1, n]: 0 for real keys, -inf for [PAD], so exp() gives exactly 0.
    A mask [n] gives [1, 1, n]; a batch's masks [B, n] give [B, 1, 1, n] (one per example).
    None when every key is real: there is nothing to add, and the scores are not touched. That is decided on the
    host (all_positive): reading it back from a device array would synchronise every trace on a GPU."""
    on_host = isinstance(mask, (list, tuple)) or backend.is_host_array(mask)
    if on_host and all_positive(mask):
        return None  # (a device array's mask is never read back: 0 is added where every key is real)
    m = xp.asarray(mask)
    zero = xp.zeros(m.shape, dtype=dtype)
    return xp.reshape(xp.where(m > 0, zero, zero - math.inf), (*m.shape[:-1], 1, 1, m.shape[-1]))


# ------------------------------------------------------------------------------------------
# the forward pass
# ------------------------------------------------------------------------------------------


def all_positive(mask) -> bool:
    """Whether every key is real, from the 0/1 mask as host lists or a host array ([n] or [B, n]). Deciding it
    from a device array would read the device back (a sync per trace on a GPU)."""
    if backend.is_host_array(mask):  # a NumPy mask (mlm's batches): one vectorised test, not a Python loop
        return bool((mask > 0).all())
    rows = mask if len(mask) and hasattr(mask[0], "__len__") else [mask]  # lists
    return all(m > 0 for row in rows for m in row)


def _lookup(table, ids, xp):
    """Rows of a table by id   [V, H], [..., n] -> [..., n, H] (the array api's take wants 1-d ids)."""
    return xp.reshape(xp.take(table, xp.reshape(ids, (-1,)), axis=0), (*ids.shape, table.shape[-1]))


def embeddings(W: dict, ids, segments, c: BertConfig, rec: Recorder, xp):
    """Z_0 = LayerNorm(T + P + S)   [..., n] ids -> [..., n, E] (-> [..., n, H]) (leading axes: a batch)."""
    n, E, o = ids.shape[-1], W["embed.W_T"].shape[-1], c.position_offset  # o: 0, RoBERTa padding_idx + 1
    T = rec("embed.token", _lookup(W["embed.W_T"], ids, xp))  # [..., n, E]
    # [..., n, E], a copy: traces never share weights
    P = rec("embed.position", xp.asarray(xp.broadcast_to(W["embed.W_P"][o:o + n, :], (*ids.shape, E)), copy=True))
    if c.type_vocab_size:
        S = rec("embed.segment", _lookup(W["embed.W_S"], segments, xp))  # [..., n, E]
    else:
        S = rec("embed.segment", xp.zeros_like(T))  # DistilBERT has no segment table: S = 0
    X = rec("embed.sum", T + P + S)  # [..., n, E]
    Z = rec("embed.ln", layer_norm(X, W["embed.ln.gamma"], W["embed.ln.beta"], c.layer_norm_eps, xp))
    if c.embed_size != c.hidden_size:  # ALBERT, ELECTRA: E -> H
        Z = rec("embed.proj", matmul(Z, W["embed.W_E"], xp) + W["embed.b_E"])  # [..., n, H]
    return Z


@fusable
def queries_keys_values(Z, W: dict, n_h: int, xp):
    """Every token's query, key and value, split into the n_h heads   [..., n, H] -> 3 x [..., n_h, n, d_k].
    (The fast path computes all three from one product with [W^Q | W^K | W^V]: kernels.numpy_qkv.)"""
    Q = split_heads(matmul(Z, W["attn.W_Q"], xp) + W["attn.b_Q"], n_h, xp)  # [..., n_h, n, d_k]
    K = split_heads(matmul(Z, W["attn.W_K"], xp) + W["attn.b_K"], n_h, xp)  # [..., n_h, n, d_k]
    V = split_heads(matmul(Z, W["attn.W_V"], xp) + W["attn.b_V"], n_h, xp)  # [..., n_h, n, d_k]
    return Q, K, V


def attention(W: dict, Z, mask_add, c: BertConfig, rec: Recorder, xp):
    """Multi-head self-attention and its residual + layernorm   [..., n, H] -> [..., n, H]."""
    n_h, scale = c.num_heads, c.scale
    Q, K, V = queries_keys_values(Z, W, n_h, xp)  # [..., n_h, n, d_k] each
    Q, K, V = rec("attn.q", Q), rec("attn.k", K), rec("attn.v", V)
    # [..., n_h, n, n]: Q K^T / sqrt(d_k); scaling the n x d_k queries first gives the same product and
    # touches n_h*n*d_k numbers instead of n_h*n*n
    scores = (Q * scale) @ xp.matrix_transpose(K)
    if mask_add is not None:
        scores = scores + mask_add  # -inf on [PAD] keys
    scores = rec("attn.scores", scores)
    probs = rec("attn.probs", softmax(scores, xp))  # [..., n_h, n, n], rows sum to 1
    context = rec("attn.context", probs @ V)  # [..., n_h, n, d_k]
    concat = rec("attn.concat", merge_heads(context, xp))  # [..., n, H]
    out = rec("attn.out", matmul(concat, W["attn.W_O"], xp) + W["attn.b_O"])  # [..., n, H]
    resid = rec("attn.resid", Z + out)  # [..., n, H]
    return rec("attn.ln", layer_norm(resid, W["attn.ln.gamma"], W["attn.ln.beta"], c.layer_norm_eps, xp))


def feed_forward(W: dict, Z, c: BertConfig, rec: Recorder, xp):
    """Position-wise feed-forward and its residual + layernorm   [..., n, H] -> [..., n, d_ffnn] -> [..., n, H]."""
    act = activation(c)
    up = rec("ffn.up", matmul(Z, W["ffn.W_up"], xp) + W["ffn.b_up"])  # [..., n, d_ffnn]
    a = rec("ffn.act", act(up, xp))  # [..., n, d_ffnn]
    down = rec("ffn.down", matmul(a, W["ffn.W_down"], xp) + W["ffn.b_down"])  # [..., n, H]
    resid = rec("ffn.resid", Z + down)  # [..., n, H]
    return rec("ffn.ln", layer_norm(resid, W["ffn.ln.gamma"], W["ffn.ln.beta"], c.layer_norm_eps, xp))


def encoder_layer(W: dict, Z, mask_add, c: BertConfig, rec: Recorder, xp):
    """One post-ln transformer layer: Z_{l-1} -> Z_l   [..., n, H] -> [..., n, H]."""
    Z_bar = attention(W, Z, mask_add, c, rec, xp)
    return feed_forward(W, Z_bar, c, rec, xp)


def encoder(layer_weights, Z, mask_add, c: BertConfig, rec: Recorder, xp, layers=None):
    """The stack: Z -> encoder_layer -> ... for each layer in `layers` (default all L), each recording under
    its `layer.{l}.` prefix; layer_weights[l] holds layer l's weights   [..., n, H] -> [..., n, H]."""
    for layer in range(c.num_layers) if layers is None else layers:
        Z = encoder_layer(layer_weights[layer], Z, mask_add, c, rec.scope(schema.layer_prefix(layer)), xp)
    return Z


def pooler(W: dict, Z_L, rec: Recorder, xp, act=tanh):
    """p = tanh(Z_L[0] W + b): the [CLS] vector through one dense layer   [..., n, H] -> [..., H].
    (DistilBERT's classifier uses relu here, ELECTRA's gelu: config.pooler_act.)"""
    return rec("pooler.out", act(Z_L[..., 0, :] @ W["pooler.W"] + W["pooler.b"], xp))


def mlm_head(W: dict, Z_L, c: BertConfig, rec: Recorder, xp, tape: Recorder | None = None):
    """Masked-lm logits: transform, then the tied output layer W_T^T (or an untied W_out)   [n, H] -> [n, V].
    The transform's lines are not trace keys; a training tape (bertviz_lite.mlm) records them for the backward."""
    tape = NullRecorder(xp) if tape is None else tape
    act = activation(c)
    dense = tape("mlm.dense", Z_L @ W["mlm.W_t"] + W["mlm.b_t"])  # [n, E] (E = H but in ALBERT)
    a = tape("mlm.act", act(dense, xp))  # [n, E]
    h = tape("mlm.transform", layer_norm(a, W["mlm.ln.gamma"], W["mlm.ln.beta"], c.layer_norm_eps, xp))  # [n, E]
    W_out = W["mlm.W_out"] if "mlm.W_out" in W else xp.permute_dims(W["embed.W_T"], (1, 0))  # [E, V]
    return rec("mlm.logits", h @ W_out + W["mlm.bias"])  # [n, V]


def task_head(W: dict, Z_L, p, c: BertConfig, rec: Recorder, xp):
    """The task head's logits, one formula line per head (schema's head.logits rows)."""
    if c.head == "sequence_classification":
        return rec("head.logits", p @ W["head.W"] + W["head.b"])  # [..., H] -> [..., labels]
    if c.head == "next_sentence":
        return rec("head.logits", p @ W["nsp.W"] + W["nsp.b"])  # [..., H] -> [..., 2]
    if c.head in ("token_classification", "question_answering"):
        return rec("head.logits", Z_L @ W["head.W"] + W["head.b"])  # [..., n, H] -> [..., n, labels]
    if c.head == "replaced_token":  # [..., n, H] -> [..., n, H] -> [..., n]
        h = activation(c)(Z_L @ W["head.W_d"] + W["head.b_d"], xp)
        return rec("head.logits", (h @ W["head.W"] + W["head.b"])[..., 0])
    raise ValueError(f"unknown head {c.head!r}")


class LayerWeights(Mapping):
    """A layer's weights under scope-relative names ('attn.W_Q'), read from the full dict each time: a weight
    replaced there (`model.weights["layer.0.attn.W_Q"] = ...`) is the one the next forward reads.
    qkv: the model's packed [W^Q | W^K | W^V] for the fast path (kernels.pack_qkv), or None."""

    def __init__(self, weights: dict, layer: int, qkv=None):
        self.weights, self.prefix, self.qkv = weights, schema.layer_prefix(layer), qkv

    def __getitem__(self, name: str):
        return self.weights[self.prefix + name]

    def __iter__(self):
        return (k[len(self.prefix):] for k in self.weights if k.startswith(self.prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def forward(weights: dict, layer_weights: list, ids, segments, mask, c: BertConfig, rec: Recorder, xp, *,
            mlm: bool = False):
    """The whole model: embeddings, L encoder layers, pooler (and the mlm head)."""
    mask_add = padding_mask(mask, xp, weights["embed.W_T"].dtype)  # mask [n], or [B, n] for a batch
    Z = encoder(layer_weights, embeddings(weights, ids, segments, c, rec, xp), mask_add, c, rec, xp)
    pooled = pooler(weights, Z, rec, xp, pooler_activation(c)) if "pooler.W" in weights else None  # MaskedLM: none
    # the head's n x V logits cost about as much as the encoder: computed only when recorded or edited
    logits = mlm_head(weights, Z, c, rec, xp) if mlm and rec.needs("mlm.logits") else None
    if c.head is not None:
        task_head(weights, Z, pooled, c, rec, xp)
    return Z, pooled, logits
