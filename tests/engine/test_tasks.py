"""The mirror task (bertviz_lite.tasks): its sentences follow the rule, its batches feed mlm's training step,
the loop records what it says, and a small BERT trained on it learns the rule (slow)."""
from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import mlm, tasks


def test_sentences_follow_the_mirror_rule():
    task = tasks.MirrorTask(half=5, letters=7)
    for m in task.sample(50, np.random.default_rng(0)):
        assert len(m.ids) == task.length == 12 and m.ids[0] == tasks.CLS and m.ids[-1] == tasks.SEP
        (p,), (t,) = m.positions, m.targets
        assert m.ids[p] == tasks.MASK and m.ids.count(tasks.MASK) == 1
        assert m.ids[task.mirror(p)] == t  # the answer is in plain sight, at the mirror position
        letters = [m.ids[i] if i != p else t for i in range(1, 11)]
        assert letters == letters[::-1] and all(4 <= i < 4 + 7 for i in letters)
    assert task.tokens([1, 4, 5, 3, 2]) == ["[CLS]", "a", "b", "[MASK]", "[SEP]"]


def test_sampling_is_seeded():
    task = tasks.MirrorTask()
    a, b = (task.sample(5, np.random.default_rng(3)) for _ in range(2))
    assert a == b and a != task.sample(5, np.random.default_rng(4))


def test_bad_task_sizes_and_positions_are_refused():
    with pytest.raises(ValueError, match="half"):
        tasks.MirrorTask(half=0)
    with pytest.raises(ValueError, match="letters"):
        tasks.MirrorTask(letters=40)
    with pytest.raises(ValueError, match="holds no letter"):
        tasks.MirrorTask(half=3).mirror(0)


def small_model(task, seed=0):
    return bv.load("random", config=task.config(hidden=16, heads=2, layers=2), mlm=True, seed=seed, backend="numpy")


def test_a_batch_is_what_mlm_trains_on():
    task = tasks.MirrorTask(half=3, letters=5)
    model = small_model(task)
    masked = task.sample(4, np.random.default_rng(1))
    b = task.batch(model, masked)
    assert b.Z.shape == (4, task.length, 16) and b.first == 0
    assert [int(r) for r in b.rows] == [i * task.length + m.positions[0] for i, m in enumerate(masked)]
    params = {k: v for k, v in model.weights.items() if k.startswith("layer.") or k in bv.weights.MLM_LEARNED}
    loss, grads = mlm.loss_and_grads(params, {"embed.W_T": model.weights["embed.W_T"]}, b, model.config, np)
    assert np.isfinite(loss) and set(grads) == set(params)
    # the logits at the chosen rows are the model's own at those positions
    tr = model.trace_ids(masked[0].ids, tokens=task.tokens(masked[0].ids), keep=["mlm.logits"])
    logits, _ = mlm.forward({**model.weights}, b, model.config, np)
    assert np.allclose(logits[0], tr["mlm.logits"][masked[0].positions[0]], atol=1e-5)
    with pytest.raises(ValueError, match="long"):
        tasks.MirrorTask(half=4, letters=5).batch(model, masked)


def test_fit_steps_and_records():
    seen = []

    def grad_fn(params, batch):
        seen.append(batch)
        return float(params["x"]) ** 2, {"x": 2 * params["x"]}

    params, curve = tasks.fit({"x": np.array(3.0)}, lambda p, g: {"x": p["x"] - 0.25 * g["x"]}, 5,
                              np.random.default_rng(0), minibatch=lambda rng: float(rng.random()), grad_fn=grad_fn,
                              heldout=lambda p: float(p["x"]), every=2)
    assert float(params["x"]) == 3.0 * 0.5 ** 5 and len(set(seen)) == 5  # a fresh minibatch each step
    assert [r[0] for r in curve] == [2, 4, 5]
    assert curve[0][1] == (9 + 2.25) / 2 and curve[-1][2] == float(params["x"])


@pytest.mark.slow
def test_a_small_bert_learns_the_mirror():
    task = tasks.MirrorTask(half=6, letters=16)
    model = bv.load("random", config=task.config(hidden=64, heads=4, layers=2), mlm=True, seed=0, backend="numpy")
    c = model.config
    params = {k: v for k, v in model.weights.items() if k.startswith("layer.") or k in bv.weights.MLM_LEARNED}
    frozen = {"embed.W_T": model.weights["embed.W_T"]}
    test = task.batch(model, task.sample(300, np.random.default_rng(1)))
    opt = mlm.Adam(params, np)
    before = tasks.accuracy(params, frozen, test, c, np)
    params, _ = tasks.fit(params, lambda p, g: opt.step(p, g, 3e-3), 300, np.random.default_rng(0),
                          minibatch=lambda rng: task.batch(model, task.sample(64, rng)),
                          grad_fn=lambda p, b: mlm.loss_and_grads(p, frozen, b, c, np),
                          heldout=lambda p: None, every=100)
    assert before < 0.2 and tasks.accuracy(params, frozen, test, c, np) >= 0.95


def _argmax_accuracy(params, frozen, batch, c):
    """What tasks.accuracy must agree with: the share of rows whose argmax (first of equal logits) is the target."""
    logits, _ = mlm.forward({**frozen, **params}, batch, c, np)
    finite = np.isfinite(logits).all(axis=-1)
    return float(np.mean(finite & (np.argmax(logits, axis=-1) == np.asarray(batch.targets))))


@pytest.mark.parametrize("kind", ["all zero", "collapsed head", "times 1e18"])
def test_accuracy_agrees_with_an_argmax_where_logits_tie(kind):
    # every logit equal: an argmax picks id 0 ([PAD]), never a letter; ties are not hits
    task = tasks.MirrorTask(half=3, letters=5)
    model = small_model(task)
    c = model.config
    params = {k: v for k, v in model.weights.items() if k.startswith("layer.") or k in bv.weights.MLM_LEARNED}
    frozen = {"embed.W_T": model.weights["embed.W_T"]}
    if kind == "all zero":
        params = {k: np.zeros_like(v) for k, v in params.items()}
    elif kind == "collapsed head":
        params = {**params, **{k: np.zeros_like(params[k]) for k in ("mlm.ln.gamma", "mlm.ln.beta", "mlm.bias")}}
    else:
        params = {k: v * 1e18 for k, v in params.items()}
    test = task.batch(model, task.sample(50, np.random.default_rng(2)))
    with np.errstate(all="ignore"):
        expected = _argmax_accuracy(params, frozen, test, c)
        assert tasks.accuracy(params, frozen, test, c, np) == expected
    assert expected <= 0.5  # not 1.0: no letter wins a tie against [PAD]


def n46_calls():
    task = tasks.MirrorTask(half=2, letters=3)
    model = small_model(task)

    def fit(**kw):
        args = {"steps": 3, "every": 1, **kw}
        return lambda: tasks.fit({}, lambda p, g: p, args["steps"], np.random.default_rng(0),
                                 minibatch=lambda rng: None, grad_fn=lambda p, b: (0.0, {}),
                                 heldout=lambda p: None, every=args["every"])

    return {
        "half=True": (lambda: tasks.MirrorTask(half=True), TypeError, "half must be an int"),
        "half=10**9": (lambda: tasks.MirrorTask(half=10**9), ValueError, r"half=1000000000.*1 to 255"),
        "letters=2.0": (lambda: tasks.MirrorTask(letters=2.0), TypeError, "letters must be an int"),
        "fit(every=0)": (fit(every=0), ValueError, "every must be a whole number >= 1"),
        "fit(steps=0)": (fit(steps=0), ValueError, "steps must be a whole number >= 1"),
        "fit(steps=-3)": (fit(steps=-3), ValueError, "steps must be a whole number >= 1"),
        "tokens([-1])": (lambda: task.tokens([-1]), ValueError, r"id -1 .* 0 \.\. 6"),
        "tokens([7])": (lambda: task.tokens([7]), ValueError, r"id 7 .* 0 \.\. 6"),
        "sample(10**8)": (lambda: task.sample(10**8, np.random.default_rng(0)), bv.errors.TraceTooLargeError,
                          r"100,000,000 sentences .* MiB"),
        "sample(-1)": (lambda: task.sample(-1, np.random.default_rng(0)), ValueError, "count must be"),
        "empty batch": (lambda: task.batch(model, []), ValueError, "no sentence"),
    }


@pytest.mark.parametrize("name", list(n46_calls()))
def test_task_arguments_are_checked(name):
    call, error, message = n46_calls()[name]
    with pytest.raises(error, match=message):
        call()


def test_numpy_integers_are_whole_numbers():
    task = tasks.MirrorTask(half=np.int64(3), letters=np.int32(5))
    assert task.half == 3 and type(task.half) is int and type(task.letters) is int
    assert task.tokens(np.array([1, 4])) == ["[CLS]", "a"] and len(task.sample(np.int64(2), np.random.default_rng(0))) == 2
