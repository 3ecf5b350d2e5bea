"""A whole GEMM in a Numba kernel: C (M x N) = alpha A (M x K) @ B (K x N) + beta C, float16 in, float32 out,
one tile of C per block, a K loop over tiles of A and B, the edge tiles of a problem the tile does not divide.

blasdx.numba.device_api(GEMM) gives the block GEMM's device API as Numba functions (load_a, multiply, store, ...),
compiled by blasdx to LTO-IR and inlined into the kernel when Numba links it; the accumulator stays in registers."""

from __future__ import annotations

import math

import numpy as np
from _support import GPU, check

from blasdx import SM, Arrangement, Block, Precision, Size, UnsupportedError

M, N, K = 500, 300, 1000  # not multiples of the tile: the last tiles are partial


def descriptor(sm: int):
    return (Size(64, 64, 64) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(sm) + Block())


def main() -> None:
    try:
        from numba import cuda

        import blasdx.numba
    except (ImportError, UnsupportedError) as exc:
        return print(f"numba k-loop gemm: needs numba-cuda (pip install 'blasdx[numba-cu13]'), not installed here, "
                     f"so not run ({exc})")
    sm = 900 if GPU and cuda.get_current_device().compute_capability >= (9, 0) else 800
    g = blasdx.numba.device_api(descriptor(sm), arch=None if GPU else sm)
    if not GPU:
        return print("numba k-loop gemm: compiled; no GPU here, so not run")

    @cuda.jit
    def gemm_kernel(a, b, c, m, n, k, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)  # A at g.a_offset, B at g.b_offset
        row0 = cuda.blockIdx.x * g.m
        col0 = cuda.blockIdx.y * g.n
        rows = min(g.m, m - row0)
        cols = min(g.n, n - col0)
        acc = g.make_accumulator()
        for k0 in range(0, k, g.k):
            depth = min(g.k, k - k0)
            g.load_a_partial(a, k, row0, k0, smem, rows, depth)  # A's tile at (row0, k0): rows x depth of it
            g.load_b_partial(b, k, k0, col0, smem, depth, cols)  # column-major B: leading dimension k
            g.copy_wait()
            g.multiply(smem, acc)
            cuda.syncthreads()  # every thread is done with A and B before the next step loads them
        g.store_partial(acc, c[row0 * n + col0:], n, rows, cols, alpha, beta)

    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    da, db = cuda.to_device(a.ravel()), cuda.to_device(np.asfortranarray(b).ravel(order="F"))
    dc = cuda.to_device(c.ravel())
    grid = (math.ceil(M / g.m), math.ceil(N / g.n))
    gemm_kernel[grid, g.block_dim, 0, g.shared_memory_size_ab](da, db, dc, M, N, K, 2.0, 0.5)
    ref = 2.0 * a.astype(np.float64) @ b.astype(np.float64) + 0.5 * c
    check("numba k-loop gemm", dc.copy_to_host().reshape(M, N), ref, 1e-3)


if __name__ == "__main__":
    main()
