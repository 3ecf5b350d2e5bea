"""Issue 19's bfloat16 case in one run: blasdx's register-accumulator block GEMM (wgmma on an
sm_90 GPU) against cuBLASDx's register API (v3), as ../shared/bench/side_by_side.py measures
them (200 repeats of the block GEMM on shared-memory operands, the same grid), for cases the
harness lacks. The harness is imported from .anchors/ (the copy its README asks for), with
bfloat16 added to its type names; nothing of it is copied here.

    python3 benchmarks/anchor_bf16.py --compile-only .cubins   # on the CPU machine (cuBLASDx: ~50 s a case)
    python3 benchmarks/anchor_bf16.py --cubins .cubins         # on the GPU machine (carry .cubins)

Without --cubins the cuBLASDx kernels compile on the GPU machine. Needs .anchors/ and the
nvidia-mathdx wheel in .whl/.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".anchors"))
import side_by_side as harness  # noqa: E402 - the anchor harness, from .anchors/

harness.CT["bf16"] = "__nv_bfloat16"
harness.BX["bf16"] = "bfloat16"
CASES = [(128, 128, 64, "bf16", "f32"), (64, 64, 64, "bf16", "f32"), (128, 128, 64, "f16", "f32")]


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
    args = parser.parse_args()
    if args.compile_only:
        return compile_cublasdx(args.compile_only)
    cubins = args.cubins or os.path.join("/tmp", "anchor_cubins")
    if not args.cubins:
        compile_cublasdx(cubins)
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    grid = props["multiProcessorCount"] * 16
    print(f"SUMMARY {props['name'].decode()}: block GEMM alone, TFLOP/s (register accumulators)")
    for case in CASES:
        ours, instruction = blasdx_tflops(case, grid)
        theirs = cublasdx_v3_tflops(case, grid, os.path.join(cubins, cubin_name(case)))
        name = f"{case[0]}x{case[1]}x{case[2]} {case[3]}->{case[4]}"
        print(f"{name:22s} bx_reg {ours:6.1f} ({instruction})  cuBLASDx v3 {theirs:6.1f}  {ours / theirs:5.2f}x")


if __name__ == "__main__":
    main()
