"""Lesson 05 · Twelve heads: the checkers."""
import numpy as np

from course.checks import STUB, close, equals, exercise
from exercises._common import f64


def _concat_mistakes(tr, layer):
    Zh = f64(tr.get("attn.context", layer=layer))
    heads, n, d = Zh.shape
    return {"you reshaped without moving the token axis first: each row then mixes tokens of one head":
            Zh.reshape(n, heads * d),
            "you stacked the heads down the rows ([heads * n, d_k]): the concatenation puts them side by side, "
            "[n, heads * d_k]": Zh.reshape(heads * n, d),
            "you added the heads up: the concatenation keeps each head's d_k numbers in its own columns": Zh.sum(0),
            "that is [n, heads, d_k]: flatten the last two axes into one of heads * d_k": Zh.transpose(1, 0, 2),
            "you averaged the heads: the concatenation keeps each head's d_k numbers in its own columns": Zh.mean(0),
            "you moved the axes to [n, d_k, head] before reshaping: each row then interleaves the heads' numbers; "
            "move only the token axis first, [n, head, d_k]": Zh.transpose(1, 2, 0).reshape(n, heads * d)}


@exercise("05.1", hint=("concatenation puts the heads' outputs side by side: token i's row is head 0's d_k numbers, "
                        "then head 1's, and so on: [n, n_h * d_k]",
                        "Zh is [head, n, d_k]: which axis must come first before you reshape, and how wide is "
                        "each token's row afterwards?"),
          mistakes=_concat_mistakes)
def _(answer, *, tr, layer):
    return close(answer, tr.get("attn.concat", layer=layer), atol=1e-6)


def _parts(tr, layer, weights):
    """The head parts written with each mistake: functions of h, as the student writes them."""
    Zh = f64(tr.get("attn.context", layer=layer))
    W_O = f64(weights[f"layer.{layer}.attn.W_O"])
    b_O = f64(weights[f"layer.{layer}.attn.b_O"])
    d = Zh.shape[-1]
    return {"you used W^O transposed: head h's d_k numbers meet rows h * d_k .. (h + 1) * d_k of W^O as stored "
            "([in, out])": lambda h: Zh[h] @ W_O.T[h * d:(h + 1) * d],
            "you added b^O in every head's part: the bias is added once, after the sum over heads":
                lambda h: Zh[h] @ W_O[h * d:(h + 1) * d] + b_O,
            "you multiplied the whole concatenation by W^O in every part: head h's part uses only its own d_k "
            "columns and W^O's matching rows":
                lambda h: np.concatenate(list(Zh), axis=-1) @ W_O,
            "you paired head h with the rows of head h + 1: head h's numbers meet rows h * d_k .. (h + 1) * d_k":
                lambda h: Zh[h] @ W_O[(h + 1) % len(Zh) * d:((h + 1) % len(Zh) + 1) * d]}


def _total(part, heads, bias):
    return sum(f64(part(h)) for h in range(heads)) + bias


@exercise("05.2", hint=("concat W^O splits by head: head h's d_k columns of the concatenation meet W^O's rows "
                        "h * d_k to (h + 1) * d_k",
                        "inside the function: which rows of the layer's W_O belong to head h, and which of the "
                        "heads' outputs do they multiply?"),
          wrong=lambda answer, **_: [lambda h: 2 * answer(h), lambda h: answer(0), None],
          mistakes=_parts)
def _(answer, *, tr, layer, weights):
    if not callable(answer):
        return False, "my_head_part must be a function of the head index h"
    heads, bias = tr.config.num_heads, weights[f"layer.{layer}.attn.b_O"]
    n, H = tr.n, tr.config.hidden_size
    try:
        first = answer(0)
    except ValueError as e:  # a product whose shapes do not meet: say which shapes must meet
        return False, (f"my_head_part(0) raised ValueError ({str(e)[:80]}): Zh[h] is [n, d_k], so it meets d_k rows "
                       "of W^O (stored [in, out]), not d_k of its columns")
    if first is Ellipsis:  # the committed stub, `return ...`: not an answer yet
        return False, STUB
    first = np.shape(first)
    if first == (n, H // heads):
        return False, ("your part is [n, d_k]: you took d_k columns of W^O; head h's d_k numbers meet d_k rows of "
                       "W^O (stored [in, out]), which gives [n, H]")
    if first != (n, H):
        return False, f"my_head_part(0) has shape {first}; each head's part is [n, H] = {(n, H)}"
    total = _total(answer, heads, bias)
    for sentence, part in _parts(tr, layer, weights).items():
        try:
            if close(total, _total(part, heads, bias), atol=1e-4)[0]:
                return False, sentence
        except Exception:
            pass
    return close(total, tr.get("attn.out", layer=layer), atol=1e-4)


@exercise("05.3", hint=("predict first: every later weight was trained on W^O's mix of the heads; "
                        "would they still work on the heads' raw outputs?",),
          prediction=True)
def _(answer, *, actual):
    if not isinstance(answer, (bool, np.bool_)):
        return False, f"answer True or False (a bool); got {type(answer).__name__}"
    return equals(bool(answer), actual)
