"""Batched fp64 with two GEMMs per block: a user kernel loads two batch items into
separate shared-memory regions at once (their copies overlap), then multiplies both.
Fewer, fuller blocks than one GEMM per block; the batch may be odd."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, Precision, Size

USER_KERNEL = r'''
extern "C" __global__ void two_gemms_per_block(const double* a, const double* b, double* c, int batch) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int items = min(2, batch - 2 * int(blockIdx.x));
  for (int i = 0; i < items; ++i) {  // start both items' copies before waiting for either
    unsigned char* region = smem + i * gemm::shared_memory_size;
    const long long item = 2 * blockIdx.x + i;
    gemm::load_a(a + item * gemm::m * gemm::k, reinterpret_cast<double*>(region + gemm::a_offset));
    gemm::load_b(b + item * gemm::k * gemm::n, reinterpret_cast<double*>(region + gemm::b_offset));
  }
  gemm::copy_wait();
  for (int i = 0; i < 2; ++i) {  // every thread calls execute the same number of times
    if (i >= items) break;
    unsigned char* region = smem + i * gemm::shared_memory_size;
    double* sc = reinterpret_cast<double*>(region + gemm::c_offset);
    gemm::execute(1.0, reinterpret_cast<double*>(region + gemm::a_offset),
                  reinterpret_cast<double*>(region + gemm::b_offset), 0.0, sc);
    gemm::store_c(sc, c + (2 * blockIdx.x + i) * (long long)(gemm::m * gemm::n));
  }
}
'''


def main() -> None:
    gemm = Size(32, 32, 32) + Precision("float64") + Arrangement("row_major", "row_major", "row_major") \
        + SM(800) + Block()
    print(gemm.explain().splitlines()[2])
    kernel = blasdx.compile_kernel(gemm.device_source("gemm") + USER_KERNEL, "two_gemms_per_block",
                                   sm=target_sm())
    if not GPU:
        return skip_run("batched fp64, two GEMMs per block")
    import cupy

    batch = 1001
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((batch, 32, 32)), rng.standard_normal((batch, 32, 32))
    c = cupy.full((batch, 32, 32), np.nan)
    kernel((batch + 1) // 2, gemm.block_dim, (cupy.asarray(a), cupy.asarray(b), c, np.int32(batch)),
           shared_mem=2 * gemm.shared_memory_size)
    check(f"batched fp64 ({batch} items, 2 per block)", c.get(), np.matmul(a, b), 1e-12)


if __name__ == "__main__":
    main()
