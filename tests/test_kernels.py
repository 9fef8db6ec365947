"""The fast path's kernels: the rational erf and GELU within their bound, kernels split over threads
give the same bits, and each kernel computes its array API formula line.
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.special

from bertviz_lite import backend, engine, kernels


def test_rational_erf_is_within_its_bound_of_scipy():
    x = np.linspace(-6, 6, 200_001)
    approx = engine.rational_erf(x, backend.get_namespace("numpy"))
    assert np.max(np.abs(approx - scipy.special.erf(x))) < 1.5e-7


def test_numpy_gelu_is_within_the_erf_bound_everywhere():
    # the fast kernel computes max(x, 0) - |x| Phi(-|x|) with the same rational erf: its error
    # is |x| * 1.5e-7 / 2 from the formula plus float32 rounding, on both sides of zero and out
    # where Phi(-|x|) underflows
    x = np.concatenate([np.linspace(-30, 30, 600_001), [0.0, -0.0, 1e-30, -1e-30, 3e4, -3e4]]).astype(np.float32)
    exact = x.astype(np.float64) * 0.5 * scipy.special.erfc(-x.astype(np.float64) / np.sqrt(2))
    fast = engine.gelu(x, np)
    assert fast.dtype == np.float32
    assert np.max(np.abs(fast - exact) / np.maximum(1.0, np.abs(x))) < 2.5e-7
    assert np.all(fast[x >= 0] >= 0) and np.all(fast[x < 0] <= 0)  # the sign branch


def test_kernels_split_over_threads_give_the_same_bits(monkeypatch):
    # a large input is split by rows over kernel_threads() threads; each row (each element, for gelu)
    # goes through the same ufuncs as on one thread, so the results are bitwise equal. Small blocks
    # make a small input "large" here, with uneven cuts and a ragged last block.
    from bertviz_lite import kernels, threads
    monkeypatch.setattr(kernels, "_BLOCK", 64)
    rng = np.random.default_rng(7)
    s = (rng.standard_normal((3, 41, 41)) * 4).astype(np.float32)
    s[..., 3] = -np.inf
    x = (rng.standard_normal((37, 29)) * 3).astype(np.float32)
    g, b = rng.standard_normal(29).astype(np.float32), rng.standard_normal(29).astype(np.float32)
    runs = {}
    for count in ("1", "3"):
        monkeypatch.setenv("BERTVIZ_LITE_THREADS", count)
        assert threads.kernel_threads() == int(count)
        runs[count] = (kernels.numpy_softmax(s), kernels.numpy_gelu(x), kernels.numpy_layer_norm(x, g, b, 1e-12))
    used = []
    real_split = kernels._split
    monkeypatch.setattr(kernels, "_split", lambda work, n, *a: (used.append(n), real_split(work, n, *a)))
    kernels.numpy_softmax(s)
    assert used == [3 * 41]  # the rows, not the elements, are cut for softmax
    for one, three in zip(runs["1"], runs["3"]):
        assert one.dtype == np.float32 and np.array_equal(one, three)


def kernel_inputs(shape):
    """Host float32 inputs for the kernels' tests: scores x with a masked (-inf) key in every row, finite
    values y, and a layernorm's gamma and beta."""
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[..., 0] = -np.inf if shape[-1] > 1 else x[..., 0]
    y = np.where(np.isfinite(x), x, 1.5).astype(np.float32)
    gamma, beta = (rng.standard_normal(shape[-1]).astype(np.float32) for _ in range(2))
    return x, y, gamma, beta


def assert_exact_gelu(out: np.ndarray, y: np.ndarray) -> None:
    """out within 1e-6 (relative to the largest |y|, at least 1) of x Phi(x) in float64."""
    y = y.astype(np.float64)
    exact = y * 0.5 * (1 + scipy.special.erf(y / np.sqrt(2)))
    assert np.max(np.abs(out - exact)) < 1e-6 * max(1.0, np.abs(y).max())


@pytest.mark.parametrize("shape", [(3, 5, 7), (12, 37, 37), (2, 300, 300), (1, 1, 1)])
def test_numpy_kernels_compute_the_array_api_lines(shape):
    # the fast numpy paths of softmax, gelu and layernorm against the engine's own array-api
    # lines (run through array_api_strict), on sizes that do and do not fill whole blocks
    strict = backend.get_namespace("array_api_strict")
    x, y, gamma, beta = kernel_inputs(shape)
    s = strict.asarray(x)
    np.testing.assert_allclose(engine.softmax(x, np), backend.to_host(engine.softmax(s, strict)), atol=2e-7)
    assert np.all(engine.softmax(x, np)[..., 0] == 0) or shape[-1] == 1
    np.testing.assert_allclose(engine.gelu(y, np), backend.to_host(engine.gelu(strict.asarray(y), strict)),
                               atol=1e-6, rtol=1e-6)
    assert_exact_gelu(engine.gelu(y, np), y)
    fast = engine.layer_norm(y, gamma, beta, 1e-12, np)
    slow = engine.layer_norm(strict.asarray(y), strict.asarray(gamma), strict.asarray(beta), 1e-12, strict)
    np.testing.assert_allclose(fast, backend.to_host(slow), atol=2e-6, rtol=1e-5)
    for out in (engine.softmax(x, np), engine.gelu(y, np), fast):
        assert out.shape == x.shape and out.dtype == np.float32


# ---------------------------------------------------------------------------------------------
# the cupy kernels: each against its formula line, on a GPU (skipped, saying so, without one)
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not backend.cupy_available(), reason="needs cupy and a CUDA GPU (cupy.is_available() is False)")
@pytest.mark.parametrize("shape", [(3, 5, 7), (12, 37, 37), (2, 300, 300), (1, 12, 512, 512), (1, 1, 1),
                                   (2, 7, 768), (5, 33)])
def test_cupy_kernels_compute_the_formula_lines(shape):
    import cupy
    xp = backend.get_namespace("cupy")
    s, y, gamma, beta = (cupy.asarray(a) for a in kernel_inputs(shape))
    fused = backend.to_host(kernels.FUSED[("softmax", "cupy", "float32")](s, xp))
    np.testing.assert_allclose(fused, backend.to_host(engine.softmax.formula(s, xp)), atol=2e-7)
    assert np.all(fused[..., 0] == 0) or shape[-1] == 1
    gelu = backend.to_host(kernels.FUSED[("gelu", "cupy", "float32")](y, xp))
    np.testing.assert_allclose(gelu, backend.to_host(engine.gelu.formula(y, xp)), atol=1e-6, rtol=1e-6)
    assert_exact_gelu(gelu, backend.to_host(y))
    ln = kernels.FUSED[("layer_norm", "cupy", "float32")](y, gamma, beta, 1e-12, xp)
    formula = engine.layer_norm.formula(y, gamma, beta, 1e-12, xp)
    np.testing.assert_allclose(backend.to_host(ln), backend.to_host(formula), atol=2e-6, rtol=1e-5)
    with kernels.fast_path(True):  # the engine's lines pick these kernels on cupy float32, and only there
        assert kernels.fused_kernel("softmax", s) is not None and kernels.fused_kernel("gelu", y) is not None
        assert kernels.fused_kernel("softmax", s.astype(cupy.float16)) is None


def test_the_cuda_source_compiles():
    """The cupy kernels' CUDA source through NVRTC to PTX (no GPU needed, but cupy and its NVRTC library are):
    a syntax or type error shows here before a GPU run. A source with an error is refused (the check can fail)."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="needs cupy (its NVRTC bindings)")

    def compile_ptx(code: str) -> str:
        prog = nvrtc.createProgram(code, "bertviz_kernels.cu", [], [])
        try:
            nvrtc.compileProgram(prog, ["--std=c++14", "--gpu-architecture=compute_80"])
            ptx = nvrtc.getPTX(prog)
            return ptx.decode() if isinstance(ptx, bytes) else ptx
        except nvrtc.NVRTCError as e:
            raise AssertionError(f"{e}\n{nvrtc.getProgramLog(prog)}") from None
        finally:
            nvrtc.destroyProgram(prog)

    try:
        compile_ptx('extern "C" __global__ void probe() {}')
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001  (cupy without its NVRTC library: cuda-pathfinder's own error type)
        pytest.skip(f"NVRTC is not loadable here ({type(e).__name__}: {str(e)[:200]})")
    ptx = compile_ptx(kernels.CUDA_SOURCE)
    entries = {line.split("(")[0].split()[-1] for line in ptx.splitlines() if ".entry" in line}
    assert entries == {"bertviz_softmax", "bertviz_layer_norm", "bertviz_gelu"}
    with pytest.raises(AssertionError, match="undefined"):
        compile_ptx(kernels.CUDA_SOURCE + '\nextern "C" __global__ void broken() { undefined_name(); }')
