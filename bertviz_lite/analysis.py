"""Analysis of a trace: free functions that take a `Trace` and return small host arrays.

What the lessons measure and users reuse: how spread out each head's attention is
(`head_entropy`, `max_weight`), where it goes (`attention_to`: [CLS], [SEP], punctuation,
the previous / next token, itself; cf. Clark et al. 2019, "What does BERT look at?"),
how token vectors change with depth (`representation_similarity`, `token_similarity`),
what a LayerNorm computes versus what it learns (`layer_norm_stats`), and how far two
traces of the same input drift apart (`max_abs_difference`).

Engine rule: no numpy here. Every computation runs in the array namespace of the trace's
own arrays (numpy, cupy or array_api_strict), in float64 where the backend has it, and only
the (small) result comes back to the host with `backend.to_host`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

from . import backend, families, schema, tokenizer

# layernorm steps and the tensor each one normalises (its input)
LAYER_NORM_INPUTS = {"embed.ln": "embed.sum", "attn.ln": "attn.resid", "ffn.ln": "ffn.resid"}
TARGETS = ("[CLS]", "[SEP]", "punct", "prev", "next", "self")


def is_special(token: str, which: str, config=None) -> bool:
    """Whether a token is the special token `which` ('[CLS]') as the config's family writes it (RoBERTa:
    <s>; families.py's records), or as any family writes it without a config."""
    return token in families.spellings(which, config)


def family_config(trace):
    """The config whose family spells the trace's special tokens; None for attention maps from elsewhere
    (Trace.from_attentions without a config), whose tokens may be any family's."""
    return None if trace.nominal else trace.config


# ------------------------------------------------------------------------------------------
# small helpers (array-api only)
# ------------------------------------------------------------------------------------------


def _wide(x):
    """x in the widest float its namespace has (float64; float32 where there is none)."""
    xp = backend.namespace_of(x)
    target = getattr(xp, "float64", None) or xp.float32
    try:
        return xp.astype(x, target)
    except (TypeError, ValueError):  # a backend without float64 support on this device
        return xp.astype(x, xp.float32)


def _real_maps(trace, layer: int):
    """One layer's attention maps over real tokens: [n_h, n_real, n_real], float64."""
    return _wide(trace.real(trace.get("attn.probs", layer=layer), ("head", "query", "key")))


def _row_entropy(p, xp):
    """-sum_k p log p over the last axis; 0 log 0 = 0   [..., n] -> [...]."""
    safe = xp.where(p > 0, p, xp.ones_like(p))  # log(1) = 0 where p = 0
    return -xp.sum(p * xp.log(safe), axis=-1)


def _stack_layers(values: list, xp):
    return xp.stack(values, axis=0)


@functools.lru_cache(maxsize=65536)  # a corpus asks about the same wordpieces again and again
def is_punctuation(token: str) -> bool:
    """Whether a wordpiece is punctuation only ('.', ',', '?', '$', '##!'): the characters the
    tokenizer splits off as punctuation."""
    t = token[2:] if token.startswith("##") else token
    return bool(t) and all(tokenizer.is_punctuation(ch) for ch in t)


# ------------------------------------------------------------------------------------------
# how spread out attention is
# ------------------------------------------------------------------------------------------


def head_entropy(trace, *, normalize: bool = False):
    """Mean entropy (nats) of each head's attention rows over the real tokens -> [layer, head].

    A row spread evenly over n tokens has entropy log n (the largest possible); a row on one
    token has 0. normalize=True divides by log n, so 1 is uniform and 0 is one-hot.
    """
    n = trace.n_real
    out = []
    for layer in range(trace.num_layers):
        p = _real_maps(trace, layer)  # [n_h, n, n]
        xp = backend.namespace_of(p)
        out.append(xp.mean(_row_entropy(p, xp), axis=-1))  # [n_h]
    h = _stack_layers(out, xp)  # [L, n_h]
    if normalize:
        h = h / math.log(n) if n > 1 else xp.zeros_like(h)
    return backend.to_host(h)


def max_weight(trace):
    """Mean over real queries of each row's largest attention weight -> [layer, head].

    1/n means uniform rows, 1 means every row is one-hot (a saturated softmax).
    """
    out = []
    for layer in range(trace.num_layers):
        p = _real_maps(trace, layer)
        xp = backend.namespace_of(p)
        out.append(xp.mean(xp.max(p, axis=-1), axis=-1))
    return backend.to_host(_stack_layers(out, xp))


# ------------------------------------------------------------------------------------------
# where attention goes
# ------------------------------------------------------------------------------------------


def target_cells(which: str, tokens, xp, dtype, config=None):
    """Clark et al.'s (2019) targets, defined once: [B, n, n] of 0/1, which (query i, key j) cells
    count as attention to `which`, for B token lists of n tokens each.

    '[CLS]', '[SEP]' (any special token): the keys that are that token, as the config's family spells
    it (any family's spelling without a config); 'punct': punctuation word pieces; 'self': j = i;
    'prev': j = i - 1; 'next': j = i + 1.
    """
    B, n = len(tokens), len(tokens[0])
    i = xp.reshape(xp.arange(n), (n, 1))  # query
    j = xp.reshape(xp.arange(n), (1, n))  # key
    if which in ("self", "prev", "next"):
        cells = {"self": j == i, "prev": j == i - 1, "next": j == i + 1}[which]  # [n, n]
        return xp.broadcast_to(xp.astype(cells, dtype), (B, n, n))
    if which == "punct":
        flags = [[is_punctuation(t) for t in ts] for ts in tokens]
    elif which.startswith("[") and which.endswith("]") or which in families.SPECIAL_SPELLINGS:  # '[CLS]', '<s>'
        names = families.spellings(which, config)  # '[CLS]' as the family writes it
        flags = [[t in names for t in ts] for ts in tokens]
    else:
        raise ValueError(f"unknown target {which!r}: use one of {TARGETS} or a special token like '[PAD]'")
    return xp.broadcast_to(xp.reshape(xp.asarray(flags, dtype=dtype), (B, 1, n)), (B, n, n))


def attention_to(trace, which: Iterable[str] = TARGETS, *, per_query: bool = False) -> dict:
    """Share of attention each head gives to some keys: {target: [layer, head]} (or
    [layer, head, query] with per_query=True), averaged over the real query tokens.

    Targets: '[CLS]', '[SEP]' (or any special token), 'punct' (punctuation wordpieces),
    'prev' / 'next' (the token just before / after the query), 'self' (the query itself).
    Each share is between 0 and 1; targets can overlap ('prev' of the first word is [CLS]).
    """
    which = (which,) if isinstance(which, str) else tuple(which)
    maps = [_real_maps(trace, layer) for layer in range(trace.num_layers)]
    xp = backend.namespace_of(maps[0])
    p = _stack_layers(maps, xp)  # [L, n_h, n, n]
    out = {}
    for target in which:
        tokens = [[trace.tokens[i] for i in trace.real_positions]]
        cells = target_cells(target, tokens, xp, p.dtype, family_config(trace))[0, ...]  # [n, n]
        share = xp.sum(p * cells, axis=-1)  # [L, n_h, n]
        out[target] = backend.to_host(share if per_query else xp.mean(share, axis=-1))
    return out


# ------------------------------------------------------------------------------------------
# how token vectors change with depth
# ------------------------------------------------------------------------------------------


def layer_outputs(trace):
    """Z_0 (embed.ln), Z_1 .. Z_L (layer.{l}.ffn.ln) over the real tokens: [L + 1, n_real, H]."""
    zs = [trace["embed.ln"]] + [trace.get("ffn.ln", layer=layer) for layer in range(trace.num_layers)]
    zs = [_wide(trace.real(z, ("token", "hidden"))) for z in zs]
    return _stack_layers(zs, backend.namespace_of(zs[0]))


def cosine(a, b, xp):
    """Cosine similarity of matching rows   [..., H], [..., H] -> [...] (the one definition: views,
    comparisons and sentence similarity use it). Two zero vectors agree (1); one zero vector gives 0."""
    na, nb = xp.linalg.vector_norm(a, axis=-1), xp.linalg.vector_norm(b, axis=-1)
    both = na * nb
    ones = xp.ones_like(both)
    same = xp.where((na == 0) & (nb == 0), ones, xp.zeros_like(both))
    return xp.where(both > 0, xp.sum(a * b, axis=-1) / xp.where(both > 0, both, ones), same)


def representation_similarity(trace, against: str = "input"):
    """Cosine similarity of each real token's vector at every depth -> [L + 1, n_real].

    against='input': Z_l[t] vs Z_0[t] (how far a token has moved from its embedding);
    'previous': Z_l[t] vs Z_{l-1}[t] (how much one layer changes it; row 0 is 1);
    'mean': Z_l[t] vs the mean of Z_l over the tokens (how alike the tokens have become).
    """
    z = layer_outputs(trace)  # [L+1, n, H]
    xp = backend.namespace_of(z)
    if against == "input":
        ref = xp.broadcast_to(z[0:1, ...], z.shape)
    elif against == "previous":
        ref = xp.concat([z[0:1, ...], z[:-1, ...]], axis=0)
    elif against == "mean":
        ref = xp.broadcast_to(xp.mean(z, axis=1, keepdims=True), z.shape)
    else:
        raise ValueError(f"against must be 'input', 'previous' or 'mean', got {against!r}")
    return backend.to_host(cosine(z, ref, xp))


def token_similarity(trace, layer: int | None = None):
    """Cosine similarity between every two real tokens at one depth -> [n_real, n_real].

    layer=None is Z_0 (after the embedding layernorm); layer=l is Z_{l+1}, the output of layer l.
    """
    z = layer_outputs(trace)
    xp = backend.namespace_of(z)
    zl = z[0 if layer is None else trace.check_layer(layer) + 1, ...]  # [n, H]
    unit = zl / xp.sqrt(xp.sum(zl * zl, axis=-1, keepdims=True))
    return backend.to_host(unit @ xp.permute_dims(unit, (1, 0)))


def mean_token_similarity(trace):
    """Mean cosine between two different real tokens at each depth -> [L + 1].

    Rises when the stack makes every token's vector alike (the 'anisotropy' of deep layers).
    """
    z = layer_outputs(trace)
    xp = backend.namespace_of(z)
    n = z.shape[1]
    unit = z / xp.sqrt(xp.sum(z * z, axis=-1, keepdims=True))
    sims = unit @ xp.permute_dims(unit, (0, 2, 1))  # [L+1, n, n]
    off = xp.sum(sims, axis=(1, 2)) - xp.sum(xp.sum(unit * unit, axis=-1), axis=-1)  # drop the diagonal
    return backend.to_host(off / (n * (n - 1)))


# ------------------------------------------------------------------------------------------
# layernorm: computed statistics vs learned parameters
# ------------------------------------------------------------------------------------------


def layer_norm_stats(trace, key: str) -> dict:
    """Per-token statistics around one layernorm step ('embed.ln', 'layer.3.attn.ln', ...).

    Returns host arrays over the real tokens:
    'input_mean', 'input_std': the mean and standard deviation the layernorm *computes* from
    each token's input vector (they change with every input; nothing learned);
    'output_mean', 'output_std': the same of its output, which are 0 and 1 only when the learned
    gain is 1 and the learned bias 0 (a random init; a trained model moves them).
    """
    layer, step = _split(trace, key)
    if step not in LAYER_NORM_INPUTS:
        raise ValueError(f"{key!r} is not a layernorm step; use one of {sorted(LAYER_NORM_INPUTS)} "
                         "(per layer: 'layer.{l}.attn.ln', 'layer.{l}.ffn.ln')")
    src = schema.full_key(LAYER_NORM_INPUTS[step], layer)
    out = {}
    for prefix, k in (("input", src), ("output", key)):
        x = _wide(trace.real(trace[k], ("token", "hidden")))
        xp = backend.namespace_of(x)
        out[f"{prefix}_mean"] = backend.to_host(xp.mean(x, axis=-1))
        out[f"{prefix}_std"] = backend.to_host(xp.std(x, axis=-1))
    return out


def _split(trace, key: str):
    layer, step = schema.split_key(key)
    return (None if layer is None else trace.check_layer(layer)), step


# ------------------------------------------------------------------------------------------
# comparing two traces of the same input (what-if experiments)
# ------------------------------------------------------------------------------------------


def max_abs_difference(a, b, key: str, *, positions: Iterable[int] | None = None) -> float:
    """Largest |a[key] - b[key]| over the given token positions (default: the real tokens of a).

    The positions index the token, query and key axes of both traces, so a padded trace can be
    compared with an unpadded or unmasked one on the tokens they share.
    """
    pos = list(a.real_positions if positions is None else positions)
    axes = a.axes(key)
    xa, xb = _wide(a[key]), _wide(b[key])
    xp = backend.namespace_of(xa)
    idx = xp.asarray(pos)
    for i, ax in enumerate(axes):
        if ax in ("token", "query", "key"):
            xa, xb = xp.take(xa, idx, axis=i), xp.take(xb, idx, axis=i)
    d = xp.abs(xa - xb)
    finite = xp.isfinite(xa) & xp.isfinite(xb)
    d = xp.where(finite, d, xp.zeros_like(d))  # -inf scores on both sides are equal
    return float(backend.to_host(xp.max(d)))


# ------------------------------------------------------------------------------------------
# using BERT: sentence embeddings, and which heads a trained task needs
# ------------------------------------------------------------------------------------------


def sentence_embedding(trace):
    """The sentence's vector: the mean of the last layer's token vectors over the real tokens
    (sentence-transformers' mean pooling, what all-MiniLM-L6-v2 was trained with; it then
    normalises to unit length, which leaves cosines unchanged)   [n, H] -> [H]."""
    key = schema.full_key("ffn.ln", trace.num_layers - 1)
    Z = _wide(trace.real(trace[key], ("token", "hidden")))  # [n_real, H]
    xp = backend.namespace_of(Z)
    return backend.to_host(xp.mean(Z, axis=0))


def _cosine_host(u, v) -> float:
    return float(cosine(u, v, backend.namespace_of(u)))


def pair_similarity(model, a: str, b: str, *, edits=None) -> float:
    """cos(embedding(a), embedding(b)) with mean pooling, optionally under edits= (see bv.ablate)."""
    keep = [schema.full_key("ffn.ln", model.config.num_layers - 1)]
    ea = sentence_embedding(model.trace(a, keep=keep, edits=edits))
    eb = sentence_embedding(model.trace(b, keep=keep, edits=edits))
    return _cosine_host(ea, eb)


def sentence_embeddings(trace):
    """Every input's sentence vector from a trace with a batch axis: the mean of the last layer's token
    vectors over each input's real tokens   [B, n, H] -> host [B, H] (`sentence_embedding` of each input)."""
    key = schema.full_key("ffn.ln", trace.num_layers - 1)
    Z = _wide(trace[key])  # [B, n, H]
    xp = backend.namespace_of(Z)
    real = xp.asarray(trace.mask, dtype=Z.dtype)[..., None]  # [B, n, 1]: 1 on real tokens, 0 on [PAD]
    return backend.to_host(xp.sum(Z * real, axis=1) / xp.sum(real, axis=1))  # [B, H]


def _pair_cosines(model, texts, edits=None):
    """cos(embedding(a), embedding(b)) of every pair, from one batched run over [a_1, b_1, a_2, b_2, ...]."""
    keep = [schema.full_key("ffn.ln", model.config.num_layers - 1)]
    e = sentence_embeddings(model.trace_batch(texts, keep=keep, edits=edits, progress=False))  # [2P, H]
    return cosine(e[0::2, ...], e[1::2, ...], backend.namespace_of(e))  # [P]


def head_importance(model, pairs, *, how: str = "zero", progress: bool = True):
    """How much each head matters to a trained task: for sentence pairs [(a, b), ...], the mean
    absolute change of the pair's embedding cosine (mean pooling) when that one head is ablated
    (`bv.ablate(heads={layer: [head]}, how=how)`)   -> host array [layer, head].

    One batched run of every sentence per head, edited (the ablation applies to each input as in a
    single trace), plus one without edits: layers x heads + 1 forward passes over 2 x len(pairs)
    sentences. progress: a tqdm bar over the heads (a widget in a notebook, text in a terminal);
    progress=False for none (stored lesson outputs stay the same).
    """
    from .edits import ablate
    from .errors import as_bool

    progress = as_bool(progress, "progress")  # 'no' is not False: it would show the bar
    pairs = [tuple(p) if isinstance(p, (tuple, list)) else p for p in pairs]
    if not pairs or any(not isinstance(p, tuple) or len(p) != 2 or not all(isinstance(s, str) for s in p)
                        for p in pairs):
        raise ValueError("head_importance() takes a non-empty list of (sentence, sentence) pairs of strings")
    L, n_h = model.config.num_layers, model.config.num_heads
    texts = [s for pair in pairs for s in pair]  # a_1, b_1, a_2, b_2, ...
    base = _pair_cosines(model, texts)  # [P]
    hx = backend.namespace_of(base)
    from tqdm.auto import tqdm  # here, not at import: the engine loads no widget library until asked

    values = []
    for layer, head in tqdm([(ly, h) for ly in range(L) for h in range(n_h)], desc="head_importance: ablating heads",
                            unit="head", disable=not progress):
        changed = _pair_cosines(model, texts, edits=ablate(heads={layer: [head]}, how=how))
        values.append(float(hx.mean(hx.abs(changed - base))))
    return hx.reshape(hx.asarray(values, dtype=hx.float64), (L, n_h))


# ------------------------------------------------------------------------------------------
# attention weights next to what they move (Kobayashi et al. 2020, "Attention is not only a weight")
# ------------------------------------------------------------------------------------------


def weighted_value_norms(trace, layer: int, head: int, *, W_O=None):
    """||alpha_ij v_j|| for every query i and key j of one head, over the real tokens
    [n_real, n_real]: how much of key j actually reaches query i, not only its weight.

    v_j is the head's value row (`attn.v`); with `W_O` (the layer's H x H output weight) it is
    v_j W^O_h, the head's rows of W^O, as in Kobayashi et al. 2020. A large weight on a key
    whose value vector is small moves little.
    """
    layer, head = trace.check_layer(layer), trace.check_head(head)
    real = trace.real_positions
    probs = _real_maps(trace, layer)[head, ...]  # [n, n]
    xp = backend.namespace_of(probs)
    v = _wide(trace.get("attn.v", layer=layer, head=head))  # [n_all, d_k]
    v = xp.take(v, xp.asarray(real), axis=0)  # [n, d_k]
    if W_O is not None:
        d_k = v.shape[-1]
        W_O = _wide(xp.asarray(W_O))
        v = v @ W_O[head * d_k:(head + 1) * d_k, :]  # [n, H]
    norms = xp.sqrt(xp.sum(v * v, axis=-1))  # [n]  ||v_j||
    return backend.to_host(probs * norms[None, :])  # alpha_ij ||v_j|| = ||alpha_ij v_j||


# ------------------------------------------------------------------------------------------
# what a task head says (head.logits with the labels of config.json's id2label)
# ------------------------------------------------------------------------------------------


def head_probabilities(trace):
    """The task head's logits as probabilities on the host: softmax over the labels (sequence and token
    classification, next sentence, question answering's start / end over the real tokens), or the
    sigmoid of ELECTRA's per-token score. Shape as head.logits, real tokens only."""
    from .engine import softmax
    if "head.logits" not in trace:
        raise KeyError("this trace has no head.logits: the model has no task head (config.json's architectures "
                       "names a BertModel or a masked-lm model)")
    head = trace.config.head
    y = _wide(trace.real(trace["head.logits"], trace.axes("head.logits")))
    xp = backend.namespace_of(y)
    if head == "replaced_token":
        p = 1.0 / (1.0 + xp.exp(-y))  # [n] sigmoid: probability that the token was replaced
    elif head == "question_answering":
        p = xp.permute_dims(softmax(xp.permute_dims(y, (1, 0)), xp), (1, 0))  # [n, 2], each column over tokens
    else:
        p = softmax(y, xp)  # [labels] or [n, labels]
    return backend.to_host(p)


def answer_positions(trace, *, context_only: bool = False) -> list[int]:
    """Positions (in the padded input) a token label or a question-answering span may use, as Hugging Face's
    pipelines choose them: real tokens that are not the family's [CLS], [SEP] or [PAD]; context_only=True
    (question answering): with a pair (question, context), the context's tokens only."""
    special = set().union(*(families.spellings(t, family_config(trace)) for t in ("[CLS]", "[SEP]", "[PAD]")))
    out = [i for i in trace.real_positions if trace.tokens[i] not in special]
    context = [i for i in out if trace.spans[i] is not None and trace.spans[i][0] == 1]
    return (context or out) if context_only else out


def fill_mask_summary(trace, top: int = 3, *, model=None) -> str:
    """The masked-LM head's top guesses at each [MASK] (the family's spelling) of a trace with mlm.logits:
    'at 3 ([MASK]): paris 0.41  london 0.12  ...'; token strings with model= (the trace holds ids only)."""
    from .engine import softmax
    if "mlm.logits" not in trace:
        raise KeyError("this trace has no head.logits or mlm.logits: the model has no task head and no masked-LM "
                       "head (config.json's architectures names a BertModel)")
    mask = families.special_tokens(trace.config).mask
    name = model.tokenizer.id_to_token if model is not None and model.tokenizer is not None else (lambda i: f"#{i}")
    rows = [i for i in trace.real_positions if trace.tokens[i] == mask] or trace.real_positions
    logits = _wide(trace["mlm.logits"])
    xp = backend.namespace_of(logits)
    lines = []
    for pos in rows:
        p = backend.to_host(softmax(logits[pos, ...], xp))
        hx = backend.namespace_of(p)
        order = [int(i) for i in hx.argsort(-p)][:top]
        lines.append(f"at {pos} ({trace.tokens[pos]}): " + "  ".join(f"{name(i)} {float(p[i]):.2f}" for i in order))
    none = "" if trace.tokens[rows[0]] == mask else f"(no {mask} in the input: every token's guesses) "
    return none + "; ".join(lines)


def head_summary(trace, top: int = 3, *, model=None) -> str:
    """One line per head kind, as the command line prints it: 'pos 0.91  neg 0.09'; for token heads,
    each token with its most likely label ([CLS], [SEP] and [PAD] left out, as the pipelines do); for question
    answering, the best span of the context's tokens; for a model with only a masked-LM head, the top guesses at
    each [MASK] (token strings with model=; see `fill_mask_summary`)."""
    if "head.logits" not in trace and "mlm.logits" in trace:
        return fill_mask_summary(trace, top, model=model)
    p = head_probabilities(trace)
    hx = backend.namespace_of(p)
    labels, head = trace.labels, trace.config.head
    real = trace.real_positions  # p's rows for token heads
    keep = [real.index(i) for i in answer_positions(trace, context_only=head == "question_answering")]
    tokens = [trace.tokens[real[k]] for k in keep]
    if head in ("sequence_classification", "next_sentence"):
        order = [int(i) for i in hx.argsort(-p)][:top]
        return "  ".join(f"{labels[i]} {float(p[i]):.2f}" for i in order)
    if head == "token_classification":
        best = [int(hx.argmax(p[k, ...])) for k in keep]
        return "  ".join(f"{t}:{labels[b]} {float(p[k, b]):.2f}" for t, k, b in zip(tokens, keep, best))
    if head == "question_answering":
        n = len(keep)
        if not n:
            return "no answer: the input has no tokens besides [CLS], [SEP] and [PAD]"
        score, s, e = max((float(p[keep[s], 0] * p[keep[e], 1]), s, e)
                          for s in range(n) for e in range(s, min(n, s + 30)))
        return (f"answer {' '.join(tokens[s:e + 1])!r} (tokens {real[keep[s]]}..{real[keep[e]]}) "
                f"p(start) x p(end) = {score:.2f}")
    if head == "replaced_token":
        return "  ".join(f"{t} {float(p[k]):.2f}" for t, k in zip(tokens, keep)) + "   (p replaced)"
    raise ValueError(f"unknown head {head!r}")
