"""The fast path: which fused kernel replaces which formula line (`FUSED`, decided once), and the numpy
kernels themselves (the CuPy ones are cuda_kernels.py's). Each computes exactly what a formula function in
engine.py computes (tests hold them equal), faster; `model.trace(..., fast=False)` runs none of them
(`fast_path`). How many threads a numpy kernel splits its rows over is the thread policy's (threads.py).
"""

from __future__ import annotations

import contextvars
import math
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from . import backend, cuda_kernels, threads
from .errors import BackendError

# abramowitz & stegun 7.1.26 (engine.rational_erf's formula, which reads these): |error| <= 1.5e-7 for every x
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
SQRT_2 = math.sqrt(2.0)



# ------------------------------------------------------------------------------------------
# numpy kernels: the engine's elementwise lines, fast. Each computes exactly what the
# array-api line beside it in engine.py computes (tests compare them), but block by block into
# one output buffer instead of a fresh array per operation, and, on large inputs, over all the
# threads BLAS may use: numpy releases the GIL inside each ufunc, so two threads each running a
# block loop over their half of the rows use two cores.
#
# Block size (benchmarks/bench_kernels.py, BERT-base at 512 tokens, 2 cores): with 32 Ki-element
# blocks two threads gained little (softmax 8.8 -> 6.0 ms, gelu 7.3 -> 5.0): a ufunc call on 128 KiB
# is so short that the threads queue for the GIL between calls. With 64 Ki elements (256 KiB: a block
# and its three scratch blocks fit a core's 1 MiB l2) softmax takes 4.9 ms and gelu 4.3 ms; at 128
# tokens gelu goes from 1.7 to 1.1 ms. A second thread only helps when the core is free: OpenBLAS
# spins its idle workers after every matrix product unless OPENBLAS_THREAD_TIMEOUT is small (the
# package sets 4 when it is imported before numpy: see __init__.py).
# ------------------------------------------------------------------------------------------

_BLOCK = 1 << 16  # float32 elements per block (256 KiB)
_POOLS: dict[int, ThreadPoolExecutor] = {}


def _split(work, n: int, *arrays: np.ndarray) -> None:
    """work(*(a[lo:hi] for a in arrays)) for consecutive ranges of the n leading rows, on
    threads.kernel_threads() threads when every thread gets at least a block, else at once here."""
    count = min(threads.kernel_threads(), 16)
    size = arrays[0].size
    if count < 2 or size < count * _BLOCK:
        work(*arrays)
        return
    pool = _POOLS.get(count) or _POOLS.setdefault(count, ThreadPoolExecutor(count, "bertviz-kernel"))
    cuts = [n * i // count for i in range(count + 1)]
    for f in [pool.submit(work, *(a[lo:hi] for a in arrays)) for lo, hi in zip(cuts, cuts[1:])]:
        f.result()  # re-raises a worker's exception here


# gelu(x) = x Phi(x). With h = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 = t P(t) e^{-x^2/2} / 2 (the rational
# form above), Phi(x) = 1 - h for x >= 0 and h for x < 0, so gelu(x) = max(x, 0) - |x| h: the same
# formula and error bound as x/2 (1 + erf(x / sqrt 2)), with no sign flip (copysign costs ~5
# multiplies here) and three fewer passes.
_AS_P_GELU = np.float32(ERF_P / SQRT_2)  # p |x| / sqrt 2 = p' |x|
_AS_A_HALF = tuple(np.float32(a / 2) for a in ERF_A)  # the 1/2 of erfc / 2, folded in


def _gelu_into(flat: np.ndarray, out: np.ndarray) -> None:
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


def numpy_gelu(x: np.ndarray) -> np.ndarray:
    """Exact-form gelu x Phi(x) for float32, as max(x, 0) - |x| Phi(-|x|), block by block in one buffer."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _split(_gelu_into, flat.size, flat, out)
    return out.reshape(x.shape)


def _rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x as a contiguous [rows, width] view and a fresh output of that shape."""
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    return rows, np.empty_like(rows)


def _row_blocks(rows: np.ndarray, out: np.ndarray):
    """(input, output) blocks of whole rows, small enough to stay in l2 while a kernel makes its passes."""
    step = max(1, _BLOCK // max(1, rows.shape[-1]))  # rows per block
    return ((rows[i:i + step], out[i:i + step]) for i in range(0, rows.shape[0], step))


def _softmax_into(rows: np.ndarray, out: np.ndarray) -> None:
    for sb, eb in _row_blocks(rows, out):
        np.subtract(sb, sb.max(axis=-1, keepdims=True), out=eb)
        np.exp(eb, out=eb)
        np.divide(eb, eb.sum(axis=-1, keepdims=True), out=eb)


def numpy_softmax(s: np.ndarray) -> np.ndarray:
    """Row-wise softmax, e = exp(s - max); e / sum(e), a block of rows at a time into one buffer."""
    rows, out = _rows(s)
    _split(_softmax_into, rows.shape[0], rows, out)
    return out.reshape(s.shape)


def numpy_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis, into one buffer."""
    width = np.float32(x.shape[-1])

    def work(rows, out):
        for xb, ob in _row_blocks(rows, out):
            np.subtract(xb, xb.mean(axis=-1, keepdims=True), out=ob)  # x - mu
            var = np.vecdot(ob, ob)[:, None] / width  # biased, as bert and torch; no squared copy
            np.multiply(ob, np.float32(1.0) / np.sqrt(var + np.float32(eps)), out=ob)  # eps inside the sqrt
            np.multiply(ob, gamma, out=ob)
            np.add(ob, beta, out=ob)

    rows, out = _rows(x)
    _split(work, rows.shape[0], rows, out)
    return out.reshape(x.shape)


def folded_matmul(x, W):
    """x @ W with x's leading axes (a batch) folded into one [B*n, k] product: numpy would run one small
    product per example instead (1.7x slower for 32 sentences of 14 tokens here), cupy one batched one."""
    if x.ndim <= 2:
        return x @ W
    return (x.reshape(-1, x.shape[-1]) @ W).reshape(*x.shape[:-1], W.shape[-1])


# ------------------------------------------------------------------------------------------
# Q, K and V from one product. A model keeps each layer's W^Q, W^K, W^V side by side in one [H, 3H]
# array (and b^Q, b^K, b^V in one [3H]), made once when it is built (Bert.__init__, so at load and
# variant): its weights dict holds views of those columns. An edit in place of a view
# (`model.weights["layer.0.attn.W_Q"][:, :8] = 0`) is an edit of the packed array, so both paths see it;
# a weight replaced by another array is not the view any more, and the fast path then runs the three
# formula lines (the kernel declines) until the model is built again (variant).
# ------------------------------------------------------------------------------------------

QKV_WEIGHTS = ("attn.W_Q", "attn.W_K", "attn.W_V", "attn.b_Q", "attn.b_K", "attn.b_V")


class PackedQKV:
    """One layer's [W^Q | W^K | W^V] [H, 3H] and [b^Q | b^K | b^V] [3H], and the six views handed to the weights
    dict (in QKV_WEIGHTS' order): the packed arrays hold the layer's current values while the dict holds these."""

    def __init__(self, W, b, views: tuple):
        self.W, self.b, self.views = W, b, views

    def current(self, weights) -> bool:
        """Whether the layer still reads these views (no weight replaced by another array since)."""
        return all(weights[name] is view for name, view in zip(QKV_WEIGHTS, self.views))


def pack_qkv(weights: dict, prefix: str) -> PackedQKV | None:
    """Layer `prefix`'s query, key and value weights packed into one [H, 3H] array (for the backends and
    dtypes the FUSED table has a queries_keys_values kernel for: numpy and cupy float32), or None. The caller
    puts the returned views in the weights dict in place of the separate arrays."""
    Ws = [weights[prefix + name] for name in QKV_WEIGHTS]
    if not all(("queries_keys_values", array_backend(w), str(w.dtype)) in FUSED for w in Ws):
        return None
    xp = backend.namespace_of(Ws[0])
    W, b = xp.concat(Ws[:3], axis=1), xp.concat(Ws[3:])  # [H, 3H], [3H]: fresh, owned here
    H = Ws[0].shape[1]
    views = tuple(W[:, i * H:(i + 1) * H] for i in range(3)) + tuple(b[i * H:(i + 1) * H] for i in range(3))
    return PackedQKV(W, b, views)


def current_qkv(W) -> PackedQKV | None:
    """A layer's packed Q, K, V weights, or None when it has none or one of the six was replaced."""
    packed = getattr(W, "qkv", None)
    return packed if packed is not None and packed.current(W) else None


def numpy_qkv(Z: np.ndarray, W, n_h: int):
    """Q, K, V split into heads from one product Z [W^Q | W^K | W^V] + [b^Q | b^K | b^V]: [..., n, 3H] read as
    [..., n, 3, n_h, d_k] and permuted to 3 x [..., n_h, n, d_k] (views; no per-head or per-matrix loop).
    None (run the three formula lines) when W has no packed weights or one of them was replaced."""
    packed = current_qkv(W)
    if packed is None:
        return None
    QKV = folded_matmul(Z, packed.W)  # [..., n, 3H]
    np.add(QKV, packed.b, out=QKV)  # in place: the product is this function's own buffer
    *lead, n, H3 = QKV.shape
    r = len(lead)
    heads = QKV.reshape(*lead, n, 3, n_h, H3 // (3 * n_h))  # [..., n, 3, n_h, d_k]
    heads = heads.transpose(r + 1, *range(r), r + 2, r, r + 3)  # [3, ..., n_h, n, d_k]
    return heads[0], heads[1], heads[2]


def cupy_qkv(Z, W, n_h: int):
    """numpy_qkv on cupy: one product, and one launch that adds the biases and splits the heads into contiguous
    Q, K, V (cuda_kernels.queries_keys_values). None, as numpy_qkv, when the packed weights are not current."""
    packed = current_qkv(W)
    return None if packed is None else cuda_kernels.queries_keys_values(Z, packed.W, packed.b, n_h)


# ------------------------------------------------------------------------------------------
# the fast path, decided once: which fused kernel replaces which formula function
# ------------------------------------------------------------------------------------------

# (formula function, backend, dtype) -> the kernel that computes the same line faster. The
# formula functions live in engine.py, the kernels above (numpy) and in cuda_kernels.py (cupy); each
# kernel takes the formula function's own arguments, and may decline (return None: the formula runs).
# Nothing else in the package chooses a kernel. Tests hold every kernel equal to its formula, and
# `model.trace(..., fast=False)` runs the formulas as written.
FUSED = {
    ("layer_norm", "numpy", "float32"): lambda x, gamma, beta, eps, xp: numpy_layer_norm(x, gamma, beta, eps),
    ("softmax", "numpy", "float32"): lambda s, xp: numpy_softmax(s),
    ("gelu", "numpy", "float32"): lambda x, xp: numpy_gelu(x),
    ("matmul", "numpy", "float32"): lambda x, W, xp: folded_matmul(x, W),
    ("queries_keys_values", "numpy", "float32"): lambda Z, W, n_h, xp: numpy_qkv(Z, W, n_h),
    ("layer_norm", "cupy", "float32"): lambda x, gamma, beta, eps, xp: cuda_kernels.layer_norm(x, gamma, beta, eps),
    ("softmax", "cupy", "float32"): lambda s, xp: cuda_kernels.softmax(s),
    ("gelu", "cupy", "float32"): lambda x, xp: cuda_kernels.gelu(x),
    ("matmul", "cupy", "float32"): lambda x, W, xp: folded_matmul(x, W),
    ("queries_keys_values", "cupy", "float32"): lambda Z, W, n_h, xp: cupy_qkv(Z, W, n_h),
}

# Whether the cupy rows of FUSED run by default. False until a GPU run of `benchmarks/bench_gpu.py --check`
# has held every kernel to its formula line and every trace key to the numpy engine; the variable
# BERTVIZ_LITE_CUPY_KERNELS=1 or 0 turns them on or off for a process (the check itself runs them on).
CUPY_KERNELS_DEFAULT = False
CUPY_KERNELS_VARIABLE = "BERTVIZ_LITE_CUPY_KERNELS"

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


def cupy_kernels_enabled() -> bool:
    """Whether the cupy kernels run on the fast path: BERTVIZ_LITE_CUPY_KERNELS (1 or 0) if set, else
    CUPY_KERNELS_DEFAULT."""
    value = os.environ.get(CUPY_KERNELS_VARIABLE, "").strip()
    if value == "":
        return CUPY_KERNELS_DEFAULT
    if value in ("0", "1"):
        return value == "1"
    raise BackendError(f"{CUPY_KERNELS_VARIABLE}={value!r}: set it to 1 (run the cupy kernels) or 0 (run the "
                       "formula lines on cupy), or unset it for the default")


def kernels_run_on(backend_name: str) -> bool:
    """Whether the fast path runs FUSED kernels on this backend: numpy always, cupy when switched on."""
    if backend_name == "cupy":
        return cupy_kernels_enabled()
    return any(b == backend_name for _, b, _ in FUSED)


def array_backend(x) -> str | None:
    """'numpy' or 'cupy' for an array the fast path has kernels for, else None."""
    if isinstance(x, np.ndarray):
        return "numpy"
    return "cupy" if backend.is_cupy_array(x) else None


def fused_kernel(name: str, x):
    """The FUSED kernel for formula `name` on array x, or None: fast path off, no kernel for this
    backend and dtype, or the cupy kernels switched off (cupy_kernels_enabled)."""
    if not _FAST.get():
        return None
    on = array_backend(x)
    if on is None or (on == "cupy" and not cupy_kernels_enabled()):
        return None
    return FUSED.get((name, on, _dtype_name(x.dtype)))


_DTYPE_NAMES = {np.dtype(name): name for name in ("float16", "float32", "float64")}


def _dtype_name(dtype) -> str:
    """A dtype's name ('float32'), from a table for the usual ones: numpy's dtype.name is a Python property
    that cost as much as the rest of the lookup (a few microseconds, some 60 times a trace)."""
    return _DTYPE_NAMES.get(dtype) or dtype.name


def narrowed(value, dtype):
    """(value as float16, a 0-d overflow flag) in one cupy launch (cuda_kernels.narrow_half) where the fast path
    runs cupy kernels, value is float32 and dtype float16; else None: Recorder._narrowed runs its array lines."""
    if (_FAST.get() and str(dtype) == "float16" and backend.is_cupy_array(value) and str(value.dtype) == "float32"
            and cupy_kernels_enabled()):
        return cuda_kernels.narrow_half(value)
    return None
