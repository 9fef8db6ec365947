"""Lesson 04 · One attention head: the checkers."""
import numpy as np

from course import close, exercise, within


@exercise("04.1", hint=("a dot product of d_k terms, each about N(0, 1) times N(0, 1), has standard deviation "
                        "sqrt(d_k); the article divides by sqrt(H) instead",),
          prediction=True, wrong=lambda answer, actual: [1.0, 8.0, -actual, 0.5 * actual, 1.5 * actual])
def _(answer, *, actual):
    return within(answer, 0.85 * actual, 1.15 * actual, "your prediction")  # the ratio 8 / sqrt(768), not a guess


def _qk(tr, layer, head):
    Q = np.asarray(tr.get("attn.q", layer=layer, head=head), dtype=np.float64)
    K = np.asarray(tr.get("attn.k", layer=layer, head=head), dtype=np.float64)
    return Q, K


@exercise("04.2", hint=("scores[i, j] is query i dotted with key j, divided by sqrt(d_k): the result is [n, n]",
                        "Q is [n, d_k] and K is [n, d_k]: multiply Q by K transposed; d_k is the last axis of Q"))
def _(answer, *, tr, layer, head):
    Q, K = _qk(tr, layer, head)
    d_k, H = Q.shape[-1], tr.config.hidden_size
    return close(answer, tr.get("attn.scores", layer=layer, head=head), atol=1e-4, mistakes={
        "you divided by sqrt(H), the model width: the scores use sqrt(d_k), the head width": Q @ K.T / np.sqrt(H),
        "you did not scale: divide Q K^T by sqrt(d_k)": Q @ K.T,
        "you computed K Q^T: rows must be queries, so Q K^T": K @ Q.T / np.sqrt(d_k),
        "you divided by d_k: the scale is its square root": Q @ K.T / d_k})


@exercise("04.3", hint=("each output row is a weighted sum of the value rows, with the attention row as weights",
                        "the map is [n, n] (tr.get('attn.probs', ...)), the values [n, d_k] "
                        "(tr.get('attn.v', ...)): one matrix product, map first"))
def _(answer, *, tr, layer, head):
    A = np.asarray(tr.get("attn.probs", layer=layer, head=head), dtype=np.float64)
    V = np.asarray(tr.get("attn.v", layer=layer, head=head), dtype=np.float64)
    return close(answer, tr.get("attn.context", layer=layer, head=head), atol=1e-4, mistakes={
        "you used the map transposed (A^T V): row i of A holds query i's weights": A.T @ V,
        "you used the scores, not the softmax probabilities": np.where(
            np.isfinite(tr.get("attn.scores", layer=layer, head=head)),
            tr.get("attn.scores", layer=layer, head=head), 0.0) @ V})


def it_to_cat(tr, layer, head):
    """('it' -> 'cat' weight, mean weight of every other token on 'cat') in one head."""
    it, cat = tr.tokens.index("it"), tr.tokens.index("cat")
    A = np.asarray(tr.get("attn.probs", layer=layer, head=head), dtype=np.float64)
    others = [i for i in range(tr.n) if i != it]
    return A[it, cat], A[others, cat].mean()


@exercise("04.4", hint=("move the layer and head controls of 'Try it' and read the line above the map; "
                        "answer a tuple (layer, head)",
                        "the head you want gives 'it' -> 'cat' a large weight that the other tokens do not give 'cat'"),
          wrong=lambda answer, tr: [(5, 11), (0, 0), "3, 1", (99, 0)])
def _(answer, *, tr):
    if not (isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(x, (int, np.integer)) for x in answer)):
        return False, f"answer a tuple of two integers, (layer, head); got {type(answer).__name__} {answer!r}"[:200]
    layer, head = (int(x) for x in answer)
    if not (0 <= layer < tr.config.num_layers and 0 <= head < tr.config.num_heads):
        return False, f"layer must be 0..{tr.config.num_layers - 1} and head 0..{tr.config.num_heads - 1}"
    w, rest = it_to_cat(tr, layer, head)
    if w < 0.3:
        return False, f"in layer {layer}, head {head}, 'it' gives 'cat' only {w:.2f}"
    if w < 2.5 * rest:
        return False, f"'it' -> 'cat' is {w:.2f}, but the other tokens give 'cat' {rest:.2f} on average too"
    return True, f"'it' -> 'cat' {w:.2f}, the other tokens {rest:.2f}: {w / rest:.1f} times more"
