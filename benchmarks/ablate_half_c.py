"""Ablation: 16-bit C staged in shared memory or held in registers on the tensor-core path,
over shapes and thread counts, same run (benchmarks/RESULTS.md v13). Each variant is
checked against float64 before it is timed.

    python benchmarks/ablate_half_c.py [--gib 1.0]
"""

from __future__ import annotations

import argparse

import bench_gpu
import cupy
import numpy as np

import blasdx.pipeline
from blasdx import SM, Arrangement, Block, BlockDim, PlanOverrides, Precision, Size

SHAPES = [  # (m, n, k), threads (None: suggested), precision
    ((32, 32, 32), None, "float16"), ((32, 32, 32), 64, "float16"), ((32, 32, 32), 128, "float16"),
    ((16, 16, 16), None, "float16"), ((64, 32, 32), 32, "float16"), ((32, 32, 64), None, "float16"),
    ((32, 32, 128), None, "float16"), ((32, 32, 32), None, "bfloat16"),
    ((64, 64, 64), 32, "float16"), ((64, 64, 64), None, "float16"), ((64, 64, 32), 32, "float16"),
    ((64, 64, 16), 32, "float16"), ((32, 64, 32), 32, "float16"),
]


def measure(size, threads, prec, gib, copy) -> str:
    m, n, k = size
    desc = Size(m, n, k) + Precision(prec) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    if threads:
        desc = desc + BlockDim(threads)
    per_item = 2 * (m * k + k * n + 2 * m * n)
    batch = int(gib * 2**30) // per_item
    a, b, c = (cupy.random.standard_normal(shape, dtype=np.float32).astype(prec)
               for shape in ((batch, m, k), (batch, k, n), (batch, m, n)))
    ref = (cupy.matmul(a[:64].astype(np.float64), b[:64].astype(np.float64)) + 0.5 * c[:64].astype(np.float64))
    cells = []
    for label, in_registers in (("staged", False), ("registers", True)):
        plan = blasdx.pipeline.plan(desc, PlanOverrides(c_in_registers=in_registers))
        out = c.copy()
        blasdx.pipeline.execute(plan, a, b, out, 1.0, 0.5)
        err = float(cupy.linalg.norm(out[:64] - ref) / cupy.linalg.norm(ref))
        assert err < 5e-3, (size, threads, prec, label, err)
        ms = bench_gpu.time_ms(lambda x=out, p=plan: blasdx.pipeline.execute(p, a, b, x, 1.0, 0.5))
        cells.append(f"{label} {per_item * batch / ms / 1e6 / copy:4.0%}")
    return f"{m}x{n}x{k} {prec} {desc.plan.threads:3d} threads, {desc.plan.tiles} warp tile(s): " + ", ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    print(f"copy {copy:.0f} GB/s; batched execute, beta = 0.5, share of copy")
    for size, threads, prec in SHAPES:
        print(measure(size, threads, prec, args.gib, copy))


if __name__ == "__main__":
    main()
