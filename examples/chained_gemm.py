"""Chained GEMM, D = (A @ B) @ E per block, on the register-accumulator API: the first
GEMM's accumulators become the second GEMM's A through multiply_chained, which keeps them in
registers where gemm2::a_from_registers<gemm1::accumulator> (SM 900 warpgroup tiles, an
intermediate at least 128 wide) and otherwise, as for these 64 x 64 ones, writes them to shared
memory; the second's accumulators go straight to global memory. Only A, B, E are read from and
D written to global memory.

Two descriptors live in one kernel under two names (gemm1, gemm2)."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

KERNEL = r'''
// One batch item per block iteration (grid-stride). Shared memory: gemm1's A and B, then (from
// the next 1024-byte boundary, where wgmma reads it) gemm2's A (used only where A cannot stay in
// registers) and B.
extern "C" __global__ void chained_gemm(const gemm1::a_t* a, const gemm1::b_t* b, const gemm2::b_t* e,
                                        gemm2::c_t* d, long long batch) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* second = smem + (gemm1::shared_memory_size_ab + 1023) / 1024 * 1024;
  auto* sa = reinterpret_cast<gemm1::a_t*>(smem + gemm1::a_offset);
  auto* sb = reinterpret_cast<gemm1::b_t*>(smem + gemm1::b_offset);
  auto* sc = reinterpret_cast<gemm2::a_t*>(second + gemm2::a_offset);
  auto* se = reinterpret_cast<gemm2::b_t*>(second + gemm2::b_offset);
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    gemm1::load_a(a + item * gemm1::m * gemm1::k, sa);
    gemm1::load_b(b + item * gemm1::k * gemm1::n, sb);
    gemm2::load_b(e + item * gemm2::k * gemm2::n, se);
    gemm1::copy_wait();
    gemm1::accumulator ab = gemm1::make_accumulator();
    gemm1::multiply(sa, sb, ab);
    gemm2::accumulator ce = gemm2::make_accumulator();
    gemm2::multiply_chained(ab, sc, se, ce);  // C = A B as gemm2's A (float16), then C E
    gemm2::store(ce, d + item * gemm2::m * gemm2::n, gemm2::global_ldc, 1.0f, 0.0f);  // D = C E
    __syncthreads();
  }
}
'''


def descriptors(size: int = 64, sm: int = 800):
    # 128 threads rather than the suggested 64 on SM 800: two GEMMs and their copies share a
    # block, and their shared memory allows only four blocks per SM, so more threads hide more
    # latency. On SM 900 they are one warpgroup, whose tiles hold whole rows.
    common = (Precision("float16") + Arrangement("row_major", "row_major", "row_major") + SM(sm) + Block()
              + BlockDim(128))
    return Size(size, size, size) + common, Size(size, size, size) + common


def sm_of_this_gpu() -> int:
    """SM 900 descriptors on an H100 or H200 (or to compile only, without a GPU), else SM 800."""
    if not GPU:
        return 900
    import cupy

    return 900 if cupy.cuda.Device().compute_capability == "90" else 800


def shared_memory(gemm1, gemm2) -> int:
    """The kernel's bytes of shared memory: gemm1's A and B, then gemm2's from a 1024-byte boundary."""
    return -(-gemm1.shared_memory_size_ab // 1024) * 1024 + gemm2.shared_memory_size_ab


def build(sm=None):
    gemm1, gemm2 = descriptors(sm=sm_of_this_gpu())
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
    kernel(min(batch, 1024), gemm1.block_dim, (cupy.asarray(a), cupy.asarray(b), cupy.asarray(e), d, np.int64(batch)),
           shared_mem=shared_memory(gemm1, gemm2))
    c = np.matmul(a.astype(np.float64), b).astype(np.float16).astype(np.float64)  # C becomes float16
    check(f"chained GEMM ({batch} items)", d.get(), np.matmul(c, e), 2e-3)


if __name__ == "__main__":
    main()
