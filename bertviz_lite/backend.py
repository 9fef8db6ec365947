"""Array backends: which namespace runs the engine, and which fused kernel replaces which formula line.

With `kernels.py` (the numpy kernels themselves), the only modules that name numpy, cupy or scipy.

Everything else in the engine is written against the array API standard (`xp.*`),
with the namespace found here once and passed down (the SciPy / scikit-learn
pattern). NumPy is the default; CuPy is used when asked for or when a GPU is
present; `array_api_strict` proves the engine uses nothing outside the standard.
"""

from __future__ import annotations

import contextvars
import math
import os
from contextlib import contextmanager
from types import ModuleType

import array_api_compat
import numpy as np

from . import kernels
from .errors import BackendError

BACKENDS = ("numpy", "cupy", "array_api_strict")


def cupy_available() -> bool:
    """True when cupy imports *and* sees a usable GPU (an import alone proves nothing)."""
    try:
        import cupy
    except Exception:
        return False
    try:
        return bool(cupy.is_available())
    except Exception:
        return False


_MALLOC_TUNED = False


def keep_freed_memory() -> bool:
    """Let glibc reuse freed trace memory instead of returning it to the OS after every trace.

    A trace holds its tensors (~0.7 GB at 512 tokens). With glibc's defaults each block freed
    with an old trace goes back to the OS, and the next trace page-faults the same amount
    afresh: +30% on a 128-token trace here. Raising the mmap threshold (32 MiB) and the trim
    threshold (1 GiB) keeps freed blocks for reuse; the process keeps up to its peak usage.
    Set BERTVIZ_LITE_MALLOC_TUNING=0 to leave malloc alone. Returns whether it was applied.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED or os.environ.get("BERTVIZ_LITE_MALLOC_TUNING", "1") == "0":
        return _MALLOC_TUNED
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h
        _MALLOC_TUNED = bool(libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20)) and \
            bool(libc.mallopt(M_TRIM_THRESHOLD, 2**30))
    except (OSError, AttributeError):  # not glibc (macOS, musl, windows): nothing to tune
        _MALLOC_TUNED = False
    return _MALLOC_TUNED


def get_namespace(backend: str | None = None) -> ModuleType:
    """The array namespace for a backend name; None picks cupy when a GPU is usable, else numpy."""
    if backend is None:
        backend = os.environ.get("BERTVIZ_LITE_BACKEND") or ("cupy" if cupy_available() else "numpy")
    if backend == "numpy":
        keep_freed_memory()
        return array_api_compat.array_namespace(np.empty(0))
    if backend == "cupy":
        if not cupy_available():
            raise BackendError("backend='cupy' needs the cupy package and a usable NVIDIA GPU; "
                               "none was found. Use backend='numpy' (the default on machines without a GPU).")
        import cupy
        return array_api_compat.array_namespace(cupy.empty(0))
    if backend == "array_api_strict":
        try:
            import array_api_strict
        except ImportError as e:
            raise BackendError("backend='array_api_strict' needs `pip install array-api-strict`") from e
        return array_api_strict
    raise BackendError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


def backend_name(xp: ModuleType) -> str:
    """'numpy', 'cupy' or 'array_api_strict' for a namespace."""
    if array_api_compat.is_numpy_namespace(xp):
        return "numpy"
    if array_api_compat.is_cupy_namespace(xp):
        return "cupy"
    if getattr(xp, "__name__", "") == "array_api_strict":
        return "array_api_strict"
    raise BackendError(f"unsupported array namespace {xp!r}")


def namespace_of(x) -> ModuleType:
    return array_api_compat.array_namespace(x)


def from_host(a: np.ndarray, xp: ModuleType):
    """A host (numpy) array moved into namespace xp."""
    name = backend_name(xp)
    if name == "numpy":
        return np.asarray(a)
    if name == "cupy":
        import cupy
        return cupy.asarray(a)
    return xp.asarray(np.ascontiguousarray(a))


def to_host(x) -> np.ndarray:
    """Any backend's array as a numpy array (a copy only when it lives elsewhere)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):  # a numpy scalar (what a full reduction returns)
        return np.asarray(x)
    if array_api_compat.is_cupy_array(x):
        return x.get()
    return np.from_dlpack(x)


def itemsize(x) -> int:
    """Bytes per element of a floating-point array in any namespace."""
    return namespace_of(x).finfo(x.dtype).bits // 8


def read_only(x):
    """x as an array nobody can write through: a read-only numpy view (no copy), or a copy on
    backends without read-only arrays. What an edit gets, so it cannot change a recorded tensor."""
    if isinstance(x, np.ndarray):
        view = x.view()
        view.flags.writeable = False
        return view
    return namespace_of(x).asarray(x, copy=True)


def host_random_normal(shape: tuple[int, ...], std: float, rng: np.random.Generator) -> np.ndarray:
    """N(0, std^2) float32 draws: bert's own initialisation of every weight matrix."""
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def host_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def host_zeros(shape) -> np.ndarray:
    return np.zeros(shape, dtype=np.float32)


def host_ones(shape) -> np.ndarray:
    return np.ones(shape, dtype=np.float32)


def host_bad_values(a: np.ndarray) -> int:
    """How many NaN or Inf values an array holds."""
    return int(a.size - np.count_nonzero(np.isfinite(a)))


def host_float32(a) -> np.ndarray:
    """A checkpoint tensor as float32 (checkpoints may store float16 or bfloat16)."""
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def host_real_array(value, what: str) -> np.ndarray:
    """Any array-like of real numbers (numpy, cupy, nested lists) as a float32 host array; TypeError naming
    `what` for anything else (None, strings, booleans, complex numbers)."""
    try:
        a = to_host(value) if hasattr(value, "__dlpack__") else np.asarray(value)
    except Exception:
        a = None
    if a is None or a.dtype.kind not in "fiu":
        kind = type(value).__name__ if a is None else f"{type(value).__name__} of {a.dtype}"
        raise TypeError(f"{what} must be an array of real numbers, got {kind}")
    return np.ascontiguousarray(a, dtype=np.float32)


# safetensors dtype names -> numpy; BF16 has no numpy type and is widened (host_from_raw)
SAFETENSORS_NUMPY_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
                       "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def host_from_raw(dtype: str, data, shape) -> np.ndarray:
    """A safetensors tensor's raw little-endian bytes as a host array; bfloat16 becomes float32 exactly.

    A bfloat16 is the top 16 bits of a float32 (same sign and exponent, 7 mantissa bits), so
    shifting it up 16 bits and reading the result as float32 is the exact value.
    """
    if dtype == "BF16":
        u16 = np.frombuffer(data, dtype="<u2")
        return (u16.astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if dtype not in SAFETENSORS_NUMPY_DTYPES:
        raise TypeError(f"tensor dtype {dtype} is not supported (float32, float16, bfloat16 and integers are)")
    return np.frombuffer(data, dtype=np.dtype(SAFETENSORS_NUMPY_DTYPES[dtype]).newbyteorder("<")).reshape(shape)


# ---------------------------------------------------------------------------------------------
# erf: the array api has none. gelu(x) = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)) needs it.
# ---------------------------------------------------------------------------------------------

# abramowitz & stegun 7.1.26: |error| <= 1.5e-7 for every x (tests check it against scipy); the
# constants live with the kernels (kernels.ERF_P, kernels.ERF_A), which use them too
_AS_P, _AS_A = kernels.ERF_P, kernels.ERF_A


def rational_erf(x, xp: ModuleType):
    """erf(x) from array-api operations alone: 1 - t(a1 + t(a2 + ...)) e^{-x^2}, t = 1/(1 + p|x|)."""
    ax = xp.abs(x)
    t = 1.0 / (1.0 + _AS_P * ax)
    poly = _AS_A[4]
    for a in _AS_A[3::-1]:  # horner: a1 + t (a2 + t (a3 + t (a4 + t a5)))
        poly = a + t * poly
    y = 1.0 - (t * poly) * xp.exp(-ax * ax)
    return xp.where(x < 0, -y, y)


SQRT_2 = math.sqrt(2.0)


def erf(x, xp: ModuleType):
    """erf for any backend (the array API has none): cupyx on cupy, else the rational form above.
    (On numpy float32 the fast path replaces the whole gelu line, erf included: kernels.numpy_gelu.)"""
    if backend_name(xp) == "cupy":
        import cupyx.scipy.special
        return cupyx.scipy.special.erf(x)
    return rational_erf(x, xp)


# ------------------------------------------------------------------------------------------
# the fast path, decided once: which fused kernel replaces which formula function
# ------------------------------------------------------------------------------------------

# (formula function, backend, dtype) -> the kernel that computes the same line faster. The
# formula functions live in engine.py, the kernels in kernels.py; each kernel takes the formula
# function's own arguments. Nothing else in the package chooses a kernel. Tests hold every
# kernel equal to its formula, and `model.trace(..., fast=False)` runs the formulas as written.
FUSED = {
    ("layer_norm", "numpy", "float32"): lambda x, gamma, beta, eps, xp: kernels.numpy_layer_norm(x, gamma, beta, eps),
    ("softmax", "numpy", "float32"): lambda s, xp: kernels.numpy_softmax(s),
    ("gelu", "numpy", "float32"): lambda x, xp: kernels.numpy_gelu(x),
    ("matmul", "numpy", "float32"): lambda x, W, xp: kernels.numpy_matmul(x, W),
}

_FAST = contextvars.ContextVar("bertviz_lite_fast", default=True)


@contextmanager
def fast_path(enabled: bool):
    """Within this block, formula functions are replaced by their FUSED kernels (enabled=True,
    the default everywhere) or run exactly as written (enabled=False)."""
    token = _FAST.set(bool(enabled))
    try:
        yield
    finally:
        _FAST.reset(token)


def fused_kernel(name: str, x):
    """The FUSED kernel for formula `name` on array x, or None: fast path off, or no kernel for
    this backend and dtype."""
    if not _FAST.get() or not isinstance(x, np.ndarray):
        return None
    return FUSED.get((name, "numpy", x.dtype.name))
