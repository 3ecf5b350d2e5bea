"""A scaled-dot-product attention block per thread block: O = softmax(Q K^T / sqrt(d)) V.

Two block GEMMs and a row softmax in one kernel, on the register-accumulator API: the
scores and probabilities never leave the chip (accumulators, then shared memory for the
softmax), and O goes from the accumulators straight to global memory. Q, K, V are
(batch, 64, 64) float16; O is float32.
"""

from __future__ import annotations

import math

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

SEQ, DIM = 64, 64

KERNEL = r'''
// scores = Q K^T (K row-major is K^T column-major), then P = softmax(scores) as float16,
// then O = P V. Shared memory: scores' GEMM (Q, K, S), then P and V for the second.
extern "C" __global__ void attention(const __half* q, const __half* k, const __half* v, float* o,
                                     float scale, long long batch) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* second = smem + scores::shared_memory_size;
  auto* sq = reinterpret_cast<scores::a_t*>(smem + scores::a_offset);
  auto* sk = reinterpret_cast<scores::b_t*>(smem + scores::b_offset);
  auto* ss = reinterpret_cast<scores::c_t*>(smem + scores::c_offset);
  auto* sp = reinterpret_cast<output::a_t*>(second + output::a_offset);
  auto* sv = reinterpret_cast<output::b_t*>(second + output::b_offset);
  const int rank = blasdx::thread_rank(), lane = rank & 31, warps = (blockDim.x * blockDim.y * blockDim.z) / 32;
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    scores::load_a(q + item * scores::m * scores::k, sq);
    scores::load_b(k + item * scores::k * scores::n, sk);
    output::load_b(v + item * output::k * output::n, sv);
    scores::copy_wait();
    scores::accumulator s = scores::make_accumulator();
    scores::multiply(sq, sk, s);
    scores::store(s, ss, scores::ldc, scale, 0.0f);  // scale * Q K^T into shared memory, for the row softmax
    __syncthreads();
    for (int row = rank / 32; row < scores::m; row += warps) {  // one warp per row
      float top = -3.0e38f;
      for (int j = lane; j < scores::n; j += 32) top = fmaxf(top, ss[scores::c_index(row, j)]);
      for (int s = 16; s > 0; s /= 2) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, s));
      float sum = 0;
      for (int j = lane; j < scores::n; j += 32) sum += __expf(ss[scores::c_index(row, j)] - top);
      for (int s = 16; s > 0; s /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, s);
      for (int j = lane; j < scores::n; j += 32)
        sp[output::a_index(row, j)] = __float2half(__expf(ss[scores::c_index(row, j)] - top) / sum);
    }
    __syncthreads();
    output::accumulator out = output::make_accumulator();
    output::multiply(sp, sv, out);
    output::store(out, o + item * output::m * output::n, output::global_ldc, 1.0f, 0.0f);  // no shared-memory hop
    __syncthreads();
  }
}
'''


def descriptors():
    # 128 threads: two GEMMs, a softmax and the copies share a block (see chained_gemm.py).
    scores = Size(SEQ, SEQ, DIM) + Precision("float16", "float16", "float32") \
        + Arrangement("row_major", "col_major", "row_major") + SM(800) + Block() + BlockDim(128)
    output = Size(SEQ, DIM, SEQ) + Precision("float16", "float16", "float32") \
        + Arrangement("row_major", "row_major", "row_major") + SM(800) + Block() + BlockDim(128)
    return scores, output


def main() -> None:
    scores, output = descriptors()
    assert tuple(scores.block_dim) == tuple(output.block_dim)
    source = scores.device_source("scores") + output.device_source("output") + KERNEL
    kernel = blasdx.compile_kernel(source, "attention", sm=target_sm())
    if not GPU:
        return skip_run("attention block")
    import cupy

    rng = np.random.default_rng(0)
    batch = 256
    q, k, v = (rng.standard_normal((batch, SEQ, DIM)).astype(np.float16) for _ in range(3))
    o = cupy.full((batch, SEQ, DIM), np.nan, dtype=np.float32)
    scale = 1 / math.sqrt(DIM)
    kernel(min(batch, 1024), scores.block_dim,
           (cupy.asarray(q), cupy.asarray(k), cupy.asarray(v), o, np.float32(scale), np.int64(batch)),
           shared_mem=scores.shared_memory_size + output.shared_memory_size)
    s = np.matmul(q.astype(np.float64), k.astype(np.float64).transpose(0, 2, 1)) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    check(f"attention ({batch} blocks of {SEQ}x{DIM})", o.get(), np.matmul(p, v.astype(np.float64)), 5e-3)


if __name__ == "__main__":
    main()
