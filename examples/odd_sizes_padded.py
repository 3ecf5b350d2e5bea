"""Odd sizes (30, 31, 33) with padded leading dimensions: each matrix lives in a larger
buffer (rows padded to a multiple of 8 elements, so that every row starts 16-byte aligned),
and the padding is never written."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, LeadingDimension, Precision, Size


def main() -> None:
    m, n, k = 30, 31, 33
    lda, ldb, ldc = 40, 40, 32  # row-major A (m x k) and C (m x n): ld >= cols; col-major B: ld >= k
    gemm = Size(m, n, k) + Precision("float16", "float16", "float32") + LeadingDimension(lda, ldb, ldc) \
        + Arrangement("row_major", "col_major", "row_major") + SM(800) + Block()
    print(gemm.explain())
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("odd sizes with padded leading dimensions")
    import cupy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    a_buf = cupy.zeros((m, lda), dtype=np.float16)
    b_buf = cupy.zeros((n, ldb), dtype=np.float16)  # col-major B: n columns of ldb
    c_buf = cupy.full((m, ldc), -7.0, dtype=np.float32)
    a_buf[:, :k] = cupy.asarray(a)
    b_buf[:, :k] = cupy.asarray(b.T)
    gemm.execute(a_buf[:, :k], b_buf[:, :k].T, c_buf[:, :n])
    check("odd sizes (30, 31, 33)", c_buf[:, :n].get(), a.astype(np.float64) @ b, 1e-3)
    untouched = bool(cupy.all(c_buf[:, n:] == -7.0))
    print(f"C's padding untouched: {untouched}")
    assert untouched


if __name__ == "__main__":
    main()
