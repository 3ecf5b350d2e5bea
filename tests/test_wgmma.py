"""wgmma (issue 19) without a GPU: when the planner takes it and why not, demanding and
forbidding it, the plan and traits it gives (warpgroups, tiles, swizzled shared memory),
explain(), and NVRTC compiles of the device API and the batched kernel for sm_90a in every
arrangement."""

from __future__ import annotations

import itertools
import pickle
import re

import pytest

from blasdx import (
    SM,
    Arrangement,
    Block,
    BlockDim,
    DescriptorError,
    Grid,
    InstructionFamily,
    LeadingDimension,
    Precision,
    Size,
    Type,
    UnsupportedError,
    compile_kernel,
)
from blasdx.compiler import supported_archs
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.pipeline import fusion, kernel_source
from blasdx.plan import grid_with_alignment, kernel_plan, with_alignment

from .test_accumulator_api import (
    CHAIN_CASES,
    CHAINED,
    EDGES,
    KERNELS,
    OVERLAPPED,
    REPEATED_MULTIPLY,
    chain_descriptors,
    chain_id,
    chain_source,
    chained_descriptors,
    ptx_of,
)

LAYOUT = {"r": "row_major", "c": "col_major"}
ARRANGEMENTS = ["".join(x) for x in itertools.product("rc", repeat=3)]


def gemm(size=(128, 128, 64), prec=("float16", "float16", "float32"), arr="rrr", sm=900, *extra):
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Block()
    for op in extra:
        desc = desc + op
    return desc


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


needs_sm90 = pytest.mark.skipif(900 not in supported_archs(), reason="the installed NVRTC does not target SM 900")


@needs_sm90
@pytest.mark.parametrize("prec, arr", [(p, a) for p in (("float16", "float16", "float32"), ("bfloat16",) * 3)
                                       for a in ARRANGEMENTS]
                         + [(p, "rcr") for p in (("tfloat32", "tfloat32", "float32"),
                                                 ("float8_e4m3", "float8_e5m2", "float16"), ("int8", "int8", "int32"))])
def test_the_wgmma_device_api_compiles_for_sm_90a(prec, arr):
    desc = gemm((128, 96, 64), prec, arr, 900, InstructionFamily("wgmma"))
    assert desc.instruction.is_wgmma
    kernel = compile_kernel(desc.device_source("gemm") + KERNELS, "k_loop", sm=900)
    assert kernel.cubin[:4] == b"\x7fELF"
    assert desc.compile(arch=900, epilogue="relu", bias=True).cubin[:4] == b"\x7fELF"


@needs_sm90
def test_two_wgmma_descriptors_chain_through_store_at():
    first, second = chained_descriptors()
    assert first.instruction.is_wgmma and second.instruction.is_wgmma
    source = first.device_source("g1") + second.device_source("g2") + CHAINED
    assert compile_kernel(source, "chained", sm=900).cubin[:4] == b"\x7fELF"


@needs_sm90
@pytest.mark.parametrize("case", [c for c in CHAIN_CASES if c[0] == 900], ids=chain_id)
def test_multiply_chained_feeds_wgmma_from_registers(case):
    """Where a_from_registers, each k step of each tile is one wgmma reading A from registers
    and nothing is written to shared memory or waited for by the block (one barrier: the kernel's
    copy_wait); elsewhere the accumulator goes through shared memory, behind a second barrier."""
    ptx = ptx_of(chain_source(case), "chain")
    from_registers = len(re.findall(r"wgmma\.mma_async[^;]*\}, \{%r", ptx))
    second = chain_descriptors(case)[1]
    if case[-1]:
        passes = -(-second.plan.tiles // (second.plan.threads // 128))
        assert from_registers == second.size[2] // 16 * passes
        assert ptx.count("bar.sync") == 1
    else:
        assert from_registers == 0 and ptx.count("bar.sync") == 2


@pytest.mark.skipif(not {900, 1000} <= set(supported_archs()), reason="needs an NVRTC for SM 900 and 1000")
def test_an_sm900_descriptor_compiles_for_a_newer_gpu_on_its_mma_sync_fallback():
    """The descriptor's SM picks the algorithm; on SM 1000 (no wgmma) its fallback runs."""
    assert gemm().compile(arch=1000).cubin[:4] == b"\x7fELF"


def ptxas_log(source: str, name: str) -> str:
    cubin, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
    assert cubin[:4] == b"\x7fELF"
    assert f"Compiling entry function '{name}'" in log  # ptxas did speak
    return log


@pytest.mark.parametrize("size, prec, arr", [
    ((64, 64, 64), ("float16", "float16", "float32"), "rrr"), ((128, 128, 64), ("float16",) * 3, "rrr"),
    ((128, 256, 64), ("bfloat16", "bfloat16", "float32"), "crc"), ((128, 128, 128), ("float8_e4m3",) * 2 + ("float32",), "rcr"),
    ((64, 64, 128), ("int8", "int8", "int32"), "rcr"), ((64, 64, 64), ("tfloat32", "tfloat32", "float32"), "rcr"),
])
def test_ptxas_keeps_the_wgmma_of_a_multiply_in_flight_together(size, prec, arr):
    # multiply()'s wgmma and its wait lie in one branch; split across a run-time choice of path
    # (wgmma or the mma.sync fallback), ptxas waited after every instruction (its C7515 and
    # C7518 "wgmma.mma_async instructions are serialized") and 64x64x256 bf16 ran 1.3-1.4x slower.
    desc = gemm(size, prec, arr)
    assert desc.instruction.name.startswith("wgmma")
    log = ptxas_log(desc.device_source("gemm") + REPEATED_MULTIPLY, "repeated")
    assert "serialized" not in log, log


@pytest.mark.parametrize("size, prec, arr", [
    ((64, 64, 64), ("float16", "float16", "float32"), "rrr"), ((128, 128, 64), ("float16",) * 3, "rrr"),
    ((64, 64, 128), ("int8", "int8", "int32"), "rcr"), ((128, 256, 64), ("bfloat16", "bfloat16", "float32"), "crc"),
])
def test_a_multiply_encodes_each_operand_descriptor_once(size, prec, arr):
    # A's and B's descriptors are encoded once a multiply (matrix_descriptor's mask of the start
    # address, 0x3FFF0 = 262128 in the PTX) and each wgmma adds its piece's offset to them. Encoded
    # per wgmma (eight masks here), about ten dependent instructions preceded each, redone in
    # every repeat of the harness's loop: 64^3 float16 -> float32 651 -> 670 TFLOP/s on an H100.
    ptx = ptx_of(gemm(size, prec, arr).device_source("gemm") + REPEATED_MULTIPLY, "repeated")
    assert ptx.count("wgmma.mma_async") == 4
    assert ptx.count("262128") == 2


@pytest.mark.parametrize("kernel, name", [(KERNELS, "k_loop"), (EDGES, "edges")])
def test_ptxas_keeps_the_wgmma_of_the_k_loops_in_flight_together(kernel, name):
    for desc in (gemm((64, 64, 64)), gemm((128, 128, 128), ("float8_e4m3",) * 2 + ("float32",), "rcr")):
        assert "serialized" not in ptxas_log(desc.device_source("gemm") + kernel, name)


@pytest.mark.parametrize("desc", [
    gemm((64, 64, 64)), gemm((128, 128, 64), ("bfloat16",) * 3, "ccc"),
    Size(4096, 4096, 4096) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
    + SM(900) + Grid(),
], ids=["block-f16", "block-bf16", "grid-f16"])
def test_ptxas_keeps_the_wgmma_of_execute_kernels_in_flight_together(desc):
    plan = grid_with_alignment(desc.plan, (16, 16, 16)) if desc.is_grid else with_alignment(desc.plan, (16, 16, 16))
    source = kernel_source(plan)
    name = re.search(r'__global__ void (?:__\w+__\([^)]*\) )*(\w+)\(', source).group(1)
    assert "serialized" not in ptxas_log(source, name)


@pytest.mark.parametrize("size, prec", [((64, 64, 64), ("float16", "float16", "float32")),
                                        ((128, 128, 64), ("bfloat16",) * 3), ((128, 128, 128), ("float8_e4m3",) * 2 + ("float32",))])
def test_ptxas_keeps_multiply_async_in_flight_in_the_documented_k_loop(size, prec):
    desc = gemm(size, prec, "rcr")
    log = ptxas_log(desc.device_source("gemm") + OVERLAPPED, "k_loop_overlapped")
    assert "serialized" not in log, log


@pytest.mark.parametrize("prec, epilogue, bias, alignment", [
    (("float16",) * 3, None, False, 16), (("float16",) * 3, "gelu", True, 16),
    (("bfloat16", "bfloat16", "float32"), None, False, 16), (("float16",) * 3, "gelu", True, 2),
], ids=["f16", "f16-bias-gelu", "bf16-f32", "f16-bias-gelu-cp.async"])
def test_grid_kernels_keep_wgmma_in_flight_without_the_mma_sync_fallback(prec, epilogue, bias, alignment):
    # The grid kernel's stages start on 1024-byte boundaries by construction, so its K loop runs
    # wgmma with no run-time test: the untaken mma.sync fallback had cost the TMA kernel of
    # 256x128 float16 tiles 52-240 bytes of spills and a warpgroup.wait ptxas injected (C7517).
    # The cp.async kernel (arrays aligned to less than 16 bytes) had its wgmma serialized (C7518)
    # until its threads past the tile's returned first.
    desc = (Size(4096, 4096, 4096) + Precision(*prec) + Arrangement("row_major", "col_major", "row_major") + SM(900)
            + Grid())
    plan = grid_with_alignment(desc.plan, (alignment,) * 3)
    assert plan.tma == (alignment == 16)
    source = kernel_source(plan, fusion(desc, None, epilogue, None, None, None, None, bias))
    name = re.search(r'__global__ void (?:__\w+__\([^)]*\) )*(\w+)\(', source).group(1)
    log = ptxas_log(source, name)
    assert "serialized" not in log and "C7517" not in log, log
    if plan.tma:
        assert "0 bytes spill stores, 0 bytes spill loads" in log, log
