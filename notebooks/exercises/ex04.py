"""Lesson 04 · Twelve heads: the checkers."""
import numpy as np

from course import close, equals, exercise


@exercise("04.1", hint="Zh.transpose(1, 0, 2) is [n, head, d_k]; .reshape(n, head * d_k) puts the heads side by side")
def _(answer, *, tr, layer):
    return close(answer, tr.get("attn.concat", layer=layer), atol=1e-6)


def _wrong_parts(answer, **_):
    return [lambda h: 2 * answer(h), lambda h: answer(0), None]


@exercise("04.2", hint="W_O = W[f'layer.{LAYER}.attn.W_O']; return Zh[h] @ W_O[h * d:(h + 1) * d]",
          wrong=_wrong_parts)
def _(answer, *, tr, layer, weights):
    if not callable(answer):
        return False, "my_head_part must be a function of the head index h"
    heads = tr.config.num_heads
    parts = [np.asarray(answer(h), dtype=np.float64) for h in range(heads)]
    total = sum(parts) + weights[f"layer.{layer}.attn.b_O"]
    return close(total, tr.get("attn.out", layer=layer), atol=1e-4)


@exercise("04.3", hint="look at how far the real model's per-head outputs are mixed by W^O (the Try-it "
                       "shares): every later weight was trained on that mix")
def _(answer, *, actual):
    if not isinstance(answer, bool):
        return False, "answer True or False"
    return equals(answer, actual)
