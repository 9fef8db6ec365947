"""The shape of a BERT model: BERT-base by default (Devlin et al. 2019, section 3).

`BertConfig` mirrors the fields of a Hugging Face `config.json` for `BertModel`,
with the course's symbols (L, H, n_h, d_k; `schema.SYMBOLS`) in the comments, and reads that file directly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from . import families

MAX_SIZE = 2**63 - 1  # no array index goes beyond; larger is a broken config (10**400 overflowed a float later)
MIN_EPS, MAX_EPS = 1e-30, 1.0  # layer_norm_eps: a floor far below BERT's 1e-12; at 1 it outweighs the variance
MAX_LABELS = 100_000  # a task head's labels (named entity sets: tens; the largest label sets: ~22,000)


def _short(value) -> str:
    """A config value for an error message, cut short (a 400-digit number, a long list)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# hidden_act values of a hugging face config -> the activation the engine computes.
# "gelu" is the exact erf form BERT was trained with; the others are the approximations
# and the relu that popular write-ups use (see lesson 07).
ACTIVATIONS = {
    "gelu": "gelu",  # x * Phi(x), Phi via erf
    "gelu_new": "gelu_tanh",  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "quick_gelu": "gelu_sigmoid",  # x * sigmoid(1.702 x), the article's form
    "gelu_sigmoid": "gelu_sigmoid",
    "gelu_tanh": "gelu_tanh",
    "relu": "relu",  # max(0, x), what the formula card writes
}


@dataclass(frozen=True)
class BertConfig:
    """Sizes and constants of a BERT encoder. Defaults are BERT-base (uncased)."""

    vocab_size: int = 30522  # wordpiece vocabulary of bert-base-uncased
    hidden_size: int = 768  # H, the width of every token vector
    num_layers: int = 12  # L, encoder layers stacked
    num_heads: int = 12  # n_h, attention heads per layer; each is d_k = H / n_h = 64 wide
    ffn_size: int = 3072  # d_ffnn = 4H, the feed-forward layer's inner width
    max_positions: int = 512  # rows of the position table: the longest input
    type_vocab_size: int = 2  # segment (token type) ids: sentence A = 0, sentence B = 1
    layer_norm_eps: float = 1e-12  # bert's own epsilon, far below the 1e-5 of most libraries
    hidden_act: str = "gelu"  # exact erf gelu; see ACTIVATIONS for the others
    initializer_range: float = 0.02  # std of the N(0, 0.02) initialisation
    pad_token_id: int = 0  # [PAD] in the bert vocabulary
    attention_scale: float | None = None  # None: 1/sqrt(d_k). a what-if knob for lesson 13 (1/sqrt(H))
    tie_word_embeddings: bool = True  # the mlm output matrix is W_T itself; False: a separate decoder W_out
    # the family's switches (its families.py record sets them from config.json's model_type; BERT's: the defaults)
    model_type: str = "bert"  # a record of families.py: bert, roberta, distilbert, electra or albert
    embedding_size: int | None = None  # E, width of the embedding tables; None: E = H. ALBERT and ELECTRA project E -> H
    position_offset: int = 0  # first row of W_P that position 0 reads: RoBERTa's padding_idx + 1
    shared_layers: bool = False  # ALBERT: every layer runs layer 0's weights (the trace still has a key per layer)
    pooler_act: str = "tanh"  # the pooler's nonlinearity: tanh (BERT), relu (DistilBERT's pre_classifier), gelu (ELECTRA)
    head: str | None = None  # the task head on top (HEADS), from config.json's architectures; None: none
    labels: tuple[str, ...] = ()  # the head's label names in id order (config.json's id2label)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))  # a list from a dict of changes is fine
        if self.head in FIXED_LABELS and not self.labels:
            object.__setattr__(self, "labels", FIXED_LABELS[self.head])
        problems = []
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_size",
                     "max_positions", "type_vocab_size", "embed_size"):
            value = getattr(self, name)
            low = 0 if name == "type_vocab_size" else 1  # 0: no segment table (DistilBERT), S = 0
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                problems.append(f"{name} must be a {'non-negative' if low == 0 else 'positive'} integer, "
                                f"got {_short(value)}")
            elif value > MAX_SIZE:  # 10**400 would overflow float arithmetic further on
                problems.append(f"{name} {_short(value)} is larger than any model ({MAX_SIZE:,} at most)")
        if not problems and (isinstance(self.pad_token_id, bool) or not isinstance(self.pad_token_id, int)
                             or not 0 <= self.pad_token_id < self.vocab_size):
            problems.append(f"pad_token_id must be a token id 0..{self.vocab_size - 1} (the [PAD] token's), "
                            f"got {_short(self.pad_token_id)}")
        if len(self.labels) > MAX_LABELS:
            problems.append(f"{len(self.labels):,} labels is more than {MAX_LABELS:,}")
        if not problems and self.hidden_size % self.num_heads:
            problems.append(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        wrong = [f"{k} must be a string, got {type(getattr(self, k)).__name__} {_short(getattr(self, k))}"
                 for k in ("hidden_act", "model_type", "pooler_act") if not isinstance(getattr(self, k), str)]
        if wrong:  # (the checks below look them up: a list was "unhashable type: 'list'")
            raise ValueError("invalid BertConfig: " + "; ".join(problems + wrong))
        if self.hidden_act not in ACTIVATIONS:
            problems.append(f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(ACTIVATIONS)}")
        if not isinstance(self.tie_word_embeddings, bool):
            problems.append(f"tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not MIN_EPS <= eps <= MAX_EPS:
            # N29: Infinity or 1e300 loaded, and every LayerNorm gave its beta (a trace off by 3.2, no warning)
            problems.append(f"layer_norm_eps must be a number from {MIN_EPS:g} to {MAX_EPS:g} (BERT's is 1e-12, "
                            f"most libraries' 1e-5), got {_short(eps)}")
        if self.attention_scale is not None and (isinstance(self.attention_scale, bool) or not isinstance(
                self.attention_scale, numbers.Real) or not math.isfinite(self.attention_scale)):
            problems.append(f"attention_scale must be None (1/sqrt(d_head)) or a finite number, got "
                            f"{self.attention_scale!r}")
        if self.model_type not in families.FAMILIES:
            problems.append(f"model_type {self.model_type!r} is not supported; use one of {sorted(families.FAMILIES)}")
        if self.pooler_act not in ("tanh", "relu", "gelu"):
            problems.append(f"pooler_act must be tanh, relu or gelu, got {self.pooler_act!r}")
        if self.head is not None and self.head not in HEADS:
            problems.append(f"head {self.head!r} is not one of {sorted(HEADS)}")
        elif self.head is not None and not self.labels:
            problems.append(f"the {self.head} head needs its labels (config.json's id2label)")
        if problems:
            raise ValueError("invalid BertConfig: " + "; ".join(problems))

    @property
    def head_size(self) -> int:
        """d_k = d_q = d_v = H / n_h, the head width (64 for BERT-base)."""
        return self.hidden_size // self.num_heads

    @property
    def scale(self) -> float:
        """What the attention scores are multiplied by: attention_scale, or 1/sqrt(d_k) when it is None."""
        return self.attention_scale if self.attention_scale is not None else 1.0 / math.sqrt(self.head_size)

    @property
    def embed_size(self) -> int:
        """E, the width of the embedding tables: H, except where a projection E -> H follows (ALBERT, ELECTRA)."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @property
    def activation(self) -> str:
        """The activation the engine computes: gelu, gelu_tanh, gelu_sigmoid or relu."""
        return ACTIVATIONS[self.hidden_act]

    def replace(self, **changes) -> "BertConfig":
        """A copy with some fields changed (the config is frozen)."""
        return dataclasses.replace(self, **changes)

    # hugging face names -> ours
    _HF_NAMES = {
        "vocab_size": "vocab_size",
        "hidden_size": "hidden_size",
        "num_hidden_layers": "num_layers",
        "num_attention_heads": "num_heads",
        "intermediate_size": "ffn_size",
        "max_position_embeddings": "max_positions",
        "type_vocab_size": "type_vocab_size",
        "layer_norm_eps": "layer_norm_eps",
        "hidden_act": "hidden_act",
        "initializer_range": "initializer_range",
        "pad_token_id": "pad_token_id",
        "tie_word_embeddings": "tie_word_embeddings",
        "embedding_size": "embedding_size",
    }

    @classmethod
    def from_hf_dict(cls, d: dict) -> "BertConfig":
        """Read the fields of a Hugging Face BertConfig dict (config.json)."""
        if not isinstance(d, dict):
            raise ValueError(f"expected a JSON object of BERT settings (hidden_size, num_hidden_layers, ...), "
                             f"got {type(d).__name__} {str(d)[:40]}")
        for key in ("model_type", "hidden_act", *(k for f in families.FAMILIES.values() for k, v in f.renamed.items()
                                                  if v == "hidden_act")):
            if key in d and d[key] is not None and not isinstance(d[key], str):
                # N29: a list gave "unhashable type: 'list'"
                raise ValueError(f"config.json's {key} must be a string such as \"gelu\" or \"bert\", got "
                                 f"{type(d[key]).__name__} {_short(d[key])}")
        family = d.get("model_type", "bert")
        if family not in families.FAMILIES:
            raise ValueError(f"config.json describes model_type {family!r}; bertviz-lite reads "
                             f"{', '.join(sorted(families.FAMILIES))}")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported, got "
                             f"position_embedding_type={d['position_embedding_type']!r}")
        check_encoder(d)
        d = {**d, **{bert: d[its] for its, bert in families.family(family).renamed.items() if its in d}}
        kwargs = {ours: d[hf] for hf, ours in cls._HF_NAMES.items() if hf in d and d[hf] is not None}
        kwargs.update(family_switches(family, d))
        kwargs.update(head_from_architectures(family, d))
        return cls(**kwargs)

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        """Read a Hugging Face config.json file."""
        with open(path, encoding="utf-8") as f:
            return cls.from_hf_dict(json.load(f))

    def to_hf_dict(self) -> dict:
        """The Hugging Face config.json fields for this config (used to build the reference model)."""
        d = {hf: getattr(self, ours) for hf, ours in self._HF_NAMES.items()}
        d["model_type"] = self.model_type
        return d


# config.json switches that make Hugging Face's model something other than the encoder the engine computes
NOT_AN_ENCODER = {
    "is_decoder": "a decoder: transformers masks its attention causally (each token sees only itself and the "
                  "tokens before it), where bertviz-lite's engine lets every token attend both ways",
    "add_cross_attention": "a decoder with cross-attention layers that read an encoder's output, which "
                           "bertviz-lite's engine does not compute",
}


def check_encoder(d: dict) -> None:
    """Refuse a config.json that describes a decoder (N36: traced as an encoder, its maps were wrong by up to 0.88)."""
    for key, what in NOT_AN_ENCODER.items():
        value = d.get(key, False)
        if value is None or value is False:
            continue
        if value is not True:
            raise ValueError(f"config.json's {key} must be true or false, got {type(value).__name__} {_short(value)}")
        raise ValueError(f"config.json sets {key}: true, so this checkpoint is {what}. bertviz-lite traces "
                         f"encoders only: load an encoder checkpoint, or set {key} to false if the model was "
                         "trained as an encoder")


# ------------------------------------------------------------------------------------------
# the family: what each model_type changes, as switches of the one engine (families.py's records)
# ------------------------------------------------------------------------------------------

def family_switches(family: str, d: dict) -> dict:
    """The config switches a model_type sets: each is one readable difference from BERT."""
    return {"model_type": family, **families.family(family).switches(d)}


# the task heads: name -> what it computes (each is one formula line, schema's head.logits rows)
HEADS = {
    "sequence_classification": "one label for the whole input, from the pooled [CLS] vector",
    "token_classification": "one label per token",
    "question_answering": "a start and an end score per token",
    "next_sentence": "is sentence B the continuation of sentence A? (from the pooled vector)",
    "replaced_token": "ELECTRA's discriminator: was each token replaced?",
}
FIXED_LABELS = {"question_answering": ("start", "end"), "next_sentence": ("isNext", "notNext"),
                "replaced_token": ("replaced",)}


def head_from_architectures(family: str, d: dict) -> dict:
    """head and labels from config.json's architectures and id2label; an unknown head is an error."""
    archs = d.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError(f"architectures must be a list of class names such as [\"BertModel\"], got "
                         f"{type(archs).__name__} {_short(archs)}")
    if not archs:
        return {}
    if len(archs) != 1:
        raise ValueError(f"config.json lists {len(archs)} architectures {_short(archs)}; expected one")
    arch, record = archs[0], families.family(family)
    if arch in record.refused:
        raise ValueError(record.refused[arch])
    if arch not in record.architectures:
        raise ValueError(f"config.json's architecture {arch!r} carries a head bertviz-lite does not compute; "
                         f"it reads {', '.join(sorted(record.architectures))}")
    head = record.architectures[arch]
    if head is None:
        return {}
    if head in FIXED_LABELS:
        return {"head": head, "labels": FIXED_LABELS[head]}
    return {"head": head, "labels": read_labels(d)}


def read_labels(d: dict) -> tuple[str, ...]:
    """The head's label names in id order: id2label's, else LABEL_0.. for num_labels. Sizes and types
    are checked before anything is built (num_labels 10**9 once built a 3 GB dict)."""
    id2label = d.get("id2label")
    if id2label:
        if not isinstance(id2label, dict) or len(id2label) > MAX_LABELS:
            size = f" of {len(id2label):,}" if isinstance(id2label, (dict, list, str)) else f" {_short(id2label)}"
            raise ValueError(f"id2label must be an object of at most {MAX_LABELS:,} id: name entries, got "
                             f"{type(id2label).__name__}{size}")
        try:
            ids = sorted(int(k) for k in id2label)
        except (TypeError, ValueError):
            raise ValueError("id2label's keys must be the label ids 0, 1, ... as strings") from None
        if ids != list(range(len(ids))):
            raise ValueError(f"id2label's keys must be 0..{len(ids) - 1}, each once")
        by_id = {int(k): v for k, v in id2label.items()}
        return tuple(str(by_id[i]) for i in range(len(ids)))
    n = d.get("num_labels", 2)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LABELS:
        raise ValueError(f"num_labels must be a whole number 1..{MAX_LABELS:,}, got {_short(n)}")
    return tuple(f"LABEL_{i}" for i in range(n))
