"""Lesson 11's checkers on answers their declared mistakes do not cover: a frozen key returned,
two mistakes at once, an input changed in place, and a right answer's message showing the student's own lines."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))
from course import checks  # noqa: E402
from exercises import ex11  # noqa: E402,F401  (registers lesson 11's checkers)
from bertviz_lite import backward  # noqa: E402


def my_layer_norm_backward(dy, x, gamma, eps):
    return backward.layer_norm_backward(dy, x, gamma, eps, np)


def test_a_right_answer_shows_its_own_lines():
    ok, detail = checks.checker("11.3")(my_layer_norm_backward)
    assert ok and "Yours, written your way: return backward.layer_norm_backward(" in detail, detail


def test_two_mistakes_are_named_as_two():
    def neither(dy, x, gamma, eps):
        sd = np.sqrt(x.var(-1, keepdims=True) + eps)
        dx, dgamma, dbeta = my_layer_norm_backward(dy, x, gamma, eps)
        return dy * gamma / sd, dgamma, dbeta  # neither the mean term nor the variance term

    ok, detail = checks.checker("11.3")(neither)
    assert not ok and "two mistakes" in detail and "mean term" in detail and "variance term" in detail, detail


def test_an_input_changed_in_place_is_named():
    def in_place(dy, x, gamma, eps):
        out = my_layer_norm_backward(dy, x, gamma, eps)
        dy *= 2.0
        return out

    ok, detail = checks.checker("11.3")(in_place)
    assert not ok and "changed its input dy in place" in detail, detail


def test_a_frozen_key_is_named():
    def with_W_T(dy, W, tape, Z, eps):
        dZ, grads = backward.mlm_head_backward(dy, W, tape.__getitem__, Z, ex11.SMALL, np)
        return dZ, {**grads, "embed.W_T": dy.T @ tape["mlm.transform"]}

    ok, detail = checks.checker("11.6")(with_W_T)
    assert not ok and "'embed.W_T' is frozen" in detail, detail


def test_adam_eps_matters_and_the_loop_measures_after_the_step():
    def eps_inside(p, g, m, v, t, lr):
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        return p - lr * (m / (1 - 0.9 ** t)) / np.sqrt(v / (1 - 0.999 ** t) + 1e-6), m, v

    ok, detail = checks.checker("11.10")(eps_inside)
    assert not ok and "under the square root" in detail, detail

    def before(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
        curve, losses = [], []
        for s in range(1, steps + 1):
            h = heldout(params)
            loss, grads = grad_fn(params, minibatch(rng))
            params = step(params, grads)
            losses.append(loss)
            if s % every == 0 or s == steps:
                curve.append((s, sum(losses) / len(losses), h))
                losses = []
        return params, curve

    ok, detail = checks._lookup("11.11").fn(before, params={}, minibatch=None, grad_fn=None, heldout=None)
    assert not ok and "before the step" in detail, detail
