"""Lesson 03 · One attention head: the checkers."""
import numpy as np

from course import close, equals, exercise, within


@exercise("03.1", hint="the std of q.k is sqrt(d_k) = 8; dividing by sqrt(768) instead of 8 shrinks it "
                       "by 8 / sqrt(768)", wrong=lambda answer, actual: [1.0, 8.0, -actual])
def _(answer, *, actual):
    return within(answer, 0.7 * actual, 1.3 * actual, "your prediction")  # within 30% of the measured std


@exercise("03.2", hint="scores = Qh @ Kh.T / np.sqrt(d_k), with d_k = Qh.shape[-1]")
def _(answer, *, tr, layer, head):
    return close(answer, tr.get("attn.scores", layer=layer, head=head), atol=1e-4)


@exercise("03.3", hint="Z_h = A_h @ V_h: A_h is tr.get('attn.probs', layer=..., head=...), [n, n]; Vh is [n, d_k]")
def _(answer, *, tr, layer, head):
    return close(answer, tr.get("attn.context", layer=layer, head=head), atol=1e-4)


def it_to_cat(tr, layer, head):
    """('it' -> 'cat' weight, mean weight of every other token on 'cat') in one head."""
    it, cat = tr.tokens.index("it"), tr.tokens.index("cat")
    A = np.asarray(tr.get("attn.probs", layer=layer, head=head), dtype=np.float64)
    others = [i for i in range(tr.n) if i != it]
    return A[it, cat], A[others, cat].mean()


@exercise("03.4", hint="move the layer and head controls of 'Try it' and read the line above the map; "
                       "answer a tuple (layer, head)",
          wrong=lambda answer, tr: [(5, 11), (0, 0), "3, 1", (99, 0)])
def _(answer, *, tr):
    if not (isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(x, (int, np.integer)) for x in answer)):
        return False, "answer a tuple of two integers, (layer, head)"
    layer, head = (int(x) for x in answer)
    if not (0 <= layer < tr.config.num_layers and 0 <= head < tr.config.num_heads):
        return False, f"layer must be 0..{tr.config.num_layers - 1} and head 0..{tr.config.num_heads - 1}"
    w, rest = it_to_cat(tr, layer, head)
    if w < 0.3:
        return False, f"in layer {layer}, head {head}, 'it' gives 'cat' only {w:.2f}"
    if w < 2.5 * rest:
        return False, f"'it' -> 'cat' is {w:.2f}, but the other tokens give 'cat' {rest:.2f} on average too"
    return True, f"'it' -> 'cat' {w:.2f}, the other tokens {rest:.2f}: {w / rest:.1f} times more"
