"""Complex fp8 (e4m3) inputs with a complex fp32 result, on the fp8 tensor cores (sm_89+).

CuPy has no float8 dtype, so fp8 data travels as its raw bytes (uint8); complex values
without a CuPy complex dtype are (real, imag) pairs in a trailing dimension of 2.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size, Type


def main() -> None:
    m, n, k = 32, 32, 64
    gemm = Size(m, n, k) + Precision("float8_e4m3", "float8_e4m3", "float32") + Type("complex") \
        + Arrangement("row_major", "col_major", "row_major") + SM(890) + Block()
    print(gemm.explain().splitlines()[2])
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("complex fp8 GEMM")
    import cupy

    rng = np.random.default_rng(0)
    e4m3 = ml_dtypes.float8_e4m3fn
    a = rng.standard_normal((m, k, 2)).astype(e4m3)  # row-major (m, k) pairs
    bt = rng.standard_normal((n, k, 2)).astype(e4m3)  # col-major (k, n): stored as (n, k)
    c = cupy.zeros((m, n), dtype=np.complex64)
    a_dev = cupy.asarray(a.view(np.uint8))
    b_dev = cupy.asarray(bt.view(np.uint8)).transpose(1, 0, 2)
    gemm.execute(a_dev, b_dev, c)
    to_complex = lambda x: x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)  # noqa: E731
    ref = to_complex(a) @ to_complex(bt).T
    check("complex fp8 -> complex fp32 GEMM", c.get(), ref, 1e-5)


if __name__ == "__main__":
    main()
