"""Tensor maps for the grid kernel's TMA copies (``GridPlan.tma``).

A tensor map (the driver's CUtensorMap, 128 bytes) tells the tensor memory accelerator
where a matrix is and how to cut it into boxes: here the whole A or B of a launch, as
(inner, outer, batch item), with a box of one swizzled slab of a tile's stage. The kernel
takes it by value; it holds the data pointer, so a call with other arrays writes it again
(``TensorMap.write``, skipped while the pointer stays).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

from ..errors import DeviceError
from .device import driver_function

TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGNMENT = 64
# CUtensorMapDataType by element size: the copies move bits, so unsigned integers of the size
# (zeros past the bounds are zero bits: 0.0 for the floating-point formats too).
_DATA_TYPE = {1: 0, 2: 1, 4: 2, 8: 4}
# CUtensorMapSwizzle by the swizzled layout's row bytes (blasdx.arch.SWIZZLE_WIDTHS).
_SWIZZLE = {32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE = 0
_L2_PROMOTION_256B = 3
_FILL_ZEROS = 0
_RANK = 3


@cache
def _encode_tiled():
    """The driver's cuTensorMapEncodeTiled (CUDA 12.0+ drivers), with its argument types."""
    encode = driver_function("cuTensorMapEncodeTiled", "TMA")
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    encode.restype = ctypes.c_int
    return encode


@dataclass(frozen=True)
class OperandLayout:
    """One operand as its tensor map sees it: ``inner`` x ``outer`` elements (the contiguous
    dimension first) per batch item, rows ``ld`` elements apart, items ``batch_stride``."""

    element_size: int
    inner: int
    outer: int
    batch: int
    ld: int
    batch_stride: int
    box_inner: int  # elements of one slab's rows (its swizzle's bytes)
    box_outer: int  # the slab's rows
    swizzle: int  # bytes


class TensorMap:
    """One operand's tensor map, encoded into ``address`` (TENSOR_MAP_BYTES, aligned to
    TENSOR_MAP_ALIGNMENT: an argument slot of the launch)."""

    def __init__(self, layout: OperandLayout, address: int) -> None:
        self.layout = layout
        self.address = address
        self.pointer = -1  # the data pointer it holds (none yet)
        size = layout.element_size
        batch_stride = layout.batch_stride if layout.batch > 1 else layout.ld * layout.outer
        self._dims = (ctypes.c_uint64 * _RANK)(layout.inner, layout.outer, layout.batch)
        self._strides = (ctypes.c_uint64 * (_RANK - 1))(layout.ld * size, -(-batch_stride * size // 16) * 16)
        self._box = (ctypes.c_uint32 * _RANK)(layout.box_inner, layout.box_outer, 1)
        self._element_strides = (ctypes.c_uint32 * _RANK)(1, 1, 1)

    def write(self, pointer: int) -> None:
        """Encode the map of the operand at ``pointer`` (a no-op where it holds that one)."""
        if pointer == self.pointer:
            return
        layout = self.layout
        result = _encode_tiled()(self.address, _DATA_TYPE[layout.element_size], _RANK, pointer, self._dims,
                                 self._strides, self._box, self._element_strides, _INTERLEAVE_NONE,
                                 _SWIZZLE[layout.swizzle], _L2_PROMOTION_256B, _FILL_ZEROS)
        if result != 0:
            raise DeviceError(f"cuTensorMapEncodeTiled refused {layout} at {pointer:#x} (CUresult {result})")
        self.pointer = pointer
