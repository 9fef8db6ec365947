"""Lesson 17 · The BERT family: the checkers."""
import numpy as np

from course.checks import close, equals, exercise, sequence
from exercises._common import f64


def _totals(c):
    from bertviz_lite.params import convention_total
    return {"stored": convention_total(c), "one layer": convention_total(c.replace(embedding_size=None)),
            "E = 128": convention_total(c.replace(shared_layers=False)),
            "neither": convention_total(c.replace(embedding_size=None, shared_layers=False)),
            "BERT's vocabulary": convention_total(c.replace(embedding_size=None, shared_layers=False,
                                                             vocab_size=30522))}


def _albert_mistakes(config):
    t = _totals(config)
    bert = t["BERT's vocabulary"]
    return {"that is albert-base-v2 as stored (E = 128, one layer): undo both savings": t["stored"],
            "E = H now, but you counted one layer: each of the L layers has its own weights": t["one layer"],
            "L layers now, but the embeddings are still 128 wide: make them H wide (no projection)": t["E = 128"],
            f"that is BERT-base's BertModel ({bert:,}): you used BERT's "
            f"30,522-piece vocabulary; ALBERT's has {config.vocab_size:,} (configs['albert-base-v2'].vocab_size)":
                t["BERT's vocabulary"],
            "you left out the pooler, an H x H matrix and its bias":
                t["neither"] - config.hidden_size ** 2 - config.hidden_size}


@exercise("17.1", hint=("count ALBERT as if it had neither of its savings: embeddings of width H (no projection) and "
                        "L layers that each store their own weights; lesson 09's pieces, with ALBERT's sizes",
                        "which of c's sizes go into the embedding tables (vocab_size: BERT's or ALBERT's?), and how "
                        "many times do you count one layer: once or ___?"),
          wrong=lambda answer, config: [t for k, t in _totals(config).items() if k != "neither"],
          mistakes=_albert_mistakes)
def _(answer, *, config):
    return equals(answer, _totals(config)["neither"])


def _row_mistakes(model, n):
    o = model.config.position_offset
    return {"those are BERT's rows 0..n-1; RoBERTa starts at padding_idx + 1": list(range(n)),
            "you started at the padding row itself, padding_idx: RoBERTa starts one after it":
                list(range(o - 1, o - 1 + n)),
            "every token reads its own row: o, o + 1, ..., not o for all": [o] * n,
            "that is n + 1 rows: one row per token, n in all": list(range(o, o + n + 1))}


@exercise("17.2", hint=("RoBERTa's position ids do not start at 0: they start after the padding row",
                        "what is rob.config.pad_token_id, and which row after the padding row does the first token "
                        "read?"),
          wrong=lambda answer, model, n: [list(range(n)), list(range(1, n + 1))], mistakes=_row_mistakes)
def _(answer, *, model, n):
    o = model.config.position_offset
    return sequence(answer, list(range(o, o + n)), "your rows")


def _logit_mistakes(tr, model):
    p = f64(tr["pooler.out"])
    W, b = (f64(model.weights[k]) for k in ("head.W", "head.b"))
    Z_L = f64(tr[f"layer.{model.config.num_layers - 1}.ffn.ln"])
    return {"you left out the bias b": p @ W,
            "you read the [CLS] row of Z_L: the head reads the pooled vector p = pooler.out": Z_L[0] @ W + b,
            "those are probabilities (a softmax): the head's output y is the logits before it":
                np.exp(p @ W + b) / np.exp(p @ W + b).sum(),
            "that is the predicted label (the argmax): the answer is the two logits themselves":
                int(np.argmax(p @ W + b))}


@exercise("17.3", hint=("the sequence-classification line reads the pooled vector p (pooler.out, shape [H]), not the "
                        "token rows; the answer has one score per label, shape [2]",
                        "y = p W + b: which vector is p, and what is added after the product?"),
          mistakes=_logit_mistakes)
def _(answer, *, tr, model):
    return close(answer, tr["head.logits"], atol=1e-5)
