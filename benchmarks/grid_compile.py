"""Cold compile time of the grid kernels behind Grid() descriptors' execute() (CPU, no GPU):
render and NVRTC for every precision family, plain and with a fused gelu (relu for integers,
negate for complex) and bias epilogue, on the kernel 16-byte aligned arrays get (TMA on SM 900 where the tile is
wgmma's) and, where that is TMA's, on the one of unaligned arrays (cp.async). The disk cache is off; each
kernel is compiled once, in one process, after a first compile that loads NVRTC.

    python benchmarks/grid_compile.py
"""

from __future__ import annotations

import os
import statistics
import time

os.environ["BLASDX_DISABLE_DISK_CACHE"] = "1"

import blasdx  # noqa: E402
from blasdx import SM, Arrangement, Grid, Precision, Size, Type  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")
FAMILIES = [(("float16", "float16", "float32"), False), (("float16",) * 3, False), (("bfloat16", "bfloat16", "float32"), False),
            (("tfloat32", "tfloat32", "float32"), False), (("float8_e4m3", "float8_e4m3", "float32"), False),
            (("int8", "int8", "int32"), False), (("float32",) * 3, False), (("float64",) * 3, False),
            (("float32",) * 3, True)]


def cold_compile(desc, alignment: int, fused: bool) -> tuple[float, bool]:
    plan = blasdx.plan.grid_with_alignment(desc.plan, (alignment,) * 3)
    epilogue = ("negate" if desc.is_complex else "relu" if desc.precision.a == "int8" else "gelu") if fused else None
    fusion = blasdx.pipeline.fusion(desc, None, epilogue, None, None, None, None, fused)
    start = time.perf_counter()
    blasdx.pipeline.compile_for_arch(plan, 900, fusion)
    return time.perf_counter() - start, plan.tma


def main() -> None:
    warm_up = Size(64, 64, 64) + Precision("float16") + RCR + SM(900) + Grid()
    cold_compile(warm_up, 16, False)  # NVRTC's first program loads the library
    rows = []
    for prec, complex_ in FAMILIES:
        desc = Size(4096, 4096, 4096) + Precision(*prec) + RCR + SM(900) + Grid()
        if complex_:
            desc = desc + Type("complex")
        name = ("c" if complex_ else "") + "->".join(dict.fromkeys(prec))
        tma_runs = blasdx.plan.grid_with_alignment(desc.plan, (16,) * 3).tma
        for alignment in (16, 1) if tma_runs else (16,):  # 1: odd addresses, the cp.async kernel
            for fused in (False, True):
                seconds, tma = cold_compile(desc, alignment, fused)
                rows.append(seconds)
                print(f"{name:<28} {'TMA' if tma else 'cp.async':<9} {'fused' if fused else 'plain':<6} {seconds:6.2f} s",
                      flush=True)
    print(f"\nmedian {statistics.median(rows):.2f} s, max {max(rows):.2f} s over {len(rows)} kernels")


if __name__ == "__main__":
    main()
