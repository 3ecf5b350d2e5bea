"""The device API's block GEMM in the anchor harness's two kernels (reg: multiply() into register
accumulators; smem: execute() on C in shared memory), 200 calls a block, 16 blocks an SM, each launch
timed three ways (best of 5, median of 5, 50 back to back): single launches this short read far apart.

    python benchmarks/block_sweep.py [--rounds 3] [--only REGEX] [--pattern] [--clocks] [--fence]
        [--anchor [--anchors .anchors]] [--compile-only]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from ab import ANCHORS, anchor_module, report

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, LeadingDimension, Precision, Size

REPEATS = 200  # multiplies a launch
BLOCKS_PER_SM = 16
PRECISIONS = {"f16": "float16", "bf16": "bfloat16", "tf32": "tfloat32", "f32": "float32", "f64": "float64",
              "i8": "int8", "i32": "int32"}
LAYOUTS = {"r": "row_major", "c": "col_major"}
CASES = [  # size, A/B precision, C precision, arrangement: the anchor harness's 8, then 13 others
    "32x32x32 f16 f16 rrr", "64x64x64 f16 f16 rrr", "128x128x64 f16 f16 rrr", "64x64x64 f16 f32 rrr",
    "32x32x32 f32 f32 rrr", "64x64x64 f32 f32 rrr", "32x32x32 f64 f64 rrr", "16x16x16 f64 f64 rrr",
    "16x16x16 f16 f16 rrr", "32x32x32 f16 f32 rcr", "64x32x64 f16 f32 rrr", "48x48x48 f16 f16 ccc",
    "24x40x56 f16 f32 rrr", "64x64x64 bf16 f32 crc", "32x64x32 tf32 f32 rrr", "64x64x64 i8 i32 rcr",
    "32x32x32 f32 f32 ccc", "20x36x28 f32 f32 rrr", "32x32x64 f64 f64 rcr", "24x24x24 f64 f64 crr",
    "128x64x32 f16 f32 rcr",
    # the harness's small tiles on more warps (cuBLASDx suggests 128 threads for 32^3 float16)
    "32x32x32 f16 f16 rrr t128", "64x64x64 f16 f16 rrr t256", "16x16x16 f64 f64 rrr t64",
]

# The anchor harness's kernels (its side_by_side.py), with the same names.
KERNELS = {
    "reg": ("repeat_bx_reg", r"""
extern "C" __global__ void repeat_bx_reg(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int reps) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::load_a(a, sa); gemm::load_b(b, sb); gemm::copy_wait();
  auto acc = gemm::make_accumulator();
  for (int r = 0; r < reps; ++r) gemm::multiply(sa, sb, acc);
  gemm::store(acc, c, gemm::ldc, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""),
    "smem": ("repeat_bx", r"""
extern "C" __global__ void repeat_bx(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int reps) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  auto* sc = reinterpret_cast<gemm::c_t*>(smem + gemm::c_offset);
  gemm::load_a(a, sa); gemm::load_b(b, sb); gemm::load_c(c, sc); gemm::copy_wait();
  for (int r = 0; r < reps; ++r) gemm::execute(gemm::scalar_t(1), sa, sb, gemm::scalar_t(1), sc);
  if (blockIdx.x == 0) gemm::store_c(sc, c);
}
"""),
}


def descriptor(case: str):
    """The descriptor of a case: "MxNxK A C arrangement", then "tTHREADS" for a BlockDim."""
    size, pa, pc, arrangement, *threads = case.split()
    m, n, k = map(int, size.split("x"))
    desc = (Size(m, n, k) + Precision(PRECISIONS[pa], PRECISIONS[pa], PRECISIONS[pc])
            + Arrangement(*(LAYOUTS[x] for x in arrangement)) + SM(900) + Block())
    if threads:
        desc = desc + BlockDim(int(threads[0][1:]))
    return desc + LeadingDimension(*desc.suggested_leading_dimension)


FENCED = {"gemm::multiply(sa, sb, acc);": "{ gemm::multiply(sa, sb, acc); __syncwarp(); }",
          "gemm::execute(gemm::scalar_t(1), sa, sb, gemm::scalar_t(1), sc);":
              "{ gemm::execute(gemm::scalar_t(1), sa, sb, gemm::scalar_t(1), sc); __syncwarp(); }",
          "B2().execute(ta, tb, acc);": "{ B2().execute(ta, tb, acc); __syncwarp(); }"}  # cuBLASDx v3's repeat


def fenced(source: str) -> str:
    """``source`` with a ``__syncwarp()`` after each repeated multiply (see --fence)."""
    for plain, with_fence in FENCED.items():
        source = source.replace(plain, with_fence)
    return source


def render(desc, kind: str, fence: bool = False) -> str:
    """The harness kernel ``kind`` around ``desc``'s device source, ``fenced`` with ``fence``."""
    kernel = KERNELS[kind][1]
    return desc.device_source("gemm") + (fenced(kernel) if fence else kernel)


def operand(cupy, precision: str, count: int, pattern: bool):
    """``count`` values of ``precision``: random in [-1, 1), or with ``pattern`` the harness's
    cuBLASDx kernels' 0.01 (i % 7), whose few toggling bits draw less power (bfloat16 as its bits)."""
    x = (0.01 * (cupy.arange(count) % 7)).astype(cupy.float32) if pattern else cupy.random.uniform(-1, 1, count, dtype=cupy.float32)
    if precision == "bf16":
        return (x.view(cupy.uint32) >> 16).astype(cupy.uint16)
    if precision in ("i8", "i32"):
        return (x * 8).astype(cupy.int8 if precision == "i8" else cupy.int32)
    return x.astype({"f16": cupy.float16, "f32": cupy.float32, "tf32": cupy.float32, "f64": cupy.float64}[precision])


def timings(cupy, launch) -> tuple[float, float, float]:
    """Milliseconds a launch: best of 5, median of 5 (each between two events), and the mean of
    50 launches back to back."""
    launch()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    single = []
    for _ in range(5):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        single.append(cupy.cuda.get_elapsed_time(start, stop))
    start.record()
    for _ in range(50):
        launch()
    stop.record()
    stop.synchronize()
    return min(single), statistics.median(single), cupy.cuda.get_elapsed_time(start, stop) / 50


def clocks() -> str:
    """The GPU's SM clock, power draw and throttle reasons now (nvidia-smi)."""
    query = "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active"
    return subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()


def compile_only(fence: bool) -> None:
    for case in CASES:
        desc = descriptor(case)
        for kind, (name, _) in KERNELS.items():
            resources = blasdx.compile_kernel(render(desc, kind, fence), name, sm=900).resources
            print(f"{case:28s} {kind:5s} {resources.registers} registers, spills {resources.spill_store_bytes}/"
                  f"{resources.spill_load_bytes} bytes", flush=True)


def fence_the_harness() -> None:
    """Runs in each compiling process: the harness's source fenced (see --fence)."""
    import side_by_side

    side_by_side.SRC = fenced(side_by_side.SRC)


def anchor_kernels(side_by_side, cases: list[str], fence: bool = False) -> dict[str, tuple]:
    """cuBLASDx v3's ``repeat_v3`` kernel for each of ``cases`` that the anchor harness has
    (rrr, the harness's precisions), compiled by the harness's own code in parallel (``fenced``
    with ``fence``): case -> (cubin, seconds, log). The harness reads the nvidia-mathdx wheel
    from .whl/."""
    side_by_side.includes()  # unpacks the headers once, before the processes that read them
    harness = {f"{m}x{n}x{k} {pa} {pc} rrr": (m, n, k, pa, pc) for m, n, k, pa, pc in side_by_side.CASES}
    wanted = [case for case in cases if case in harness]
    with ProcessPoolExecutor(max_workers=8, initializer=fence_the_harness if fence else None) as pool:
        built = list(pool.map(side_by_side.compile_dx, [harness[case] for case in wanted]))
    return {case: result[1:] for case, result in zip(wanted, built)}


def anchor_launch(cupy, cubin: bytes, blocks: int):
    """A launch of cuBLASDx v3's repeated multiply (its A and B are made in the kernel, 0.01 (i % 7))."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as file:
        file.write(cubin)
    try:
        module = cupy.RawModule(path=file.name)
        block_dim = tuple(int(v) for v in cupy.ndarray((3,), cupy.uint32, module.get_global("bd2")).get())
        shared = int(cupy.ndarray((1,), cupy.uint32, module.get_global("smem3")).get()[0])
        kernel = module.get_function("repeat_v3")
    finally:
        os.unlink(file.name)  # the module is loaded
    kernel.max_dynamic_shared_size_bytes = shared
    scratch = cupy.empty(blocks * 1024, dtype=cupy.float64)
    return functools.partial(kernel, (blocks,), block_dim, (scratch, np.int32(REPEATS)), shared_mem=shared)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds over each kernel; the table gives their median")
    parser.add_argument("--compile-only", action="store_true", help="compile each kernel for SM 900 (no GPU), print its registers")
    parser.add_argument("--fence", action="store_true", help="__syncwarp() after each repeated multiply, here and in cuBLASDx's, so that "
                        "ptxas cannot hoist the loads that repeats share (no K loop could)")
    parser.add_argument("--only", help="a regular expression: the cases it finds, e.g. 'i8|tf32'")
    parser.add_argument("--pattern", action="store_true", help="A and B as 0.01 (i %% 7), as the harness's cuBLASDx kernels fill them")
    parser.add_argument("--clocks", action="store_true", help="nvidia-smi's SM clock, power and throttle reasons after each case")
    parser.add_argument("--anchor", action="store_true",
                        help="also time cuBLASDx v3's repeated multiply on the harness's 8 cases (its kernel, compiled by its code)")
    parser.add_argument("--anchors", default=ANCHORS, help="the anchor harness's folder, for --anchor (default .anchors)")
    args = parser.parse_args()
    if args.only:
        CASES[:] = [case for case in CASES if re.search(args.only, case)]
    harness = anchor_module(args.anchors, "side_by_side") if args.anchor else None
    if args.compile_only:
        compile_only(args.fence)
        return
    import cupy

    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM
    anchors = anchor_kernels(harness, CASES, args.fence) if harness else {}
    print(f"{'case':28s} kind  {'TFLOP/s':>8s}  last round's best / median / back to back, TFLOP/s")
    rows = []
    for case in CASES:
        desc = descriptor(case)
        m, n, k = desc.size
        lda, ldb, ldc = desc.leading_dimension
        pa, pc = case.split()[1:3]
        a = operand(cupy, pa, 2 * k * lda + 2 * m * lda, args.pattern)  # covers either layout of A
        b = operand(cupy, pa, 2 * k * ldb + 2 * n * ldb, args.pattern)
        c = operand(cupy, pc, 2 * m * ldc + 2 * n * ldc, False)
        flops = 2 * m * n * k * REPEATS * blocks
        for kind, (name, _) in KERNELS.items():
            launch = functools.partial(blasdx.compile_kernel(render(desc, kind, args.fence), name), (blocks,),
                                       desc.block_dim, (a, b, c, np.int32(REPEATS)), shared_mem=desc.shared_memory_size)
            rates = []
            for _ in range(args.rounds):
                last = timings(cupy, launch)
                rates.append(flops / last[0] / 1e9)
            rows.append((f"{case} {kind}", statistics.median(rates), "TFLOP/s"))
            ways = "/".join(f"{flops / ms / 1e9:.0f}" for ms in last)
            print(f"{case:28s} {kind:5s} {statistics.median(rates):8.1f}  {ways}"
                  + (f" | {clocks()}" if args.clocks else ""), flush=True)
        if case in anchors:
            cubin, _, log = anchors[case]
            if cubin is None:
                print(f"{case:28s} dx3   did not compile: {log[-200:]}", flush=True)
                continue
            ways_ms = timings(cupy, anchor_launch(cupy, cubin, blocks))
            rows.append((f"{case} cuBLASDx v3", flops / ways_ms[0] / 1e9, "TFLOP/s"))
            print(f"{case:28s} dx3   (cuBLASDx v3) best / median / back to back "
                  + "/".join(f"{flops / ms / 1e9:.0f}" for ms in ways_ms) + (f" | {clocks()}" if args.clocks else ""),
                  flush=True)
    report(rows)


if __name__ == "__main__":
    main()
