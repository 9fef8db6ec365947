"""Exercises of lesson 18 (the same trace on a GPU)."""
import numpy as np

from course import close, equals, exercise, within


@exercise("18.1", hint=("the largest absolute difference over every entry of the two arrays",
                        "subtract, take the absolute value, then the maximum"))
def _(answer, *, a_trace, b_trace):
    a = np.asarray(a_trace.get("ffn.act", layer=0), dtype=np.float64)
    b = np.asarray(b_trace.get("ffn.act", layer=0), dtype=np.float64)
    return close(answer, np.abs(a - b).max(), atol=1e-12, rtol=1e-9)


@exercise("18.2", hint=("attn.probs holds one n x n map per head per layer, each entry a float32 of 4 bytes",
                        "multiply the number of layers, the heads per layer, n_long twice and the bytes per number"))
def _(answer, *, model, text):
    return equals(answer, model.trace(text, keep=["attn.probs"]).nbytes)


@exercise("18.3", hint=("predict first: one map is n x n numbers, and there is one per head per layer; a MiB is 2**20 bytes",
                        "BERT-base's float32 maps at 512 tokens are 144 MiB (lesson 04): which of L, n_h and the bytes "
                        "per number change, and by how much?"),
          prediction=True, wrong=lambda answer, **ctx: [ctx["actual"] * 2, ctx["actual"] / 2, 144, ctx["actual"] * 0.75])
def _(answer, *, actual):
    return within(answer, 0.95 * actual, 1.05 * actual, "your prediction (MiB)")
