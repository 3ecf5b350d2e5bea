"""Grouped()'s arguments: A (rows, k) and C (rows, n) cut into groups of rows by ``offsets`` (int32 on the device,
torch._grouped_mm's: group g is rows offsets[g - 1] .. offsets[g], from row 0 for g = 0), B (groups, k, n) one
matrix a group, and a bias per group ((groups, n)) or for all ((n,)). Everything but the offsets' values is checked
here, before any launch; their values stay on the device (reading them would wait for the GPU): the kernel stops
(a device-side trap, which ends the CUDA context as a failed assert does) where they decrease, start below 0 or
pass A's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..plan import DescriptorPlan
from .arguments import (
    BiasView,
    MatrixView,
    _contiguous_strides,
    _from_cupy_or_interface,
    check_devices_and_overlaps,
    check_layout,
    expected_dtypes,
    matrix_view,
    separate_copy,
)
from .device import cupy_module


@dataclass(frozen=True)
class GroupsView:
    """The offsets of a call: their pointer, the groups, A's rows."""

    ptr: int
    groups: int
    rows: int
    span_bytes: int
    keepalive: Any


def check_grouped_operands(plan: DescriptorPlan, a: Any, b: Any, c: Any, offsets: Any, max_groups: int,
                           ragged_k: bool = False) -> tuple[MatrixView, MatrixView, MatrixView, GroupsView]:
    """A (rows, k), B (groups, k, n) and C (rows, n) against the plan (``ragged_k``, Grouped('k'): A (m, rows),
    B (rows, n), C (groups, m, n)), and the offsets against them; raise ArgumentError naming the fix."""
    va = matrix_view(a, plan, plan.a)
    vb = matrix_view(b, plan, plan.b)
    vc = matrix_view(c, plan, plan.c)
    if ragged_k:
        return _check_ragged_k(plan, va, vb, vc, offsets, max_groups)
    if len(va.shape) != 2 or len(vc.shape) != 2:
        raise ArgumentError(f"Grouped() takes A (rows, k) and C (rows, n), each 2-D: their rows are cut into groups; "
                            f"got A {va.shape}, C {vc.shape}")
    if len(vb.shape) != 3:
        raise ArgumentError(f"Grouped() takes B (groups, k, n), one matrix a group; got B {vb.shape}")
    rows = va.shape[0]
    if vc.shape[0] != rows:
        raise ArgumentError(f"A has {rows} rows but C has {vc.shape[0]}; C takes the rows of A (rows, n)")
    if rows >= 2**31:
        raise ArgumentError(f"A has {rows} rows, 2**31 or more; the kernel counts rows in an int: split the call")
    check_layout(va, replace(plan.a, rows=rows, outer=rows))
    check_layout(vc, replace(plan.c, rows=rows, outer=rows))
    check_layout(vb, plan.b)
    groups = vb.shape[0]
    view = groups_view(offsets, groups, rows, vc.device_id, max_groups)
    check_devices_and_overlaps(va, vb, vc, ("offsets", view.ptr, view.span_bytes))
    return va, vb, vc, view


def _check_ragged_k(plan: DescriptorPlan, va: MatrixView, vb: MatrixView, vc: MatrixView, offsets: Any,
                    max_groups: int) -> tuple[MatrixView, MatrixView, MatrixView, GroupsView]:
    """Grouped('k'): A (m, rows), B (rows, n), C (groups, m, n)."""
    if len(va.shape) != 2 or len(vb.shape) != 2:
        raise ArgumentError(f"Grouped('k') takes A (m, rows) and B (rows, n), each 2-D: their rows (A's columns) are "
                            f"cut into groups; got A {va.shape}, B {vb.shape}")
    if len(vc.shape) != 3:
        raise ArgumentError(f"Grouped('k') takes C (groups, m, n), one matrix a group; got C {vc.shape}")
    rows = va.shape[1]
    if vb.shape[0] != rows:
        raise ArgumentError(f"A has {rows} columns but B has {vb.shape[0]} rows; both are the groups' rows (k)")
    if rows >= 2**31:
        raise ArgumentError(f"A has {rows} columns, 2**31 or more; the kernel counts rows in an int: split the call")
    check_layout(va, replace(plan.a, cols=rows, outer=rows))  # column-major: its columns are the outer runs
    check_layout(vb, replace(plan.b, rows=rows, outer=rows))  # row-major: its rows are
    check_layout(vc, plan.c)
    view = groups_view(offsets, vc.shape[0], rows, vc.device_id, max_groups)
    check_devices_and_overlaps(va, vb, vc, ("offsets", view.ptr, view.span_bytes))
    return va, vb, vc, view


def one_row_stand_ins(plan: DescriptorPlan) -> tuple[Any, Any]:
    """Grouped('k')'s A (m, 1) and B (1, n) of zeros on the current device, for a call of no rows: its offsets are
    all 0, so no K tile is read and the kernel writes each group's C as beta * C."""
    cupy = cupy_module()
    a = cupy.zeros((1, plan.a.ld), dtype=expected_dtypes(plan.a, False)[-1][0])[:, :plan.m].T  # column-major
    b = cupy.zeros((1, plan.b.ld), dtype=expected_dtypes(plan.b, False)[-1][0])[:, :plan.n]
    return a, b


def groups_view(offsets: Any, groups: int, rows: int, device_id: int, max_groups: int) -> GroupsView:
    """The offsets: int32, 1-D, one per group (B's first dimension), contiguous, on C's device."""
    if offsets is None:
        raise ArgumentError("Grouped() needs offsets=: int32 on the device, one per group, group g ending at row "
                            "offsets[g] of A (torch._grouped_mm's offs: torch.cumsum(rows_per_group, 0, "
                            "dtype=torch.int32))")
    ptr, shape, byte_strides, dtype, offsets_device, owner = _from_cupy_or_interface(offsets)
    if dtype != np.int32:
        raise ArgumentError(f"offsets have dtype {dtype.name}; they are int32: offsets.to(torch.int32) (PyTorch) or "
                            f"offsets.astype(cupy.int32)")
    if tuple(shape) != (groups,):
        raise ArgumentError(f"offsets have shape {tuple(shape)} but there are {groups} groups (B's first dimension; "
                            f"C's for Grouped('k')); give one offset a group, shape ({groups},)")
    if not 1 <= groups <= max_groups:
        raise ArgumentError(f"B has {groups} groups; Grouped() takes 1 to {max_groups}: split the groups over calls")
    if byte_strides is not None and tuple(byte_strides) != _contiguous_strides(tuple(shape), 4) and groups > 1:
        raise ArgumentError("offsets are not contiguous; pass offsets.contiguous() (PyTorch) or "
                            "cupy.ascontiguousarray(offsets)")
    if offsets_device != device_id:
        raise ArgumentError(f"offsets are on device {offsets_device} but C is on device {device_id}; move them to "
                            f"C's device")
    if ptr % 4:
        raise ArgumentError(f"the offsets' data pointer {ptr:#x} is not aligned to 4 bytes; pass a copy")
    return GroupsView(ptr, groups, rows, 4 * groups, owner)


def group_bias_view(bias: Any, vc: MatrixView, groups: int, cols: int | None = None) -> BiasView:
    """A bias added to C: one row of n values a group ((groups, n)) or for every group ((n,)), C's dtype, on C's
    device. Its strides along (group, row, column). ``cols``: the product's n where it is not C's (a gated
    epilogue's, twice C's), to which the bias is added."""
    ptr, shape, byte_strides, dtype, device_id, owner = _from_cupy_or_interface(bias)
    n = vc.shape[-1] if cols is None else cols  # C (rows, n), or Grouped('k')'s (groups, m, n)
    if dtype != vc.dtype:
        raise ArgumentError(f"bias has dtype {dtype.name}, but C has dtype {vc.dtype.name}; give the bias C's dtype")
    if device_id != vc.device_id:
        raise ArgumentError(f"bias is on device {device_id} but C is on device {vc.device_id}; move it to C's device")
    shape = tuple(shape)
    if byte_strides is None:
        byte_strides = _contiguous_strides(shape, dtype.itemsize)
    if any(s % dtype.itemsize or s < 0 for s in byte_strides):
        raise ArgumentError(f"bias strides {tuple(byte_strides)} (bytes) are not whole elements; pass a contiguous "
                            f"bias")
    strides = [s // dtype.itemsize for s in byte_strides]
    if shape == (n,):
        view = (0, 0, strides[0] if n > 1 else 0)
    elif shape == (groups, n):
        view = (strides[0] if groups > 1 else 0, 0, strides[1] if n > 1 else 0)
    else:
        raise ArgumentError(f"bias has shape {shape}; Grouped() adds a bias per group, shape (groups, n) = "
                            f"({groups}, {n}), or one for all, shape ({n},)")
    span = dtype.itemsize * (1 + sum((d - 1) * s for d, s in zip(shape, strides)))
    if vc.span_bytes and vc.ptr < ptr + span and ptr < vc.ptr + vc.span_bytes:
        raise ArgumentError(f"bias overlaps C in memory; C is written while the bias is read: {separate_copy('bias')}")
    return BiasView(ptr, view, span, owner)
