"""What every example shares: whether a GPU is here, the SM to compile for, and the check
against NumPy (relative error, or exact equality for integers)."""

from __future__ import annotations

import sys

import numpy as np

import blasdx

GPU = blasdx.gpu_available()


def target_sm() -> int | None:
    """None (the current GPU's architecture) with a GPU, else SM 90 to compile only."""
    return None if GPU else 900


def skip_run(what: str) -> None:
    print(f"{what}: compiled; no GPU here, so not run")


def check(what: str, out: np.ndarray, ref: np.ndarray, tolerance: float) -> None:
    """Print the error of ``out`` against ``ref``; exit with status 1 above ``tolerance``."""
    out, ref = np.asarray(out), np.asarray(ref)
    if tolerance == 0:
        error = float(np.max(np.abs(out.astype(np.float64) - ref)))
    else:
        error = float(np.linalg.norm(out.astype(ref.dtype) - ref) / np.linalg.norm(ref))
    ok = error <= tolerance
    print(f"{what}: {'error' if tolerance else 'max difference'} {error:.2e} "
          f"(limit {tolerance:.0e}) {'OK' if ok else 'FAILED'}")
    if not ok:
        sys.exit(1)
