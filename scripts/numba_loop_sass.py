"""The repeat loop of benchmarks/numba_block.py's Numba kernel against its C++ twin's, as machine code (no GPU):
the Numba kernel compiled to LTO-IR (compile_all) and linked by nvJitLink (cuda.core's Linker), the twin compiled
by blasdx's NVRTC to PTX and assembled by the same linker, both disassembled by nvdisasm; per case, the innermost
loop holding the MMA or FMA instructions: its length and its opcodes, and each kernel's registers.

    python scripts/numba_loop_sass.py [--only REGEX] [--nvdisasm PATH] [--reps-int64] [--keep DIR]

--reps-int64 types the Numba kernel's reps as a Python int is (int64; the benchmark passes an int32, as the
twin's int). Needs numba-cuda, cuda-core, CuPy (its NVRTC binding, for PTX) and nvdisasm.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

MMA = re.compile(r"\b(HGMMA|QGMMA|IGMMA|HMMA|IMMA|DMMA|FFMA|DFMA)\b")


def loop_body(sass: str) -> list[str]:
    """The instructions of the backward-branch loop with the most MMA/FMA instructions (the shortest on a tie)."""
    labels: dict[str, int] = {}
    instructions: list[str] = []
    for line in sass.splitlines():
        label = re.match(r"^(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        found = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if found:
            instructions.append(found.group(1))
    loops = []
    for i, text in enumerate(instructions):
        target = re.search(r"BRA `\((\.L_x_\d+)\)", text)
        if target and labels.get(target.group(1), i + 1) <= i:
            loops.append(instructions[labels[target.group(1)]:i + 1])
    if not loops:
        return []
    return max(loops, key=lambda body: (sum(bool(MMA.search(x)) for x in body), -len(body)))


def opcodes(body: list[str]) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for text in body:
        counts[re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]] += 1
    return dict(counts.most_common())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--nvdisasm", default=shutil.which("nvdisasm") or "nvdisasm")
    parser.add_argument("--reps-int64", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="BlockDim of every case (0: blasdx's suggestion)")
    parser.add_argument("--keep", default="", help="a directory for the cubins and disassemblies")
    args = parser.parse_args()
    import cuda.core as core
    import numba_block as bench
    from cupy.cuda import nvrtc
    from numba import cuda
    from numba.core import types

    import blasdx.numba
    from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size
    from blasdx.compiler.nvrtc import options_for

    element = {"float16": types.float16, "float32": types.float32, "float64": types.float64,
               "bfloat16": types.uint16, "float8_e4m3": types.uint8}
    keep = Path(args.keep or tempfile.mkdtemp(prefix="numba_loop_sass_"))
    keep.mkdir(parents=True, exist_ok=True)
    options = core.LinkerOptions(arch="sm_90a", link_time_optimization=True, verbose=True)
    for name, size, pa, pc in bench.CASES:
        if args.only and not re.search(args.only, name):
            continue
        desc = Size(*size) + Precision(pa, pa, pc) + Arrangement(*bench.ARRANGEMENT) + SM(900) + Block()
        if args.threads:
            desc = desc + BlockDim(args.threads)
        g = blasdx.numba.device_api(desc, arch=900)
        signature = (element[pa][::1], element[pa][::1], element[pc][::1],
                     types.int64 if args.reps_int64 else types.int32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            codes, _ = cuda.compile_all(bench.numba_kernel(cuda, g).py_func, signature, device=False,
                                        cc=(9, 0, "a"), output="ltoir", abi="numba")
        objects = [c if isinstance(c, core.ObjectCode) else core.ObjectCode.from_ltoir(getattr(c, "data", c))
                   for c in codes]
        linker = core.Linker(*objects, options=options)
        cubins = {"numba": bytes(linker.link("cubin").code)}
        logs = {"numba": linker.get_info_log()}
        source = desc.device_source("gemm") + bench.CPP
        program = nvrtc.createProgram(source, "repeat.cu", [], [])
        nvrtc.compileProgram(program, [o for o in options_for(900) if "ptxas" not in o])
        ptx = nvrtc.getPTX(program)
        ptx = ptx if isinstance(ptx, bytes) else ptx.encode()
        linker = core.Linker(core.ObjectCode.from_ptx(ptx), options=core.LinkerOptions(arch="sm_90a", verbose=True))
        cubins["c++"] = bytes(linker.link("cubin").code)
        logs["c++"] = linker.get_info_log()
        print(f"== {name}")
        for side, cubin in cubins.items():
            stem = keep / f"{re.sub(r'[^a-z0-9]+', '_', name)}_{side.replace('+', 'p')}"
            stem.with_suffix(".cubin").write_bytes(cubin)
            sass = subprocess.run([args.nvdisasm, "-c", str(stem.with_suffix(".cubin"))], check=True,
                                  capture_output=True, text=True).stdout
            stem.with_suffix(".sass").write_text(sass)
            body = loop_body(sass)
            registers = re.findall(r"[Uu]sed (\d+) registers", logs[side])
            print(f"{side:6s} registers {registers[-1] if registers else '?':>4s}  loop {len(body):4d} instructions, "
                  f"{sum(bool(MMA.search(x)) for x in body)} MMA/FMA: {opcodes(body)}")
    print(f"(cubins and disassemblies in {keep})")


if __name__ == "__main__":
    main()
