"""The BERT family and the task heads against transformers: tiny checkpoints that transformers saved
(tests/fixtures/make_family.py writes them and their reference values), loaded by bv.load as a user
would; the tokenizer's ids and every captured stage and head.logits within 1e-5."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import families, schema
from bertviz_lite.backend import to_host
from bertviz_lite.config import BertConfig
from bertviz_lite.errors import CheckpointError
from bertviz_lite.params import convention_total, count_params, family_ledgers

FIXTURES = Path(__file__).parents[1] / "fixtures"
REFERENCES = FIXTURES / "family"  # one npz per case, written by make_family.py
CASES = sorted(p.stem for p in REFERENCES.glob("*.npz"))
TOL = 1e-5


def reference(name):
    ref = np.load(REFERENCES / f"{name}.npz")
    return ref, json.loads(ref["meta"].item())


@pytest.fixture(scope="module", params=CASES)
def case(request):
    ref, meta = reference(request.param)
    model = bv.load(FIXTURES / meta["folder"], backend="numpy")
    return model, ref, meta


def test_every_family_and_head_has_a_fixture():
    families = {reference(n)[1]["family"] for n in CASES}
    assert families == {"bert", "roberta", "distilbert", "electra", "albert"}
    heads = {BertConfig.from_json(FIXTURES / reference(n)[1]["folder"] / "config.json").head for n in CASES}
    assert heads == {None, "sequence_classification", "token_classification", "question_answering",
                     "next_sentence", "replaced_token"}


def test_tokenizer_gives_transformers_ids(case):
    model, ref, meta = case
    enc = model.tokenize(meta["text"], meta["pair"])
    assert enc.tokens == meta["tokens"]
    assert enc.ids == ref["input.ids"].tolist()
    assert enc.segments == ref["input.segments"].tolist()
    assert enc.mask == ref["input.mask"].tolist()


def test_every_stage_and_the_head_match_transformers(case):
    model, ref, meta = case
    tr = model.trace_ids(ref["input.ids"], ref["input.segments"], ref["input.mask"])
    assert list(tr.keys()) == model.trace_keys()  # the same keys as BERT's, plus the family's and head's
    compared = [k for k in ref.files if not k.startswith(("meta", "input."))]
    assert len(compared) >= 8 * model.config.num_layers + 4  # every layer's stages, not a few
    for key in compared:
        ours, theirs = to_host(tr[key]), ref[key]
        assert ours.shape == theirs.shape, key
        np.testing.assert_allclose(ours, theirs, rtol=TOL, atol=TOL, err_msg=key)
    has_head = "head.logits" in ref.files or "mlm.logits" in ref.files
    assert has_head == (meta["architecture"] not in ("BertModel",))


# each fixture's head, its labels as make_family.py wrote them into config.json (written out here, not read back
# the way the loader reads them), and head.logits' shape for the n tokens of the input
LABELS = {
    "albert_mlm": (None, ()), "bert_cased": (None, ()), "roberta_mlm": (None, ()),
    "albert_seqcls": ("sequence_classification", ("neg", "pos")),
    "bert_seqcls": ("sequence_classification", ("neg", "pos")),
    "electra_seqcls": ("sequence_classification", ("neg", "pos")),
    "roberta_seqcls": ("sequence_classification", ("neg", "pos")),
    "distilbert_seqcls": ("sequence_classification", ("neg", "neutral", "pos")),
    "bert_tokencls": ("token_classification", ("O", "B-PER", "I-PER", "B-LOC")),
    "bert_qa": ("question_answering", ("start", "end")), "distilbert_qa": ("question_answering", ("start", "end")),
    "bert_nsp": ("next_sentence", ("isNext", "notNext")), "electra_discriminator": ("replaced_token", ("replaced",)),
}


def test_head_labels_come_from_id2label(case):
    model, ref, meta = case
    head, labels = LABELS[meta["folder"].rsplit("/", 1)[-1]]
    tr = model.trace(meta["text"], meta["pair"])
    assert (model.config.head, model.config.labels, tr.labels) == (head, labels, labels)
    n, k = tr.n, len(labels)
    shape = {None: None, "sequence_classification": (k,), "next_sentence": (2,), "token_classification": (n, k),
             "question_answering": (n, 2), "replaced_token": (n,)}[head]
    if shape is None:
        assert "head.logits" not in tr
        with pytest.raises(KeyError, match="head.logits"):
            tr["head.logits"]
    else:
        assert tuple(tr["head.logits"].shape) == shape
        assert tr.axes("head.logits")[-1] == ("label" if head not in ("replaced_token",) else "token")
        assert any(label in bv.analysis.head_summary(tr) for label in labels) or head in (
            "question_answering", "replaced_token")


def test_albert_runs_one_layer_for_every_layer():
    _, meta = reference("albert_seqcls")
    model = bv.load(FIXTURES / meta["folder"])
    assert model.config.shared_layers and not any(k.startswith("layer.1.") for k in model.weights)
    tr = model.trace(meta["text"])
    assert [k for k in tr.keys() if k.startswith("layer.1.")]  # a key per layer all the same
    ledger = count_params(model)  # the one stored layer counted once, and the sum checked against the config
    assert ledger.total == convention_total(model.config)
    assert not any(name.startswith("layer.1.") for _, name, _, _ in ledger.rows)


def test_family_ledgers_from_the_published_configs():
    t = family_ledgers()
    totals = {row[0]: row[-2] for row in t.rows}
    # each total is computed from the published config.json values, then rounded as the papers state
    assert f"{totals['albert-base-v2'] / 1e6:.1f}M" == "11.7M"
    assert f"{totals['distilbert-base-uncased'] / 1e6:.0f}M" == "66M"
    assert f"{totals['roberta-base'] / 1e6:.1f}M" == "124.6M"
    assert totals["bert-base-uncased"] == convention_total(BertConfig())


def test_random_model_with_a_head_counts_and_traces():
    model = bv.load("random", config={"num_layers": 2, "head": "sequence_classification", "labels": ["neg", "pos"]})
    tr = model.trace("I love machine learning")
    assert tr["head.logits"].shape == (2,) and tr.labels == ("neg", "pos")
    ledger = count_params(model)
    assert ledger.by_step()["head.logits"] == 768 * 2 + 2


def test_unknown_head_is_named(tmp_path):
    _, meta = reference("bert_seqcls")
    folder = tmp_path / "m"
    folder.mkdir()
    for f in (FIXTURES / meta["folder"]).iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    d = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**d, "architectures": ["BertForMultipleChoice"]}))
    with pytest.raises(CheckpointError, match="BertForMultipleChoice.*BertForSequenceClassification"):
        bv.load(folder)
    (folder / "config.json").write_text(json.dumps({**d, "architectures": ["BertModel"]}))
    with pytest.raises(CheckpointError, match="classifier.weight.*belongs to a head"):
        bv.load(folder)  # the classifier is never silently dropped
    (folder / "config.json").write_text(json.dumps({**d, "model_type": "deberta"}))
    with pytest.raises(CheckpointError, match="deberta.*albert, bert, distilbert, electra, roberta"):
        bv.load(folder)


@pytest.mark.parametrize("name, changes, key", [
    ("roberta_seqcls", {"position_offset": 0}, "embed.position"),  # RoBERTa's positions start at pad + 1
    ("distilbert_seqcls", {"pooler_act": "tanh"}, "head.logits"),  # DistilBERT's pre_classifier: relu
    ("electra_seqcls", {"pooler_act": "tanh"}, "head.logits"),  # ELECTRA's classifier: gelu
])
def test_each_family_switch_is_needed(name, changes, key):
    """The fixtures can fail: turning a family's switch back to BERT's value breaks parity."""
    ref, meta = reference(name)
    model = bv.load(FIXTURES / meta["folder"]).variant(**changes)
    tr = model.trace_ids(ref["input.ids"], ref["input.segments"], ref["input.mask"])
    assert np.abs(to_host(tr[key]) - ref[key]).max() > 100 * TOL


def test_cased_wordpiece_matches_tokenizers_on_the_hard_strings():
    """Cased and multilingual BERT (do_lower_case false): accents and case kept, CJK split, as the
    tokenizer.json that transformers wrote (run by the tokenizers library) does it, on the ~600 hard
    strings of test_tokenizer: the normalised words, and the word pieces of the cased vocabulary."""
    import tokenizers

    from tests.loading.test_tokenizer import ALL_STRINGS
    _, meta = reference("bert_cased")
    folder = FIXTURES / meta["folder"]
    mine = bv.load(folder).tokenizer
    assert not mine.do_lower_case and not mine.strip_accents
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    words, pieces = [], []
    for text in ALL_STRINGS:
        expected = [w for w, _ in ref.pre_tokenizer.pre_tokenize_str(ref.normalizer.normalize_str(text))]
        got = ["".join(ch for ch, _ in word) for word in mine.pre_tokenize(mine.normalize(text))]
        if got != expected:
            words.append((text, expected, got))
        e = ref.encode(text, add_special_tokens=False)
        if mine.tokenize_with_spans(text) != [(t, s, end) for t, (s, end) in zip(e.tokens, e.offsets)]:
            pieces.append(text)
    assert not words, f"{len(words)} of {len(ALL_STRINGS)} differ; first: {words[:3]}"
    assert not pieces, f"{len(pieces)} of {len(ALL_STRINGS)} differ; first: {pieces[:3]}"
    assert "".join(t.removeprefix("##") for t in mine.tokenize("Zürich")) == "Zürich"  # case and accents kept
    assert mine.tokenize("東京") == ["東", "京"]  # CJK characters split


@pytest.mark.parametrize("name", ["albert_mlm", "distilbert_qa", "electra_discriminator", "roberta_seqcls"])
def test_family_lines_run_under_array_api_strict(name):
    """The family's switches and the heads are array-API code: the same numbers under array_api_strict."""
    ref, meta = reference(name)
    strict = bv.load(FIXTURES / meta["folder"], backend="array_api_strict")
    tr = strict.trace_ids(ref["input.ids"], ref["input.segments"], ref["input.mask"]).to_host()
    for key in [k for k in ref.files if k.endswith(("logits", ".proj", "segment", "position"))]:
        np.testing.assert_allclose(to_host(tr[key]), ref[key], rtol=TOL, atol=TOL, err_msg=key)


def test_weights_that_do_not_fit_the_config_are_listed(tmp_path):
    """An ALBERT folder whose config says E = 12 while its weights are 8 wide: every mis-shaped tensor named."""
    _, meta = reference("albert_seqcls")
    folder = tmp_path / "m"
    folder.mkdir()
    for f in (FIXTURES / meta["folder"]).iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    d = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**d, "embedding_size": 12}))
    with pytest.raises(CheckpointError) as e:
        bv.load(folder)
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "embeddings.LayerNorm",
                 "embedding_hidden_mapping_in"):
        assert name in str(e.value)


@pytest.mark.parametrize("name", ["roberta_seqcls", "albert_seqcls", "distilbert_qa", "electra_discriminator"])
def test_batches_edits_and_views_work_unchanged(name):
    """The family keeps BERT's keys: a batch equals its traces (head.logits included), an edit applies,
    and the views build from the trace."""
    from bertviz_lite.views import view_data
    _, meta = reference(name)
    model = bv.load(FIXTURES / meta["folder"])
    texts = ["I love the movie!", "The cat sat on the mat."]
    btr = model.trace_batch(texts)
    for i, text in enumerate(texts):
        alone = model.trace(text)
        assert btr[i].keys() == alone.keys()
        for key in ("embed.position", "layer.1.attn.probs", "head.logits"):
            np.testing.assert_allclose(to_host(btr[i][key]), to_host(alone[key]), atol=1e-5, err_msg=key)
    edited = model.trace(texts[0], edits=bv.ablate(heads={0: [0]}))
    assert not np.allclose(to_host(edited["head.logits"]), to_host(model.trace(texts[0])["head.logits"]))
    tr = model.trace(texts[0])
    for view, args in [("attention", {"layer": 1}), ("model", {}), ("step", {"key": "head.logits"}),
                       ("step", {"key": "embed.segment"}), ("params", {})]:
        assert view_data(tr, view, **args)["view"] == view


def test_corpus_statistics_know_the_familys_special_tokens():
    """head_stats on RoBERTa: <s> and </s> are its [CLS] and [SEP] (and <pad> pads the batches)."""
    _, meta = reference("roberta_seqcls")
    model = bv.load(FIXTURES / meta["folder"])
    r = bv.corpus.head_stats(model, ["I love the movie!", "The cat sat on the mat.", "Paris is in France."],
                             progress=False)
    one = bv.analysis.attention_to(model.trace("I love the movie!"), ["[CLS]", "[SEP]"])
    assert r["cls"].min() > 0 and r["sep"].min() > 0 and one["[CLS]"].min() > 0


def test_forward_lines_show_each_familys_changes():
    """schema.forward_lines: BERT's lines, and each family's differences as lines that differ."""
    lines = {f.published[0]: schema.forward_lines(BertConfig.from_hf_dict(f.published[1]), pooler=f.base_has_pooler)
             for f in families.FAMILIES.values()}
    bert = lines["bert-base-uncased"]
    changed = {n: sorted(set(ls) ^ set(bert)) for n, ls in lines.items()}
    assert changed["bert-base-uncased"] == []
    assert r"P = W_P[2{:}2+n]" in changed["roberta-base"] and len(changed["roberta-base"]) == 2
    assert r"S = 0" in changed["distilbert-base-uncased"]
    assert any("W^E" in line for line in changed["albert-base-v2"])
    assert any("shared" in line for line in changed["albert-base-v2"])
    assert not any("W^E" in line for line in changed["electra-base-discriminator"])  # E = H: no projection


def test_every_output_writes_the_configs_own_position_line():
    """The shape table, the CLI and the step view print the line a config runs: BERT's positions start
    at 0 (no undefined offset o), RoBERTa's at 2 (schema.formula_of)."""
    roberta = BertConfig.from_hf_dict(families.ROBERTA.published[1])
    assert schema.formula_of("embed.position", BertConfig()) == r"P = W_P[0{:}n]"
    assert schema.formula_of("embed.position", roberta) == r"P = W_P[2{:}2+n]"
    tr = bv.load("random", seed=0, config={"num_layers": 1}).trace("a b")
    row = next(r for r in tr.shapes().rows if r[0] == "embed.position")
    assert "W_P[0:n]" in row[3] and "o" not in row[3].split("=")[1]
