"""Lesson 02 · Embeddings: the checkers."""
from course import close, equals, exercise


@exercise("02.1", hint="X = W['embed.W_T'][ids] + W['embed.W_P'][:n] + W['embed.W_S'][segments], "
                       "with ids = np.array(tr.ids), segments = np.array(tr.segments)")
def _(answer, *, tr):
    return close(answer, tr["embed.sum"], atol=1e-5)


@exercise("02.2", hint="x_hat = (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + eps); "
                       "then gamma * x_hat + beta")
def _(answer, *, tr):
    return close(answer, tr["embed.ln"], atol=1e-4)


@exercise("02.3", hint="every token attends to every other token, so a change in one sentence's inputs "
                       "reaches the other sentence from layer 0 on")
def _(answer, *, actual):
    if not isinstance(answer, bool):
        return False, "answer True or False"
    return equals(answer, actual)


@exercise("02.4", hint="(c.vocab_size + c.max_positions + c.type_vocab_size) * c.hidden_size + 2 * c.hidden_size")
def _(answer, *, ledger):
    return equals(answer, ledger.by_group()["embeddings"])
