"""Ablation of the float FMA path, same run: the thread order of the micro-tiles, and
where the batched kernel keeps C (shared memory or registers) with one or two stages.

    python benchmarks/ablate_fma.py [--gib 1.0]
    python benchmarks/ablate_fma.py --profile "4x4 x256 pairs"   # one block GEMM, for ncu

Variants fix the planner's choices with blasdx.PlanOverrides (micro-tile, thread order,
C placement, stages) and BlockDim (threads). Every variant is checked against float64
before it is timed.
"""

from __future__ import annotations

import argparse

import bench_gpu
import cupy
import numpy as np

import blasdx
import blasdx.pipeline as pipeline
from blasdx import SM, Arrangement, Block, BlockDim, PlanOverrides, Precision, Size

ORDERS = [  # label, threads, tile_m, tile_n, rows per group, thread pairs
    ("4x4 x256 rows", 256, 4, 4, 4, False),
    ("4x4 x256 pairs", 256, 4, 4, 4, True),
    ("8x4 x128 pairs", 128, 8, 4, 8, True),
    ("8x4 x128 pairs, 2 groups", 128, 8, 4, 4, True),
]
PLACEMENTS = [  # label, C in registers (None: the planner's choice), stages (None: planned)
    ("planner's choice", None, None),
    ("C in shared memory, planned stages", False, None),
    ("C in registers, one stage", True, 1),
    ("C in registers, two stages", True, 2),
]


def variant_plan(desc, threads, tile_m, tile_n, group_m, pairs):
    """The plan of ``desc`` with this many threads, micro-tile, row groups and thread order."""
    overrides = PlanOverrides(fma_micro_tile=(tile_m, tile_n, group_m, tile_n), fma_thread_pairs=pairs)
    return pipeline.plan(desc.replace(BlockDim(threads)), overrides)


def block_tflops(desc, plan, repeats=200):
    m, n, k = desc.size
    source = pipeline.device_source(plan, "gemm") + bench_gpu.REPEAT_KERNEL
    kernel = blasdx.compile_kernel(source, "repeat_gemm")
    lda, ldb, ldc = desc.leading_dimension
    rows_a = m if desc.arrangement.a == "row_major" else k
    rows_b = k if desc.arrangement.b == "row_major" else n
    a = cupy.random.standard_normal(rows_a * lda, dtype=np.float32)
    b = cupy.random.standard_normal(rows_b * ldb, dtype=np.float32)
    c = cupy.zeros(m * ldc, dtype=np.float32)
    block = (plan.threads, 1, 1)
    kernel(1, block, (a, b, c, np.int32(1)), shared_mem=plan.shared_memory_size)
    a_h = a.get().astype(np.float64).reshape(rows_a, lda)
    b_h = b.get().astype(np.float64).reshape(rows_b, ldb)
    a_h = a_h[:, :k] if desc.arrangement.a == "row_major" else a_h[:, :m].T
    b_h = b_h[:, :n] if desc.arrangement.b == "row_major" else b_h[:, :k].T
    err = np.linalg.norm(c.get().reshape(m, ldc)[:, :n] - a_h @ b_h) / np.linalg.norm(a_h @ b_h)
    assert err < 1e-5, err
    dev = cupy.cuda.Device()
    per_sm = max(1, min(8, dev.attributes["MaxSharedMemoryPerMultiprocessor"] // (plan.shared_memory_size + 1024),
                        2048 // plan.threads))
    grid = dev.attributes["MultiProcessorCount"] * per_sm
    ms = bench_gpu.time_ms(lambda: kernel(grid, block, (a, b, c, np.int32(repeats)),
                                          shared_mem=plan.shared_memory_size), repeats=10)
    return 2 * m * n * k * repeats * grid / ms / 1e9


def batched(plan, gib, beta=0.5):
    """GB/s of execute() with this plan, and its kernel's registers and blocks per SM."""
    m, n, k = plan.m, plan.n, plan.k
    per_item = 4 * (m * k + k * n + (2 if beta else 1) * m * n)
    batch = int(gib * 2**30) // per_item
    a = cupy.random.standard_normal((batch, m, k), dtype=np.float32)
    b = cupy.random.standard_normal((batch, k, n), dtype=np.float32)
    if plan.a.layout == "col_major":
        a = cupy.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    if plan.b.layout == "col_major":
        b = cupy.ascontiguousarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    c = cupy.random.standard_normal((batch, m, n), dtype=np.float32)
    c0 = c[:64].copy()
    pipeline.execute(plan, a, b, c, 1.0, beta)
    ref = cupy.matmul(a[:64].astype(np.float64), b[:64].astype(np.float64)) + beta * c0.astype(np.float64)
    err = float(cupy.linalg.norm(c[:64] - ref) / cupy.linalg.norm(ref))
    assert err < 1e-5, err
    ms = bench_gpu.time_ms(lambda: pipeline.execute(plan, a, b, c, 1.0, beta))
    kernel = pipeline.kernel(plan)
    regs = cupy.cuda.driver.funcGetAttribute(4, kernel.function.ptr)  # CU_FUNC_ATTRIBUTE_NUM_REGS
    per_sm = kernel.resident_blocks // cupy.cuda.Device().attributes["MultiProcessorCount"]
    return per_item * batch / ms / 1e6, f"{regs} regs, {per_sm} blocks/SM"


def profile(label):
    """The 64^3 row-major block GEMM of one variant of ORDERS, 50 repeats (the launch after
    the first, which checks the result, is the one to profile)."""
    threads, tile_m, tile_n, group_m, pairs = next(v[1:] for v in ORDERS if v[0] == label)
    base = describe((64, 64, 64), ("row_major",) * 3)
    desc = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
    print(label, f"{block_tflops(desc, variant_plan(desc, threads, tile_m, tile_n, group_m, pairs), 50):.1f} TFLOP/s")


def describe(size, arrangement):
    return Size(*size) + Precision("float32") + Arrangement(*arrangement) + SM(900) + Block()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--profile", metavar="VARIANT", help="run only this variant's block GEMM (for ncu; "
                        "benchmarks/ncu_fma.sh profiles two)")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile)
        return
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    print(f"copy {copy:.0f} GB/s; float32, beta = 0.5")
    print("thread order and micro-tile (64^3):")
    for arrangement in (("row_major", "row_major", "row_major"), ("col_major", "col_major", "row_major")):
        base = describe((64, 64, 64), arrangement)
        block_desc = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
        for label, threads, tile_m, tile_n, group_m, pairs in ORDERS:
            tflops = block_tflops(block_desc, variant_plan(block_desc, threads, tile_m, tile_n, group_m, pairs))
            gbs, info = batched(variant_plan(base, threads, tile_m, tile_n, group_m, pairs), args.gib)
            print(f"  {''.join(x[0] for x in arrangement)} {label:26} block {tflops:5.1f} TFLOP/s, "
                  f"batched {gbs:5.0f} GB/s ({gbs / copy:4.0%}), {info}", flush=True)
    print("where the batched kernel keeps C:")
    for size in ((32, 32, 32), (64, 64, 64)):
        for label, in_registers, count in PLACEMENTS:
            overrides = PlanOverrides(c_in_registers=in_registers, pipeline_stages=count)
            plan = pipeline.plan(describe(size, ("row_major",) * 3), overrides)
            gbs, info = batched(plan, args.gib)
            gbs0, _ = batched(plan, args.gib, beta=0.0)
            print(f"  {size[0]}^3 {label:36} {gbs:5.0f} GB/s ({gbs / copy:4.0%}), beta = 0: {gbs0 / copy:4.0%} "
                  f"of copy; {info}", flush=True)


if __name__ == "__main__":
    main()
