"""Gated epilogues (SwiGLU, GeGLU; issue 48) without a GPU: how a user names one, the plans that take one (C half the
product's width) and those that refuse it with the fix, and the gated grid and grouped kernels compiling without
spills on the wgmma (TMA) and the mma.sync (cp.async) paths."""

from __future__ import annotations

import re

import pytest

import blasdx
from blasdx import (
    SM,
    ArgumentError,
    Arrangement,
    Block,
    Grid,
    Grouped,
    LeadingDimension,
    Precision,
    Size,
    Warp,
)
from blasdx.codegen.hooks import make_fusion
from blasdx.codegen.naming import kernel_name
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.kinds import aligned_plan, launched_plan
from blasdx.pipeline import for_gate, kernel_source

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BF16 = Precision("bfloat16", "bfloat16", "bfloat16")
F16_F32 = Precision("float16", "float16", "float32")


def _fusion(epilogue, *, prologue=None, c_load=None, precisions=("bfloat16", "bfloat16", "bfloat16"), is_complex=False,
            scalar="float32"):
    return make_fusion(prologue=prologue, epilogue=epilogue, a_load=None, b_load=None, c_load=c_load, c_store=None,
                       has_bias=False, precisions=precisions, scalar_precision=scalar, is_complex=is_complex)


@pytest.mark.parametrize("epilogue, gate", [
    (blasdx.swiglu(layout="interleaved"), "silu"),
    (blasdx.geglu(layout="interleaved"), "gelu"),
    ("swiglu_interleaved", "silu"),
    ("geglu_interleaved", "gelu"),
])
def test_a_gated_epilogue_takes_the_c_store_slot(epilogue, gate):
    fusion = _fusion(epilogue, c_load="relu")
    assert fusion.gate == gate and fusion.c_store.is_identity and fusion.c_load.name == "relu"
    assert fusion.has_epilogue and not fusion.is_identity
    assert fusion.digest != _fusion(None, c_load="relu").digest


def test_the_gated_epilogues_print_as_a_user_writes_them():
    assert repr(blasdx.swiglu(layout="interleaved")) == "blasdx.swiglu(layout='interleaved')"
    assert repr(blasdx.geglu(layout="interleaved")) == "blasdx.geglu(layout='interleaved')"


@pytest.mark.parametrize("call, match", [
    (lambda: _fusion("swiglu"), r"say where the gate and up columns are, blasdx\.swiglu\(layout='interleaved'\)"),
    (lambda: _fusion("geglu"), r"blasdx\.geglu\(layout='interleaved'\) .* or the string 'geglu_interleaved'"),
    (lambda: blasdx.swiglu(layout="split"), r"not supported yet; interleave the weights once .*transpose\(1, 2\)"),
    (lambda: blasdx.geglu(layout="rows"), r"takes layout='interleaved' .*; got layout='rows'"),
    (lambda: _fusion(None, prologue=blasdx.swiglu(layout="interleaved")), r"a_load=.*give it as epilogue="),
    (lambda: _fusion("swiglu_interleaved", precisions=("int8", "int8", "int32"), scalar="int32"),
     "needs floating-point values"),
    (lambda: _fusion("swiglu_interleaved", precisions=("float32",) * 3, is_complex=True), "defined for real values"),
], ids=["swiglu-without-layout", "geglu-without-layout", "split", "bad-layout", "as-a-prologue", "integers",
        "complex"])
def test_a_gated_epilogue_named_wrongly_is_refused_with_the_fix(call, match):
    with pytest.raises(ArgumentError, match=match):
        call()


@pytest.mark.parametrize("desc, cols, ld", [
    (Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid(), 200, 200),
    (Size(300, 400, 320) + F16_F32 + Arrangement("row_major", "row_major", "col_major") + SM(800) + Grid(), 200, 300),
    (Size(128, 3072, 2048) + BF16 + RRR + SM(900) + Grouped(), 1536, 1536),
], ids=["grid-row-major-c", "grid-column-major-c", "grouped"])
def test_a_gated_plan_writes_half_of_the_products_columns(desc, cols, ld):
    fusion = _fusion("swiglu_interleaved")
    plan = for_gate(desc.plan, fusion)
    assert (plan.c.rows, plan.c.cols, plan.c.ld, plan.n) == (desc.plan.c.rows, cols, ld, desc.plan.n)
    assert plan.item_block is None  # the batched alternative takes no gate
    assert for_gate(plan, fusion) is plan and for_gate(desc.plan, fusion) is plan  # gated once, then remembered
    assert for_gate(desc.plan, _fusion(None)) is desc.plan


@pytest.mark.parametrize("desc, match", [
    (Size(64, 64, 64) + BF16 + RCR + SM(900) + Block(), r"runs on Grid\(\) and Grouped\(\) .* this one is Block\(\)"),
    (Size(32, 32, 32) + F16_F32 + RCR + SM(800) + Warp(), r"this one is Warp\(\)"),
    (Size(256, 256, 256) + Precision("float32", "float32", "float32") + RCR + SM(900) + Grid(),
     r"tensor-core tiles, .*tiles run fma .*TF32 for float32"),
    (Size(256, 250, 256) + BF16 + RCR + SM(900) + Grid() + LeadingDimension(256, 256, 256),
     r"LeadingDimension sets C's to 256: leave C's at its default"),
    (Size(256, 255, 256) + BF16 + RCR + SM(900) + Grid(), r"n must be even; Size's n is 255"),
    (Size(128, 256, 2048) + BF16 + Arrangement("col_major", "row_major", "row_major") + SM(900) + Grouped("k"),
     r"Grouped\('k'\) computes the weights' gradient"),
], ids=["block", "warp", "fma-tiles", "leading-dimension", "odd-n", "grouped-k"])
def test_a_plan_that_cannot_gate_refuses_before_any_compile(desc, match):
    with pytest.raises(ArgumentError, match=match):
        for_gate(desc.plan, _fusion("geglu_interleaved"))


@pytest.mark.compile
@pytest.mark.parametrize("desc, arch", [
    (Size(4096, 2048, 1024) + BF16 + RCR + SM(900) + Grid(), 900),  # TMA, wgmma
    (Size(128, 3072, 2048) + BF16 + RRR + SM(900) + Grouped(), 900),
    (Size(500, 1000, 512) + F16_F32 + RRR + SM(800) + Grid(), 800),  # cp.async, mma.sync
], ids=["grid-tma", "grouped", "grid-mma-sync"])
def test_gated_kernels_compile_without_spills(desc, arch):
    fusion = make_fusion(prologue=None, epilogue="swiglu_interleaved", a_load=None, b_load=None, c_load=None,
                         c_store=None, has_bias=True, precisions=desc.precision, scalar_precision="float32",
                         is_complex=False)
    plan = aligned_plan(for_gate(desc.plan, fusion), (16, 16, 16))
    source = kernel_source(plan, fusion)
    assert "store_block_tile_gated(acc" in source and "struct gate_op" in source
    name = kernel_name(launched_plan(plan), fusion)
    _, log = nvrtc_compile(source, options_for(arch, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log
    assert "C75" not in log, log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.compile
def test_compile_builds_the_gated_kernel_execute_runs_and_refuses_where_execute_would():
    grid = Size(512, 1024, 256) + BF16 + RCR + SM(900) + Grid()
    fusion = _fusion("swiglu_interleaved")
    compiled = grid.compile(arch=900, epilogue=blasdx.swiglu(layout="interleaved"))
    assert compiled.kernel_name == kernel_name(launched_plan(for_gate(grid.plan, fusion)), fusion)
    with pytest.raises(ArgumentError, match=r"this one is Block\(\)"):
        (Size(64, 64, 64) + BF16 + RCR + SM(900) + Block()).compile(arch=900, epilogue="swiglu_interleaved")
