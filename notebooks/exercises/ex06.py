"""Lesson 06 · The feed-forward block: the checkers."""
from course import close, exercise, within


@exercise("06.1", hint="0.5 * pre * (1 + erf(pre / np.sqrt(2)))")
def _(answer, *, tr, layer):
    return close(answer, tr.get("ffn.act", layer=layer), atol=1e-5)


@exercise("06.2", hint="ReLU drops the negative side, where most pre-activations are (the Check section); "
                       "a cosine near 1 would mean nothing changed",
          wrong=lambda answer, actual: [1.0, -1.0, 2.0, "0.5"])
def _(answer, *, actual):
    return within(answer, actual - 0.25, actual + 0.25, "your prediction")


@exercise("06.3", hint="z_out = ffn.act @ W_down + b_down; r = attn.ln + z_out; "
                       "gamma * (r - mean) / sqrt(var + eps) + beta, per row")
def _(answer, *, tr, layer):
    return close(answer, tr.get("ffn.ln", layer=layer), atol=1e-4)
