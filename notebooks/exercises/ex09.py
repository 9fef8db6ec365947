"""Exercises of lesson 09 (pooler and masked-language modelling)."""
from course import close, equals, exercise


@exercise("09.1", hint="p = np.tanh(Z_L[0] @ W + b): the [CLS] row only, then tanh")
def _(answer, *, tr):
    return close(answer, tr["pooler.out"], atol=1e-5)


@exercise("09.2", hint="x = Z_L[m] @ w['mlm.W_t'] + w['mlm.b_t']; GELU; LayerNorm over the H features; "
                       "then x @ w['embed.W_T'].T + w['mlm.bias'] (the token table, transposed)")
def _(answer, *, tr, m):
    return close(answer, tr["mlm.logits"][m], atol=1e-3, rtol=1e-4)


@exercise("09.3", hint="run the cell: one [MASK] holds one word piece; count the pieces")
def _(answer, *, model, word):
    return equals(answer, len(model.tokenize(word).tokens) - 2)
