"""Ablation: the batched kernel with one or two items in flight per block, and with C
staged in shared memory or held in registers wherever the planner puts it, same run.

    python benchmarks/ablate_stages.py [--gib 1.0]

Patches the planner's choices (blasdx.plan._pipeline_stages, _keeps_c_in_registers);
prints GB/s and the share of copy bandwidth for each variant.
"""

from __future__ import annotations

import argparse

import bench_gpu

import blasdx.plan as plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    chosen, keeps = plan._pipeline_stages, plan._keeps_c_in_registers
    results = {}
    for label, stages, placement in (
            ("planner's choice", chosen, keeps), ("one stage", lambda *_: 1, keeps),
            ("two stages", lambda sm, size, mma: chosen(sm, size, False), keeps),
            ("C staged", chosen, lambda *_: False), ("C in registers", chosen, lambda *_: True)):
        plan._pipeline_stages, plan._keeps_c_in_registers = stages, placement
        bench_gpu.forget_kernels()
        results[label] = [bench_gpu.batched_case(size, prec, args.gib) for size, prec in bench_gpu.CASES]
    plan._pipeline_stages, plan._keeps_c_in_registers = chosen, keeps
    print(f"copy {copy:.0f} GB/s")
    print(f"{'case':22} " + " ".join(f"{label:>18}" for label in results))
    for i in range(len(bench_gpu.CASES)):
        row = [results[label][i]["GB/s"] for label in results]
        print(f"{results['one stage'][i]['case']:22} " + " ".join(f"{g:8.0f} ({g / copy:4.0%})   " for g in row))


if __name__ == "__main__":
    main()
