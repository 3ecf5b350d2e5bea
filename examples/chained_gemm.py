"""Chained GEMM, D = (A @ B) @ E per block, on the register-accumulator API: the first
GEMM's accumulators go to shared memory as the second GEMM's A, the second's go straight
to global memory; only A, B, E are read from and D written to global memory.

Two descriptors live in one kernel under two names (gemm1, gemm2)."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

KERNEL = r'''
static_assert(blasdx::is_same<gemm1::c_t, gemm2::a_t>::value && gemm1::ldc == gemm2::lda,
              "gemm1's C must have the type and layout of gemm2's A");

// One batch item per block iteration (grid-stride); smem holds gemm1's A, B, C (= gemm2's A), then gemm2's B.
extern "C" __global__ void chained_gemm(const gemm1::a_t* a, const gemm1::b_t* b, const gemm2::b_t* e,
                                        gemm2::c_t* d, long long batch) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* second = smem + gemm1::shared_memory_size;
  auto* sa = reinterpret_cast<gemm1::a_t*>(smem + gemm1::a_offset);
  auto* sb = reinterpret_cast<gemm1::b_t*>(smem + gemm1::b_offset);
  auto* sc = reinterpret_cast<gemm1::c_t*>(smem + gemm1::c_offset);
  auto* se = reinterpret_cast<gemm2::b_t*>(second + gemm2::b_offset);
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    gemm1::load_a(a + item * gemm1::m * gemm1::k, sa);
    gemm1::load_b(b + item * gemm1::k * gemm1::n, sb);
    gemm2::load_b(e + item * gemm2::k * gemm2::n, se);
    gemm1::copy_wait();
    gemm1::accumulator ab = gemm1::make_accumulator();
    gemm1::multiply(sa, sb, ab);
    gemm1::store(ab, sc, gemm1::ldc, 1.0f, 0.0f);  // C = A B, left in shared memory
    __syncthreads();
    gemm2::accumulator ce = gemm2::make_accumulator();
    gemm2::multiply(sc, se, ce);
    gemm2::store(ce, d + item * gemm2::m * gemm2::n, gemm2::global_ldc, 1.0f, 0.0f);  // D = C E
    __syncthreads();
  }
}
'''


def descriptors(size: int = 64):
    # 128 threads rather than the suggested 64: two GEMMs and their copies share a block, and
    # their shared memory allows only four blocks per SM, so more threads hide more latency.
    common = (Precision("float16") + Arrangement("row_major", "row_major", "row_major") + SM(800) + Block()
              + BlockDim(128))
    return Size(size, size, size) + common, Size(size, size, size) + common


def build(sm=None):
    gemm1, gemm2 = descriptors()
    source = gemm1.device_source("gemm1") + gemm2.device_source("gemm2") + KERNEL
    return gemm1, gemm2, blasdx.compile_kernel(source, "chained_gemm", sm=sm)


def main() -> None:
    gemm1, gemm2, kernel = build(target_sm())
    if not GPU:
        return skip_run("chained GEMM")
    import cupy

    rng = np.random.default_rng(0)
    batch = 512
    a, b, e = (rng.standard_normal((batch, 64, 64)).astype(np.float16) * 0.125 for _ in range(3))
    d = cupy.full((batch, 64, 64), np.nan, dtype=np.float16)
    smem = gemm1.shared_memory_size + gemm2.shared_memory_size
    kernel(min(batch, 1024), gemm1.block_dim, (cupy.asarray(a), cupy.asarray(b), cupy.asarray(e), d, np.int64(batch)),
           shared_mem=smem)
    c = np.matmul(a.astype(np.float64), b).astype(np.float16).astype(np.float64)  # C is stored as float16
    check(f"chained GEMM ({batch} items)", d.get(), np.matmul(c, e), 2e-3)


if __name__ == "__main__":
    main()
