"""A whole GEMM in your own kernel: C (M x N) = A (M x K) @ B (K x N), float16 in, float32 out,
one 64x64 tile of C per block, looping over K in 64-deep steps with register accumulators.

The next A and B tiles load with cp.async (two shared-memory stages) while the current ones
multiply; load_a/load_b take the big matrices' leading dimensions at run time, and write
the padded shared-memory layout that the descriptor's suggested leading dimensions give
(no bank conflicts); store writes the accumulators straight to C in global memory."""

from __future__ import annotations

import time

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, LeadingDimension, MaxAlignment, Precision, Size

TILE, M, N, K = 64, 1024, 1024, 4096  # M, N and K multiples of TILE: the kernel has no edge tiles

KERNEL = r'''
// Stage s of shared memory holds A's and B's tiles at s * stage_bytes (C is never staged).
constexpr unsigned stage_bytes = gemm::shared_memory_size_ab;

extern "C" __global__ void __launch_bounds__(gemm::threads)
k_loop_gemm(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int n_total, int k_total) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto tile_a = [&](int s) { return reinterpret_cast<gemm::a_t*>(smem + s * stage_bytes + gemm::a_offset); };
  auto tile_b = [&](int s) { return reinterpret_cast<gemm::b_t*>(smem + s * stage_bytes + gemm::b_offset); };
  const long long row0 = blockIdx.y * gemm::m, col0 = blockIdx.x * gemm::n;
  const gemm::a_t* a_rows = a + row0 * k_total;  // row-major A: this block's rows
  const gemm::b_t* b_cols = b + col0;             // row-major B: this block's columns
  const int steps = k_total / gemm::k;

  gemm::accumulator acc = gemm::make_accumulator();
  gemm::load_a(a_rows, k_total, tile_a(0));
  gemm::load_b(b_cols, n_total, tile_b(0));
  blasdx::copy_commit();
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) {  // the next tiles start loading before this step multiplies
      const int next = (step + 1) & 1;
      gemm::load_a(a_rows + (step + 1) * gemm::k, k_total, tile_a(next));
      gemm::load_b(b_cols + (long long)(step + 1) * gemm::k * n_total, n_total, tile_b(next));
      blasdx::copy_commit();
      blasdx::copy_wait_prior<1>();  // this step's tiles have arrived (and the block synchronized)
    } else {
      blasdx::copy_wait_prior<0>();
    }
    gemm::multiply(tile_a(step & 1), tile_b(step & 1), acc);
    __syncthreads();  // every warp is done with this stage before it loads again
  }
  gemm::store(acc, c + row0 * n_total + col0, n_total, 1.0f, 0.0f);
}
'''


def descriptor():
    tile = (Size(TILE, TILE, TILE) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "row_major", "row_major") + MaxAlignment + SM(800) + Block())
    return tile + LeadingDimension(*tile.suggested_leading_dimension)  # the padded shared-memory layout


def main() -> None:
    gemm = descriptor()
    kernel = blasdx.compile_kernel(gemm.device_source("gemm") + KERNEL, "k_loop_gemm", sm=target_sm())
    if not GPU:
        return skip_run("K-loop GEMM")
    import cupy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    a_dev, b_dev = cupy.asarray(a), cupy.asarray(b)
    c = cupy.full((M, N), np.nan, dtype=np.float32)
    stage = 2 * gemm.shared_memory_size_ab  # two stages of A and B

    def run():
        kernel((N // TILE, M // TILE), gemm.block_dim, (a_dev, b_dev, c, np.int32(N), np.int32(K)), shared_mem=stage)

    run()
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(10):
        run()
    cupy.cuda.Device().synchronize()
    seconds = (time.perf_counter() - start) / 10
    check(f"K-loop GEMM {M}x{N}x{K} ({2 * M * N * K / seconds / 1e12:.0f} TFLOP/s)", c.get(),
          a.astype(np.float64) @ b.astype(np.float64), 1e-3)


if __name__ == "__main__":
    main()
