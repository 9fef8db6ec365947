"""Try the course's checkers with wrong answers a student would give, and count the rejections that name the mistake.

    PYTHONPATH=$PWD .venv/bin/python scripts/try_wrong_answers.py 04 05      # lessons 04 and 05
    PYTHONPATH=$PWD .venv/bin/python scripts/try_wrong_answers.py            # every lesson with a table here

Each lesson runs with its solutions filled in (as tests/course/test_lessons.py's replay does); then every exercise's
checker is given the wrong answers of `TABLE` below, written here as a student would write them (not read from
the checkers' own `mistakes=`). A rejection counts as *named* when its message is not a bare measurement
("3 of 8 values differ", "off by 0.2", "shape ... but expected", "'x' is not it", "item 2 differs", "the first key
that differs") and, where the table gives a word, that word is in the message. An accepted wrong answer is listed.
Lesson 11's answers are functions (a backward, an optimiser's step, a training loop), written out below as a student
would write them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERIC = re.compile(r"values differ|^off by|is not it$|item \d+ differs|some entries differ|^shape \(.*but expected|"
                     r"is the first key that differs|^\d+ items but expected|outside|not yet", re.I)


def _tables():
    """{exercise id: f(call) -> [(what the student did, wrong answer, a word the message must hold or None)]}."""
    import numpy as np
    from scipy.special import erf

    sys.path.insert(0, str(ROOT / "notebooks"))
    from exercises._common import f64 as f, gain_bias as fit, normalise, softmax  # the checkers' float64 helpers

    def g(tr, key, **kw):
        return f(tr.get(key, **kw))

    def ln(x, gamma=1.0, beta=0.0, eps=1e-12, axis=-1, ddof=0):
        return gamma * normalise(x, eps, axis=axis, ddof=ddof) + beta

    gelu = lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))  # noqa: E731
    tanh_gelu = lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))  # noqa: E731
    T = {}

    def t00_1(c):
        return [("the pronoun itself", "it", "it"), ("the token with the most weight in most heads", "[SEP]", None),
                ("a number", 3, "text")]

    def t00_2(c):
        tr, l, h = c.context["tr"], c.context["layer"], c.context["head"]
        A, sep = g(tr, "attn.probs", layer=l, head=h), tr.tokens.index("[SEP]")
        return [("summed the column", A[:, sep].sum(), "sum"), ("[SEP]'s row", A[sep].mean(), "row"),
                ("the [CLS] column", A[:, 0].mean(), "CLS"), ("the column's max", A[:, sep].max(), "larg"),
                ("the last column ([SEP] is last) of the wrong head", g(tr, "attn.probs", layer=l, head=(h + 1) % 12)[:, sep].mean(), "head")]

    def t00_3(c):
        tr, l, h = c.context["tr"], c.context["layer"], c.context["head"]
        A = g(tr, "attn.probs", layer=l, head=h)
        plogp = A * np.log(np.where(A > 0, A, 1.0))
        return [("no minus sign", plogp.sum(-1).mean(), "minus"), ("summed rows", -plogp.sum(), "sum"),
                ("log2", -(A * np.log2(np.where(A > 0, A, 1.0))).sum(-1).mean(), "base 2"),
                ("mean over keys", -plogp.mean(), "keys"), ("entropy of every head's mean", -plogp.sum(-1).max(), "mean")]

    def t01_1(c):
        tr = c.context["tr"]
        n, s = tr.n, list(tr.tokens).index("[SEP]")
        return [("first [SEP] in B", [0] * s + [1] * (n - s), "first [SEP]"),
                ("closing [SEP] in A", [0] * (s + 1) + [1] * (n - s - 2) + [0], "closing"),
                ("all zeros", [0] * n, "segment 1"), ("1 and 2", [1] * (s + 1) + [2] * (n - s - 1), "from 0"),
                ("one short", [0] * (s + 1) + [1] * (n - s - 2), "closing"),
                ("booleans", [False] * (s + 1) + [True] * (n - s - 1), None)]

    def t01_2(c):
        keep = np.array(c.context["tr"].mask) == 1
        return [("-1e9", np.where(keep, 0.0, -1e9), "1e9"), ("-1e4", np.where(keep, 0.0, -1e4), "1e4"),
                ("inverted", np.where(keep, -np.inf, 0.0), "other way"), ("0/1 mask", keep.astype(float), "0/1"),
                ("-1 for pad", np.where(keep, 0.0, -1.0), "-inf"),
                ("an [n, n] mask", np.broadcast_to(np.where(keep, 0.0, -np.inf), (len(keep), len(keep))), "row")]

    def t01_3(c):
        return [("a word printed in Run", (c.context.get("shown") or ["playing"])[0], "printed"),
                ("hyphenated", "well-to-do", "punctuation"), ("two words", "new york", "one word"),
                ("a short word", "cat", "piece")]

    def t02_1(c):
        tr, W = c.context["tr"], c.context["weights"]
        T_, P, S = (g(tr, k) for k in ("embed.token", "embed.position", "embed.segment"))
        W_P, W_S = f(W["embed.W_P"]), f(W["embed.W_S"])
        return [("no S", T_ + P, " S"), ("no P", T_ + S, "position"), ("no T", P + S, "token"),
                ("positions from 1", T_ + W_P[1:tr.n + 1] + S, "off by one"), ("segment 0 for all", T_ + P + W_S[0], "W_S"),
                ("LayerNorm'd", g(tr, "embed.ln"), "LayerNorm"), ("T + P + S with S[1] for all", T_ + P + W_S[1], "W_S")]

    def t02_2(c):
        tr = c.context["tr"]
        X, eps = g(tr, "embed.sum"), tr.config.layer_norm_eps
        gam, bet = fit(X, g(tr, "embed.ln"), eps)
        return [("x_hat", ln(X, eps=eps), "gamma"), ("over tokens", ln(X, gam, bet, eps, axis=0), "axis 0"),
                ("ddof=1", ln(X, gam, bet, eps, ddof=1), "ddof"),
                ("divided by var", gam * (X - X.mean(-1, keepdims=True)) / (X.var(-1, keepdims=True) + eps) + bet, "variance"),
                ("no eps and beta first", (ln(X, eps=eps) + bet) * gam, "beta"),
                ("std not sqrt(var+eps), no mean subtraction", gam * X / np.sqrt(X.var(-1, keepdims=True) + eps) + bet, "mean")]

    def t02_4(c):
        return [("no LN", lambda c: (c.vocab_size + c.max_positions + c.type_vocab_size) * c.hidden_size, "LayerNorm"),
                ("no W_S", lambda c: (c.vocab_size + c.max_positions) * c.hidden_size + 2 * c.hidden_size, "segment"),
                ("LN as H", lambda c: (c.vocab_size + c.max_positions + c.type_vocab_size + 1) * c.hidden_size, "2 H"),
                ("typed number", lambda c: 23837184, "typed"),
                ("two segments hard-coded", lambda c: (c.vocab_size + c.max_positions + 2 + 2) * c.hidden_size, "type_vocab")]

    def t03_1(c):
        def pe(n=64, d=16, swap=False, half=False, start=0, blocks=False, base=10000):
            i2 = np.arange(0, d, 2) if not half else np.arange(d // 2)
            a = np.arange(start, start + n)[:, None] / base ** (i2[None, :] / d)
            s_, c_ = (np.cos(a), np.sin(a)) if swap else (np.sin(a), np.cos(a))
            if blocks:
                return np.concatenate([s_, c_], 1)
            out = np.zeros((n, d))
            out[:, 0::2], out[:, 1::2] = s_, c_
            return out
        return [("swapped", pe(swap=True), "swapped"), ("i not 2i", pe(half=True), "2i"), ("from 1", pe(start=1), "start"),
                ("blocks", pe(blocks=True), "interleave"), ("multiplied, not divided", np.sin(np.arange(64)[:, None] * 10000 ** (np.arange(16)[None, :] / 16)), None),
                ("sin only", np.sin(np.arange(64)[:, None] / 10000 ** ((np.arange(16) // 2 * 2)[None, :] / 16)), "cos")]

    def t03_2(c):
        W_P = f(c.context["W_P"])
        U = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
        C, D = U @ U.T, W_P @ W_P.T
        dg = lambda M, ks, fn=np.mean: np.array([fn(np.diagonal(M, offset=k)) for k in ks])  # noqa: E731
        return [("dot products", dg(D, range(1, 33)), "dot"), ("k from 0", dg(C, range(0, 32)), "offset"),
                ("summed", dg(C, range(1, 33), np.sum), "summed"), ("k = 1..31", dg(C, range(1, 32)), "32"),
                ("normalised columns", dg((W_P / np.linalg.norm(W_P, axis=0)).dot((W_P / np.linalg.norm(W_P, axis=0)).T), range(1, 33)), "columns")]

    def t04_1(c):
        a = c.context["actual"]
        return [("sqrt(64)", 8.0, "8"), ("1", 1.0, None), ("sqrt(768)/8", 1 / a if a else 3.0, None)]

    def t04_2(c):
        tr, l, h = c.context["tr"], c.context["layer"], c.context["head"]
        Q, K = g(tr, "attn.q", layer=l, head=h), g(tr, "attn.k", layer=l, head=h)
        d = Q.shape[-1]
        return [("BERT-base's sqrt(64) = 8", Q @ K.T / 8, "8"), ("sqrt(H)", Q @ K.T / np.sqrt(tr.config.hidden_size), "sqrt(H)"),
                ("no scale", Q @ K.T, "scale"), ("K Q^T", K @ Q.T / np.sqrt(d), "K Q^T"), ("/ d_k", Q @ K.T / d, "square root"),
                ("softmaxed", softmax(Q @ K.T / np.sqrt(d)), "softmax"), ("Q^T K", Q.T @ K / np.sqrt(d), "Q^T K")]

    def t04_3(c):
        tr, l, h = c.context["tr"], c.context["layer"], c.context["head"]
        A, V, S = (g(tr, k, layer=l, head=h) for k in ("attn.probs", "attn.v", "attn.scores"))
        e = np.exp(S - S.max(-1, keepdims=True))
        return [("A^T V", A.T @ V, "transposed"), ("scores", S @ V, "scores"), ("softmax axis 0", softmax(S, 0) @ V, "axis 0"),
                ("K not V", A @ g(tr, "attn.k", layer=l, head=h), "value"), ("exp without normalising", np.exp(S) @ V, "normalis"),
                ("exp, shifted, unnormalised", e @ V, "normalis"), ("V A", None, None)]

    def t04_4(c):
        return [("text", "3, 1", "whole numbers"), ("out of range", (99, 0), "layer must"), ("a head index alone", 7, None)]

    def t05_1(c):
        tr, l = c.context["tr"], c.context["layer"]
        Zh = g(tr, "attn.context", layer=l)
        nh, n, d = Zh.shape
        return [("reshape without transpose", Zh.reshape(n, nh * d), "token axis"), ("stacked rows", Zh.reshape(nh * n, d), "rows"),
                ("summed heads", Zh.sum(0), "added"), ("[n, heads, d_k]", Zh.transpose(1, 0, 2), "flatten"),
                ("mean of heads", Zh.mean(0), "averaged"), ("concatenate along the tokens", np.concatenate(list(Zh), 0), "rows"),
                ("transposed then flattened wrong way", Zh.transpose(1, 2, 0).reshape(n, nh * d), "interleaves")]

    def t05_2(c):
        tr, l, W = c.context["tr"], c.context["layer"], c.context["weights"]
        Zh = g(tr, "attn.context", layer=l)
        W_O, b_O = f(W[f"layer.{l}.attn.W_O"]), f(W[f"layer.{l}.attn.b_O"])
        d = Zh.shape[-1]
        return [("W_O.T", lambda h: Zh[h] @ W_O.T[h * d:(h + 1) * d], "transposed"),
                ("bias in each part", lambda h: Zh[h] @ W_O[h * d:(h + 1) * d] + b_O, "bias"),
                ("columns of W_O", lambda h: Zh[h] @ W_O[:, h * d:(h + 1) * d], "rows"),
                ("whole concat", lambda h: np.concatenate(list(Zh), -1) @ W_O, "whole"),
                ("a number", 3, "function"), ("rows of the next head", lambda h: Zh[h] @ W_O[(h + 1) % Zh.shape[0] * d:((h + 1) % Zh.shape[0] + 1) * d], "rows")]

    def t06_1(c):
        tr, l = c.context["tr"], c.context["layer"]
        x, eps = g(tr, "attn.resid", layer=l), tr.config.layer_norm_eps
        gam, bet = fit(x, g(tr, "attn.ln", layer=l), eps)
        return [("x_hat", ln(x, eps=eps), "gamma"), ("axis 0", ln(x, gam, bet, eps, axis=0), "axis 0"),
                ("ddof 1", ln(x, gam, bet, eps, ddof=1), "ddof"),
                ("/ var", gam * (x - x.mean(-1, keepdims=True)) / (x.var(-1, keepdims=True) + eps) + bet, "variance"),
                ("LN of attn.out (no residual)", ln(g(tr, "attn.out", layer=l), gam, bet, eps), "residual"),
                ("LN of the layer input + attn.out with the wrong gamma", ln(x, eps=eps) * gam, "beta")]

    def t06_2(c):
        tr, l = c.context["tr"], c.context["layer"]
        x, z, eps = g(tr, "attn.resid", layer=l), g(tr, "attn.ln", layer=l), tr.config.layer_norm_eps
        gam, bet = fit(x, z, eps)
        return [("* gamma", (z - bet) * gam, "multipl"), ("divide first", z / gam - bet, "first"), ("z itself", z, "output"),
                ("normalise z", ln(z, eps=eps), "normalis"), ("only beta off", z - bet, "gamma"), ("only / gamma", z / gam, "beta")]

    def t07_1(c):
        tr, l = c.context["tr"], c.context["layer"]
        x = g(tr, "ffn.up", layer=l)
        return [("relu", np.maximum(x, 0), "ReLU"), ("tanh", tanh_gelu(x), "tanh"), ("sigmoid", x / (1 + np.exp(-1.702 * x)), "sigmoid"),
                ("Phi only", 0.5 * (1 + erf(x / np.sqrt(2))), "Phi"), ("erf(x/2)", 0.5 * x * (1 + erf(x / 2)), "2"),
                ("no 0.5", x * (1 + erf(x / np.sqrt(2))), "1/2"), ("GELU of ffn.act", gelu(g(tr, "ffn.act", layer=l)), "ffn.up")]

    def t07_3(c):
        tr, l = c.context["tr"], c.context["layer"]
        eps = tr.config.layer_norm_eps
        down, res = g(tr, "ffn.down", layer=l), g(tr, "ffn.resid", layer=l)
        gam, bet = fit(res, g(tr, "ffn.ln", layer=l), eps)
        zin = g(tr, "embed.ln") if l == 0 else g(tr, "ffn.ln", layer=l - 1)
        ga, ba = fit(g(tr, "attn.resid", layer=l), g(tr, "attn.ln", layer=l), eps)
        return [("no residual", ln(down, gam, bet, eps), "residual"), ("wrong stream", ln(zin + down, gam, bet, eps), "stream"),
                ("no LN", res, "LayerNorm"), ("x_hat", ln(res, eps=eps), "gamma"),
                ("attn.ln's gamma and beta", ln(res, ga, ba, eps), "attn.ln's"), ("ddof 1", ln(res, gam, bet, eps, ddof=1), "ddof")]

    def t08_1(c):
        tr, t = c.context["tr"], c.context["t"]
        z0, zL, X = g(tr, "embed.ln")[t], g(tr, "ffn.ln", layer=tr.num_layers - 1)[t], g(tr, "embed.sum")[t]
        cos = z0 @ zL / np.linalg.norm(z0) / np.linalg.norm(zL)
        zp = g(tr, "ffn.ln", layer=tr.num_layers - 2)[t]
        return [("dot", z0 @ zL, "dot"), ("angle", np.arccos(cos), "angle"), ("X", X @ zL / np.linalg.norm(X) / np.linalg.norm(zL), "embed.ln"),
                ("squared lengths", z0 @ zL / (z0 @ z0) / (zL @ zL), "squared"),
                ("the second-last layer", z0 @ zp / np.linalg.norm(z0) / np.linalg.norm(zp), "last layer"),
                ("1 - cos", 1 - cos, "distance")]

    def t08_2(c):
        tr = c.context["tr"]
        Z = g(tr, "ffn.ln", layer=tr.num_layers - 1)
        U = Z / np.linalg.norm(Z, axis=1, keepdims=True)
        n, S, D = len(U), U @ U.T, Z @ Z.T
        return [("diag in", S.mean(), "diagonal"), ("n*n", (S.sum() - np.trace(S)) / (n * n), "n * (n - 1)"),
                ("dots", (D.sum() - np.trace(D)) / (n * (n - 1)), "dot"), ("upper triangle sum", np.triu(S, 1).sum(), None),
                ("layer 0 output", None, None)]

    def t08_3(c):
        a = int(c.answer)
        return [("0-based index", a - 1, "1"), ("text", str(a), "text")]

    def t09_1(c):
        return [("L layers", lambda V, H, L, F, P: (V + P + 2) * H + 2 * H + L * (4 * (H * H + H) + 2 * H * F + F + H + 4 * H) + H * H + H, "separate"),
                ("no pooler", lambda V, H, L, F, P: (V + P + 2) * H + 2 * H + 4 * (H * H + H) + 2 * H * F + F + H + 4 * H, "pooler"),
                ("no biases in the layer", lambda V, H, L, F, P: (V + P + 2) * H + 2 * H + 4 * H * H + 2 * H * F + 4 * H + H * H + H, "bias"),
                ("one LayerNorm per layer", lambda V, H, L, F, P: (V + P + 2) * H + 2 * H + 4 * (H * H + H) + 2 * H * F + F + H + 2 * H + H * H + H, "LayerNorm"),
                ("typed", lambda V, H, L, F, P: 31000000, "typed")]

    def t09_2(c):
        return [("no pooler bias", lambda L, H, F: L * (5 * H + F), "pooler"), ("b_up as H", lambda L, H, F: L * 6 * H + H, "b^up"),
                ("one layer", lambda L, H, F: 5 * H + F + H, "each of the L"),
                ("with LayerNorm betas", lambda L, H, F: L * (5 * H + F) + H + (2 * L + 1) * H, "beta"),
                ("three attention biases", lambda L, H, F: L * (3 * H + F + H) + H, "four")]

    def t09_3(c):
        return [("the count", 335141888, "millions"), ("the paper's 340", 340, "340"), ("text", "335", "text")]

    def t10_1(c):
        tr, m = c.context["tr"], c.context["model"]
        Z = g(tr, f"layer.{m.config.num_layers - 1}.ffn.ln")
        W, b = f(m.weights["pooler.W"]), f(m.weights["pooler.b"])
        return [("no b", np.tanh(Z[0] @ W), "bias"), ("W.T", np.tanh(Z[0] @ W.T + b), "transposed"), ("no tanh", Z[0] @ W + b, "tanh"),
                ("mean pool", np.tanh(Z.mean(0) @ W + b), "mean"), ("last row", np.tanh(Z[-1] @ W + b), "[CLS]"),
                ("every row", np.tanh(Z @ W + b), "one row")]

    def t10_2(c):
        tr, mi, model = c.context["tr"], c.context["m"], c.context["model"]
        w = {k: f(v) for k, v in model.weights.items() if k.startswith("mlm.") or k == "embed.W_T"}
        z = g(tr, f"layer.{model.config.num_layers - 1}.ffn.ln")[mi]
        eps = model.config.layer_norm_eps

        def head(act=gelu, bias=True, norm=True, order="act-ln", row=z):
            x = row @ w["mlm.W_t"] + w["mlm.b_t"]
            n_ = lambda v: ln(v, w["mlm.ln.gamma"], w["mlm.ln.beta"], eps)  # noqa: E731
            x = n_(act(x)) if order == "act-ln" and norm else (act(n_(x)) if norm else act(x))
            return x @ w["embed.W_T"].T + (w["mlm.bias"] if bias else 0.0)
        return [("no bias", head(bias=False), "bias"), ("tanh", head(act=tanh_gelu), "tanh"), ("relu", head(act=lambda x: np.maximum(x, 0)), "ReLU"),
                ("no LN", head(norm=False), "LayerNorm"), ("LN before GELU", head(order="ln-act"), "before"),
                ("row m of Z_L... the [CLS] row", head(row=g(tr, f"layer.{model.config.num_layers - 1}.ffn.ln")[0]), "row"),
                ("softmaxed", softmax(head()), "softmax")]

    def t10_3(c):
        return [("two", 2, None), ("text", "1", "text")]

    # lesson 11: function answers, written as a student would (numpy, erf and the package's backward lines as the
    # student's own earlier functions); each entry is (what the student did, the function, a word the message needs)
    from bertviz_lite import backward as bw, engine as eng

    def sm(v, axis=-1):
        e = np.exp(v - v.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)

    def t11_1(c):
        def oh(y, t):
            o = np.zeros_like(y)
            o[np.arange(len(t)), t] = 1
            return o

        def mutate(y, t):
            y -= y.max(-1, keepdims=True)  # in place, on the caller's logits
            p = np.exp(y) / np.exp(y).sum(-1, keepdims=True)
            return (p - oh(y, t)) / len(t)

        def targets_as_columns(y, t):
            p = sm(y)
            p[:, t] -= 1
            return p / len(t)

        return [("no 1/N", lambda y, t: sm(y) - oh(y, t), "factor N"), ("sign", lambda y, t: (oh(y, t) - sm(y)) / len(t), "sign"),
                ("no one-hot", lambda y, t: sm(y) / len(t), "-1"), ("softmax over rows", lambda y, t: (sm(y, 0) - oh(y, t)) / len(t), "columns"),
                ("mean over all entries", lambda y, t: (sm(y) - oh(y, t)) / y.size, "N V"),
                ("divided by V", lambda y, t: (sm(y) - oh(y, t)) / y.shape[1], "V"),
                ("softmax only, no 1/N", lambda y, t: sm(y), "two mistakes"),
                ("log-softmax", lambda y, t: (np.log(sm(y)) - oh(y, t)) / len(t), "log"),
                ("mutates y", mutate, "in place"), ("targets as columns of every row", targets_as_columns, None)]

    def t11_2(c):
        return [("0 of 3", (0, 5), "at least one"), ("4.95 cut to 4", (1, 4), "4.95"), ("unrounded", (0.45, 4.95), "whole")]

    def ln_parts(x, ddof=0):
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True, ddof=ddof)
        return (x - mu) / np.sqrt(var + 1e-12), 1 / np.sqrt(var + 1e-12)

    def ln_student(mean=True, var=True, gam=True, dg="xh", red="sum", ddof=0, order="dx,dg,db", sumterms=False,
                   vsign=-1, mutate=False, axes=None):
        def f(dy, x, gamma, eps):
            xh, inv = ln_parts(x, ddof)
            if mutate:
                dy *= gamma
                g = dy
            else:
                g = dy * gamma if gam else dy
            avg = (lambda v: v.sum(-1, keepdims=True)) if sumterms else (lambda v: v.mean(-1, keepdims=True))
            dx = inv * (g - (avg(g) if mean else 0) + (vsign * xh * avg(g * xh) if var else 0))
            ax = tuple(range(dy.ndim - 1)) if axes is None else axes
            r = (lambda v: v.sum(axis=ax)) if red == "sum" else (lambda v: v.mean(axis=ax))
            dgam = r(dy * xh) if dg == "xh" else (r(dy) if dg == "db" else r(dy * x))
            out = {"dx": dx, "dg": dgam, "db": r(dy)}
            return tuple(out[k] for k in order.split(","))
        return f

    def t11_3(c):
        return [("no mean term", ln_student(mean=False), "mean"), ("no variance term", ln_student(var=False), "variance"),
                ("neither mean nor variance term", ln_student(mean=False, var=False), "two mistakes"),
                ("no gamma", ln_student(gam=False), "gamma"), ("dgamma = sum dy", ln_student(dg="db"), "dgamma"),
                ("dgamma = sum dy x", ln_student(dg="x"), "x itself"),
                ("dgamma, dbeta over the last axis", ln_student(axes=-1), "one number per feature"),
                ("dgamma, dbeta over the examples only", ln_student(axes=0), "one number per feature"),
                ("dgamma, dbeta averaged", ln_student(red="mean"), "averaged"),
                ("(dx, dbeta, dgamma)", ln_student(order="dx,db,dg"), "wrong places"),
                ("ddof=1", ln_student(ddof=1), "H - 1"), ("sums, not means, in dx", ln_student(sumterms=True), "add up"),
                ("variance term added", ln_student(vsign=1), "sign"), ("dy *= gamma in place", ln_student(mutate=True), "in place"),
                ("returns dx only", lambda dy, x, gamma, eps: ln_student()(dy, x, gamma, eps)[0], "return the 3"),
                ("returns a dict", lambda dy, x, gamma, eps: dict(zip(("dx", "dgamma", "dbeta"), ln_student()(dy, x, gamma, eps))), "return the 3")]

    def t11_4(c):
        Phi = lambda x: 0.5 * (1 + erf(x / np.sqrt(2)))  # noqa: E731
        phi = lambda x: np.exp(-x * x / 2) / np.sqrt(2 * np.pi)  # noqa: E731

        def tanh_slope(x):
            u = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
            return 0.5 * (1 + np.tanh(u)) + 0.5 * x * (1 - np.tanh(u) ** 2) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x * x)

        def in_place(dy, x):
            dy *= Phi(x) + x * phi(x)
            return dy

        return [("Phi only", lambda dy, x: dy * Phi(x), "one factor"), ("slope only", lambda dy, x: Phi(x) + x * phi(x), "dy"),
                ("slope at the output", lambda dy, x: dy * (Phi(gelu(x)) + gelu(x) * phi(gelu(x))), "output"),
                ("tanh GELU's slope", lambda dy, x: dy * tanh_slope(x), "tanh"), ("ReLU's slope", lambda dy, x: dy * (x > 0), "ReLU"),
                ("phi without 1/sqrt(2 pi)", lambda dy, x: dy * (Phi(x) + x * np.exp(-x * x / 2)), "sqrt(2 pi)"),
                ("Phi without 1/2", lambda dy, x: dy * ((1 + erf(x / np.sqrt(2))) + x * phi(x)), "1/2"),
                ("dy times GELU", lambda dy, x: dy * gelu(x), "forward"),
                ("erf(x/2)", lambda dy, x: dy * (0.5 * (1 + erf(x / 2)) + x * phi(x)), "variance 2"),
                ("exp(-x^2)", lambda dy, x: dy * (Phi(x) + x * np.exp(-x * x) / np.sqrt(2 * np.pi)), "exponent"),
                ("dy *= slope in place", in_place, "in place"),
                ("Phi only and no dy", lambda dy, x: Phi(x), "two mistakes")]

    def t11_5(c):
        def flat(f):
            def g(dy, x, W):
                k, m = W.shape
                return f(dy, x, W, x.reshape(-1, k), dy.reshape(-1, m))
            return g

        def reshape_in_place(dy, x, W):
            k, m = W.shape
            dx = dy @ W.T
            dy.shape = (-1, m)  # changes the caller's array
            return dx, x.reshape(-1, k).T @ dy, dy.sum(0)

        return [("dW = dy^T x", flat(lambda dy, x, W, X, D: (dy @ W.T, D.T @ X, D.sum(0))), "transposed"),
                ("db averaged", flat(lambda dy, x, W, X, D: (dy @ W.T, X.T @ D, D.mean(0))), "averaged"),
                ("dW averaged", flat(lambda dy, x, W, X, D: (dy @ W.T, X.T @ D / len(D), D.sum(0))), "averaged"),
                ("first example", lambda dy, x, W: (dy @ W.T, x[0].T @ dy[0], dy[0].sum(0)), "first example"),
                ("db over axis 0 only", flat(lambda dy, x, W, X, D: (dy @ W.T, X.T @ D, dy.sum(0))), "one number per feature"),
                ("(dW, dx, db)", flat(lambda dy, x, W, X, D: (X.T @ D, dy @ W.T, D.sum(0))), None),
                ("(dx, db, dW)", flat(lambda dy, x, W, X, D: (dy @ W.T, D.sum(0), X.T @ D)), None),
                ("dy.shape = ... in place", reshape_in_place, "in place"),
                ("returns (dx, dW)", flat(lambda dy, x, W, X, D: (dy @ W.T, X.T @ D)), "return the 3"),
                ("dW transposed and db averaged", flat(lambda dy, x, W, X, D: (dy @ W.T, D.T @ X, D.mean(0))), "two mistakes")]

    def head_student(ln_at="mlm.act", gelu_at="mlm.dense", gelu_=True, bias_mean=False, dWt=False, extra=None,
                     drop=None, swap=False, ln_mean=True):
        def f(dy, W, tape, Z, eps):
            g = {"mlm.bias": dy.mean(0) if bias_mean else dy.sum(0)}
            dh = dy @ W["embed.W_T"]
            if ln_mean:
                dact, g["mlm.ln.gamma"], g["mlm.ln.beta"] = bw.layer_norm_backward(dh, tape[ln_at], W["mlm.ln.gamma"], eps, np)
            else:
                dact, g["mlm.ln.gamma"], g["mlm.ln.beta"] = ln_student(mean=False)(dh, tape[ln_at], W["mlm.ln.gamma"], eps)
            dd = bw.gelu_backward(dact, tape[gelu_at], np) if gelu_ else dact
            dZ, g["mlm.W_t"], g["mlm.b_t"] = bw.linear_backward(dd, Z, W["mlm.W_t"], np)
            if dWt:
                g["mlm.W_t"] = dd.T @ Z
            if extra:
                g[extra] = dy.T @ tape["mlm.transform"]
            if drop:
                del g[drop]
            return (g, dZ) if swap else (dZ, g)
        return f

    def t11_6(c):
        return [("a gradient for the tied W_T", head_student(extra="embed.W_T"), "frozen"),
                ("a gradient for mlm.W_T", head_student(extra="mlm.W_T"), "frozen"),
                ("LayerNorm at its output", head_student(ln_at="mlm.transform"), "input"),
                ("GELU at its output", head_student(gelu_at="mlm.act"), "input"), ("no GELU", head_student(gelu_=False), "GELU"),
                ("bias averaged", head_student(bias_mean=True), "averaged"), ("dW_t transposed", head_student(dWt=True), "transposed"),
                ("no mlm.b_t", head_student(drop="mlm.b_t"), "mlm.b_t"), ("(grads, dZ)", head_student(swap=True), "wrong way round"),
                ("LayerNorm without its mean term", head_student(ln_mean=False), "mean"),
                ("both at their outputs", head_student(ln_at="mlm.transform", gelu_at="mlm.act"), None),
                ("through W_T^T", lambda dy, W, tape, Z, eps: head_student()(dy, {**W, "embed.W_T": W["embed.W_T"][:, ::-1]}, tape, Z, eps), None)]

    def soft_student(kind):
        def f(dA, A):
            if kind == "no-sub":
                return A * dA
            if kind == "no-p":
                return dA - (dA * A).sum(-1, keepdims=True)
            if kind == "axis":
                return A * (dA - (dA * A).sum(-2, keepdims=True))
            if kind == "diag":
                return A * (1 - A) * dA
            if kind == "plus":
                return A * (dA + (dA * A).sum(-1, keepdims=True))
            if kind == "inplace":
                dA -= (dA * A).sum(-1, keepdims=True)
                return A * dA
            if kind == "sum-dA":
                return A * (dA - dA.sum(-1, keepdims=True))
        return f

    def t11_7(c):
        return [("A * dA", soft_student("no-sub"), "subtraction"), ("no factor A", soft_student("no-p"), "factor p"),
                ("sum over the queries", soft_student("axis"), "queries"), ("diagonal", soft_student("diag"), "diagonal"),
                ("+ instead of -", soft_student("plus"), "sign"), ("dA -= ... in place", soft_student("inplace"), "in place"),
                ("sum of dA, not dA * A", soft_student("sum-dA"), None)]

    def attn_student(scale="d_k", mask=True, dK_t=True, dV_t=True, soft=True, order="QKV", scale_dV=False):
        def f(dC, Q, K, V, M):
            d = {"d_k": Q.shape[-1], "H": Q.shape[-3] * Q.shape[-1], "none": 1, "dk2": Q.shape[-1] ** 2}[scale]
            s = 1 / np.sqrt(d)
            A = sm(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) + (M if mask else 0))
            dA = dC @ np.swapaxes(V, -1, -2)
            dV = (np.swapaxes(A, -1, -2) if dV_t else A) @ dC * (s if scale_dV else 1)
            dE = A * (dA - (dA * A).sum(-1, keepdims=True)) if soft else dA
            dQ = s * dE @ K
            dK = s * (np.swapaxes(dE, -1, -2) if dK_t else dE) @ Q
            out = {"Q": dQ, "K": dK, "V": dV}
            return tuple(out[k] for k in order)
        return f

    def t11_8(c):
        return [("no scale", attn_student(scale="none"), "scale"), ("1/sqrt(H)", attn_student(scale="H"), "sqrt(H)"),
                ("1/d_k", attn_student(scale="dk2"), "1/d_k"), ("no mask", attn_student(mask=False), "mask"),
                ("dK = dE Q", attn_student(dK_t=False), "dK"), ("dV = A dC", attn_student(dV_t=False), "dV"),
                ("no softmax backward", attn_student(soft=False), "softmax"), ("dV scaled", attn_student(scale_dV=True), "dV"),
                ("(dQ, dV, dK)", attn_student(order="QVK"), "wrong places"),
                ("no scale and no mask", attn_student(scale="none", mask=False), "two mistakes"),
                ("dK untransposed, 1/sqrt(H)", attn_student(scale="H", dK_t=False), "two mistakes")]

    def layer_student(ffn_res=True, attn_res=True, plain=False, up="attn.ln", ln_out=False, gelu_at="ffn.up",
                      down="ffn.act", qkv="Z", scale="d_k", mask=True, only_v=False, drop=None, extra=None,
                      grads_only=False):
        def f(dy, W, tape, Z, M, n_h, eps):
            g = {}
            lnb = lambda d, key, gam: bw.layer_norm_backward(d, tape[key], W[gam], eps, np)  # noqa: E731
            dres, g["ffn.ln.gamma"], g["ffn.ln.beta"] = lnb(dy, "ffn.ln" if ln_out else "ffn.resid", "ffn.ln.gamma")
            dact, g["ffn.W_down"], g["ffn.b_down"] = bw.linear_backward(dres, tape[down], W["ffn.W_down"], np)
            dup = bw.gelu_backward(dact, tape[gelu_at], np)
            dZb, g["ffn.W_up"], g["ffn.b_up"] = bw.linear_backward(dup, tape[up], W["ffn.W_up"], np)
            dZb = dZb + dres if ffn_res else dZb
            dres, g["attn.ln.gamma"], g["attn.ln.beta"] = lnb(dZb, "attn.ln" if ln_out else "attn.resid", "attn.ln.gamma")
            dcat, g["attn.W_O"], g["attn.b_O"] = bw.linear_backward(dres, tape["attn.concat"], W["attn.W_O"], np)
            B, n, H = dcat.shape
            dC = dcat.reshape(B, n_h, n, H // n_h) if plain else dcat.reshape(B, n, n_h, H // n_h).transpose(0, 2, 1, 3)
            dQ, dK, dV = attn_student(scale=scale, mask=mask)(dC, tape["attn.q"], tape["attn.k"], tape["attn.v"], M)
            dZ = dres if attn_res else 0
            x = Z if qkv == "Z" else tape[qkv]
            for nm, d in (("Q", dQ), ("K", dK), ("V", dV)):
                dd = d.transpose(0, 2, 1, 3).reshape(B, n, H)
                dp, g[f"attn.W_{nm}"], g[f"attn.b_{nm}"] = bw.linear_backward(dd, x, W[f"attn.W_{nm}"], np)
                if nm == "V" or not only_v:
                    dZ = dZ + dp
            if drop:
                del g[drop]
            if extra:
                g[extra] = np.zeros(3)
            return g if grads_only else (dZ, g)
        return f

    def t11_9(c):
        return [("no FFN residual path", layer_student(ffn_res=False), "feed-forward residual"),
                ("no attention residual path", layer_student(attn_res=False), "attention residual"),
                ("both residual paths forgotten", layer_student(ffn_res=False, attn_res=False), "two mistakes"),
                ("heads cut by reshape", layer_student(plain=True), "reshape"), ("W_up reads Z", layer_student(up="attn.resid"), "Z-bar"),
                ("LayerNorms at their outputs", layer_student(ln_out=True), "input"),
                ("GELU at its output", layer_student(gelu_at="ffn.act"), "input"), ("W_down reads ffn.up", layer_student(down="ffn.up"), "ffn.act"),
                ("Q, K, V read attn.ln", layer_student(qkv="attn.ln"), "Z_(l-1)"), ("1/sqrt(H)", layer_student(scale="H"), "sqrt(H)"),
                ("mask forgotten", layer_student(mask=False), "mask"), ("dZ from V only", layer_student(only_v=True), "add up"),
                ("attn.b_K missing", layer_student(drop="attn.b_K"), "attn.b_K"), ("an extra key", layer_student(extra="attn.W_QKV"), "too many"),
                ("grads only", layer_student(grads_only=True), "pair")]

    def adam_student(eps="after", corr="both", root=True, sign=1, keep="raw", t0=0, paper=False, betas=(0.9, 0.999),
                     m_rate=True, square=True, lr_on=True, ret3=True):
        def f(p, g, m, v, t, lr):
            b1, b2 = betas
            m = b1 * m + ((1 - b1) if m_rate else 1) * g
            v = b2 * v + (1 - b2) * (g ** 2 if square else np.abs(g))
            tt = t + t0
            mh = m / (1 - b1 ** tt) if corr in ("both", "m") else m
            vh = v / (1 - b2 ** tt) if corr in ("both", "v") else v
            rate = lr if lr_on else 1
            if paper:
                new = p - sign * rate * np.sqrt(1 - b2 ** tt) / (1 - b1 ** tt) * m / (np.sqrt(v) + 1e-6)
            elif eps == "inside":
                new = p - sign * rate * mh / np.sqrt(vh + 1e-6)
            else:
                new = p - sign * rate * mh / ((np.sqrt(vh) if root else vh) + {"after": 1e-6, "none": 0, "1e-8": 1e-8}[eps])
            if not ret3:
                return new
            return (new, mh, vh) if keep == "hat" else (new, m, v)
        return f

    def t11_10(c):
        return [("eps inside the root", adam_student(eps="inside"), "under the square root"), ("no eps", adam_student(eps="none"), "eps"),
                ("eps = 1e-8", adam_student(eps="1e-8"), "1e-8"), ("no bias correction", adam_student(corr="none"), "bias correction"),
                ("only m corrected", adam_student(corr="m"), "not v"), ("only v corrected", adam_student(corr="v"), "not m"),
                ("divided by v", adam_student(root=False), "square root"), ("plus the step", adam_student(sign=-1), "sign"),
                ("returns m_hat, v_hat", adam_student(keep="hat"), "corrected averages"), ("t from 0", adam_student(t0=-1), "t"),
                ("the paper's faster form", adam_student(paper=True), "faster form"), ("betas swapped", adam_student(betas=(0.999, 0.9)), "swapped"),
                ("m without 1 - B1", adam_student(m_rate=False), "1 - B1"), ("v of |g|", adam_student(square=False), "square"),
                ("no lr", adam_student(lr_on=False), "learning rate"), ("returns p only", adam_student(ret3=False), "(p, m, v)"),
                ("no correction and eps inside", adam_student(corr="none", eps="inside"), "two mistakes")]

    def loop_student(held="after", fresh=True, update=True, loss="mean", reset=True, last=True, s0=1, n=0, every_row=False,
                     order="slh", ret="both", mutate=False):
        def f(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
            curve, losses = [], []
            b0 = minibatch(rng)
            for s in range(s0, steps + s0 + n):
                batch = minibatch(rng) if fresh and s > s0 else (b0 if not fresh else b0)
                h0 = heldout(params)
                value, grads = grad_fn(params, batch)
                new = step(params, grads)
                if mutate:
                    params.update(new)
                elif update:
                    params = new
                losses.append(value)
                if every_row or s % every == 0 or (last and s == steps):
                    h = h0 if held == "before" else heldout(params)
                    lv = {"mean": np.mean(losses), "last": losses[-1], "sum": sum(losses)}[loss]
                    curve.append((s, lv, h) if order == "slh" else (s, h, lv))
                    if reset:
                        losses = []
            return {"both": (params, curve), "curve": curve, "swap": (curve, params)}[ret]
        return f

    def t11_11(c):
        return [("held-out before the step", loop_student(held="before"), "before the step"),
                ("one minibatch", loop_student(fresh=False), "one minibatch"), ("params never updated", loop_student(update=False), "never change"),
                ("last loss", loop_student(loss="last"), "last step's"), ("sum of losses", loop_student(loss="sum"), "sum"),
                ("losses never reset", loop_student(reset=False), "emptied"), ("no row after the last step", loop_student(last=False), "last step"),
                ("steps from 0", loop_student(s0=0), "from 0"), ("one step too many", loop_student(n=1), "too many"),
                ("one step too few", loop_student(n=-1), "too few"), ("a row every step", loop_student(every_row=True), "every step"),
                ("(step, held-out, loss)", loop_student(order="shl"), "order"), ("returns the curve only", loop_student(ret="curve"), "(params, curve)"),
                ("returns (curve, params)", loop_student(ret="swap"), "(params, curve)"),
                ("params.update in place", loop_student(mutate=True), "in place"),
                ("held-out before the step, last loss", loop_student(held="before", loss="last"), "two mistakes")]

    def t12_1(c):
        tr, l, h = c.context["tr"], c.context["layer"], c.context["head"]
        A = g(tr, "attn.probs", layer=l, head=h)
        pl = A * np.log(np.where(A > 0, A, 1.0))
        return [("no minus", pl.sum(-1).mean(), "minus"), ("sum rows", -pl.sum(), "sum"),
                ("log2", -(A * np.log2(np.where(A > 0, A, 1.0))).sum(-1).mean(), "base 2"), ("mean keys", -pl.mean(), "keys"),
                ("max row", -pl.sum(-1).max(), "mean")]

    def t12_2(c):
        tr = c.context["tr"]
        A0 = g(tr, "attn.probs", layer=0)
        dg = np.diagonal(A0, axis1=1, axis2=2)
        return [("sum", dg.sum(1), "summed"), ("CLS col", A0[:, :, 0].mean(1), "CLS"), ("mean map", A0.mean((1, 2)), "whole map"),
                ("mean over heads", dg.mean(0), "heads"), ("axes 0, 1", np.diagonal(A0, axis1=0, axis2=1).mean(0), "axes"),
                ("last layer", np.diagonal(g(tr, "attn.probs", layer=tr.num_layers - 1), axis1=1, axis2=2).mean(1), "layer 0")]

    def t12_3(c):
        return [("no brackets", "cls", "brackets"), ("a target not in the list", "self", None)]

    def t13_1(c):
        x = g(c.context["tr"], "ffn.up", layer=0)
        return [("erf gelu", gelu(x), "erf"), ("relu", np.maximum(x, 0), "ReLU"), ("silu", x / (1 + np.exp(-x)), "1.702"),
                ("sigmoid alone", 1 / (1 + np.exp(1.702 * -x)), "multiply"), ("tanh", tanh_gelu(x), "tanh"),
                ("exp(+)", x / (1 + np.exp(1.702 * x)), "sign")]

    def t13_2(c):
        tr = c.context["tr"]
        Q, K = g(tr, "attn.q", layer=0), g(tr, "attn.k", layer=0)
        QK, H, d = Q @ K.transpose(0, 2, 1), tr.config.hidden_size, Q.shape[-1]
        return [("sqrt(d_k)", QK / np.sqrt(d), "sqrt(d_k)"), ("none", QK, "scale"), ("H", QK / H, "square root"),
                ("K Q^T", K @ Q.transpose(0, 2, 1) / np.sqrt(H), "K Q^T"), ("softmaxed", softmax(QK / np.sqrt(H)), "softmax"),
                ("BERT-base's sqrt(768)", QK / np.sqrt(768) if H != 768 else QK / np.sqrt(1024), "768")]

    def t13_3(c):
        d, first = c.context["actual"]
        return [("d_k and 5 d_k", (d // 2, first), None), ("first column 0", (d, 0), None), ("text", "64, 160", "text")]

    def t14_1(c):
        tr = c.context["tr"]
        S = g(tr, "attn.scores", layer=0, head=0)
        M = np.where(np.isneginf(S), -np.inf, 0.0)
        hid = np.isneginf(M)
        other = None
        for o in c.context.get("others", ()):
            Mo = np.where(np.isneginf(g(o, "attn.scores", layer=0, head=0)), -np.inf, 0.0)
            if not np.array_equal(np.isneginf(Mo), hid):
                other = Mo
                break
        return [("transposed", M.T, "transposed"), ("-1e9", np.where(hid, -1e9, 0.0), "1e9"), ("-1e4", np.where(hid, -1e4, 0.0), "1e4"),
                ("0/1", np.where(hid, 0.0, 1.0), "0/1"), ("another sentence", other, "another"), ("one row", M[0], "[n, n]"),
                ("inverted", np.where(hid, 0.0, -np.inf), "other way")]

    def t14_2(c):
        tr = c.context["tr"]
        s = g(tr, "attn.scores", layer=0)
        n = s.shape[-1]
        fut = np.triu(np.ones((n, n), bool), 1)
        sm = lambda hide, axis=-1: softmax(s + np.where(hide, -np.inf, 0.0), axis)  # noqa: E731
        return [("lower", sm(fut.T), "lower"), ("axis -2", sm(fut, -2), "queries"), ("no mask", sm(np.zeros((n, n), bool)), "without"),
                ("k=0 (hides the diagonal too)", sm(np.triu(np.ones((n, n), bool), 0)), "diagonal"),
                ("masked scores, no softmax", s + np.where(fut, -np.inf, 0.0), "softmax"),
                ]

    def t14_3(c):
        B, L, nh, n, _ = c.context["actual"]
        return [("layer first", (L, B, nh, n, n), "batch"), ("no batch", (L, nh, n, n), None), ("heads before layers", (B, nh, L, n, n), None)]

    def t15_1(c):
        tr = c.context["tr"]
        Z, m = g(tr, "ffn.ln", layer=tr.num_layers - 1), f(tr.mask)
        return [("mean incl pad", Z.mean(0), "PAD"), ("CLS", Z[0], "CLS"), ("sum", (Z * m[:, None]).sum(0), "summed"),
                ("masked / n", (Z * m[:, None]).sum(0) / len(m), "divided by n"), ("mean over features", Z.mean(-1), "features")]

    def t15_2(c):
        from bertviz_lite import analysis
        model, pairs = c.context["model"], c.context["pairs"]
        keep = [f"layer.{model.config.num_layers - 1}.ffn.ln"]
        emb = {s: f(analysis.sentence_embedding(model.trace(s, keep=keep))) for p in pairs for s in p}
        dots = np.array([emb[a] @ emb[b] for a, b in pairs])
        nr = np.array([np.linalg.norm(emb[a]) * np.linalg.norm(emb[b]) for a, b in pairs])
        return [("dots", dots, "dot"), ("1 - cos", 1 - dots / nr, "distance"),
                ("euclid", np.array([np.linalg.norm(emb[a] - emb[b]) for a, b in pairs]), "Euclid"),
                ("squared lengths", dots / nr ** 2, "squared"), ("a list of one", list(dots / nr)[:1], None)]

    def t15_3(c):
        return [("one sentence", "one sentence", "pair"), ("same sentence twice", ("A man plays.", "A man plays."), "share")]

    def t15_4(c):
        return [("text", "True", "bool"), ("1", 1, "bool")]

    def t16_1(c):
        A = c.context.get("A")
        if A is None:
            return []
        A = f(A)
        n = len(A)
        return [("previous", np.diagonal(A, -1).sum() / n, "previous"), ("n-1", np.diagonal(A, 1).mean(), "n - 1"),
                ("main", np.diagonal(A).mean(), "itself"), ("sum", np.diagonal(A, 1).sum(), "summed"),
                ("column mean", A[:, 1:].mean(), None)]

    def t16_2(c):
        r = c.context["r"]
        right = [(l, h) for l, h, _ in r.top("entropy", 3, largest=False)]
        return [("broadest", [(l, h) for l, h, _ in r.top("entropy", 3)], "broadest"), ("reversed", right[::-1], "order"),
                ("(head, layer)", [(h, l) for l, h in right], "(layer, head)"), ("text", "L0H2", "pairs"),
                ("flat indices", [l * 12 + h for l, h in right], "pairs")]

    def t17_1(c):
        from bertviz_lite.params import convention_total
        cf = c.context["config"]
        return [("as stored", convention_total(cf), "stored"), ("one layer", convention_total(cf.replace(embedding_size=None)), "one layer"),
                ("E = 128", convention_total(cf.replace(shared_layers=False)), "128"),
                ("BERT's vocab", convention_total(cf.replace(embedding_size=None, shared_layers=False, vocab_size=30522)), "vocabulary"),
                ("no pooler", convention_total(cf.replace(embedding_size=None, shared_layers=False)) - cf.hidden_size ** 2 - cf.hidden_size, "pooler")]

    def t17_2(c):
        o, n = c.context["model"].config.position_offset, c.context["n"]
        return [("0..n-1", list(range(n)), "BERT"), ("from padding", list(range(o - 1, o - 1 + n)), "padding"),
                ("o for all", [o] * n, "own row"), ("one too many", list(range(o, o + n + 1)), None)]

    def t17_3(c):
        tr, m = c.context["tr"], c.context["model"]
        p = g(tr, "pooler.out")
        W, b = f(m.weights["head.W"]), f(m.weights["head.b"])
        Z = g(tr, f"layer.{m.config.num_layers - 1}.ffn.ln")
        y = p @ W + b
        return [("no b", p @ W, "bias"), ("Z_L[0]", Z[0] @ W + b, "CLS"), ("probs", softmax(y), "probabilit"),
                ("W.T", p @ W.T + b if W.shape[0] == W.shape[1] else None, None), ("argmax", int(np.argmax(y)), None)]

    def t18_1(c):
        a, b = g(c.context["a_trace"], "ffn.act", layer=0), g(c.context["b_trace"], "ffn.act", layer=0)
        d = np.abs(a - b)
        return [("mean", d.mean(), "mean"), ("sum", d.sum(), "sum"), ("rms", np.sqrt((d ** 2).mean()), "root mean"),
                ("relative", (d / np.maximum(np.abs(a), 1e-30)).max(), None)]

    def t18_2(c):
        nb = c.context["model"].trace(c.context["text"], keep=["attn.probs"]).nbytes
        return [("entries", nb // 4, "entries"), ("float64", nb * 2, "float64"), ("MiB", nb / 2 ** 20, "MiB"),
                ("one layer", nb // c.context["model"].config.num_layers, "one layer"),
                ("one head", nb // c.context["model"].config.num_layers // c.context["model"].config.num_heads, "head")]

    def t18_3(c):
        a = c.context["actual"]
        return [("float32", a * 2, None), ("BERT-base's 144", 144, None)]

    def t19_1(c):
        from exercises import ex19
        tr, W = c.context["tr"], c.context["weights"]
        cf = tr.config

        def wrong(**kw):
            return lambda Z, W_, l: ex19.reference_layer(Z, W_, l, cf, **kw)

        def split_wrong(Z, W_, l):  # heads split as [n_h, n, d_k] by a plain reshape of [n, H]
            out = ex19.reference_layer(Z, W_, l, cf)
            p = f"layer.{l}."
            n, nh = len(Z), cf.num_heads
            w = {k: f(W_[p + "attn." + k]) for k in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V")}
            for key in "qkv":
                out[f"attn.{key}"] = (f(Z) @ w[f"W_{key.upper()}"] + w[f"b_{key.upper()}"]).reshape(nh, n, -1)
            return out

        def pre_ln(Z, W_, l):  # the pre-LN transformer: LayerNorm first, residual after
            p, eps = f"layer.{l}.", cf.layer_norm_eps
            out = ex19.reference_layer(ln(Z, f(W_[p + "attn.ln.gamma"]), f(W_[p + "attn.ln.beta"]), eps), W_, l, cf)
            out["attn.resid"] = f(Z) + out["attn.out"]
            out["attn.ln"] = out["attn.resid"]
            return out

        def no_bias(Z, W_, l):
            W2 = {k: (0 * f(v) if k.startswith(f"layer.{l}.attn.b_") else v) for k, v in W_.items()}
            return ex19.reference_layer(Z, W2, l, cf)

        def out_unprojected(Z, W_, l):
            out = ex19.reference_layer(Z, W_, l, cf)
            return out

        return [("sqrt(H)", wrong(scale="H"), "sqrt(H)"), ("no scale", wrong(scale="none"), "scale"),
                ("softmax axis -2", wrong(probs_axis=-2), "queries"), ("no attn residual", wrong(attn_residual=False), "residual"),
                ("tanh gelu", wrong(gelu="tanh"), "tanh"), ("ddof 1", wrong(ddof=1), "ddof"),
                ("ffn stream", wrong(ffn_stream="input"), "stream"), ("head split by plain reshape", split_wrong, "split"),
                ("pre-LN", pre_ln, "pre-LN"), ("no q/k/v biases", no_bias, "bias"), ("returns a list", lambda Z, W_, l: [Z], "dict")]

    def t19_2(c):
        tr = c.context["tr"]
        Z = g(tr, "ffn.ln", layer=tr.num_layers - 1)
        return [("CLS", Z[0], "CLS"), ("sum", Z.sum(0), "summed"), ("Z_0", g(tr, "embed.ln").mean(0), "Z_0"),
                ("features", Z.mean(-1), "features"), ("second-last layer", g(tr, "ffn.ln", layer=tr.num_layers - 2).mean(0), "layer")]

    for name, fn in list(locals().items()):
        if name.startswith("t") and name[1:3].isdigit() and callable(fn):
            T[f"{name[1:3]}.{name[4:]}"] = fn
    return T


RUN = """
import sys, json
sys.path.insert(0, {scripts!r})
import try_wrong_answers as _t
print("TRIED " + json.dumps(_t.tried()))
"""


def tried() -> list:
    """In a lesson's kernel after its solutions ran: [[id, what, named, message]] for every wrong answer tried."""
    from course import checks

    table, rows = _tables(), []
    for call in checks.calls():
        if call.id not in table:
            continue
        try:
            wrongs = table[call.id](call)
        except Exception as e:  # the lesson's context lacks what this table needs (a trace kept only some keys)
            rows.append([call.id, "(table)", "skipped", f"{type(e).__name__}: {e}"[:200]])
            continue
        for what, wrong, word in wrongs:
            if wrong is None:
                continue
            ok, message = checks.checker(call.id)(wrong, **call.context)
            if ok:
                rows.append([call.id, what, "ACCEPTED", message])
                continue
            named = not GENERIC.search(message) and (word is None or word.lower() in message.lower())
            rows.append([call.id, what, "named" if named else "unnamed", message])
    return rows


def run_lesson(path: Path) -> list:
    import nbformat
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from tests.course.test_lessons import exercise_cells, solutions

    nb = nbformat.read(path, as_version=4)
    sols = solutions(path)
    for i, cell in exercise_cells(nb).items():
        cell.source = sols[i]
    nb.cells.append(nbformat.v4.new_code_cell(RUN.format(scripts=str(ROOT / "scripts"))))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    return json.loads(text.split("TRIED ", 1)[1].splitlines()[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lessons", nargs="*", help="lesson numbers (00 04 19); default: every lesson")
    ap.add_argument("--json", help="write every row here as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every message, not only the unnamed ones")
    args = ap.parse_args(argv)
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    wanted = set(args.lessons) or {p.name[:2] for p in paths}
    rows = []
    for p in paths:
        if p.name[:2] in wanted:
            got = run_lesson(p)
            rows += got
            for r in got:
                if args.verbose or r[2] != "named":
                    print(f"  {r[0]} {r[1]!r}: {r[2]}: {r[3][:150]}")
            print(f"{p.name}: {sum(r[2] == 'named' for r in got)} of {len(got)} named", flush=True)
    rows = [r for r in rows if r[2] != "skipped"]
    named, accepted = sum(r[2] == "named" for r in rows), sum(r[2] == "ACCEPTED" for r in rows)
    print(f"TOTAL: {named} of {len(rows)} wrong answers named ({100 * named / max(len(rows), 1):.0f}%), "
          f"{accepted} accepted")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
