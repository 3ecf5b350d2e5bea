"""blasdx's register-accumulator block GEMM against cuBLASDx v3's on cases the anchor harness lacks
(bfloat16), measured the harness's way: its kernels, timer and grid are imported from it, with
bfloat16 added to its type names, so that nothing of it is copied here.

    python3 benchmarks/anchor_bf16.py --compile-only .cubins [--anchors .anchors]   # no GPU needed
    python3 benchmarks/anchor_bf16.py [--cubins .cubins] [--anchors .anchors]       # on the GPU

Without --cubins the cuBLASDx kernels compile first (about a minute a case); the harness reads the
nvidia-mathdx wheel from .whl/.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from ab import ANCHORS, anchor_module, report

CASES = [(128, 128, 64, "bf16", "f32"), (64, 64, 64, "bf16", "f32"), (128, 128, 64, "f16", "f32")]
harness = None  # the anchor harness's side_by_side module, once main() has loaded it


def load_harness(directory) -> None:
    """side_by_side from ``directory``, with bfloat16 among its type names."""
    global harness
    harness = anchor_module(directory, "side_by_side")
    harness.CT["bf16"] = "__nv_bfloat16"
    harness.BX["bf16"] = "bfloat16"


def random(shape, precision: str):
    """Values in [-1, 1) stored as ``precision`` (bfloat16 as its raw 16 bits: CuPy has no bfloat16)."""
    import cupy as cp

    x = cp.random.uniform(-1, 1, shape, dtype=cp.float32)
    return (x.view(cp.uint32) >> 16).astype(cp.uint16) if precision == "bf16" else x.astype(harness.NP[precision])


def cubin_name(case) -> str:
    m, n, k, pa, pc = case
    return f"cublasdx_{m}x{n}x{k}_{pa}{pc}.cubin"


def compile_cublasdx(directory: str) -> None:
    """Compile the cuBLASDx kernels of every case into ``directory`` (no GPU needed)."""
    os.makedirs(directory, exist_ok=True)
    with ProcessPoolExecutor() as pool:
        for case, cubin, seconds, log in pool.map(harness.compile_dx, CASES):
            if cubin is None:
                raise RuntimeError(f"cuBLASDx did not compile {case}: {log[-600:]}")
            with open(os.path.join(directory, cubin_name(case)), "wb") as f:
                f.write(cubin)
            print(f"{cubin_name(case)}: {seconds:.0f} s")


def cublasdx_v3_tflops(case, grid: int, path: str) -> float:
    import cupy as cp

    m, n, k, _, pc = case
    module = cp.RawModule(path=path)

    def constant(name, dtype, count):
        return cp.asnumpy(cp.ndarray((count,), dtype, module.get_global(name)))

    block = tuple(int(v) for v in constant("bd2", cp.uint32, 3))
    shared = int(constant("smem3", cp.uint32, 1)[0])
    kernel = module.get_function("repeat_v3")
    kernel.max_dynamic_shared_size_bytes = shared
    scratch = cp.empty(grid * 1024, dtype=harness.NP[pc])
    ms = harness.timed(lambda: kernel((grid,), block, (scratch, np.int32(harness.REPS)), shared_mem=shared), reps=5, warm=1)
    return 2 * m * n * k * harness.REPS * grid / ms / 1e9


def blasdx_tflops(case, grid: int) -> tuple[float, str]:
    import blasdx
    from blasdx import SM, Arrangement, Block, LeadingDimension, Precision, Size

    m, n, k, pa, pc = case
    gemm = Size(m, n, k) + Precision(harness.BX[pa], harness.BX[pa], harness.BX[pc]) + Arrangement(
        "row_major", "row_major", "row_major") + SM(900) + Block()
    desc = gemm + LeadingDimension(*gemm.suggested_leading_dimension)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + harness.BX_REPEAT_REG, "repeat_bx_reg")
    lda, ldb, ldc = desc.leading_dimension
    a, b = random(m * lda, pa), random(k * ldb, pa)
    c = random(m * ldc, pc)
    ms = harness.timed(lambda: kernel((grid,), tuple(desc.block_dim), (a, b, c, np.int32(harness.REPS)),
                                      shared_mem=desc.shared_memory_size), reps=5, warm=1)
    return 2 * m * n * k * harness.REPS * grid / ms / 1e9, desc.instruction.name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile-only", metavar="DIR", help="compile the cuBLASDx kernels into DIR and stop")
    parser.add_argument("--cubins", metavar="DIR", help="the cuBLASDx kernels compiled before (default: compile now)")
    parser.add_argument("--anchors", default=ANCHORS, help="the anchor harness's folder (default .anchors)")
    args = parser.parse_args()
    load_harness(args.anchors)
    if args.compile_only:
        return compile_cublasdx(args.compile_only)
    cubins = args.cubins or os.path.join(tempfile.gettempdir(), "anchor_cubins")
    if not args.cubins:
        compile_cublasdx(cubins)
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    grid = props["multiProcessorCount"] * 16
    print(f"SUMMARY {props['name'].decode()}: block GEMM alone, TFLOP/s (register accumulators)")
    rows = []
    for case in CASES:
        ours, instruction = blasdx_tflops(case, grid)
        theirs = cublasdx_v3_tflops(case, grid, os.path.join(cubins, cubin_name(case)))
        name = f"{case[0]}x{case[1]}x{case[2]} {case[3]}->{case[4]}"
        print(f"{name:22s} bx_reg {ours:6.1f} ({instruction})  cuBLASDx v3 {theirs:6.1f}  {ours / theirs:5.2f}x")
        rows += [(f"{name} bx_reg", ours, "TFLOP/s"), (f"{name} cuBLASDx v3", theirs, "TFLOP/s")]
    report(rows)


if __name__ == "__main__":
    main()
