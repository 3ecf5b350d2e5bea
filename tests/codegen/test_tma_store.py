"""C stored by TMA (GridPlan.tma_store) without a GPU: which plans take it (float32 and int32 C, row-major, real, on
the TMA kernel) and which keep the register epilogue (16-bit C, column-major C, gated and grouped kernels, C off
16-byte boundaries), the shared memory it takes beside the stages (none for the device API's kernels), the tensor
map parameter, explain()'s words, and NVRTC compiles without spills whose PTX stores C by TMA only."""

from __future__ import annotations

import re

import pytest

import blasdx
from blasdx import SM, Arrangement, Grid, Grouped, LeadingDimension, Precision, Size, Tile
from blasdx.plan.grid import TMA_STORE_ROWS, grid_with_alignment

from ..support import RCR, ptx_of

F16_F32 = Precision("float16", "float16", "float32")


def _plan(desc, alignment=(16, 16, 16)):
    return grid_with_alignment(desc.plan, alignment)


def _ptx(desc, epilogue=None, bias=False):
    plan = _plan(desc)
    fusion = blasdx.pipeline.fusion(desc, None, epilogue, None, None, None, None, bias)
    return plan, ptx_of(blasdx.pipeline.kernel_source(plan, fusion), plan.kernel_name)


@pytest.mark.parametrize("desc", [
    Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid(),
    Size(1000, 1000, 512) + Precision("bfloat16", "bfloat16", "float32") + RCR + SM(900) + Grid(),
    Size(2048, 2048, 2048) + Precision("tfloat32", "tfloat32", "float32") + RCR + SM(900) + Grid(),
    Size(2048, 2048, 2048) + Precision("int8", "int8", "int32") + RCR + SM(900) + Grid(),
    Size(512, 520, 384) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Grid(),
    Size(256, 256, 16384) + F16_F32 + RCR + SM(900) + Grid(),  # split-K
], ids=["f16f32", "bf16f32-edges", "tf32", "int8", "fp8", "split-k"])
def test_four_byte_row_major_c_is_stored_by_tma_on_aligned_arrays(desc):
    plan = _plan(desc)
    assert plan.tma_store and plan.tma and desc.plan.tma_store_fits
    assert not desc.plan.tma_store  # (compile() builds the kernel of the descriptor's alignment: no TMA)
    staging = plan.tile.threads // 128 * plan.c_staging_buffers * TMA_STORE_ROWS * plan.c_box_swizzle
    assert plan.kernel_shared_memory_size == plan.c_staging_offset + staging
    assert plan.c_staging_offset >= plan.stages * plan.tile.shared_memory_size and plan.c_staging_offset % 1024 == 0
    assert plan.kernel_shared_memory_size <= blasdx.arch.shared_memory_limit(900)
    assert [p.name for p in plan.kernel_parameters(False)][-3:] == ["a_map", "b_map", "c_map"]
    # a kernel of the device API's stores C from registers: its shared memory is the stages alone
    assert desc.shared_memory_size == desc.shared_memory_size_ab == plan.stages * plan.tile.shared_memory_size


@pytest.mark.parametrize("desc, alignment", [
    (Size(4096, 4096, 512) + Precision("bfloat16") + RCR + SM(900) + Grid(), 16),  # 16-bit C: quads from registers
    (Size(4096, 4096, 512) + Precision("float16") + RCR + SM(900) + Grid(), 16),
    (Size(4096, 4096, 512) + F16_F32 + Arrangement("row_major", "col_major", "col_major") + SM(900) + Grid(), 16),
    (Size(4096, 4096, 512) + F16_F32 + RCR + SM(800) + Grid(), 16),  # no TMA
    (Size(2048, 2048, 2048) + Precision("float32") + RCR + SM(900) + Grid(), 16),  # FMA tiles
    (Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid(), 8),  # arrays off 16-byte boundaries
], ids=["bf16", "f16", "c-column-major", "sm80", "fma", "unaligned"])
def test_the_register_epilogue_stays_elsewhere(desc, alignment):
    plan = _plan(desc, (alignment,) * 3)
    assert not plan.tma_store
    assert plan.kernel_shared_memory_size == plan.stages * plan.tile.shared_memory_size
    assert "c_map" not in [p.name for p in plan.kernel_parameters(True)]


def test_c_off_16_bytes_alone_keeps_tma_copies_and_the_register_epilogue():
    desc = Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid()
    plan = _plan(desc, (16, 16, 8))
    assert plan.tma and not plan.tma_store
    odd_ldc = Size(4096, 4090, 512) + F16_F32 + RCR + SM(900) + Grid() + LeadingDimension(512, 512, 4090)
    assert _plan(odd_ldc).tma and not _plan(odd_ldc).tma_store  # rows 16360 bytes apart: no tensor map of C


def test_gated_and_grouped_kernels_keep_the_register_epilogue():
    desc = Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid()
    gated = desc.plan.gated()
    assert not gated.tma_store and not _plan(desc).gated().tma_store and not grid_with_alignment(gated, (16,) * 3).tma_store
    grouped = Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grouped()
    assert grouped.plan.tma and not grouped.plan.tma_store and not grouped.plan.tma_store_fits


def test_a_second_buffer_never_costs_the_second_block_an_sm():
    """Two buffers a warpgroup only where the kernel keeps the blocks an SM that one buffer leaves room for."""
    two_blocks = Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid() + Tile(64, 96, 64) + blasdx.Stages(5)
    plan = _plan(two_blocks)
    assert plan.tma_store and plan.c_staging_buffers == 1 and plan.blocks_per_sm == 2 and not plan.cluster
    one_block = _plan(Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid() + Tile(128, 128, 64))
    assert one_block.tma_store and one_block.c_staging_buffers == 2 and one_block.blocks_per_sm == 1
    for p in (plan, one_block):
        assert p.kernel_shared_memory_size + p.static_shared_memory_size <= blasdx.arch.shared_memory_limit(900)


def test_no_room_is_kept_for_c_whose_rows_tma_cannot_store():
    """A 128x96x128 tile's four stages leave no room for a buffer of C: where C's rows can be stored by TMA the planner
    takes three stages and the buffer, where they cannot it keeps four: rows 16376 bytes apart (ldc 4094 float32),
    or 4090 columns, 16360 bytes wide (a TMA store writes a row's last 16 bytes whole)."""
    def desc(n, ldc):
        return Size(4096, n, 4096) + F16_F32 + RCR + SM(900) + Grid() + LeadingDimension(4096, 4096, ldc) + Tile(128, 96, 128)
    for n, ldc in ((4092, 4094), (4090, 4092)):
        cannot = desc(n, ldc)
        assert (cannot.plan.stages, cannot.plan.tma_store_fits, _plan(cannot).tma_store) == (4, False, False)
    can = desc(4092, 4092)
    assert (can.plan.stages, can.plan.tma_store_fits, _plan(can).tma_store) == (3, True, True)


def test_explain_says_how_c_leaves():
    f32 = (Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid()).explain(width=0)
    assert "written by TMA stores" in f32 and "with C's staging for TMA stores" in f32
    bf16 = (Size(4096, 4096, 512) + Precision("bfloat16") + RCR + SM(900) + Grid()).explain(width=0)
    assert "TMA stores" not in bf16


@pytest.mark.compile
@pytest.mark.parametrize("desc, epilogue, bias", [
    (Size(4096, 4096, 512) + F16_F32 + RCR + SM(900) + Grid(), None, False),
    (Size(1000, 1000, 512) + F16_F32 + RCR + SM(900) + Grid(), "gelu", True),
    (Size(2048, 2048, 2048) + Precision("int8", "int8", "int32") + RCR + SM(900) + Grid(), None, False),
    (Size(512, 520, 384) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Grid(), "relu", True),
    (Size(256, 256, 16384) + F16_F32 + RCR + SM(900) + Grid() + Tile(64, 128, 64), None, False),
    (Size(1000, 1000, 512) + F16_F32 + RCR + SM(900) + Grid() + Tile(64, 16, 64), None, False),  # 64-byte boxes
    (Size(1000, 1000, 512) + F16_F32 + RCR + SM(900) + Grid() + Tile(64, 8, 64), "relu", True),  # 32-byte boxes
], ids=["f16f32", "bias-gelu-edges", "int8", "fp8-bias-relu", "split-k", "64-byte-boxes", "32-byte-boxes"])
def test_tma_store_kernels_compile_without_spills_and_store_c_by_tma_only(desc, epilogue, bias):
    plan, ptx = _ptx(desc, epilogue, bias)
    assert plan.tma_store
    stores = [m.start() for m in re.finditer(r"cp\.async\.bulk\.tensor\.3d\.global\.shared::cta\.bulk_group", ptx)]
    waits = list(re.finditer(r"cp\.async\.bulk\.wait_group\.read (\d+)", ptx))
    assert stores and waits and plan.c_box_swizzle == min(128, plan.tile.tile_n * 4)
    # the tail: after the last store, every store has read its shared memory before the block ends
    assert waits[-1].group(1) == "0" and waits[-1].start() > stores[-1]
    if not plan.split_k:  # (split-K writes its parts to the workspace)
        assert not re.search(r"st\.global", ptx), "C leaves by TMA alone"
    fusion = blasdx.pipeline.fusion(desc, None, epilogue, None, None, None, None, bias)
    resources = blasdx.pipeline.compile_for_arch(plan, 900, fusion).resources
    assert resources is not None and not resources.spills, resources
