"""Grouped() (issue 48) against torch._grouped_mm and a dense GEMM of the same FLOPs, on mixture-of-experts shapes
with skewed routing (as the issue's anchor draws it: loads ~ U(0,1)^2 + 0.05 per expert, a multinomial draw of
tokens x top-k rows), bf16, A (rows, K) row-major, B (E, K, N) column-major per group, offsets int32 on the device.
TFLOP/s of the routed rows' FLOPs, CUDA events, medians after warm-up, rounds alternating (the best round's).
Needs PyTorch with CUDA; run on the GPU machine:

    python3 benchmarks/grouped_gemm.py [--only REGEX] [--rounds 3] [--tile 128x256x64] [--products forward,dgrad,wgrad,swiglu]

fp8: FP8 e4m3 A and B with DeepSeek-V3's blockwise scales (A per row and 128 of k, B per 128 x 128 block of each
expert's matrix), bf16 out, against torch._scaled_grouped_mm with rowwise scales (the recipe it takes; torch's bf16
grouped GEMM where it has none) and blasdx's bf16 forward in the "dense" column (the issue's target is fp8 / bf16).

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


def fp8_row(torch, name, experts, k, n, rows, counts, offsets, a, b, forward, args) -> list:
    """The fp8 product's table row (see the docstring) and its report rows."""
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)  # b8: (E, K, N) column-major a group
    sa = (torch.rand(-(-k // 128), rows, device="cuda") + 0.5).t()  # (rows, K/128), column-major
    sb = torch.rand(experts, -(-k // 128), -(-n // 128), device="cuda") + 0.5
    out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    desc = Size(max(1, rows // experts), n, k) + Precision("float8_e4m3", "float8_e4m3", "bfloat16") + \
        Arrangement("row_major", "col_major", "row_major") + SM(900) + Grouped()
    if args.fp8_tile:
        desc = desc + Tile(*(int(v) for v in args.fp8_tile.split("x")))
    ours = partial(desc.execute, a8, b8, out, offsets=offsets, scale_a=sa, scale_b=sb)
    ours()
    # error against bf16 products of the scaled values (torch's grouped GEMM), over the whole call
    a_deq = (a8.float() * sa.repeat_interleave(128, dim=1)[:, :k]).bfloat16()
    b_deq = (b8.float() * sb.repeat_interleave(128, dim=1)[:, :k].repeat_interleave(128, dim=2)[:, :, :n]).bfloat16()
    theirs = torch._grouped_mm(a_deq, b_deq, offs=offsets)
    error = float(torch.linalg.norm((out - theirs).float()) / torch.linalg.norm(theirs.float()))
    del a_deq, b_deq
    try:  # rowwise: A per row, B per column of each expert
        sr, sc = torch.rand(rows, device="cuda") + 0.5, torch.rand(experts, n, device="cuda") + 0.5
        bt = b8.transpose(1, 2).contiguous().transpose(1, 2)
        torch._scaled_grouped_mm(a8, bt, sr, sc, offs=offsets, out_dtype=torch.bfloat16)
        reference, label = partial(torch._scaled_grouped_mm, a8, bt, sr, sc, offs=offsets, out_dtype=torch.bfloat16), \
            "torch._scaled_grouped_mm rowwise"
    except (RuntimeError, TypeError, AttributeError) as exc:
        print(f"torch._scaled_grouped_mm: {type(exc).__name__}: {str(exc).splitlines()[0]}; torch's bf16 in its place")
        reference, label = partial(torch._grouped_mm, a, b, offs=offsets), "torch._grouped_mm bf16"
    bf16_desc, (x, y, bf16_out), _ = forward
    calls = (ours, reference, partial(bf16_desc.execute, x, y, bf16_out, offsets=offsets))
    times: list[list[float]] = [[], [], []]
    for _ in range(args.rounds):
        for t, call in zip(times, calls):
            t.append(timed(torch, call))
    flops = 2 * rows * k * n
    t_ours, t_ref, t_bf16 = (flops / min(t) / 1e9 for t in times)
    print(f"| {name}: E={experts} K={k} N={n} rows={rows} | fp8 blockwise (vs {label}) | {int(counts.min())}-"
          f"{int(counts.max())} | {t_ours:.0f} | {t_ref:.0f} | {t_ours / t_ref:.2f} | {t_bf16:.0f} (blasdx bf16) | "
          f"{t_ours / t_bf16:.2f} | {error:.1e} |", flush=True)
    return [(f"{name} fp8 blasdx", t_ours, "TFLOP/s"), (f"{name} fp8 {label}", t_ref, "TFLOP/s"),
            (f"{name} fp8 blasdx bf16", t_bf16, "TFLOP/s")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tile", default="", help="a Tile (MxNxK) in place of the suggested one")
    parser.add_argument("--stages", type=int, default=0)
    parser.add_argument("--fp8-tile", default="", help="a Tile (MxNxK) in place of the suggested one, fp8 product only")
    parser.add_argument("--products", default="forward",
                        help="of forward (C = A B), dgrad (dA = dC B^T), wgrad (dB = A^T dC, Grouped('k')), swiglu (the "
                             "forward with SwiGLU fused), fp8 (blockwise-scaled FP8), comma-separated")
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
            if product == "fp8":
                rows_out += fp8_row(torch, name, experts, k, n, rows, counts, offsets, a, b, products["forward"], args)
                continue
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
