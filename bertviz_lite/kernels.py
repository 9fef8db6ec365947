"""The fast path: which fused kernel replaces which formula line (`FUSED`, decided once), and the numpy
and CuPy kernels themselves. Each computes exactly what a formula function in engine.py computes (tests hold
them equal), faster; `model.trace(..., fast=False)` runs none of them (`fast_path`). How many threads
a numpy kernel splits its rows over is the thread policy's (threads.py). CuPy is imported only when a
CuPy kernel first runs (on a cupy array).
"""

from __future__ import annotations

import contextvars
import functools
import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from . import backend, threads

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


def numpy_matmul(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """x @ W with x's leading axes (a batch) folded into one [B*n, k] product: numpy would run
    one small product per example instead (1.7x slower for 32 sentences of 14 tokens here)."""
    if x.ndim <= 2:
        return x @ W
    return (x.reshape(-1, x.shape[-1]) @ W).reshape(*x.shape[:-1], W.shape[-1])


# ------------------------------------------------------------------------------------------
# cupy kernels: each elementwise line one launch, where cupy would run one per operation (a dozen for
# gelu's erf, eight for layernorm). A row kernel gives each row of the last axis one block, whose threads
# stride over the row and meet in block_reduce (a warp shuffle, then one warp over the warps' results).
# The arithmetic is the formula's, in its order (two passes for the variance, e / sum(e), x / sqrt 2);
# only the order of the sums differs.
# ------------------------------------------------------------------------------------------

CUDA_SOURCE = r"""
__device__ float block_reduce(float v, float* shared, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? shared[lane] : (is_max ? __int_as_float(0xff800000) : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float other = __shfl_xor_sync(0xffffffffu, v, o);
            v = is_max ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    const float result = shared[32];
    __syncthreads();  // shared is reused by the next reduction
    return result;
}

// softmax(s) over rows of `width`: e = exp(s - max); e / sum(e). A -inf score (a [PAD] key) gives 0.
extern "C" __global__ void bertviz_softmax(const float* s, float* out, const int width) {
    __shared__ float shared[33];
    const float* row = s + (long long)blockIdx.x * width;
    float* o = out + (long long)blockIdx.x * width;
    float m = __int_as_float(0xff800000);
    for (int j = threadIdx.x; j < width; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, shared, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < width; j += blockDim.x) {
        const float e = expf(row[j] - m);
        o[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, shared, false);
    for (int j = threadIdx.x; j < width; j += blockDim.x) o[j] = o[j] / sum;
}

// (x - mean) / sqrt(var + eps) * gamma + beta over rows of `width`; var is the biased variance, two passes.
extern "C" __global__ void bertviz_layer_norm(const float* x, const float* gamma, const float* beta, float* out,
                                              const int width, const float eps) {
    __shared__ float shared[33];
    const float* row = x + (long long)blockIdx.x * width;
    float* o = out + (long long)blockIdx.x * width;
    float s = 0.0f;
    for (int j = threadIdx.x; j < width; j += blockDim.x) s += row[j];
    const float mu = block_reduce(s, shared, false) / width;
    float v = 0.0f;
    for (int j = threadIdx.x; j < width; j += blockDim.x) {
        const float d = row[j] - mu;
        v += d * d;
    }
    const float sd = sqrtf(block_reduce(v, shared, false) / width + eps);
    for (int j = threadIdx.x; j < width; j += blockDim.x) o[j] = (row[j] - mu) / sd * gamma[j] + beta[j];
}

// exact gelu, x/2 (1 + erf(x / sqrt 2)), with cuda's erff
extern "C" __global__ void bertviz_gelu(const float* x, float* y, const long long size) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += step) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v / 1.41421356237309515f));
    }
}
"""


@functools.lru_cache(maxsize=1)
def _cupy_module():
    import cupy
    return cupy.RawModule(code=CUDA_SOURCE, options=("--std=c++14",))


def _row_threads(width: int) -> int:
    """Threads for one row's block: whole warps, up to 256 (a row of 768 gives each thread 3 values)."""
    return min(256, 32 * -(-width // 32))


def _launch_rows(name: str, x, *weights, eps: float | None = None):
    """Row kernel `name` over x's last axis, one block per row, with arguments (x, *weights, out, width[, eps]);
    returns out, a fresh C-contiguous float32 array of x's shape."""
    import cupy
    x = cupy.ascontiguousarray(x)
    out = cupy.empty_like(x)
    width = x.shape[-1]
    if x.size:
        args = (x, *(cupy.ascontiguousarray(w) for w in weights), out, np.int32(width))
        args += () if eps is None else (np.float32(eps),)
        _cupy_module().get_function(name)((x.size // width,), (_row_threads(width),), args)
    return out


def cupy_softmax(s):
    """Row-wise softmax of a float32 cupy array, one launch."""
    return _launch_rows("bertviz_softmax", s)


def cupy_layer_norm(x, gamma, beta, eps: float):
    """LayerNorm over the last axis of a float32 cupy array, one launch."""
    return _launch_rows("bertviz_layer_norm", x, gamma, beta, eps=eps)


def cupy_gelu(x):
    """Exact gelu of a float32 cupy array with cuda's erff, one launch."""
    import cupy
    x = cupy.ascontiguousarray(x)
    out = cupy.empty_like(x)
    if x.size:
        blocks = min(-(-x.size // 256), 65535)
        _cupy_module().get_function("bertviz_gelu")((blocks,), (256,), (x, out, np.int64(x.size)))
    return out


# ------------------------------------------------------------------------------------------
# the fast path, decided once: which fused kernel replaces which formula function
# ------------------------------------------------------------------------------------------

# (formula function, backend, dtype) -> the kernel that computes the same line faster. The
# formula functions live in engine.py, the kernels above; each kernel takes the formula
# function's own arguments. Nothing else in the package chooses a kernel. Tests hold every
# kernel equal to its formula, and `model.trace(..., fast=False)` runs the formulas as written.
FUSED = {
    ("layer_norm", "numpy", "float32"): lambda x, gamma, beta, eps, xp: numpy_layer_norm(x, gamma, beta, eps),
    ("softmax", "numpy", "float32"): lambda s, xp: numpy_softmax(s),
    ("gelu", "numpy", "float32"): lambda x, xp: numpy_gelu(x),
    ("matmul", "numpy", "float32"): lambda x, W, xp: numpy_matmul(x, W),
    ("layer_norm", "cupy", "float32"): lambda x, gamma, beta, eps, xp: cupy_layer_norm(x, gamma, beta, eps),
    ("softmax", "cupy", "float32"): lambda s, xp: cupy_softmax(s),
    ("gelu", "cupy", "float32"): lambda x, xp: cupy_gelu(x),
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
    if not _FAST.get():
        return None
    if isinstance(x, np.ndarray):
        return FUSED.get((name, "numpy", x.dtype.name))
    if backend.is_cupy_array(x):
        return FUSED.get((name, "cupy", str(x.dtype)))
    return None
