"""The BERT family, one record per `model_type` (as Hugging Face keeps one config class per model).

Everything a family changes is written here once, as data: its config.json names and switches,
its checkpoint's prefix, name map, ignored entries and untied decoder, the architectures (classes) it
reads and the head each carries, how it spells the special tokens, whether its bare model has a
pooler, its published base config and the kind of tokenizer it uses. config.py, weights.py, params.py,
analysis.py, model.py, comparison.py, trace.py, corpus.py, loading.py and library_tokenizer.py ask
these records; nothing else names a family. Adding a family is one record here (FAMILIES collects
every record of this module) and a fixture in tests/fixtures/make_family.py (tests/loading/test_family_special_tokens.py
runs every public function that reads special tokens on every fixture).

Name maps are rows (Hugging Face name pattern, engine name, transpose?); `{l}` is the layer index.
Engine names are scoped like the trace (`embed.W_T`, `layer.3.attn.W_Q`); Hugging Face's `nn.Linear`
stores (out, in), our matrices (in, out), so those rows say transpose.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# ------------------------------------------------------------------------------------------
# special tokens
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecialTokens:
    """How a family spells BERT's special tokens (RoBERTa: <s> ... </s>, <pad>, <mask>)."""

    cls: str = "[CLS]"
    sep: str = "[SEP]"
    pad: str = "[PAD]"
    mask: str = "[MASK]"
    unk: str = "[UNK]"

    def spelling(self, bert_name: str) -> str:
        """BERT's name for a special token ('[CLS]') -> this family's ('<s>'); other strings unchanged."""
        return {"[CLS]": self.cls, "[SEP]": self.sep, "[PAD]": self.pad, "[MASK]": self.mask,
                "[UNK]": self.unk}.get(bert_name, bert_name)

    @property
    def added(self) -> frozenset[str]:
        """The tokens the tokenizer adds around the text: [CLS], [SEP] and [PAD] in this spelling."""
        return frozenset((self.cls, self.sep, self.pad))


BERT_TOKENS = SpecialTokens()
ROBERTA_TOKENS = SpecialTokens(cls="<s>", sep="</s>", pad="<pad>", mask="<mask>", unk="<unk>")
ALBERT_TOKENS = SpecialTokens(pad="<pad>", unk="<unk>")  # SentencePiece's pad and unk, BERT's others

# ------------------------------------------------------------------------------------------
# checkpoint names
# ------------------------------------------------------------------------------------------

# BERT's own names (gamma/beta, the legacy layernorm names of Google's checkpoints, are renamed on reading)
BERT_NAME_MAP: tuple[tuple[str, str, bool], ...] = (
    ("embeddings.word_embeddings.weight", "embed.W_T", False),
    ("embeddings.position_embeddings.weight", "embed.W_P", False),
    ("embeddings.token_type_embeddings.weight", "embed.W_S", False),
    ("embeddings.LayerNorm.weight", "embed.ln.gamma", False),
    ("embeddings.LayerNorm.bias", "embed.ln.beta", False),
    ("encoder.layer.{l}.attention.self.query.weight", "layer.{l}.attn.W_Q", True),
    ("encoder.layer.{l}.attention.self.query.bias", "layer.{l}.attn.b_Q", False),
    ("encoder.layer.{l}.attention.self.key.weight", "layer.{l}.attn.W_K", True),
    ("encoder.layer.{l}.attention.self.key.bias", "layer.{l}.attn.b_K", False),
    ("encoder.layer.{l}.attention.self.value.weight", "layer.{l}.attn.W_V", True),
    ("encoder.layer.{l}.attention.self.value.bias", "layer.{l}.attn.b_V", False),
    ("encoder.layer.{l}.attention.output.dense.weight", "layer.{l}.attn.W_O", True),
    ("encoder.layer.{l}.attention.output.dense.bias", "layer.{l}.attn.b_O", False),
    ("encoder.layer.{l}.attention.output.LayerNorm.weight", "layer.{l}.attn.ln.gamma", False),
    ("encoder.layer.{l}.attention.output.LayerNorm.bias", "layer.{l}.attn.ln.beta", False),
    ("encoder.layer.{l}.intermediate.dense.weight", "layer.{l}.ffn.W_up", True),
    ("encoder.layer.{l}.intermediate.dense.bias", "layer.{l}.ffn.b_up", False),
    ("encoder.layer.{l}.output.dense.weight", "layer.{l}.ffn.W_down", True),
    ("encoder.layer.{l}.output.dense.bias", "layer.{l}.ffn.b_down", False),
    ("encoder.layer.{l}.output.LayerNorm.weight", "layer.{l}.ffn.ln.gamma", False),
    ("encoder.layer.{l}.output.LayerNorm.bias", "layer.{l}.ffn.ln.beta", False),
    ("pooler.dense.weight", "pooler.W", True),
    ("pooler.dense.bias", "pooler.b", False),
    ("cls.predictions.transform.dense.weight", "mlm.W_t", True),
    ("cls.predictions.transform.dense.bias", "mlm.b_t", False),
    ("cls.predictions.transform.LayerNorm.weight", "mlm.ln.gamma", False),
    ("cls.predictions.transform.LayerNorm.bias", "mlm.ln.beta", False),
    ("cls.predictions.bias", "mlm.bias", False),
    ("cls.seq_relationship.weight", "nsp.W", True),
    ("cls.seq_relationship.bias", "nsp.b", False),
)

# the task heads, named alike in every family (after the family's prefix is dropped)
TASK_HEAD_NAMES: tuple[tuple[str, str, bool], ...] = (
    ("classifier.weight", "head.W", True), ("classifier.bias", "head.b", False),  # sequence or token labels
    ("qa_outputs.weight", "head.W", True), ("qa_outputs.bias", "head.b", False),  # start and end
)
# roberta's and electra's sequence classifier: a dense layer on [CLS] (the pooler's place), then out_proj
CLASSIFIER_DENSE: tuple[tuple[str, str, bool], ...] = (
    ("classifier.dense.weight", "pooler.W", True), ("classifier.dense.bias", "pooler.b", False),
    ("classifier.out_proj.weight", "head.W", True), ("classifier.out_proj.bias", "head.b", False),
)
_BERT_BODY = tuple(row for row in BERT_NAME_MAP if row[0].startswith(("embeddings.", "encoder.")))
_BERT_POOLER = tuple(row for row in BERT_NAME_MAP if row[0].startswith("pooler."))
_ALBERT_LAYER = "encoder.albert_layer_groups.0.albert_layers.0."  # the one layer every layer runs

# buffers every family's checkpoint may carry; they are not weights
_BUFFERS = (r"embeddings\.position_ids", r"embeddings\.token_type_ids")

# config.json's architectures: the class suffix -> the head it carries (None: the bare encoder; the
# masked-lm head is read from the weights, as BertForMaskedLM's is)
_ENCODER_HEADS = {
    "Model": None, "ForMaskedLM": None, "ForSequenceClassification": "sequence_classification",
    "ForTokenClassification": "token_classification", "ForQuestionAnswering": "question_answering",
}

# ------------------------------------------------------------------------------------------
# the record
# ------------------------------------------------------------------------------------------


def _no_switches(d: dict) -> dict:
    return {}


@dataclass(frozen=True)
class Family:
    """What one `model_type` is: everything that differs from BERT, as data."""

    model_type: str  # config.json's model_type
    name: str  # how people write it: 'RoBERTa'
    class_prefix: str  # its classes' prefix in transformers: 'Roberta' (RobertaForMaskedLM)
    differences: str  # what its forward does differently from BERT's (lesson 17 prints these)
    # config.json: its own field names -> BERT's (DistilBERT writes dim for hidden_size), and the switches
    # of the one engine it sets (config.BertConfig fields), read from config.json's dict
    renamed: Mapping[str, str] = field(default_factory=dict)
    switches: Callable[[dict], dict] = _no_switches
    # the checkpoint: the prefix of its *For* classes' encoder names, the name map, entries that are not
    # weights or duplicate one (regular expressions of the normalised names)
    checkpoint_prefix: str = "bert."
    name_map: tuple[tuple[str, str, bool], ...] = ()
    ignored: tuple[str, ...] = _BUFFERS
    # an untied masked-lm head (tie_word_embeddings false) reads its own decoder: these rows, in place of the
    # ignored tied names (BERT: the weight -> mlm.W_out, and the bias its nn.Linear adds -> mlm.bias, in place of
    # cls.predictions.bias; transformers 5 unties it too); tied, the weight is checked against W_T
    untied_decoder: tuple[tuple[str, str, bool], ...] = ()
    # the classes it reads: class name -> head (None: none); classes refused with the reason
    architectures: Mapping[str, str | None] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
    special: SpecialTokens = BERT_TOKENS
    base_has_pooler: bool = True  # does its bare *Model carry a pooler (BertModel yes, DistilBertModel no)
    published: tuple[str, Mapping] = ("", {})  # its base checkpoint's name and config.json fields that set a count
    tokenizer: str = "WordPiece"  # WordPiece (hand-written), BPE or Unigram (tokenizer.json, run by `tokenizers`)

    def __repr__(self) -> str:
        return f"<Family {self.model_type} ({self.name}): {self.differences}>"

    @functools.cached_property
    def _patterns(self) -> tuple:
        """The name map's rows as compiled patterns ({l}: the layer index), and the ignored names'."""
        rows = tuple((re.compile("^" + re.escape(hf).replace(r"\{l\}", r"(?P<l>\d+)") + "$"), ours, t)
                     for hf, ours, t in self.name_map)
        return rows, tuple(re.compile(f"^{p}$") for p in self.ignored)

    def engine_name(self, hf_name: str) -> tuple[str, bool] | None:
        """(engine name, transpose?) for a checkpoint name without the prefix, or None if the map has none."""
        for pattern, ours, transpose in self._patterns[0]:
            m = pattern.match(hf_name)
            if m:
                return (ours.replace("{l}", m.group("l")) if "{l}" in ours else ours), transpose
        return None

    def ignores(self, hf_name: str) -> bool:
        """Whether a checkpoint name (without the prefix) is not a weight, or duplicates one (tied)."""
        return any(p.match(hf_name) for p in self._patterns[1])

    def architecture(self, *, head: str | None, mlm: bool) -> str:
        """The class name a model of this family with this head is (BertForPreTraining, RobertaForMaskedLM)."""
        if head == "next_sentence":
            return self.class_prefix + ("ForPreTraining" if mlm else "ForNextSentencePrediction")
        wanted = [a for a, h in self.architectures.items() if h == head]
        if head is None:
            suffix = "ForMaskedLM" if mlm else "Model"
            if self.class_prefix + suffix in self.architectures:
                return self.class_prefix + suffix
        return wanted[0] if wanted else self.class_prefix + ("ForMaskedLM" if mlm else "Model")


def _classes(prefix: str, *suffixes: str, **special: str | None) -> dict[str, str | None]:
    heads = {prefix + s: _ENCODER_HEADS[s] for s in suffixes}
    heads.update({prefix + s: h for s, h in special.items()})
    return heads


def _roberta_switches(d: dict) -> dict:
    pad = d.get("pad_token_id", 1)  # not a token id: BertConfig's check names it
    if pad is None:  # dropped as unset, it would silently become 0 (<s>) and shift every position
        raise ValueError("RoBERTa's config.json gives pad_token_id null; RoBERTa numbers its positions from "
                         "pad_token_id + 1, so it must be the <pad> token's id (1 in every published RoBERTa)")
    # fairseq numbers positions from padding_idx + 1
    return {"position_offset": pad + 1 if isinstance(pad, int) and not isinstance(pad, bool) and pad >= 0 else 0}


def _distilbert_switches(d: dict) -> dict:
    if d.get("sinusoidal_pos_embds"):
        raise ValueError("DistilBERT with sinusoidal_pos_embds is not supported (learned positions only)")
    return {"type_vocab_size": 0, "pooler_act": "relu", "layer_norm_eps": 1e-12}


def _albert_switches(d: dict) -> dict:
    if d.get("num_hidden_groups", 1) != 1 or d.get("inner_group_num", 1) != 1:
        raise ValueError("ALBERT with num_hidden_groups or inner_group_num other than 1 is not supported")
    return {"shared_layers": True}


BERT = Family(
    "bert", "BERT", "Bert", "the reference: T + P + S, LayerNorm, L post-LN layers, tanh pooler",
    name_map=BERT_NAME_MAP + TASK_HEAD_NAMES,
    ignored=_BUFFERS + (r"cls\.predictions\.decoder\.weight",  # tied to embed.W_T (checked when present)
                        r"cls\.predictions\.decoder\.bias"),  # the same tensor as cls.predictions.bias
    untied_decoder=(("cls.predictions.decoder.weight", "mlm.W_out", True),
                    ("cls.predictions.decoder.bias", "mlm.bias", False)),
    architectures=_classes("Bert", *_ENCODER_HEADS, ForPreTraining="next_sentence",
                           ForNextSentencePrediction="next_sentence"),
    published=("bert-base-uncased", {
        "model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}),
)

DISTILBERT = Family(
    "distilbert", "DistilBERT", "DistilBert",
    "no segment table (S = 0); 6 layers; no pooler (its classifier's pre_classifier uses relu)",
    renamed={"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
             "hidden_dim": "intermediate_size", "activation": "hidden_act"},
    switches=_distilbert_switches,
    checkpoint_prefix="distilbert.",
    name_map=(
        ("embeddings.word_embeddings.weight", "embed.W_T", False),
        ("embeddings.position_embeddings.weight", "embed.W_P", False),
        ("embeddings.LayerNorm.weight", "embed.ln.gamma", False),
        ("embeddings.LayerNorm.bias", "embed.ln.beta", False),
        ("transformer.layer.{l}.attention.q_lin.weight", "layer.{l}.attn.W_Q", True),
        ("transformer.layer.{l}.attention.q_lin.bias", "layer.{l}.attn.b_Q", False),
        ("transformer.layer.{l}.attention.k_lin.weight", "layer.{l}.attn.W_K", True),
        ("transformer.layer.{l}.attention.k_lin.bias", "layer.{l}.attn.b_K", False),
        ("transformer.layer.{l}.attention.v_lin.weight", "layer.{l}.attn.W_V", True),
        ("transformer.layer.{l}.attention.v_lin.bias", "layer.{l}.attn.b_V", False),
        ("transformer.layer.{l}.attention.out_lin.weight", "layer.{l}.attn.W_O", True),
        ("transformer.layer.{l}.attention.out_lin.bias", "layer.{l}.attn.b_O", False),
        ("transformer.layer.{l}.sa_layer_norm.weight", "layer.{l}.attn.ln.gamma", False),
        ("transformer.layer.{l}.sa_layer_norm.bias", "layer.{l}.attn.ln.beta", False),
        ("transformer.layer.{l}.ffn.lin1.weight", "layer.{l}.ffn.W_up", True),
        ("transformer.layer.{l}.ffn.lin1.bias", "layer.{l}.ffn.b_up", False),
        ("transformer.layer.{l}.ffn.lin2.weight", "layer.{l}.ffn.W_down", True),
        ("transformer.layer.{l}.ffn.lin2.bias", "layer.{l}.ffn.b_down", False),
        ("transformer.layer.{l}.output_layer_norm.weight", "layer.{l}.ffn.ln.gamma", False),
        ("transformer.layer.{l}.output_layer_norm.bias", "layer.{l}.ffn.ln.beta", False),
        ("vocab_transform.weight", "mlm.W_t", True), ("vocab_transform.bias", "mlm.b_t", False),
        ("vocab_layer_norm.weight", "mlm.ln.gamma", False), ("vocab_layer_norm.bias", "mlm.ln.beta", False),
        ("vocab_projector.bias", "mlm.bias", False),
        ("pre_classifier.weight", "pooler.W", True), ("pre_classifier.bias", "pooler.b", False),
    ) + TASK_HEAD_NAMES,
    ignored=_BUFFERS + (r"vocab_projector\.weight",),  # tied to embed.W_T
    architectures=_classes("DistilBert", *_ENCODER_HEADS),
    base_has_pooler=False,
    published=("distilbert-base-uncased", {
        "model_type": "distilbert", "vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12,
        "hidden_dim": 3072, "max_position_embeddings": 512, "pad_token_id": 0}),
)

ROBERTA = Family(
    "roberta", "RoBERTa", "Roberta",
    "positions start at padding_idx + 1 (W_P[o:o+n]); one segment; byte-level BPE tokens",
    switches=_roberta_switches,
    checkpoint_prefix="roberta.",
    name_map=_BERT_BODY + _BERT_POOLER + (
        ("lm_head.dense.weight", "mlm.W_t", True), ("lm_head.dense.bias", "mlm.b_t", False),
        ("lm_head.layer_norm.weight", "mlm.ln.gamma", False), ("lm_head.layer_norm.bias", "mlm.ln.beta", False),
        ("lm_head.bias", "mlm.bias", False),
    ) + CLASSIFIER_DENSE + TASK_HEAD_NAMES,
    ignored=_BUFFERS + (r"lm_head\.decoder\.(weight|bias)",),  # tied to embed.W_T, and lm_head.bias
    architectures=_classes("Roberta", *_ENCODER_HEADS),
    special=ROBERTA_TOKENS,
    published=("roberta-base", {
        "model_type": "roberta", "vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514,
        "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-05}),
    tokenizer="BPE",
)

ALBERT = Family(
    "albert", "ALBERT", "Albert",
    "embeddings of width E projected to H; one layer's weights shared by all L layers; Unigram tokens",
    switches=_albert_switches,
    checkpoint_prefix="albert.",
    name_map=tuple(row for row in _BERT_BODY if row[0].startswith("embeddings.")) + (
        ("encoder.embedding_hidden_mapping_in.weight", "embed.W_E", True),
        ("encoder.embedding_hidden_mapping_in.bias", "embed.b_E", False),
    ) + tuple((_ALBERT_LAYER + hf, "layer.0." + ours, t) for hf, ours, t in (
        ("attention.query.weight", "attn.W_Q", True), ("attention.query.bias", "attn.b_Q", False),
        ("attention.key.weight", "attn.W_K", True), ("attention.key.bias", "attn.b_K", False),
        ("attention.value.weight", "attn.W_V", True), ("attention.value.bias", "attn.b_V", False),
        ("attention.dense.weight", "attn.W_O", True), ("attention.dense.bias", "attn.b_O", False),
        ("attention.LayerNorm.weight", "attn.ln.gamma", False), ("attention.LayerNorm.bias", "attn.ln.beta", False),
        ("ffn.weight", "ffn.W_up", True), ("ffn.bias", "ffn.b_up", False),
        ("ffn_output.weight", "ffn.W_down", True), ("ffn_output.bias", "ffn.b_down", False),
        ("full_layer_layer_norm.weight", "ffn.ln.gamma", False), ("full_layer_layer_norm.bias", "ffn.ln.beta", False),
    )) + (
        ("pooler.weight", "pooler.W", True), ("pooler.bias", "pooler.b", False),
        ("predictions.dense.weight", "mlm.W_t", True), ("predictions.dense.bias", "mlm.b_t", False),
        ("predictions.LayerNorm.weight", "mlm.ln.gamma", False), ("predictions.LayerNorm.bias", "mlm.ln.beta", False),
        ("predictions.bias", "mlm.bias", False),
    ) + TASK_HEAD_NAMES,
    ignored=_BUFFERS + (r"predictions\.decoder\.(weight|bias)",),  # tied to embed.W_T, and predictions.bias
    architectures=_classes("Albert", *_ENCODER_HEADS),
    refused={"AlbertForPreTraining": "AlbertForPreTraining's sentence-order head is not supported; use "
                                     "AlbertForMaskedLM or AlbertModel"},
    special=ALBERT_TOKENS,
    published=("albert-base-v2", {
        "model_type": "albert", "vocab_size": 30000, "embedding_size": 128, "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu_new"}),
    tokenizer="Unigram",
)

ELECTRA = Family(
    "electra", "ELECTRA", "Electra",
    "embeddings of width E projected to H when E != H; classifier pooler uses gelu",
    switches=lambda d: {"pooler_act": "gelu"},
    checkpoint_prefix="electra.",
    name_map=_BERT_BODY + (
        ("embeddings_project.weight", "embed.W_E", True), ("embeddings_project.bias", "embed.b_E", False),
        ("discriminator_predictions.dense.weight", "head.W_d", True),
        ("discriminator_predictions.dense.bias", "head.b_d", False),
        ("discriminator_predictions.dense_prediction.weight", "head.W", True),
        ("discriminator_predictions.dense_prediction.bias", "head.b", False),
    ) + CLASSIFIER_DENSE + TASK_HEAD_NAMES,
    # ElectraForMaskedLM is the generator: its masked-lm head is E wide, with its own names
    architectures=_classes("Electra", "Model", "ForSequenceClassification", "ForTokenClassification",
                           "ForQuestionAnswering", ForPreTraining="replaced_token"),  # the discriminator
    base_has_pooler=False,
    published=("electra-base-discriminator", {
        "model_type": "electra", "vocab_size": 30522, "embedding_size": 768, "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "max_position_embeddings": 512, "type_vocab_size": 2}),
)

# model_type -> its record: every record written above, in order (adding a family is writing its record, nothing
# else in the package); callers ask the records
FAMILIES: dict[str, Family] = {f.model_type: f for f in list(globals().values()) if isinstance(f, Family)}

# every spelling of every special token, and of the padding token, for attention maps that come without a family
# (Trace.from_attentions)
SPECIAL_SPELLINGS: frozenset[str] = frozenset(
    t for f in FAMILIES.values() for t in (f.special.cls, f.special.sep, f.special.pad, f.special.mask, f.special.unk))
PAD_SPELLINGS: tuple[str, ...] = tuple(dict.fromkeys(f.special.pad for f in FAMILIES.values()))


def family(model_type: str) -> Family:
    """The record of a model_type; an unknown one is a ValueError naming those there are."""
    try:
        return FAMILIES[model_type]
    except (KeyError, TypeError):
        raise ValueError(f"model_type {model_type!r} is not supported; use one of {sorted(FAMILIES)}") from None


def family_of(config) -> Family:
    """The record of a config's family (config.model_type; 'bert' without a config)."""
    return family(getattr(config, "model_type", "bert") if config is not None else "bert")


def special_tokens(config) -> SpecialTokens:
    """How the config's family spells [CLS], [SEP], [PAD], [MASK], [UNK]."""
    return family_of(config).special


def spellings(bert_name: str, config=None) -> frozenset[str]:
    """How a special token ('[CLS]', '[SEP]', '[PAD]', '[MASK]', '[UNK]') is written: in the config's family,
    or in any family without a config (attention maps from elsewhere); any other string is itself."""
    if config is not None:
        return frozenset((family_of(config).special.spelling(bert_name),))
    return frozenset(f.special.spelling(bert_name) for f in FAMILIES.values())
