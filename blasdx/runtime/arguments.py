"""Checks of execute()'s arguments against a plan, before any compile or launch.

``matrix_view`` turns a CuPy array, a ``__cuda_array_interface__`` object or a DLPack
GPU tensor (PyTorch) into a ``MatrixView`` without copying; ``check_operands`` then
checks shape, dtype, strides, alignment, device and overlap against the plan and raises
``ArgumentError`` saying what was expected, what was given and how to fix it.
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ..describe.precision import PRECISIONS
from ..errors import ArgumentError
from ..plan import DescriptorPlan, MatrixPlan
from .device import cupy_module, gpu_available, no_gpu_error

_DLPACK_GPU = (2, 13)  # kDLCUDA, kDLCUDAManaged


@dataclass(frozen=True)
class MatrixView:
    """A GPU array seen as a batch of matrices; strides are in elements of the matrix."""

    name: str
    ptr: int
    device_id: int
    dtype: np.dtype
    shape: tuple[int, ...]  # (rows, cols) or (batch, rows, cols)
    strides: tuple[int, ...]  # in elements (complex pairs count as one element)
    element_size: int
    keepalive: Any  # the object that owns the memory

    @property
    def batch(self) -> int | None:
        return self.shape[0] if len(self.shape) == 3 else None

    @property
    def span_bytes(self) -> int:
        """Bytes from the first to one past the last element."""
        if any(s == 0 for s in self.shape):
            return 0
        return (sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1) * self.element_size


def _from_cupy_or_interface(x: Any) -> tuple[int, tuple[int, ...], tuple[int, ...] | None, np.dtype, int, Any]:
    """(ptr, shape, byte strides or None, dtype, device id, owner)."""
    cupy = cupy_module()
    if isinstance(x, cupy.ndarray):
        return x.data.ptr, x.shape, x.strides, x.dtype, x.device.id, x
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return _from_torch(x)
    cai = None
    try:
        cai = x.__cuda_array_interface__
    except (AttributeError, TypeError, ValueError, RuntimeError):
        cai = None
    if cai is None and hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dev_type, _ = x.__dlpack_device__()
        if int(dev_type) not in _DLPACK_GPU:
            raise _host_error(x)
        arr = cupy.from_dlpack(x)
        return arr.data.ptr, arr.shape, arr.strides, arr.dtype, arr.device.id, (arr, x)
    if cai is None:
        raise _host_error(x)
    ptr = int(cai["data"][0])
    dtype = np.dtype(cai["typestr"])
    device_id = _device_of_pointer(ptr)
    strides = tuple(cai["strides"]) if cai.get("strides") else None
    return ptr, tuple(cai["shape"]), strides, dtype, device_id, x


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array (interfaces may leave strides out for those)."""
    return tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * itemsize for i in range(len(shape)))


def _torch_dtype(dtype: Any) -> np.dtype:
    name = str(dtype).removeprefix("torch.")
    try:
        return np.dtype(name)
    except TypeError:
        ml_name = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
                   "bfloat16": "bfloat16"}.get(name)
        dtype_ = _ml_dtype(ml_name) if ml_name else None
        if dtype_ is None:
            raise ArgumentError(f"PyTorch dtype {dtype} is not supported by blasdx") from None
        return dtype_


def _from_torch(x: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], np.dtype, int, Any]:
    """A PyTorch tensor read through its own API: every dtype (float8 too), no copy."""
    if not x.is_cuda:
        raise ArgumentError(
            f"got a PyTorch tensor on {x.device}; execute() needs GPU tensors: use x.cuda()"
        )
    dtype = _torch_dtype(x.dtype)
    strides = tuple(s * x.element_size() for s in x.stride())
    return x.data_ptr(), tuple(x.shape), strides, dtype, x.device.index, x


def _ml_dtype(name: str) -> np.dtype | None:
    """An ml_dtypes type (bfloat16, float8_*) as a NumPy dtype, None where there is none."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        return None
    found = getattr(ml_dtypes, name, None)
    return None if found is None else np.dtype(found)


def torch_tensor_type() -> Any:
    """torch.Tensor where PyTorch is imported, else None (never imports PyTorch)."""
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def check_torch_output(c: Any) -> None:
    """A C tensor that requires grad (or a view of one) cannot be written in place behind
    autograd's back, unless gradients are off."""
    if c.requires_grad and sys.modules["torch"].is_grad_enabled():
        raise ArgumentError(
            "C requires grad, and execute() writes C in place, which autograd would not see; run it "
            "under torch.no_grad() or pass a C that does not require grad (for example c.detach())"
        )


def _device_of_pointer(ptr: int) -> int:
    cupy = cupy_module()
    try:
        if ptr == 0:
            return cupy.cuda.runtime.getDevice()
        return cupy.cuda.runtime.pointerGetAttributes(ptr).device
    except cupy.cuda.runtime.CUDARuntimeError as exc:
        if not gpu_available():
            raise no_gpu_error(exc, "execute()") from None
        raise ArgumentError(f"the CUDA runtime cannot say which device holds the array at {ptr:#x} ({exc}); pass "
                            f"arrays on a CUDA device") from None


def _host_error(x: Any) -> ArgumentError:
    kind = type(x).__module__ + "." + type(x).__name__
    if isinstance(x, np.ndarray):
        return ArgumentError(
            f"got a NumPy (host) array of shape {x.shape}; execute() needs GPU arrays: "
            f"move it with cupy.asarray(x)"
        )
    return ArgumentError(
        f"got {kind}, which is not a GPU array; pass a CuPy array, a PyTorch CUDA tensor or an "
        f"object with __cuda_array_interface__ or DLPack on a CUDA device"
    )


def data_alignment(v: MatrixView) -> int:
    """The largest power of two (at most 16) dividing the pointer and the batch stride."""
    align = _alignment_of(v.ptr)
    if v.batch is not None and v.batch > 1:
        align = min(align, _alignment_of(v.strides[0] * v.element_size))
    return min(16, align)


def expected_dtypes(x: MatrixPlan, is_complex: bool) -> tuple[tuple[np.dtype, bool], ...]:
    """Accepted (dtype, as_pairs) for a matrix; as_pairs means a trailing dimension of 2."""
    return _expected_dtypes(x.precision, is_complex)


@cache
def _expected_dtypes(precision: str, is_complex: bool) -> tuple[tuple[np.dtype, bool], ...]:
    storage = PRECISIONS[precision].numpy_name
    names = [storage]
    raw = PRECISIONS[precision].raw_name
    out: list[tuple[np.dtype, bool]] = []
    for name in names + ([raw] if raw else []):
        try:
            dtype = np.dtype(name)
        except TypeError:
            found = _ml_dtype(name)
            if found is None:
                continue
            dtype = found
        if is_complex:
            if dtype.name in ("float32", "float64"):
                out.append((np.dtype(f"complex{dtype.itemsize * 16}"), False))
            out.append((dtype, True))
        else:
            out.append((dtype, False))
    return tuple(out)


def matrix_view(x: Any, plan: DescriptorPlan, mat: MatrixPlan) -> MatrixView:
    name = mat.name.upper()
    ptr, shape, byte_strides, dtype, device_id, owner = _from_cupy_or_interface(x)
    accepted = expected_dtypes(mat, plan.is_complex)
    match = next(((d, pairs) for d, pairs in accepted if d == dtype
                  and (not pairs or (len(shape) >= 1 and shape[-1] == 2))), None)
    if match is None:
        wanted = " or ".join(f"{d.name}{' with a trailing dimension of 2 (real, imag)' if p else ''}"
                             for d, p in accepted)
        raise ArgumentError(
            f"{name} has dtype {dtype.name}{' shape ' + str(tuple(shape)) if plan.is_complex else ''}, "
            f"but the descriptor's {mat.name.upper()} precision is "
            f"{'complex ' if plan.is_complex else ''}{mat.precision}: expected {wanted}. "
            + (f"{mat.precision} values are packed {mat.pack} per {wanted} element: use "
               f"blasdx.pack(x, {mat.precision!r}, axis={-1 if mat.name == 'a' else -2})"
               if mat.pack > 1 else "blasdx never casts; convert with x.astype(...)")
        )
    _, pairs = match
    itemsize = dtype.itemsize
    # An empty array (a batch of 0 items) addresses no element: its strides mean nothing (NumPy and
    # CuPy give zeros, views keep their base's), so only its dtype and shape are checked.
    empty = any(d == 0 for d in shape)
    if byte_strides is None:  # C-contiguous
        byte_strides = _contiguous_strides(shape, itemsize)
    if pairs:
        if byte_strides[-1] != itemsize and not empty:
            raise ArgumentError(
                f"{name}: the trailing (real, imag) dimension must be contiguous (stride "
                f"{itemsize} bytes), got {byte_strides[-1]}; use cupy.ascontiguousarray"
            )
        shape, byte_strides = shape[:-1], byte_strides[:-1]
        element = 2 * itemsize
    else:
        element = itemsize
    if len(shape) not in (2, 3):
        raise ArgumentError(
            f"{name} has {len(shape)} dimensions (shape {tuple(shape)}); expected 2 (rows, cols) "
            f"for one GEMM or 3 (batch, rows, cols) for a batch"
        )
    if empty:
        return MatrixView(mat.name, ptr, device_id, dtype, tuple(shape), (0,) * len(shape), element, owner)
    strides = []
    for s in byte_strides:
        if s % element:
            raise ArgumentError(
                f"{name} has a stride of {s} bytes, not a multiple of its {element}-byte element; "
                f"use a contiguous array (cupy.ascontiguousarray)"
            )
        strides.append(s // element)
    return MatrixView(mat.name, ptr, device_id, dtype, tuple(shape), tuple(strides), element, owner)


def check_layout(v: MatrixView, mat: MatrixPlan) -> None:
    """Shape, strides and alignment of one matrix against its plan."""
    name = mat.name.upper()
    rows, cols = v.shape[-2:]
    if v.span_bytes == 0 and (rows, cols) == (mat.rows, mat.cols):
        return  # an empty batch: nothing is read or written, strides and alignment do not matter
    if (rows, cols) != (mat.rows, mat.cols):
        logical = {"a": "(m, k)", "b": "(k, n)", "c": "(m, n)"}[mat.name]
        if mat.pack > 1:
            logical = logical.replace("k", f"k/{mat.pack}")
        raise ArgumentError(
            f"{name} has shape {v.shape}, expected {logical} = ({mat.rows}, {mat.cols})"
            f"{' with a leading batch dimension' if v.batch is not None else ''}; "
            + (f"{mat.precision} values are packed {mat.pack} per {v.dtype.name} along k: "
               f"blasdx.pack(x, {mat.precision!r}, axis={-1 if mat.name == 'a' else -2})"
               if mat.pack > 1 else
               "pass the logical matrix (transpose views change strides, not shape)")
        )
    rs, cs = v.strides[-2:]
    want_rs, want_cs = (mat.ld, 1) if mat.layout == "row_major" else (1, mat.ld)
    bad = (rows > 1 and rs != want_rs) or (cols > 1 and cs != want_cs)
    if bad:
        how = ("cupy.ascontiguousarray(x)" if mat.layout == "row_major"
               else "cupy.asfortranarray(x) (or x.T of a row-major (cols, rows) array)")
        raise ArgumentError(
            f"{name} strides {tuple(v.strides[-2:])} (elements) do not match the descriptor: "
            f"{mat.layout} with leading dimension {mat.ld} needs strides {(want_rs, want_cs)}. "
            f"Use {how}, or change Arrangement/LeadingDimension to match the data"
        )
    if any(s < 0 for s in v.strides):
        raise ArgumentError(f"{name} has negative strides {v.strides}; reversed views are not "
                            f"supported, use a copy (cupy.ascontiguousarray)")
    if v.batch is not None and v.batch > 1:
        bs = v.strides[0]
        one = ((mat.outer - 1) * mat.ld + mat.inner)
        if bs <= 0 or (mat.name == "c" and bs < one):
            raise ArgumentError(
                f"{name} has batch stride {bs} elements; each batch item needs its own memory "
                f"(stride >= {one if mat.name == 'c' else 1}); broadcast (stride 0) and "
                f"overlapping outputs are not supported, use a contiguous copy"
            )
    if v.ptr % mat.alignment:
        raise ArgumentError(
            f"{name}'s data pointer {v.ptr:#x} is not aligned to {mat.alignment} bytes as "
            f"Alignment declares; pass an aligned array or lower Alignment to {_alignment_of(v.ptr)}"
        )
    if v.batch is not None and v.batch > 1 and (v.strides[0] * v.element_size) % mat.alignment:
        raise ArgumentError(
            f"{name}'s batch stride ({v.strides[0] * v.element_size} bytes) is not a multiple of "
            f"Alignment {mat.alignment}; lower Alignment or pad each item"
        )


def _alignment_of(value: int) -> int:
    return value & -value if value else 16


def check_operands(plan: DescriptorPlan, a: Any, b: Any, c: Any) -> tuple[MatrixView, MatrixView, MatrixView]:
    views = tuple(matrix_view(x, plan, mat) for x, mat in ((a, plan.a), (b, plan.b), (c, plan.c)))
    for v, mat in zip(views, (plan.a, plan.b, plan.c)):
        check_layout(v, mat)
    va, vb, vc = views
    ndims = {len(v.shape) for v in views}
    if len(ndims) != 1:
        raise ArgumentError(
            f"A, B and C must all be 2-D (one GEMM) or all 3-D (a batch); got shapes "
            f"{va.shape}, {vb.shape}, {vc.shape}"
        )
    if va.batch != vb.batch or va.batch != vc.batch:
        raise ArgumentError(
            f"batch counts differ: A {va.batch}, B {vb.batch}, C {vc.batch}; give every "
            f"operand the same leading batch dimension"
        )
    check_devices_and_overlaps(va, vb, vc)
    return va, vb, vc  # type: ignore[return-value]


def separate_copy(name: str) -> str:
    """The fix for an array that overlaps C in memory: a copy of its own, in the words of either library."""
    return f"pass a separate {name} ({name}.copy() with CuPy, {name}.clone() with PyTorch)"


def check_devices_and_overlaps(va: MatrixView, vb: MatrixView, vc: MatrixView,
                               *others: tuple[str, int, int]) -> None:
    """A, B and C on one device, and C apart in memory from A, B and ``others`` (name, pointer, bytes: Grouped()'s
    offsets), since the kernel writes C while it reads them: every execute() path's words for these faults."""
    if va.device_id != vb.device_id or va.device_id != vc.device_id:
        raise ArgumentError(
            f"A, B and C are on different devices ({va.device_id}, {vb.device_id}, {vc.device_id}); "
            f"move them to one device"
        )
    c_span = vc.span_bytes
    for name, ptr, span in (("A", va.ptr, va.span_bytes), ("B", vb.ptr, vb.span_bytes), *others):
        if c_span and span and vc.ptr < ptr + span and ptr < vc.ptr + c_span:
            raise ArgumentError(
                f"C overlaps {name} in memory; the output must not alias an input: {separate_copy('C')}"
            )


def scalar(value: Any, plan: DescriptorPlan, name: str) -> Any:
    """alpha/beta converted explicitly to the kernel's scalar type."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Complex):
        raise ArgumentError(
            f"{name} must be a number, got {value!r} of type {type(value).__name__}; pass a "
            f"Python or NumPy scalar"
        )
    real = PRECISIONS[plan.scalar_precision]
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        if not plan.is_complex:
            raise ArgumentError(
                f"{name}={value!r} is complex but the GEMM is real; pass a real {name} or add "
                f"Type('complex') to the descriptor"
            )
    if plan.is_complex:
        if not real.is_float:
            v = complex(value)
            if v.real != int(v.real) or v.imag != int(v.imag):
                raise ArgumentError(f"{name}={value!r} must have integral parts for an integer GEMM")
            # Same bytes as blasdx::complex<int32/int64>, carried by a complex NumPy scalar.
            pair = np.array([int(v.real), int(v.imag)], dtype=real.numpy_name)
            return pair.view(f"complex{real.itemsize * 16}")[0]
        return np.dtype(f"complex{real.itemsize * 16}").type(value)
    if not real.is_float:
        if isinstance(value, numbers.Integral):
            iv = int(value)
        elif isinstance(value, numbers.Real) and float(value).is_integer():
            iv = int(float(value))
        else:
            raise ArgumentError(
                f"{name}={value!r} is not an integer, but the GEMM computes in {real.name}; pass "
                f"an integer {name}"
            )
        info = np.iinfo(real.numpy_name)
        if not info.min <= iv <= info.max:
            raise ArgumentError(f"{name}={iv} does not fit the {real.name} scalar type")
        return np.dtype(real.numpy_name).type(iv)
    return np.dtype(real.numpy_name).type(value)


@dataclass(frozen=True)
class BiasView:
    """A bias array broadcast to C: element strides along (batch, row, col), 0 where broadcast."""

    ptr: int
    strides: tuple[int, int, int]
    span_bytes: int  # bytes from the first to one past the last element read
    keepalive: Any


def bias_view(bias: Any, vc: MatrixView, cols: int | None = None) -> BiasView:
    """Check ``bias`` against C (same dtype, NumPy-broadcastable to C's shape, same device). An
    empty bias (which broadcasts only to an empty C) is checked for dtype, shape and device; its
    strides and pointer, which address nothing, are not. ``cols``: the product's columns where they
    are not C's (a gated epilogue's, twice C's), to which the bias is added."""
    ptr, shape, byte_strides, dtype, device_id, owner = _from_cupy_or_interface(bias)
    pairs = vc.element_size == 2 * vc.dtype.itemsize  # complex stored as (real, imag) pairs
    if dtype != vc.dtype:
        raise ArgumentError(
            f"bias has dtype {dtype.name}, but C has dtype {vc.dtype.name}; give the bias C's dtype "
            f"(bias.astype(c.dtype))"
        )
    itemsize = dtype.itemsize
    shape = tuple(shape)
    empty = any(d == 0 for d in shape)
    if byte_strides is None or empty:
        byte_strides = _contiguous_strides(shape, itemsize)
    if pairs:
        if not shape or shape[-1] != 2 or byte_strides[-1] != itemsize:
            raise ArgumentError(
                f"bias has shape {shape}; C holds complex values as (real, imag) pairs, so the bias "
                f"needs a contiguous trailing dimension of 2 as well"
            )
        shape, byte_strides = shape[:-1], tuple(byte_strides[:-1])
    target = vc.shape if cols is None else (*vc.shape[:-1], cols)  # what the bias is added to
    what = "C's shape" if cols is None else "the product's shape (before the gate)"
    c_shape = target if vc.batch is not None else (1, *target)
    hint = (f"give a bias that broadcasts to {what} {target} as in NumPy: ({target[-1]},) "
            f"adds bias[j] to column j of every row, ({target[-2]}, 1) adds bias[i] to row i")
    if len(shape) > len(vc.shape) or not shape:
        raise ArgumentError(f"bias has shape {shape}; {hint}")
    strides = [0, 0, 0]
    for axis in range(1, len(shape) + 1):
        size, want = shape[-axis], c_shape[-axis]
        if size != want and size != 1:
            raise ArgumentError(f"bias has shape {shape}, which does not broadcast to {what} "
                                f"{target}; {hint}")
        if size != 1:
            if byte_strides[-axis] % vc.element_size:
                raise ArgumentError(f"bias strides {byte_strides} (bytes) are not whole elements; "
                                    f"use a contiguous bias (cupy.ascontiguousarray)")
            strides[-axis] = byte_strides[-axis] // vc.element_size
    if device_id != vc.device_id:
        raise ArgumentError(f"bias is on device {device_id} but C is on device {vc.device_id}; "
                            f"move it to C's device")
    if ptr % min(16, vc.element_size) and not empty:
        raise ArgumentError(f"bias's data pointer {ptr:#x} is not aligned to its "
                            f"{vc.element_size}-byte element; pass an aligned copy")
    if (c_shape[1] - 1) * abs(strides[1]) + (c_shape[2] - 1) * abs(strides[2]) >= 2**31:
        raise ArgumentError(f"bias strides {byte_strides} (bytes) span more than 2**31 elements within one item, "
                            f"past the kernel's 32-bit offsets; pass a contiguous bias (bias.copy())")
    span = 0 if empty or 0 in c_shape else \
        (sum((d - 1) * abs(s) for d, s in zip(c_shape, strides)) + 1) * vc.element_size
    if vc.span_bytes and ptr < vc.ptr + vc.span_bytes and vc.ptr < ptr + span:
        raise ArgumentError(f"bias overlaps C in memory; C is written while the bias is read: {separate_copy('bias')}")
    return BiasView(ptr, (strides[0], strides[1], strides[2]), span, owner)
