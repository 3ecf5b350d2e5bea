"""Ablation: the batched kernel with one or two items in flight per block, and with C
staged in shared memory or held in registers, same run.

    python benchmarks/ablate_stages.py [--gib 1.0]

Each variant fixes one of the planner's choices with blasdx.PlanOverrides (forcing two
stages also where four blocks of two stages do not fit); prints GB/s and the share of copy
bandwidth for each variant.
"""

from __future__ import annotations

import argparse

import bench_gpu

from blasdx import PlanOverrides

VARIANTS = {
    "planner's choice": None,
    "one stage": PlanOverrides(pipeline_stages=1),
    "two stages": PlanOverrides(pipeline_stages=2),
    "C staged": PlanOverrides(c_in_registers=False),
    "C in registers": PlanOverrides(c_in_registers=True),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    results = {label: [bench_gpu.batched_case(size, prec, args.gib, overrides=overrides)
                       for size, prec in bench_gpu.CASES]
               for label, overrides in VARIANTS.items()}
    print(f"copy {copy:.0f} GB/s")
    print(f"{'case':22} " + " ".join(f"{label:>18}" for label in results))
    for i in range(len(bench_gpu.CASES)):
        row = [results[label][i]["GB/s"] for label in results]
        print(f"{results['one stage'][i]['case']:22} " + " ".join(f"{g:8.0f} ({g / copy:4.0%})   " for g in row))


if __name__ == "__main__":
    main()
