"""Grouped()'s device API (issue 48): a Grouped() descriptor's device source holds Grid()'s pieces and the groups'
scheduler (schedule_groups, tile_of_groups, group_mainloop) for blocks of the tile's threads, and a kernel of one's
own on it compiles without spills. Its run on a GPU: examples/moe_down_combine.py (tests/gpu/test_gpu_examples.py)."""

from __future__ import annotations

import re

import pytest

from blasdx import SM, Arrangement, Grouped, Precision, Size
from blasdx.compiler.nvrtc import nvrtc_compile, options_for

KERNEL = r'''
extern "C" __global__ void __launch_bounds__(g::threads)
grouped_relu(const g::a_t* a, const g::b_t* b, g::c_t* c, const int* offsets, int groups, long long rows) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ g::group_schedule schedule;
  g::schedule_groups(offsets, groups, rows, schedule);
  for (long long w = blockIdx.x; w < static_cast<long long>(g::block_tiles_n) * schedule.before[groups]; w += gridDim.x) {
    const g::group_tile at = g::tile_of_groups(w, schedule, groups);
    g::accumulator acc = g::make_accumulator();
    g::group_mainloop(a, b + at.group * static_cast<long long>(g::problem_k) * g::problem_n, at, smem, acc);
    for (int i = 0; i < g::accumulator::size; ++i) acc[i] = acc[i] > 0.0f ? acc[i] : 0.0f;
    g::store_block_tile(acc, c, at.row0, at.col0, 1.0f, 0.0f, blasdx::identity{}, blasdx::identity{}, at.rows);
  }
}
'''


@pytest.mark.compile
@pytest.mark.parametrize("precision", [("bfloat16", "bfloat16", "bfloat16"), ("float8_e4m3", "float8_e4m3", "float32")])
def test_a_kernel_of_ones_own_on_the_groups_scheduler_compiles_without_spills(precision):
    desc = Size(256, 1024, 512) + Precision(*precision) + Arrangement("row_major", "col_major", "row_major") + SM(900) + \
        Grouped()
    source = desc.device_source("g")
    for name in ("schedule_groups", "tile_of_groups", "group_mainloop", "struct group_schedule"):
        assert name in source
    assert f"constexpr int block = {desc.plan.tile.threads};" in source  # the user's blocks: the tile's threads
    _, log = nvrtc_compile(source + KERNEL, options_for(900, ("-Xptxas", "-v")), "grouped_relu")
    assert "Compiling entry function 'grouped_relu'" in log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log
