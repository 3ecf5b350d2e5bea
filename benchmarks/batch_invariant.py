"""BatchInvariant() Grid() against torch.matmul (cuBLAS) over the rows of a call, M = 1 .. 16384, on PyTorch
tensors of random data: the weights B (k, n) fixed, A the first M rows of one (16384, k) matrix. Each result is
checked bitwise against the rows of the largest M's (the invariance itself) before it is timed; a tile that breaks
it stops the run. Times are the mean of a burst of calls between two CUDA events (small M's kernels last a few
microseconds: one call's events would time the launch), the median of five bursts.

    python3 benchmarks/batch_invariant.py [--shapes "4096x4096 14336x4096"] [--rows "1 64 512 16384"]
        [--precision bfloat16] [--tiles "suggested 128x128x64 64x128x64s6"] [--plain]

--tiles: the suggested tile, Tile(m, n, k) and Stages(s) (after an s: "s8", "128x128x64s3") under BatchInvariant(); --plain adds
Grid()'s own choice without BatchInvariant() (its tile fitted to each M, split-K on few tiles).
"""

from __future__ import annotations

import argparse
import statistics

from ab import report

import blasdx
from blasdx import SM, Arrangement, BatchInvariant, Grid, Precision, Size, Stages, Tile

RCR = Arrangement("row_major", "col_major", "row_major")


def burst_ms(fn, calls: int = 20, bursts: int = 5) -> float:
    """Milliseconds a call of fn takes in a burst of ``calls``, the median of ``bursts``, after warm-up."""
    import torch

    for _ in range(3):
        fn()
    times = []
    for _ in range(bursts):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def extra_operators(spec: str) -> tuple:
    """The operators a --tiles entry adds: "suggested" none, "s6" Stages(6), "128x128x64" Tile, "128x128x64s3" both."""
    if spec == "suggested":
        return ()
    tile, _, stages = spec.partition("s")
    ops: tuple = (Tile(*map(int, tile.split("x"))),) if tile else ()
    return ops + (Stages(int(stages)),) if stages else ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="4096x4096 14336x4096 4096x14336", help="n x k of the weights")
    parser.add_argument("--rows", default="1 16 64 128 512 1024 4096 16384")
    parser.add_argument("--precision", default="bfloat16", choices=("bfloat16", "float16"))
    parser.add_argument("--tiles", default="suggested")
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    import torch

    dtype = getattr(torch, args.precision)
    rows = sorted(map(int, args.rows.split()))
    specs = args.tiles.split()
    print(f"# {torch.cuda.get_device_name()}, blasdx {blasdx.__version__}, {args.precision} RCR, times in us")
    results = []  # (case, us, unit) for ab.py
    header = ["n x k", "M", "torch"] + [f"{s} (ratio)" for s in specs] + (["plain (ratio)"] if args.plain else [])
    print(" | ".join(header))
    for shape in args.shapes.split():
        n, k = map(int, shape.split("x"))
        a_all = torch.randn(max(rows), k, device="cuda").to(dtype)
        b = torch.randn(n, k, device="cuda").to(dtype).t()  # (k, n), column-major
        reference = {}  # per spec: C of the largest M, whose rows every smaller M must repeat bitwise
        for m in reversed(rows):
            a = a_all[:m]
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            torch_ms = burst_ms(lambda a=a, b=b, out=out: torch.matmul(a, b, out=out))
            cells = [shape, str(m), f"{torch_ms * 1e3:.1f}"]
            for spec in specs + (["plain"] if args.plain else []):
                desc = Size(m, n, k) + Precision(args.precision) + RCR + SM(900) + Grid()
                for op in (() if spec == "plain" else (BatchInvariant(),) + extra_operators(spec)):
                    desc = desc + op
                c = torch.empty(m, n, device="cuda", dtype=dtype)
                try:
                    desc.execute(a, b, c)
                except blasdx.UnsupportedError:  # as many stages do not fit this M's tile
                    cells.append("-")
                    continue
                if spec != "plain":
                    if spec not in reference:
                        reference[spec] = c.clone()
                        product = a.double() @ b.double()
                        err = float((c.double() - product).norm() / product.norm())
                        assert err < 1e-2, f"{desc!r}: relative error {err:.3g}"
                    elif not torch.equal(c, reference[spec][:m]):
                        raise AssertionError(f"{desc!r}: rows differ from M = {max(rows)}'s: not batch invariant")
                ms = burst_ms(lambda desc=desc, a=a, b=b, c=c: desc.execute(a, b, c))
                cells.append(f"{ms * 1e3:.1f} ({torch_ms / ms:.2f})")
                results.append((f"{shape} M={m} {spec}", ms * 1e3, "us"))
            results.append((f"{shape} M={m} torch", torch_ms * 1e3, "us"))
            print(" | ".join(cells), flush=True)
    report(results)


if __name__ == "__main__":
    main()
