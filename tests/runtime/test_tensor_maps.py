"""The TMA grid kernel's launch without a GPU: the tensor maps' aligned slots in the argument block, after
the other parameters, and the whole matrices each map describes, contiguous dimension first."""

from __future__ import annotations

import pytest

import blasdx
from blasdx import SM, Grid, Size

from ..support import F16F32, arrangement_of


def test_the_tma_launch_puts_tensor_maps_in_aligned_slots_after_the_others():
    import ctypes

    from blasdx.runtime.launch import ArgumentBlock
    from blasdx.runtime.tensor_map import TENSOR_MAP_ALIGNMENT, TENSOR_MAP_BYTES

    block = ArgumentBlock(11, 2)
    first, second = block.map_addresses
    assert first % TENSOR_MAP_ALIGNMENT == 0 and second == first + TENSOR_MAP_BYTES
    base = ctypes.addressof(block.values)
    assert first >= base + 11 * 16 and second + TENSOR_MAP_BYTES <= base + len(block.values)
    slots = (ctypes.c_void_p * 13).from_address(block.address)
    assert list(slots)[-2:] == [first, second]


@pytest.mark.parametrize("arrangement", ["rcr", "crr", "rrr", "ccr"])
def test_tensor_maps_see_the_whole_matrices_contiguous_dimension_first(arrangement):
    import numpy as np

    from blasdx.runtime.arguments import MatrixView
    from blasdx.runtime.launch import operand_layout

    desc = Size(1000, 600, 320) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    plan = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    m, n, k = 1000, 600, 320
    for name, (rows, cols) in (("a", (m, k)), ("b", (k, n))):
        whole = getattr(plan, name)
        view = MatrixView(name, 0, 0, np.dtype(np.float16), (3, rows, cols), (rows * cols + 64, 0, 0), 2, None)
        layout = operand_layout(plan, name, view, 3)
        contiguous = cols if whole.layout == "row_major" else rows
        assert (layout.inner, layout.outer) == (contiguous, rows * cols // contiguous)
        assert layout.batch == 3 and layout.batch_stride == rows * cols + 64 and layout.ld == whole.ld
        part = plan.tma_operand(name)
        assert (layout.box_inner, layout.box_outer) == (part.slab_elements, part.slab_rows)
        assert layout.box_inner * 2 == layout.swizzle == 128
