"""The forward pass as a table: one row per formula line, declared once.

Engine, trace, parameter ledger, widgets, lessons and tests all read this table.
Keys are where a tensor sits (`embed.*`, `layer.{l}.attn.*`, `layer.{l}.ffn.*`, `pooler.*`,
`mlm.*`); axes come from one vocabulary (`AXES`); `reads` names the weights a step
multiplies by, relative to its scope (see `bertviz_lite.weights` for the full names).
Notation follows the formula card in the seed facts (T, P, S, X, Z, Q, K, V, A).
"""

from __future__ import annotations

from dataclasses import dataclass

# every axis name used by any trace tensor, with what its length is
AXES = {
    "layer": "L, encoder layers",
    "token": "n, input tokens ([CLS] ... [SEP], padding included)",
    "query": "n, the token that attends (row of an attention map)",
    "key": "n, the token attended to (column of an attention map)",
    "head": "A, attention heads",
    "hidden": "H = d, model width",
    "head_dim": "d_head = H / A",
    "ffn": "d_ffnn = 4H, feed-forward width",
    "vocab": "V, wordpiece vocabulary",
}


@dataclass(frozen=True)
class Step:
    """One line of the forward pass."""

    key: str  # name inside its scope, e.g. "attn.probs"
    symbol: str  # the lesson's symbol, e.g. "A_{h,l}"
    formula: str  # latex of the line
    axes: tuple[str, ...]  # named axes of the recorded tensor
    reads: tuple[str, ...] = ()  # weights the step reads (scope-relative names)
    scope: str = "model"  # "model" or "layer" (recorded once per layer as layer.{l}.key)
    note: str = ""  # one line: what it is, or where sources disagree
    optional: str = ""  # "mlm" when only models with an mlm head record it
    tied: tuple[str, ...] = ()  # weights it also reads that another step owns (counted there, once)


STEPS: tuple[Step, ...] = (
    Step("embed.token", "T", r"T = W_T[I]", ("token", "hidden"), ("embed.W_T",),
         note="token lookup: one row of the wordpiece table per input id"),
    Step("embed.position", "P", r"P = W_P[0{:}n]", ("token", "hidden"), ("embed.W_P",),
         note="learned position embeddings, rows 0..n-1"),
    Step("embed.segment", "S", r"S = W_S[s]", ("token", "hidden"), ("embed.W_S",),
         note="segment (token type) embeddings; missing on the formula card"),
    Step("embed.sum", "X", r"X = T + P + S", ("token", "hidden"),
         note="input embeddings"),
    Step("embed.ln", "Z_0", r"Z_0 = \mathrm{LayerNorm}(X)", ("token", "hidden"),
         ("embed.ln.gamma", "embed.ln.beta"), note="embedding layernorm; missing on the formula card"),
    Step("attn.q", "Q", r"Q_{h} = Z_{l-1} W^Q_{h} + b^Q_{h}", ("head", "token", "head_dim"),
         ("attn.W_Q", "attn.b_Q"), "layer", note="queries, one n x d_head block per head"),
    Step("attn.k", "K", r"K_{h} = Z_{l-1} W^K_{h} + b^K_{h}", ("head", "token", "head_dim"),
         ("attn.W_K", "attn.b_K"), "layer", note="keys"),
    Step("attn.v", "V", r"V_{h} = Z_{l-1} W^V_{h} + b^V_{h}", ("head", "token", "head_dim"),
         ("attn.W_V", "attn.b_V"), "layer", note="values"),
    Step("attn.scores", "S_{h}", r"S_{h} = Q_{h} K_{h}^\top / \sqrt{d_k} + M", ("head", "query", "key"),
         scope="layer", note="scaled scores; sqrt(d_k) = 8 per head, not sqrt(768); M = -inf on [PAD] keys"),
    Step("attn.probs", "A_{h}", r"A_{h} = \mathrm{softmax}(S_{h})", ("head", "query", "key"),
         scope="layer", note="attention map: each row sums to 1"),
    Step("attn.context", "Z_{h}", r"Z_{h} = A_{h} V_{h}", ("head", "token", "head_dim"),
         scope="layer", note="head output"),
    Step("attn.concat", r"\tilde Z", r"\tilde Z = [Z_{1}, \dots, Z_{A}]", ("token", "hidden"),
         scope="layer", note="heads side by side"),
    Step("attn.out", r"\tilde Z W^O", r"\tilde Z W^O + b^O", ("token", "hidden"), ("attn.W_O", "attn.b_O"),
         "layer", note="output projection; missing on the formula card"),
    Step("attn.resid", r"Z_{l-1} + \tilde Z W^O", r"Z_{l-1} + \tilde Z W^O + b^O", ("token", "hidden"),
         scope="layer", note="residual connection"),
    Step("attn.ln", r"\bar Z_l", r"\bar Z_l = \mathrm{LayerNorm}(Z_{l-1} + \tilde Z W^O + b^O)",
         ("token", "hidden"), ("attn.ln.gamma", "attn.ln.beta"), "layer", note="post-ln: norm after the residual"),
    Step("ffn.up", r"\bar Z_l W^{up}", r"\bar Z_l W^{up} + b^{up}", ("token", "ffn"),
         ("ffn.W_up", "ffn.b_up"), "layer", note="feed-forward up: H -> 4H"),
    Step("ffn.act", r"Z^{ffnn}_l", r"Z^{ffnn}_l = \mathrm{GELU}(\bar Z_l W^{up} + b^{up})", ("token", "ffn"),
         scope="layer", note="exact erf gelu (the card writes relu)"),
    Step("ffn.down", r"Z^{out}_l", r"Z^{out}_l = Z^{ffnn}_l W^{down} + b^{down}", ("token", "hidden"),
         ("ffn.W_down", "ffn.b_down"), "layer", note="feed-forward down: 4H -> H"),
    Step("ffn.resid", r"\bar Z_l + Z^{out}_l", r"\bar Z_l + Z^{out}_l", ("token", "hidden"),
         scope="layer", note="residual connection"),
    Step("ffn.ln", r"Z_l", r"Z_l = \mathrm{LayerNorm}(\bar Z_l + Z^{out}_l)", ("token", "hidden"),
         ("ffn.ln.gamma", "ffn.ln.beta"), "layer", note="the layer's output"),
    Step("pooler.out", "p", r"p = \tanh(W^{final} Z_L[0,:] + b)", ("hidden",), ("pooler.W", "pooler.b"),
         note="pooled [CLS] vector (the card omits the bias)"),
    Step("mlm.logits", "y", r"y = \mathrm{LN}(\mathrm{GELU}(Z_L W^t + b^t))\, W_T^\top + b^{mlm}",
         ("token", "vocab"), ("mlm.W_t", "mlm.b_t", "mlm.ln.gamma", "mlm.ln.beta", "mlm.bias", "mlm.W_out"),
         note="masked-lm logits; the output matrix is tied to W_T (untied checkpoints: their own W_out)",
         optional="mlm", tied=("embed.W_T",)),
)

STEP_BY_KEY = {s.key: s for s in STEPS}
MODEL_STEPS = tuple(s for s in STEPS if s.scope == "model")
LAYER_STEPS = tuple(s for s in STEPS if s.scope == "layer")


def trace_keys(num_layers: int, mlm: bool = False, pooler: bool = True) -> list[str]:
    """Every trace key in forward order: embed.*, layer.0.* ... layer.{L-1}.*, pooler.out (, mlm.logits)."""
    keys = [s.key for s in STEPS if s.key.startswith("embed.")]
    for layer in range(num_layers):
        keys += [f"layer.{layer}.{s.key}" for s in LAYER_STEPS]
    if pooler:
        keys.append("pooler.out")
    if mlm:
        keys.append("mlm.logits")
    return keys


def split_key(key: str) -> tuple[int | None, str]:
    """'layer.3.attn.probs' -> (3, 'attn.probs'); 'embed.sum' -> (None, 'embed.sum')."""
    if key.startswith("layer."):
        _, layer, rest = key.split(".", 2)
        return int(layer), rest
    return None, key


def step_of(key: str) -> Step:
    """The Step row of a full trace key."""
    return STEP_BY_KEY[split_key(key)[1]]


def owner_of(weight: str) -> str:
    """The model-scope step that owns (and counts) a weight, e.g. 'embed.W_T' -> 'embed.token'."""
    return next(s.key for s in MODEL_STEPS if weight in s.reads)


def axis_sizes(config, n: int) -> dict[str, int]:
    """Length of every named axis for a config and n tokens."""
    return {
        "layer": config.num_layers, "token": n, "query": n, "key": n, "head": config.num_heads,
        "hidden": config.hidden_size, "head_dim": config.head_size, "ffn": config.ffn_size,
        "vocab": config.vocab_size,
    }


def shape_of(key: str, config, n: int) -> tuple[int, ...]:
    """The shape a trace key has for n tokens, from its declared axes."""
    sizes = axis_sizes(config, n)
    return tuple(sizes[a] for a in step_of(key).axes)
