"""The fast path's CuPy kernels: a formula line that CuPy would run as several array operations (one GPU
launch each: a dozen for gelu's erf, eight for layernorm) runs here as one CUDA kernel. `kernels.FUSED`
says which kernel replaces which formula line of engine.py, as it does for the numpy kernels; each is held
equal to its line by benchmarks/bench_gpu.py --check and tests/engine/test_cuda_kernels.py (on a GPU), and
`model.trace(..., fast=False)` runs none of them.

The arithmetic is the formula's, in its order (two passes for the variance, e / sum(e), x / sqrt 2); only
the order of a row's sums differs. A row kernel gives each row of the last axis one block, whose threads
stride over the row and meet in block_reduce (a warp shuffle, then one warp over the warps' results).
CuPy is imported when a kernel first runs (on a cupy array), never at import.
"""

from __future__ import annotations

import functools

import numpy as np

CUDA_SOURCE = r"""
__device__ float block_reduce(float v, float* shared, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        const float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? shared[lane] : (is_max ? __int_as_float(0xff800000) : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            const float other = __shfl_xor_sync(0xffffffffu, v, o);
            v = is_max ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    const float result = shared[32];
    __syncthreads();  // shared is reused by the next reduction
    return result;
}

// engine.softmax:  e = exp(s - max(s)); e / sum(e)   over rows of `width`. A -inf score (a [PAD] key) gives 0.
extern "C" __global__ void bertviz_softmax(const float* __restrict__ s, float* __restrict__ out, const int width) {
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

// engine.layer_norm:  (x - mean) / sqrt(var + eps) * gamma + beta   over rows of `width` (biased var, two passes)
extern "C" __global__ void bertviz_layer_norm(const float* __restrict__ x, const float* __restrict__ gamma,
                                              const float* __restrict__ beta, float* __restrict__ out,
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

// engine.gelu:  0.5 x (1 + erf(x / sqrt 2))   with cuda's erff
extern "C" __global__ void bertviz_gelu(const float* __restrict__ x, float* __restrict__ y, const long long size) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += step) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v / 1.41421356237309515f));
    }
}

// engine.queries_keys_values, after its one product:  split_heads(Z W + b)   for Q, K and V at once.
// qkv [rows, 3H] is Z [W^Q | W^K | W^V] (rows = B n); out [3, B, n_h, n, d_k] gets qkv + [b^Q | b^K | b^V],
// each value moved to its head: Q, K and V come out whole and contiguous, in one launch.
extern "C" __global__ void bertviz_qkv_heads(const float* __restrict__ qkv, const float* __restrict__ bias,
                                             float* __restrict__ out, const long long rows, const int n,
                                             const int n_h, const int d_k) {
    const int H = n_h * d_k, H3 = 3 * H;
    const long long size = rows * H3, step = (long long)blockDim.x * gridDim.x, B = rows / n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += step) {
        const long long r = i / H3;
        const int c = (int)(i - r * H3), part = c / H, h = (c - part * H) / d_k, d = c - part * H - h * d_k;
        const long long b = r / n, t = r - b * n;
        out[(((part * B + b) * n_h + h) * n + t) * d_k + d] = qkv[i] + bias[c];
    }
}

// trace.Recorder._narrowed:  astype(x, float16), and whether a finite value became +-inf   in one launch
// (the conversions are PTX's cvt, round to nearest even, as numpy's and cupy's astype).
extern "C" __global__ void bertviz_narrow_half(const float* __restrict__ x, unsigned short* __restrict__ y,
                                               int* __restrict__ overflowed, const long long size) {
    const long long step = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size; i += step) {
        const float v = x[i];
        unsigned short h;
        float back;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        asm("cvt.f32.f16 %0, %1;" : "=f"(back) : "h"(h));
        y[i] = h;
        if (isinf(back) && isfinite(v)) *overflowed = 1;  // every writer writes 1: no race to lose
    }
}
"""

KERNEL_NAMES = ("bertviz_softmax", "bertviz_layer_norm", "bertviz_gelu", "bertviz_qkv_heads", "bertviz_narrow_half")
ELEMENTWISE_THREADS = 256


@functools.lru_cache(maxsize=1)
def _module():
    """The compiled kernels (NVRTC, once per process; cupy caches the binary on disk between processes)."""
    import cupy
    return cupy.RawModule(code=CUDA_SOURCE, options=("--std=c++14",))


def _row_threads(width: int) -> int:
    """Threads for one row's block: whole warps, up to 256 (a row of 768 gives each thread 3 values)."""
    return min(256, 32 * -(-width // 32))


def _elementwise_blocks(size: int) -> int:
    """Blocks for a grid-stride loop over `size` values (each thread a few when the array is large)."""
    return max(1, min(-(-size // ELEMENTWISE_THREADS), 1 << 16))


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
        _module().get_function(name)((x.size // width,), (_row_threads(width),), args)
    return out


def softmax(s):
    """engine.softmax of a float32 cupy array, one launch."""
    return _launch_rows("bertviz_softmax", s)


def layer_norm(x, gamma, beta, eps: float):
    """engine.layer_norm over the last axis of a float32 cupy array, one launch."""
    return _launch_rows("bertviz_layer_norm", x, gamma, beta, eps=eps)


def gelu(x):
    """engine.gelu (exact, with cuda's erff) of a float32 cupy array, one launch."""
    import cupy
    x = cupy.ascontiguousarray(x)
    out = cupy.empty_like(x)
    if x.size:
        _module().get_function("bertviz_gelu")((_elementwise_blocks(x.size),), (ELEMENTWISE_THREADS,),
                                               (x, out, np.int64(x.size)))
    return out


def queries_keys_values(Z, packed_W, packed_b, n_h: int):
    """engine.queries_keys_values from one product Z [W^Q | W^K | W^V] and one launch that adds the biases and
    splits the heads: 3 x [..., n_h, n, d_k], each contiguous (slices of one [3, ..., n_h, n, d_k] buffer)."""
    import cupy
    *lead, n, H = Z.shape
    H3 = packed_W.shape[1]
    rows = int(np.prod(lead, dtype=np.int64)) * n
    product = cupy.ascontiguousarray(Z).reshape(rows, H) @ packed_W  # [B n, 3H]: one gemm
    out = cupy.empty((3, *lead, n_h, n, H3 // (3 * n_h)), dtype=product.dtype)
    if product.size:
        _module().get_function("bertviz_qkv_heads")(
            (_elementwise_blocks(product.size),), (ELEMENTWISE_THREADS,),
            (product, cupy.ascontiguousarray(packed_b), out, np.int64(rows), np.int32(n), np.int32(n_h),
             np.int32(H3 // (3 * n_h))))
    return out[0], out[1], out[2]


def narrow_half(x):
    """x (float32) as float16, and a 0-d int32 flag, 1 where a finite value became +-inf (above 65,504): what
    Recorder._narrowed computes with astype, isinf and isfinite, in one launch."""
    import cupy
    x = cupy.ascontiguousarray(x)
    out = cupy.empty(x.shape, dtype=cupy.float16)
    flag = cupy.zeros((), dtype=cupy.int32)
    if x.size:
        _module().get_function("bertviz_narrow_half")((_elementwise_blocks(x.size),), (ELEMENTWISE_THREADS,),
                                                      (x, out, flag, np.int64(x.size)))
    return out, flag
