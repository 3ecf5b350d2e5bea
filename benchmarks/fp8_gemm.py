"""FP8 Grid() GEMMs (e4m3 -> float32, RCR) against cuBLAS (torch._scaled_mm, scales of one), both ways
of accumulating (then DeepSeek's blockwise recipe against torch.nn.functional.scaled_mm): blasdx's default (partial sums promoted into float32 every 128 of k) against cuBLAS's
default, and Accumulation('fast') against use_fast_accum=True. TFLOP/s and the relative error against a
float64 reference, N(0, 0.25) data. Needs PyTorch with CUDA; run on the GPU machine:

    python3 benchmarks/fp8_gemm.py [--cases 4096x4096x4096,...]
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial

from ab import report

from blasdx import SM, Accumulation, Arrangement, Grid, Precision, Size

# The four cases, then DeepSeek-V3-like projections and other shapes the planner was not tuned on.
# The issue's three blockwise cases, then DeepSeek-V3's other projections (m tokens x n outputs x k inputs).
BLOCKWISE_CASES = ["4096x4096x4096", "8192x7168x2048", "4096x1536x7168", "4096x24576x1536", "4096x7168x16384",
                   "4096x2112x7168", "2048x4096x7168", "4096x7168x2048"]
CASES = ["4096x4096x4096", "8192x8192x8192", "8192x7168x2048", "2048x2048x16384", "4096x1536x7168", "4096x7168x1536",
         "2048x24576x1536", "4096x2112x7168", "1024x4096x4096", "6144x5120x3072"]


def median_ms(torch, fn, repeats=12):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(CASES), help="m x n x k cases, comma-separated")
    parser.add_argument("--blockwise-cases", default=",".join(BLOCKWISE_CASES),
                        help="the blockwise recipe's m x n x k cases, comma-separated")
    parser.add_argument("--no-blockwise", action="store_true", help="leave out the blockwise recipe")
    args = parser.parse_args()
    import torch

    one = torch.ones((), device="cuda")
    rows = []
    print(f"SUMMARY {torch.cuda.get_device_name()}: FP8 e4m3 -> float32 Grid(), TFLOP/s (relative error)")
    for case in args.cases.split(","):
        m, n, k = map(int, case.split("x"))
        a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn).t()
        ref = a.double() @ b.double()
        norm = torch.linalg.norm(ref)
        c = torch.empty(m, n, device="cuda")
        tera = 2 * m * n * k / 1e9  # / ms -> TFLOP/s
        line = [case]
        for fast in (False, True):
            grid = Size(m, n, k) + Precision("float8_e4m3", "float8_e4m3", "float32") + \
                Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid()
            if fast:
                grid = grid + Accumulation("fast")
            grid.execute(a, b, c)
            ours_err = float(torch.linalg.norm(c.double() - ref) / norm)
            ours = tera / median_ms(torch, partial(grid.execute, a, b, c))
            cublas = partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)

            theirs_err = float(torch.linalg.norm(cublas().double() - ref) / norm)
            theirs = tera / median_ms(torch, cublas)
            way = "fast" if fast else "accurate"
            line.append(f"{way} {ours:6.0f} ({ours_err:.2e}) cuBLAS {theirs:6.0f} ({theirs_err:.2e}) {ours / theirs:4.2f}x")
            rows += [(f"{case} {way} blasdx", ours, "TFLOP/s"), (f"{case} {way} cuBLAS", theirs, "TFLOP/s"),
                     (f"{case} {way} blasdx error", ours_err, "relative"), (f"{case} {way} cuBLAS error", theirs_err, "relative")]
        print("  ".join(line), flush=True)
        del ref
    if not args.no_blockwise:
        rows += blockwise(torch, args.blockwise_cases.split(","))
    report(rows)


def blockwise(torch, cases):
    """DeepSeek's blockwise recipe (A's scales 1 x 128, B's 128 x 128, bfloat16 out) against cuBLAS's
    (torch.nn.functional.scaled_mm, the scales in its column-major layouts)."""
    F = torch.nn.functional
    print("blockwise scales, e4m3 -> bfloat16, TFLOP/s (relative error)")
    rows = []
    for case in cases:
        m, n, k = map(int, case.split("x"))
        a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn).t()
        kb, nb = -(-k // 128), -(-n // 128)
        sa = torch.exp2(torch.randint(-4, 5, (kb, m), device="cuda").float()).t()  # (m, kb), strides (1, m)
        sb = torch.exp2(torch.randint(-4, 5, (nb, kb), device="cuda").float()).t()  # (kb, nb), strides (1, kb)
        ks = torch.arange(k, device="cuda") // 128
        ref = (a.double() * sa.double()[:, ks]) @ (b.double() * sb.double()[ks][:, torch.arange(n, device="cuda") // 128])
        norm = torch.linalg.norm(ref)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        tera = 2 * m * n * k / 1e9
        grid = Size(m, n, k) + Precision("float8_e4m3", "float8_e4m3", "bfloat16") + \
            Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid()
        grid.execute(a, b, c, scale_a=sa, scale_b=sb)
        ours_err = float(torch.linalg.norm(c.double() - ref) / norm)
        ours = tera / median_ms(torch, partial(grid.execute, a, b, c, scale_a=sa, scale_b=sb))
        cublas = partial(F.scaled_mm, a, b, sa, F.ScalingType.BlockWise1x128, sb, F.ScalingType.BlockWise128x128,
                         output_dtype=torch.bfloat16)
        theirs_err = float(torch.linalg.norm(cublas().double() - ref) / norm)
        theirs = tera / median_ms(torch, cublas)
        print(f"{case}  blasdx {ours:6.0f} ({ours_err:.2e})  F.scaled_mm {theirs:6.0f} ({theirs_err:.2e})  "
              f"{ours / theirs:4.2f}x", flush=True)
        rows += [(f"{case} blockwise blasdx", ours, "TFLOP/s"), (f"{case} blockwise F.scaled_mm", theirs, "TFLOP/s"),
                 (f"{case} blockwise blasdx error", ours_err, "relative"),
                 (f"{case} blockwise F.scaled_mm error", theirs_err, "relative")]
        del ref
    return rows


if __name__ == "__main__":
    main()
