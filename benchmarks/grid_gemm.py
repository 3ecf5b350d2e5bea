"""Grid() against torch.matmul (cuBLAS) in one process, on PyTorch tensors of random data: the main
sizes and precisions, odd and skinny sizes, the fused gelu(a @ b + bias) against torch's three
kernels, sweeps of Stages and Tile. Each result is checked against torch before it is timed.

    python3 benchmarks/grid_gemm.py [--repeats 20] [--quick | --sweep-only | --sweep-fma] [--out results.json]
    python3 benchmarks/grid_gemm.py --cases "4096x4096x4096xrcr 2048x2048x2048xrrr" [--precision float32]
        [--epilogue gelu] [--beta 0.5] [--offset 8]
"""

from __future__ import annotations

import argparse
import json
import statistics

from ab import report

import blasdx
from blasdx import SM, Arrangement, BlockDim, Grid, Precision, Size, Stages, Tile

RCR = Arrangement("row_major", "col_major", "row_major")
LAYOUTS = {"r": "row_major", "c": "col_major"}
# Relative error allowed against the float64 product, by precision (16-bit C rounds each value).
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def timed(fn, repeats: int) -> float:
    """Median milliseconds of fn() over ``repeats`` runs after three warm-ups."""
    import torch

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


def operands(m: int, n: int, k: int, dtype, out_dtype):
    import torch

    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(n, k, device="cuda").to(dtype).t()  # (k, n), column-major
    c = torch.empty(m, n, device="cuda", dtype=out_dtype)
    return a, b, c


def check(c, ref, what: str, bound: float) -> None:
    err = float((c.double() - ref.double()).norm() / ref.double().norm())
    if not err <= bound:
        raise AssertionError(f"{what}: relative error {err:.3g} > {bound}")


def gemm_case(m, n, k, prec, repeats, extra=()):
    import torch

    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
    a_t, c_t = dtypes[prec[0]], dtypes[prec[2]]
    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid()
    for op in extra:
        desc = desc + op
    a, b, c = operands(m, n, k, a_t, c_t)
    desc.execute(a, b, c)
    ref = torch.matmul(a.double(), b.double()) if a_t == torch.float64 or m * n * k <= 2**33 else torch.matmul(a, b)
    check(c, ref, repr(desc), 1e-2 if a_t in (torch.float16, torch.bfloat16) else 1e-4)
    blasdx_ms = timed(lambda: desc.execute(a, b, c), repeats)
    out = torch.empty(m, n, device="cuda", dtype=a_t)
    torch_ms = timed(lambda: torch.matmul(a, b, out=out), repeats)
    flops = 2 * m * n * k
    return {"case": f"{m}x{n}x{k} {'->'.join(dict.fromkeys(prec))}" + "".join(f" {op!r}" for op in extra),
            "tile": "x".join(map(str, desc.tile)), "stages": desc.stages,
            "blasdx_TFLOPs": flops / blasdx_ms / 1e9, "torch_TFLOPs": flops / torch_ms / 1e9,
            "ratio": torch_ms / blasdx_ms}


def fused_case(m, n, k, repeats, extra=()):
    import torch

    desc = Size(m, n, k) + Precision("float16") + RCR + SM(900) + Grid()
    for op in extra:
        desc = desc + op
    a, b, c = operands(m, n, k, torch.float16, torch.float16)
    bias = torch.randn(n, device="cuda", dtype=torch.float16)
    desc.execute(a, b, c, bias=bias, epilogue="gelu")
    ref = torch.nn.functional.gelu(torch.matmul(a.float(), b.float()) + bias.float())
    check(c, ref, f"fused {desc!r}", 1e-2)
    blasdx_ms = timed(lambda: desc.execute(a, b, c, bias=bias, epilogue="gelu"), repeats)
    torch_ms = timed(lambda: torch.nn.functional.gelu(a @ b + bias), repeats)
    plain_ms = timed(lambda: desc.execute(a, b, c), repeats)
    return {"case": f"gelu(a @ b + bias) {m}x{n}x{k} f16" + "".join(f" {op!r}" for op in extra), "blasdx_ms": blasdx_ms, "torch_ms": torch_ms,
            "blasdx_plain_ms": plain_ms, "ratio": torch_ms / blasdx_ms}


def chosen_case(text: str, precision: str, epilogue: str | None, beta: float, offset: int, repeats: int) -> dict:
    """A case "MxNxKxABC" (the arrangement's letters: r row-major, c column-major) with every matrix
    ``offset`` bytes into a buffer of its own; with ``epilogue`` a bias of n values is added and the
    epilogue applied, with ``beta`` beta C. torch.matmul alone is the reference time, taken before and
    after blasdx's (the faster counts)."""
    import torch

    *size, arrangement = text.split("x")
    m, n, k = map(int, size)
    dtype = getattr(torch, precision)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if offset % itemsize:
        raise SystemExit(f"--offset {offset} is not a whole number of {precision} elements")

    def matrix(rows: int, cols: int, layout: str):
        outer, inner = (rows, cols) if layout == "r" else (cols, rows)
        view = torch.randn(outer * inner + offset // itemsize, device="cuda", dtype=dtype)[offset // itemsize:]
        return view.view(outer, inner) if layout == "r" else view.view(outer, inner).t()

    a, b, c = matrix(m, k, arrangement[0]), matrix(k, n, arrangement[1]), matrix(m, n, arrangement[2])
    ref = a.double() @ b.double() + beta * c.double()
    extra: dict = {"beta": beta} if beta else {}
    if epilogue:
        bias = torch.randn(n, device="cuda", dtype=dtype)
        extra.update(bias=bias, epilogue=epilogue)
        ref = getattr(torch.nn.functional, epilogue)(ref + bias.double())
    desc = Size(m, n, k) + Precision(precision) + Arrangement(*(LAYOUTS[x] for x in arrangement)) + SM(900) + Grid()
    desc.execute(a, b, c, **extra)
    check(c, ref, text, TOLERANCE[precision])
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    before = timed(lambda: torch.matmul(a, b, out=out), repeats)
    blasdx_ms = timed(lambda: desc.execute(a, b, c, **extra), repeats)
    torch_ms = min(before, timed(lambda: torch.matmul(a, b, out=out), repeats))
    flops = 2 * m * n * k
    what = "".join([f" {epilogue}+bias" if epilogue else "", f" beta {beta}" if beta else "", f" +{offset}B" if offset else ""])
    return {"case": f"{text} {precision}{what}", "tile": "x".join(map(str, desc.tile)), "stages": desc.stages,
            "blasdx_TFLOPs": flops / blasdx_ms / 1e9, "torch_TFLOPs": flops / torch_ms / 1e9, "ratio": torch_ms / blasdx_ms}


def batched_case(batch, m, n, k, prec, repeats):
    """A batch of ``batch`` GEMMs (3-D arrays) against torch.matmul on the same batch."""
    import torch

    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    a = torch.randn(batch, m, k, device="cuda").to(dtypes[prec[0]])
    b = torch.randn(batch, n, k, device="cuda").to(dtypes[prec[1]]).transpose(1, 2)
    c = torch.empty(batch, m, n, device="cuda", dtype=dtypes[prec[2]])
    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid()
    desc.execute(a, b, c)
    check(c, torch.matmul(a.double(), b.double()), repr(desc), 1e-2)
    blasdx_ms = timed(lambda: desc.execute(a, b, c), repeats)
    out = torch.empty(batch, m, n, device="cuda", dtype=dtypes[prec[0]])
    torch_ms = timed(lambda: torch.matmul(a, b, out=out), repeats)
    flops = 2 * batch * m * n * k
    return {"case": f"{batch} x {m}x{n}x{k} {'->'.join(dict.fromkeys(prec))}", "tile": "x".join(map(str, desc.tile)),
            "stages": desc.stages, "blasdx_TFLOPs": flops / blasdx_ms / 1e9, "torch_TFLOPs": flops / torch_ms / 1e9,
            "ratio": torch_ms / blasdx_ms}


def special_case(m, n, k, prec, repeats):
    """tfloat32 (torch with TF32 on) and int8 (torch._int_mm) against their cuBLAS counterparts."""
    import torch

    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid()
    if prec[0] == "int8":
        a = torch.randint(-8, 8, (m, k), device="cuda", dtype=torch.int8)
        b = torch.randint(-8, 8, (n, k), device="cuda", dtype=torch.int8).t()
        c = torch.empty(m, n, device="cuda", dtype=torch.int32)
        desc.execute(a, b, c)
        assert torch.equal(c, torch._int_mm(a, b)), repr(desc)
        reference = lambda: torch._int_mm(a, b)  # noqa: E731
    else:
        a, b, c = operands(m, n, k, torch.float32, torch.float32)
        desc.execute(a, b, c)
        check(c, a.double() @ b.double(), repr(desc), 5e-3)
        out = torch.empty(m, n, device="cuda", dtype=torch.float32)

        def reference():
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.matmul(a, b, out=out)
            torch.backends.cuda.matmul.allow_tf32 = False
    blasdx_ms = timed(lambda: desc.execute(a, b, c), repeats)
    torch_ms = timed(reference, repeats)
    flops = 2 * m * n * k
    return {"case": f"{m}x{n}x{k} {'->'.join(dict.fromkeys(prec))}", "tile": "x".join(map(str, desc.tile)),
            "stages": desc.stages, "blasdx_TFLOPs": flops / blasdx_ms / 1e9, "torch_TFLOPs": flops / torch_ms / 1e9,
            "ratio": torch_ms / blasdx_ms}


# --classes: issue 49's classes of plain GEMMs (RCR), each a few shapes the main cases do not use.
BF16F32, BF16, F16 = ("bfloat16", "bfloat16", "float32"), ("bfloat16",) * 3, ("float16",) * 3
CLASSES = {
    "LLM projections": [(8192, 14336, 4096, BF16F32), (6144, 5120, 2048, BF16), (4096, 28672, 4096, BF16),
                        (16384, 4096, 14336, BF16), (2048, 12288, 4096, F16), (8192, 8192, 1024, BF16)],
    "square mid-size": [(1536, 1536, 1536, F16), (2048, 2048, 2048, BF16), (1792, 1792, 1792, F16),
                        (3072, 3072, 3072, BF16)],
    "shallow K": [(8192, 8192, 256, F16), (16384, 4096, 256, BF16), (4096, 4096, 512, BF16F32)],
    "deep K": [(3072, 3072, 8192, BF16), (5120, 5120, 8192, BF16), (2560, 2560, 8192, BF16F32),
               (3072, 3072, 12288, F16)],
    "skinny": [(128, 8192, 8192, BF16), (256, 8192, 4096, F16), (8192, 128, 8192, BF16), (1024, 1024, 16384, BF16)],
    "small": [(512, 512, 512, F16), (768, 1024, 512, BF16), (1024, 1024, 1024, BF16)],
    "float32, float64": [(3000, 3000, 3000, ("float32",) * 3), (2048, 2048, 2048, ("float32",) * 3),
                         (3000, 3000, 3000, ("float64",) * 3), (2048, 2048, 2048, ("float64",) * 3)],
}
CLASS_BATCHES = [(16, 1024, 1024, 1024, BF16), (64, 512, 512, 256, F16), (8, 2048, 2048, 512, BF16F32)]
CLASS_SPECIAL = [(4096, 4096, 4096, ("tfloat32", "tfloat32", "float32")), (8192, 8192, 8192, ("int8", "int8", "int32")),
                 (4096, 4096, 4096, ("int8", "int8", "int32"))]


# Tiles small enough for two blocks of the TMA kernel on an SM (GridPlan.blocks_per_sm).
TWO_BLOCKS_A_SM = [(Tile(64, 128, 64), BlockDim(128), Stages(3)), (Tile(128, 64, 64), BlockDim(128), Stages(4))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="the main cases only")
    parser.add_argument("--sweep-only", action="store_true", help="the Stages and Tile sweep (4096^3, 8192^3, 4000x3000x1000) only")
    parser.add_argument("--sweep-fma", action="store_true",
                        help="a Tile and BlockDim sweep of float32 (FMA) and float64 (DMMA) 4096^3 only")
    parser.add_argument("--classes", action="store_true",
                        help="issue 49's sweep: shapes of every class (projections, square, shallow K, deep K, skinny, small, "
                             "batched, float32, float64, tfloat32, int8, fused) only")
    parser.add_argument("--cases", help="only these cases, MxNxKxABC (ABC: r row-major, c column-major)")
    parser.add_argument("--precision", default="float16", help="of --cases (default float16)")
    parser.add_argument("--epilogue", help="of --cases: a bias and this epilogue (gelu, relu, ...)")
    parser.add_argument("--beta", type=float, default=0.0, help="of --cases")
    parser.add_argument("--offset", type=int, default=0,
                        help="of --cases: A, B and C this many bytes past a 16-byte boundary (the cp.async kernel)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # float32 is float32 on both sides
    r = args.repeats
    rows = []

    def add(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    f16f32, bf16f32, f16 = ("float16", "float16", "float32"), ("bfloat16", "bfloat16", "float32"), ("float16",) * 3
    cases = [(4096, 4096, 4096, f16f32), (8192, 8192, 8192, f16f32), (4096, 4096, 4096, bf16f32),
             (8192, 8192, 8192, bf16f32), (4096, 4096, 4096, f16), (4000, 3000, 1000, f16), (1000, 1000, 4096, f16),
             (4096, 4096, 4096, ("float32",) * 3), (4096, 4096, 4096, ("float64",) * 3),
             (256, 256, 16384, f16f32), (512, 512, 8192, f16)]  # the last two: few tiles, split-K
    if not args.quick:
        cases += [(2048, 2048, 2048, f16), (1024, 1024, 1024, f16), (8191, 8191, 127, f16), (127, 8191, 8191, f16),
                  (3001, 2999, 997, bf16f32), (16384, 256, 4096, f16),
                  # odd leading dimensions (rows off 4-byte boundaries: shifted 16-byte copies)
                  (4096, 4096, 4095, f16f32), (1000, 1000, 4095, f16f32), (8191, 8191, 8191, f16f32)]
    main_cases = not (args.cases or args.sweep_only or args.sweep_fma or args.classes)
    if args.classes:  # one failing case (a reference torch lacks) is said and the sweep goes on
        runs = [(gemm_case, (m, n, k, prec, r)) for shapes in CLASSES.values() for m, n, k, prec in shapes]
        runs += [(batched_case, (*case, r)) for case in CLASS_BATCHES]
        runs += [(special_case, (*case, r)) for case in CLASS_SPECIAL]
        runs += [(fused_case, (m, n, k, r)) for m, n, k in [(4096, 4096, 4096), (8192, 4096, 1024)]]
        for fn, case in runs:
            try:
                add(fn(*case))
            except Exception as exc:  # noqa: BLE001 - reported, not hidden
                print(f"FAILED {fn.__name__}{case[:-1]}: {type(exc).__name__}: {exc}", flush=True)
    for text in args.cases.split() if args.cases else []:
        add(chosen_case(text, args.precision, args.epilogue, args.beta, args.offset, r))
    if args.sweep_fma:
        for prec in [("float32",) * 3, ("float64",) * 3]:
            for tile in [(64, 64, 16), (128, 64, 16), (128, 128, 16), (128, 128, 8), (64, 64, 32), (128, 64, 32)]:
                for threads in [(), (BlockDim(128),), (BlockDim(256),)]:
                    add(gemm_case(4096, 4096, 4096, prec, r, (Tile(*tile), *threads)))
    for m, n, k, prec in cases if main_cases else []:
        add(gemm_case(m, n, k, prec, r))
    for m, n, k in [(4096, 4096, 4096), (4000, 3000, 1000)] if main_cases else []:
        add(fused_case(m, n, k, r))
    if args.sweep_only or main_cases and not args.quick:
        sweep = [(Stages(2),), (Stages(3),), (Tile(128, 256, 64),), (Tile(256, 128, 32), Stages(6)),
                 (Tile(128, 128, 64),), (Tile(128, 128, 64), Stages(6)), (Tile(128, 128, 64), BlockDim(128)),
                 (Tile(128, 256, 64), BlockDim(256), Stages(3)), (Tile(128, 256, 64), BlockDim(256), Stages(4)),
                 (Tile(256, 128, 64), BlockDim(256)), (Tile(256, 128, 64), BlockDim(256), Stages(3)),
                 (Tile(128, 192, 64), BlockDim(256)), TWO_BLOCKS_A_SM[0], TWO_BLOCKS_A_SM[1]]
        for size in [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 3000, 1000)]:
            planned = [] if main_cases and (*size, f16f32) in cases else [()]  # the planner's choice, once
            for extra in planned + sweep:
                add(gemm_case(*size, f16f32, r, extra))
        for m, n, k in [(4096, 4096, 4096), (4000, 3000, 1000)]:
            for extra in [(Tile(128, 256, 64),), (Tile(128, 128, 64), BlockDim(128)), *TWO_BLOCKS_A_SM]:
                add(fused_case(m, n, k, r, extra))
    name = torch.cuda.get_device_name()
    print(f"\nSUMMARY {name}, blasdx {blasdx.__version__}: grid-level GEMM vs torch.matmul (TFLOP/s, ratio = torch time / "
          f"blasdx time)")
    for row in rows:
        if "blasdx_TFLOPs" in row:
            print(f"{row['case']:<48} tile {row['tile']:<10} s{row['stages']}  blasdx {row['blasdx_TFLOPs']:7.1f}  "
                  f"torch {row['torch_TFLOPs']:7.1f}  {row['ratio']:.2f}x")
        else:
            print(f"{row['case']:<48} blasdx {row['blasdx_ms']:.3f} ms (plain {row['blasdx_plain_ms']:.3f})  torch "
                  f"{row['torch_ms']:.3f} ms  {row['ratio']:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": name, "rows": rows}, f, indent=1)
    report(results_of(rows))


def results_of(rows: list[dict]) -> list[tuple[str, float, str]]:
    """The rows ab.py compares: (case, value, unit)."""
    out = []
    for row in rows:
        if "blasdx_TFLOPs" in row:
            out += [(row["case"], row["blasdx_TFLOPs"], "TFLOP/s"), (f"{row['case']} torch.matmul", row["torch_TFLOPs"], "TFLOP/s")]
        else:
            out += [(row["case"], row["blasdx_ms"], "ms"), (f"{row['case']} plain", row["blasdx_plain_ms"], "ms"),
                    (f"{row['case']} torch", row["torch_ms"], "ms")]
    return out


if __name__ == "__main__":
    main()
