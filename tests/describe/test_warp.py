"""Warp(): a descriptor whose GEMM each warp of a block runs on its own - one of the execution operators, with
32 threads fixed, no wgmma, the block GEMM's plan with the warp as its scope, and explain() saying so."""

from __future__ import annotations

import dataclasses

import pytest

import blasdx.pipeline
from blasdx import (
    SM,
    Arrangement,
    Block,
    BlockDim,
    DescriptorError,
    Grid,
    InstructionFamily,
    PlanOverrides,
    Precision,
    Size,
    Stages,
    UnsupportedError,
    Warp,
)
from blasdx.arch import shared_memory_limit
from blasdx.describe.operators import Execution
from blasdx.kinds.warp import WARPS_PER_BLOCK, WarpGemmPlan, warp_kernel_plan
from blasdx.plan import with_alignment

RCR = Arrangement("row_major", "col_major", "row_major")
WARP = Size(32, 32, 32) + Precision("float16", "float16", "float32") + RCR + SM(900) + Warp()


def test_a_warp_gemm_is_the_block_gemm_of_32_threads_with_the_warp_as_its_scope():
    block = WARP.replace(Block()) + BlockDim(32)
    assert WARP.block_dim == (32, 1, 1) == WARP.suggested_block_dim
    assert isinstance(WARP.plan, WarpGemmPlan) and WARP.plan.execution == "warp" and WARP.plan.scope == "warp"
    fields = {f.name for f in dataclasses.fields(block.plan)} - {"instruction_reason"}  # "Warp() runs 32"
    assert all(getattr(WARP.plan, f) == getattr(block.plan, f) for f in fields)
    assert WARP.plan != block.plan and WARP.compile(arch=900).kernel_name != block.compile(arch=900).kernel_name
    assert WARP.shared_memory_size == block.shared_memory_size
    assert WARP.plan.kernel_name.startswith("blasdx_warp_gemm_sm900_f16f16f32_32x32x32_rcr_")


def test_warp_takes_the_place_of_the_other_execution_operators():
    assert WARP.replace(Block()).execution == "Block" and WARP.replace(Grid()).replace(Warp()) == WARP
    with pytest.raises(DescriptorError, match=r"Block\(\) and Warp\(\) are two ways to run .* keep one of them"):
        Size(8, 8, 8) + Block() + Warp()


def test_warp_fixes_the_threads_and_forbids_wgmma():
    with pytest.raises(DescriptorError, match=r"BlockDim\(64, 1, 1\) sets the threads of a block; .*, not Warp\(\) "
                                              r"\(whose threads it fixes\)"):
        (WARP + BlockDim(64)).plan  # noqa: B018
    big = Size(64, 64, 64) + Precision("float16", "float16", "float32") + RCR + SM(900)
    assert (big + Block()).plan.instruction.is_wgmma and not (big + Warp()).plan.instruction.is_wgmma
    with pytest.raises(UnsupportedError, match=r"whole warpgroups: threads a multiple of 128 \(Warp\(\) runs 32\)"):
        (big + Warp() + InstructionFamily("wgmma")).plan  # noqa: B018
    with pytest.raises(DescriptorError, match=r"Stages\(3\) describes the blocks of a grid-level GEMM"):
        (WARP + Stages(3)).plan  # noqa: B018


def test_the_batched_kernels_overrides_are_refused_and_the_block_gemms_kept():
    with pytest.raises(UnsupportedError, match=r"PlanOverrides\(c_in_registers=..., min_blocks_per_sm=...\) fix the "
                                               r"batched kernel of Block\(\) descriptors"):
        blasdx.pipeline.plan(WARP, PlanOverrides(c_in_registers=False, min_blocks_per_sm=2))
    f32 = WARP.replace(Precision("float32"))
    assert blasdx.pipeline.plan(f32, PlanOverrides(fma_thread_pairs=False)).fma_thread_pairs is False


def test_execution_is_only_a_base():
    with pytest.raises(DescriptorError, match=r"Execution is the base of the execution operators; use one of them: "
                                              r"Block\(\), Grid\(\), Warp\(\)"):
        Execution()


def test_the_warp_kernel_runs_as_many_warps_a_block_as_fit():
    kernel = warp_kernel_plan(with_alignment(WARP.plan, (16, 16, 16)))
    assert kernel.execution == "warp" and kernel.warps == WARPS_PER_BLOCK and kernel.threads == 32 * WARPS_PER_BLOCK
    assert kernel.kernel_shared_memory_size == WARPS_PER_BLOCK * kernel.kernel.shared_memory_size
    assert kernel.kernel.a.smem_ld > kernel.kernel.a.ld  # padded against bank conflicts, as the batched kernel's
    assert (kernel.blocks(1, 100, 1), kernel.blocks(9, 100, 1)) == (1, 3)  # a warp an item
    big = (Size(128, 128, 64) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") + SM(900)
           + Warp())
    fat = warp_kernel_plan(big.plan)
    assert fat.warps == shared_memory_limit(900) // fat.kernel.shared_memory_size < WARPS_PER_BLOCK


def test_explain_says_each_warp_runs_its_own_gemm():
    text = WARP.explain(width=0)
    assert "scope: each warp of a block runs its own GEMM (Warp())" in text
    assert f"{WARPS_PER_BLOCK} warps a block ({32 * WARPS_PER_BLOCK} threads), one batch item a warp" in text
    assert warp_kernel_plan(with_alignment(WARP.plan, (16, 16, 16))).kernel_name in text
    assert "add Block(), Grid(), Warp() or Grouped()" in (Size(8, 8, 8) + SM(900)).explain(width=0)
