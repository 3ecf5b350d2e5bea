"""Batched GEMMs over Dask arrays, on every GPU of a Dask cluster (import it explicitly; it
imports dask):

    from dask_cuda import LocalCUDACluster          # one worker per GPU
    from distributed import Client
    import blasdx.dask_gemm

    client = Client(LocalCUDACluster())
    c = blasdx.dask_gemm.execute(GEMM, a, b, epilogue="relu")   # a lazy dask array
    c.compute()   # or c.persist(): each batch chunk runs GEMM.execute on its worker's GPU

``a`` and ``b`` (and ``c``) are 3-D Dask arrays, (batch, rows, cols) as ``execute()``
takes them, chunked along the batch axis only, with the same batch chunks; their chunks
may be CuPy arrays (resident on the workers' GPUs) or NumPy arrays (copied to the
worker's GPU by the task). Each task lays its chunks out as the descriptor's arrangement
asks (a copy only where they are not), writes a new C chunk (a copy of ``c``'s where one is
given) and returns it as a CuPy array: the result is a Dask array of CuPy chunks. Kernels
compile once per worker process (later tasks and workers find them in the disk cache).
Dask recomputes the chunks of a lost worker elsewhere; GEMMs are deterministic, so the
result is the same.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from .describe.descriptor import Descriptor
from .describe.precision import PRECISIONS
from .errors import ArgumentError
from .runtime.device import cupy_module

__all__ = ["execute"]

def _c_dtype(desc: Descriptor) -> np.dtype:
    """The dtype of a new C chunk: C's precision, complex64/128 for complex float32/64."""
    precision = desc.precision.c
    info = PRECISIONS[precision]
    name = info.raw_name or info.numpy_name  # raw bits where CuPy has no dtype (as execute() takes them)
    if desc.is_complex:
        if name not in ("float32", "float64"):
            raise ArgumentError(f"blasdx.dask_gemm makes C chunks as complex64/complex128 only; for complex "
                                f"{precision} pass c, a dask array with a trailing dimension of 2")
        return np.dtype(f"complex{np.dtype(name).itemsize * 16}")
    return np.dtype(name)


def _check_operands(desc: Descriptor, arrays: dict[str, Any]) -> None:
    """Dask arrays of (batch, rows, cols) with the descriptor's matrix shapes, chunked along
    the batch only and alike: raised before any task runs."""
    plan = desc.plan  # an incomplete or unrunnable descriptor raises here
    for name, x in arrays.items():
        if not isinstance(x, da.Array):
            raise ArgumentError(f"{name} is a {type(x).__name__}; blasdx.dask_gemm.execute takes dask arrays "
                                f"(dask.array.from_array(x, chunks=(items, -1, -1))), or use GEMM.execute")
        if x.ndim != 3:
            raise ArgumentError(f"{name} has {x.ndim} dimensions (shape {x.shape}); expected (batch, rows, cols)")
        mat = getattr(plan, name)
        if x.shape[1:] != (mat.rows, mat.cols):
            raise ArgumentError(f"{name} has shape {x.shape}; the descriptor's {name.upper()} items are "
                                f"({mat.rows}, {mat.cols}): pass arrays of (batch, {mat.rows}, {mat.cols})")
        if len(x.chunks[1]) != 1 or len(x.chunks[2]) != 1:
            raise ArgumentError(f"{name} is chunked along its matrix axes (chunks {x.chunks[1:]}); chunk along the "
                                f"batch axis only: {name}.rechunk({{1: -1, 2: -1}})")
    first, batch_chunks = next(iter(arrays.items()))[0], next(iter(arrays.values())).chunks[0]
    for name, x in arrays.items():
        if x.chunks[0] != batch_chunks:
            raise ArgumentError(
                f"the batch chunks of {name} {x.chunks[0]} differ from {first}'s {batch_chunks}; every operand needs "
                f"the same ones: {name}.rechunk({{0: {first}.chunks[0]}})")


def _as_arranged(x: Any, layout: str) -> Any:
    """A CuPy chunk laid out as the descriptor's arrangement: row-major items, or column-major
    ones (the transpose of row-major), the batch outermost; a copy only where it is not."""
    cupy = cupy_module()
    x = cupy.asarray(x)  # a NumPy chunk goes to this worker's GPU
    if layout == "row_major":
        return cupy.ascontiguousarray(x)
    return cupy.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)


def _execute_chunk(a: Any, b: Any, *rest: Any, desc: Descriptor, has_c: bool, c_dtype: np.dtype, alpha: Any,
                   beta: Any, options: dict) -> Any:
    """One batch chunk: a new C chunk from ``execute()`` on this worker's current GPU."""
    cupy = cupy_module()
    arrangement = desc.arrangement
    if has_c:  # a copy in its own layout (copy() would make column-major items row-major), then arranged
        c = _as_arranged(cupy.array(rest[0], copy=True), arrangement.c)
    elif arrangement.c == "row_major":
        c = cupy.empty((a.shape[0], desc.size.m, desc.size.n), dtype=c_dtype)
    else:
        c = cupy.empty((a.shape[0], desc.size.n, desc.size.m), dtype=c_dtype).transpose(0, 2, 1)
    bias = options.get("bias")
    if bias is not None:
        options = {**options, "bias": cupy.asarray(bias)}
    desc.execute(_as_arranged(a, arrangement.a), _as_arranged(b, arrangement.b), c, alpha, beta, **options)
    return c


def execute(desc: Descriptor, a: da.Array, b: da.Array, c: da.Array | None = None, alpha: Any = 1, beta: Any = 0, *,
            bias: Any = None, prologue: Any = None, epilogue: Any = None, a_load: Any = None, b_load: Any = None,
            c_load: Any = None, c_store: Any = None) -> da.Array:
    """``GEMM.execute(a, b, c, alpha, beta, ...)`` on each batch chunk of Dask arrays, as a
    lazy Dask array of new C chunks (CuPy). ``bias`` is a NumPy or CuPy array that
    broadcasts to one item's C ((n,) or (m, 1)); the hooks are execute()'s."""
    if not isinstance(desc, Descriptor):
        raise ArgumentError(f"execute's first argument is a blasdx descriptor, got {type(desc).__name__}")
    if c is None and beta != 0:
        raise ArgumentError(f"beta={beta} scales C, but no c was given; pass c or leave beta at 0")
    if bias is not None and (not hasattr(bias, "ndim") or isinstance(bias, da.Array) or bias.ndim > 2):
        raise ArgumentError("bias must be a NumPy or CuPy array of shape (n,) or (m, 1) here (one for every item); "
                            "a per-item bias needs GEMM.execute on each chunk")
    operands = {"a": a, "b": b, **({} if c is None else {"c": c})}
    _check_operands(desc, operands)
    dtype = np.dtype(c.dtype) if c is not None else _c_dtype(desc)
    options = {key: value for key, value in (("bias", bias), ("prologue", prologue), ("epilogue", epilogue),
                                             ("a_load", a_load), ("b_load", b_load), ("c_load", c_load),
                                             ("c_store", c_store)) if value is not None}
    m, n = desc.size.m, desc.size.n
    meta = _meta(dtype)
    args: list[Any] = [a, "bik", b, "bkj"] + ([c, "bij"] if c is not None else [])
    return da.blockwise(_execute_chunk, "bij", *args, dtype=dtype, meta=meta, concatenate=True,
                        adjust_chunks={"i": (m,), "j": (n,)}, align_arrays=False,
                        desc=desc, has_c=c is not None, c_dtype=dtype, alpha=alpha, beta=beta, options=options)


def _meta(dtype: np.dtype) -> Any:
    """An empty chunk that tells Dask the result's chunks are CuPy arrays (NumPy where CuPy
    is missing, as when a graph is built on a machine without a GPU)."""
    try:
        return cupy_module().empty((0, 0, 0), dtype=dtype)
    except Exception:  # noqa: BLE001 - no CuPy or no GPU here: the chunk type is only a hint
        return np.empty((0, 0, 0), dtype=dtype)
