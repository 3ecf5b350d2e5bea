"""BlockDim: the same GEMM with 128 threads as (128,), as (32, 4), and inside a user kernel
launched with more threads (256) than the GEMM uses, where the spare threads do other work.

Every thread of the block calls the device function; its first block_dim threads (in
thread-rank order) compute, the others only take part in the barriers.
"""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

USER_KERNEL = r'''
// 256 threads: the GEMM uses the first gemm::block_dim_x (128); the rest sum A's rows.
extern "C" __global__ void gemm_and_row_sums(const float* a, const float* b, float* c, float* row_sums) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* sa = reinterpret_cast<float*>(smem + gemm::a_offset);
  float* sb = reinterpret_cast<float*>(smem + gemm::b_offset);
  float* sc = reinterpret_cast<float*>(smem + gemm::c_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::copy_wait();
  const int spare = blasdx::thread_rank() - gemm::threads;
  if (spare >= 0 && spare < gemm::m) {
    float s = 0;
    for (int j = 0; j < gemm::k; ++j) s += sa[gemm::a_index(spare, j)];
    row_sums[spare] = s;
  }
  gemm::execute(1.0f, sa, sb, 0.0f, sc);
  gemm::store_c(sc, c);
}
'''


def main() -> None:
    base = Size(64, 64, 32) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") \
        + SM(800) + Block()
    one_d, two_d = base + BlockDim(128), base + BlockDim(32, 4)
    print(f"suggested block_dim {tuple(base.suggested_block_dim)}; testing (128,), (32, 4) and a 256-thread launch")
    kernel = blasdx.compile_kernel(one_d.device_source("gemm") + USER_KERNEL, "gemm_and_row_sums", sm=target_sm())
    if not GPU:
        one_d.compile(arch=900), two_d.compile(arch=900)
        return skip_run("BlockDim examples")
    import cupy

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    a_dev, b_dev = cupy.asarray(a), cupy.asarray(b)
    for name, gemm in (("BlockDim(128)", one_d), ("BlockDim(32, 4)", two_d)):
        c = cupy.full((64, 64), np.nan, dtype=np.float32)
        gemm.execute(a_dev, b_dev, c)
        check(name, c.get(), ref, 1e-5)
    c = cupy.full((64, 64), np.nan, dtype=np.float32)
    sums = cupy.zeros(64, dtype=np.float32)
    kernel(1, 256, (a_dev, b_dev, c, sums), shared_mem=one_d.shared_memory_size)
    check("256-thread user kernel: GEMM", c.get(), ref, 1e-5)
    check("256-thread user kernel: spare threads' row sums", sums.get(), a.astype(np.float64).sum(1), 1e-5)


if __name__ == "__main__":
    main()
