"""Grid() kernels of this checkout against an earlier version, as ratios to torch.matmul, on
PyTorch tensors of random data (CUDA events, median of 10 launches after warm-up).

``--old`` is either a templates/ directory (this checkout's planner with those templates, which
must take its render context: see compare_templates.py) or a tree holding an earlier blasdx/ and
templates/ (both earlier: planner changes). A version's kernels may keep their names, so each
version runs in a process of its own (BLASDX_TEMPLATES_DIR or PYTHONPATH, disk cache off),
alternating for --rounds; each process times torch.matmul beside its kernels (before and after
them; the faster counts) and checks every result against it.

    git archive REV templates | tar -x -C .old          # .old/templates: --old .old/templates
    git archive REV blasdx templates | tar -x -C .old   # .old/blasdx too: --old .old
    python3 benchmarks/grid_ab.py --old .old/templates [--precision float32] [--rounds 3]
        [--cases "4096x4096x4096xrcr 8192x8192x8192xrcr"] [--epilogue gelu] [--beta 0.5] [--offset 8]

A case is MxNxKxABC with the arrangement's letters (r row-major, c column-major); with --epilogue,
blasdx also adds a bias of n values and applies the epilogue, and with --beta it adds beta C
(torch.matmul alone stays the reference time, so the ratio shows what the fusion or the read of C
costs). --offset BYTES starts A, B and C that many bytes past a 16-byte boundary (views into larger
buffers): the grid kernel then copies A and B with cp.async, not TMA.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

DEFAULT_CASES = "4096x4096x4096xrcr 8192x8192x8192xrcr 2048x2048x2048xrcr 4000x3000x1000xrcr 1000x1000x4096xrcr"
LAYOUTS = {"r": "row_major", "c": "col_major"}
# Relative error allowed against the float64 product, by precision (16-bit C rounds each value).
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def parse_case(text: str) -> tuple[int, int, int, str]:
    *size, arrangement = text.split("x")
    return int(size[0]), int(size[1]), int(size[2]), arrangement


def measure(precision: str, cases: list[str], epilogue: str | None, beta: float, offset: int) -> list[float]:
    """Ratios torch.matmul time / blasdx time of each case, in this process."""
    import torch
    from grid_gemm import timed  # benchmarks/ is on the path when this script runs

    from blasdx import SM, Arrangement, Grid, Precision, Size

    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = getattr(torch, precision)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if offset % itemsize:
        raise SystemExit(f"--offset {offset} is not a whole number of {precision} elements")

    def matrix(rows: int, cols: int, layout: str) -> torch.Tensor:
        """A random rows x cols matrix in layout, starting offset bytes into its own buffer."""
        outer, inner = (rows, cols) if layout == "r" else (cols, rows)
        buffer = torch.randn(outer * inner + offset // itemsize, device="cuda", dtype=dtype)
        view = buffer[offset // itemsize:].view(outer, inner)
        return view if layout == "r" else view.t()

    ratios = []
    for text in cases:
        m, n, k, arrangement = parse_case(text)
        a, b, c = matrix(m, k, arrangement[0]), matrix(k, n, arrangement[1]), matrix(m, n, arrangement[2])
        reference_out = torch.empty(m, n, device="cuda", dtype=dtype)
        ref = a.double() @ b.double() + beta * c.double()
        extra = {"beta": beta} if beta else {}
        if epilogue:
            bias = torch.randn(n, device="cuda", dtype=dtype)
            extra.update(bias=bias, epilogue=epilogue)
            ref = getattr(torch.nn.functional, epilogue)(ref + bias.double())
        desc = Size(m, n, k) + Precision(precision) + Arrangement(*(LAYOUTS[x] for x in arrangement)) + SM(900) + Grid()
        desc.execute(a, b, c, **extra)
        err = float((c.double() - ref).norm() / ref.norm())
        if not err <= TOLERANCE[precision]:
            raise AssertionError(f"{text}: relative error {err:.3g}")
        def torch_matmul(a=a, b=b, out=reference_out):
            torch.matmul(a, b, out=out)

        def blasdx_gemm(desc=desc, a=a, b=b, c=c, extra=extra):
            desc.execute(a, b, c, **extra)

        before, ours, after = (timed(f, 10) for f in (torch_matmul, blasdx_gemm, torch_matmul))
        ratios.append(min(before, after) / ours)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="an earlier templates/ directory, or a tree with blasdx/ and templates/")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--epilogue", default=None)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--offset", type=int, default=0, help="bytes past a 16-byte boundary where A, B and C start")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cases = args.cases.split()
    if args.child:
        print(" ".join(f"{r:.4f}" for r in measure(args.precision, cases, args.epilogue, args.beta, args.offset)))
        return
    versions = {"old": os.path.abspath(args.old), "new": None}
    ratios: dict[str, list[list[float]]] = {name: [] for name in versions}
    for _ in range(args.rounds):
        for name, directory in versions.items():
            env = dict(os.environ, BLASDX_DISABLE_DISK_CACHE="1")
            env.pop("BLASDX_TEMPLATES_DIR", None)
            if directory and os.path.isdir(os.path.join(directory, "blasdx")):
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [directory, env.get("PYTHONPATH")]))
            elif directory:
                env["BLASDX_TEMPLATES_DIR"] = directory
            command = [sys.executable, __file__, "--old", args.old, "--precision", args.precision, "--cases", args.cases, "--child"]
            command += ["--beta", str(args.beta), "--offset", str(args.offset)]
            if args.epilogue:
                command += ["--epilogue", args.epilogue]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            ratios[name].append([float(x) for x in out.split()])
            print(name, out.strip(), flush=True)
    what = (f"{args.precision}{' ' + args.epilogue + ' + bias' if args.epilogue else ''}"
            f"{f', beta {args.beta}' if args.beta else ''}{f', arrays {args.offset} bytes off' if args.offset else ''}")
    print(f"\n{what}: ratio to torch.matmul, median of {args.rounds} rounds (old -> new)")
    for i, case in enumerate(cases):
        old, new = (statistics.median(r[i] for r in ratios[name]) for name in ("old", "new"))
        print(f"{case:>22}  {old:.3f}x -> {new:.3f}x  ({new / old:.3f})")


if __name__ == "__main__":
    main()
