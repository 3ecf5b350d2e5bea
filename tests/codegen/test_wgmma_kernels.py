"""wgmma kernels without a GPU: NVRTC compiles of the device API and the batched kernel for sm_90a in
every arrangement, two descriptors chained through store_at and multiply_chained, and ptxas keeping the
wgmma of each kernel in flight together (never serialized, the TMA kernel without spills)."""

from __future__ import annotations

import itertools
import re

import pytest

from blasdx import SM, Arrangement, Grid, InstructionFamily, Precision, Size, compile_kernel
from blasdx.compiler import supported_archs
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.pipeline import fusion, kernel_source
from blasdx.plan import grid_with_alignment, with_alignment

from ..device_kernels import (
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
)
from ..support import gemm, ptx_of

ARRANGEMENTS = ["".join(x) for x in itertools.product("rc", repeat=3)]

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
