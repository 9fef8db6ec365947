"""A small masked task whose rule a person can see, for training a small BERT from scratch (lesson 11).

The mirror task: a "sentence" is `half` random letters followed by the same letters in reverse order,
between [CLS] and [SEP]:

    [CLS] c a f b | b f a c [SEP]      (no bar: the second half starts at position half + 1)

One letter is replaced by [MASK]; the answer is the letter at the mirror position, which the model can
see. Position i (1 .. 2 half) mirrors position 2 half + 1 - i, so a head whose map is the anti-diagonal
solves it: the [MASK] row looks at its mirror and copies the letter there. Chance is 1 / letters.

The vocabulary is the four special pieces and the letters, so a model for it is `bv.load("random",
config=task.config(...))` (the small vocabulary has no WordPiece tokenizer: trace it with `trace_ids`,
passing `tokens=task.tokens(ids)`). Sentences come out as `mlm.Masked` records and batches as
`mlm.Batch`, so `mlm.loss_and_grads` and `backward.*` train on them as on MiniLM's text.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from . import mlm
from .errors import TraceTooLargeError, as_int
from .trace import DEFAULT_MAX_TRACE_BYTES, check_max_bytes

SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")  # ids 0..3: the ids BertConfig and the engine expect for [PAD]
PAD, CLS, SEP, MASK = range(4)
MAX_HALF = 255  # a sentence of at most 512 pieces, BERT's position table
SENTENCE_BYTES = 400  # a sampled sentence's Python objects beside its ids (8 bytes each), measured: ~360-400


@dataclass(frozen=True)
class MirrorTask:
    """The mirror task: `half` letters, then the same letters reversed; one letter hidden by [MASK]."""

    half: int = 8  # letters before the mirror: a sentence is 2 half + 2 pieces with [CLS] and [SEP]
    letters: int = 16  # distinct letters, 'a', 'b', ...: chance is 1 / letters

    def __post_init__(self):
        half, letters = as_int(self.half, "MirrorTask's half"), as_int(self.letters, "MirrorTask's letters")
        if not 1 <= half <= MAX_HALF:
            raise ValueError(f"MirrorTask(half={half!r}): give a whole number of letters, 1 to {MAX_HALF} (a sentence "
                             f"is 2 half + 2 pieces, and BERT's position table holds 512)")
        if not 2 <= letters <= 26:
            raise ValueError(f"MirrorTask(letters={letters!r}): give 2 to 26 distinct letters")
        object.__setattr__(self, "half", half)  # numpy's integers stored as int (frozen dataclass)
        object.__setattr__(self, "letters", letters)

    @property
    def length(self) -> int:
        """Pieces per sentence, [CLS] and [SEP] included."""
        return 2 * self.half + 2

    @property
    def vocab(self) -> tuple[str, ...]:
        """Every piece by id: the four special pieces, then the letters."""
        return SPECIALS + tuple(string.ascii_lowercase[:self.letters])

    def tokens(self, ids) -> list[str]:
        """The pieces of a sentence's ids (for trace_ids(..., tokens=))."""
        vocab = self.vocab
        ids = [as_int(i, "a token id") for i in ids]
        bad = [i for i in ids if not 0 <= i < len(vocab)]
        if bad:  # -1 would wrap to the last letter
            raise ValueError(f"token id {bad[0]} is outside the task's vocabulary 0 .. {len(vocab) - 1}")
        return [vocab[i] for i in ids]

    def mirror(self, position: int) -> int:
        """The position a letter's copy sits at: i <-> 2 half + 1 - i."""
        if not 1 <= position <= 2 * self.half:
            raise ValueError(f"position {position} holds no letter: letters sit at 1 .. {2 * self.half}")
        return 2 * self.half + 1 - position

    def config(self, *, hidden: int = 64, heads: int = 4, layers: int = 2) -> dict:
        """The changes to BERT-base's config for a small BERT on this task (for bv.load('random', config=))."""
        return {"vocab_size": len(self.vocab), "hidden_size": hidden, "num_heads": heads, "num_layers": layers,
                "ffn_size": 4 * hidden, "max_positions": self.length, "type_vocab_size": 1}

    def sample(self, count: int, rng, *, max_bytes=None) -> list:
        """`count` sentences, each with one letter hidden by [MASK]: a list of mlm.Masked (rng: numpy's Generator).
        max_bytes: the budget for the sentences' Python objects (2 GiB by default, as trace()'s)."""
        count = as_int(count, "count")
        if count < 0:
            raise ValueError(f"count must be a whole number of sentences, 0 or more, got {count}")
        check_max_bytes(max_bytes)
        need = count * (SENTENCE_BYTES + 8 * self.length)
        limit = DEFAULT_MAX_TRACE_BYTES if max_bytes is None else max_bytes
        if need > limit:
            raise TraceTooLargeError(
                f"{count:,} sentences of {self.length} pieces would hold about {need / 2**20:,.0f} MiB as Python "
                f"lists, over the budget of {limit / 2**20:,.0f} MiB: sample fewer (a minibatch at a time, as fit "
                f"does), or raise max_bytes=")
        out = []
        for _ in range(count):
            first = [len(SPECIALS) + int(x) for x in rng.integers(0, self.letters, self.half)]
            ids = [CLS] + first + first[::-1] + [SEP]
            p = int(rng.integers(1, 2 * self.half + 1))
            masked = list(ids)
            masked[p] = MASK
            out.append(mlm.Masked(masked, [p], [ids[p]], ["mask"]))
        return out

    def batch(self, model, masked: list) -> mlm.Batch:
        """The sentences as one training batch for every layer of `model` (first = 0: the embeddings are the
        input the layers train on; they, and the tied decoder W_T, stay as initialised)."""
        xp = model.xp
        if len(masked) == 0:
            raise ValueError("the batch has no sentence: pass at least one, e.g. task.sample(1, rng)")
        ids = [m.ids for m in masked]  # [B, n]: every sentence is `length` long
        if any(len(row) != self.length for row in ids):
            raise ValueError(f"the sentences are {sorted({len(r) for r in ids})} long, the task's are {self.length}")
        mask = [[1] * self.length for _ in ids]  # no padding: every sentence has the task's length
        Z = mlm.frozen_layers(model, xp.asarray(ids, dtype=xp.int64), mask, 0)  # [B, n, H]
        rows = [b * self.length + p for b, m in enumerate(masked) for p in m.positions]
        targets = [t for m in masked for t in m.targets]
        return mlm.Batch(Z, xp.asarray(mask, dtype=xp.int64), xp.asarray(rows, dtype=xp.int64),
                         xp.asarray(targets, dtype=xp.int64), 0)


def accuracy(params: dict, frozen: dict, batch: mlm.Batch, c, xp) -> float:
    """The share of the batch's hidden letters whose highest logit is the right letter."""
    ranks, _ = mlm.ranks_and_losses(params, frozen, [batch], c, xp)
    return float(xp.mean(xp.astype(ranks == 0, xp.float64)))


def fit(params: dict, step, steps: int, rng, *, minibatch, grad_fn, heldout, every: int):
    """A plain training loop: `steps` times, a fresh minibatch(rng), its loss and gradients
    grad_fn(params, batch) -> (loss, grads), then params = step(params, grads) (SGD, Adam: any rule).
    Every `every` steps (and after the last) a row (step, mean training loss since the last row,
    heldout(params)) goes on the curve. Returns (params, curve)."""
    mlm._positive_whole("steps", steps)
    mlm._positive_whole("every", every)
    curve, losses = [], []
    for s in range(1, steps + 1):
        loss, grads = grad_fn(params, minibatch(rng))
        params = step(params, grads)
        losses.append(float(loss))
        if s % every == 0 or s == steps:
            curve.append((s, sum(losses) / len(losses), heldout(params)))
            losses = []
    return params, curve
