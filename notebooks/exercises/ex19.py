"""Lesson 19 · Capstone, one encoder layer from the formula lines: the checkers.

19.1 runs the student's `my_layer(Z, W, l)` L times from `embed.ln`, as the model does, and compares every
intermediate it returns with the trace, key by key in the order of the formula lines (schema.STEPS). The
first key that differs is named, with what was done wrong where the lesson discusses that mistake (the
inputs of that line matched, so the checker rebuilds the known wrong versions from the trace's own values).
"""
import numpy as np
from scipy.special import erf

from bertviz_lite import analysis, schema
from course.checks import close, exercise
from exercises._common import f64, normalise, softmax

KEYS = tuple(dict.fromkeys(st.key for st in schema.STEPS if st.scope == "layer" and not st.optional))
ATOL, RTOL = 2e-4, 1e-4  # float64 arithmetic on float32 weights against the float32 trace, after 6 layers


def _split(x, n_h):
    n, H = x.shape
    return x.reshape(n, n_h, H // n_h).transpose(1, 0, 2)  # [n_h, n, d_k]


def _plain_split(x, n_h):
    """The wrong head split: [n, H] reshaped straight to [n_h, n, d_k], which cuts the token rows, not the columns."""
    n, H = x.shape
    return x.reshape(n_h, n, H // n_h)


SPLIT = ("you split the heads with a plain reshape to [n_h, n, d_k]: that cuts across the token rows; split each "
         "token's H columns into n_h groups of d_k ([n, n_h, d_k]), then move the head axis first")
PRE_LN = ("you normalised Z_(l-1) before attention (pre-LN, as GPT-2 does): BERT is post-LN, so Q, K and V read "
          "Z_(l-1) itself and the LayerNorm comes after the residual sum")


def reference_layer(Z, W, l, c, *, scale="d_k", probs_axis=-1, attn_residual=True, gelu="erf", ddof=0,
                    ffn_stream="attn.ln", split="columns", pre_ln=False):
    """One encoder layer from the formula lines, in float64, with one of the known mistakes switched on:
    the checker's model of what a student wrote (never shown to the student)."""
    p, n_h, eps = f"layer.{l}.", c.num_heads, c.layer_norm_eps
    w = {k[len(p):]: f64(v) for k, v in W.items() if k.startswith(p)}
    Z = f64(Z)

    def ln(x, name):
        return w[name + ".gamma"] * normalise(x, eps, ddof=ddof) + w[name + ".beta"]

    out = {}
    heads = _split if split == "columns" else _plain_split
    x_in = ln(Z, "attn.ln") if pre_ln else Z  # pre-LN normalises the layer's input first (the mistake)
    for key in ("q", "k", "v"):
        out[f"attn.{key}"] = heads(x_in @ w[f"attn.W_{key.upper()}"] + w[f"attn.b_{key.upper()}"], n_h)
    d = out["attn.q"].shape[-1]
    div = {"d_k": np.sqrt(d), "H": np.sqrt(c.hidden_size), "none": 1.0}[scale]
    out["attn.scores"] = out["attn.q"] @ out["attn.k"].transpose(0, 2, 1) / div
    out["attn.probs"] = softmax(out["attn.scores"], axis=probs_axis)
    out["attn.context"] = out["attn.probs"] @ out["attn.v"]
    out["attn.concat"] = out["attn.context"].transpose(1, 0, 2).reshape(len(Z), -1)
    out["attn.out"] = out["attn.concat"] @ w["attn.W_O"] + w["attn.b_O"]
    out["attn.resid"] = (Z if attn_residual else 0.0) + out["attn.out"]
    out["attn.ln"] = ln(out["attn.resid"], "attn.ln")
    out["ffn.up"] = out["attn.ln"] @ w["ffn.W_up"] + w["ffn.b_up"]
    x = out["ffn.up"]
    out["ffn.act"] = 0.5 * x * (1 + erf(x / np.sqrt(2))) if gelu == "erf" else \
        0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    out["ffn.down"] = out["ffn.act"] @ w["ffn.W_down"] + w["ffn.b_down"]
    out["ffn.resid"] = (out["attn.ln"] if ffn_stream == "attn.ln" else Z) + out["ffn.down"]
    out["ffn.ln"] = ln(out["ffn.resid"], "ffn.ln")
    return out


def _known(key, tr, l, W):
    """The known wrong versions of `key` in layer l, built from the trace's own inputs of that line."""
    c, eps = tr.config, tr.config.layer_norm_eps
    g = lambda k: f64(tr.get(k, layer=l))  # noqa: E731
    Z_in = f64(tr["embed.ln"] if l == 0 else tr.get("ffn.ln", layer=l - 1))
    p = f"layer.{l}."

    def ln(x, name, **kw):
        return f64(W[p + name + ".gamma"]) * normalise(x, eps, **kw) + f64(W[p + name + ".beta"])

    if key in ("attn.q", "attn.k", "attn.v"):
        X = key[-1].upper()
        Wx, bx = f64(W[p + f"attn.W_{X}"]), f64(W[p + f"attn.b_{X}"])
        return {SPLIT: _plain_split(Z_in @ Wx + bx, c.num_heads),
                PRE_LN: _split(ln(Z_in, "attn.ln") @ Wx + bx, c.num_heads),
                f"you left out the bias b^{X}: {key} = Z_(l-1) W^{X} + b^{X}": _split(Z_in @ Wx, c.num_heads),
                f"{key} is [n_h, n, d_k], split into heads: you left it [n, H]": Z_in @ Wx + bx}
    if key == "attn.context":
        A, V = g("attn.probs"), g("attn.v")
        return {"you used the maps transposed (A^T V): row i of A holds query i's weights":
                A.transpose(0, 2, 1) @ V,
                "you mixed the values with the scores, not the softmax probabilities": g("attn.scores") @ V}
    if key == "attn.out":
        cc, W_O = g("attn.concat"), f64(W[p + "attn.W_O"])
        return {"you left out the bias b^O: attn.out = concat W^O + b^O": cc @ W_O,
                "you used W^O transposed: it is stored [in, out], so concat @ W^O": cc @ W_O.T + f64(W[p + "attn.b_O"])}
    if key in ("ffn.up", "ffn.down"):
        x, Wx = (g("attn.ln"), f64(W[p + "ffn.W_up"])) if key == "ffn.up" else (g("ffn.act"), f64(W[p + "ffn.W_down"]))
        out = {f"you left out the bias of {key}: add its b after the product": x @ Wx}
        if key == "ffn.up":
            out["the feed-forward reads attn.ln (Z-bar), not the layer's input Z_(l-1)"] = \
                Z_in @ Wx + f64(W[p + "ffn.b_up"])
        return out
    if key == "attn.scores":
        QK = g("attn.q") @ g("attn.k").transpose(0, 2, 1)
        return {"you divided by sqrt(H), the model width: the scores use sqrt(d_k)": QK / np.sqrt(c.hidden_size),
                "you did not scale the scores: divide Q K^T by sqrt(d_k)": QK}
    if key == "attn.probs":
        return {"your softmax ran over the queries (axis -2): each query's row sums to 1":
                softmax(g("attn.scores"), -2)}
    if key == "attn.concat":
        ctx = g("attn.context")
        return {"you reshaped the heads without moving the token axis first": ctx.reshape(ctx.shape[1], -1)}
    if key == "attn.resid":
        return {"the residual is missing: attn.resid = Z_(l-1) + attn.out": g("attn.out")}
    if key == "attn.ln":
        return {"your LayerNorm used ddof=1 (divides by H - 1): LayerNorm divides by H":
                ln(g("attn.resid"), "attn.ln", ddof=1),
                "your LayerNorm normalised over the tokens (axis 0): it normalises each token over its features":
                    ln(g("attn.resid"), "attn.ln", axis=0)}
    if key == "ffn.act":
        x = g("ffn.up")
        return {"you used GELU's tanh approximation: BERT uses the exact erf form (lesson 07)":
                0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                "you used ReLU: BERT uses GELU (lesson 07)": np.maximum(x, 0.0)}
    if key == "ffn.resid":
        return {"wrong stream: the feed-forward's residual adds attn.ln (Z-bar), not the layer's input Z_(l-1)":
                Z_in + g("ffn.down"),
                "the residual is missing: ffn.resid = attn.ln + ffn.down": g("ffn.down")}
    if key == "ffn.ln":
        return {"your LayerNorm used ddof=1 (divides by H - 1): LayerNorm divides by H":
                ln(g("ffn.resid"), "ffn.ln", ddof=1)}
    return {}


def run_layers(answer, tr, W):
    """(ok, message, your Z_L or None): my_layer run L times from embed.ln, every key compared."""
    Z = f64(tr["embed.ln"])
    for l in range(tr.num_layers):
        try:
            out = answer(Z, W, l)
        except Exception as e:
            return False, f"my_layer(Z, W, {l}) raised {type(e).__name__}: {e}", None
        if not isinstance(out, dict):
            return False, (f"my_layer must return a dict of the intermediates keyed like the trace; "
                           f"got {type(out).__name__}"), None
        missing = [k for k in KEYS if k not in out or out[k] is Ellipsis]
        if missing:
            return False, (f"layer {l}: your dict lacks {missing[0]!r} (or it is still ...); it needs every key of "
                           f"{', '.join(KEYS)}"), None
        for i, key in enumerate(KEYS):
            ok, detail = close(out[key], tr.get(key, layer=l), atol=ATOL, rtol=RTOL)
            if not ok:
                before = f"; {KEYS[i - 1]} and every key before it matched" if i else ""
                for sentence, value in _known(key, tr, l, W).items():
                    if close(out[key], value, atol=1e-3, rtol=1e-3)[0]:
                        return False, f"layer {l}, {key}: {sentence}{before}", None
                return False, f"layer {l}, {key} is the first key that differs ({detail}){before}", None
        Z = f64(out["ffn.ln"])
    last = f"layer.{tr.num_layers - 1}.ffn.ln"
    ok, detail = close(Z, tr[last], atol=1e-4, rtol=0)
    if not ok:
        return False, f"{last}: {detail}", None
    return True, f"all {len(KEYS)} keys of all {tr.num_layers} layers match; {last} within 1e-4", Z


def _layer_mistakes(tr, weights):
    c = tr.config

    def wrong(**kw):
        return lambda Z, W, l: reference_layer(Z, W, l, c, **kw)

    return {"you divided by sqrt(H), the model width: the scores use sqrt(d_k)": wrong(scale="H"),
            "your softmax ran over the queries (axis -2): each query's row sums to 1": wrong(probs_axis=-2),
            "the residual is missing: attn.resid = Z_(l-1) + attn.out": wrong(attn_residual=False),
            "you used GELU's tanh approximation: BERT uses the exact erf form (lesson 07)": wrong(gelu="tanh"),
            "your LayerNorm used ddof=1 (divides by H - 1): LayerNorm divides by H": wrong(ddof=1),
            "wrong stream: the feed-forward's residual adds attn.ln (Z-bar), not the layer's input Z_(l-1)":
                wrong(ffn_stream="input"),
            SPLIT: wrong(split="plain"),
            PRE_LN: wrong(pre_ln=True),
            "you did not scale the scores: divide Q K^T by sqrt(d_k)": wrong(scale="none")}


@exercise("19.1", hint=("fill the dict line by line in the order of the formula lines; each line reads only lines "
                        "above it and the weights W[f'layer.{l}.…']; the shapes are in the table under The "
                        "formula lines",
                        "which key is the first that differs? look at its formula line: which axis, which scale, which "
                        "stream does it read, and what shape must come out of it (the table under The formula lines)?"),
          mistakes=_layer_mistakes)
def _(answer, *, tr, weights):
    if not callable(answer):
        return False, "my_layer must be a function my_layer(Z, W, l) that returns a dict of the intermediates"
    ok, message, _ = run_layers(answer, tr, weights)
    return ok, message


def _pool_mistakes(tr):
    Z = f64(tr.get("ffn.ln", layer=tr.num_layers - 1))
    return {"that is the [CLS] row: MiniLM's sentence vector is the mean over the tokens": Z[0],
            "you summed the rows: average them": Z.sum(0),
            "that is the mean of Z_0, your stack's input: pool its output, Z_L": f64(tr["embed.ln"]).mean(0),
            "you averaged over the features (axis -1): the sentence vector has H numbers, one per feature": Z.mean(-1),
            "that pools the second-last layer's output: Z_L is the output of the last my_layer call":
                f64(tr.get("ffn.ln", layer=tr.num_layers - 2)).mean(0)}


@exercise("19.2", hint=("the sentence vector of lesson 15: the mean of the last layer's token vectors (this sentence "
                        "has no [PAD])",
                        "which array is your Z_L (the output of your last my_layer call), and which of its two "
                        "axes, tokens or features, do you average over?"), mistakes=_pool_mistakes)
def _(answer, *, tr):
    return close(answer, analysis.sentence_embedding(tr), atol=1e-4)
