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

from . import backend, families, schema
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

# every family's names, prefix, ignored entries and untied decoder are its record's (families.py); the record
# answers for them (Family.engine_name, Family.ignores)

MAX_LISTED = 40  # problems listed by key in a CheckpointError; the rest are counted


def normalise_hf_name(name: str, family: str = "bert") -> str:
    """Drop the family's prefix of *For* checkpoints (`bert.`, `roberta.`, ...) and rename legacy gamma/beta."""
    name = name.removeprefix(families.family(family).checkpoint_prefix)
    name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
    name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
    return name


def from_hf_state(state: Mapping, config: BertConfig) -> dict:
    """Map a hugging face state dict (host arrays) to engine weights, checking everything first.

    Raises one CheckpointError listing every missing, unexpected, mis-shaped or non-finite
    tensor by its checkpoint key, before anything is built.
    """
    problems: list[str] = []
    weights: dict = {}
    origin: dict[str, str] = {}
    decoder_weight = None
    record = families.family(config.model_type)
    decoder = {hf: (ours, t) for hf, ours, t in record.untied_decoder}  # its own decoder's names
    untied = {} if config.tie_word_embeddings else decoder
    names = {normalise_hf_name(k, config.model_type) for k in state} if untied else set()
    own_bias = any(ours == "mlm.bias" and hf in names for hf, (ours, _) in untied.items())  # the decoder's bias
    for raw_name, array in state.items():
        name = normalise_hf_name(raw_name, config.model_type)
        if decoder.get(name, (None,))[0] == "mlm.W_out":
            decoder_weight = (raw_name, array)
        if name in untied:
            mapped = untied[name]
        elif record.ignores(name):
            continue
        else:
            mapped = record.engine_name(name)
            if own_bias and mapped == ("mlm.bias", False):
                continue  # untied: the decoder's own bias is the one added
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
        (not has_mlm and config.head is None and record.base_has_pooler)
    found_layers = {schema.split_key(k)[0] for k in weights if k.startswith(schema.LAYER_PREFIX)}
    mismatch = bool(found_layers) and len(found_layers) != config.num_layers and not config.shared_layers
    # tensor by tensor up to the first layer past the last one the checkpoint holds; the layers after that lack
    # the same tensors and are said in one line (config.json's num_hidden_layers=100000 over a 2-layer checkpoint
    # made 1.6 million lines and minutes of work for an error that shows 40 of them)
    listed = min(config.num_layers, max(found_layers, default=0) + 2) if mismatch else config.num_layers
    expected = param_shapes(config.replace(num_layers=listed) if listed != config.num_layers else config,
                            mlm=has_mlm, nsp=has_nsp, pooler=has_pooler)
    if listed < config.num_layers:
        problems.append(f"no tensors for layer.{listed} to layer.{config.num_layers - 1} either "
                        f"({config.num_layers - listed:,} more layers)")
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
    if mismatch:  # say it once, before the tensors it explains
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
    """Engine weights back to hugging face BertModel / BertForPreTraining names (host arrays): BERT's record's
    name map (its untied decoder's too, when the weights hold one) and prefix.

    Used by the reference script to load identical weights into transformers.
    """
    bert, state = families.BERT, {}
    prefix = bert.checkpoint_prefix if any(k.startswith(("mlm.", "nsp.")) for k in weights) else ""
    layer_numbers = sorted({schema.split_key(k)[0] for k in weights if k.startswith(schema.LAYER_PREFIX)})
    rows = families.BERT_NAME_MAP + (bert.untied_decoder if "mlm.W_out" in weights else ())
    for hf, ours, transpose in rows:
        layers = layer_numbers if "{l}" in hf else [None]
        for layer in layers:
            o = ours.replace("{l}", str(layer)) if layer is not None else ours
            if o not in weights:
                continue
            h = hf.replace("{l}", str(layer)) if layer is not None else hf
            a = backend.to_host(weights[o])
            state[(prefix if not h.startswith("cls.") else "") + h] = a.T.copy() if transpose else a
    return state
