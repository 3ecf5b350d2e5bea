"""A whole problem in a persistent Numba kernel: C = relu(A @ B + bias), A (1000 x 700) and B (700 x 1500) bfloat16,
C float32, from a Grid() descriptor: each block walks tiles of C, the pipelined K loop (mainloop) into an
accumulator in registers, then the epilogue (store_block_tile: the bias and the relu fused, edges left unwritten).

blasdx.numba.device_api(GRID) gives the tile's block GEMM and the Grid() tile loop as Numba functions on the whole
matrices; the descriptor fixes their sizes and layouts (row-major A, column-major B, row-major C)."""

from __future__ import annotations

import numpy as np
from _support import GPU, check

from blasdx import SM, Arrangement, Grid, Precision, Size, UnsupportedError

M, N, K = 1000, 1500, 700  # not multiples of the tile: the last tiles are partial


def descriptor(sm: int):
    return (Size(M, N, K) + Precision("bfloat16", "bfloat16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(sm) + Grid())


def bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """x rounded toward zero to bfloat16, as the raw uint16 bits Numba passes (blasdx.numba.ARRAY_DTYPES)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def main() -> None:
    try:
        from numba import cuda
        from numba.core import types

        import blasdx.numba
    except (ImportError, UnsupportedError) as exc:
        return print(f"numba grid gemm: needs numba-cuda (pip install 'blasdx[numba-cu13]'), not installed here, "
                     f"so not run ({exc})")
    sm = 900 if GPU and cuda.get_current_device().compute_capability >= (9, 0) else 800
    g = blasdx.numba.device_api(descriptor(sm), arch=None if GPU else sm, epilogue="relu", bias="row")
    print(f"numba grid gemm: {g.block_tiles} tiles of {g.m}x{g.n}, {g.k_tiles} K tiles of {g.k}, "
          f"{g.stages} stages ({g.shared_memory_size} bytes of shared memory)")
    if not GPU:
        return print("numba grid gemm: compiled; no GPU here, so not run")

    def relu_gemm(a, b, c, bias, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)  # g.stages stages of A and B
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):  # this block's tiles of C
            row0, col0 = g.block_tile_origin(t)
            acc = g.make_accumulator()
            g.mainloop(a, b, row0, col0, smem, acc)  # acc = A(row0.., :) @ B(:, col0..)
            g.store_block_tile(acc, c, row0, col0, alpha, beta, bias, 0, 1)  # bias="row": n values, stride 1

    kernel = cuda.jit(relu_gemm)
    kernel.compile((types.uint16[::1], types.uint16[::1], types.float32[::1], types.float32[::1], types.float64,
                    types.float64))
    blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)  # over Numba's 48 KiB

    rng = np.random.default_rng(0)
    a = bfloat16_bits(rng.standard_normal((M, K)))
    bt = bfloat16_bits(rng.standard_normal((N, K)))  # B column-major: its columns are the rows of B^T
    bias = rng.standard_normal(N).astype(np.float32)
    c = cuda.to_device(np.full(M * N, np.nan, np.float32))
    blocks = min(g.block_tiles, cuda.get_current_device().MULTIPROCESSOR_COUNT)
    kernel[blocks, g.block_dim, 0, g.shared_memory_size](cuda.to_device(a.ravel()), cuda.to_device(bt.ravel()), c,
                                                         cuda.to_device(bias), 1.0, 0.0)
    ref = np.maximum(from_bits(a) @ from_bits(bt).T + bias, 0)
    check("numba grid gemm, relu(A @ B + bias)", c.copy_to_host().reshape(M, N), ref, 1e-3)


if __name__ == "__main__":
    main()
