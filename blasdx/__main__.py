"""Command line: ``blasdx demo`` and ``blasdx config`` (also ``python -m blasdx ...``)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import SM, Arrangement, Block, Precision, Size
from .arch import accepted_sms
from .compiler import DEFAULT_CACHE
from .errors import INSTALL_HINT, DeviceError, UnsupportedError
from .pipeline import show_config
from .runtime.device import cupy_module
from .version import __version__

# Help texts are printed as they are: plain words, no reStructuredText markup.
DESCRIPTION = ("cuBLASDx's block-level GEMM for Python: describe it with operators, "
               "compile it with NVRTC, run or fuse it.")
DEMO_HELP = ("Describe, validate and explain a 64x64x64 float16 GEMM for SM 90, compile it with NVRTC "
             "(no GPU needed; a cached kernel is reported as a cache hit) and, on a CUDA GPU, run 1000 "
             "of them and check the result against NumPy in float64. Without NVRTC and CuPy (blasdx "
             "installed without the cu13 or cu12 extra) it says which steps it skipped and what to install.")
CONFIG_HELP = "Print what blasdx found: its version, NVRTC and the SMs it targets, the CUDA headers, the cache, CuPy and GPUs."


def demo() -> int:
    """Describe, explain, compile and run a GEMM, one numbered line a step; a step that cannot
    run here (no NVRTC, no GPU) is reported as skipped with why. 1 only for a wrong result."""
    gemm = (Size(64, 64, 64) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block())
    print(f"1. described and validated: {gemm!r}")
    print("2. explained:")
    print("   " + gemm.explain().replace("\n", "\n   "))
    builds = DEFAULT_CACHE.builds
    start = time.perf_counter()
    try:
        compiled = gemm.compile(arch=900)
    except (DeviceError, UnsupportedError) as exc:  # no NVRTC (no cu13/cu12 extra), or one too old
        hint = "" if INSTALL_HINT in str(exc) else f"; {INSTALL_HINT}"
        print(f"3. skipped compiling: {exc}{hint}")
        print("4. skipped running: there is no compiled kernel to run (step 3 was skipped).")
        return 0
    seconds = time.perf_counter() - start
    how = (f"compiled with NVRTC for sm_90 in {seconds:.2f} s (cached for the next run)"
           if DEFAULT_CACHE.builds != builds else
           f"loaded for sm_90 from the cache ({seconds:.2f} s; a cache hit, NVRTC did not run)")
    print(f"3. {how}: {compiled.kernel_name}, {len(compiled.cubin)} bytes of cubin")
    try:
        cupy = cupy_module()
        cupy.cuda.runtime.getDeviceCount()
        device = cupy.cuda.Device()
        name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"].decode()
        sm = int(device.compute_capability) * 10
    except Exception as exc:  # noqa: BLE001 - any failure means no GPU to run on
        print(f"4. skipped running: no usable CUDA GPU here ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0][:100]}). Compiling above needed none.")
        return 0
    if sm < 900:
        gemm = gemm.replace(SM(sm if sm in accepted_sms() else 800))
    rng = np.random.default_rng()
    batch = 1000
    a = rng.standard_normal((batch, 64, 64)).astype(np.float16)
    b = rng.standard_normal((batch, 64, 64)).astype(np.float16)
    c = cupy.full((batch, 64, 64), np.nan, dtype=np.float32)
    b_col_major = cupy.asarray(b.transpose(0, 2, 1).copy()).transpose(0, 2, 1)  # B is col_major
    gemm.execute(cupy.asarray(a), b_col_major, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.linalg.norm(c.get() - ref) / np.linalg.norm(ref))
    ok = err < 1e-3
    print(f"4. ran {batch} GEMMs on {name} (SM {sm}): relative error {err:.2e} vs float64 "
          f"-> {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


def parser(prog: str = "blasdx") -> argparse.ArgumentParser:
    """The command line's parser; ``prog`` is how its usage names the command."""
    top = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    top.add_argument("--version", action="version", version=f"blasdx {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="{demo,config}")
    commands.add_parser("demo", help="build, explain, compile and (with a GPU) run and check a GEMM",
                        description=DEMO_HELP)
    commands.add_parser("config", help="what blasdx found (NVRTC, headers, cache, GPUs)", description=CONFIG_HELP)
    return top


def main(argv: list[str] | None = None, prog: str = "blasdx") -> int:
    """The ``blasdx`` console script (``python -m blasdx`` passes its own ``prog``)."""
    args = parser(prog).parse_args(argv)
    if args.command == "config":
        show_config()
        return 0
    return demo()


if __name__ == "__main__":
    sys.exit(main(prog="python -m blasdx"))
