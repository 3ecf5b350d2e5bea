"""The C-ABI unit that blasdx.numba links (pipeline.numba_unit), without numba-cuda (so under every NVRTC CI has):
a Grid() descriptor's unit wraps its tile loop beside its tile's functions, takes the whole problem's bias, compiles
to LTO-IR, and is keyed apart from its tile's unit."""

from __future__ import annotations

import pytest

import blasdx.pipeline
from blasdx import SM, Arrangement, Grid, Precision, Size
from blasdx.codegen.hooks import NO_FUSION

pytestmark = pytest.mark.compile

GRID = (Size(300, 200, 250) + Precision("bfloat16", "bfloat16", "float32")
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid())
TILE_LOOP = ("int {}_block_tile_row0(", "int {}_block_tile_col0(", "int {}_rows_inside(", "int {}_cols_inside(",
             "void {}_mainloop(", "void {}_mainloop_range(", "void {}_store_block_tile(")


def test_a_grid_unit_wraps_the_tile_loop_beside_its_tiles_functions():
    ns, source = blasdx.pipeline.numba_unit_source(GRID.plan, NO_FUSION)
    for function in (*TILE_LOOP, "void {}_multiply(", "void {}_store_partial("):
        assert "__device__ " + function.format(ns) in source, function
    tile_ns, tile_source = blasdx.pipeline.numba_unit_source(GRID.tile_descriptor.plan, NO_FUSION)
    assert tile_ns != ns, "a Grid() unit and its tile's are keyed apart"
    assert not any(function.format(tile_ns) in tile_source for function in TILE_LOOP)


@pytest.mark.parametrize("bias, offset", [
    (True, "bias + row0 * static_cast<long long>(bias_row_stride) + col0 * static_cast<long long>(bias_col_stride)"),
    ("row", "bias + col0 * static_cast<long long>(bias_col_stride)"),
], ids=["whole", "row"])
def test_store_block_tile_takes_the_whole_problems_bias(bias, offset):
    fusion = blasdx.pipeline.fusion(GRID, None, "relu", None, None, None, None, True)
    if bias == "row":
        fusion = fusion.reading_bias_by_column()
    ns, source = blasdx.pipeline.numba_unit_source(GRID.plan, fusion)
    store = source[source.index(f"__device__ void {ns}_store_block_tile("):]
    assert f"store_with_bias_op{{{offset}, bias_row_stride, bias_col_stride}}" in store.splitlines()[1]


@pytest.mark.parametrize("arch", [800, 900])
def test_grid_units_compile_to_ltoir(arch):
    desc = GRID.replace(SM(arch))
    fusion = blasdx.pipeline.fusion(desc, "negate", "relu", None, None, None, None, True)
    unit = blasdx.pipeline.numba_unit(desc.plan, fusion, arch)
    assert unit.arch == arch and len(unit.ltoir) > 0
    assert unit.namespace == blasdx.pipeline.numba_unit_source(desc.plan, fusion)[0]
