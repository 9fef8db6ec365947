"""The CuPy kernels (bertviz_lite/cuda_kernels.py): their CUDA source compiles (NVRTC, no GPU needed), the switch
that turns them on reads one variable and refuses anything else, and on a GPU each computes its formula line and
a trace with them equals numpy's on every key. The checks are benchmarks/bench_gpu.py --check's own functions
(one definition); here they also run on numpy's kernels, so the check itself is tested on every machine.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from bertviz_lite import backend, cuda_kernels, engine, kernels
from bertviz_lite.errors import BackendError

from ..helpers import ROOT

NEEDS_GPU = pytest.mark.skipif(not backend.cupy_available(),
                               reason="needs cupy and a CUDA GPU (cupy.is_available() is False)")


def bench_gpu():
    """benchmarks/bench_gpu.py as a module (its check functions)."""
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_check_holds_numpy_kernels_to_their_lines_and_can_fail(monkeypatch):
    # the kernel check, run over numpy's FUSED kernels: every row holds, and a kernel that is off by 1e-5
    # (a softmax whose rows sum to 1.00001) is caught on every shape
    check = bench_gpu()
    rows = check.check_kernels("numpy")
    assert {r["kernel"] for r in rows} == {name for name, b, _ in kernels.FUSED if b == "numpy"}
    assert all(r["held"] for r in rows), [r for r in rows if not r["held"]]
    real = kernels.FUSED[("softmax", "numpy", "float32")]
    monkeypatch.setitem(kernels.FUSED, ("softmax", "numpy", "float32"), lambda s, xp: real(s, xp) * 1.00001)
    bad = [r for r in check.check_kernels("numpy") if r["kernel"] == "softmax" and not r["held"]]
    assert len(bad) == len(check.KERNEL_SHAPES)


def test_relative_error_names_a_moved_pad_key_and_scales_by_the_largest_value():
    check = bench_gpu()
    want = np.array([[-np.inf, 2.0, 4.0]])
    assert check.relative_error(want, want) == 0.0
    assert check.relative_error(np.array([[-np.inf, 2.0, 4.00004]]), want) == pytest.approx(1e-5)
    assert check.relative_error(np.array([[0.0, 2.0, 4.0]]), want) == float("inf")  # a [PAD] key that became real
    assert check.relative_error(np.array([1e-3 + 1e-7]), np.array([1e-3]), floor=1.0) == pytest.approx(1e-7)


def test_the_cupy_kernels_are_off_until_switched_on(monkeypatch):
    monkeypatch.delenv(kernels.CUPY_KERNELS_VARIABLE, raising=False)
    assert kernels.cupy_kernels_enabled() is kernels.CUPY_KERNELS_DEFAULT
    for value, on in (("1", True), ("0", False), (" 1 ", True)):
        monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, value)
        assert kernels.cupy_kernels_enabled() is on
    monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, "yes")
    with pytest.raises(BackendError, match="BERTVIZ_LITE_CUPY_KERNELS='yes'.*1.*0"):
        kernels.cupy_kernels_enabled()
    x = np.ones((2, 3), dtype=np.float32)  # the numpy kernels do not read the switch
    assert kernels.fused_kernel("softmax", x) is not None
    assert kernels.narrowed(x, np.float16) is None  # narrowing in one launch is cupy's only


def test_every_cupy_kernel_replaces_a_formula_line():
    cupy_rows = {name for name, b, dtype in kernels.FUSED if b == "cupy"}
    assert cupy_rows == {"layer_norm", "softmax", "gelu", "matmul", "queries_keys_values"}
    for name in cupy_rows:
        assert hasattr(getattr(engine, name), "formula"), name


def test_the_cuda_source_compiles():
    """The kernels' CUDA source through NVRTC to PTX for an H100 (compute_90): needs cupy's NVRTC bindings and
    the NVRTC library (cupy-cuda13x and nvidia-cuda-nvrtc), not a GPU, so a syntax or type error shows before a
    GPU run. A source with an error is refused (the check can fail)."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="needs cupy (its NVRTC bindings)")

    def compile_ptx(code: str) -> str:
        prog = nvrtc.createProgram(code, "bertviz_kernels.cu", [], [])
        try:
            nvrtc.compileProgram(prog, ["--std=c++14", "--gpu-architecture=compute_90"])
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
    ptx = compile_ptx(cuda_kernels.CUDA_SOURCE)
    entries = {line.split("(")[0].split()[-1] for line in ptx.splitlines() if ".entry" in line}
    assert entries == set(cuda_kernels.KERNEL_NAMES)
    with pytest.raises(AssertionError, match="undefined"):
        compile_ptx(cuda_kernels.CUDA_SOURCE + '\nextern "C" __global__ void broken() { undefined_name(); }')


# ---------------------------------------------------------------------------------------------
# on a GPU
# ---------------------------------------------------------------------------------------------


@pytest.mark.gpu
@NEEDS_GPU
def test_cupy_kernels_compute_their_formula_lines(monkeypatch):
    monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, "1")
    rows = bench_gpu().check_kernels("cupy")
    assert {r["kernel"] for r in rows} >= {"softmax", "gelu", "layer_norm", "matmul", "queries_keys_values",
                                           "narrow float16"}
    assert all(r["held"] for r in rows), [r for r in rows if not r["held"]]


@pytest.mark.gpu
@NEEDS_GPU
def test_a_trace_with_the_cupy_kernels_equals_numpy_on_every_key(monkeypatch):
    monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, "1")
    rows = bench_gpu().check_trace_keys("cupy", [12, 40])
    assert len(rows) == 9 and all(r["keys"] > 100 for r in rows)
    assert all(r["held"] for r in rows), [r for r in rows if not r["held"]]


@pytest.mark.gpu
@NEEDS_GPU
def test_the_switch_picks_kernels_or_lines_on_cupy(monkeypatch):
    import cupy
    s = cupy.ones((2, 3), dtype=cupy.float32)
    monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, "1")
    assert kernels.fused_kernel("softmax", s) is not None
    assert kernels.fused_kernel("softmax", s.astype(cupy.float16)) is None  # float32 kernels only
    with kernels.fast_path(False):
        assert kernels.fused_kernel("softmax", s) is None and kernels.narrowed(s, np.float16) is None
    monkeypatch.setenv(kernels.CUPY_KERNELS_VARIABLE, "0")
    assert kernels.fused_kernel("softmax", s) is None and kernels.narrowed(s, np.float16) is None
