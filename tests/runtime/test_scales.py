"""Scaled FP8 without a GPU (issue 47): the recipes a scale's shape and strides say, the layouts refused with the
one expected, what each kind of plan says of scales on the device, the kernel's parameters, and the scaled grid
kernels compiling without spills or serialized wgmma."""

from __future__ import annotations

import re

import numpy as np
import pytest

from blasdx import (
    SM,
    Accumulation,
    ArgumentError,
    Arrangement,
    Block,
    Grid,
    Grouped,
    Precision,
    Size,
    Stages,
    Tile,
    Warp,
)
from blasdx.codegen.hooks import NO_FUSION
from blasdx.codegen.naming import kernel_name
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.kinds import launched_plan
from blasdx.pipeline import kernel_source
from blasdx.plan import grid_with_alignment
from blasdx.plan.grid import column_blocks_reached
from blasdx.plan.kernel import SCALE_PARAMETERS
from blasdx.runtime.scales import fold_number_scales, scale_kind

RCR = Arrangement("row_major", "col_major", "row_major")
FP8 = Precision("float8_e4m3", "float8_e4m3", "float32")
M, N, K = 1000, 520, 1000  # 8 blocks of 128 along k (the last one partial), 5 along n


@pytest.mark.parametrize("name, shape, strides, kind, read_by", [
    ("scale_a", (), (), "tensor", (0, 0)),
    ("scale_a", (1,), (1,), "tensor", (0, 0)),
    ("scale_b", (1, 1), (1, 1), "tensor", (0, 0)),
    ("scale_a", (M,), (1,), "row", (1, 0)),
    ("scale_a", (M, 1), (1, 1), "row", (1, 0)),
    ("scale_b", (N,), (1,), "col", (0, 1)),
    ("scale_b", (1, N), (N, 1), "col", (0, 1)),
    ("scale_a", (M, 8), (1, M), "block", (1, M)),  # torch.nn.functional.scaled_mm's layout
    ("scale_a", (M, 8), (8, 1), "block", (8, 1)),  # contiguous
    ("scale_b", (8, 5), (1, 8), "block", (1, 8)),
    ("scale_b", (8, 5), (5, 1), "block", (5, 1)),
])
def test_a_scales_shape_says_its_recipe(name, shape, strides, kind, read_by):
    assert scale_kind(name, shape, strides, M, N, K) == (kind, read_by)


@pytest.mark.parametrize("name, shape, strides, message", [
    ("scale_a", (M, 7), (7, 1), r"shape \(1000, 7\), which is no FP8 scaling recipe .* \(1000, 8\), strides \(1, 1000\)"),
    ("scale_b", (5, 8), (8, 1), r"shape \(5, 8\), which is no FP8 scaling recipe .* \(8, 5\), strides \(1, 8\)"),
    ("scale_a", (M, 8), (16, 2), r"strides \(16, 2\) .* column-major \(strides \(1, 1000\), as torch"),
    ("scale_b", (8, 5), (1, 16), r"strides \(1, 16\) .* contiguous \(\(5, 1\)\)"),
    ("scale_a", (N,), (1,), "no FP8 scaling recipe"),  # a column's scale given for A
    ("scale_a", (0,), (1,), "empty"),
    ("scale_a", (M,), (-1,), "negative strides"),
])
def test_other_scales_are_refused_with_the_layout_expected(name, shape, strides, message):
    with pytest.raises(ArgumentError, match=message):
        scale_kind(name, shape, strides, M, N, K)


def test_the_grid_kernel_takes_blockwise_scales_where_it_promotes():
    grid = Size(4096, 4096, 4096) + FP8 + RCR + SM(900) + Grid()
    assert grid.plan.scales_refusal("block", "block", False) == "" and grid.plan.scales_refusal("row", "col", True) == ""
    assert "remove Accumulation('fast')" in (grid + Accumulation("fast")).plan.scales_refusal("block", "", False)
    assert (grid + Accumulation("fast")).plan.scales_refusal("tensor", "col", False) == ""  # not along k: any path
    assert "load hooks" in grid.plan.scales_refusal("", "block", True)
    # Tiles over two column blocks of B's scales scale each column by its own, K tiles promoted one at a time
    for tile in (Tile(128, 192, 128), Tile(128, 160, 128), Tile(128, 256, 128)):
        assert (grid + tile).plan.scales_refusal("block", "block", False) == ""
    pairs = (grid + Tile(128, 96, 128)).plan  # two tiles of partial sums fit: K tiles in pairs, whose columns share one
    assert pairs.tile.promotes_in_pairs
    assert "K tiles go in pairs" in pairs.scales_refusal("", "block", False)
    assert pairs.scales_refusal("block", "tensor", False) == ""  # A's blocks alone: a row's scale for every column
    assert "three column blocks" in (grid + Tile(128, 200, 128)).plan.scales_refusal("block", "block", False)
    # ... by the tiles C's width makes: one tile of 96 or 176 columns lies in one or two blocks
    narrow = (Size(8192, 96, 4096) + FP8 + RCR + SM(900) + Grid()).plan
    assert narrow.tile.promotes_in_pairs and narrow.scales_refusal("block", "block", False) == ""
    assert not narrow.scale_b_by_columns
    one = (Size(4096, 176, 4096) + FP8 + RCR + SM(900) + Grid() + Tile(128, 176, 128)).plan
    assert one.scales_refusal("block", "block", False) == "" and one.scale_b_by_columns
    assert (grid + Tile(128, 128, 64)).plan.scales_refusal("block", "block", False) == ""  # 64 divides 128: one block
    assert "use Tile(128, 64, 128)" in (grid + Tile(128, 64, 256)).plan.scales_refusal("block", "block", False)
    sm890 = Size(4096, 4096, 4096) + FP8 + RCR + SM(890) + Grid()
    assert "mma_fp8 does not promote them" in sm890.plan.scales_refusal("block", "block", False)
    assert "remove Accumulation" not in sm890.plan.scales_refusal("block", "block", False)


@pytest.mark.parametrize("tile_n, n, blocks", [
    (128, 4096, 1), (64, 1000, 1), (192, 4096, 2), (192, 128, 1), (160, 4096, 2), (256, 1000, 2), (96, 96, 1),
    (96, 4096, 2), (200, 4096, 3), (200, 200, 2), (176, 176, 2), (192, 1000, 2), (8, 8, 1),
])
def test_column_blocks_reached_counts_each_tiles_blocks_inside_c(tile_n, n, blocks):
    brute = max(len({col // 128 for col in range(t, min(t + tile_n, n))}) for t in range(0, n, tile_n))
    assert column_blocks_reached(tile_n, n) == brute == blocks


def test_grouped_kernels_take_grids_scales():
    """Grouped(): A's scales along the call's rows, B's a set a group (Grouped('k') is 16-bit only: no FP8)."""
    grouped = (Size(128, 4096, 7168) + FP8 + RCR + SM(900) + Grouped()).plan
    assert grouped.scales_refusal("block", "block", False) == "" and grouped.scales_refusal("row", "col", False) == ""
    assert "load hooks" in grouped.scales_refusal("block", "", True)


def test_the_batched_kernel_takes_scales_where_each_k_block_is_scaled_whole():
    """Block(): blockwise scales where the GEMM is one K block or FP8 wgmma promotes each one, and B's where the
    GEMM is one column block; Warp() takes numbers only."""
    block = Size(64, 128, 256) + FP8 + RCR + SM(900) + Block()
    assert block.plan.scales_refusal("block", "block", False) == ""
    assert block.plan.scales_refusal("row", "col", True) == ""  # products scaled once: load hooks are fine
    assert "load hooks" in block.plan.scales_refusal("block", "", True)
    fast = (block + Accumulation("fast")).plan
    assert "Accumulation('fast') keeps wgmma's own sum" in fast.scales_refusal("block", "", False)
    assert fast.scales_refusal("tensor", "col", False) == ""
    assert (Size(64, 128, 128) + FP8 + RCR + SM(900) + Block() + Accumulation("fast")).plan.scales_refusal(
        "block", "block", False) == ""  # one K block: its products scaled once
    assert (Size(64, 64, 128) + FP8 + RCR + SM(890) + Block()).plan.scales_refusal("block", "block", False) == ""
    assert "mma_fp8 does not promote" in (Size(64, 64, 256) + FP8 + RCR + SM(890) + Block()).plan.scales_refusal(
        "block", "", False)
    wide = (Size(64, 256, 128) + FP8 + RCR + SM(900) + Block()).plan
    assert "one column block of B" in wide.scales_refusal("tensor", "block", False)
    assert wide.scales_refusal("block", "col", False) == ""
    warp = Size(16, 16, 32) + FP8 + RCR + SM(900) + Warp()
    assert "Warp() ones take scales as numbers only" in warp.plan.scales_refusal("tensor", "", False)


def test_scaled_kernels_take_the_scales_after_the_bias():
    plan = grid_with_alignment((Size(4096, 4096, 4096) + FP8 + RCR + SM(900) + Grid()).plan, (16, 16, 16))
    names = [p.name for p in plan.kernel_parameters(True, True)]
    assert names[names.index("bias_col_stride") + 1:names.index("splits")] == [p.name for p in SCALE_PARAMETERS]
    assert plan.kernel_parameters(False) == tuple(p for p in plan.kernel_parameters(False, True) if p not in SCALE_PARAMETERS)
    assert NO_FUSION.with_scales("", "").digest == NO_FUSION.digest  # kernels without scales keep their names
    assert NO_FUSION.with_scales("block", "block").digest != NO_FUSION.digest


@pytest.mark.parametrize("scales, alignment, extra", [
    (("block", "block"), 16, ()),  # TMA, K tiles in pairs, scaled at each promotion
    (("block", "col"), 16, ()),  # A's along k at each promotion, B's per column once
    (("row", "col"), 16, ()),
    (("tensor", "tensor"), 16, (Accumulation("fast"),)),  # the products scaled once: any accumulation
    (("block", "block"), 1, ()),  # cp.async
    (("block", "block"), 16, (Tile(256, 128, 128),)),  # two tiles a warpgroup, each promoted with its scales
    (("block", "block"), 1, (Stages(2),)),  # cp.async, no wgmma in flight: multiply_scaled
], ids=["block-block", "block-col", "row-col", "tensor-fast", "cp-async", "two-passes", "cp-async-2-stages"])
def test_scaled_grid_kernels_spill_nothing_and_keep_wgmma_in_flight(scales, alignment, extra):
    desc = Size(1024, 4096, 4096) + FP8 + RCR + SM(900) + Grid()  # 128 x 128 tiles (test_accumulation: 128 x 192)
    for op in extra:
        desc = desc + op
    plan = grid_with_alignment(desc.plan, (alignment,) * 3)
    fusion = NO_FUSION.with_scales(*scales)
    source = kernel_source(plan, fusion)
    assert ("k_tile_scales scales" in source) == ("block" in scales)
    assert ("scale_products(acc" in source) == any(s in ("tensor", "row", "col") for s in scales)
    name = kernel_name(launched_plan(plan), fusion)
    _, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log
    assert "C75" not in log, log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.parametrize("size, sm, scales, extra", [
    ((64, 128, 512), 900, ("block", "block"), ()),  # wgmma, each promotion's partial sums scaled
    ((128, 64, 256), 900, ("block", "col"), ()),
    ((64, 256, 384), 900, ("row", "tensor"), (Accumulation("fast"),)),  # the products scaled once: any accumulation
    ((64, 64, 128), 900, ("block", "block"), (Accumulation("fast"),)),  # one K block: a temporary accumulator
    ((48, 40, 128), 890, ("block", "block"), ()),  # mma.sync, one K block; rows past m clamp
    ((50, 60, 200), 900, ("tensor", "col"), ()),  # edge tiles, C staged in shared memory
], ids=["wgmma-block-block", "wgmma-block-col", "fast-row-tensor", "fast-one-k-block", "mma-sync", "edges"])
def test_scaled_batched_kernels_compile_without_spills(size, sm, scales, extra):
    desc = Size(*size) + FP8 + RCR + SM(sm) + Block()
    for op in extra:
        desc = desc + op
    assert desc.plan.scales_refusal(*scales, False) == ""
    fusion = NO_FUSION.with_scales(*scales)
    source = kernel_source(desc.plan, fusion)
    assert "execute_scaled(alpha, sa, sb, beta, sc" in source
    assert ("s *= scales.k_block(r, 0)" in source) == ("block" in scales)
    assert ("return scales.k_block(r, k0)" in source) == ("block" in scales and desc.plan.promote_k > 0)
    name = kernel_name(launched_plan(desc.plan), fusion)
    _, log = nvrtc_compile(source, options_for(sm, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log
    assert "C75" not in log, log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.parametrize("alignment", [16, 1], ids=["tma", "cp-async"])
def test_an_sm_900_grid_with_blockwise_scales_compiles_for_a_later_gpu(alignment):
    """On a GPU past Hopper an SM 900 descriptor compiles for the device's arch, where wgmma does not exist: the
    K loop's mma.sync scales each K tile's products once (multiply_scaled), rather than refusing to compile."""
    from blasdx.compiler import supported_archs

    if 1000 not in supported_archs():
        pytest.skip("this NVRTC does not target sm_100")
    plan = grid_with_alignment((Size(4096, 4096, 4096) + FP8 + RCR + SM(900) + Grid()).plan, (alignment,) * 3)
    fusion = NO_FUSION.with_scales("block", "block")
    name = kernel_name(launched_plan(plan), fusion)
    _, log = nvrtc_compile(kernel_source(plan, fusion), options_for(1000, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log


def test_numbers_fold_into_alpha_and_arrays_stay_for_the_kernel():
    plan = (Size(64, 128, 256) + FP8 + RCR + SM(900) + Block()).plan
    assert fold_number_scales(plan, 1.5, 2.0, None) == (3.0, {})
    on_the_device = object()  # anything but a number: scale_view checks it later
    assert fold_number_scales(plan, 2, on_the_device, np.float32(0.25)) == (0.5, {"scale_a": on_the_device})
    with pytest.raises(ArgumentError, match=r"^scale_b=nan is not finite; FP8 scales are finite float32 values$"):
        fold_number_scales(plan, 1.0, None, float("nan"))


F16 = Precision("float16", "float16", "float32")


@pytest.mark.parametrize("desc", [Size(64, 128, 256) + F16 + RCR + SM(900) + Block(),
                                  Size(1024, 1024, 256) + F16 + RCR + SM(900) + Grid(),
                                  Size(128, 256, 128) + F16 + RCR + SM(900) + Grouped()],
                         ids=["block", "grid", "grouped"])
def test_scales_of_16_bit_operands_are_refused_alike_before_the_operands_are_read(desc):
    with pytest.raises(ArgumentError, match=r"^scale_a= and scale_b= scale FP8 operands, but this GEMM's A and B are "
                                            r"float16 and float16; scale them with alpha \(or the a_load/b_load "
                                            r"hooks\)$"):
        desc.execute(None, None, None, scale_a=2.0)
