"""Compile time on the CPU (no GPU): cold NVRTC, the first and later disk hits in a fresh process, and
a memory hit, for the kernels execute() runs: Block() descriptors of every precision family, and Grid()
ones plain and fused (TMA and, where TMA runs, cp.async). The cache lives in a fresh directory.

    python benchmarks/bench_compile.py [--kind block|grid|all|numba]

--kind numba: a descriptor's first use from Numba (issue 50), for numba_block.py's cases: blasdx.numba.device_api()
cold (render + NVRTC to LTO-IR) and from the disk cache in a fresh process; then, beside them, Numba's compile of
that harness's kernel of multiplies and nvJitLink's link of it with blasdx's LTO-IR (LTO, to a cubin for SM 900).
Needs numba-cuda and cuda.core, no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ab import report

import blasdx.compiler
import blasdx.pipeline
import blasdx.plan
from blasdx import SM, Arrangement, Block, Grid, Precision, Size, Type

LAYOUTS = {"r": "row_major", "c": "col_major"}
BLOCK_CASES = [  # size, precisions, arrangement, complex
    ((64, 64, 64), ("float16", "float16", "float32"), "rrr", False),  # wgmma
    ((128, 128, 64), ("float16",) * 3, "rrr", False),
    ((32, 32, 32), ("float16",) * 3, "rcr", False),  # mma.sync
    ((64, 64, 64), ("bfloat16", "bfloat16", "float32"), "crc", False),
    ((64, 64, 64), ("tfloat32", "tfloat32", "float32"), "rcr", False),
    ((128, 128, 128), ("float8_e4m3", "float8_e4m3", "float32"), "rcr", False),
    ((64, 64, 128), ("int8", "int8", "int32"), "rcr", False),
    ((64, 32, 128), ("int4", "uint4", "int32"), "rcr", False),
    ((32, 64, 256), ("binary", "binary", "int32"), "rcr", False),
    ((64, 64, 64), ("float32",) * 3, "rrr", False),  # FMA
    ((32, 32, 32), ("float64",) * 3, "rrr", False),
    ((32, 32, 32), ("float32",) * 3, "rrr", True),
]
GRID_FAMILIES = [  # precisions, complex; each 4096^3 RCR
    (("float16", "float16", "float32"), False), (("float16",) * 3, False), (("bfloat16", "bfloat16", "float32"), False),
    (("tfloat32", "tfloat32", "float32"), False), (("float8_e4m3", "float8_e4m3", "float32"), False),
    (("int8", "int8", "int32"), False), (("float32",) * 3, False), (("float64",) * 3, False), (("float32",) * 3, True),
]


def family(precisions, is_complex: bool) -> str:
    return ("c" if is_complex else "") + "->".join(dict.fromkeys(precisions))


def kernels(kind: str) -> list[tuple[str, object]]:
    """(name, compile) of every kernel: compile() compiles it for SM 900 through the default cache."""
    out = []
    if kind in ("block", "all"):
        for size, precisions, arrangement, is_complex in BLOCK_CASES:
            desc = (Size(*size) + Precision(*precisions) + Arrangement(*(LAYOUTS[x] for x in arrangement)) + SM(900)
                    + Block())
            desc = desc + Type("complex") if is_complex else desc
            name = f"Block {'x'.join(map(str, size))} {family(precisions, is_complex)} {arrangement}"
            out.append((name, lambda desc=desc: desc.compile(arch=900)))
    if kind in ("grid", "all"):
        for precisions, is_complex in GRID_FAMILIES:
            desc = Size(4096, 4096, 4096) + Precision(*precisions) + Arrangement(*(LAYOUTS[x] for x in "rcr")) + SM(900) + Grid()
            desc = desc + Type("complex") if is_complex else desc
            tma_runs = blasdx.plan.grid_with_alignment(desc.plan, (16,) * 3).tma
            epilogue = "negate" if is_complex else "relu" if precisions[0] == "int8" else "gelu"
            for alignment in (16, 1) if tma_runs else (16,):  # 1: odd addresses, the cp.async kernel
                plan = blasdx.plan.grid_with_alignment(desc.plan, (alignment,) * 3)
                for fused in (False, True):
                    fusion = blasdx.pipeline.fusion(desc, None, epilogue if fused else None, None, None, None, None, fused)
                    name = (f"Grid {family(precisions, is_complex)} {'TMA' if plan.tma else 'cp.async'}"
                            f"{f' {epilogue}+bias' if fused else ''}")
                    out.append((name, lambda plan=plan, fusion=fusion: blasdx.pipeline.compile_for_arch(plan, 900, fusion)))
    return out


def seconds(compile_) -> float:
    start = time.perf_counter()
    compile_()
    return time.perf_counter() - start


def disk_hits(kind: str) -> None:
    """In a fresh process: the first disk hit (loading NVRTC's bindings and the cache) and the mean of
    the later ones, as JSON."""
    compiles = [compile_ for _, compile_ in kernels(kind)]  # planned outside the timing
    first = seconds(compiles[0])
    later = [seconds(compile_) for compile_ in compiles[1:]]
    print(json.dumps({"first": first, "later": statistics.mean(later) if later else first,
                      "cupy imported": "cupy" in sys.modules}))


def numba_descriptors() -> list[tuple[str, object]]:
    from numba_block import ARRANGEMENT, CASES
    return [(name, Size(*size) + Precision(pa, pa, pc) + Arrangement(*ARRANGEMENT) + SM(900) + Block())
            for name, size, pa, pc in CASES]


def numba_disk_hits() -> None:
    """In a fresh process (Numba imported first: its import is not blasdx's time): device_api() of every case,
    each a disk hit, as JSON."""
    import numba.cuda  # noqa: F401

    import blasdx.numba
    times = {}
    for name, desc in numba_descriptors():
        times[name] = seconds(lambda desc=desc: blasdx.numba.device_api(desc, arch=900))
    print(json.dumps(times))


def numba_first_use() -> None:
    import warnings

    import numpy as np
    from cuda import core
    from numba import cuda, typeof
    from numba.core import types
    from numba_block import NUMPY, numba_kernel

    import blasdx.numba

    def array(precision: str):  # Numba's type of a 1-D array of the precision's NumPy type
        return typeof(np.empty(1, NUMPY[precision]))

    warm_up = Size(64, 64, 64) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900)
    (warm_up + Block()).compile(arch=900)  # NVRTC's first program loads the library
    rows = []
    for name, desc in numba_descriptors():
        start = time.perf_counter()
        g = blasdx.numba.device_api(desc, arch=900)
        cold = time.perf_counter() - start
        signature = (array(desc.precision.a), array(desc.precision.b), array(desc.precision.c), types.int32)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Numba's performance warnings on a CPU compile
            codes, _ = cuda.compile_all(numba_kernel(cuda, g).py_func, signature, device=False, cc=(9, 0, "a"),
                                        output="ltoir", abi="numba")
        numba_s = time.perf_counter() - start
        objects = [c if isinstance(c, core.ObjectCode) else core.ObjectCode.from_ltoir(getattr(c, "data", c)) for c in codes]
        start = time.perf_counter()
        core.Linker(*objects, options=core.LinkerOptions(arch="sm_90a", link_time_optimization=True)).link("cubin")
        rows.append((name, cold, numba_s, time.perf_counter() - start))
        print(f"{name:24s} device_api cold {cold:5.2f} s, Numba's compile {numba_s:5.2f} s, link {rows[-1][3]:5.2f} s",
              flush=True)
    done = subprocess.run([sys.executable, __file__, "--kind", "numba", "--disk-hits"], capture_output=True, text=True,
                          check=True)
    hits = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nNVRTC {'.'.join(map(str, blasdx.compiler.nvrtc_version()))}, {os.cpu_count()} cores, sm_90a; seconds")
    print(f"{'case':24s} {'device_api cold':>15s} {'disk hit':>9s} {'link':>6s} {'Numba':>6s}")
    for name, cold, numba_s, link_s in rows:
        print(f"{name:24s} {cold:15.3f} {hits[name]:9.3f} {link_s:6.3f} {numba_s:6.3f}")
    report([*((f"numba cold {r[0]}", r[1], "s") for r in rows), *((f"numba disk hit {n}", s, "s") for n, s in hits.items()),
            *((f"numba link {r[0]}", r[3], "s") for r in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("block", "grid", "all", "numba"), default="all")
    parser.add_argument("--disk-hits", action="store_true", help=argparse.SUPPRESS)  # the fresh process's part
    args = parser.parse_args()
    if args.disk_hits:
        return numba_disk_hits() if args.kind == "numba" else disk_hits(args.kind)
    if args.kind == "numba":
        with tempfile.TemporaryDirectory(prefix="blasdx-compile-") as cache:
            os.environ["BLASDX_CACHE_DIR"] = cache
            os.environ.pop("BLASDX_DISABLE_DISK_CACHE", None)
            return numba_first_use()
    with tempfile.TemporaryDirectory(prefix="blasdx-compile-") as cache:
        os.environ["BLASDX_CACHE_DIR"] = cache
        os.environ.pop("BLASDX_DISABLE_DISK_CACHE", None)
        cases = kernels(args.kind)
        warm_up = Size(64, 64, 64) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900)
        (warm_up + Block()).compile(arch=900)  # NVRTC's first program loads the library
        cold = {}
        for name, compile_ in cases:
            cold[name] = seconds(compile_)
            print(f"{name:44s} {cold[name]:6.2f} s", flush=True)
        memory = statistics.median(seconds(compile_) for _, compile_ in cases for _ in range(100))
        done = subprocess.run([sys.executable, __file__, "--kind", args.kind, "--disk-hits"], capture_output=True,
                              text=True, check=True)
        hits = json.loads(done.stdout)
    print(f"\nNVRTC {'.'.join(map(str, blasdx.compiler.nvrtc_version()))}, {os.cpu_count()} cores, {len(cases)} kernels, "
          f"sm_90")
    print(f"cold compile: median {statistics.median(cold.values()):.2f} s, max {max(cold.values()):.2f} s")
    print(f"disk hit in a fresh process: first {hits['first'] * 1e3:.1f} ms (CuPy imported: {hits['cupy imported']}), "
          f"later {hits['later'] * 1e3:.1f} ms each")
    print(f"memory hit: {memory * 1e6:.1f} us")
    report([*((f"cold {name}", s, "s") for name, s in cold.items()), ("disk hit first", hits["first"] * 1e3, "ms"),
            ("disk hit later", hits["later"] * 1e3, "ms"), ("memory hit", memory * 1e6, "us")])


if __name__ == "__main__":
    main()
