"""Grouped() (issue 48) against torch._grouped_mm and a dense GEMM of the same FLOPs, on mixture-of-experts shapes
with skewed routing (as the issue's anchor draws it: loads ~ U(0,1)^2 + 0.05 per expert, a multinomial draw of
tokens x top-k rows), bf16, A (rows, K) row-major, B (E, K, N) column-major per group, offsets int32 on the device.
TFLOP/s of the routed rows' FLOPs, CUDA events, medians after warm-up, rounds alternating (the best round's).
Needs PyTorch with CUDA; run on the GPU machine:

    python3 benchmarks/grouped_gemm.py [--only REGEX] [--rounds 3] [--tile 128x256x64] [--products forward,dgrad,wgrad,swiglu]

swiglu: the gate+up product with the SwiGLU epilogue fused (C = silu(Z[:, 0::2]) * Z[:, 1::2], N/2 columns) against
torch._grouped_mm followed by PyTorch's silu and product (the same FLOPs counted: the GEMM's).
"""

from __future__ import annotations

import argparse
import re
import statistics
from functools import partial

from ab import report

from blasdx import SM, Arrangement, Grouped, Precision, Size, Stages, Tile, swiglu

# name, experts, K, N, tokens, top-k (the four and a sweep of others)
CASES = [
    ("qwen3-30b-a3b gate+up", 128, 2048, 1536, 8192, 8),
    ("qwen3-30b-a3b down", 128, 768, 2048, 8192, 8),
    ("deepseek-v3 gate+up", 256, 7168, 4096, 4096, 8),
    ("deepseek-v3 down", 256, 2048, 7168, 4096, 8),
    ("mixtral-8x7b gate+up", 8, 4096, 28672, 4096, 2),
    ("mixtral-8x7b down", 8, 14336, 4096, 4096, 2),
    ("olmoe gate+up", 64, 2048, 2048, 4096, 8),
    ("qwen3-235b gate+up", 128, 4096, 3072, 4096, 8),
    ("small decode", 64, 2048, 1536, 256, 8),
]


def timed(torch, fn, repeats: int = 20) -> float:
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


def routing(torch, experts: int, rows: int, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    load = torch.rand(experts, device="cuda", generator=gen) ** 2 + 0.05
    torch.manual_seed(seed)  # the multinomial draw's (on the CPU)
    return torch.distributions.Multinomial(rows, probs=(load / load.sum()).cpu()).sample().to(torch.int64)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tile", default="", help="a Tile (MxNxK) in place of the suggested one")
    parser.add_argument("--stages", type=int, default=0)
    parser.add_argument("--products", default="forward",
                        help="of forward (C = A B), dgrad (dA = dC B^T), wgrad (dB = A^T dC, Grouped('k')), swiglu (the "
                             "forward with SwiGLU fused), comma-separated")
    args = parser.parse_args()
    import torch

    rows_out = []
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| case | product | rows a group | blasdx | torch._grouped_mm | ratio | dense same FLOPs | blasdx / dense | "
          "error vs torch |")
    print("|---|---|---|---|---|---|---|---|---|")
    bf16 = Precision("bfloat16", "bfloat16", "bfloat16")
    for name, experts, k, n, tokens, topk in CASES:
        if args.only and not re.search(args.only, name):
            continue
        rows = tokens * topk
        counts = routing(torch, experts, rows)
        offsets = counts.cumsum(0).to(torch.int32).cuda()
        a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(experts, n, k, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        dc = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        typical = max(1, rows // experts)
        # product: (descriptor, blasdx's operands and output, torch's operands)
        products = {
            "forward": (Size(typical, n, k) + bf16 + Arrangement("row_major", "col_major", "row_major") + SM(900)
                        + Grouped(), (a, b, torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)), (a, b)),
            "dgrad": (Size(typical, k, n) + bf16 + Arrangement("row_major", "row_major", "row_major") + SM(900)
                      + Grouped(), (dc, b.transpose(1, 2), torch.empty(rows, k, device="cuda", dtype=torch.bfloat16)),
                      (dc, b.transpose(1, 2))),
            "wgrad": (Size(k, n, typical) + bf16 + Arrangement("col_major", "row_major", "row_major") + SM(900)
                      + Grouped("k"), (a.t(), dc, torch.empty(experts, k, n, device="cuda", dtype=torch.bfloat16)),
                      (a.t(), dc)),
        }
        products["swiglu"] = (products["forward"][0], (a, b, torch.empty(rows, n // 2, device="cuda", dtype=torch.bfloat16)),
                              (a, b))
        for product in args.products.split(","):
            desc, (x, y, out), (tx, ty) = products[product]
            gated = product == "swiglu"
            hooks = {"epilogue": swiglu(layout="interleaved")} if gated else {}
            if args.tile:
                desc = desc + Tile(*(int(v) for v in args.tile.split("x")))
            if args.stages:
                desc = desc + Stages(args.stages)
            desc.execute(x, y, out, offsets=offsets, **hooks)

            def torch_product(tx=tx, ty=ty, gated=gated, offsets=offsets):
                z = torch._grouped_mm(tx, ty, offs=offsets)
                return torch.nn.functional.silu(z[:, 0::2]) * z[:, 1::2] if gated else z

            theirs = torch_product()
            error = float(torch.linalg.norm((out - theirs).float()) / torch.linalg.norm(theirs.float()))
            same_flops = {"forward": (a, b[0]), "swiglu": (a, b[0]), "dgrad": (dc, b[0].t()), "wgrad": (a.t(), dc)}[product]
            calls = (partial(desc.execute, x, y, out, offsets=offsets, **hooks), torch_product,
                     partial(torch.matmul, *same_flops))
            ours, torch_ms, dense = [], [], []
            for _ in range(args.rounds):
                for times, call in zip((ours, torch_ms, dense), calls):
                    times.append(timed(torch, call))
            flops = 2 * rows * k * n
            t_ours, t_torch, t_dense = (flops / min(t) / 1e9 for t in (ours, torch_ms, dense))
            print(f"| {name}: E={experts} K={k} N={n} rows={rows} | {product} | {int(counts.min())}-{int(counts.max())} "
                  f"| {t_ours:.0f} | {t_torch:.0f} | {t_ours / t_torch:.2f} | {t_dense:.0f} | {t_ours / t_dense:.2f} | "
                  f"{error:.1e} |", flush=True)
            rows_out += [(f"{name} {product} blasdx", t_ours, "TFLOP/s"),
                         (f"{name} {product} torch._grouped_mm", t_torch, "TFLOP/s")]
    report(rows_out)


if __name__ == "__main__":
    main()
