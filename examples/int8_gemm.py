"""int8 x int8 -> int32 on the tensor cores (mma.sync m16n8k32), exact against NumPy."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size


def main() -> None:
    gemm = Size(64, 64, 128) + Precision("int8", "int8", "int32") \
        + Arrangement("row_major", "col_major", "row_major") + SM(800) + Block()
    print(gemm.explain().splitlines()[2])
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("int8 GEMM")
    import cupy

    rng = np.random.default_rng(0)
    batch = 100
    a = rng.integers(-128, 128, (batch, 64, 128), dtype=np.int8)
    b = rng.integers(-128, 128, (batch, 128, 64), dtype=np.int8)
    c = rng.integers(-1000, 1000, (batch, 64, 64), dtype=np.int32)
    b_dev = cupy.ascontiguousarray(cupy.asarray(b).transpose(0, 2, 1)).transpose(0, 2, 1)  # col-major B
    c_dev = cupy.asarray(c)
    gemm.execute(cupy.asarray(a), b_dev, c_dev, alpha=2, beta=-1)
    ref = 2 * np.matmul(a.astype(np.int64), b.astype(np.int64)) - c
    check("int8 -> int32 GEMM, 100 items", c_dev.get(), ref, 0)


if __name__ == "__main__":
    main()
