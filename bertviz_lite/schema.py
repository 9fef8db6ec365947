"""The forward pass as a table: one row per formula line, declared once.

Engine, trace, parameter ledger, widgets, lessons and tests all read this table.
Keys are where a tensor sits (`embed.*`, `layer.{l}.attn.*`, `layer.{l}.ffn.*`, `pooler.*`,
`mlm.*`); axes come from one vocabulary (`AXES`); `reads` names the weights a step
multiplies by, relative to its scope (see `bertviz_lite.weights` for the full names).
Notation follows the formula card in the seed facts (T, P, S, X, Z, Q, K, V, A), one symbol per
concept: `SYMBOLS` lists each with its meaning and the other names sources use for it.
"""

from __future__ import annotations

from dataclasses import dataclass

# one symbol per concept: what the lessons, views and notes write, what it means, and the other
# names the sources, papers and code use for the same thing (views label from this table)
@dataclass(frozen=True)
class Symbol:
    symbol: str  # as printed (Unicode); the latex form is in the formulas
    meaning: str
    also: tuple[str, ...] = ()  # other names in the sources, papers and code


SYMBOLS: tuple[Symbol, ...] = (
    Symbol("n", "tokens in the input ([CLS] ... [SEP], padding included)", ("seq_len", "T (some papers)")),
    Symbol("L", "encoder layers", ("num_hidden_layers", "N (Vaswani et al.)")),
    Symbol("H", "model width: the size of every token's vector", ("d", "d_model", "hidden_size")),
    Symbol("n_h", "attention heads per layer", ("A (BERT paper)", "h (Vaswani et al.)", "num_attention_heads")),
    Symbol("d_k", "head width: H / n_h, the size of one head's query, key and value",
           ("d_head", "d_q", "d_v", "head_size", "attention_head_size")),
    Symbol("d_ffnn", "feed-forward width (4H)", ("d_ff", "intermediate_size", "F")),
    Symbol("N_V", "wordpiece vocabulary size (V is the values)", ("V (some notes)", "vocab_size")),
    Symbol("T", "token embeddings: one row of W_T per input id", ("word embeddings", "inputs_embeds")),
    Symbol("P", "position embeddings: rows 0..n-1 of W_P", ("position_embeddings",)),
    Symbol("S", "segment embeddings: row 0 or 1 of W_S (sentence A or B)",
           ("token type embeddings", "token_type_embeddings")),
    Symbol("X", "input embeddings T + P + S", ("embeddings",)),
    Symbol("Z_l", "output of layer l (Z_0: the embeddings after their LayerNorm)", ("hidden_states[l]",)),
    Symbol("Q, K, V", "queries, keys, values of one head", ("query, key, value",)),
    Symbol("E", "attention scores Q K^T / sqrt(d_k) + M, before the softmax",
           ("S (some notes)", "scores", "attention logits", "energies")),
    Symbol("M", "the mask: -inf on [PAD] keys, 0 elsewhere", ("attention_mask (as 1/0)", "extended_attention_mask")),
    Symbol("A_{h,l}", "attention map of head h in layer l: softmax of each row of E",
           ("attention weights", "attention probs", "attentions")),
    Symbol("Z_h", "one head's output A V", ("context", "context_layer")),
    Symbol("Z̃", "the heads' outputs side by side (n x H)", ("concat",)),
    Symbol("W^O", "output projection of the attention block", ("attention.output.dense",)),
    Symbol("Z̄_l", "after attention, residual and LayerNorm", ("attention_output",)),
    Symbol("W^up, b^up", "feed-forward up projection, H -> d_ffnn (code: ffn.W_up, ffn.b_up)",
           ("W^ffnn, b^ffnn (the formula card)", "W_1, b_1 (Vaswani et al.)", "intermediate.dense")),
    Symbol("W^down, b^down", "feed-forward down projection, d_ffnn -> H (code: ffn.W_down, ffn.b_down)",
           ("W^out, b^out (the formula card)", "W_2, b_2 (Vaswani et al.)", "output.dense")),
    Symbol("Z^ffnn_l", "feed-forward hidden activations GELU(Z̄ W^up + b^up)", ("intermediate", "h")),
    Symbol("Z^out_l", "feed-forward output Z^ffnn W^down + b^down", ("output.dense (its result)",)),
    Symbol("p", "pooled [CLS] vector", ("pooler_output",)),
    Symbol("y", "masked-lm logits over the vocabulary", ("prediction_scores", "logits")),
    Symbol("E_dim", "embedding width E (= H in BERT; ALBERT and ELECTRA project E -> H)", ("embedding_size",)),
    Symbol("y_head", "a task head's logits: one score per label", ("logits", "start_logits, end_logits")),
)

# every axis name used by any trace tensor, with what its length is
AXES = {
    "batch": "B, inputs of a batched trace (model.trace_batch)",
    "layer": "L, encoder layers",
    "token": "n, input tokens ([CLS] ... [SEP], padding included)",
    "query": "n, the token that attends (row of an attention map)",
    "key": "n, the token attended to (column of an attention map)",
    "head": "n_h, attention heads",
    "hidden": "H, model width",
    "embed": "E, embedding width (H in BERT; ALBERT and ELECTRA project E -> H)",
    "label": "the task head's labels (config.json's id2label; start and end for question answering)",
    "head_dim": "d_k = H / n_h, head width",
    "ffn": "d_ffnn = 4H, feed-forward width",
    "vocab": "N_V, wordpiece vocabulary",
}


@dataclass(frozen=True)
class Step:
    """One line of the forward pass."""

    key: str  # name inside its scope, e.g. "attn.probs"
    symbol: str  # the lesson's symbol, e.g. "A_{h}" (see SYMBOLS)
    formula: str  # latex of the line
    axes: tuple[str, ...]  # named axes of the recorded tensor
    reads: tuple[str, ...] = ()  # weights the step reads (scope-relative names)
    scope: str = "model"  # "model" or "layer" (recorded once per layer as layer.{l}.key)
    note: str = ""  # one line: what it is, or where sources disagree ({H}, {d_k}, {sqrt_dk}... from the config)
    optional: str = ""  # "mlm" when only models with an mlm head record it
    tied: tuple[str, ...] = ()  # weights it also reads that another step owns (counted there, once)
    inputs: str = ""  # what goes in, with the config's sizes: {n} {H} {n_h} {d_k} {d_ffnn} {N_V} {N_P} {N_S}
    takes: tuple[str, ...] = ()  # the trace keys it computes from (same scope unless written in full)
    check: str = ""  # "layernorm" or "softmax": the step's own invariant, shown with its statistics


_LN = "LayerNorm over the rows of ({n} x {H}), \u03b3, \u03b2 ({H})"
_QKV = "({n} x {H})\u00b7({H} x {d_k}) + ({d_k}) per head"

STEPS: tuple[Step, ...] = (
    Step("embed.token", "T", r"T = W_T[I]", ("token", "embed"), ("embed.W_T",),
         note="token lookup: one row of the wordpiece table per input id",
         inputs="W_T ({N_V} x {H}) rows at the ids ({n})"),
    Step("embed.position", "P", r"P = W_P[o{:}o+n]", ("token", "embed"), ("embed.W_P",),
         note="learned position embeddings, rows o..o+n-1 (o = 0; RoBERTa: padding_idx + 1)", inputs="W_P ({N_P} x {H}) rows 0..n-1"),
    Step("embed.segment", "S", r"S = W_S[s]", ("token", "embed"), ("embed.W_S",),
         note="segment (token type) embeddings; missing on the formula card (DistilBERT has none: S = 0)",
         inputs="W_S ({N_S} x {H}) rows at the segment ids ({n})"),
    Step("embed.sum", "X", r"X = T + P + S", ("token", "embed"),
         note="input embeddings", inputs="({n} x {H}) + ({n} x {H}) + ({n} x {H})",
         takes=("embed.token", "embed.position", "embed.segment")),
    Step("embed.ln", "Z_0", r"Z_0 = \mathrm{LayerNorm}(X)", ("token", "embed"),
         ("embed.ln.gamma", "embed.ln.beta"), note="embedding layernorm; missing on the formula card",
         inputs=_LN.replace("{H}", "{E}"), takes=("embed.sum",), check="layernorm"),
    Step("embed.proj", "Z_0", r"Z_0 = \mathrm{LayerNorm}(X)\, W^E + b^E", ("token", "hidden"),
         ("embed.W_E", "embed.b_E"), note="ALBERT, ELECTRA: the E-wide embeddings projected to H",
         optional="proj", inputs="({n} x {E})\u00b7({E} x {H}) + ({H})", takes=("embed.ln",)),
    Step("attn.q", "Q", r"Q_{h} = Z_{l-1} W^Q_{h} + b^Q_{h}", ("head", "token", "head_dim"),
         ("attn.W_Q", "attn.b_Q"), "layer", note="queries, one n x d_k block per head", inputs=_QKV,
         takes=("Z_{l-1}",)),
    Step("attn.k", "K", r"K_{h} = Z_{l-1} W^K_{h} + b^K_{h}", ("head", "token", "head_dim"),
         ("attn.W_K", "attn.b_K"), "layer", note="keys", inputs=_QKV, takes=("Z_{l-1}",)),
    Step("attn.v", "V", r"V_{h} = Z_{l-1} W^V_{h} + b^V_{h}", ("head", "token", "head_dim"),
         ("attn.W_V", "attn.b_V"), "layer", note="values", inputs=_QKV, takes=("Z_{l-1}",)),
    Step("attn.scores", "E_{h}", r"E_{h} = Q_{h} K_{h}^\top / \sqrt{d_k} + M", ("head", "query", "key"),
         scope="layer", note="scaled scores; per head sqrt(d_k) = {sqrt_dk:g}, not sqrt(H) = {sqrt_H:.4g}; "
                             "M = -inf on [PAD] keys",
         inputs="({n} x {d_k})\u00b7({d_k} x {n}) / \u221a{d_k} per head", takes=("attn.q", "attn.k")),
    Step("attn.probs", "A_{h}", r"A_{h} = \mathrm{softmax}(E_{h})", ("head", "query", "key"),
         scope="layer", note="attention map: each row sums to 1",
         inputs="softmax over each row of ({n} x {n}) per head", takes=("attn.scores",), check="softmax"),
    Step("attn.context", "Z_{h}", r"Z_{h} = A_{h} V_{h}", ("head", "token", "head_dim"),
         scope="layer", note="head output", inputs="({n} x {n})\u00b7({n} x {d_k}) per head",
         takes=("attn.probs", "attn.v")),
    Step("attn.concat", r"\tilde Z", r"\tilde Z = [Z_{1}, \dots, Z_{n_h}]", ("token", "hidden"),
         scope="layer", note="heads side by side", inputs="{n_h} heads of ({n} x {d_k}) side by side",
         takes=("attn.context",)),
    Step("attn.out", r"\tilde Z W^O", r"\tilde Z W^O + b^O", ("token", "hidden"), ("attn.W_O", "attn.b_O"),
         "layer", note="output projection; missing on the formula card", inputs="({n} x {H})\u00b7({H} x {H}) + ({H})",
         takes=("attn.concat",)),
    Step("attn.resid", r"Z_{l-1} + \tilde Z W^O", r"Z_{l-1} + \tilde Z W^O + b^O", ("token", "hidden"),
         scope="layer", note="residual connection", inputs="({n} x {H}) + ({n} x {H})",
         takes=("Z_{l-1}", "attn.out")),
    Step("attn.ln", r"\bar Z_l", r"\bar Z_l = \mathrm{LayerNorm}(Z_{l-1} + \tilde Z W^O + b^O)",
         ("token", "hidden"), ("attn.ln.gamma", "attn.ln.beta"), "layer", note="post-ln: norm after the residual",
         inputs=_LN, takes=("attn.resid",), check="layernorm"),
    Step("ffn.up", r"\bar Z_l W^{up}", r"\bar Z_l W^{up} + b^{up}", ("token", "ffn"),
         ("ffn.W_up", "ffn.b_up"), "layer", note="feed-forward up: H -> 4H",
         inputs="({n} x {H})\u00b7({H} x {d_ffnn}) + ({d_ffnn})", takes=("attn.ln",)),
    Step("ffn.act", r"Z^{ffnn}_l", r"Z^{ffnn}_l = \mathrm{GELU}(\bar Z_l W^{up} + b^{up})", ("token", "ffn"),
         scope="layer", note="exact erf gelu (the card writes relu)", inputs="GELU of each entry of ({n} x {d_ffnn})",
         takes=("ffn.up",)),
    Step("ffn.down", r"Z^{out}_l", r"Z^{out}_l = Z^{ffnn}_l W^{down} + b^{down}", ("token", "hidden"),
         ("ffn.W_down", "ffn.b_down"), "layer", note="feed-forward down: 4H -> H",
         inputs="({n} x {d_ffnn})\u00b7({d_ffnn} x {H}) + ({H})", takes=("ffn.act",)),
    Step("ffn.resid", r"\bar Z_l + Z^{out}_l", r"\bar Z_l + Z^{out}_l", ("token", "hidden"),
         scope="layer", note="residual connection", inputs="({n} x {H}) + ({n} x {H})",
         takes=("attn.ln", "ffn.down")),
    Step("ffn.ln", r"Z_l", r"Z_l = \mathrm{LayerNorm}(\bar Z_l + Z^{out}_l)", ("token", "hidden"),
         ("ffn.ln.gamma", "ffn.ln.beta"), "layer", note="the layer's output", inputs=_LN,
         takes=("ffn.resid",), check="layernorm"),
    Step("pooler.out", "p", r"p = \tanh(Z_L[0,:]\,W^{final} + b)", ("hidden",), ("pooler.W", "pooler.b"),
         note="pooled [CLS] vector (the card omits the bias); DistilBERT's classifier uses relu, ELECTRA's gelu",
         inputs="tanh(({H})\u00b7({H} x {H}) + ({H})) on Z_L[0] ([CLS])", takes=("Z_L",)),
    Step("mlm.logits", "y", r"y = \mathrm{LN}(\mathrm{GELU}(Z_L W^t + b^t))\, W_T^\top + b^{mlm}",
         ("token", "vocab"), ("mlm.W_t", "mlm.b_t", "mlm.ln.gamma", "mlm.ln.beta", "mlm.bias", "mlm.W_out"),
         note="masked-lm logits; the output matrix is tied to W_T (untied checkpoints: their own W_out)",
         optional="mlm", tied=("embed.W_T",),
         inputs="LN(GELU(({n} x {H})\u00b7({H} x {E}) + ({E})))\u00b7({E} x {N_V}) + ({N_V})", takes=("Z_L",)),
    # the task heads: one formula line each, all recorded as head.logits (config.head picks the row)
    Step("head.logits", "y_head", r"y = p\, W^{cls} + b^{cls}", ("label",), ("head.W", "head.b"),
         note="sequence classification: one score per label from the pooled vector", optional="sequence_classification",
         inputs="({H})\u00b7({H} x {N_y}) + ({N_y})", takes=("pooler.out",)),
    Step("head.logits", "y_head", r"y = Z_L W^{cls} + b^{cls}", ("token", "label"), ("head.W", "head.b"),
         note="token classification: one score per label for every token", optional="token_classification",
         inputs="({n} x {H})\u00b7({H} x {N_y}) + ({N_y})", takes=("Z_L",)),
    Step("head.logits", "y_head", r"y = Z_L W^{qa} + b^{qa}", ("token", "label"), ("head.W", "head.b"),
         note="question answering: a start and an end score for every token", optional="question_answering",
         inputs="({n} x {H})\u00b7({H} x 2) + (2)", takes=("Z_L",)),
    Step("head.logits", "y_head", r"y = p\, W^{nsp} + b^{nsp}", ("label",), ("nsp.W", "nsp.b"),
         note="next sentence: is B the continuation of A (isNext) or a random sentence (notNext)?",
         optional="next_sentence", inputs="({H})\u00b7({H} x 2) + (2)", takes=("pooler.out",)),
    Step("head.logits", "y_head", r"y = \mathrm{GELU}(Z_L W^{d} + b^{d})\, w + b", ("token",),
         ("head.W_d", "head.b_d", "head.W", "head.b"),
         note="ELECTRA's discriminator: one score per token, > 0 means 'replaced'", optional="replaced_token",
         inputs="GELU(({n} x {H})\u00b7({H} x {H}) + ({H}))\u00b7({H}) + (1)", takes=("Z_L",)),
)

STEP_BY_KEY = {s.key: s for s in reversed(STEPS)}  # head.logits: its first row; step_of picks by config.head
HEAD_STEPS = {s.optional: s for s in STEPS if s.key == "head.logits"}
MODEL_STEPS = tuple(s for s in STEPS if s.scope == "model")
LAYER_STEPS = tuple(s for s in STEPS if s.scope == "layer")


def trace_keys(num_layers: int, mlm: bool = False, pooler: bool = True, *, proj: bool = False,
               head: str | None = None) -> list[str]:
    """Every trace key in forward order: embed.* (, embed.proj), layer.0.* ... layer.{L-1}.*, pooler.out
    (, mlm.logits) (, head.logits)."""
    keys = [s.key for s in STEPS if s.key.startswith("embed.") and (proj or s.optional != "proj")]
    for layer in range(num_layers):
        keys += [full_key(s.key, layer) for s in LAYER_STEPS]
    if pooler:
        keys.append("pooler.out")
    if mlm:
        keys.append("mlm.logits")
    if head:
        keys.append("head.logits")
    return keys


# keys are parsed and formatted here only: 'layer.{l}.' + a step inside the layer, or a model step
LAYER_PREFIX = "layer."


def layer_prefix(layer: int) -> str:
    """'layer.3.': what every key of layer 3 starts with (and what a layer's weights start with)."""
    return f"{LAYER_PREFIX}{layer}."


def full_key(step: str, layer: int | None = None) -> str:
    """('attn.probs', 3) -> 'layer.3.attn.probs'; ('embed.sum', None) -> 'embed.sum'."""
    return step if layer is None else layer_prefix(layer) + step


def model_keys(config, mlm: bool = False, pooler: bool = True) -> list[str]:
    """trace_keys for a config: its projection and task head included."""
    return trace_keys(config.num_layers, mlm, pooler, proj=config.embed_size != config.hidden_size,
                      head=config.head)


def split_key(key: str) -> tuple[int | None, str]:
    """'layer.3.attn.probs' -> (3, 'attn.probs'); 'embed.sum' -> (None, 'embed.sum'). Weight names
    parse the same way ('layer.3.attn.W_Q' -> (3, 'attn.W_Q'))."""
    if key.startswith(LAYER_PREFIX):
        _, layer, rest = key.split(".", 2)
        return int(layer), rest
    return None, key


def step_of(key: str, config=None) -> Step:
    """The Step row of a full trace key (head.logits: the row of config.head, the task head that ran)."""
    rel = split_key(key)[1]
    if rel == "head.logits" and getattr(config, "head", None):
        return HEAD_STEPS[config.head]
    return STEP_BY_KEY[rel]


def axis_sizes(config, n: int) -> dict[str, int]:
    """Length of every named axis for a config and n tokens."""
    return {
        "layer": config.num_layers, "token": n, "query": n, "key": n, "head": config.num_heads,
        "hidden": config.hidden_size, "head_dim": config.head_size, "ffn": config.ffn_size,
        "vocab": config.vocab_size, "embed": config.embed_size, "label": max(len(config.labels), 1),
    }


def shape_of(key: str, config, n: int) -> tuple[int, ...]:
    """The shape a trace key has for n tokens, from its declared axes."""
    sizes = axis_sizes(config, n)
    return tuple(sizes[a] for a in step_of(key, config).axes)


def sizes_for_text(config) -> dict:
    """The config's sizes under the symbols the step texts use ({H}, {n_h}, {d_k}, ...)."""
    import math
    return dict(n="n", H=config.hidden_size, n_h=config.num_heads, d_k=config.head_size, d_ffnn=config.ffn_size,
                N_V=config.vocab_size, N_P=config.max_positions, N_S=config.type_vocab_size, E=config.embed_size,
                N_y=len(config.labels),
                sqrt_dk=math.sqrt(config.head_size), sqrt_H=math.sqrt(config.hidden_size))


def inputs_text(key: str, config) -> str:
    """What goes into a step, with this config's sizes, e.g. '(n x 384)·(384 x 32) + (32) per head'."""
    return step_of(key, config).inputs.format(**sizes_for_text(config))


def note_text(key: str, config) -> str:
    """A step's note with this config's numbers (sqrt(d_k) of the loaded model, not BERT-base's)."""
    return step_of(key, config).note.format(**sizes_for_text(config))


def takes_keys(key: str, num_layers: int, proj: bool = False) -> list[str]:
    """The trace keys a step computes from, in full ('layer.2.attn.scores' -> layer.2.attn.q, layer.2.attn.k);
    Z_{l-1} is embed.ln for layer 0 (embed.proj where E -> H is projected), else the previous layer's ffn.ln;
    Z_L the last layer's ffn.ln."""
    layer, rel = split_key(key)
    out = []
    for t in STEP_BY_KEY[rel].takes:
        if t == "Z_{l-1}":
            out.append(("embed.proj" if proj else "embed.ln") if layer == 0 else full_key("ffn.ln", layer - 1))
        elif t == "Z_L":
            out.append(full_key("ffn.ln", num_layers - 1))
        elif layer is not None and STEP_BY_KEY[t].scope == "layer":
            out.append(full_key(t, layer))
        else:
            out.append(t)
    return out


_POOLER_ACTS = {"tanh": r"\tanh", "relu": r"\mathrm{ReLU}", "gelu": r"\mathrm{GELU}"}
_FFN_ACTS = {"gelu": r"\mathrm{GELU}", "gelu_tanh": r"\mathrm{GELU}_{\tanh}", "gelu_sigmoid": r"\mathrm{GELU}_{\sigma}",
             "relu": r"\mathrm{ReLU}"}


def formula_of(key: str, config) -> str:
    """The formula (latex) a config runs for a trace key: the step's own, with the config's position
    offset, segment table, pooler and feed-forward activations written in (BERT: P = W_P[0:n])."""
    c = config
    layer, rel = split_key(key)
    f = step_of(key, c).formula
    if rel == "embed.position":
        o = c.position_offset
        f = r"P = W_P[0{:}n]" if o == 0 else rf"P = W_P[{o}{{:}}{o}+n]"
    elif rel == "embed.segment" and c.type_vocab_size == 0:
        f = r"S = 0"  # no segment table
    elif rel == "pooler.out":
        f = f.replace(r"\tanh", _POOLER_ACTS[c.pooler_act])
    elif rel in ("ffn.act", "head.logits", "mlm.logits"):
        f = f.replace(r"\mathrm{GELU}", _FFN_ACTS[c.activation])
    return f


def forward_lines(config, mlm: bool = False, pooler: bool = True) -> list[str]:
    """The formula lines a config runs (latex), the layer's lines once: what a family changes shows as
    a diff of these against BERT's (the switches are each family's record in families.py)."""
    c, lines = config, []
    for key in model_keys(c, mlm=mlm, pooler=pooler):
        layer, rel = split_key(key)
        if layer not in (None, 0):
            continue
        if rel == "attn.q":  # which weights the layers read: their own, or ALBERT's one shared layer
            lines.append(r"\mathrm{layer}\ l\ \mathrm{reads}\ W_{%s}\ (l = 1 \dots %d%s)" % (
                "1" if c.shared_layers else "l", c.num_layers, r",\ \mathrm{shared}" if c.shared_layers else ""))
        lines.append(formula_of(key, c))
    return lines
