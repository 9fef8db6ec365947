"""Lesson 17 · The BERT family: the checkers."""
from course import close, equals, exercise


def _totals(c):
    from bertviz_lite.params import convention_total
    return {"stored": convention_total(c), "one layer": convention_total(c.replace(embedding_size=None)),
            "E = 128": convention_total(c.replace(shared_layers=False)),
            "neither": convention_total(c.replace(embedding_size=None, shared_layers=False))}


@exercise("17.1", hint=("count ALBERT as if it had neither of its savings: embeddings of width H (no projection) and "
                        "L layers that each store their own weights; lesson 09's pieces, with ALBERT's sizes",
                        "the embedding tables are (vocab + positions + segments) x H plus the LayerNorm's 2H; one layer "
                        "is Q, K, V, O, the FFN and two LayerNorms; then the pooler"),
          wrong=lambda answer, config: [t for k, t in _totals(config).items() if k != "neither"])
def _(answer, *, config):
    t = _totals(config)
    known = {t["stored"]: "that is albert-base-v2 as stored (E = 128, one layer): undo both savings",
             t["one layer"]: "E = H now, but you counted one layer: each of the L layers has its own weights",
             t["E = 128"]: "L layers now, but the embeddings are still 128 wide: make them H wide (no projection)"}
    if answer in known:
        return False, known[answer]
    return equals(answer, t["neither"])


@exercise("17.2", hint=("RoBERTa's position ids do not start at 0: they start after the padding row",
                        "position i reads row o + i, with o = padding_idx + 1; the padding id is in the model's config"),
          wrong=lambda answer, model, n: [list(range(n)), list(range(1, n + 1))])
def _(answer, *, model, n):
    o = model.config.position_offset
    if isinstance(answer, (list, tuple)) and list(answer) == list(range(n)):
        return False, "those are BERT's rows 0..n-1; RoBERTa starts at padding_idx + 1"
    return equals([int(i) for i in answer] if isinstance(answer, (list, tuple)) else answer, list(range(o, o + n)))


@exercise("17.3", hint=("the sequence-classification line reads the pooled vector p (pooler.out, shape [H]), not the "
                        "token rows; the answer has one score per label, shape [2]",
                        "y = p W + b: a vector times the head's matrix, then its bias"))
def _(answer, *, expected):
    return close(answer, expected, atol=1e-5)
