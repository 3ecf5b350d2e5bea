"""DeepSeek-V3's blockwise-scaled FP8 GEMM in your own kernel: C (M x N, float32) = (A * scale_a) @ (B * scale_b),
A e4m3 with one scale per row and 128 of k, B e4m3 with one scale per 128 x 128 block.

One 128x128 tile of C per block walks K in blocks of 128 with register accumulators: each K block's A and B
tiles load into shared memory and multiply_scaled() adds their products times the block's scales, read by a
functor: A's of the product's row times B's of the block. On SM 900 the scales ride the promotion of wgmma's
partial sums into float32 (each 128 of k is promoted anyway: FP8 wgmma keeps about 14 bits of its sum).

CuPy has no float8 dtype: the FP8 data travels as its raw bytes (uint8)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Block, Precision, Size

TILE, M, N, K = 128, 512, 384, 2048  # multiples of TILE: no edge tiles

KERNEL = r'''
// The scale of the products of row r of this tile and this K block: A's (row0 + r, block) times B's.
struct block_scale {
  const float* a;  // A's scales of this K block: a[row] (column-major (M, K / 128): a block's rows are contiguous)
  float b;         // B's scale of this K block and this tile's columns
  int row0;
  __device__ __forceinline__ float operator()(int r, int /* k0: 0, one K block a call */) const { return a[row0 + r] * b; }
};

extern "C" __global__ void __launch_bounds__(gemm::threads)
blockwise_fp8(const gemm::a_t* a, const gemm::b_t* b, float* c, const float* scale_a, const float* scale_b) {
  extern __shared__ __align__(1024) unsigned char smem[];  // 1024-byte aligned A and B: wgmma reads them
  auto* tile_a = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* tile_b = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  const int row0 = blockIdx.y * gemm::m, col0 = blockIdx.x * gemm::n;
  gemm::accumulator acc = gemm::make_accumulator();
  for (int block = 0; block < K_BLOCKS; ++block) {
    gemm::load_a(a + (long long)row0 * K_TOTAL + block * gemm::k, K_TOTAL, tile_a);  // row-major A
    gemm::load_b(b + (long long)col0 * K_TOTAL + block * gemm::k, K_TOTAL, tile_b);  // column-major B
    gemm::copy_wait();
    const block_scale scale{scale_a + block * M_TOTAL, scale_b[block * N_BLOCKS + blockIdx.x], row0};
    gemm::multiply_scaled(tile_a, tile_b, acc, scale);
    __syncthreads();  // every thread is done with the tiles before they load again
  }
  gemm::store(acc, c + (long long)row0 * N_TOTAL + col0, N_TOTAL, 1.0f, 0.0f);
}
'''


def main() -> None:
    gemm = Size(TILE, TILE, TILE) + Precision("float8_e4m3", "float8_e4m3", "float32") \
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    print(next(line for line in gemm.explain().splitlines() if line.startswith("accumulation:")))
    constants = f"constexpr int K_BLOCKS = {K // TILE}, K_TOTAL = {K}, M_TOTAL = {M}, N_TOTAL = {N}, N_BLOCKS = {N // TILE};\n"
    kernel = blasdx.compile_kernel(gemm.device_source("gemm") + constants + KERNEL, "blockwise_fp8", sm=target_sm())
    if not GPU:
        return skip_run("blockwise-scaled FP8 K loop")
    import cupy

    rng = np.random.default_rng(0)
    e4m3 = ml_dtypes.float8_e4m3fn
    a = rng.standard_normal((M, K)).astype(e4m3)  # row-major (M, K)
    bt = rng.standard_normal((N, K)).astype(e4m3)  # column-major (K, N): stored as (N, K)
    scale_a = 2.0 ** rng.integers(-6, 7, (K // TILE, M))  # (M, K / 128), column-major: stored as (K / 128, M)
    scale_b = 2.0 ** rng.integers(-6, 7, (K // TILE, N // TILE))  # (K / 128, N / 128), row-major
    c = cupy.full((M, N), np.nan, dtype=np.float32)
    kernel((N // TILE, M // TILE), (gemm.max_threads_per_block, 1, 1),
           (cupy.asarray(a.view(np.uint8)), cupy.asarray(bt.view(np.uint8)), c,
            cupy.asarray(scale_a, dtype=np.float32), cupy.asarray(scale_b, dtype=np.float32)),
           shared_mem=gemm.shared_memory_size_ab)
    blocks = np.arange(K) // TILE
    a_scaled = a.astype(np.float64) * scale_a.T[:, blocks]
    b_scaled = bt.astype(np.float64).T * scale_b[blocks][:, np.arange(N) // TILE]
    check(f"blockwise-scaled FP8 K loop ({M}x{N}x{K}, {K // TILE} K blocks a tile)", c.get(), a_scaled @ b_scaled, 2e-4)


if __name__ == "__main__":
    main()
