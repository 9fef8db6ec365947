"""The weights of a BERT model: names, shapes, bert's random initialisation, and the
explicit map from Hugging Face checkpoint names.

Engine names are scoped like the trace (`embed.W_T`, `layer.3.attn.W_Q`, `pooler.W`),
so that the parameter ledger can say which step reads which weights. Matrices are
stored (in, out) so that every line of the forward reads `Z @ W + b`, as the formula
card writes it; Hugging Face's `nn.Linear` stores (out, in), so the loader transposes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import backend, schema
from .config import BertConfig
from .errors import CheckpointError

# ------------------------------------------------------------------------------------------
# names and shapes
# ------------------------------------------------------------------------------------------


def embedding_shapes(c: BertConfig) -> dict[str, tuple[int, ...]]:
    E, H = c.embed_size, c.hidden_size  # E = H except in ALBERT and small ELECTRAs
    shapes = {
        "embed.W_T": (c.vocab_size, E),  # one row per wordpiece
        "embed.W_P": (c.max_positions, E),  # one row per position
        "embed.W_S": (c.type_vocab_size, E),  # one row per segment
        "embed.ln.gamma": (E,),
        "embed.ln.beta": (E,),
    }
    if not c.type_vocab_size:
        del shapes["embed.W_S"]  # DistilBERT: no segment table
    if E != H:
        shapes.update({"embed.W_E": (E, H), "embed.b_E": (H,)})  # the projection E -> H
    return shapes


def layer_shapes(c: BertConfig, layer: int) -> dict[str, tuple[int, ...]]:
    H, F, p = c.hidden_size, c.ffn_size, schema.layer_prefix(layer)
    return {
        p + "attn.W_Q": (H, H), p + "attn.b_Q": (H,),  # all n_h heads side by side: [H, n_h * d_k]
        p + "attn.W_K": (H, H), p + "attn.b_K": (H,),
        p + "attn.W_V": (H, H), p + "attn.b_V": (H,),
        p + "attn.W_O": (H, H), p + "attn.b_O": (H,),
        p + "attn.ln.gamma": (H,), p + "attn.ln.beta": (H,),
        p + "ffn.W_up": (H, F), p + "ffn.b_up": (F,),
        p + "ffn.W_down": (F, H), p + "ffn.b_down": (H,),
        p + "ffn.ln.gamma": (H,), p + "ffn.ln.beta": (H,),
    }


def pooler_shapes(c: BertConfig) -> dict[str, tuple[int, ...]]:
    return {"pooler.W": (c.hidden_size, c.hidden_size), "pooler.b": (c.hidden_size,)}


def mlm_shapes(c: BertConfig) -> dict[str, tuple[int, ...]]:
    H = c.hidden_size
    # the output matrix is embed.W_T itself (tied), so only the transform and a bias are new;
    # an untied checkpoint (tie_word_embeddings false) has its own decoder W_out, stored [H, V]
    E = c.embed_size  # ALBERT's transform goes back to the embedding width, H -> E
    shapes = {"mlm.W_t": (H, E), "mlm.b_t": (E,), "mlm.ln.gamma": (E,), "mlm.ln.beta": (E,),
              "mlm.bias": (c.vocab_size,)}
    if not c.tie_word_embeddings:
        shapes["mlm.W_out"] = (E, c.vocab_size)
    return shapes


MLM_LEARNED = ("mlm.W_t", "mlm.b_t", "mlm.ln.gamma", "mlm.ln.beta", "mlm.bias")  # a tied head's own tensors


def nsp_shapes(c: BertConfig) -> dict[str, tuple[int, ...]]:
    return {"nsp.W": (c.hidden_size, 2), "nsp.b": (2,)}


def head_shapes(c: BertConfig) -> dict[str, tuple[int, ...]]:
    """The task head's weights (next_sentence reads nsp.W, nsp.b: see nsp_shapes)."""
    H, N = c.hidden_size, len(c.labels)
    if c.head == "replaced_token":  # dense H -> H, then H -> 1
        return {"head.W_d": (H, H), "head.b_d": (H,), "head.W": (H, 1), "head.b": (1,)}
    if c.head in ("sequence_classification", "token_classification", "question_answering"):
        return {"head.W": (H, N), "head.b": (N,)}
    return {}


def param_shapes(c: BertConfig, *, mlm: bool = False, nsp: bool = False,
                 pooler: bool = True) -> dict[str, tuple[int, ...]]:
    """Every weight of the model, in forward order, with its shape (BertForMaskedLM has no pooler).
    ALBERT (shared_layers) holds one layer's weights; every layer reads them."""
    shapes = embedding_shapes(c)
    for layer in range(1 if c.shared_layers else c.num_layers):
        shapes.update(layer_shapes(c, layer))
    if pooler:
        shapes.update(pooler_shapes(c))
    if mlm:
        shapes.update(mlm_shapes(c))
    if nsp or c.head == "next_sentence":
        shapes.update(nsp_shapes(c))
    shapes.update(head_shapes(c))
    return shapes


def _init_kind(name: str) -> str:
    """How bert initialises a weight: 'normal' matrices, 'ones' for layernorm gains, 'zeros' otherwise."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "gamma":
        return "ones"
    if leaf.startswith("W"):
        return "normal"
    return "zeros"  # biases and layernorm betas


def random_weights(c: BertConfig, seed: int = 0, *, mlm: bool = False, nsp: bool = False) -> dict:
    """Bert's own initialisation: every matrix N(0, 0.02), biases 0, layernorm gain 1 and bias 0.

    Deterministic for a seed: the draws are made in forward order from one generator.
    Returns host (numpy) arrays.
    """
    rng = backend.host_rng(seed)
    weights = {}
    for name, shape in param_shapes(c, mlm=mlm, nsp=nsp).items():
        kind = _init_kind(name)
        if kind == "normal":
            weights[name] = backend.host_random_normal(shape, c.initializer_range, rng)
        elif kind == "ones":
            weights[name] = backend.host_ones(shape)
        else:
            weights[name] = backend.host_zeros(shape)
    return weights


# ------------------------------------------------------------------------------------------
# hugging face checkpoint names -> engine names
# ------------------------------------------------------------------------------------------

# (hugging face name pattern, engine name, transpose?) ; {l} is the layer index.
# gamma/beta are the legacy layernorm names of the original google checkpoints.
HF_NAME_MAP: tuple[tuple[str, str, bool], ...] = (
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
    ("cls.predictions.decoder.weight", "mlm.W_out", True),  # read only when untied (see from_hf_state)
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
_BERT_BODY = tuple(row for row in HF_NAME_MAP if row[0].startswith(("embeddings.", "encoder.")))
_BERT_POOLER = tuple(row for row in HF_NAME_MAP if row[0].startswith("pooler."))
_ALBERT_LAYER = "encoder.albert_layer_groups.0.albert_layers.0."  # the one layer every layer runs

# model_type -> its name map: the same engine names, each family's checkpoint names
FAMILY_NAME_MAPS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "bert": HF_NAME_MAP + TASK_HEAD_NAMES,
    "roberta": _BERT_BODY + _BERT_POOLER + (
        ("lm_head.dense.weight", "mlm.W_t", True), ("lm_head.dense.bias", "mlm.b_t", False),
        ("lm_head.layer_norm.weight", "mlm.ln.gamma", False), ("lm_head.layer_norm.bias", "mlm.ln.beta", False),
        ("lm_head.bias", "mlm.bias", False),
    ) + CLASSIFIER_DENSE + TASK_HEAD_NAMES,
    "electra": _BERT_BODY + (
        ("embeddings_project.weight", "embed.W_E", True), ("embeddings_project.bias", "embed.b_E", False),
        ("discriminator_predictions.dense.weight", "head.W_d", True),
        ("discriminator_predictions.dense.bias", "head.b_d", False),
        ("discriminator_predictions.dense_prediction.weight", "head.W", True),
        ("discriminator_predictions.dense_prediction.bias", "head.b", False),
    ) + CLASSIFIER_DENSE + TASK_HEAD_NAMES,
    "distilbert": (
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
    "albert": tuple(row for row in _BERT_BODY if row[0].startswith("embeddings.")) + (
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
}
FAMILY_PREFIXES = ("bert.", "roberta.", "electra.", "distilbert.", "albert.")

# checkpoint entries that are not weights, or that duplicate one (tied), and are skipped
HF_IGNORED = (
    re.compile(r"^embeddings\.position_ids$"),
    re.compile(r"^embeddings\.token_type_ids$"),
    re.compile(r"^cls\.predictions\.decoder\.weight$"),  # tied to embed.W_T (checked when present)
    re.compile(r"^cls\.predictions\.decoder\.bias$"),  # the same tensor as cls.predictions.bias
    re.compile(r"^lm_head\.decoder\.(weight|bias)$"),  # roberta: tied to embed.W_T, and lm_head.bias
    re.compile(r"^vocab_projector\.weight$"),  # distilbert: tied to embed.W_T
    re.compile(r"^predictions\.decoder\.(weight|bias)$"),  # albert: tied to embed.W_T, and predictions.bias
)
# an untied mlm head (tie_word_embeddings false) reads its own decoder: weight -> mlm.W_out, and
# the bias its nn.Linear adds (transformers 5 unties it too) -> mlm.bias, in place of cls.predictions.bias
UNTIED_DECODER = {"cls.predictions.decoder.weight": ("mlm.W_out", True),
                  "cls.predictions.decoder.bias": ("mlm.bias", False)}

MAX_LISTED = 40  # problems listed by key in a CheckpointError; the rest are counted

def _compile(name_map):
    return [(re.compile("^" + re.escape(hf).replace(r"\{l\}", r"(?P<l>\d+)") + "$"), ours, t)
            for hf, ours, t in name_map]


_MAP_RE = _compile(HF_NAME_MAP)
_FAMILY_RE = {family: _compile(m) for family, m in FAMILY_NAME_MAPS.items()}


def normalise_hf_name(name: str) -> str:
    """Drop the `bert.` (`roberta.`, ...) prefix of *For* checkpoints and rename legacy gamma/beta."""
    for prefix in FAMILY_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    return name


def engine_name(hf_name: str, family: str = "bert") -> tuple[str, bool] | None:
    """(engine name, transpose?) for a normalised hugging face name, or None if unknown."""
    for pattern, ours, transpose in _FAMILY_RE[family]:
        m = pattern.match(hf_name)
        if m:
            return (ours.replace("{l}", m.group("l")) if "{l}" in ours else ours), transpose
    return None


def from_hf_state(state: Mapping, config: BertConfig) -> dict:
    """Map a hugging face state dict (host arrays) to engine weights, checking everything first.

    Raises one CheckpointError listing every missing, unexpected, mis-shaped or non-finite
    tensor by its checkpoint key, before anything is built.
    """
    problems: list[str] = []
    weights: dict = {}
    origin: dict[str, str] = {}
    decoder_weight = None
    untied = not config.tie_word_embeddings
    names = {normalise_hf_name(k) for k in state}
    for raw_name, array in state.items():
        name = normalise_hf_name(raw_name)
        if name == "cls.predictions.decoder.weight":
            decoder_weight = (raw_name, array)
        if untied and name == "cls.predictions.bias" and "cls.predictions.decoder.bias" in names:
            continue  # untied: the decoder's own bias is the one added
        if untied and name in UNTIED_DECODER:
            mapped = UNTIED_DECODER[name]
        elif any(p.match(name) for p in HF_IGNORED):
            continue
        else:
            mapped = engine_name(name, config.model_type)
        if mapped is None:
            problems.append(f"unexpected tensor {raw_name!r} {tuple(array.shape)}")
            continue
        ours, transpose = mapped
        if ours in weights:
            problems.append(f"{raw_name!r} duplicates {origin[ours]!r} (both map to {ours})")
            continue
        weights[ours] = backend.host_float32(array.T if transpose else array)
        origin[ours] = raw_name

    has_mlm = any(k.startswith("mlm.") for k in weights)
    has_nsp = any(k.startswith("nsp.") for k in weights)
    # BertModel and BertForPreTraining carry a pooler; BertForMaskedLM, token and span heads have none;
    # DistilBERT and ELECTRA have one only in their sequence classifier
    has_pooler = any(k.startswith("pooler.") for k in weights) or config.head in ("sequence_classification",
                                                                                  "next_sentence") or \
        (not has_mlm and config.head is None and config.model_type in ("bert", "roberta", "albert"))
    expected = param_shapes(config, mlm=has_mlm, nsp=has_nsp, pooler=has_pooler)
    for ours, shape in expected.items():
        if ours not in weights:
            problems.append(f"missing tensor for {ours} (expected shape {shape})")
        elif tuple(weights[ours].shape) != shape:
            got = tuple(weights[ours].shape)
            stored = got[::-1] if _transposed(ours) else got
            problems.append(f"{origin[ours]!r} has shape {stored}, expected "
                            f"{shape[::-1] if _transposed(ours) else shape} for {ours}")
    for ours in weights:
        if ours not in expected:
            why = (f"layer index beyond num_layers {config.num_layers}" if ours.startswith("layer.") else
                   f"{ours} belongs to a head config.json does not name (architectures: "
                   f"{config.head or 'no task head'})")
            problems.append(f"unexpected tensor {origin[ours]!r}: {why}")
    for ours, array in weights.items():
        bad = backend.host_bad_values(array)
        if bad:
            problems.append(f"{origin[ours]!r} holds {bad} NaN/Inf value(s)")
    if decoder_weight is not None and "embed.W_T" in weights and not problems and not untied:
        raw_name, dec = decoder_weight
        if tuple(dec.shape) != tuple(weights["embed.W_T"].shape):
            problems.append(f"{raw_name!r} has shape {tuple(dec.shape)}; bert ties it to the token "
                            f"embeddings {tuple(weights['embed.W_T'].shape)}")
    found_layers = {schema.split_key(k)[0] for k in weights if k.startswith(schema.LAYER_PREFIX)}
    if found_layers and len(found_layers) != config.num_layers and not config.shared_layers:  # say it once, before the tensors it explains
        problems.insert(0, f"config.json says num_hidden_layers={config.num_layers}, the checkpoint holds "
                           f"{len(found_layers)} layer(s)")
    if problems:
        shown = problems if len(problems) <= MAX_LISTED else \
            problems[:MAX_LISTED] + [f"... and {len(problems) - MAX_LISTED:,} more"]
        raise CheckpointError(
            f"the checkpoint does not fit a BERT with {config.num_layers} layers, hidden size "
            f"{config.hidden_size}, vocabulary {config.vocab_size} ({len(problems)} problem(s)):\n  - "
            + "\n  - ".join(shown))
    return weights


def _transposed(ours: str) -> bool:
    leaf = ours.rsplit(".", 1)[-1]
    return leaf.startswith("W") and not ours.startswith("embed.")


def to_hf_state(weights: Mapping) -> dict:
    """Engine weights back to hugging face BertModel / BertForPreTraining names (host arrays).

    Used by the reference script to load identical weights into transformers.
    """
    state = {}
    prefix = "bert." if any(k.startswith(("mlm.", "nsp.")) for k in weights) else ""
    layer_numbers = sorted({schema.split_key(k)[0] for k in weights if k.startswith(schema.LAYER_PREFIX)})
    for hf, ours, transpose in HF_NAME_MAP:
        layers = layer_numbers if "{l}" in hf else [None]
        for layer in layers:
            o = ours.replace("{l}", str(layer)) if layer is not None else ours
            if o not in weights:
                continue
            h = hf.replace("{l}", str(layer)) if layer is not None else hf
            a = backend.to_host(weights[o])
            state[(prefix if not h.startswith("cls.") else "") + h] = a.T.copy() if transpose else a
    if "mlm.W_out" in weights:  # untied: transformers 5 adds the decoder's own bias
        state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].copy()
    return state
