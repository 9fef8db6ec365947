"""Lesson 05 · Twelve heads: the checkers."""
import numpy as np

from course import close, equals, exercise


@exercise("05.1", hint=("concatenation puts the heads' outputs side by side: token i's row is head 0's 64 numbers, "
                        "then head 1's, and so on: [n, heads * d_k]",
                        "Zh is [head, n, d_k]: bring the token axis first (transpose), then reshape"))
def _(answer, *, tr, layer):
    Zh = np.asarray(tr.get("attn.context", layer=layer), dtype=np.float64)
    heads, n, d = Zh.shape
    return close(answer, tr.get("attn.concat", layer=layer), atol=1e-6, mistakes={
        "you reshaped without moving the token axis first: each row then mixes tokens of one head":
            Zh.reshape(n, heads * d)})


def _wrong_parts(answer, **_):
    return [lambda h: 2 * answer(h), lambda h: answer(0), None]


@exercise("05.2", hint=("concat W^O splits by head: head h's d_k columns of the concatenation meet W^O's rows "
                        "h * d_k to (h + 1) * d_k",
                        "inside the function: take the layer's W_O from W, slice its rows for head h, and "
                        "multiply head h's output Zh[h] by that slice"),
          wrong=_wrong_parts)
def _(answer, *, tr, layer, weights):
    if not callable(answer):
        return False, "my_head_part must be a function of the head index h"
    heads = tr.config.num_heads
    parts = [np.asarray(answer(h), dtype=np.float64) for h in range(heads)]
    total = sum(parts) + weights[f"layer.{layer}.attn.b_O"]
    return close(total, tr.get("attn.out", layer=layer), atol=1e-4)


@exercise("05.3", hint=("predict first: every later weight was trained on W^O's mix of the heads; "
                        "would they still work on the heads' raw outputs?",),
          prediction=True)
def _(answer, *, actual):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__}"
    return equals(bool(answer), actual)
