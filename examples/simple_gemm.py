"""A simple fp32 GEMM (8, 16, 32) with BlockDim(256), checked against NumPy.

Without a GPU it still validates, explains and compiles the kernel, and says so.
"""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size


def main() -> None:
    gemm = Size(8, 16, 32) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") \
        + SM(800) + Block() + BlockDim(256)
    print(gemm.explain())
    compiled = gemm.compile(arch=800)
    print(f"compiled {compiled.kernel_name} ({len(compiled.cubin)} bytes)")
    if not GPU:
        return skip_run("simple fp32 GEMM")
    import cupy

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 32), dtype=np.float32), rng.standard_normal((32, 16), dtype=np.float32)
    c = cupy.zeros((8, 16), dtype=np.float32)
    gemm.execute(cupy.asarray(a), cupy.asarray(b), c)
    check("simple fp32 GEMM", c.get(), a.astype(np.float64) @ b, 1e-5)


if __name__ == "__main__":
    main()
