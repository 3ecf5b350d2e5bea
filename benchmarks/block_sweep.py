"""The block GEMM of the device API over the anchor harness's 8 cases and 13 others (every
precision family but complex, odd sizes, each arrangement; then three small tiles on more
threads), in the harness's two kernels:
``reg`` repeats ``multiply(sa, sb, acc)`` into register accumulators, ``smem`` repeats the
shared-memory ``execute(alpha, sa, sb, beta, sc)``; 200 calls a block, 16 blocks an SM.

With ``--base DIR`` (an earlier templates/ directory, e.g. from ``git archive REV templates``)
both versions are rendered and timed in alternation, each round taking the best of 5 launches;
the table gives the median of the rounds. Each launch is also timed three ways in the last round
(best of 5, median of 5, and 50 launches back to back between two events), because single
launches of these short kernels have read 2-4x apart between calls.

    python benchmarks/block_sweep.py [--base DIR] [--rounds 3] [--pattern] [--clocks] [--anchor] [--fence] [--only REGEX] [--compile-only]

``--pattern`` fills A and B as the harness's cuBLASDx kernels do (0.01 (i % 7)) instead of with
random values; ``--clocks`` prints nvidia-smi's SM clock, power and throttle reasons after each
case: two suspects for the disagreement between calls.

``--anchor`` also times cuBLASDx v3's repeated multiply on the harness's 8 cases (compiled by the
harness's code from .anchors/, the nvidia-mathdx wheel in .whl/) the same three ways, so that its
ratio to blasdx's does not depend on how a single launch is timed.

``--fence`` adds ``__syncwarp()`` after each repeated multiply, in blasdx's kernels and in
cuBLASDx's: without it ptxas may hoist shared-memory loads that the repeats share out of the loop
(cuBLASDx v3's 32^3 float16 loop holds 5 ldmatrix per 16 mma where each repeat needs 16), which no
K loop can do, as its A and B change every step.

``--compile-only`` renders and compiles every kernel for SM 900 (no GPU needed) and prints the
compile seconds and registers a thread.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

os.environ.setdefault("BLASDX_DISABLE_DISK_CACHE", "1")

import blasdx  # noqa: E402
from blasdx import SM, Arrangement, Block, BlockDim, LeadingDimension, Precision, Size  # noqa: E402

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

# The anchor harness's kernels (../shared/bench/side_by_side.py), with the same names.
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


def render(desc, templates: str | None, kind: str, fence: bool = False) -> str:
    """The harness kernel ``kind`` around ``desc``'s device source from ``templates`` (None:
    this checkout's), ``fenced`` with ``fence``."""
    if templates:
        os.environ["BLASDX_TEMPLATES_DIR"] = templates
    else:
        os.environ.pop("BLASDX_TEMPLATES_DIR", None)
    try:
        kernel = KERNELS[kind][1]
        return desc.device_source("gemm") + (fenced(kernel) if fence else kernel)
    finally:
        os.environ.pop("BLASDX_TEMPLATES_DIR", None)


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


def compile_only(versions: dict[str, str | None]) -> None:
    for case in CASES:
        desc = descriptor(case)
        for kind, (name, _) in KERNELS.items():
            figures = []
            for version, templates in versions.items():
                began = time.perf_counter()
                kernel = blasdx.compile_kernel(render(desc, templates, kind), name, sm=900)
                seconds = time.perf_counter() - began
                figures.append(f"{version}={seconds:.2f} s {kernel.resources.registers} regs")
            print(f"{case:28s} {kind:5s} " + " ".join(figures), flush=True)


ANCHORS = Path(__file__).resolve().parent.parent / ".anchors"  # ../shared/bench copied in (its README)


def fence_the_harness() -> None:
    """Runs in each compiling process: the harness's source fenced (see --fence)."""
    import side_by_side

    side_by_side.SRC = fenced(side_by_side.SRC)


def anchor_kernels(cases: list[str], fence: bool = False) -> dict[str, tuple]:
    """cuBLASDx v3's ``repeat_v3`` kernel for each of ``cases`` that the anchor harness has
    (rrr, the harness's precisions), compiled by the harness's own code in parallel (``fenced``
    with ``fence``): case -> (cubin, seconds, log). Needs .anchors/side_by_side.py and the
    nvidia-mathdx wheel in .whl/."""
    if str(ANCHORS) not in sys.path:
        sys.path.insert(0, str(ANCHORS))
    import side_by_side

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
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="an earlier templates/ directory to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--fence", action="store_true", help="__syncwarp() after each repeated multiply, here and in cuBLASDx's")
    parser.add_argument("--only", help="a regular expression: the cases it finds, e.g. 'i8|tf32'")
    parser.add_argument("--pattern", action="store_true", help="A and B as 0.01 (i % 7), not random")
    parser.add_argument("--clocks", action="store_true", help="nvidia-smi's clock and power after each case")
    parser.add_argument("--anchor", action="store_true",
                        help="also time cuBLASDx v3's repeated multiply (the harness's 8 cases) the same three ways")
    args = parser.parse_args()
    if args.only:
        CASES[:] = [case for case in CASES if re.search(args.only, case)]
    versions: dict[str, str | None] = {"base": args.base, "this": None} if args.base else {"this": None}
    if args.compile_only:
        compile_only(versions)
        return
    import cupy

    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * BLOCKS_PER_SM
    anchors = anchor_kernels(CASES, args.fence) if args.anchor else {}
    print(f"{'case':28s} kind  " + " ".join(f"{v:>8s}" for v in versions)
          + "  ratio | last round's best / median / back to back, TFLOP/s")
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
            kernels = {v: blasdx.compile_kernel(render(desc, t, kind, args.fence), name) for v, t in versions.items()}
            rates: dict[str, list[float]] = {v: [] for v in versions}
            last: dict[str, tuple[float, float, float]] = {}
            arguments = (a, b, c, np.int32(REPEATS))
            for _ in range(args.rounds):
                for version, kernel in kernels.items():
                    last[version] = timings(cupy, functools.partial(kernel, (blocks,), desc.block_dim, arguments,
                                                                    shared_mem=desc.shared_memory_size))
                    rates[version].append(flops / last[version][0] / 1e9)
            medians = {v: statistics.median(r) for v, r in rates.items()}
            ratio = f"{medians['this'] / medians['base']:5.2f}" if "base" in medians else "    -"
            ways = " ".join("/".join(f"{flops / ms / 1e9:.0f}" for ms in last[v]) for v in versions)
            print(f"{case:28s} {kind:5s} " + " ".join(f"{medians[v]:8.1f}" for v in versions) + f"  {ratio} | {ways}"
                  + (f" | {clocks()}" if args.clocks else ""), flush=True)
        if case in anchors:
            cubin, _, log = anchors[case]
            if cubin is None:
                print(f"{case:28s} dx3   did not compile: {log[-200:]}", flush=True)
                continue
            ways = "/".join(f"{flops / ms / 1e9:.0f}" for ms in timings(cupy, anchor_launch(cupy, cubin, blocks)))
            print(f"{case:28s} dx3   (cuBLASDx v3) best / median / back to back {ways}"
                  + (f" | {clocks()}" if args.clocks else ""), flush=True)


if __name__ == "__main__":
    main()
