"""Counting parameters: the ledger of a loaded model, keyed like the trace, and the
reconciliation of every total the popular sources give for BERT-base.

`count_params(model)` counts the arrays actually loaded and checks the sum against
the closed-form count from the config. `reconcile()` recomputes each source's total
from the shapes its convention includes (see notebooks/README.md for the sources).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import families, schema
from .config import BertConfig
from .errors import CheckpointError
from .table import Table
from .weights import param_shapes


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def step_of_param(name: str) -> str:
    """The trace key of the step that reads a weight ('layer.3.attn.W_Q' -> 'layer.3.attn.q')."""
    layer, rel = schema.split_key(name)
    for step in schema.STEPS:
        if rel in step.reads:
            return schema.full_key(step.key, layer)
    raise KeyError(f"no step reads weight {name!r}")


@dataclass
class ParamLedger:
    """Every weight of a model: which step reads it, its shape, its count; `.total` is the sum."""

    rows: list[tuple[str, str, tuple[int, ...], int]]  # (step key, weight name, shape, count)
    tied: tuple[str, ...] = ()  # weights used twice but counted once (mlm output = embed.W_T)

    @property
    def total(self) -> int:
        return sum(r[3] for r in self.rows)

    def by_step(self) -> dict[str, int]:
        """Parameter count per trace step, in forward order."""
        out: dict[str, int] = {}
        for step, _, _, count in self.rows:
            out[step] = out.get(step, 0) + count
        return out

    def by_group(self) -> dict[str, int]:
        """Counts per coarse group: embeddings, each layer's attention / ffn / layernorms, pooler, heads."""
        out: dict[str, int] = {}
        for _, name, _, count in self.rows:
            out[group_of(name)] = out.get(group_of(name), 0) + count
        return out

    def for_step(self, key: str) -> list[tuple[str, tuple[int, ...], int]]:
        """The weights one trace step reads: (name, shape, count)."""
        return [(name, shape, count) for step, name, shape, count in self.rows if step == key]

    def table(self) -> Table:
        return Table(("step", "weight", "shape", "parameters"), list(self.rows),
                     title=f"parameter ledger: {self.total:,} parameters")

    def __repr__(self) -> str:
        return f"<ParamLedger {len(self.rows)} weights, total {self.total:,}>"


def group_of(name: str) -> str:
    """'layer.3.attn.W_Q' -> 'layer.3.attention'; 'embed.W_T' -> 'embeddings'."""
    if name.startswith("embed."):
        return "embeddings"
    layer, rel = schema.split_key(name)
    if layer is not None:
        part = {"attn.ln": "attention layernorm", "ffn.ln": "ffn layernorm"}.get(rel.rsplit(".", 1)[0])
        part = part or ("attention" if rel.startswith("attn.") else "feed-forward")
        return schema.full_key(part, layer)
    if name.startswith("pooler."):
        return "pooler"
    if name.startswith("mlm."):
        return "mlm head"
    if name.startswith("head."):
        return "task head"
    return "nsp head"


def count_params(model) -> ParamLedger:
    """The ledger of a loaded model, counted from its arrays and checked against the config's formula."""
    if not all(hasattr(model, a) for a in ("weights", "config", "has_mlm")):
        raise TypeError(f"count_params counts a loaded model (bv.load(...)), got {type(model).__name__}; for a "
                        "config's shapes use bertviz_lite.params.ledger_for_config(config)")
    rows = [(step_of_param(name), name, tuple(int(s) for s in w.shape), _numel(w.shape))
            for name, w in model.weights.items()]
    tied = model.has_mlm and "mlm.W_out" not in model.weights  # an untied decoder is counted in rows
    ledger = ParamLedger(rows, tied=("embed.W_T (mlm output layer)",) if tied else ())
    expected = formula_total(model.config, mlm=model.has_mlm, nsp=model.has_nsp, pooler=model.has_pooler)
    if ledger.total != expected:
        shapes = param_shapes(model.config, mlm=model.has_mlm, nsp=model.has_nsp, pooler=model.has_pooler)
        wrong = [f"{name} {shape}, the config needs {shapes.get(name)}" for _, name, shape, _ in rows
                 if shapes.get(name) != shape]
        raise CheckpointError(f"the model's arrays hold {ledger.total:,} parameters but its config gives {expected:,}: "
                              f"{'; '.join(wrong[:5]) or 'a weight has an unexpected shape'}")
    return ledger


def ledger_for_config(config: BertConfig, *, mlm: bool = False, pooler: bool = True) -> ParamLedger:
    """The ledger a model of this config has (the shapes it must have), when no model is at hand."""
    shapes = param_shapes(config, mlm=mlm, pooler=pooler)
    rows = [(step_of_param(name), name, tuple(shape), _numel(shape)) for name, shape in shapes.items()]
    return ParamLedger(rows, tied=("embed.W_T (mlm output layer)",) if mlm else ())


# ------------------------------------------------------------------------------------------
# closed-form counts under each source's convention
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Convention:
    """What a parameter count includes. Defaults: hugging face BertModel."""

    vocab_size: int | None = None  # None: the config's (30,522)
    qkv_bias: bool = True  # biases b^Q, b^K, b^V
    output_projection: bool = True  # W^O (the card leaves it out)
    output_bias: bool = True  # b^O
    segment_embeddings: bool = True
    embedding_layernorm: bool = True
    layer_layernorms: bool = True  # the two layernorms of each layer (gain and bias each)
    ffn_biases: bool = True
    pooler: bool = True
    pooler_bias: bool = True
    mlm_head: bool = False  # transform dense + layernorm + output bias (+ V x H output matrix when untied)
    nsp_head: bool = False  # 768 -> 2


def convention_total(c: BertConfig, conv: Convention = Convention()) -> int:
    """A closed-form parameter count from the shapes a convention includes."""
    H, F, L, V = c.hidden_size, c.ffn_size, c.num_layers, conv.vocab_size or c.vocab_size
    E = c.embed_size  # = H but in ALBERT and small ELECTRAs
    ln = 2 * H  # a gain and a bias per feature
    emb = V * E + c.max_positions * E
    emb += c.type_vocab_size * E if conv.segment_embeddings else 0  # DistilBERT: type_vocab_size 0
    emb += 2 * E if conv.embedding_layernorm else 0
    emb += E * H + H if E != H else 0  # the projection E -> H
    layer = 3 * H * H + (3 * H if conv.qkv_bias else 0)
    layer += (H * H if conv.output_projection else 0) + (H if conv.output_projection and conv.output_bias else 0)
    layer += H * F + F * H + ((F + H) if conv.ffn_biases else 0)
    layer += 2 * ln if conv.layer_layernorms else 0
    total = emb + (1 if c.shared_layers else L) * layer  # ALBERT stores one layer, run L times
    if conv.pooler:
        total += H * H + (H if conv.pooler_bias else 0)
    if conv.mlm_head:
        total += H * E + E + 2 * E + V
        total += 0 if c.tie_word_embeddings else E * V  # an untied decoder W_out
    if conv.nsp_head or c.head == "next_sentence":
        total += H * 2 + 2
    if c.head in ("sequence_classification", "token_classification", "question_answering"):
        total += H * len(c.labels) + len(c.labels)
    if c.head == "replaced_token":  # dense H -> H, then H -> 1
        total += H * H + H + H + 1
    return total


def formula_total(c: BertConfig, *, mlm: bool = False, nsp: bool = False, pooler: bool = True) -> int:
    """The count a loaded model must have: BertModel plus whichever heads it carries."""
    by_shapes = sum(_numel(s) for s in param_shapes(c, mlm=mlm, nsp=nsp, pooler=pooler).values())
    closed = convention_total(c, Convention(mlm_head=mlm, nsp_head=nsp, pooler=pooler))
    assert by_shapes == closed, (by_shapes, closed)  # the two derivations agree
    return closed


# (source, convention, what it includes, what it leaves out)
SOURCES: tuple[tuple[str, Convention, str, str], ...] = (
    ("Hugging Face BertModel", Convention(),
     "embeddings with segments and layernorm, 12 layers with every bias and layernorm, pooler",
     "pre-training heads"),
    ("Hugging Face BertForPreTraining", Convention(mlm_head=True, nsp_head=True),
     "BertModel + mlm transform and layernorm + output bias (30,522) + next-sentence head",
     "a separate mlm output matrix (tied to the token embeddings)"),
    ("Keras layer summary (keras-bert)", Convention(vocab_size=30000, mlm_head=True, nsp_head=True),
     "as BertForPreTraining, with a 30,000-token vocabulary",
     "522 wordpieces of the real vocabulary"),
    ("parameter-count note", Convention(qkv_bias=False, output_bias=False, embedding_layernorm=False, pooler=False),
     "embeddings (30,522), Q/K/V/O weights, ffn with biases, layer layernorms",
     "biases of Q, K, V, O; embedding layernorm; pooler"),
    ("formula card as written", Convention(qkv_bias=False, output_projection=False, segment_embeddings=False,
                                           embedding_layernorm=False, layer_layernorms=False, pooler_bias=False),
     "token and position embeddings, Q/K/V weights, ffn with biases, pooler weight",
     "W^O, Q/K/V biases, segment embeddings, every layernorm, the pooler bias"),
    ("BertModel with the article's 32,000 vocabulary", Convention(vocab_size=32000),
     "BertModel with 32,000 wordpieces", "nothing; 1,478 more rows in the token table"),
)


# the sizes the BERT paper states (Devlin et al. 2019, section 3), by (L, H, A, F) in the paper's letters (A = n_h heads): two significant figures
PAPER_SIZES = {(12, 768, 12, 3072): "110M", (24, 1024, 16, 4096): "340M"}


def two_figures(n: int) -> str:
    """A count in millions at two significant figures, as the paper writes sizes: 109,482,240 -> '110M'."""
    return f"{float(f'{n:.2g}') / 1e6:g}M"


def reconcile(config: BertConfig | None = None) -> Table:
    """Every total the popular sources give, each computed from its convention's shapes."""
    c = config or BertConfig()
    if c.model_type != "bert" or c.head is not None:
        c = c.replace(model_type="bert", head=None, labels=())  # the sources count BERT's body: no family switches
        if c.embedding_size is not None or c.shared_layers or c.position_offset or not c.type_vocab_size:
            raise ValueError("reconcile() compares the sources' counts of BERT; this config is not a BERT's "
                             "(embedding_size, shared_layers, no segments): see family_ledgers()")
    base = convention_total(c)
    rows = []
    for name, conv, includes, leaves_out in SOURCES:
        total = convention_total(c, conv)
        rows.append((name, total, total - base, f"{total / 1e6:.1f}M", includes, leaves_out))
    figure = PAPER_SIZES.get((c.num_layers, c.hidden_size, c.num_heads, c.ffn_size))
    if figure is not None:  # the paper's own size, for the two models it names; no exact count
        agree = [r[0] for r in rows if two_figures(r[1]) == figure]
        rows.append(("the BERT paper", None, None, figure,
                     f"states {figure}, rounded to two significant figures (as BERT-base 110M, BERT-large 340M); "
                     f"rounding that way gives it for: {', '.join(agree) or 'none of the rows above'}",
                     "how it counted: the paper gives no exact count"))
    return Table(("source", "total", "vs BertModel", "rounded", "includes", "leaves out"), rows,
                 title=f"BERT parameter totals reconciled (L={c.num_layers}, H={c.hidden_size}, "
                       f"n_h={c.num_heads}, F={c.ffn_size})", notes=("includes", "leaves out"))


def family_ledgers() -> Table:
    """Each family's base model counted from its published config (its record's `published`, with whether its
    bare *Model has a pooler): the ledgers side by side."""
    rows = []
    for record in families.FAMILIES.values():
        name, c = record.published[0], BertConfig.from_hf_dict(dict(record.published[1]))
        pooler = record.base_has_pooler
        shapes = param_shapes(c, pooler=pooler)
        total = convention_total(c, Convention(pooler=pooler))
        assert total == sum(_numel(s) for s in shapes.values())  # shapes and closed form agree
        emb = sum(_numel(s) for k, s in shapes.items() if k.startswith("embed."))
        layers = sum(_numel(s) for k, s in shapes.items() if k.startswith("layer."))
        rows.append((name, c.model_type, c.num_layers, c.hidden_size, c.embed_size,
                     "1 (shared)" if c.shared_layers else str(c.num_layers), emb, layers,
                     total - emb - layers, total, f"{total / 1e6:.1f}M"))
    return Table(("model", "model_type", "L", "H", "E", "layers stored", "embeddings", "encoder", "pooler",
                  "total", "rounded"), rows, title="the BERT family's base models, counted from their configs")


def component_counts(c: BertConfig | None = None) -> dict[str, int]:
    """The pieces the seed facts list: embeddings, one layer and its parts, twelve layers, pooler."""
    c = c or BertConfig()
    H, F = c.hidden_size, c.ffn_size
    return {
        "token embeddings": c.vocab_size * H,
        "position embeddings": c.max_positions * H,
        "segment embeddings": c.type_vocab_size * H,
        "embedding layernorm": 2 * H,
        "embeddings": c.vocab_size * H + c.max_positions * H + c.type_vocab_size * H + 2 * H,
        "one of Q, K, V": H * H + H,
        "output projection": H * H + H,
        "attention layernorm": 2 * H,
        "ffn up": H * F + F,
        "ffn down": F * H + H,
        "ffn layernorm": 2 * H,
        "one encoder layer": 4 * (H * H + H) + 2 * (2 * H) + H * F + F + F * H + H,
        "all encoder layers": c.num_layers * (4 * (H * H + H) + 4 * H + 2 * H * F + F + H),
        "pooler": H * H + H,
    }
