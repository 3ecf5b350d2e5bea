"""Accumulation('accurate' | 'fast') (issue 47): where the tensor cores keep a narrower running sum than C's
type (FP8 wgmma), the partial sums go into float32 every 128 of k unless the descriptor asks for the fast
path; explain() says which runs; the tiles leave registers for the partial sums; the kernels promote."""

from __future__ import annotations

import re

import pytest

from blasdx import (
    SM,
    Accumulation,
    Arrangement,
    Block,
    BlockDim,
    DescriptorError,
    Grid,
    InstructionFamily,
    Precision,
    Size,
    Stages,
    Tile,
    Warp,
)
from blasdx.arch import PROMOTION_K, WGMMA_FP8
from blasdx.codegen.hooks import NO_FUSION
from blasdx.codegen.naming import kernel_name
from blasdx.codegen.render import render_grid_kernel
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.describe.families import common, wgmma
from blasdx.kinds import launched_plan
from blasdx.pipeline import kernel_source
from blasdx.plan import grid_with_alignment, with_alignment

RCR = Arrangement("row_major", "col_major", "row_major")
FP8 = Precision("float8_e4m3", "float8_e5m2", "float32")


def block(size=(64, 64, 256), prec=FP8, sm=900, *more):
    desc = Size(*size) + prec + RCR + SM(sm) + Block()
    for op in more:
        desc = desc + op
    return desc


def test_accumulation_takes_accurate_or_fast_and_says_what_else_it_wants():
    assert Accumulation("fast").value == "fast"
    with pytest.raises(DescriptorError, match=r"'accurate' \(partial sums promoted into float32\) or 'fast'"):
        Accumulation("exact")
    assert block() + Accumulation("accurate") == Accumulation("accurate") + block()
    assert Accumulation("fast") in (block() + Accumulation("fast")).operators


def test_only_fp8_wgmma_accumulates_narrowly():
    from blasdx import arch

    narrow = [i.name for i in vars(arch).values() if isinstance(i, arch.Instruction) and i.narrow_accumulation]
    assert narrow == ["wgmma_fp8"]
    assert WGMMA_FP8.fallback is not None and not WGMMA_FP8.fallback.narrow_accumulation


@pytest.mark.parametrize("prec", [FP8, Precision("float8_e4m3", "float8_e4m3", "float16"),
                                  Precision("float8_e5m2", "float8_e5m2", "bfloat16")])
def test_fp8_wgmma_promotes_every_128_of_k_unless_told_fast(prec):
    assert block(prec=prec).plan.promote_k == PROMOTION_K == 128
    assert block(prec=prec).plan.instruction.name == "wgmma_fp8"
    assert block((64, 64, 256), prec, 900, Accumulation("accurate")).plan.promote_k == 128
    assert block((64, 64, 256), prec, 900, Accumulation("fast")).plan.promote_k == 0
    grid = Size(4096, 4096, 4096) + prec + RCR + SM(900) + Grid()
    assert grid.tile_descriptor.plan.promote_k == 128
    assert (grid + Accumulation("fast")).tile_descriptor.plan.promote_k == 0


@pytest.mark.parametrize("desc", [
    block(prec=Precision("float16", "float16", "float32")),  # wgmma keeps float32's precision
    block(sm=890),  # mma.sync's FP8 does too
    block((64, 64, 256), FP8, 900, InstructionFamily("mma")),
    block((64, 64, 256), Precision("int8", "int8", "int32")),
    Size(64, 64, 64) + FP8 + RCR + SM(900) + Warp(),
], ids=["f16-wgmma", "fp8-sm890", "fp8-mma", "int8", "fp8-warp"])
def test_nothing_else_promotes(desc):
    assert desc.plan.promote_k == 0
    assert (desc + Accumulation("fast")).plan.promote_k == 0


def test_explain_says_which_accumulation_runs():
    accurate = block().explain(width=0)
    assert "accumulation: accurate - wgmma keeps about 14 bits of its running sum for 8-bit floats, so each 128 of k" in accurate
    fast = (block() + Accumulation("fast")).explain(width=0)
    assert "accumulation: fast (Accumulation('fast')) - in wgmma's accumulators over the whole K loop" in fast
    grid = Size(2048, 2048, 16384) + FP8 + RCR + SM(900) + Grid()
    assert "  accumulation: accurate - " in grid.explain(width=0)
    assert "K tiles go in pairs, the second's wgmma running while the first's partial sums are added" in grid.explain(width=0)
    assert "each multiply runs while the one before it ends" in (grid + Accumulation("fast")).explain(width=0)
    f16 = block(prec=Precision("float16", "float16", "float32"))
    assert "accumulation:" not in f16.explain(width=0)
    assert ("accumulation: wgmma_f16 keeps the precision of its accumulator type over the whole K loop: "
            "Accumulation('fast') changes nothing here") in (f16 + Accumulation("fast")).explain(width=0)


def test_the_partial_sums_count_in_the_warpgroup_tiles_registers():
    # 64 x 256 promoted: 128 accumulators and 128 partial sums, over 192; two tiles of 64 x 128 fit (128 + 64).
    assert wgmma.tile_width(64, 256, 128, 8) == 256
    assert wgmma.tile_width(64, 256, 128, 8, promoted=True) == 128
    assert wgmma.accumulator_registers(128, promoted=True) == 192
    assert wgmma.accumulator_registers(512, promoted=True) == 65536 // 512 - 48
    plan = block((64, 256, 128)).plan
    assert (plan.tile_n, plan.partial_sum_values, plan.accumulator_size) == (128, 64, 128)


def test_explain_counts_the_k_tiles_copied_ahead_of_a_promoting_cp_async_loop():
    grid = Size(1000, 520, 1000) + FP8 + RCR + SM(900) + Grid()
    assert "the copies of the next 1 K tile run while the block multiplies one" in (grid + Stages(2)).explain(width=0)
    assert "the copies of the next 2 K tiles run while" in (grid + Stages(4)).explain(width=0)


def test_k_tiles_go_in_pairs_only_where_each_warpgroup_has_one_tile():
    grid = Size(2048, 2048, 16384) + FP8 + RCR + SM(900) + Grid()
    tile = grid.tile_descriptor.plan
    assert tile.promotes_in_pairs and tile.partial_sum_values == 2 * tile.tile_n // 2  # two tiles of partial sums
    idle = (grid + Tile(64, 128, 128) + BlockDim(256)).tile_descriptor.plan  # one tile, two warpgroups
    assert idle.tiles == 1 and not idle.promotes_in_pairs and idle.partial_sum_values == idle.tile_n // 2
    # ... nor does the K loop promote it itself (consume_range_promoted): the idle warpgroup would multiply past the
    # tile; it takes the generic loop, whose issue_wgmma skips a warpgroup without a tile
    assert not idle.promotes_one_tile and tile.promotes_one_tile
    source = kernel_source(grid_with_alignment((grid + Tile(64, 128, 128) + BlockDim(256)).plan, (16,) * 3))
    assert "constexpr bool promotes_one_tile = false;" in source


def test_grid_suggests_a_tile_of_two_warpgroups_where_it_promotes():
    grid = Size(2048, 2048, 16384) + FP8 + RCR + SM(900) + Grid()
    tile = grid.tile_descriptor.plan
    assert (tile.m, tile.n, tile.k, tile.threads) == (128, 128, 128, 256)
    assert tile.promotes_in_pairs
    fast = (grid + Accumulation("fast")).tile_descriptor.plan
    assert (fast.m, fast.n, fast.k, fast.threads) == (256, 128, 128, 512)
    two_passes = (grid + Tile(256, 128, 128) + BlockDim(256)).tile_descriptor.plan
    assert not two_passes.promotes_in_pairs  # two tiles a warpgroup: each promoted before the next starts
    assert "each K tile's partial sums are added before the next one's wgmma start" in \
        (grid + Tile(256, 128, 128) + BlockDim(256)).explain(width=0)


def _ptxas(desc, alignment=16):
    plan = grid_with_alignment(desc.plan, (alignment,) * 3) if desc.is_grid else with_alignment(desc.plan, (alignment,) * 3)
    source = kernel_source(plan)
    name = kernel_name(launched_plan(plan), NO_FUSION)
    cubin, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log
    return source, log


@pytest.mark.parametrize("desc, alignment", [
    (Size(2048, 2048, 16384) + FP8 + RCR + SM(900) + Grid(), 16),  # TMA, K tiles in pairs
    (Size(8192, 7168, 2048) + FP8 + RCR + SM(900) + Grid(), 16),  # TMA, 128 x 192, one K tile at a time
    (Size(4096, 4096, 4096) + FP8 + RCR + SM(900) + Grid() + Tile(256, 128, 128) + BlockDim(256), 16),  # TMA, two passes
    (Size(2048, 2048, 16384) + FP8 + RCR + SM(900) + Grid(), 1),  # cp.async
    (Size(8192, 7168, 2048) + FP8 + RCR + SM(900) + Grid(), 1),  # cp.async, 128 x 192
    (block((64, 64, 1024)), 16),  # the batched block kernel, eight promotions a multiply
], ids=["grid-tma-pairs", "grid-tma-192", "grid-tma-passes", "grid-cp-async", "grid-cp-async-192", "block"])
def test_promoting_kernels_keep_their_wgmma_in_flight_and_spill_nothing(desc, alignment):
    source, log = _ptxas(desc, alignment)
    assert "wgmma_promoted" in source
    assert "serialized" not in log and "C75" not in log, log  # C7514, C7515, C7517, C7518: wgmma waited for one by one
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.parametrize("size, cols", [
    ((8192, 8192, 8192), 192),  # 21 waves of 128 x 192 against 32 of 128 x 128
    ((4096, 1536, 7168), 192),  # 2 waves against 3
    ((8192, 7168, 2048), 192),
    ((2048, 2048, 16384), 128),  # 176 tiles of 192 and 256 of 128 both take 2 waves: 128's are shorter
    ((1024, 4096, 4096), 128),
])
def test_promoted_tiles_take_192_columns_where_their_waves_end_sooner(size, cols):
    grid = Size(*size) + FP8 + RCR + SM(900) + Grid()
    tile = grid.tile_descriptor.plan
    assert (tile.m, tile.n, tile.threads) == (128, cols, 256)
    assert common.wave_fitted_promoted_cols(size[0], size[1])[0] == cols
    assert common.wave_fitted_promoted_cols(16384, 128) == (128, "")  # one column of tiles either way
    assert tile.promotes_in_pairs == (cols == 128)  # 96 accumulators and two tiles of 96 partial sums do not fit
    text = grid.explain(width=0)
    assert ("192 columns, not 128: " in text) == (cols == 192)
    if cols == 192:
        assert "each K tile's partial sums are added before the next one's wgmma start" in text
    assert (grid + Accumulation("fast")).tile_descriptor.plan.n == 128  # fast: 256 x 128 on four warpgroups
    assert (grid + BlockDim(256)).tile_descriptor.plan.n == 128  # as given, no wave fit


@pytest.mark.parametrize("out, scales, spilled", [
    ("bfloat16", ("block", "block"), 0),  # DeepSeek's recipe
    ("bfloat16", ("tensor", "block"), 0),
    ("float32", ("tensor", "tensor"), 0),
    ("float32", ("block", "block"), 4),  # (4 bytes, beside TMA stores' staging)
])
def test_blockwise_scales_on_a_tile_over_two_column_blocks_compile_with_at_most_a_word_spilled(out, scales, spilled):
    desc = Size(8192, 7168, 2048) + Precision("float8_e4m3", "float8_e4m3", out) + RCR + SM(900) + Grid()
    plan = grid_with_alignment(desc.plan, (16,) * 3)
    assert plan.tile.n == 192 and plan.tma and plan.scales_refusal(*scales, False) == ""
    source = render_grid_kernel(plan, "k", NO_FUSION.with_scales(*scales))
    assert ("by_columns = true" in source) == (scales[1] == "block")
    _, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), "k")
    stores = int(re.search(r"(\d+) bytes spill stores", log).group(1))
    assert stores <= spilled, log
    assert "C75" not in log, log
