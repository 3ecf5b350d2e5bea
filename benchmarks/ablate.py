"""The batched kernel's planner choices against forced alternatives, in one process, each fixed with
blasdx.PlanOverrides or BlockDim (the planner is never patched) and checked against float64 before it
is timed; GB/s of execute(), the share of the copy bandwidth, registers and resident blocks.

    python benchmarks/ablate.py [c-cases] [c-placement] [fma] [registers] [--gib 1.0] [--blocks 20 24]

c-cases: C staged or in registers, over bench_gpu.py's cases;
c-placement: 16-bit C staged or in registers over shapes and thread counts; fma: the float32 FMA
micro-tiles and thread orders (block GEMM alone and batched), and where the batched kernel keeps C;
registers: __launch_bounds__ caps (the blocks shared memory allows, and --blocks).
"""

from __future__ import annotations

import argparse

import bench_gpu
import cupy
import numpy as np
from ab import report

import blasdx
import blasdx.pipeline as pipeline
import blasdx.plan as planner
from blasdx import SM, Arrangement, Block, BlockDim, PlanOverrides, Precision, Size

ROW_MAJOR = ("row_major",) * 3
TOLERANCE = {"float16": 5e-3, "float32": 1e-5, "float64": 1e-12}  # by A's precision, or C's where narrower
C_VARIANTS = {
    "planned": None,
    "C staged": PlanOverrides(c_in_registers=False),
    "C in registers": PlanOverrides(c_in_registers=True),
}
C_PLACEMENT_SHAPES = [  # (m, n, k), threads (None: suggested), all float16
    ((32, 32, 32), None), ((32, 32, 32), 64), ((32, 32, 32), 128), ((16, 16, 16), None), ((64, 32, 32), 32),
    ((32, 32, 64), None), ((32, 32, 128), None), ((64, 64, 64), 32), ((64, 64, 64), None), ((64, 64, 32), 32),
    ((64, 64, 16), 32), ((32, 64, 32), 32),
]
FMA_ORDERS = [  # label, threads, tile_m, tile_n, rows per group, thread pairs
    ("4x4 x256 rows", 256, 4, 4, 4, False),
    ("4x4 x256 pairs", 256, 4, 4, 4, True),
    ("8x4 x128 pairs", 128, 8, 4, 8, True),
    ("8x4 x128 pairs, 2 groups", 128, 8, 4, 4, True),
]
FMA_PLACEMENTS = {
    "planned": PlanOverrides(),
    "C staged": PlanOverrides(c_in_registers=False),
    "C in registers": PlanOverrides(c_in_registers=True),
}


def describe(size, precision: str, arrangement=ROW_MAJOR, threads: int | None = None):
    desc = Size(*size) + Precision(precision) + Arrangement(*arrangement) + SM(900) + Block()
    return desc + BlockDim(threads) if threads else desc


def operand(batch: int, rows: int, cols: int, layout: str, dtype):
    """A random (batch, rows, cols) array stored in ``layout``."""
    if layout == "row_major":
        return cupy.random.standard_normal((batch, rows, cols), dtype=np.float32).astype(dtype)
    return cupy.random.standard_normal((batch, cols, rows), dtype=np.float32).astype(dtype).transpose(0, 2, 1)


def batched(desc, overrides: PlanOverrides | None, gib: float, beta: float = 0.5) -> tuple[float, str]:
    """GB/s of execute() of ``desc`` planned with ``overrides`` on ``gib`` GiB, and its kernel's
    registers, local memory and resident blocks an SM."""
    plan = pipeline.plan(desc, overrides)
    (m, n, k), arrangement = desc.size, desc.arrangement
    a_t, b_t, c_t = (np.dtype(getattr(desc.precision, x)) for x in "abc")
    per_item = m * k * a_t.itemsize + k * n * b_t.itemsize + (2 if beta else 1) * m * n * c_t.itemsize
    batch = int(gib * 2**30) // per_item
    a, b = operand(batch, m, k, arrangement.a, a_t), operand(batch, k, n, arrangement.b, b_t)
    c = operand(batch, m, n, arrangement.c, c_t)
    c0 = c[:64].astype(np.float64)
    pipeline.execute(plan, a, b, c, 1.0, beta)
    ref = cupy.matmul(a[:64].astype(np.float64), b[:64].astype(np.float64)) + beta * c0
    err = float(cupy.linalg.norm(c[:64].astype(np.float64) - ref) / cupy.linalg.norm(ref))
    assert err < TOLERANCE[min(a_t, c_t, key=lambda t: t.itemsize).name], (desc, overrides, err)
    ms = bench_gpu.time_ms(lambda: pipeline.execute(plan, a, b, c, 1.0, beta))
    function = pipeline.kernel(plan).function.ptr
    registers, local = (cupy.cuda.driver.funcGetAttribute(attribute, function) for attribute in (4, 3))  # NUM_REGS, LOCAL_SIZE_BYTES
    per_sm = pipeline.kernel(plan).resident_blocks // cupy.cuda.Device().attributes["MultiProcessorCount"]
    return per_item * batch / ms / 1e6, f"{registers} regs, {local} B local, {per_sm} blocks/SM"


def block_tflops(desc, plan, repeats: int = 200) -> float:
    """TFLOP/s of ``plan``'s float32 block GEMM alone (bench_gpu.py's repeat kernel)."""
    m, n, k = desc.size
    kernel = blasdx.compile_kernel(pipeline.device_source(plan, "gemm") + bench_gpu.REPEAT_KERNEL, "repeat_gemm")
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
    assert err < 1e-5, (desc, err)
    dev = cupy.cuda.Device()
    per_sm = max(1, min(8, dev.attributes["MaxSharedMemoryPerMultiprocessor"] // (plan.shared_memory_size + 1024),
                        2048 // plan.threads))
    grid = dev.attributes["MultiProcessorCount"] * per_sm
    ms = bench_gpu.time_ms(lambda: kernel(grid, block, (a, b, c, np.int32(repeats)),
                                          shared_mem=plan.shared_memory_size), repeats=10)
    return 2 * m * n * k * repeats * grid / ms / 1e9


def c_cases(args, copy: float) -> list:
    rows = []
    for size, prec in bench_gpu.CASES:
        desc = Size(*size) + Precision(*prec) + Arrangement(*ROW_MAJOR) + SM(900) + Block()
        label = f"{'x'.join(map(str, size))} {prec[0]}->{prec[2]}"
        cells = []
        for variant, overrides in C_VARIANTS.items():
            gbs, info = batched(desc, overrides, args.gib)
            rows.append((f"c-cases {label} {variant}", gbs, "GB/s"))
            cells.append(f"{variant} {gbs / copy:.0%} ({info})")
        print(f"c-cases {label:25s} " + "; ".join(cells), flush=True)
    return rows


def c_placement(args, copy: float) -> list:
    rows = []
    for size, threads in C_PLACEMENT_SHAPES:
        desc = describe(size, "float16", threads=threads)
        label = f"{'x'.join(map(str, size))} f16 {desc.plan.threads} threads"
        cells = []
        for variant, in_registers in (("staged", False), ("registers", True)):
            gbs, info = batched(desc, PlanOverrides(c_in_registers=in_registers), args.gib)
            rows.append((f"c-placement {label} {variant}", gbs, "GB/s"))
            cells.append(f"{variant} {gbs / copy:.0%} ({info})")
        print(f"c-placement {label:28s} " + "; ".join(cells), flush=True)
    return rows


def fma(args, copy: float) -> list:
    rows = []
    for arrangement in (ROW_MAJOR, ("col_major", "col_major", "row_major")):
        base = describe((64, 64, 64), "float32", arrangement)
        padded = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
        letters = "".join(x[0] for x in arrangement)
        for variant, threads, tile_m, tile_n, group_m, pairs in FMA_ORDERS:
            overrides = PlanOverrides(fma_micro_tile=(tile_m, tile_n, group_m, tile_n), fma_thread_pairs=pairs)
            tflops = block_tflops(padded, pipeline.plan(padded.replace(BlockDim(threads)), overrides))
            gbs, info = batched(base.replace(BlockDim(threads)), overrides, args.gib)
            rows += [(f"fma 64^3 {letters} {variant} block", tflops, "TFLOP/s"), (f"fma 64^3 {letters} {variant}", gbs, "GB/s")]
            print(f"fma 64^3 {letters} {variant:26s} block {tflops:5.1f} TFLOP/s, batched {gbs / copy:.0%} ({info})",
                  flush=True)
    for size in ((32, 32, 32), (64, 64, 64)):
        desc = describe(size, "float32")
        for variant, overrides in FMA_PLACEMENTS.items():
            gbs, info = batched(desc, overrides, args.gib)
            gbs0, _ = batched(desc, overrides, args.gib, beta=0.0)
            rows += [(f"fma {size[0]}^3 {variant}", gbs, "GB/s"), (f"fma {size[0]}^3 {variant} beta 0", gbs0, "GB/s")]
            print(f"fma {size[0]}^3 {variant:36s} {gbs / copy:.0%}, beta 0 {gbs0 / copy:.0%} ({info})", flush=True)
    return rows


def registers(args, copy: float) -> list:
    rows = []
    per_sm = cupy.cuda.Device().attributes["MaxSharedMemoryPerMultiprocessor"]
    for size, prec in bench_gpu.CASES:
        desc = Size(*size) + Precision(*prec) + Arrangement(*ROW_MAJOR) + SM(900) + Block()
        kernel = planner.kernel_plan(desc.plan)
        fit = min(32, 2048 // kernel.threads, per_sm // (kernel.kernel_shared_memory_size + 1024))  # shared memory's
        label = f"{'x'.join(map(str, size))} {prec[0]}->{prec[2]}"
        cells = []
        for blocks in dict.fromkeys([None, fit, *args.blocks]):
            try:
                gbs, info = batched(desc, PlanOverrides(min_blocks_per_sm=blocks), args.gib)
            except blasdx.CompileError:  # a cap below what an instruction needs
                cells.append(f"{blocks}: ptxas refused the cap")
                continue
            rows.append((f"registers {label} {blocks or 'planned'}", gbs, "GB/s"))
            cells.append(f"{blocks or 'planned'}: {gbs / copy:.0%} ({info})")
        print(f"registers {label:26s} " + "; ".join(cells), flush=True)
    return rows


STUDIES = {"c-cases": c_cases, "c-placement": c_placement, "fma": fma, "registers": registers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="*", metavar="STUDY", help=f"of {', '.join(STUDIES)} (default: all)")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--blocks", type=int, nargs="*", default=[], help="registers: more blocks an SM to ask for")
    args = parser.parse_args()
    unknown = [s for s in args.studies if s not in STUDIES]
    if unknown:
        parser.error(f"no study {', '.join(unknown)}; the studies are {', '.join(STUDIES)}")
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    print(f"copy {copy:.0f} GB/s; batched execute(), beta 0.5 unless said, share of copy")
    rows = [("copy", copy, "GB/s")]
    for study in args.studies or STUDIES:
        rows += STUDIES[study](args, copy)
    report(rows)


if __name__ == "__main__":
    main()
