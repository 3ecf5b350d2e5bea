"""Load and store transforms (cuBLASDx's a_load_op, b_load_op, c_load_op, c_store_op),
chosen from Python and compiled into the kernel:

    C = c_store(alpha * a_load(A) @ b_load(B) + beta * c_load(C))

Hooks are built-in names, blasdx.scale(s), or a C++ expression of x (of type T: float
for float16 data)."""

from __future__ import annotations

import math

import numpy as np
from _support import GPU, check, skip_run

import blasdx
from blasdx import SM, Arrangement, Block, Precision, Size

CASES = [  # (hooks, NumPy version of the same)
    (dict(prologue="relu"), lambda a, b, c: np.maximum(a, 0) @ np.maximum(b, 0)),
    (dict(a_load=blasdx.scale(0.5), b_load="negate"), lambda a, b, c: (0.5 * a) @ -b),
    (dict(c_load="x * x", epilogue="tanh"), lambda a, b, c: np.tanh(a @ b + c * c)),
    (dict(epilogue="gelu"), lambda a, b, c: (lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))(a @ b + c)),
    (dict(epilogue="fminf(fmaxf(x, T(-1)), T(1))"), lambda a, b, c: np.clip(a @ b + c, -1, 1)),
]


def main() -> None:
    gemm = Size(32, 32, 32) + Precision("float16", "float16", "float32") \
        + Arrangement("row_major", "row_major", "row_major") + SM(800) + Block()
    if not GPU:
        for hooks, _ in CASES:
            gemm.compile(arch=900, **hooks)
        return skip_run(f"{len(CASES)} load/store transforms")
    import cupy

    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 32, 32)).astype(np.float16)
    b = rng.standard_normal((8, 32, 32)).astype(np.float16)
    c = rng.standard_normal((8, 32, 32)).astype(np.float32)
    for hooks, reference in CASES:
        c_dev = cupy.asarray(c)
        beta = 1 if "c_load" in hooks or "epilogue" in hooks else 0
        gemm.execute(cupy.asarray(a), cupy.asarray(b), c_dev, alpha=1, beta=beta, **hooks)
        ref = reference(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64) * beta)
        check(f"hooks {hooks}", c_dev.get(), ref, 2e-3)


if __name__ == "__main__":
    main()
