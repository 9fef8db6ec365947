"""Exercises of lesson 18 (the same trace on a GPU)."""
import numpy as np

from course.checks import close, equals, exercise, within
from exercises._common import f64


def _pair(a_trace, b_trace):
    a = f64(a_trace.get("ffn.act", layer=0))
    b = f64(b_trace.get("ffn.act", layer=0))
    return a, b


def _delta_mistakes(a_trace, b_trace):
    """The signed maxima depend on float noise: which sign the largest difference has changes with the BLAS and
    its thread count, so one of them is the right answer on some machines (the course then leaves it out). The
    last three differ from the largest absolute difference by construction whenever two entries differ."""
    a, b = _pair(a_trace, b_trace)
    d = np.abs(a - b)
    return {"that is the largest signed difference a - b: take the absolute value first": (a - b).max(),
            "that is the largest signed difference b - a: take the absolute value first": (b - a).max(),
            "that is the mean absolute difference: parity is judged by the largest": d.mean(),
            "that is the sum of the absolute differences: take their maximum": d.sum(),
            "that is the root mean square difference: parity is judged by the largest single one":
                np.sqrt((d ** 2).mean())}


@exercise("18.1", hint=("the largest absolute difference over every entry of the two arrays",
                        "a - b can be negative: what must you take before the maximum?"), mistakes=_delta_mistakes)
def _(answer, *, a_trace, b_trace):
    a, b = _pair(a_trace, b_trace)
    return close(answer, np.abs(a - b).max(), atol=1e-12, rtol=1e-9)


def _byte_mistakes(model, text):
    nbytes = model.trace(text, keep=["attn.probs"]).nbytes
    return {"that is the number of entries: each float32 takes 4 bytes": nbytes // 4,
            "that is float64 (8 bytes); the trace stores float32, 4 bytes each": nbytes * 2,
            "that is MiB: the question asks for bytes": nbytes / 2 ** 20,
            "that is one layer's maps: the trace keeps attn.probs of all L layers": nbytes // model.config.num_layers,
            "that is one map: the trace keeps one per head per layer":
                nbytes // (model.config.num_layers * model.config.num_heads)}


@exercise("18.2", hint=("attn.probs holds one n x n map per head per layer, each entry a float32 of 4 bytes",
                        "how many maps are there, how many numbers are in each, and how many bytes does one float32 "
                        "take?"), mistakes=_byte_mistakes)
def _(answer, *, model, text):
    return equals(answer, model.trace(text, keep=["attn.probs"]).nbytes)


@exercise("18.3", hint=("predict first: one map is n x n numbers, and there is one per head per layer; a MiB is 2**20 bytes",
                        "BERT-base's float32 maps at 512 tokens are 144 MiB (lesson 04): which of L, n_h and the bytes "
                        "per number change, and by how much?"),
          prediction=True, wrong=lambda answer, **ctx: [ctx["actual"] * 2, ctx["actual"] / 2, 144, ctx["actual"] * 0.75],
          mistakes=lambda actual: {"that is 4 bytes per number (float32): these maps take 2 bytes each": actual * 2,
                                   "144 MiB is BERT-base's float32 maps: count BERT-large's layers and heads, at 2 "
                                   "bytes each": 144})
def _(answer, *, actual):
    return within(answer, 0.95 * actual, 1.05 * actual, "your prediction (MiB)")
