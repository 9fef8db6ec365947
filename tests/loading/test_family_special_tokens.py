"""Every public function that reads special tokens, on every family fixture (tests/loading/test_family.py's 13 tiny
checkpoints): fill_mask, compare's mask_changes, head statistics and attention_to, Trace.from_attentions'
padding, the views' data builders and head_summary, each with the family's own spelling of [CLS], [SEP],
[PAD] and [MASK] (families.py). Adding a family is a record and a fixture; these tests then cover it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import analysis, families
from bertviz_lite.backend import to_host

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES = sorted(p.stem for p in (FIXTURES / "family").glob("*.npz"))
SENTENCES = ["The cat sat on the mat.", "I love this movie!", "Paris is in France, not Spain."]


def folder(name):
    meta = json.loads(np.load(FIXTURES / "family" / f"{name}.npz")["meta"].item())
    return FIXTURES / meta["folder"]


@pytest.fixture(scope="module", params=CASES)
def model(request):
    return bv.load(folder(request.param), backend="numpy")


def masked(model) -> str:
    return f"the {model.family.special.mask} sat down"


def test_every_family_has_a_record_and_every_fixture_a_family(model):
    record = families.FAMILIES[model.config.model_type]
    assert model.family is record and record.model_type == model.config.model_type
    tok = model.tokenizer
    for name in ("cls", "sep", "pad", "mask"):  # the record spells what the tokenizer writes
        spelled = getattr(record.special, name)
        assert tok.id_to_token(tok.token_to_id(spelled)) == spelled, (record.model_type, name)
    enc = model.tokenize("I love it", pad_to=8)
    assert enc.tokens[0] == record.special.cls and record.special.sep in enc.tokens
    assert enc.tokens[-1] == record.special.pad and enc.mask[-1] == 0


def test_fill_mask_finds_the_familys_mask(model):
    if not model.has_mlm:
        with pytest.raises(bv.BertVizError, match="no masked-lm head"):
            model.fill_mask(masked(model))
        return
    (preds,) = model.fill_mask(masked(model), top_k=3)
    pos = model.tokenize(masked(model)).tokens.index(model.family.special.mask)
    assert [p.position for p in preds] == [pos] * 3
    assert preds[0].probability >= preds[1].probability >= preds[2].probability > 0
    if model.family.special.mask != "[MASK]":  # BERT's spelling is not this family's mask
        with pytest.raises(ValueError, match=f"no {model.family.special.mask}"):
            model.fill_mask("the [MASK] sat down" if "[MASK]" not in model.tokenizer.tokenize("[MASK]") else "no")


def test_compare_lists_the_top_5_at_the_familys_mask(model):
    """The bug this record fixes: RoBERTa's fill_mask predicted at <mask> while compare looked for [MASK]."""
    a = model.trace(masked(model))
    b = model.trace(masked(model), edits=bv.ablate(heads={0: [0]}))
    changes = bv.compare(a, b, model=model).mask_changes
    if not model.has_mlm:
        assert changes == []
        return
    pos = a.tokens.index(model.family.special.mask)
    assert [c[0] for c in changes] == [pos]
    assert changes[0][1] == [p.token for p in model.fill_mask(masked(model), top_k=5)[0]]


def test_head_statistics_find_the_familys_cls_and_sep(model):
    r = bv.corpus.head_stats(model, SENTENCES, batch_size=2, progress=False)
    assert r["cls"].min() > 0 and r["sep"].min() > 0
    tr = model.trace(SENTENCES[0], pad_to=16)
    one = analysis.attention_to(tr, ["[CLS]", "[SEP]"])
    assert one["[CLS]"].min() > 0 and one["[SEP]"].min() > 0
    # the same as naming the family's own spelling
    own = analysis.attention_to(tr, [model.family.special.cls])[model.family.special.cls]
    np.testing.assert_array_equal(own, one["[CLS]"])
    # the statistics of a batch equal the traced sentences' (padding with the family's [PAD] changes nothing)
    for name, target in (("cls", "[CLS]"), ("sep", "[SEP]")):
        mean = np.mean([analysis.attention_to(model.trace(s), [target])[target] for s in SENTENCES], axis=0)
        np.testing.assert_allclose(r[name], mean, atol=1e-5)


@pytest.mark.parametrize("with_config", [False, True])
def test_from_attentions_masks_the_familys_padding(model, with_config):
    tr = model.trace(SENTENCES[0], pad_to=16)
    maps = [to_host(tr.get("attn.probs", layer=layer))[None] for layer in range(tr.num_layers)]
    other = bv.Trace.from_attentions(maps, list(tr.tokens), config=model.config if with_config else None)
    assert other.mask == tr.mask and other.n_real == tr.n_real < tr.n
    np.testing.assert_allclose(analysis.attention_to(other, ["[CLS]", "[SEP]"])["[SEP]"],
                               analysis.attention_to(tr, ["[CLS]", "[SEP]"])["[SEP]"], atol=1e-12)


def test_the_views_data_builders_leave_out_the_familys_padding(model):
    from bertviz_lite.views import view_data
    tr = model.trace(SENTENCES[1], pad_to=16)
    real = [tr.tokens[i] for i in tr.real_positions]
    assert model.family.special.pad not in real
    vd = view_data(tr, "attention", layer=0)
    from bertviz_lite.foreign import prettify_tokens  # the views show tokens prettified (Ġ, ▁, ## dropped)
    assert len(vd["labels"]) == tr.n_real and [label.split(" ", 1)[1] for label in vd["labels"]] == \
        prettify_tokens(real)
    # each label is "position token" (the token may be prettified: "##" or "Ġ" dropped): the real positions only
    assert [int(label.split(" ", 1)[0]) for label in vd["labels"]] == tr.real_positions
    assert not any(label.endswith(" " + model.family.special.pad) for label in vd["labels"])
    assert view_data(tr, "model")["view"] == "model"
    assert view_data(tr, "head", layer=0)["view"] == "head"


def test_head_summary_leaves_out_the_familys_special_tokens(model):
    text, pair = ("Who sat?", "The cat sat on the mat.") if model.config.head in (
        "question_answering", "token_classification", "replaced_token") else \
        (masked(model) if model.has_mlm and model.config.head is None else SENTENCES[0], None)
    tr = model.trace(text, pair, pad_to=24)
    if model.config.head is None and not model.has_mlm:
        with pytest.raises(KeyError, match="has no head.logits"):
            analysis.head_summary(tr)
        return
    line = analysis.head_summary(tr, model=model)
    special = model.family.special
    if model.config.head is None:  # a masked-LM model: the top guesses at its mask, as fill_mask gives them
        best = model.fill_mask(text, top_k=3)[0]
        assert line.startswith(f"at {best[0].position} ({special.mask}): {best[0].token} ")
        assert analysis.head_summary(tr).startswith(f"at {best[0].position} ({special.mask}): #{best[0].id} ")
        return
    if model.config.head in ("token_classification", "replaced_token"):
        shown = [part.split(":")[0] if ":" in part else part.rsplit(" ", 1)[0] for part in
                 line.removesuffix("   (p replaced)").split("  ")]
        assert shown == [t for t in tr.tokens if t not in (special.cls, special.sep, special.pad)]  # both texts
    if model.config.head == "question_answering":
        answer = line.split("'")[1].split(" ")
        context = [tr.tokens[i] for i, s in enumerate(tr.spans) if s is not None and s[0] == 1]
        assert answer and all(t in context for t in answer)
        assert not {special.cls, special.sep, special.pad} & set(answer)


def test_the_repr_says_family_architecture_and_heads(model):
    text = repr(model)
    record = model.family
    arch = json.loads((folder_of(model) / "config.json").read_text()).get("architectures", [None])[0]
    assert text.startswith(f"<{record.name} ") and f": {model.architecture}," in text
    if arch is not None:
        assert model.architecture == arch
    if model.config.head not in (None, "next_sentence"):
        assert f"+{model.config.head} head ({model.config.labels[0]}" in text
    assert ("+mlm head" in text) == model.has_mlm
    assert "Bert " not in text or record.model_type == "bert"


def folder_of(model) -> Path:
    return Path(model.name) if Path(model.name).is_dir() else next(
        folder(c) for c in CASES if folder(c).name == model.name)
