"""Complex fp16 GEMM: (real, imag) float16 pairs in a trailing dimension of 2, complex
alpha and beta, computed with FMA in float32 and stored as complex fp16."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Block, Precision, Size, Type


def main() -> None:
    m, n, k = 32, 16, 32
    gemm = Size(m, n, k) + Precision("float16") + Type("complex") \
        + Arrangement("row_major", "row_major", "row_major") + SM(800) + Block()
    print(gemm.explain().splitlines()[2])
    if not GPU:
        gemm.compile(arch=900)
        return skip_run("complex fp16 GEMM")
    import cupy

    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(shape + (2,)).astype(np.float16) for shape in ((m, k), (k, n), (m, n)))
    c_dev = cupy.asarray(c)
    alpha, beta = 1 - 0.5j, 0.25j
    gemm.execute(cupy.asarray(a), cupy.asarray(b), c_dev, alpha=alpha, beta=beta)
    pairs = lambda x: x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)  # noqa: E731
    ref = alpha * pairs(a) @ pairs(b) + beta * pairs(c)
    check("complex fp16 GEMM", pairs(c_dev.get()), ref, 2e-3)


if __name__ == "__main__":
    main()
