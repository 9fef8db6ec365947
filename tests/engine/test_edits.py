"""Forward-pass edits: the formula path (fast=False), ablate / replace / scale, activation
patching, compare, and the errors for edits and keep= patterns that cannot work."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import backend, engine, kernels
from bertviz_lite.errors import EditError, PatternError

from ..conftest import SMALL
from ..helpers import FLOAT32_PRODUCT_ATOL, host, host_weights


def has_kernel(model, name: str) -> bool:
    """Whether the fast path replaces formula `name` on this model's backend (float32)."""
    return (name, model.backend, "float32") in kernels.FUSED and kernels.kernels_run_on(model.backend)


PAIR = ("The cat sat on the mat.", "It purred quietly.")


# ---------------------------------------------------------------------------------------------
# the formula path
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["base", "minilm"])
def test_fast_and_formula_paths_agree_on_every_key(which, request):
    model = request.getfixturevalue(which)
    fast = model.trace(*PAIR, pad_to=24)
    formula = model.trace(*PAIR, pad_to=24, fast=False)
    assert fast.keys() == formula.keys() == model.trace_keys()
    worst = 0.0
    for key in fast.keys():
        a, b = host(fast[key]), host(formula[key])
        finite = np.isfinite(a)
        np.testing.assert_array_equal(finite, np.isfinite(b), err_msg=key)  # the same -inf on [PAD] keys
        scale = max(np.abs(a[finite]).max(), 1e-30)
        err = np.abs(a[finite] - b[finite]).max() / scale
        worst = max(worst, err)
        assert err <= 5e-6, f"{key}: {err:.2e} of its largest magnitude"
    # with kernels for this backend the two paths really are different code; without (the stand-in), the same
    assert (worst > 0) == kernels.kernels_run_on(model.backend)


def test_the_formula_path_runs_the_lines_as_written(small, monkeypatch):
    plain = small.trace("a student edits a line")

    @engine.fusable
    def layer_norm(x, gamma, beta, eps, xp):  # eps moved outside the square root
        mu = xp.mean(x, axis=-1, keepdims=True)
        var = xp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / (xp.sqrt(var) + 1e-1) * gamma + beta

    monkeypatch.setattr(engine, "layer_norm", layer_norm)
    edited = small.trace("a student edits a line", fast=False)
    still_fast = small.trace("a student edits a line")
    assert np.abs(host(edited["embed.ln"]) - host(plain["embed.ln"])).max() > 1e-3
    # the fast path replaces the formula by its fused kernel, edited or not: that is what fast=False is for
    # (a backend without a layer_norm kernel runs the edited line on both paths)
    expected = plain if has_kernel(small, "layer_norm") else edited
    np.testing.assert_array_equal(host(still_fast["embed.ln"]), host(expected["embed.ln"]))


def test_an_edited_activation_line_takes_effect(small, monkeypatch):
    plain = small.trace("hello there", fast=False)
    monkeypatch.setattr(engine, "gelu", engine.fusable(lambda x, xp: x))
    tr = small.trace("hello there", fast=False)
    np.testing.assert_array_equal(host(tr["layer.0.ffn.act"]), host(tr["layer.0.ffn.up"]))
    assert np.abs(host(tr["pooler.out"]) - host(plain["pooler.out"])).max() > 0


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_an_edit_of_W_Q_takes_effect_on_the_fast_and_the_formula_path(how):
    # the fast path's one [W^Q | W^K | W^V] is made when the model is built; the dict holds views of it, so an
    # edit in place is an edit of the packed array, and a replaced array makes the kernel run the three lines.
    # (Before, a weight replaced in model.weights was not read by any layer: the layers read a copy of the dict.)
    model = bv.load("random", seed=6, config=SMALL)
    key, d = "layer.1.attn.W_Q", model.config.head_size
    plain = {fast: model.trace(*PAIR, fast=fast) for fast in (True, False)}
    new = host_weights(model)[key].copy()
    new[:, :d] = 0.0  # head 0's queries are its bias alone
    if how == "in place":
        model.weights[key][:, :d] = backend.from_host(new[:, :d], model.xp)
    else:
        model.weights[key] = backend.from_host(new, model.xp)
    b_Q = host_weights(model)["layer.1.attn.b_Q"]
    for fast in (True, False):
        tr = model.trace(*PAIR, fast=fast)
        q = host(tr["layer.1.attn.q"])
        np.testing.assert_array_equal(q[0], np.broadcast_to(b_Q[:d], q[0].shape), err_msg=f"fast={fast}")
        expected = engine.split_heads(host(tr["layer.0.ffn.ln"]) @ new + b_Q, model.config.num_heads, np)
        np.testing.assert_allclose(q, expected, atol=2e-5, err_msg=f"fast={fast}")
        # below the edit the same computation runs again: the same bits. K and V are the same computation too,
        # except on the fast path once W^Q is replaced: the plain trace took them from the one [W^Q | W^K | W^V]
        # product, this one from their own products, and two BLAS products round differently (by 1e-7 in 83
        # of 960 values with OpenBLAS's Haswell or Zen kernels; bit-equal with SkylakeX): float32 rounding apart.
        np.testing.assert_array_equal(host(tr["layer.0.ffn.ln"]), host(plain[fast]["layer.0.ffn.ln"]))
        same_product = how == "in place" or not fast or model.backend != "numpy"
        for unchanged in ("layer.1.attn.k", "layer.1.attn.v"):
            if same_product:
                np.testing.assert_array_equal(host(tr[unchanged]), host(plain[fast][unchanged]), err_msg=unchanged)
            else:
                np.testing.assert_allclose(host(tr[unchanged]), host(plain[fast][unchanged]), rtol=1e-5,
                                           atol=FLOAT32_PRODUCT_ATOL, err_msg=unchanged)
        assert np.abs(host(tr["layer.1.attn.scores"]) - host(plain[fast]["layer.1.attn.scores"])).max() > 1e-2
    if model.backend == "numpy":  # in place the one product still runs; replaced, the three lines
        packed = model.layer_weights[1].qkv
        assert packed.current(model.layer_weights[1]) == (how == "in place")


def test_fused_kernels_are_decided_in_one_table():
    lines = {"layer_norm", "softmax", "gelu", "matmul", "queries_keys_values"}
    assert set(kernels.FUSED) == {(name, b, "float32") for name in lines for b in ("numpy", "cupy")}
    for name, _, _ in kernels.FUSED:  # every kernel replaces a formula line the engine runs (none unreachable)
        assert hasattr(getattr(engine, name), "formula"), name
    x = np.ones((2, 3), dtype=np.float32)
    assert kernels.fused_kernel("softmax", x) is not None
    with kernels.fast_path(False):
        assert kernels.fused_kernel("softmax", x) is None
    assert kernels.fused_kernel("softmax", x.astype(np.float64)) is None


# ---------------------------------------------------------------------------------------------
# edits
# ---------------------------------------------------------------------------------------------


def test_zero_ablation_silences_the_head_and_the_rest_uses_it(small):
    plain = small.trace("the quick brown fox")
    tr = small.trace("the quick brown fox", edits=bv.ablate(heads={1: [2]}))
    ctx = host(tr["layer.1.attn.context"])
    assert np.all(ctx[2] == 0)
    np.testing.assert_array_equal(np.delete(ctx, 2, axis=0), np.delete(host(plain["layer.1.attn.context"]), 2, axis=0))
    W = host_weights(small)  # W^O receives nothing from head 2: the output is the other heads' share alone
    concat = host(tr["layer.1.attn.concat"])
    d = small.config.head_size
    assert np.all(concat[:, 2 * d:3 * d] == 0)
    np.testing.assert_allclose(host(tr["layer.1.attn.out"]), concat @ W["layer.1.attn.W_O"] + W["layer.1.attn.b_O"],
                               atol=1e-5)
    for key in plain.keys():  # everything before the edit is unchanged, the output after it moves
        if key < "layer.1.attn.context" and key.startswith(("embed", "layer.0")):
            np.testing.assert_array_equal(host(tr[key]), host(plain[key]))
    assert np.abs(host(tr["pooler.out"]) - host(plain["pooler.out"])).max() > 0
    assert tr.edits == (("layer.1.attn.context", "zero-ablated head 2"),)
    assert tr.is_edited("layer.1.attn.context") and not tr.is_edited("layer.1.attn.out")
    assert "edited" in tr.shapes().columns and "1 edited" in repr(tr)


def test_mean_ablation_puts_the_heads_mean_over_real_tokens_in_every_row(small):
    plain = small.trace("one two three", pad_to=10)
    tr = small.trace("one two three", pad_to=10, edits=bv.ablate(heads={0: [1, 3]}, how="mean"))
    real = np.array(plain.mask, bool)
    for h in (1, 3):
        want = host(plain["layer.0.attn.context"])[h][real].mean(axis=0)
        np.testing.assert_allclose(host(tr["layer.0.attn.context"])[h], np.broadcast_to(want, (10, want.size)),
                                   atol=1e-6)
    np.testing.assert_array_equal(host(tr["layer.0.attn.context"])[0], host(plain["layer.0.attn.context"])[0])


def test_replace_scale_and_custom_functions(small):
    n = small.tokenize("a b c d").ids.__len__()
    uniform = np.full((SMALL["num_heads"], n, n), 1.0 / n)
    tr = small.trace("a b c d", edits=bv.replace("layer.0.attn.probs", uniform))
    np.testing.assert_allclose(host(tr["layer.0.attn.context"]),
                               np.broadcast_to(host(tr["layer.0.attn.v"]).mean(axis=1, keepdims=True),
                                               tr["layer.0.attn.context"].shape), atol=1e-6)
    tr = small.trace("a b c d", edits=bv.scale("attn.out", 0.0))  # every layer: attention adds nothing
    for layer in range(SMALL["num_layers"]):
        z_in = host(tr["embed.ln"]) if layer == 0 else host(tr[f"layer.{layer - 1}.ffn.ln"])
        np.testing.assert_array_equal(host(tr[f"layer.{layer}.attn.resid"]), z_in)
    assert [k for k, _ in tr.edits] == ["layer.0.attn.out", "layer.1.attn.out"]
    tr = small.trace("a b c d", edits={"layer.1.ffn.act": lambda a: a * 2})
    np.testing.assert_allclose(host(tr["layer.1.ffn.act"]), 2 * host(small.trace("a b c d")["layer.1.ffn.act"]),
                               rtol=1e-6)


def test_edits_combine_with_or_and_dict_merge(small):
    a, b = bv.ablate(heads={0: [0]}), bv.ablate(heads={0: [1]})
    both = small.trace("x y z", edits=a | b)
    ctx = host(both["layer.0.attn.context"])
    assert np.all(ctx[0] == 0) and np.all(ctx[1] == 0) and np.any(ctx[2] != 0)
    merged = small.trace("x y z", edits={**a, **bv.scale("ffn.act", 0.5)})
    assert [k for k, _ in merged.edits] == ["layer.0.attn.context", "layer.0.ffn.act", "layer.1.ffn.act"]
    with_dict = small.trace("x y z", edits={"layer.1.ffn.up": lambda u: u} | b)
    assert [k for k, _ in with_dict.edits] == ["layer.0.attn.context", "layer.1.ffn.up"]


def test_edits_apply_when_nothing_is_recorded(small):
    full = small.trace("x y z", edits=bv.scale("ffn.act", 0.0))
    only = small.trace("x y z", keep=["pooler.out"], edits=bv.scale("ffn.act", 0.0))
    np.testing.assert_array_equal(host(only["pooler.out"]), host(full["pooler.out"]))
    assert only.keys() == ["pooler.out"] and len(only.edits) == SMALL["num_layers"]


def test_edits_run_under_array_api_strict():
    pytest.importorskip("array_api_strict")
    m = bv.load("random", seed=3, config=SMALL, backend="array_api_strict")
    tr = m.trace("strict heads", edits=bv.ablate(heads={1: [0]}, how="mean") | bv.scale("attn.out", 0.5))
    ref = bv.load("random", seed=3, config=SMALL).trace(
        "strict heads", edits=bv.ablate(heads={1: [0]}, how="mean") | bv.scale("attn.out", 0.5))
    np.testing.assert_allclose(host(tr["pooler.out"]), host(ref["pooler.out"]), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# activation patching and compare
# ---------------------------------------------------------------------------------------------


def test_patching_takes_the_named_tensors_from_the_other_run(small):
    clean = small.trace("the cat sat down")
    corrupt = small.trace("the dog ran off")
    assert clean.n == corrupt.n
    patched = small.trace("the dog ran off", patch_from=clean, patch=["layer.1.ffn.ln"])
    np.testing.assert_array_equal(host(patched["layer.1.ffn.ln"]), host(clean["layer.1.ffn.ln"]))
    np.testing.assert_allclose(host(patched["pooler.out"]), host(clean["pooler.out"]), atol=1e-6)
    np.testing.assert_array_equal(host(patched["layer.1.attn.q"]), host(corrupt["layer.1.attn.q"]))
    assert patched.edits[0][0] == "layer.1.ffn.ln" and "patched from" in patched.edits[0][1]


def test_compare_reports_where_two_runs_differ(small, small_mlm):
    a = small.trace("compare these two runs")
    b = small.trace("compare these two runs", edits=bv.ablate(heads={1: [3]}))
    t = bv.compare(a, b)
    rows = {r[0]: r for r in t.rows}
    assert list(rows) == a.keys()
    assert rows["layer.0.ffn.ln"][1:] == (0.0, 0.0, pytest.approx(1.0))
    assert rows["layer.1.attn.context"][1] > 0 and rows["layer.1.attn.context"][2] > 0
    assert rows["pooler.out"][3] < 1.0
    same = bv.compare(a, small.trace("compare these two runs"))
    assert all(r[1] == 0.0 and r[3] == pytest.approx(1.0) for r in same.rows)
    assert len(same.changed()) == 0 and len(t.changed()) < len(t)
    zeroed = bv.compare(a, small.trace("compare these two runs", edits=bv.scale("layer.0.attn.out", 0.0)),
                        keys="layer.0.attn.*")
    assert [r[0] for r in zeroed.rows] == [f"layer.0.attn.{k}" for k in
                                          ("q", "k", "v", "scores", "probs", "context", "concat", "out", "resid", "ln")]
    assert dict((r[0], r[3]) for r in zeroed.rows)["layer.0.attn.out"] == 0.0  # one side all zeros: cos 0
    m1 = small_mlm.trace("paris is the [MASK] of france.")
    m2 = small_mlm.trace("paris is the [MASK] of france.", edits=bv.scale("layer.1.ffn.ln", 0.0))
    changes = bv.compare(m1, m2, model=small_mlm).mask_changes
    assert len(changes) == 1 and changes[0][0] == m1.tokens.index("[MASK]") and len(changes[0][1]) == 5
    assert "[MASK] at" in str(bv.compare(m1, m2, model=small_mlm))


# ---------------------------------------------------------------------------------------------
# what is refused, before the forward runs where it can be
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def no_forward(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the forward pass ran")
    monkeypatch.setattr(engine, "forward", boom)


@pytest.mark.parametrize("edits,match", [
    ({"attn.prob": lambda x: x}, r"'attn.prob' matches no trace key.*'attn.probs'"),
    ({"layer.7.attn.probs": lambda x: x}, r"layers 0..1"),
    (lambda: bv.ablate(heads={0: [9]}), r"head\(s\) \[9\] out of range.*0..3"),
    (lambda: bv.replace("layer.0.attn.probs", np.zeros((4, 3, 3))), r"shape \(4, 3, 3\).*\(4, 5, 5\)"),
])
def test_bad_edits_are_refused_before_the_forward(small, no_forward, edits, match):
    edits = edits() if callable(edits) else edits
    with pytest.raises(bv.BertVizError, match=match):
        small.trace("a b c", edits=edits)


@pytest.mark.parametrize("f,match", [
    (lambda x: x[..., :2], r"returned shape .* expected"),
    (lambda x: backend.namespace_of(x).astype(x, backend.namespace_of(x).float64),
     r"returned dtype \S*float64; expected \S*float32"),  # (the stand-in's dtypes print as array_api_strict.float64)
    (lambda x: x * np.nan, r"produced 1280 NaN; edits must keep the values finite"),
    (lambda x: x * np.inf, r"new infinite value"),
    (lambda x: [1, 2], r"returned a list"),
])
def test_edits_that_return_the_wrong_thing_name_the_key(small, f, match):
    with pytest.raises(EditError, match=r"'layer.0.ffn.up'.*" + match):
        small.trace("a b c", edits={"layer.0.ffn.up": f})


def test_scores_may_keep_the_padding_masks_infinities_but_not_flip_them(small):
    for factor in (2.0, 0.0, -1.0):  # scale() leaves infinities alone: no NaN from -inf * 0
        tr = small.trace("a b", pad_to=8, edits=bv.scale("attn.scores", factor))
        assert np.isinf(host(tr["layer.0.attn.scores"])).any() and np.isfinite(host(tr["pooler.out"])).all()
    with pytest.raises(EditError, match="new infinite value.*large negative number"):
        small.trace("a b", pad_to=8, edits={"attn.scores": lambda s: -s})  # -inf -> +inf: NaN downstream


def test_errors_inside_an_edit_name_the_key(small):
    with pytest.raises(EditError, match=r"'layer.1.attn.out'.*TypeError.*bv.Edit\(f, 'what it does', needs_context"):
        small.trace("x", edits={"layer.1.attn.out": lambda x, hook: x})  # a TransformerLens-style hook
    with pytest.raises(EditError, match=r"'layer.0.ffn.up'.*ZeroDivisionError"):
        small.trace("x", edits={"layer.0.ffn.up": lambda x: 1 / 0})


def test_scale_takes_any_real_number_and_keeps_the_dtype(small):
    ref = host(small.trace("x y")["layer.0.ffn.act"])
    for factor in (0.5, np.float64(0.5), np.float32(0.5)):
        np.testing.assert_allclose(host(small.trace("x y", edits=bv.scale("ffn.act", factor))["layer.0.ffn.act"]),
                                   0.5 * ref, rtol=1e-6)


def test_bad_patches_are_refused_before_the_forward(small, small_mlm, monkeypatch):
    a = small.trace("one two three")
    longer = small.trace("one two three four")
    other = small_mlm.trace("one two three")
    probs_only = small.trace("one two three", keep=["attn.probs"])
    padded = small.trace("one two", pad_to=5)
    monkeypatch.setattr(engine, "forward", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    with pytest.raises(EditError, match="6 tokens.*this input has 5"):
        small.trace("one two three", patch_from=longer, patch=["layer.0.ffn.ln"])
    with pytest.raises(EditError, match="patch between runs of one model"):
        small.trace("one two three", patch_from=other, patch=["layer.0.ffn.ln"])
    with pytest.raises(EditError, match="not in patch_from.*keep="):
        small.trace("one two three", patch_from=probs_only, patch=["layer.0.ffn.ln"])
    with pytest.raises(PatternError, match="patch= pattern 'ffn.lm'"):
        small.trace("one two three", patch_from=a, patch=["ffn.lm"])
    with pytest.raises(ValueError, match="patch_from="):
        small.trace("one two three", patch=["ffn.ln"])
    with pytest.raises(EditError, match="another padding mask"):
        small.trace("one two three", patch_from=padded, patch=["layer.0.ffn.ln"])


def test_builders_refuse_nonsense(small):
    with pytest.raises(ValueError, match="how="):
        bv.ablate(heads={0: [1]}, how="drop")
    with pytest.raises(TypeError, match="layer -> heads"):
        bv.ablate(heads=[0, 1])
    with pytest.raises(TypeError, match="finite real number"):
        bv.scale("attn.out", float("inf"))
    with pytest.raises(TypeError, match="finite real number"):
        bv.scale("attn.out", "2")
    with pytest.raises(TypeError, match="a head must be an int, got bool True"):
        bv.ablate(heads={3: [True]})
    with pytest.raises(TypeError, match="a layer must be an int, got str '3'"):
        bv.ablate(heads={"3": [5]})
    with pytest.raises(ValueError, match="count layers and heads from 0"):
        bv.ablate(heads={-1: [0]})
    with pytest.raises(ValueError, match="names no head"):
        bv.ablate(heads={3: []})
    with pytest.raises(ValueError, match="names no layer"):
        bv.ablate(heads={})
    assert bv.ablate(heads={np.int64(1): [np.int64(2), 2]})["layer.1.attn.context"].description == \
        "zero-ablated head 2"
    for value in (None, "abc", [[1j]], True):
        with pytest.raises(TypeError, match="array of real numbers"):
            bv.replace("layer.0.attn.probs", value)
    with pytest.raises(TypeError, match="maps patterns to functions"):
        small.trace("x", edits={"attn.out": 3})
    with pytest.raises(TypeError, match=r"edits= takes \{pattern: f\}"):
        small.trace("x", edits=[bv.scale("attn.out", 2)])


# ---------------------------------------------------------------------------------------------
# keep= never records nothing by mistake
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keep,match", [
    (["attn.prob"], r"'attn.prob' matches no trace key.*did you mean 'attn.probs'"),
    (["Attn.Probs"], r"'Attn.Probs' matches no trace key.*'attn.probs'"),
    (["layer.5.attn.probs"], r"this model has layers 0..1"),
    (["mlm.logits"], r"no such head"),
    ([3], r"glob patterns as strings"),
])
def test_keep_patterns_that_match_nothing_are_refused(small, no_forward, keep, match):
    with pytest.raises((PatternError, TypeError), match=match):
        small.trace("hello", keep=keep)


def test_keep_takes_any_iterable(small):
    gen = (p for p in ["attn.probs", "embed.sum"])
    assert small.trace("hello", keep=gen).keys() == ["embed.sum", "layer.0.attn.probs", "layer.1.attn.probs"]
    assert small.trace("hello", keep=iter(["pooler.out"])).keys() == ["pooler.out"]
    assert small.trace("hello", keep=()).keys() == []


# ---------------------------------------------------------------------------------------------
# head importance for a trained task (sentence-embedding similarity)
# ---------------------------------------------------------------------------------------------


def test_sentence_embedding_is_the_mean_of_the_last_layer_over_real_tokens(small):
    from bertviz_lite import analysis
    tr = small.trace("mean pooling here", pad_to=12)
    real = np.array(tr.mask, bool)
    np.testing.assert_allclose(analysis.sentence_embedding(tr), host(tr["layer.1.ffn.ln"])[real].mean(axis=0),
                               atol=1e-6)


def test_head_importance_is_the_cosine_change_when_each_head_is_ablated(small):
    from bertviz_lite import analysis
    pairs = [("a cat sat", "a dog sat"), ("rain falls", "the sun shines brightly")]
    imp = analysis.head_importance(small, pairs)
    assert imp.shape == (SMALL["num_layers"], SMALL["num_heads"]) and np.all(imp >= 0) and imp.max() > 0

    def emb(text, edits=None):
        return host(small.trace(text, edits=edits)["layer.1.ffn.ln"]).mean(axis=0)

    def cos(u, v):
        return u @ v / np.linalg.norm(u) / np.linalg.norm(v)

    edit = bv.ablate(heads={1: [2]})
    want = np.mean([abs(cos(emb(a, edit), emb(b, edit)) - cos(emb(a), emb(b))) for a, b in pairs])
    assert imp[1, 2] == pytest.approx(want, abs=1e-6)
    with pytest.raises(ValueError, match="pairs"):
        analysis.head_importance(small, [("only one",)])
    with pytest.raises(ValueError, match="pairs"):
        analysis.head_importance(small, ["ab"])
    assert bv.analysis is analysis


def test_head_importance_shows_progress_unless_told_not_to(small, capsys):
    from bertviz_lite import analysis
    pairs = [("a cat sat", "a dog sat")]
    a = analysis.head_importance(small, pairs)
    err = capsys.readouterr().err
    n = SMALL["num_layers"] * SMALL["num_heads"]
    assert "head_importance: ablating heads" in err and f"{n}/{n}" in err
    b = analysis.head_importance(small, pairs, progress=False)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# an edit cannot change its input, nor a key recorded before it
# ---------------------------------------------------------------------------------------------


def _write_inf(x):
    x[...] = np.inf  # in place: what an edit must not be able to do
    return x


@pytest.mark.cpu_path("numpy's read-only view; a device array has no read-only flag, and the edit gets a copy "
                     "(test_on_a_device_an_edit_gets_a_copy)")
@pytest.mark.parametrize("key", ["layer.0.attn.probs", "layer.1.ffn.act", "embed.sum"])
def test_an_in_place_edit_fails_naming_the_key(small, key):
    with pytest.raises(EditError, match=f"{key}.*read-only.*in place"):
        small.trace("the cat sat", edits={key: _write_inf})


@pytest.mark.cpu_path("numpy's read-only view (test_on_a_device_an_edit_gets_a_copy checks devices)")
def test_with_one_head_an_edit_of_the_concatenation_cannot_rewrite_the_context():
    one_head = bv.load("random", seed=5, config={**SMALL, "num_heads": 1})
    with pytest.raises(EditError, match="attn.concat.*read-only"):
        one_head.trace("the cat sat", edits={"layer.0.attn.concat": _write_inf})


def test_an_edit_may_change_a_copy_of_its_input():
    one_head = bv.load("random", seed=5, config={**SMALL, "num_heads": 1})  # concat is a view of context on numpy

    def double_a_copy(x):
        y = backend.namespace_of(x).asarray(x, copy=True)
        y *= 2
        return y

    plain = one_head.trace("the cat sat")
    tr = one_head.trace("the cat sat", edits={"layer.0.attn.concat": double_a_copy})
    np.testing.assert_array_equal(host(tr["layer.0.attn.context"]), host(plain["layer.0.attn.context"]))
    np.testing.assert_allclose(host(tr["layer.0.attn.concat"]), 2 * host(plain["layer.0.attn.concat"]))


DEVICES = ["gpu_standin"] + (["cupy"] if backend.cupy_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_on_a_device_an_edit_gets_a_copy(device):
    """What holds on a device instead of numpy's read-only view: an edit that writes into its input writes
    into a copy, so no recorded tensor changes (with one head, concat is a reshape of context)."""
    one_head = bv.load("random", seed=5, config={**SMALL, "num_heads": 1}, backend=device)

    def zero_in_place(x):
        x[...] = 0.0  # into the copy the edit was given
        return x + 1.0

    plain = one_head.trace("the cat sat")
    tr = one_head.trace("the cat sat", edits={"layer.0.attn.concat": zero_in_place})
    np.testing.assert_array_equal(host(tr["layer.0.attn.context"]), host(plain["layer.0.attn.context"]))
    np.testing.assert_array_equal(host(tr["layer.0.attn.concat"]), 1.0)


def test_an_edit_that_returns_its_input_leaves_the_trace_as_it_was(small):
    plain = small.trace("the cat sat")
    tr = small.trace("the cat sat", edits={"attn.probs": lambda a: a})
    for key in plain.keys():
        np.testing.assert_array_equal(host(tr[key]), host(plain[key]))
