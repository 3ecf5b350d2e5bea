"""The kernels of two versions of templates/ in one run: issue 5's batched cases and block
GEMMs, rendered from an earlier templates/ directory and from this checkout's, each checked
against float64 before it is timed, timed in alternation (base, this, base, this).

    git show REV:templates/gemm.cuh.j2 > /tmp/base/gemm.cuh.j2   # and the other two files
    python benchmarks/compare_templates.py /tmp/base [--gib 1.0]

Only the templates differ between the two: the plans come from this checkout's Python.
"""

from __future__ import annotations

import argparse
import os
import statistics

import bench_gpu

ROUNDS = 2


def use_templates(directory: str | None) -> None:
    """Render from ``directory`` (None: this checkout's templates, through BLASDX_TEMPLATES_DIR)
    and forget compiled kernels."""
    if directory:
        os.environ["BLASDX_TEMPLATES_DIR"] = directory
    else:
        os.environ.pop("BLASDX_TEMPLATES_DIR", None)
    bench_gpu.forget_kernels()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base", help="directory with the earlier common.cuh.j2, gemm.cuh.j2 and kernel.cu.j2")
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    versions = (("base", args.base), ("this", None))
    batched: dict[str, dict[str, list[float]]] = {}
    blocks: dict[str, dict[str, list[float]]] = {}
    for _ in range(ROUNDS):
        for label, directory in versions:
            use_templates(directory)
            for size, prec in bench_gpu.CASES:
                row = bench_gpu.batched_case(size, prec, args.gib)
                batched.setdefault(row["case"], {}).setdefault(label, []).append(row["GB/s"])
            for case in bench_gpu.BLOCK_CASES:
                row = bench_gpu.block_gemm_case(*case)
                blocks.setdefault(row["case"], {}).setdefault(label, []).append(row["TFLOP/s"])
    print(f"copy {copy:.0f} GB/s; medians of {ROUNDS} alternating rounds")
    print(f"{'batched':24} {'base GB/s':>9} {'of copy':>7} {'this GB/s':>9} {'of copy':>7} {'this/base':>9}")
    for case, r in batched.items():
        b, t = statistics.median(r["base"]), statistics.median(r["this"])
        print(f"{case:24} {b:9.0f} {b / copy:7.0%} {t:9.0f} {t / copy:7.0%} {t / b:9.3f}")
    print(f"{'block GEMM':24} {'base TF/s':>9} {'this TF/s':>17} {'this/base':>9}")
    for case, r in blocks.items():
        b, t = statistics.median(r["base"]), statistics.median(r["this"])
        print(f"{case:24} {b:9.1f} {t:17.1f} {t / b:9.3f}")


if __name__ == "__main__":
    main()
