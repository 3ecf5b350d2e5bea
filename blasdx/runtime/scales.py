"""Scaled FP8: the scales execute() takes for A and B (``scale_a=``, ``scale_b=``), checked and read
as the kernel reads them.

A recipe is each side's scale: a Python number (folded into alpha), one value on the device
("tensor"), one per row of A or column of B ("row", "col"), or DeepSeek's blockwise scales: A's per
row and 128 of k ((M, ceil(K/128)), "block"), B's per 128 of k and 128 columns ((ceil(K/128),
ceil(N/128)), "block"). Scales that vary along k multiply the partial sums at each promotion
(blasdx.plan.block.GemmPlan.promote_k); the others multiply the products once, before the epilogue.
The layouts accepted are torch.nn.functional.scaled_mm's (blockwise scales column-major: A's
strides (1, M), B's (1, K/128)) and contiguous ones. One set of scales serves every item of a batch.
Numbers are checked to be finite; scales on the device are not read on the host (that would wait
for the GPU), so non-finite ones there give non-finite products, as in cuBLAS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arch import PROMOTION_K
from ..errors import ArgumentError
from .arguments import MatrixView, _contiguous_strides, _from_cupy_or_interface, separate_copy

if TYPE_CHECKING:
    from ..plan import DescriptorPlan

# K and N per scale of the blockwise recipe (DeepSeek-V3's: A 1 x 128, B 128 x 128).
SCALE_BLOCK = PROMOTION_K
CONTIGUOUS = "{0}.contiguous() (PyTorch) or cupy.ascontiguousarray({0})"  # the fix of a layout refused


@dataclass(frozen=True)
class ScaleView:
    """One side's scale on the device: its pointer and element strides along (row or k block, column
    or k block), 0 where it broadcasts. ``kind``: "tensor", "row" (A), "col" (B) or "block"."""

    kind: str
    ptr: int
    strides: tuple[int, int]  # A: (row, k block); B: (k block, column or column block)
    span_bytes: int
    keepalive: Any
    batch_stride: int = 0  # Grouped()'s B: from one group's scales to the next's (0: one set for all)

    @property
    def along_k(self) -> bool:
        """Whether the scale varies along k (it then multiplies each promotion's partial sums)."""
        return self.kind == "block"


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def number_scale(x: Any, name: str) -> float:
    """A scale given as a Python or NumPy number: finite, real."""
    value = float(x)
    if not math.isfinite(value):
        raise ArgumentError(f"{name}={x!r} is not finite; FP8 scales are finite float32 values")
    return value


def fold_number_scales(plan: DescriptorPlan, alpha: Any, scale_a: Any, scale_b: Any) -> tuple[Any, dict[str, Any]]:
    """A scaled call's alpha times its scales given as numbers, and its scales on the device by name ("scale_a",
    "scale_b"), for the kernel to read; ArgumentError where A and B are not FP8, the precisions that take scales."""
    if not (plan.a.precision.startswith("float8") and plan.b.precision.startswith("float8")):
        raise ArgumentError(f"scale_a= and scale_b= scale FP8 operands, but this GEMM's A and B are {plan.a.precision} "
                            f"and {plan.b.precision}; scale them with alpha (or the a_load/b_load hooks)")
    on_device: dict[str, Any] = {}
    for name, x in (("scale_a", scale_a), ("scale_b", scale_b)):
        if is_number(x):
            alpha = alpha * number_scale(x, name)
        elif x is not None:
            on_device[name] = x
    return alpha, on_device


def scale_view(x: Any, name: str, m: int, n: int, k: int, vc: MatrixView, groups: int = 0) -> ScaleView:
    """Check ``x``, the scale of A (``name`` "scale_a": rows m) or of B ("scale_b": columns n), against
    the GEMM of depth k and C's device; raise ArgumentError naming the layout expected. ``groups``:
    Grouped()'s B, whose scales are one value for all or one set a group (a leading dimension of
    ``groups``: (groups,), (groups, n), (groups, ceil(K/128), ceil(N/128)))."""
    ptr, shape, byte_strides, dtype, device_id, owner = _from_cupy_or_interface(x)
    shape = tuple(int(d) for d in shape)
    if dtype != np.float32:
        raise ArgumentError(f"{name} has dtype {dtype.name}; FP8 scales are float32: {name}.float() (PyTorch) or "
                            f"{name}.astype(cupy.float32) (the recipes: {recipes_of(name, m, n, k)})")
    if device_id != vc.device_id:
        raise ArgumentError(f"{name} is on device {device_id} but C is on device {vc.device_id}; move it to C's device")
    if byte_strides is None:
        byte_strides = _contiguous_strides(shape, 4)
    if any(s % 4 for s in byte_strides):
        raise ArgumentError(f"{name} strides {tuple(byte_strides)} (bytes) are not whole float32 elements; "
                            f"pass a contiguous copy ({CONTIGUOUS.format(name)})")
    strides = tuple(int(s) // 4 for s in byte_strides)
    span = 4 * (1 + sum((d - 1) * s for d, s in zip(shape, strides)))
    batch_stride = 0
    if groups and name == "scale_b" and math.prod(shape) != 1:
        if not shape or shape[0] != groups:
            raise ArgumentError(f"scale_b has shape {shape}; Grouped() takes one value for all groups or one set a "
                                f"group, its first dimension the {groups} groups: ({groups},) a value a group, "
                                f"({groups}, {n}) one a column, or ({groups}, ceil(K/{SCALE_BLOCK}), "
                                f"ceil(N/{SCALE_BLOCK})) = ({groups}, {-(-k // SCALE_BLOCK)}, {-(-n // SCALE_BLOCK)}) "
                                f"blockwise (a set for all: scale_b.expand({groups}, ...))")
        batch_stride, shape, strides = strides[0], shape[1:], strides[1:]
    kind, view_strides = scale_kind(name, shape, strides, m, n, k)
    if ptr % 4:
        raise ArgumentError(f"{name}'s data pointer {ptr:#x} is not aligned to its 4-byte element; pass a copy")
    if vc.span_bytes and ptr < vc.ptr + vc.span_bytes and vc.ptr < ptr + span:
        raise ArgumentError(f"{name} overlaps C in memory; C is written while the scales are read: "
                            f"{separate_copy(name)}")
    return ScaleView(kind, ptr, view_strides, span, owner, batch_stride)


def recipes_of(name: str, m: int, n: int, k: int) -> str:
    """The shapes and layouts ``name`` may take, in words."""
    blocks_k, blocks_n = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
    if name == "scale_a":
        return (f"one value (shape () or (1,)), one a row of A ((M,) or (M, 1) = ({m},) or ({m}, 1)), or one a row "
                f"and {SCALE_BLOCK} of k ((M, ceil(K/{SCALE_BLOCK})) = ({m}, {blocks_k}), strides (1, {m}) as "
                f"torch.nn.functional.scaled_mm takes them, or contiguous)")
    return (f"one value (shape () or (1,)), one a column of B ((N,) or (1, N) = ({n},) or (1, {n})), or one a "
            f"{SCALE_BLOCK} x {SCALE_BLOCK} block of B ((ceil(K/{SCALE_BLOCK}), ceil(N/{SCALE_BLOCK})) = "
            f"({blocks_k}, {blocks_n}), strides (1, {blocks_k}) as torch.nn.functional.scaled_mm takes them, "
            f"or contiguous)")


def scale_kind(name: str, shape: tuple[int, ...], strides: tuple[int, ...], m: int, n: int,
               k: int) -> tuple[str, tuple[int, int]]:
    """The recipe of a scale of ``shape`` and element ``strides`` (``name``: "scale_a" or "scale_b") and the
    strides the kernel reads it by (A's along (row, k block), B's along (k block, column or column block))."""
    is_a = name == "scale_a"
    blocks_k, blocks_n = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
    size = math.prod(shape)
    if size == 0:
        raise ArgumentError(f"{name} is empty (shape {shape}); give {recipes_of(name, m, n, k)}")
    if any(s < 0 for s in strides):
        raise ArgumentError(f"{name} has negative strides {strides}; pass {CONTIGUOUS.format(name)}")
    if size == 1 and len(shape) <= 2:
        return "tensor", (0, 0)
    if is_a and shape in ((m,), (m, 1)):
        return "row", (strides[0], 0)
    if not is_a and shape in ((n,), (1, n)):
        return "col", (0, strides[-1])
    if is_a and shape == (m, blocks_k):
        if strides not in ((1, m), (blocks_k, 1)):
            raise ArgumentError(f"{name} has strides {strides} (elements): blockwise scales of A are column-major "
                                f"(strides (1, {m}), as torch.nn.functional.scaled_mm takes them) or contiguous "
                                f"(({blocks_k}, 1)); pass {CONTIGUOUS.format(name)}")
        return "block", (strides[0], strides[1])
    if not is_a and shape == (blocks_k, blocks_n):
        if strides not in ((1, blocks_k), (blocks_n, 1)):
            raise ArgumentError(f"{name} has strides {strides} (elements): blockwise scales of B are column-major "
                                f"(strides (1, {blocks_k}), as torch.nn.functional.scaled_mm takes them) or "
                                f"contiguous (({blocks_n}, 1)); pass {CONTIGUOUS.format(name)}")
        return "block", (strides[0], strides[1])
    raise ArgumentError(f"{name} has shape {shape}, which is no FP8 scaling recipe of this {m} x {n} x {k} GEMM; "
                        f"give {recipes_of(name, m, n, k)}")
