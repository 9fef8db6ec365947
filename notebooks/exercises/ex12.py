"""Exercises of lesson 12 (the same trace on a GPU)."""
import numpy as np

from course import close, equals, exercise, within


@exercise("12.1", hint="np.abs(a - b).max()")
def _(answer, *, a_trace, b_trace):
    a = np.asarray(a_trace.get("ffn.act", layer=0), dtype=np.float64)
    b = np.asarray(b_trace.get("ffn.act", layer=0), dtype=np.float64)
    return close(answer, np.abs(a - b).max(), atol=1e-12, rtol=1e-9)


@exercise("12.2", hint="cfg.num_layers * cfg.num_heads * n_long * n_long * 4")
def _(answer, *, model, text):
    return equals(answer, model.trace(text, keep=["attn.probs"]).nbytes)


@exercise("12.3", hint="12 layers x 12 heads x 512 x 512 numbers x 4 bytes, divided by 2**20",
          wrong=lambda answer, **ctx: [ctx["actual"] * 2, ctx["actual"] / 12])
def _(answer, *, actual):
    return within(answer, 0.95 * actual, 1.05 * actual, "your prediction (MiB)")
