"""The grid-level GEMM's operators (Grid(), Tile, Stages) and their rules without a GPU: values read
back as code, and what is refused (Block() with Grid(), sizes past 32-bit indices, packed precisions, stages or
tiles past shared memory) with a message that names the fix."""

from __future__ import annotations

import pytest

import blasdx
from blasdx import (
    SM,
    Block,
    BlockDim,
    DescriptorError,
    Grid,
    IncompleteDescriptorError,
    InstructionFamily,
    Precision,
    Size,
    Stages,
    Tile,
    UnsupportedError,
)

from ..support import grid


def test_operators_read_back_as_code():
    for op in (Grid(), Tile(128, 64, 32), Stages(3)):
        assert eval(repr(op), vars(blasdx)) == op


@pytest.mark.parametrize("make,match", [
    (lambda: Tile(0, 64, 32), "m must be >= 1"),
    (lambda: Tile(64, 64), "Tile.k is required"),
    (lambda: Stages(1), "between 2 and 8"),
    (lambda: Stages(9), "between 2 and 8"),
    (lambda: Stages(2.0), "must be an int"),
])
def test_bad_operator_values(make, match):
    with pytest.raises(DescriptorError, match=match):
        make()


def test_block_and_grid_together_are_refused_in_any_order():
    for desc in (lambda: Size(8, 8, 8) + Block() + Grid(), lambda: Grid() + Size(8, 8, 8) + Block()):
        with pytest.raises(DescriptorError, match=r"(Block\(\) and Grid\(\)|Grid\(\) and Block\(\)) are two ways to run"):
            desc()


@pytest.mark.parametrize("op", [Tile(64, 64, 32), Stages(3)])
def test_tile_and_stages_need_grid(op):
    desc = Size(64, 64, 64) + SM(900) + Block() + op  # composing is order-free: checked when used
    with pytest.raises(DescriptorError, match=r"add Grid\(\)"):
        desc.plan  # noqa: B018


def test_sizes_past_32_bit_indices_are_refused():
    with pytest.raises(UnsupportedError, match=r"m = 2147483648 is 2\*\*31 or more"):
        Size(2**31, 8, 8) + Grid()


def test_more_tiles_than_an_int_counts_are_refused():
    with pytest.raises(UnsupportedError, match="2\\*\\*31 or more"):
        grid(size=(2**30, 2**30, 64)).plan  # noqa: B018


def test_packed_precisions_are_refused():
    with pytest.raises(UnsupportedError, match="packed int4 or binary"):
        Size(64, 64, 256) + Precision("int4", "int4", "int32") + Grid()


def test_stages_past_shared_memory_name_the_fitting_count():
    with pytest.raises(UnsupportedError, match=r"over SM 900's limit.*use Stages\(4\)"):
        grid(Stages(8)).plan  # noqa: B018


def test_a_tile_past_shared_memory_names_the_fix():
    with pytest.raises(UnsupportedError, match="use a smaller Tile"):
        grid(Tile(1024, 512, 64)).plan  # noqa: B018


def test_a_bad_tile_is_reported_as_the_tile():
    with pytest.raises(DescriptorError, match=r"the block tile Tile\(64, 64, 16\) of this Grid\(\) descriptor"):
        grid(Tile(64, 64, 16), InstructionFamily("wgmma"), BlockDim(96)).plan  # noqa: B018


def test_execution_needs_block_or_grid():
    with pytest.raises(IncompleteDescriptorError, match=r"needs an execution operator, which this descriptor lacks: "
                                                        r"Block\(\) runs one block GEMM of Size; Grid\(\) runs"):
        (Size(64, 64, 64) + SM(900)).plan  # noqa: B018


def test_grid_traits_on_a_block_descriptor_say_so():
    with pytest.raises(DescriptorError, match=r"belongs to grid-level GEMMs; add Grid\(\)"):
        (Size(64, 64, 64) + SM(900) + Block()).tile  # noqa: B018
