"""Ablation: the batched kernel's register budget, same run. Each case is compiled as
planned and with ``__launch_bounds__(threads, N)`` for the resident blocks N that shared
memory allows (and the counts given by --blocks), which caps registers at
65536 / (N * threads); prints registers and spills (cuobjdump) and GB/s for each.

    python benchmarks/ablate_registers.py [--gib 1.0] [--blocks 20 24] [--only "32x32x32 f16"]
"""

from __future__ import annotations

import argparse
import tempfile

import bench_gpu
import cupy

import blasdx.pipeline
import blasdx.plan as planner
from blasdx import SM, Arrangement, Block, PlanOverrides, Precision, Size


def overrides_for(blocks: int | None) -> PlanOverrides | None:
    return PlanOverrides(min_blocks_per_sm=blocks) if blocks else None


def resources(desc, blocks: int | None) -> str:
    """Registers and local memory (spills) per thread of the kernel batched_case ran."""
    plan = blasdx.pipeline.plan(desc, overrides_for(blocks))
    compiled = blasdx.pipeline.compile_for_arch(planner.with_alignment(plan, (16, 16, 16)), 900)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.cubin)
        f.flush()
        function = cupy.RawModule(path=f.name).get_function(compiled.kernel_name)
    return f"{function.num_regs} regs, {function.local_size_bytes} B local"


def smem_blocks(desc) -> int:
    plan = planner.kernel_plan(desc.plan)
    per_sm = cupy.cuda.Device().attributes["MaxSharedMemoryPerMultiprocessor"]
    return min(32, 2048 // plan.threads, per_sm // (plan.kernel_shared_memory_size + 1024))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--blocks", type=int, nargs="*", default=[])
    parser.add_argument("--only", default="", help="cases whose label contains this, e.g. '32x32x32 f16'")
    args = parser.parse_args()
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    print(f"copy {copy:.0f} GB/s")
    for size, prec in bench_gpu.CASES:
        label = f"{size[0]}x{size[1]}x{size[2]} {prec[0][0]}{prec[0][-2:]}"
        if args.only not in label:
            continue
        desc = Size(*size) + Precision(*prec) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
        cells = []
        for blocks in [None, smem_blocks(desc), *args.blocks]:
            row = bench_gpu.batched_case(size, prec, args.gib, overrides=overrides_for(blocks))
            cells.append(f"{blocks or 'plan'}: {resources(desc, blocks)}, {row['GB/s'] / copy:.0%}")
        print(f"{row['case']:22} " + " | ".join(cells))


if __name__ == "__main__":
    main()
