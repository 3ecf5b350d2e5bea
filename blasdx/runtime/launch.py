"""Loaded kernels and their launches: the only code that puts a kernel on a GPU.

``Kernel`` is a compiled batched kernel loaded on one device. ``bind`` turns fully
checked operands into a ``BoundLaunch`` (grid, batch strides, overlap spans), and
``BoundLaunches`` keeps them by array signature: a later call with CuPy arrays (and bias) of
the same shapes, strides, dtypes, devices and pointer alignment only checks for overlap and
launches. The argument list follows blasdx.plan.kernel.KERNEL_PARAMETERS (and
BIAS_PARAMETERS).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..compiler import CompiledKernel
from ..plan import GemmPlan
from ..plan.kernel import BATCH_PARAMETERS
from .arguments import BiasView, MatrixView, scalar

if TYPE_CHECKING:
    from ..codegen.hooks import Fusion

# BoundLaunch.launch passes PER_CALL_PARAMETERS (a, b, c, alpha, beta: checked by
# tests/test_plan_overrides.py) by position, then BATCH_PARAMETERS.


@dataclass
class Kernel:
    """A loaded kernel on one device, ready to launch."""

    compiled: CompiledKernel
    device_id: int
    function: Any
    module: Any
    resident_blocks: int  # blocks the whole device runs at once (the largest useful grid)

    @property
    def kernel_name(self) -> str:
        return self.compiled.kernel_name

    def launch(self, grid: int, args: tuple, stream: Any) -> None:
        self.function((grid, 1, 1), self.compiled.block_dim, args,
                      shared_mem=self.compiled.shared_memory_size, stream=stream)


_MAX_SCALARS = 64


@dataclass(frozen=True)
class BoundLaunch:
    """A launch whose operands were fully checked once: the kernel, grid and strides that
    every later call with the same launch signature reuses (see ``launch_signature``)."""

    kernel: Kernel
    grid: int
    batch_args: tuple  # the values of BATCH_PARAMETERS
    bias_strides: tuple  # the bias's strides of BIAS_PARAMETERS, () without a bias
    spans: tuple[int, int, int, int]  # bytes A, B, C and the bias cover, for the per-call overlap check
    real_scalar: Any  # NumPy type for a Python float/int alpha or beta, None to check fully
    # Python alpha/beta values already converted to real_scalar (NumPy scalars cost ~0.5 us
    # each to make), at most _MAX_SCALARS of them.
    scalars: dict = field(default_factory=dict, compare=False, hash=False)

    def launch(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any, bias: Any = None) -> None:
        """Launch on CuPy arrays, which the kernel call passes as their data pointers."""
        k = self.kernel
        args = (a, b, c, alpha, beta, *self.batch_args)
        if bias is not None:
            args = (*args, bias, *self.bias_strides)
        k.function((self.grid, 1, 1), k.compiled.block_dim, args, shared_mem=k.compiled.shared_memory_size,
                   stream=stream)

    def overlaps(self, pa: int, pb: int, pc: int, pbias: int = 0) -> bool:
        """Whether C shares memory with A, B or the bias at these pointers."""
        sa, sb, sc, sbias = self.spans
        return bool(sc) and ((sa and pc < pa + sa and pa < pc + sc) or
                             (sb and pc < pb + sb and pb < pc + sc) or
                             (sbias and pc < pbias + sbias and pbias < pc + sc))

    def scalar(self, value: Any, plan: GemmPlan, name: str) -> Any:
        """alpha or beta for this launch: Python numbers converted once and remembered."""
        if self.real_scalar is not None and type(value) in (float, int):
            converted = self.scalars.get(value)
            if converted is None:
                converted = self.real_scalar(value)
                if len(self.scalars) < _MAX_SCALARS:
                    self.scalars[value] = converted
            return converted
        return scalar(value, plan, name)


def bind(kernel: Kernel, plan: GemmPlan, va: MatrixView, vb: MatrixView, vc: MatrixView,
         bias: BiasView | None = None) -> BoundLaunch:
    """The launch of ``kernel`` on checked operands: one block per item, at most as many
    as the device runs at once (the kernel loops over the rest)."""
    batch = 1 if va.batch is None else va.batch
    strides = [np.int64(v.strides[0] if v.batch is not None else 0) for v in (va, vb, vc)]
    values = dict(zip((p.name for p in BATCH_PARAMETERS), (np.int64(batch), *strides)))
    real = None if plan.is_complex or plan.scalar_type not in ("float", "double") else (
        np.float32 if plan.scalar_type == "float" else np.float64)
    return BoundLaunch(kernel=kernel, grid=int(min(batch, kernel.resident_blocks)),
                       batch_args=tuple(values[p.name] for p in BATCH_PARAMETERS),
                       bias_strides=() if bias is None else tuple(np.int64(s) for s in bias.strides),
                       spans=(va.span_bytes, vb.span_bytes, vc.span_bytes, 0 if bias is None else bias.span_bytes),
                       real_scalar=real)


class LaunchSignature(NamedTuple):
    """What a call's operands look like to the bound launches: ``key``, everything their
    checks depend on but the pointers' high bits (equal keys pass or fail the checks alike);
    their data pointers (A, B, C, bias; 0 for no bias); and what the kernel call takes for
    them (CuPy arrays as themselves, PyTorch tensors as their pointers)."""

    key: tuple
    pointers: tuple[int, int, int, int]
    operands: tuple


def launch_signature(ndarray: type, tensor: type | None, plan: GemmPlan, fusion: Fusion, a: Any, b: Any, c: Any,
                     bias: Any) -> LaunchSignature | None:
    """The signature of CuPy operands, or of PyTorch ones where ``tensor`` is torch.Tensor
    (C being one); None for other kinds or a mix."""
    if tensor is None:
        if type(a) is not ndarray or type(b) is not ndarray or type(c) is not ndarray or (
                bias is not None and type(bias) is not ndarray):
            return None
        da, db, dc = a.data, b.data, c.data
        pointers = (da.ptr, db.ptr, dc.ptr, 0 if bias is None else bias.data.ptr)
        key = (plan, fusion, a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,
               c.shape, c.strides, c.dtype, da.device_id, db.device_id, dc.device_id)
        if bias is not None:
            key += (bias.shape, bias.strides, bias.dtype, bias.data.device_id)
        operands: tuple = (a, b, c, bias)
    else:
        if not (isinstance(a, tensor) and isinstance(b, tensor) and (bias is None or isinstance(bias, tensor))):
            return None
        pointers = (a.data_ptr(), b.data_ptr(), c.data_ptr(), 0 if bias is None else bias.data_ptr())
        key = (plan, fusion, a.shape, a.stride(), a.dtype, a.device, b.shape, b.stride(), b.dtype, b.device,
               c.shape, c.stride(), c.dtype, c.device)
        if bias is not None:
            key += (bias.shape, bias.stride(), bias.dtype, bias.device)
        operands = (*pointers[:3], None if bias is None else pointers[3])
    return LaunchSignature((*key, *(p & 15 for p in pointers)), pointers, operands)


class BoundLaunches:
    """Bound launches by launch signature (CuPy arrays, or PyTorch tensors), at most
    ``limit`` of them."""

    def __init__(self, limit: int = 4096) -> None:
        self._launches: dict[tuple, BoundLaunch] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: tuple) -> BoundLaunch | None:
        return self._launches.get(key)

    def put(self, key: tuple, bound: BoundLaunch) -> None:
        if len(self._launches) < self._limit:
            with self._lock:
                self._launches[key] = bound

    def clear(self) -> None:
        with self._lock:
            self._launches.clear()

    def __len__(self) -> int:
        return len(self._launches)
