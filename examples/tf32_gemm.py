"""Mixed precision on the tf32 tensor cores: float32 data multiplied as tfloat32 (10-bit
mantissa), accumulated and scaled in float32: C = 0.5 * A B + 2 C."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size


def main() -> None:
    gemm = Size(64, 32, 64) + Precision("tfloat32", "tfloat32", "float32") \
        + Arrangement("row_major", "row_major", "col_major") + SM(800) + Block()
    print(gemm.explain().splitlines()[2])
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("tf32 GEMM")
    import cupy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 64, 64)).astype(np.float32)
    b = rng.standard_normal((16, 64, 32)).astype(np.float32)
    c = rng.standard_normal((16, 64, 32)).astype(np.float32)
    c_dev = cupy.ascontiguousarray(cupy.asarray(c).transpose(0, 2, 1)).transpose(0, 2, 1)  # col-major C
    gemm.execute(cupy.asarray(a), cupy.asarray(b), c_dev, alpha=0.5, beta=2.0)
    ref = 0.5 * np.matmul(a.astype(np.float64), b) + 2.0 * c
    check("tf32 GEMM (16 items)", c_dev.get(), ref, 5e-3)


if __name__ == "__main__":
    main()
