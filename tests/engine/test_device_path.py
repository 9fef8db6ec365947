"""The device path without a GPU: the GPU stand-in (array_api_strict's arrays on its device1, which refuse
np.asarray as CuPy's do) holds every array of a model and its traces on the device, a forward reads nothing
back from it, and what comes to the host comes through backend.to_host. CI runs the engine-facing tests once
more with every load() on the stand-in (scripts/test.sh, BERTVIZ_LITE_BACKEND=gpu_standin)."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_lite as bv
from bertviz_lite import backend

from ..conftest import SMALL
from ..helpers import host, host_reads


@pytest.fixture(scope="module")
def standin():
    return bv.load("random", seed=3, config=SMALL, backend="gpu_standin")


def test_the_standin_refuses_implicit_host_conversion_as_cupy_does(standin):
    W = standin.weights["layer.0.attn.W_Q"]
    with pytest.raises(RuntimeError, match="device1"):
        np.asarray(W)
    np.testing.assert_array_equal(backend.to_host(W), host(W))  # the explicit read works
    assert standin.backend == "gpu_standin" and backend.on_device(standin.xp)


def test_a_trace_lives_on_the_device_and_equals_numpys(standin, small):
    tr = standin.trace("the cat sat on the mat", pad_to=9)
    device = standin.xp.device
    assert {tr[k].device for k in tr.keys()} == {device}
    assert tr.backend == "gpu_standin" and backend.namespace_of(tr["embed.ln"]) is standin.xp
    ref = small.trace("the cat sat on the mat", pad_to=9)
    for key in ref.keys():
        np.testing.assert_allclose(host(tr[key]), host(ref[key]), atol=1e-5, err_msg=key)
    on_host = tr.to_host()
    assert on_host.backend == "numpy" and all(isinstance(on_host[k], np.ndarray) for k in on_host.keys())


@pytest.mark.parametrize("kw", [{}, {"keep": []}, {"pad_to": 12}, {"fast": False}])
def test_a_forward_reads_nothing_back_from_the_device(standin, kw):
    standin.trace("warm up")  # first calls may set things up
    with host_reads() as reads:
        standin.trace("the cat sat on the mat", **kw)
        standin.trace_batch(["a short one", "and a longer second sentence"], **kw)
    assert reads == []


def test_the_host_read_counter_sees_a_read(standin):
    """The counter can fail: the mask test the forward made before (bool of a device array) is one read."""
    with host_reads() as reads:
        bool(standin.xp.all(standin.xp.asarray([[1, 1, 0]]) > 0))
        backend.to_host(standin.weights["pooler.b"])
    assert [how for how, _ in reads] == ["__bool__", "__dlpack__"]
    assert reads[0][1].startswith("test_device_path.py:")


def test_float16_on_a_backend_without_it_is_a_clear_error(standin):
    with pytest.raises(ValueError, match=r"dtype='float16': the gpu_standin backend has no float16"):
        standin.trace("a b", dtype="float16")


# ---------------------------------------------------------------------------------------------
# to_host: every key at once
# ---------------------------------------------------------------------------------------------


def test_packed_host_views_are_aligned_disjoint_and_hold_each_array():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(d) for s, d in [((3, 5), np.float32), ((7,), np.float16),
                                                             ((2, 2, 3), np.float32), ((0,), np.float32)]]
    offsets, total = backend.packed_layout(arrays)
    assert all(o % backend.HOST_ALIGN == 0 for o in offsets)
    ends = [o + a.nbytes for o, a in zip(offsets, arrays)]
    assert all(e <= o for e, o in zip(ends, offsets[1:])) and total == ends[-1]
    buffer = np.zeros(total, dtype=np.uint8)
    views = backend.host_views(buffer, arrays, offsets)
    for a, v in zip(arrays, views):
        v[...] = a
    for a, v in zip(arrays, views):  # no view wrote over another
        assert v.dtype == a.dtype and v.shape == a.shape and np.shares_memory(v, buffer) == (a.size > 0)
        np.testing.assert_array_equal(v, a)


@pytest.mark.parametrize("device", ["gpu_standin"] + (["cupy"] if backend.cupy_available() else []))
def test_to_host_brings_every_key_as_its_own_copy(device, standin):
    model = standin if device == "gpu_standin" else bv.load("random", seed=3, config=SMALL, backend="cupy")
    tr = model.trace("the cat sat on the mat", pad_to=10)
    on_host = tr.to_host()
    for key in tr.keys():
        a = on_host[key]
        assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == tuple(tr[key].shape), key
        np.testing.assert_array_equal(a, backend.to_host(tr[key]), err_msg=key)
    on_host["layer.0.attn.q"][...] = 7.0  # a host copy: writing it leaves the device trace as it was
    assert float(np.max(backend.to_host(tr["layer.0.attn.q"]))) != 7.0


def test_the_stand_in_run_is_chosen_by_the_environment(monkeypatch):
    """scripts/test.sh's stand-in run: BERTVIZ_LITE_BACKEND=gpu_standin makes every load() without backend= use it."""
    monkeypatch.setenv("BERTVIZ_LITE_BACKEND", "gpu_standin")
    assert bv.load("random", seed=3, config=SMALL).backend == "gpu_standin"
    assert bv.load("random", seed=3, config=SMALL, backend="numpy").backend == "numpy"


def test_minilm_mlm_goes_where_load_puts_any_model(monkeypatch, minilm):
    """load('minilm-mlm') reads the published MiniLM on the host; it used to stay there (numpy) when load()
    would pick another backend (cupy on a GPU machine): the stand-in run showed it."""
    monkeypatch.setenv("BERTVIZ_LITE_BACKEND", "gpu_standin")
    assert bv.load("minilm-mlm").backend == "gpu_standin"
    assert bv.load("minilm-mlm", backend="numpy").backend == "numpy"
