"""Lesson 04 · One attention head: the checkers."""
import numpy as np

from course.checks import close, exercise, within
from exercises._common import f64, softmax


@exercise("04.1", hint=("a dot product of d_k terms, each about N(0, 1) times N(0, 1), has standard deviation "
                        "sqrt(d_k); the article divides by sqrt(H) instead",),
          prediction=True, wrong=lambda answer, actual: [1.0, 8.0, -actual, 0.5 * actual, 1.5 * actual],
          mistakes=lambda actual: {
              "8 = sqrt(64) is the spread of the unscaled dot product q . k: the question asks for it after dividing "
              "by sqrt(768)": 8.0,
              "1 is the spread after dividing by sqrt(d_k) = 8, the paper's scale; the article divides by sqrt(768), "
              "about 27.7, a larger number": 1.0,
              "that is the ratio upside down, sqrt(768) / 8: dividing by a number larger than 8 makes the spread "
              "smaller than 1": 1 / actual})
def _(answer, *, actual):
    return within(answer, 0.85 * actual, 1.15 * actual, "your prediction")  # the ratio 8 / sqrt(768), not a guess


def _qk(tr, layer, head):
    return _f64(tr, "attn.q", layer, head), _f64(tr, "attn.k", layer, head)


def _f64(tr, key, layer, head):
    return f64(tr.get(key, layer=layer, head=head))


def _score_mistakes(tr, layer, head):
    Q, K = _qk(tr, layer, head)
    d_k, H = Q.shape[-1], tr.config.hidden_size
    return {"you divided by sqrt(H), the model width: the scores use sqrt(d_k), the head width": Q @ K.T / np.sqrt(H),
            "you did not scale: divide Q K^T by sqrt(d_k)": Q @ K.T,
            "you computed K Q^T: rows must be queries, so Q K^T": K @ Q.T / np.sqrt(d_k),
            "you divided by d_k: the scale is its square root": Q @ K.T / d_k,
            f"you divided by 8 = sqrt(64), BERT-base's d_k: this model's heads have d_k = {d_k} (Q.shape[-1]), "
            f"so divide by sqrt({d_k})": Q @ K.T / 8.0,
            "that is the softmax of the scores (the map attn.probs): the scores are the step before it":
                softmax(Q @ K.T / np.sqrt(d_k), axis=-1),
            "you computed Q^T K, [d_k, d_k]: the scores pair tokens, so Q K^T is [n, n]": Q.T @ K / np.sqrt(d_k)}


@exercise("04.2", hint=("scores[i, j] is query i dotted with key j, divided by sqrt(d_k): the result is [n, n]",
                        "Q is [n, d_k] and K is [n, d_k]: which of them must be transposed so the product is "
                        "[n, n], and what is d_k here, 64, 32 or ___?"), mistakes=_score_mistakes)
def _(answer, *, tr, layer, head):
    return close(answer, tr.get("attn.scores", layer=layer, head=head), atol=1e-4)


def _context_mistakes(tr, layer, head):
    A, V = _f64(tr, "attn.probs", layer, head), _f64(tr, "attn.v", layer, head)
    S = _f64(tr, "attn.scores", layer, head)
    return {"you used the map transposed (A^T V): row i of A holds query i's weights": A.T @ V,
            "you used the scores, not the softmax probabilities": np.where(np.isfinite(S), S, 0.0) @ V,
            "your softmax ran over the queries (axis 0): each query's row must sum to 1, so softmax over the keys":
                softmax(S, axis=0) @ V,
            "you weighted the keys K: the output mixes the value rows V": A @ _f64(tr, "attn.k", layer, head),
            "you took exp of the scores without normalising: divide each row by its sum (that is the softmax), so "
            "the weights sum to 1": np.exp(S) @ V,
            "you took exp of the shifted scores without normalising: after exp, divide each row by its sum, so the "
            "weights sum to 1": np.exp(S - S.max(-1, keepdims=True)) @ V}


@exercise("04.3", hint=("each output row is a weighted sum of the value rows, with the attention row as weights",
                        "the map is [n, n] (tr.get('attn.probs', ...)) and the values [n, d_k]: which goes first "
                        "in the product so that row i mixes the values with query i's ___?"),
          mistakes=_context_mistakes)
def _(answer, *, tr, layer, head):
    return close(answer, tr.get("attn.context", layer=layer, head=head), atol=1e-4)


def _pair(answer):
    """(layer, head) from a tuple, a list or an array of two whole numbers; None for anything else."""
    items = answer.tolist() if isinstance(answer, np.ndarray) and answer.ndim == 1 else answer
    if not isinstance(items, (list, tuple)) or len(items) != 2:
        return None
    if not all(isinstance(x, (int, np.integer, float, np.floating)) and not isinstance(x, (bool, np.bool_))
               and float(x).is_integer() for x in items):
        return None
    return tuple(int(x) for x in items)


def it_to_cat(tr, layer, head):
    """('it' -> 'cat' weight, mean weight of every other token on 'cat') in one head."""
    it, cat = tr.tokens.index("it"), tr.tokens.index("cat")
    A = f64(tr.get("attn.probs", layer=layer, head=head))
    others = [i for i in range(tr.n) if i != it]
    return A[it, cat], A[others, cat].mean()


@exercise("04.4", hint=("move the layer and head controls of 'Try it' and read the line above the map; "
                        "answer a tuple (layer, head)",
                        "does your head give 'it' -> 'cat' a large weight that the ___ tokens do not give 'cat'?"),
          wrong=lambda answer, tr: [(5, 11), (0, 0), "3, 1", (99, 0)], open_ended=True,
          mistakes=lambda tr: {"answer the layer and the head as two whole numbers, (layer, head), not text": "3, 1"})
def _(answer, *, tr):
    pair = _pair(answer)
    if pair is None:
        return False, f"answer two whole numbers, (layer, head); got {type(answer).__name__} {answer!r}"[:200]
    layer, head = pair
    if not (0 <= layer < tr.config.num_layers and 0 <= head < tr.config.num_heads):
        return False, f"layer must be 0..{tr.config.num_layers - 1} and head 0..{tr.config.num_heads - 1}"
    w, rest = it_to_cat(tr, layer, head)
    if w < 0.3:
        return False, f"in layer {layer}, head {head}, 'it' gives 'cat' only {w:.2f}"
    if w < 2.5 * rest:
        return False, f"'it' -> 'cat' is {w:.2f}, but the other tokens give 'cat' {rest:.2f} on average too"
    return True, f"'it' -> 'cat' {w:.2f}, the other tokens {rest:.2f}: {w / rest:.1f} times more"
