"""A GEMM of any size from one descriptor: Grid() in place of Block().

1. From Python: gelu(A @ B + bias) on a 4000 x 3000 x 1000 float16 problem in one kernel (the
   bias and the GELU applied to the accumulators in registers), checked against NumPy.
2. In your own kernel: the same descriptor's device_source() gives each block's pieces
   (block_tile_origin, mainloop, store_block_tile); this kernel fuses more than execute()
   can: it never writes C, only the column sums of relu(A @ B), added up across the tiles
   of each column with atomics."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Grid, Precision, Size

M, N, K = 4000, 3000, 1000

KERNEL = r'''
extern "C" __global__ void __launch_bounds__(g::threads)
relu_column_sums(const g::a_t* a, const g::b_t* b, float* sums) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int t = blockIdx.x; t < g::block_tiles; t += gridDim.x) {  // this block's tiles of C
    int row0, col0;
    g::block_tile_origin(t, row0, col0);
    g::accumulator acc = g::make_accumulator();
    g::mainloop(a, b, row0, col0, smem, acc);  // acc = A(row0.., :) @ B(:, col0..): the pipelined K loop
    for (int i = 0; i < g::accumulator::size; ++i) {
      const int r = row0 + acc.row(i), col = col0 + acc.col(i);
      if (acc.in_bounds(i) && r < g::problem_m && col < g::problem_n && acc[i] > 0.0f) atomicAdd(sums + col, acc[i]);
    }
  }
}
'''


def descriptor():
    return (Size(M, N, K) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid())


def main() -> None:
    gemm = descriptor()
    print(gemm.explain().splitlines()[2])  # the tiles
    fused = gemm.replace(Precision("float16"))  # float16 C for gelu(A @ B + bias)
    if not GPU:
        fused.compile(arch=900, epilogue="gelu", bias="row")  # the kernel of a bias of one row
        blasdx.compile_kernel(gemm.device_source("g") + KERNEL, "relu_column_sums", sm=target_sm())
        return skip_run("grid-level GEMM")
    import cupy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float16)
    a_dev, bias_dev = cupy.asarray(a), cupy.asarray(bias)
    b_dev = cupy.asfortranarray(cupy.asarray(b))  # column-major B, as the Arrangement says
    product = a.astype(np.float64) @ b.astype(np.float64)

    c = cupy.full((M, N), np.nan, dtype=np.float16)
    fused.execute(a_dev, b_dev, c, bias=bias_dev, epilogue="gelu")
    x = product + bias
    from math import erf

    check("gelu(A @ B + bias), one kernel", c.get(), 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2))), 2e-3)

    kernel = blasdx.compile_kernel(gemm.device_source("g") + KERNEL, "relu_column_sums", sm=target_sm())
    sums = cupy.zeros(N, dtype=np.float32)
    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"]
    kernel((blocks,), gemm.block_dim, (a_dev, b_dev, sums), shared_mem=gemm.shared_memory_size)
    check("column sums of relu(A @ B), C never written", sums.get(), np.maximum(product, 0).sum(axis=0), 1e-4)


if __name__ == "__main__":
    main()
