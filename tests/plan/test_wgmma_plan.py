"""wgmma (issue 19) without a GPU: when the planner takes it and why not, demanding and forbidding it,
the plan and traits it gives (warpgroups, tiles, swizzled shared memory), explain(), and the batched
kernel's swizzled layout and aligned stages."""

from __future__ import annotations

import pickle

import pytest

from blasdx import BlockDim, DescriptorError, InstructionFamily, LeadingDimension, Type, UnsupportedError
from blasdx.plan import kernel_plan

from ..support import gemm


@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("float16",) * 3,
                                  ("bfloat16", "bfloat16", "float32"), ("bfloat16",) * 3])
def test_sm90_16_bit_gemms_take_wgmma(prec):
    desc = gemm(prec=prec)
    assert desc.instruction.name == ("wgmma_f16" if prec[0] == "float16" else "wgmma_bf16")
    assert desc.block_dim == (256, 1, 1)  # two warpgroups, one 64 x 128 tile each
    plan = desc.plan
    assert (plan.tile_m, plan.tile_n, plan.tiles) == (64, 128, 2)
    assert (plan.a.swizzle, plan.b.swizzle, plan.c.swizzle) == (128, 128, 0)
    assert (plan.a.smem_offset, plan.b.smem_offset, plan.c.smem_offset) == (0, 16384, 32768)  # 1024-aligned
    assert desc.shared_memory_size == 32768 + 128 * 128 * desc.element_size.c


@pytest.mark.parametrize("prec, name", [
    (("tfloat32", "tfloat32", "float32"), "wgmma_tf32"), (("float8_e4m3", "float8_e5m2", "float32"), "wgmma_fp8"),
    (("float8_e5m2", "float8_e5m2", "bfloat16"), "wgmma_fp8"), (("int8", "uint8", "int32"), "wgmma_i8"),
])
def test_k_major_precisions_take_wgmma_with_row_major_a_and_column_major_b(prec, name):
    demand = InstructionFamily("wgmma")
    desc = gemm((128, 64, 64), prec, "rcr", 900, demand)
    assert desc.instruction.name == name and desc.plan.a.swizzle and desc.plan.b.swizzle
    instr, reason = gemm((128, 64, 64), prec, "rrr").instruction_choice
    assert instr.name == name.replace("wgmma", "mma") and "K-major only" in reason
    assert not gemm((128, 64, 64), prec, "ccr").instruction.is_wgmma
    with pytest.raises(UnsupportedError, match="K-major only"):
        (gemm((128, 64, 64), prec, "rrr") + demand).plan  # noqa: B018
    assert gemm((128, 64, 64), prec, "rcr").instruction.name == name  # the planner's choice, undemanded


@pytest.mark.parametrize("size, threads, tile_n", [
    ((64, 64, 64), 128, 64), ((64, 8, 16), 128, 8), ((64, 256, 64), 128, 256), ((64, 512, 16), 256, 256),
    ((256, 128, 64), 256, 128), ((320, 48, 80), 256, 48), ((128, 264, 32), 384, 88), ((256, 128, 32), 256, 128), ((192, 256, 16), 384, 256),
])
def test_tiles_and_suggested_warpgroups(size, threads, tile_n):
    desc = gemm(size, ("float16", "float16", "float32"), "rcr")
    assert desc.instruction.is_wgmma and desc.block_dim == (threads, 1, 1)
    assert desc.plan.tile_n == tile_n and size[1] % tile_n == 0
    per_thread = -(-desc.plan.tiles // (threads // 128)) * tile_n // 2
    assert per_thread <= 128  # float accumulator registers


@pytest.mark.parametrize("desc, failed", [
    (gemm((32, 64, 64)), "m a multiple of 64"),
    (gemm((64, 64, 24)), "k a multiple of 16"),
    (gemm((64, 40, 32), arr="rrr"), "n a multiple of 16"),
    (gemm((64, 64, 64), ("float16", "float16", "float32"), "rrr", 900, BlockDim(64)), "whole warpgroups"),
    (gemm((128, 256, 32), ("float16", "float16", "float32"), "rcr", 900, BlockDim(128)), "accumulators fit"),
    (gemm(sm=800), "SM 900"),
    (gemm((64, 64, 32), ("float64",) * 3), "float16, bfloat16, tfloat32"),
])
def test_each_failed_condition_is_named_and_mma_sync_runs(desc, failed):
    instr, reason = desc.instruction_choice
    assert not instr.is_wgmma and instr.is_mma
    if desc.sm == 900:  # the conditions, named and listed on SM 900 alone
        assert "not wgmma, which needs: " in reason and failed in reason.split("not wgmma")[1]
        assert failed in desc.explain(width=0) and "FAILS" in desc.explain(width=0)
    else:  # wgmma is Hopper's: other SMs are not told its conditions, as if they could hold
        assert "wgmma" not in reason and "wgmma conditions" not in desc.explain(width=0)
    plan = desc.plan
    assert plan.a.swizzle == plan.b.swizzle == 0 and "lda =" in desc.device_source()
    with pytest.raises(UnsupportedError, match=f"InstructionFamily\\('wgmma'\\) demands .*{failed}"):
        (desc + InstructionFamily("wgmma")).plan  # noqa: B018


def test_float32_and_complex_on_other_sms_say_nothing_of_wgmma():
    for desc in (gemm(prec=("float32",) * 3, sm=800), gemm(prec=("float16",) * 3, sm=800) + Type("complex")):
        assert "wgmma" not in desc.instruction_choice[1] and "wgmma conditions" not in desc.explain(width=0)
    with pytest.raises(UnsupportedError, match="SM 900 with float16, bfloat16, tfloat32"):
        (gemm(prec=("float32",) * 3, sm=800) + InstructionFamily("wgmma")).plan  # noqa: B018


def test_forbidding_wgmma_keeps_mma_sync_and_its_layout():
    desc = gemm() + InstructionFamily("mma")
    instr, reason = desc.instruction_choice
    assert instr.name == "mma_f16" and "forbids wgmma" in reason
    assert desc.plan.a.swizzle == 0 and desc.block_dim == (256, 1, 1)
    assert desc.shared_memory_size == 128 * 64 * 2 * 2 + 128 * 128 * 4
    with pytest.raises(UnsupportedError, match="InstructionFamily\\('mma'\\) demands a tensor-core"):
        (gemm(prec=("float32",) * 3) + InstructionFamily("mma")).plan  # noqa: B018


def test_demanding_wgmma_where_it_holds_changes_nothing():
    desc = gemm() + InstructionFamily("wgmma")
    assert desc.instruction.is_wgmma and desc.plan.tile_n == gemm().plan.tile_n


def test_instruction_family_operator():
    with pytest.raises(DescriptorError, match="'wgmma' .* or 'mma'"):
        InstructionFamily("tensor")
    op = InstructionFamily("mma")
    assert repr(op) == "InstructionFamily('mma')" and eval(repr(op)) == op  # noqa: S307
    desc = gemm() + op
    assert pickle.loads(pickle.dumps(desc)) == desc


def test_instruction_family_survives_the_pytorch_op_key():
    pytest.importorskip("torch")
    from blasdx.pytorch import descriptor_from_key

    desc = gemm() + InstructionFamily("mma")
    assert descriptor_from_key(repr(desc)) == desc


def test_explain_says_when_device_source_layouts_meet_bank_conflicts():
    tight = gemm((64, 64, 64), ("float16", "float16", "float32"), "rcr", 800)
    assert "keeps the leading dimensions of A (64), B (64), C (64)" in tight.explain(width=0)
    assert "LeadingDimension(72, 72, 68)" in tight.explain(width=0)
    padded = tight + LeadingDimension(*tight.suggested_leading_dimension)
    assert "device_source() keeps" not in padded.explain(width=0)
    # wgmma's swizzled A and B need no padding; C in shared memory still does.
    assert "keeps the leading dimensions of C (64)" in gemm((64, 64, 64), ("float16",) * 3, "rcr").explain(width=0)


def test_explain_names_wgmma_its_conditions_and_the_swizzled_layouts():
    text = gemm(arr="rrr").explain(width=0)
    assert "instruction: wgmma_f16" in text and "every condition holds" in text
    assert "warpgroup tiling: 2 warpgroups" in text and "64x128 tile" in text and "m64n128k16" in text
    assert "A: " in text and "128-byte swizzled layout, k contiguous" in text
    assert "B: " in text and "128-byte swizzled layout, n contiguous" in text
    assert "A swizzled, B swizzled" in text and "mma_f16 computes the same fragments" in text


def test_device_source_has_no_leading_dimension_for_swizzled_operands():
    text = gemm().device_source("gemm")
    assert "constexpr int lda" not in text and "constexpr int ldc" in text
    assert "a_index(int r, int c) { return blasdx::swizzled_offset<128, 128>" in text
    assert "store_at(" in text and "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in text


def test_batched_kernel_keeps_the_swizzled_layout_and_aligns_its_stages():
    kplan = kernel_plan(gemm((128, 64, 64), ("float16", "float16", "float32"), "rcr").plan)
    assert kplan.a.swizzle == 128 and kplan.b.swizzle == 128
    assert kplan.a.smem_offset % 1024 == 0 and kplan.b.smem_offset % 1024 == 0
    assert kplan.shared_memory_size % 1024 == 0  # a second stage would start on a swizzle pattern
    assert "__align__(1024)" in gemm().source
    # One tile of 16-bit C, which a warp tile would keep in registers: staged with wgmma.
    one = gemm((64, 32, 32), ("float16",) * 3, "rrr")
    assert one.instruction.is_wgmma and not kernel_plan(one.plan).c_in_registers
