"""Array backends: the one module that names numpy, cupy or scipy.

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


def is_host_array(x) -> bool:
    return isinstance(x, np.ndarray)


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

# abramowitz & stegun 7.1.26: |error| <= 1.5e-7 for every x (tests check it against scipy)
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


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


def _erf_block_numpy(x: np.ndarray, out: np.ndarray, t: np.ndarray) -> None:
    """The rational erf above, on one block, in place on scratch buffers (out, t are fresh)."""
    np.abs(x, out=t)  # |x|
    np.multiply(t, t, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)  # e^{-x^2}
    np.multiply(t, np.float32(_AS_P), out=t)
    np.add(t, np.float32(1.0), out=t)
    np.reciprocal(t, out=t)  # t = 1 / (1 + p|x|)
    poly = np.multiply(t, np.float32(_AS_A[4]))
    for a in _AS_A[3::-1]:
        np.add(poly, np.float32(a), out=poly)
        np.multiply(poly, t, out=poly)
    np.multiply(poly, out, out=out)
    np.subtract(np.float32(1.0), out, out=out)
    np.copysign(out, x, out=out)  # erf is odd


# ------------------------------------------------------------------------------------------
# numpy kernels: the engine's elementwise lines, fast. Each computes exactly what the
# array-api line beside it in engine.py computes (tests compare them), but in blocks small
# enough to stay in l2 cache and into one output buffer instead of a fresh array per
# operation. (Splitting the blocks over two threads was slower here: between matrix
# products the second core is not free, and the threads contend for the GIL per call.)
# ------------------------------------------------------------------------------------------

_BLOCK = 1 << 15  # float32 elements per block (128 KiB): a block and its scratch stay in l2


def numpy_rational_erf(x: np.ndarray) -> np.ndarray:
    """rational_erf for float32 numpy arrays, block by block (~4x faster than scipy's float32 erf).

    Same formula as rational_erf; in float32 its error stays below 1e-6 (tests bound it).
    """
    if x.dtype != np.float32:
        import scipy.special
        return scipy.special.erf(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    t = np.empty(min(_BLOCK, flat.size), dtype=np.float32)
    for i in range(0, flat.size, _BLOCK):
        j = min(i + _BLOCK, flat.size)
        _erf_block_numpy(flat[i:j], out[i:j], t[: j - i])
    return out.reshape(x.shape)


# gelu(x) = x Phi(x). With h = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 = t P(t) e^{-x^2/2} / 2 (the rational
# form above), Phi(x) = 1 - h for x >= 0 and h for x < 0, so gelu(x) = max(x, 0) - |x| h: the same
# formula and error bound as x/2 (1 + erf(x / sqrt 2)), with no sign flip (copysign costs ~5
# multiplies here) and three fewer passes.
_AS_P_GELU = np.float32(_AS_P / SQRT_2)  # p |x| / sqrt 2 = p' |x|
_AS_A_HALF = tuple(np.float32(a / 2) for a in _AS_A)  # the 1/2 of erfc / 2, folded in


def numpy_gelu(x: np.ndarray) -> np.ndarray:
    """Exact-form gelu x Phi(x) for float32, as max(x, 0) - |x| Phi(-|x|), block by block in one buffer."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    a_, t_, e_ = (np.empty(min(_BLOCK, flat.size), dtype=flat.dtype) for _ in range(3))
    for i in range(0, flat.size, _BLOCK):
        j = min(i + _BLOCK, flat.size)
        xb, ob, a, t, e = flat[i:j], out[i:j], a_[: j - i], t_[: j - i], e_[: j - i]
        np.abs(xb, out=a)  # |x|
        np.multiply(a, np.float32(-0.5), out=e)
        np.multiply(e, a, out=e)
        np.exp(e, out=e)  # e^{-x^2 / 2}
        np.multiply(a, _AS_P_GELU, out=t)
        np.add(t, np.float32(1.0), out=t)
        np.divide(np.float32(1.0), t, out=t)  # t = 1 / (1 + p |x| / sqrt 2)
        np.multiply(t, _AS_A_HALF[4], out=ob)
        for c in _AS_A_HALF[3::-1]:  # horner, as in the erf above, into out
            np.add(ob, c, out=ob)
            np.multiply(ob, t, out=ob)
        np.multiply(ob, e, out=ob)  # h = Phi(-|x|)
        np.multiply(ob, a, out=ob)  # |x| h
        np.maximum(xb, np.float32(0.0), out=a)  # |x| is no longer needed: max(x, 0) in its place
        np.subtract(a, ob, out=ob)
    return out.reshape(x.shape)


def _row_blocks(x: np.ndarray):
    """A fresh output shaped as x's rows (its last axis), and (input, output) blocks of whole rows
    small enough to stay in l2 while a kernel makes its passes over them."""
    width = x.shape[-1]
    rows = np.ascontiguousarray(x).reshape(-1, width)
    out = np.empty_like(rows)
    step = max(1, _BLOCK // max(1, width))  # rows per block
    return out, ((rows[i:i + step], out[i:i + step]) for i in range(0, rows.shape[0], step))


def numpy_softmax(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax, e = exp(s - max); e / sum(e), a block of rows at a time into one buffer."""
    out, blocks = _row_blocks(s)
    for sb, eb in blocks:
        np.subtract(sb, sb.max(axis=-1, keepdims=True), out=eb)
        np.exp(eb, out=eb)
        np.divide(eb, eb.sum(axis=-1, keepdims=True), out=eb)
    return out.reshape(s.shape)


def numpy_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis, into one buffer."""
    out, blocks = _row_blocks(x)
    for xb, ob in blocks:
        np.subtract(xb, xb.mean(axis=-1, keepdims=True), out=ob)  # x - mu
        var = np.vecdot(ob, ob)[:, None] / np.float32(x.shape[-1])  # biased, as bert and torch; no squared copy
        np.multiply(ob, np.float32(1.0) / np.sqrt(var + np.float32(eps)), out=ob)  # eps inside the sqrt
        np.multiply(ob, gamma, out=ob)
        np.add(ob, beta, out=ob)
    return out.reshape(x.shape)


def numpy_matmul(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """x @ W with x's leading axes (a batch) folded into one [B*n, k] product: numpy would run
    one small product per example instead (1.7x slower for 32 sentences of 14 tokens here)."""
    if x.ndim <= 2:
        return x @ W
    return (x.reshape(-1, x.shape[-1]) @ W).reshape(*x.shape[:-1], W.shape[-1])


def is_numpy(xp: ModuleType) -> bool:
    return array_api_compat.is_numpy_namespace(xp)


def erf(x, xp: ModuleType):
    """erf for any backend (the array API has none): cupyx on cupy, else the rational form above
    (replaced by its blocked numpy kernel when FUSED says so)."""
    if backend_name(xp) == "cupy":
        import cupyx.scipy.special
        return cupyx.scipy.special.erf(x)
    kernel = fused_kernel("erf", x)
    return kernel(x, xp) if kernel is not None else rational_erf(x, xp)


# ------------------------------------------------------------------------------------------
# the fast path, decided once: which fused kernel replaces which formula function
# ------------------------------------------------------------------------------------------

# (formula function, backend, dtype) -> the kernel that computes the same line faster. The
# formula functions live in engine.py (and rational_erf above); each kernel takes the formula
# function's own arguments. Nothing else in the package chooses a kernel. Tests hold every
# kernel equal to its formula, and `model.trace(..., fast=False)` runs the formulas as written.
FUSED = {
    ("layer_norm", "numpy", "float32"): lambda x, gamma, beta, eps, xp: numpy_layer_norm(x, gamma, beta, eps),
    ("softmax", "numpy", "float32"): lambda s, xp: numpy_softmax(s),
    ("gelu", "numpy", "float32"): lambda x, xp: numpy_gelu(x),
    ("erf", "numpy", "float32"): lambda x, xp: numpy_rational_erf(x),
    ("matmul", "numpy", "float32"): lambda x, W, xp: numpy_matmul(x, W),
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


def fast_enabled() -> bool:
    return _FAST.get()


def fused_kernel(name: str, x):
    """The FUSED kernel for formula `name` on array x, or None: fast path off, or no kernel for
    this backend and dtype."""
    if not _FAST.get() or not isinstance(x, np.ndarray):
        return None
    return FUSED.get((name, "numpy", x.dtype.name))
