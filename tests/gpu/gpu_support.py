"""Helpers of the GPU tests: operands in the descriptor's layout with NaN padding, the
float64 reference, the per-precision error bounds of shared/TESTING.md, the K loop of the
device API's tests (test_gpu_accumulator.py, test_gpu_wgmma.py) run over random matrices, and
PyTorch for the tests that take tensors (``torch_with_cuda``)."""

from __future__ import annotations

import numpy as np
import pytest

import blasdx.pipeline
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size, Type
from blasdx.describe.precision import PRECISIONS
from blasdx.runtime.arguments import scalar

from ..device_kernels import KERNELS
from ..support import LAYOUT

# Relative Frobenius error bounds by precision (inputs and output); 0 means exact. The inputs are
# exactly representable, so an input's bound is its accumulation's: FP8's partial sums promoted into
# float32 every 128 of k (1.5x cuBLAS's default path, 1.22e-4; wgmma's own sum keeps about 14 bits).
INPUT_BOUND = {"float64": 1e-12, "float32": 1e-5, "tfloat32": 5e-3, "float16": 1e-3,
               "bfloat16": 1e-2, "float8_e4m3": 1.8e-4, "float8_e5m2": 1.8e-4}
OUTPUT_BOUND = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2,
                "float8_e4m3": 7e-2, "float8_e5m2": 7e-2, "tfloat32": 5e-3}


def torch_with_cuda():
    """The torch module where PyTorch is installed and sees a GPU; else the test is skipped."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


def bound(desc) -> float:
    p = desc.precision
    if not PRECISIONS[p.c].is_float:
        return 0.0
    return max(INPUT_BOUND[p.a], INPUT_BOUND[p.b], OUTPUT_BOUND[p.c])


def storage_dtype(precision: str) -> np.dtype:
    name = PRECISIONS[precision].numpy_name
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def random_values(precision: str, shape, rng, is_complex: bool) -> np.ndarray:
    """Float64/complex128 values exactly representable in ``precision``."""
    info = PRECISIONS[precision]

    def one():
        if info.is_float:
            x = rng.standard_normal(shape)
            return x.astype(storage_dtype(precision)).astype(np.float64)
        lo, hi = (-20, 20) if info.signed else (0, 40)
        return rng.integers(lo, hi + 1, size=shape).astype(np.float64)

    return one() + 1j * one() if is_complex else one()


def poison_value(precision: str):
    return np.nan if PRECISIONS[precision].is_float else (77 if not PRECISIONS[precision].signed else -77)


class Operand:
    """One matrix (or batch) on the GPU in the descriptor's layout, padding poisoned."""

    def __init__(self, desc, which: str, batch: int | None, values: np.ndarray | None, rng,
                 ld: int | None = None) -> None:
        import cupy

        m, n, k = desc.size
        rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[which]
        self.precision = getattr(desc.precision, which)
        self.layout = getattr(desc.arrangement, which)
        self.ld = ld if ld is not None else getattr(desc.leading_dimension, which)
        self.is_complex = desc.is_complex
        nb = 1 if batch is None else batch
        dtype = storage_dtype(self.precision)
        native_complex = self.is_complex and dtype.name in ("float32", "float64")
        outer, inner = (cols, rows) if self.layout == "col_major" else (rows, cols)
        buf_shape = (nb, outer, self.ld) + ((2,) if self.is_complex and not native_complex else ())
        poison = poison_value(self.precision)
        if native_complex:
            host = np.full(buf_shape, complex(poison, poison), dtype=np.dtype(f"complex{dtype.itemsize * 16}"))
        else:
            host = np.full(buf_shape, poison, dtype=np.float64).astype(dtype)
        self.buffer_host = host
        if values is None:
            values = random_values(self.precision, (nb, rows, cols), rng, self.is_complex)
        self.values = values  # float64/complex128, (nb, rows, cols)
        stored = values if self.layout == "row_major" else np.swapaxes(values, 1, 2)
        if native_complex:
            host[:, :, :inner] = stored
        elif self.is_complex:
            host[:, :, :inner, 0] = stored.real.astype(dtype)
            host[:, :, :inner, 1] = stored.imag.astype(dtype)
        else:
            host[:, :, :inner] = stored.astype(dtype)
        # CuPy has no float8 dtype: float8 data travels as its raw uint8 bytes.
        self.raw = dtype.name.startswith("float8")
        self.buffer = cupy.asarray(host.view(np.uint8) if self.raw else host)
        view = self.buffer[:, :, :inner]
        if self.layout == "col_major":
            view = view.swapaxes(1, 2)
        self.array = view if batch is not None else view[0]

    def host(self) -> np.ndarray:
        host = self.buffer.get()
        return host.view(self.buffer_host.dtype) if self.raw else host

    def upload(self, host: np.ndarray) -> None:
        self.buffer.set(host.view(np.uint8) if self.raw else host)

    def result(self) -> np.ndarray:
        """The logical values now on the GPU, as float64/complex128 (nb, rows, cols)."""
        host = self.host()
        inner = self.values.shape[2] if self.layout == "row_major" else self.values.shape[1]
        part = host[:, :, :inner]
        if self.is_complex and part.dtype.kind != "c":
            part = part[..., 0].astype(np.float64) + 1j * part[..., 1].astype(np.float64)
        else:
            part = part.astype(np.complex128 if self.is_complex else np.float64)
        return part if self.layout == "row_major" else np.swapaxes(part, 1, 2)

    def poison_all(self) -> None:
        """Fill the whole buffer, logical elements too, with the poison value."""
        host = self.host()
        host[...] = complex(np.nan, np.nan) if host.dtype.kind == "c" else host.dtype.type(poison_value(self.precision))
        self.upload(host)

    def padding_untouched(self, before: np.ndarray) -> bool:
        host = self.host()
        inner = self.values.shape[2] if self.layout == "row_major" else self.values.shape[1]
        pad_now, pad_before = host[:, :, inner:], before[:, :, inner:]
        if pad_now.size == 0:
            return True
        return np.array_equal(pad_now.view(np.uint8), pad_before.view(np.uint8))


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    assert np.linalg.norm(ref) > 0, "reference is all zeros: the test data is degenerate"
    assert np.linalg.norm(out) > 0, "output is all zeros"
    if not np.all(np.isfinite(out[np.isfinite(ref)])):
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def run_and_check(desc, rng, batch=3, alpha=1.0, beta=0.0, lds=None, seed=None, overrides=None):
    """Execute desc on fresh random data (with the planner's choices fixed by ``overrides``
    where given); assert the bound; return the relative error."""
    lds = lds or {}
    a = Operand(desc, "a", batch, None, rng, lds.get("a"))
    b = Operand(desc, "b", batch, None, rng, lds.get("b"))
    c = Operand(desc, "c", batch, None, rng, lds.get("c"))
    c_before = c.values
    if beta == 0:  # C must be ignored: poison it whole
        c.poison_all()
        c_before = np.zeros_like(c.values)
    snapshot = c.host()
    if overrides is None:
        desc.execute(a.array, b.array, c.array, alpha=alpha, beta=beta)
    else:
        blasdx.pipeline.execute(blasdx.pipeline.plan(desc, overrides), a.array, b.array, c.array, alpha, beta)
    out = c.result()
    ref = alpha * np.matmul(a.values, b.values) + beta * c_before
    if desc.conjugate[0] or desc.conjugate[1]:
        ref = alpha * np.matmul(np.conj(a.values) if desc.conjugate[0] else a.values,
                                np.conj(b.values) if desc.conjugate[1] else b.values) + beta * c_before
    err = relative_error(out, ref) if bound(desc) > 0 else float(np.max(np.abs(out - ref)))
    limit = bound(desc)
    assert err <= limit, f"{desc!r}: error {err:.3g} > {limit:.3g} (seed {seed}, batch {batch}, alpha {alpha}, beta {beta})"
    assert c.padding_untouched(snapshot), f"{desc!r}: C's leading-dimension padding was written"
    return err


def assert_stops_with_a_trap(script: str) -> None:
    """Run ``script``, which defines ``launch()`` (a kernel launch meant to reach __trap()), in a
    child process, since a trap ends the CUDA context, and assert that the launch stopped with a
    launch failure (the trap) rather than ran on or failed some other way."""
    import subprocess
    import sys

    check = script + '''
import sys
import cupy
try:
    launch()
    cupy.cuda.runtime.deviceSynchronize()
except cupy.cuda.runtime.CUDARuntimeError as error:
    print("stopped:", error)
    sys.exit(0)
print("ran on")
sys.exit(1)
'''
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stopped:" in result.stdout and "LaunchFailure" in result.stdout, result.stdout


# --- the device API's K loop (KERNELS' k_loop) ---------------------------------------------------

SEED = int(np.random.SeedSequence().entropy % 2**31)


def _describe(prec, cx, arr, size, sm, threads=None):
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Block()
    if threads:
        desc = desc + BlockDim(threads)
    return desc + Type("complex") if cx else desc


def _whole_problem(desc, tiles):
    """The descriptor of the matrices a K loop of ``tiles`` walks: k * tiles deep, no Block()
    (the matrices live in global memory only)."""
    m, n, k = desc.size
    whole = Size(m, n, k * tiles)
    for op in desc.operators:
        if op.kind not in ("Size", "Execution", "BlockDim"):
            whole = whole + op
    return whole


def _step(operand, tile_rows: int, tile_cols: int, along: str) -> int:
    """Elements between K tiles of a big operand: along its columns (A) or rows (B)."""
    if along == "cols":
        return tile_cols if operand.layout == "row_major" else tile_cols * operand.ld
    return tile_rows * operand.ld if operand.layout == "row_major" else tile_rows


def run_k_loop(desc, tiles, alpha=1.0, beta=0.0, launch_threads=None, seed=SEED, source=KERNELS, name="k_loop",
               shared_memory=None, c_ld=None):
    """Run ``name`` of ``source`` (KERNELS' k_loop or a kernel of its signature) over ``tiles`` K
    tiles of random data; assert that each value of C was written once and within the bound."""
    import cupy

    rng = np.random.default_rng(seed)
    m, n, k = desc.size
    big = _whole_problem(desc, tiles)
    a, b = (Operand(big, x, None, None, rng) for x in "ab")
    c = Operand(big, "c", None, None, rng, ld=c_ld)
    c_before = c.values
    if beta == 0:
        c.poison_all()  # never read
        c_before = np.zeros_like(c.values)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + source, name)
    visits = cupy.zeros(m * n, dtype=np.int32)
    threads = launch_threads or desc.max_threads_per_block
    kernel(1, (threads, 1, 1),
           (a.array, b.array, c.array, np.int64(a.ld), np.int64(b.ld), np.int64(c.ld), np.int32(tiles),
            np.int64(_step(a, m, k, "cols")), np.int64(_step(b, k, n, "rows")), visits,
            scalar(alpha, desc.plan, "alpha"), scalar(beta, desc.plan, "beta")),
           shared_mem=shared_memory or desc.shared_memory_size)
    assert bool((visits == 1).all()), f"{desc!r}: values visited {np.unique(visits.get())} times (seed {seed})"
    ref = alpha * (a.values[0] @ b.values[0]) + beta * c_before[0]
    out = c.result()[0]
    limit = bound(desc)
    err = relative_error(out, ref) if limit > 0 else float(np.max(np.abs(out - ref)))
    assert err <= limit, f"{desc!r}, {tiles} K tiles: error {err:.3g} > {limit:.3g} (seed {seed})"
    return c, kernel
