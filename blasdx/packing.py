"""Packed storage of int4, uint4 and binary values, as the tensor cores read them.

Values are packed along one axis (k: the rows of A, the columns of B): two 4-bit values
per uint8, the first in the low nibble; 32 one-bit values per uint32, the first in bit 0.
``pack`` leaves the packed axis contiguous in memory, which is what a row-major A (pack
along axis -1) and a column-major B (pack along axis -2) need. Both functions take and
return NumPy or CuPy arrays (PyTorch tensors: go through ``cupy.asarray``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .describe.precision import PRECISIONS
from .errors import ArgumentError
from .runtime.device import cupy_module

_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "binary": (0, 1)}
_UNPACKED_DTYPE = {"int4": np.int8, "uint4": np.uint8, "binary": np.uint8}


def _module(x: Any) -> Any:
    if type(x).__module__.split(".")[0] == "cupy":
        return cupy_module()
    return np


def _packed_precision(precision: str) -> int:
    if precision not in _RANGES:
        raise ArgumentError(
            f"precision {precision!r} is not packed; pack() and unpack() take 'int4', 'uint4' or "
            f"'binary'"
        )
    return PRECISIONS[precision].pack


def _axis(ndim: int, axis: int) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ArgumentError(f"axis={axis!r} is out of range for an array of {ndim} dimensions")
    return int(axis) % ndim


def pack(values: Any, precision: str, axis: int = -1) -> Any:
    """Pack integer (or bool) ``values`` of ``precision`` along ``axis``: the result has that
    axis divided by 2 (int4, uint4; dtype uint8) or 32 (binary; dtype uint32), contiguous.

    For execute(): ``pack(a, p, axis=-1)`` for A (m, k) and ``pack(b, p, axis=-2)`` for
    B (k, n). Values out of range are an error, never wrapped.
    """
    per = _packed_precision(precision)
    xp = _module(values)
    x = xp.asarray(values)
    if x.dtype.kind not in "biu":
        raise ArgumentError(
            f"pack() takes integer or bool values, got dtype {x.dtype.name}; round them first "
            f"(x.round().astype('int8'))"
        )
    if x.ndim == 0:
        raise ArgumentError("pack() takes an array of at least one dimension, got a scalar")
    ax = _axis(x.ndim, axis)
    if x.shape[ax] % per:
        raise ArgumentError(
            f"axis {axis} has {x.shape[ax]} values, not a multiple of {per} ({precision} packs "
            f"{per} per {'byte' if per == 2 else 'uint32'}); pad it with zeros to "
            f"{-(-x.shape[ax] // per) * per}"
        )
    lo, hi = _RANGES[precision]
    if x.size and (int(x.min()) < lo or int(x.max()) > hi):
        raise ArgumentError(
            f"{precision} values must lie in [{lo}, {hi}], got values in "
            f"[{int(x.min())}, {int(x.max())}]"
        )
    x = xp.moveaxis(x, ax, -1)
    groups = x.reshape(*x.shape[:-1], x.shape[-1] // per, per)
    if per == 2:
        nibbles = groups.astype(xp.uint8) & xp.uint8(0xF)  # two's complement low nibble
        packed = nibbles[..., 0] | (nibbles[..., 1] << xp.uint8(4))
    else:
        shifts = xp.arange(32, dtype=xp.uint32)
        packed = (groups.astype(xp.uint32) << shifts).sum(axis=-1, dtype=xp.uint32)
    return xp.moveaxis(xp.ascontiguousarray(packed), -1, ax)


def unpack(packed: Any, precision: str, axis: int = -1) -> Any:
    """The values that ``pack(values, precision, axis)`` packed: int8 for int4, uint8 for
    uint4 and binary, with ``axis`` multiplied by 2 or 32."""
    per = _packed_precision(precision)
    xp = _module(packed)
    p = xp.asarray(packed)
    want = np.dtype(PRECISIONS[precision].numpy_name)
    if p.dtype != want:
        raise ArgumentError(f"packed {precision} data must have dtype {want.name}, got {p.dtype.name}; "
                            f"make it with blasdx.pack()")
    if p.ndim == 0:
        raise ArgumentError("unpack() takes an array of at least one dimension, got a scalar")
    ax = _axis(p.ndim, axis)
    p = xp.moveaxis(p, ax, -1)
    if per == 2:
        low, high = p & xp.uint8(0xF), p >> xp.uint8(4)
        values = xp.stack([low, high], axis=-1)
        if precision == "int4":
            values = (values.astype(xp.int8) ^ xp.int8(8)) - xp.int8(8)  # sign-extend
    else:
        shifts = xp.arange(32, dtype=xp.uint32)
        values = (p[..., None] >> shifts) & xp.uint32(1)
    values = values.astype(_UNPACKED_DTYPE[precision]).reshape(*p.shape[:-1], p.shape[-1] * per)
    return xp.moveaxis(values, -1, ax)
