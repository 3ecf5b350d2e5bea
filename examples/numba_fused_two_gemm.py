"""Two GEMMs fused in one Numba kernel, a SwiGLU layer: H = silu(X @ Wg) * (X @ Wu), each tile of X loaded
once for both products, the two accumulators combined element by element in Python (g.row(i), g.col(i)).

The two products are the same block GEMM (one device_api), each with an accumulator of its own."""

from __future__ import annotations

import math

import numpy as np
from _support import GPU, check

from blasdx import SM, Arrangement, Block, Precision, Size, UnsupportedError

TOKENS, HIDDEN, FFN = 256, 512, 384  # multiples of the 64 x 64 x 64 tile


def main() -> None:
    try:
        from numba import cuda

        import blasdx.numba
    except (ImportError, UnsupportedError) as exc:
        return print(f"numba fused two gemm: needs numba-cuda (pip install 'blasdx[numba-cu13]'), not installed here, "
                     f"so not run ({exc})")
    sm = 900 if GPU and cuda.get_current_device().compute_capability >= (9, 0) else 800
    gemm = (Size(64, 64, 64) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(sm) + Block())
    g = blasdx.numba.device_api(gemm, arch=None if GPU else sm)
    if not GPU:
        return print("numba fused two gemm: compiled; no GPU here, so not run")

    @cuda.jit
    def swiglu(x, wg, wu, h, n, k):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        row0 = cuda.blockIdx.x * g.m
        col0 = cuda.blockIdx.y * g.n
        gate = g.make_accumulator()
        up = g.make_accumulator()
        for k0 in range(0, k, g.k):
            g.load_a(x, k, row0, k0, smem)
            g.load_b(wg, k, k0, col0, smem)
            g.copy_wait()
            g.multiply(smem, gate)
            cuda.syncthreads()
            g.load_b(wu, k, k0, col0, smem)  # A stays: only B's region is loaded again
            g.copy_wait()
            g.multiply(smem, up)
            cuda.syncthreads()
        for i in range(g.accumulator_size):
            if g.in_bounds(i):
                z = gate[i]
                h[(row0 + g.row(i)) * n + col0 + g.col(i)] = z / (1.0 + math.exp(-z)) * up[i]

    rng = np.random.default_rng(1)
    x = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float16)
    wg = (rng.standard_normal((HIDDEN, FFN)) / 16).astype(np.float16)
    wu = (rng.standard_normal((HIDDEN, FFN)) / 16).astype(np.float16)
    column_major = lambda w: cuda.to_device(np.asfortranarray(w).ravel(order="F"))  # noqa: E731
    h = cuda.device_array(TOKENS * FFN, dtype=np.float32)
    grid = (TOKENS // g.m, FFN // g.n)
    swiglu[grid, g.block_dim, 0, g.shared_memory_size_ab](cuda.to_device(x.ravel()), column_major(wg),
                                                           column_major(wu), h, FFN, HIDDEN)
    z = x.astype(np.float64) @ wg.astype(np.float64)
    ref = z / (1 + np.exp(-z)) * (x.astype(np.float64) @ wu.astype(np.float64))
    check("numba fused two gemm (swiglu)", h.copy_to_host().reshape(TOKENS, FFN), ref, 1e-3)


if __name__ == "__main__":
    main()
