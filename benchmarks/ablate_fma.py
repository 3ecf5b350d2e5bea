"""Ablation of the float FMA path, same run: the thread order of the micro-tiles, and
where the batched kernel keeps C (shared memory or registers) with one or two stages.

    python benchmarks/ablate_fma.py [--gib 1.0]
    python benchmarks/ablate_fma.py --profile "4x4 x256 pairs"   # one block GEMM, for ncu

Variants patch the plan (micro-tile and threads), the rendered context (thread order) or
the planner's choices (blasdx.plan._keeps_c_in_registers and _pipeline_stages). Every
variant is checked against float64 before it is timed.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import bench_gpu
import cupy
import numpy as np

import blasdx
import blasdx.plan as planner
import blasdx.render as render
import blasdx.runtime as runtime
from blasdx import SM, Arrangement, Block, Precision, Size

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


def variant_plan(plan, threads, tile_m, tile_n, group_m):
    return replace(plan, block_dim=(threads, 1, 1), threads=threads, warps=threads // 32,
                   tile_m=tile_m, tile_n=tile_n, tiles_m=plan.m // tile_m, tiles_n=plan.n // tile_n,
                   group_m=group_m, group_n=tile_n)


def with_pairs(pairs):
    original = render._context

    def context(plan, name):
        ctx = original(plan, name)
        ctx["fma_pairs"] = pairs and ctx["fma_pairs"]
        return ctx
    render._context = context
    bench_gpu.forget_kernels()
    return original


def block_tflops(desc, plan, repeats=200):
    m, n, k = desc.size
    source = render.render_device_source(plan, "gemm") + bench_gpu.REPEAT_KERNEL
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
    runtime.execute(plan, a, b, c, 1.0, beta)
    ref = cupy.matmul(a[:64].astype(np.float64), b[:64].astype(np.float64)) + beta * c0.astype(np.float64)
    err = float(cupy.linalg.norm(c[:64] - ref) / cupy.linalg.norm(ref))
    assert err < 1e-5, err
    ms = bench_gpu.time_ms(lambda: runtime.execute(plan, a, b, c, 1.0, beta))
    kernel = runtime.get_kernel(plan)
    regs = cupy.cuda.driver.funcGetAttribute(4, kernel.function.ptr)  # CU_FUNC_ATTRIBUTE_NUM_REGS
    per_sm = kernel.resident_blocks // cupy.cuda.Device().attributes["MultiProcessorCount"]
    return per_item * batch / ms / 1e6, f"{regs} regs, {per_sm} blocks/SM"


def profile(label):
    """The 64^3 row-major block GEMM of one variant of ORDERS, 50 repeats (the launch after
    the first, which checks the result, is the one to profile)."""
    threads, tile_m, tile_n, group_m, pairs = next(v[1:] for v in ORDERS if v[0] == label)
    base = describe((64, 64, 64), ("row_major",) * 3)
    desc = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
    original = with_pairs(pairs)
    try:
        print(label, f"{block_tflops(desc, variant_plan(desc.plan, threads, tile_m, tile_n, group_m), 50):.1f} TFLOP/s")
    finally:
        render._context = original


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
            original = with_pairs(pairs)
            try:
                tflops = block_tflops(block_desc, variant_plan(block_desc.plan, threads, tile_m, tile_n, group_m))
                gbs, info = batched(variant_plan(base.plan, threads, tile_m, tile_n, group_m), args.gib)
            finally:
                render._context = original
            print(f"  {''.join(x[0] for x in arrangement)} {label:26} block {tflops:5.1f} TFLOP/s, "
                  f"batched {gbs:5.0f} GB/s ({gbs / copy:4.0%}), {info}", flush=True)
    print("where the batched kernel keeps C:")
    keeps, stages = planner._keeps_c_in_registers, planner._pipeline_stages
    for size in ((32, 32, 32), (64, 64, 64)):
        for label, in_registers, count in PLACEMENTS:
            if in_registers is not None:
                planner._keeps_c_in_registers = lambda *_, r=in_registers: r
            if count is not None:
                planner._pipeline_stages = lambda *_, n=count: n
            bench_gpu.forget_kernels()
            try:
                plan = describe(size, ("row_major",) * 3).plan
                gbs, info = batched(plan, args.gib)
                gbs0, _ = batched(plan, args.gib, beta=0.0)
            finally:
                planner._keeps_c_in_registers, planner._pipeline_stages = keeps, stages
            print(f"  {size[0]}^3 {label:36} {gbs:5.0f} GB/s ({gbs / copy:4.0%}), beta = 0: {gbs0 / copy:4.0%} "
                  f"of copy; {info}", flush=True)
    bench_gpu.forget_kernels()


if __name__ == "__main__":
    main()
