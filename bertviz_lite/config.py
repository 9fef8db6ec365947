"""The shape of a BERT model: BERT-base by default (Devlin et al. 2019, section 3).

`BertConfig` mirrors the fields of a Hugging Face `config.json` for `BertModel`,
under the names the lessons use (L, H, A), and reads that file directly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

# hidden_act values of a hugging face config -> the activation the engine computes.
# "gelu" is the exact erf form BERT was trained with; the others are the approximations
# and the relu that popular write-ups use (see lesson 06).
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
    hidden_size: int = 768  # H = d, the width of every token vector
    num_layers: int = 12  # L, encoder layers stacked
    num_heads: int = 12  # A, attention heads per layer; each is H / A = 64 wide
    ffn_size: int = 3072  # d_ffnn = 4H, the feed-forward layer's inner width
    max_positions: int = 512  # rows of the position table: the longest input
    type_vocab_size: int = 2  # segment (token type) ids: sentence A = 0, sentence B = 1
    layer_norm_eps: float = 1e-12  # bert's own epsilon, far below the 1e-5 of most libraries
    hidden_act: str = "gelu"  # exact erf gelu; see ACTIVATIONS for the others
    initializer_range: float = 0.02  # std of the N(0, 0.02) initialisation
    pad_token_id: int = 0  # [PAD] in the bert vocabulary
    attention_scale: float | None = None  # None: 1/sqrt(d_head). a what-if knob for lesson 11 (1/sqrt(H))
    tie_word_embeddings: bool = True  # the mlm output matrix is W_T itself; False: a separate decoder W_out

    def __post_init__(self) -> None:
        problems = []
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "ffn_size",
                     "max_positions", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not problems and self.hidden_size % self.num_heads:
            problems.append(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if self.hidden_act not in ACTIVATIONS:
            problems.append(f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(ACTIVATIONS)}")
        if not isinstance(self.tie_word_embeddings, bool):
            problems.append(f"tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")
        if not (isinstance(self.layer_norm_eps, (int, float)) and self.layer_norm_eps > 0):
            problems.append(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if self.attention_scale is not None and (isinstance(self.attention_scale, bool) or not isinstance(
                self.attention_scale, numbers.Real) or not math.isfinite(self.attention_scale)):
            problems.append(f"attention_scale must be None (1/sqrt(d_head)) or a finite number, got "
                            f"{self.attention_scale!r}")
        if problems:
            raise ValueError("invalid BertConfig: " + "; ".join(problems))

    @property
    def head_size(self) -> int:
        """d_head = d_q = d_k = d_v = H / A (64 for BERT-base)."""
        return self.hidden_size // self.num_heads

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
    }

    @classmethod
    def from_hf_dict(cls, d: dict) -> "BertConfig":
        """Read the fields of a Hugging Face BertConfig dict (config.json)."""
        if not isinstance(d, dict):
            raise ValueError(f"expected a JSON object of BERT settings (hidden_size, num_hidden_layers, ...), "
                             f"got {type(d).__name__} {str(d)[:40]}")
        if d.get("model_type", "bert") != "bert":
            raise ValueError(f"config.json describes model_type {d['model_type']!r}; bertviz-lite reads BERT only")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported, got "
                             f"position_embedding_type={d['position_embedding_type']!r}")
        kwargs = {ours: d[hf] for hf, ours in cls._HF_NAMES.items() if hf in d and d[hf] is not None}
        return cls(**kwargs)

    @classmethod
    def from_json(cls, path: str | Path) -> "BertConfig":
        """Read a Hugging Face config.json file."""
        with open(path, encoding="utf-8") as f:
            return cls.from_hf_dict(json.load(f))

    def to_hf_dict(self) -> dict:
        """The Hugging Face config.json fields for this config (used to build the reference model)."""
        d = {hf: getattr(self, ours) for hf, ours in self._HF_NAMES.items()}
        d["model_type"] = "bert"
        return d
