"""Command line: ``python -m blasdx demo`` and ``python -m blasdx config``."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from . import SM, Arrangement, Block, Precision, Size
from .arch import SUPPORTED_SMS
from .pipeline import show_config
from .runtime.device import cupy_module


def demo() -> int:
    gemm = (Size(64, 64, 64) + Precision("float16", "float16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block())
    print(f"1. described and validated: {gemm!r}")
    print("2. explained:")
    print("   " + gemm.explain().replace("\n", "\n   "))
    start = time.perf_counter()
    compiled = gemm.compile(arch=900)
    print(f"3. compiled with NVRTC for sm_90 in {time.perf_counter() - start:.2f} s "
          f"(cached afterwards): {compiled.kernel_name}, {len(compiled.cubin)} bytes of cubin")
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
        gemm = gemm.replace(SM(sm if sm in SUPPORTED_SMS else 800))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m blasdx", description=__doc__)
    parser.add_argument("command", choices=["demo", "config"], help="demo: build, explain, compile and "
                        "(with a GPU) run and check a GEMM; config: what blasdx found")
    args = parser.parse_args(argv)
    if args.command == "config":
        show_config()
        return 0
    return demo()


if __name__ == "__main__":
    sys.exit(main())
