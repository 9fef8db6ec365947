"""Array backends: which namespace runs the engine, and moving arrays between it and the host.

With `kernels.py` and `cuda_kernels.py` (the fast path's numpy and CuPy kernels), the only modules that name
numpy, cupy or scipy.

Everything else in the engine is written against the array API standard (`xp.*`),
with the namespace found here once and passed down (the SciPy / scikit-learn
pattern). NumPy is the default; CuPy is used when asked for or when a GPU is
present; `array_api_strict` proves the engine uses nothing outside the standard, and
`gpu_standin` (array_api_strict's arrays on its `device1`) stands in for a GPU on machines without
one: its arrays refuse `np.asarray` as CuPy's do, so CI catches an implicit host conversion.
"""

from __future__ import annotations

import os
from types import ModuleType

import array_api_compat
import numpy as np

from .errors import BackendError

BACKENDS = ("numpy", "cupy", "array_api_strict", "gpu_standin")
DEVICE_BACKENDS = ("cupy", "gpu_standin")  # arrays that live off the host: read them with to_host only


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
    The freed memory stays with the process (up to 1 GiB of it is not handed back to the OS: after a
    MiniLM trace, 743 of 800 MiB of the user's own 1 MiB arrays stayed once freed), also for the user's own
    arrays; `load()` applies it for the numpy backend, once. `give_back_freed_memory()` hands it back when
    wanted. Set BERTVIZ_LITE_MALLOC_TUNING=0 to leave malloc alone. Returns whether it was applied.
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


def give_back_freed_memory() -> bool:
    """Hand the memory this process has freed back to the OS now (glibc's malloc_trim(0)): what
    `keep_freed_memory` keeps for the next trace, the user's freed arrays included (N13: 743 MiB of 800 MiB
    freed stayed; after this call, none). The next trace page-faults its memory afresh (about 30% slower
    once). Returns False where there is no glibc (nothing is kept there)."""
    try:
        import ctypes
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def get_namespace(backend: str | None = None) -> ModuleType:
    """The array namespace for a backend name; None picks cupy when a GPU is usable, else numpy."""
    if backend is None:
        backend = os.environ.get("BERTVIZ_LITE_BACKEND") or ("cupy" if cupy_available() else "numpy")
    if backend == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if backend == "cupy":
        if not cupy_available():
            raise BackendError("backend='cupy' needs the cupy package and a usable NVIDIA GPU; "
                               "none was found. Use backend='numpy' (the default on machines without a GPU).")
        import cupy
        return array_api_compat.array_namespace(cupy.empty(0))
    if backend in ("array_api_strict", "gpu_standin"):
        try:
            import array_api_strict
        except ImportError as e:
            raise BackendError(f"backend={backend!r} needs `pip install array-api-strict`") from e
        return array_api_strict if backend == "array_api_strict" else gpu_standin()
    raise BackendError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


# ------------------------------------------------------------------------------------------
# the gpu stand-in: array_api_strict on its device1
# ------------------------------------------------------------------------------------------

STANDIN_DEVICE = "device1"  # array_api_strict's second device: np.asarray refuses its arrays, as on cupy
_CREATORS = ("asarray", "arange", "empty", "eye", "full", "linspace", "ones", "zeros")  # take device=


class _StandinNamespace(ModuleType):
    """array_api_strict with device1 as the default device, as cupy's default device is the GPU: an
    array made from host data (`xp.asarray(ids)`) lands beside the weights. Everything else is
    array_api_strict's own function; `_like` functions and operations keep their input's device."""

    def __init__(self, strict: ModuleType):
        super().__init__("gpu_standin", self.__doc__)
        self.strict, self.device = strict, strict.Device(STANDIN_DEVICE)
        for name in _CREATORS:
            setattr(self, name, self._on_device(getattr(strict, name)))

    def _on_device(self, create):
        def on_device(*args, device=None, **kwargs):
            return create(*args, device=self.device if device is None else device, **kwargs)
        on_device.__name__ = create.__name__
        return on_device

    def __getattr__(self, name):  # the rest of the namespace: array_api_strict's
        return getattr(self.strict, name)


_STANDIN: list[_StandinNamespace] = []


def gpu_standin() -> ModuleType:
    """The stand-in namespace (one per process, so namespaces compare equal)."""
    if not _STANDIN:
        import array_api_strict
        _STANDIN.append(_StandinNamespace(array_api_strict))
    return _STANDIN[0]


def _on_standin(x) -> bool:
    return bool(_STANDIN) and getattr(x, "device", None) == _STANDIN[0].device


def backend_name(xp: ModuleType) -> str:
    """'numpy', 'cupy', 'array_api_strict' or 'gpu_standin' for a namespace."""
    if isinstance(xp, _StandinNamespace):
        return "gpu_standin"
    if array_api_compat.is_numpy_namespace(xp):
        return "numpy"
    if array_api_compat.is_cupy_namespace(xp):
        return "cupy"
    if getattr(xp, "__name__", "") == "array_api_strict":
        return "array_api_strict"
    raise BackendError(f"unsupported array namespace {xp!r}")


def on_device(xp: ModuleType) -> bool:
    """True for a namespace whose arrays live off the host (cupy, the stand-in): no in-place guard,
    no numpy kernels, and every host read goes through to_host."""
    return backend_name(xp) in DEVICE_BACKENDS


def is_cupy_array(x) -> bool:
    """True for a cupy array (without importing cupy: a cupy array exists only once cupy is imported)."""
    return array_api_compat.is_cupy_array(x)


def namespace_of(x) -> ModuleType:
    """The namespace of an array (the stand-in's for an array on its device)."""
    return gpu_standin() if _on_standin(x) else array_api_compat.array_namespace(x)


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
    # array_api_strict on any device (the stand-in's explicit read): a copy, as from a GPU, never a view that
    # would let the host write into the "device" array
    return np.from_dlpack(x).copy()


HOST_ALIGN = 256  # bytes: where each array starts in a packed host buffer (cuda's copies like aligned ends)


def packed_layout(arrays) -> tuple[list[int], int]:
    """Byte offsets of arrays laid end to end in one buffer, each aligned to HOST_ALIGN, and the total size."""
    offsets, end = [], 0
    for x in arrays:
        start = -(-end // HOST_ALIGN) * HOST_ALIGN
        offsets.append(start)
        end = start + int(x.size) * host_dtype(x).itemsize
    return offsets, end


def host_views(buffer: np.ndarray, arrays, offsets) -> list[np.ndarray]:
    """One numpy view per array (its shape and dtype) into a uint8 host buffer, at the given offsets."""
    return [buffer[o:o + int(x.size) * host_dtype(x).itemsize].view(host_dtype(x)).reshape(tuple(x.shape))
            for x, o in zip(arrays, offsets)]


def host_dtype(x) -> np.dtype:
    """The numpy dtype of any backend's array (by its name: 'float32', 'float16', 'int64', ...)."""
    return np.dtype(str(x.dtype).rsplit(".", 1)[-1])


def to_host_all(values: dict) -> dict:
    """Many arrays (a trace's) as numpy arrays. On cupy every copy is queued on the current stream into one
    page-locked (pinned) buffer from cupy's pinned-memory pool, and the host waits once: pinned memory copies at
    the bus's speed, pageable memory at a fraction of it (8.8 GB/s measured on an H100 with one .get() per key).
    The host arrays are views into that buffer, which returns to the pool when the last of them is freed.
    Elsewhere: to_host of each."""
    if not any(array_api_compat.is_cupy_array(x) for x in values.values()):
        return {k: to_host(x) for k, x in values.items()}
    import cupy
    import cupyx
    keys = list(values)
    arrays = [cupy.ascontiguousarray(values[k]) for k in keys]  # recorded views (a head split) copied on the device
    offsets, total = packed_layout(arrays)
    buffer = cupyx.empty_pinned((max(total, 1),), dtype=np.uint8)
    stream = cupy.cuda.get_current_stream()  # the forward's stream: the copies start after its kernels
    views = host_views(buffer, arrays, offsets)
    for x, view in zip(arrays, views):
        cupy.asnumpy(x, stream=stream, out=view, blocking=False)
    stream.synchronize()  # the one wait
    return dict(zip(keys, views))


def add_rows(target, rows, values, xp) -> None:
    """target[rows] += values in place, a row named twice getting both values (numpy's add.at, cupy's
    scatter_add). The array API has no scatter-add: there the rows must be distinct."""
    name = backend_name(xp)
    if name == "numpy":
        np.add.at(target, rows, values)
    elif name == "cupy":
        import cupyx
        cupyx.scatter_add(target, rows, values)
    else:
        if len(set(to_host(rows).tolist())) != int(rows.shape[0]):
            raise ValueError("a row is named twice, and this array namespace cannot add into an array; use numpy "
                             "or cupy")
        target[rows] = target[rows] + values


def itemsize(x) -> int:
    """Bytes per element of a floating-point array in any namespace."""
    return namespace_of(x).finfo(x.dtype).bits // 8


def part_of_larger(x) -> bool:
    """Whether x is a view into a larger array (numpy's or cupy's .base), so that holding x holds all of it:
    Q, K and V from one product are three views of one buffer (kernels.numpy_qkv, kernels.cupy_qkv)."""
    base = getattr(x, "base", None)
    return base is not None and getattr(base, "nbytes", 0) > x.nbytes


def read_only(x):
    """x as an array nobody can write through: a read-only numpy view (no copy), or a copy on
    backends without read-only arrays. What an edit gets, so it cannot change a recorded tensor."""
    if isinstance(x, np.ndarray):
        view = x.view()
        view.flags.writeable = False
        return view
    return namespace_of(x).asarray(x, copy=True)


HOST_INTEGERS = (int, np.integer)  # what counts as a whole number on the host (never a bool: check that first)
HOST_BOOLS = (bool, np.bool_)
HOST_STRINGS = (str, np.str_)


def is_host_array(x) -> bool:
    """True for a NumPy array (already on the host)."""
    return isinstance(x, np.ndarray)


def is_strict_array(x) -> bool:
    """True for an array_api_strict array, on any device (the GPU stand-in's too): to_host reads it."""
    return type(x).__module__.startswith("array_api_strict")


def host_asarray(x) -> np.ndarray:
    """Anything with __array__ (or nested lists) as a NumPy array on the host."""
    return np.asarray(x)


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


def host_from_bytes(data, dtype: str, shape) -> np.ndarray:
    """Raw bytes as a host array of a numpy dtype string ('<f4', '<u2', ...), no copy."""
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def host_widen_bfloat16(u16: np.ndarray) -> np.ndarray:
    """bfloat16 values held as uint16 bits -> float32, exactly: a bfloat16 is the top 16 bits of a
    float32 (same sign and exponent, 7 mantissa bits), so shifting it up 16 bits is the value."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


def library_erf(xp: ModuleType):
    """The array library's own erf where it has one on the GPU (cupyx on cupy), else None: the array API
    has no erf, and engine.erf computes it from array-API operations instead."""
    if backend_name(xp) == "cupy":
        import cupyx.scipy.special
        return cupyx.scipy.special.erf
    return None
