"""GEMM + bias + ReLU in one kernel: relu(A @ B + bias) with the bias (one value per
column, broadcast over rows as in NumPy) added on chip before the store."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size


def main() -> None:
    gemm = Size(64, 64, 64) + Precision("float16") + Arrangement("row_major", "row_major", "row_major") \
        + SM(800) + Block()
    if not GPU:
        gemm.compile(arch=900, epilogue="relu", bias="row")  # the kernel of a bias of one row
        return skip_run("GEMM + bias + ReLU")
    import cupy

    rng = np.random.default_rng(0)
    batch = 256
    a = rng.standard_normal((batch, 64, 64)).astype(np.float16)
    b = rng.standard_normal((batch, 64, 64)).astype(np.float16)
    bias = rng.standard_normal(64).astype(np.float16)
    c = cupy.empty((batch, 64, 64), dtype=np.float16)
    gemm.execute(cupy.asarray(a), cupy.asarray(b), c, bias=cupy.asarray(bias), epilogue="relu")
    ref = np.maximum(np.matmul(a.astype(np.float64), b) + bias, 0)
    check(f"GEMM + bias + ReLU ({batch} items)", c.get(), ref, 2e-3)


if __name__ == "__main__":
    main()
