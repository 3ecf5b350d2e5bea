"""Ablation: Grid()'s FMA tiles (float32, complex float32) on two blocks an SM.

The planner gives a cp.async grid kernel one block an SM (`GridPlan.blocks_per_sm`): the float32
128x128x32 tile on 256 threads takes 250 registers (RCR), so an SM runs 8 warps, two a scheduler.
Under `__launch_bounds__(256, 2)` ptxas fits the same kernel in 128 registers without spills, and
three stages of two blocks fit in shared memory. This script renders the kernels from a copy of
templates/ whose grid kernel asks for two blocks an SM and times them, on the planner's stages and
on Stages(3) and Stages(2), against the kernels as planned and torch.matmul, in alternating rounds
(the launch fills the device by the occupancy API, so the persistent grid doubles by itself).
Every result is checked against torch in float64 before it is timed.

    python3 benchmarks/ablate_grid_blocks.py [--rounds 3] [--compile-only]

``--compile-only`` (no GPU) prints each variant's registers and spills from ptxas.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from grid_gemm import timed  # benchmarks/ is on the path when this script runs

import blasdx
import blasdx.pipeline
from blasdx import SM, Arrangement, Grid, Precision, Size, Stages, Type
from blasdx.codegen.render import templates_dir

LAYOUTS = {"r": "row_major", "c": "col_major"}
CASES = [  # m, n, k, arrangement, complex
    (4096, 4096, 4096, "rcr", False), (4096, 4096, 4096, "rrr", False), (4096, 4096, 4096, "ccc", False),
    (2048, 2048, 2048, "rcr", False), (4000, 3000, 1000, "rcr", False), (1000, 1000, 4096, "rcr", False),
    (3001, 2999, 997, "rrr", False), (2048, 2048, 2048, "rcr", True),
    # the other arrangements, and row-major A and B (where two blocks paid) at more sizes
    (4096, 4096, 4096, "crr", False), (4096, 4096, 4096, "rrc", False), (4096, 4096, 4096, "crc", False),
    (2048, 2048, 2048, "rrr", False), (4000, 3000, 1000, "rrr", False), (1000, 1000, 4096, "rrr", False),
    (8192, 8192, 8192, "rrr", False), (2048, 2048, 2048, "rrr", True), (2048, 2048, 2048, "ccc", True),
]
REPEATS = 10  # timed launches a measurement (median)
LAUNCH_BOUNDS = "__launch_bounds__({{ block_threads }}, {{ blocks_per_sm }})"


def two_blocks_templates() -> str:
    """A copy of templates/ whose grid kernel asks ptxas for two blocks an SM."""
    copy = Path(tempfile.mkdtemp(prefix="blasdx_two_blocks_")) / "templates"
    shutil.copytree(templates_dir(), copy)
    kernel = copy / "grid.cu.j2"
    text = kernel.read_text()
    if LAUNCH_BOUNDS not in text:
        raise SystemExit(f"grid.cu.j2 no longer has {LAUNCH_BOUNDS!r}; update this ablation")
    kernel.write_text(text.replace(LAUNCH_BOUNDS, "__launch_bounds__({{ block_threads }}, 2)"))
    return str(copy)


def descriptor(m, n, k, arrangement, is_complex, stages=None):
    desc = Size(m, n, k) + Precision("float32") + Arrangement(*(LAYOUTS[x] for x in arrangement)) + SM(900) + Grid()
    if is_complex:
        desc = desc + Type("complex")
    return desc if stages is None else desc + Stages(stages)


def variants(case, two_blocks: str):
    """(name, descriptor, templates directory or None) of one case."""
    planned = descriptor(*case)
    out = [("planned", planned, None), ("2 blocks", planned, two_blocks)]
    for stages in (3, 2):
        if stages != planned.stages:
            out.append((f"2 blocks, {stages} stages", descriptor(*case, stages=stages), two_blocks))
    return out


def use_templates(directory: str | None) -> None:
    """Render from ``directory`` (None: this checkout's templates). The in-process caches key on
    the plan alone, so they are cleared; the disk cache keys on the templates too, and serves the
    later rounds."""
    if directory:
        os.environ["BLASDX_TEMPLATES_DIR"] = directory
    else:
        os.environ.pop("BLASDX_TEMPLATES_DIR", None)
    blasdx.pipeline.clear_caches()


def registers(desc, directory: str | None) -> str:
    """ptxas's registers and spills for the kernel 16-byte aligned arrays get."""
    use_templates(directory)
    plan = blasdx.plan.grid_with_alignment(desc.plan, (16,) * 3)
    fusion = blasdx.pipeline.fusion(desc, None, None, None, None, None, None, False)
    r = blasdx.pipeline.compile_for_arch(plan, 900, fusion).resources
    return "no ptxas report" if r is None else (
        f"{r.registers} registers, spills {r.spill_store_bytes}/{r.spill_load_bytes} bytes")


def operands(case):
    import torch

    m, n, k, arrangement, is_complex = case
    dtype = torch.complex64 if is_complex else torch.float32

    def matrix(rows, cols, layout):
        x = torch.randn(rows, cols, device="cuda", dtype=dtype) if layout == "r" else \
            torch.randn(cols, rows, device="cuda", dtype=dtype).t()
        return x

    return matrix(m, k, arrangement[0]), matrix(k, n, arrangement[1]), matrix(m, n, arrangement[2])


def measure(case, two_blocks: str, rounds: int) -> str:
    """One case's variants and torch.matmul in alternating rounds, as ratios to torch."""
    import torch

    a, b, c = operands(case)
    wide = torch.complex128 if case[4] else torch.float64
    ref = torch.matmul(a.to(wide), b.to(wide))
    out = torch.empty_like(c)
    flops = (8 if case[4] else 2) * case[0] * case[1] * case[2]
    rates: dict[str, list[float]] = {"torch": []}
    for _ in range(rounds):
        rates["torch"].append(flops / timed(lambda: torch.matmul(a, b, out=out), REPEATS) / 1e9)
        for name, desc, directory in variants(case, two_blocks):
            use_templates(directory)
            desc.execute(a, b, c)
            err = float((c.to(wide) - ref).norm() / ref.norm())
            if not err <= 1e-4:
                raise AssertionError(f"{case} {name}: relative error {err:.3g}")
            rates.setdefault(name, []).append(flops / timed(lambda desc=desc: desc.execute(a, b, c), REPEATS) / 1e9)
    use_templates(None)
    torch_rate = statistics.median(rates["torch"])
    return f"{case}: torch {torch_rate:.1f} TFLOP/s; " + ", ".join(
        f"{name} {statistics.median(r) / torch_rate:.3f}x" for name, r in rates.items() if name != "torch")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    two_blocks = two_blocks_templates()
    if args.compile_only:
        for case in CASES:
            for name, desc, directory in variants(case, two_blocks):
                print(f"{case} {name:22s} stages {desc.stages}: {registers(desc, directory)}", flush=True)
        return
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    for case in CASES:
        print(measure(case, two_blocks, args.rounds), flush=True)


if __name__ == "__main__":
    main()
