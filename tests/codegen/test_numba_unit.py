"""The C-ABI unit that blasdx.numba links (pipeline.numba_unit), without numba-cuda (so under every NVRTC CI has):
a Grid() descriptor's unit wraps its tile loop beside its tile's functions, takes the whole problem's bias, compiles
to LTO-IR, and is keyed apart from its tile's unit; a Grouped() descriptor's wraps the groups' scheduler instead."""

from __future__ import annotations

import pytest

import blasdx.pipeline
from blasdx import SM, Arrangement, Grid, Grouped, Precision, Size
from blasdx.codegen.hooks import NO_FUSION
from blasdx.errors import UnsupportedError
from blasdx.kinds.grouped import SCHEDULE_SIZE

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


GROUPED = GRID.replace(Size(256, 200, 320)).replace(Grouped())  # k of whole 16 bytes a row, as TMA takes
GROUPS_LOOP = ("void {}_schedule_groups(", "long long {}_scheduled_tiles(", "void {}_tile_of_groups(",
               "int {}_cols_inside(", "void {}_group_mainloop(", "void {}_store_block_tile(")


def test_a_grouped_unit_wraps_the_groups_scheduler_instead_of_the_fixed_tile_order():
    ns, source = blasdx.pipeline.numba_unit_source(GROUPED.plan, NO_FUSION)
    for function in GROUPS_LOOP:
        assert "__device__ " + function.format(ns) in source, function
    for function in ("int {}_block_tile_row0(", "int {}_rows_inside(", "void {}_mainloop(", "void {}_mainloop_range("):
        assert function.format(ns) not in source, f"{function}: a fixed m's, which a Grouped() call's rows replace"
    assert f"static_assert(sizeof({ns}::group_schedule) == {SCHEDULE_SIZE}," in source
    store = source[source.index(f"__device__ void {ns}_store_block_tile("):]
    assert store.splitlines()[1].rstrip().endswith(", rows);"), "store_block_tile writes the group's rows alone"
    grid_ns, _ = blasdx.pipeline.numba_unit_source(GRID.plan, NO_FUSION)
    assert grid_ns != ns, "a Grouped() unit and the Grid() one of its sizes are keyed apart"


def test_a_grouped_units_store_takes_each_groups_bias_after_the_rows():
    fusion = blasdx.pipeline.fusion(GROUPED, None, "relu", None, None, None, None, True).reading_bias_by_column()
    ns, source = blasdx.pipeline.numba_unit_source(GROUPED.plan, fusion)
    store = source[source.index(f"__device__ void {ns}_store_block_tile("):].splitlines()
    assert "S alpha, S beta, int rows, const C* bias, int bias_row_stride, int bias_col_stride)" in store[0]
    assert "store_with_bias_op{bias + col0 * static_cast<long long>(bias_col_stride)" in store[1]


@pytest.mark.parametrize("precision", [("bfloat16", "bfloat16", "bfloat16"), ("float16", "float16", "float32"),
                                       ("float8_e4m3", "float8_e4m3", "float32")], ids=["bf16", "f16-f32", "fp8"])
def test_grouped_units_compile_to_ltoir_for_sm_900(precision):
    desc = GROUPED.replace(Precision(*precision))
    fusion = blasdx.pipeline.fusion(desc, None, "relu", None, None, None, None, True)
    unit = blasdx.pipeline.numba_unit(desc.plan, fusion, 900)
    assert unit.arch == 900 and len(unit.ltoir) > 0
    assert unit.namespace == blasdx.pipeline.numba_unit_source(desc.plan, fusion)[0]


def test_grouped_tiles_are_sm_900s_so_sm_800_is_refused():
    with pytest.raises(UnsupportedError, match=r"Grouped\(\) runs Grid\(\)'s TMA kernel on wgmma tiles"):
        GROUPED.replace(SM(800)).plan  # noqa: B018 - planning is what refuses
    with pytest.raises(UnsupportedError, match=r"arch 800 is older than the descriptor's SM\(900\)"):
        blasdx.pipeline.numba_unit(GROUPED.plan, NO_FUSION, 800)
