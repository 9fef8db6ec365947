"""families.py: each record is complete and consistent, and callers ask the records (no copy of a record's
fields lives under another name; adding a family is a record and a fixture; tests/loading/test_family_special_tokens.py
then runs every special-token function on its fixture)."""

from __future__ import annotations

import pytest

from bertviz_lite import config, families, params, weights
from bertviz_lite.config import BertConfig

RECORDS = list(families.FAMILIES.values())


@pytest.mark.parametrize("f", RECORDS, ids=lambda f: f.model_type)
def test_each_record_is_consistent(f):
    assert families.family(f.model_type) is f
    assert f.architectures and all(a.startswith(f.class_prefix) for a in f.architectures)
    assert all(h is None or h in config.HEADS for h in f.architectures.values())
    assert all(a.startswith(f.class_prefix) and a not in f.architectures for a in f.refused)
    assert f.checkpoint_prefix == f.model_type + "."
    assert f.tokenizer in ("WordPiece", "BPE", "Unigram")
    special = (f.special.cls, f.special.sep, f.special.pad, f.special.mask, f.special.unk)
    assert len(set(special)) == 5
    # the published config reads back as this family, and every name it maps is an engine weight of that config
    name, d = f.published
    c = BertConfig.from_hf_dict(d)
    assert c.model_type == f.model_type and name
    head_cfg = c.replace(head="sequence_classification", labels=("a", "b"), embedding_size=c.hidden_size // 2)
    known = set(weights.param_shapes(head_cfg, mlm=True, nsp=True)) | set(weights.head_shapes(
        c.replace(head="replaced_token", labels=("replaced",)))) | {"mlm.W_out"}
    for _, ours, _ in f.name_map:
        assert ours.replace("{l}", "0") in known, (f.model_type, ours)
    # the class a model of each head is named by is one the record reads
    for head in {h for h in f.architectures.values()}:
        assert f.architecture(head=head, mlm=False) in f.architectures


def test_callers_ask_the_records():
    # the derived copies that once sat beside the records under other names are gone: callers ask the record
    gone = {config: ("FAMILIES", "RENAMED"), params: ("HAS_POOLER", "PUBLISHED_CONFIGS"),
            weights: ("HF_NAME_MAP", "FAMILY_NAME_MAPS", "FAMILY_PREFIXES", "HF_IGNORED", "UNTIED_DECODER")}
    assert [f"{m.__name__}.{n}" for m, names in gone.items() for n in names if hasattr(m, n)] == []
    assert {t: f.base_has_pooler for t, f in families.FAMILIES.items()} == {
        "bert": True, "roberta": True, "albert": True, "distilbert": False, "electra": False}
    assert [row[0] for row in params.family_ledgers().rows] == [f.published[0] for f in RECORDS]
    assert [f.model_type for f in RECORDS if f.renamed] == ["distilbert"]
    assert [f.model_type for f in RECORDS if f.untied_decoder] == ["bert"]  # the others' untied heads: unread
    assert set(families.PAD_SPELLINGS) == {"[PAD]", "<pad>"}
    assert families.spellings("[MASK]", BertConfig(model_type="roberta")) == {"<mask>"}
    assert families.spellings("[MASK]") == {"[MASK]", "<mask>"}
    assert families.spellings("punct") == {"punct"}
    with pytest.raises(ValueError, match="deberta.*'albert', 'bert', 'distilbert', 'electra', 'roberta'"):
        families.family("deberta")


def test_a_checkpoint_reads_its_own_familys_names_only():
    # ignored names and the prefix are the family's: a DistilBERT checkpoint's tied projector is skipped,
    # a BERT checkpoint holding one is an unexpected tensor
    assert weights.normalise_hf_name("distilbert.embeddings.LayerNorm.gamma", "distilbert") == \
        "embeddings.LayerNorm.weight"
    assert weights.normalise_hf_name("roberta.embeddings.x", "bert") == "roberta.embeddings.x"
    assert families.DISTILBERT.ignores("vocab_projector.weight") and not families.BERT.ignores("vocab_projector.weight")
    assert families.BERT.engine_name("encoder.layer.3.attention.self.query.weight") == ("layer.3.attn.W_Q", True)
    assert families.DISTILBERT.engine_name("encoder.layer.3.attention.self.query.weight") is None
