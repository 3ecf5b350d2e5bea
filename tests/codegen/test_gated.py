"""Gated epilogues (SwiGLU, GeGLU; issue 48) without a GPU: how a user names one, the plans that take one (C half the
product's width) and those that refuse it with the fix, and the gated grid and grouped kernels compiling without
spills on the wgmma (TMA) and the mma.sync (cp.async) paths. Weights kept split (layout="split"): the TMA producer
copies B's gate and up halves of a tile from their two places, which the tensor map's box and the printed copies
show; everywhere else it is refused with the fix."""

from __future__ import annotations

import re
from dataclasses import replace

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

from ..support import ptx_of

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BF16 = Precision("bfloat16", "bfloat16", "bfloat16")
F16_F32 = Precision("float16", "float16", "float32")


def _fusion(epilogue, *, prologue=None, c_load=None, precisions=("bfloat16", "bfloat16", "bfloat16"), is_complex=False,
            scalar="float32"):
    return make_fusion(prologue=prologue, epilogue=epilogue, a_load=None, b_load=None, c_load=c_load, c_store=None,
                       has_bias=False, precisions=precisions, scalar_precision=scalar, is_complex=is_complex)


@pytest.mark.parametrize("epilogue, gate, split", [
    (blasdx.swiglu(layout="interleaved"), "silu", False),
    (blasdx.geglu(layout="interleaved"), "gelu", False),
    ("swiglu_interleaved", "silu", False),
    ("geglu_interleaved", "gelu", False),
    (blasdx.swiglu(layout="split"), "silu", True),
    (blasdx.geglu(layout="split"), "gelu", True),
    ("swiglu_split", "silu", True),
])
def test_a_gated_epilogue_takes_the_c_store_slot(epilogue, gate, split):
    fusion = _fusion(epilogue, c_load="relu")
    assert fusion.gate == gate and fusion.gate_split == split and fusion.c_store.is_identity
    assert fusion.c_load.name == "relu" and fusion.has_epilogue and not fusion.is_identity
    assert fusion.digest != _fusion(None, c_load="relu").digest


def test_the_two_layouts_are_two_fusions_and_interleaved_keeps_its_kernel_names():
    interleaved, split = _fusion("swiglu_interleaved"), _fusion("swiglu_split")
    assert interleaved != split and hash(interleaved) != hash(split) and interleaved.digest != split.digest
    assert interleaved.digest == "fd70c7a2"  # as before layout="split" existed: interleaved kernels keep their names


@pytest.mark.parametrize("layout", ["interleaved", "split"])
def test_the_gated_epilogues_print_as_a_user_writes_them(layout):
    assert repr(blasdx.swiglu(layout=layout)) == f"blasdx.swiglu(layout={layout!r})"
    assert repr(blasdx.geglu(layout=layout)) == f"blasdx.geglu(layout={layout!r})"


@pytest.mark.parametrize("call, match", [
    (lambda: _fusion("swiglu"), r"say where the gate and up columns are, blasdx\.swiglu\(layout='interleaved'\)"),
    (lambda: _fusion("geglu"), r"blasdx\.geglu\(layout='split'\) .* or the strings 'geglu_interleaved', 'geglu_split'"),
    (lambda: blasdx.geglu(layout="rows"), r"takes layout='interleaved' .* or layout='split' .*; got layout='rows'"),
    (lambda: _fusion(None, prologue=blasdx.swiglu(layout="interleaved")), r"a_load=.*give it as epilogue="),
    (lambda: _fusion("swiglu_interleaved", precisions=("int8", "int8", "int32"), scalar="int32"),
     "needs floating-point values"),
    (lambda: _fusion("swiglu_interleaved", precisions=("float32",) * 3, is_complex=True), "defined for real values"),
], ids=["swiglu-without-layout", "geglu-without-layout", "bad-layout", "as-a-prologue", "integers", "complex"])
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
def test_a_float64_gelu_gate_is_called_as_the_grid_kernels_activations_are():
    """The gelu gate of a float64 Grid() kernel is blasdx::called's (a grid tile's 64 values a thread: inlined,
    its PTX grew 144 -> 214 KB), as the built-in float64 hooks (test_grid_kernel.py)."""
    desc = Size(1024, 1024, 512) + Precision("float64") + RCR + SM(900) + Grid()
    fusion = _fusion("geglu_interleaved", precisions=("float64",) * 3, scalar="float64")
    plan = aligned_plan(for_gate(desc.plan, fusion), (16, 16, 16))
    ptx = ptx_of(kernel_source(plan, fusion), plan.kernel_name)
    assert re.search(r"^\.func .*blasdx6called4geluEd", ptx, re.M) and len(re.findall(r"\bcall\.uni\b", ptx)) >= 16


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


# --- weights kept split: layout="split" ----------------------------------------------------------------------------

F16 = Precision("float16", "float16", "float16")


@pytest.mark.parametrize("desc", [
    Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid(),
    Size(300, 400, 320) + BF16 + RRR + SM(900) + Grid() + blasdx.Tile(64, 128, 64),
    Size(128, 3072, 2048) + BF16 + RRR + SM(900) + Grouped(),
], ids=["grid-rcr", "grid-rrr", "grouped"])
def test_a_split_gated_plan_says_so_and_keeps_the_interleaved_plan_apart(desc):
    split, interleaved = for_gate(desc.plan, _fusion("swiglu_split")), for_gate(desc.plan, _fusion("swiglu_interleaved"))
    assert split.gate_split and not interleaved.gate_split
    assert (split.c.cols, split.c.ld, split.n, split.item_block) == (interleaved.c.cols, interleaved.c.ld, desc.plan.n, None)
    assert split.kernel_name != interleaved.kernel_name and split.digest != interleaved.digest
    assert for_gate(desc.plan, _fusion("swiglu_split")) is split  # gated once a layout, then remembered
    assert interleaved.kernel_name == replace(split, gate_split=False).kernel_name  # interleaved: names as before


@pytest.mark.parametrize("desc, match", [
    (Size(500, 1000, 512) + F16_F32 + RRR + SM(800) + Grid(),
     r"by TMA, so it must run the TMA kernel .* tiles run mma_f16 on SM 800 .* interleave the weights once .*transpose"),
    (Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid() + LeadingDimension(320, 324, 400),
     r"leading dimensions must be multiples of 16 bytes, and this descriptor's lda, ldb are 320, 324 elements"),
    (Size(300, 400, 320) + BF16 + RRR + SM(900) + Grid(),
     r"whole slabs of 64 columns, but the tile has 1: use a Tile whose n is a multiple of 128 \(Tile\(64, 128, 64\)\)"),
    (Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid() + blasdx.Tile(64, 40, 64),
     r"boxes on 1024-byte boundaries, but half of them is 20 lines of 128 bytes: use a Tile whose n is a multiple of 16"),
    (Size(256, 1000, 512) + F16_F32 + RRR + SM(900) + Grid() + blasdx.Tile(128, 128, 64),
     r"from its column n / 2 = 500, 1000 bytes into each row, but TMA copies start on 16-byte boundaries: make n / 2 "
     r"a multiple of 8 \(pad both halves"),
], ids=["cp-async-sm800", "unaligned-leading-dimension", "rrr-one-slab", "rcr-half-box-off-boundary",
        "rrr-up-half-off-16-bytes"])
def test_a_plan_that_cannot_gate_split_weights_refuses_with_the_fix(desc, match):
    with pytest.raises(ArgumentError, match=match):
        for_gate(desc.plan, _fusion("geglu_split"))
    assert not for_gate(desc.plan, _fusion("geglu_interleaved")).gate_split  # the interleaved weights' fix runs


def test_a_split_gated_call_on_arrays_tma_cannot_copy_is_refused_not_run_on_cp_async():
    plan = for_gate((Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid()).plan, _fusion("swiglu_split"))
    assert aligned_plan(plan, (16, 16, 16)).tma
    with pytest.raises(ArgumentError, match=r"runs on the TMA kernel, .* aligned to 16 and 8 bytes: align them, or "
                                             r"interleave the weights once"):
        aligned_plan(plan, (16, 8, 16))


def test_split_weights_refuse_scales_that_follow_b_columns():
    plan = for_gate((Size(256, 512, 256) + Precision("float8_e4m3", "float8_e4m3", "bfloat16") + RCR + SM(900)
                     + Grid()).plan, _fusion("swiglu_split", precisions=("float8_e4m3", "float8_e4m3", "bfloat16")))
    assert plan.scales_refusal("row", "tensor", False) == ""
    assert re.search(r"B's col scales follow B's columns, which layout='split' gathers from two places",
                     plan.scales_refusal("", "col", False))


def _b_copies(source: str) -> str:
    """The producer's copies of B (tma.cuh.j2's produce_range), from the kernel's source."""
    start = source.index("void produce_range(")
    return source[start:source.index("\n}\n", start)]


@pytest.mark.parametrize("desc, cluster, copies", [
    # K-major B (RCR): each slab's rows in two boxes of half of them, the up's half n / 2 further on along n
    (Size(300, 400, 320) + BF16 + RCR + SM(900) + Grid(), False,
     ["constexpr int half = 32;", "for (int h = 0; h < 2; ++h)",
      "blasdx::tensor_copy(stage + b_offset + j * 8192 + h * half * 128, b_map,",
      "k0 + j * 64, h ? (problem_n / 2 + col0 / 2) : col0 / 2, item, landed + s);"]),
    # ... in clusters, block `rank` copies one half (rank 0 the gate's) into both blocks
    (Size(4096, 2048, 1024) + BF16 + RCR + SM(900) + Grid(), True,
     ["constexpr int half = 64;",
      "blasdx::tensor_copy_multicast(stage + b_offset + j * 16384 + rank * half * 128, b_map,",
      "k0 + j * 64, rank ? (problem_n / 2 + col0 / 2) : col0 / 2, item, landed + s, 3);"]),
    # N-major B (RRR): the first half of the slabs from the gate's columns, the rest from the up's
    (Size(128, 3072, 2048) + BF16 + RRR + SM(900) + Grouped(), False,
     ["constexpr int half = 2;", "for (int j = 0; j < 4; ++j)",
      "(j < half ? col0 / 2 : (problem_n / 2 + col0 / 2)) + j % half * 64, k0, item, landed + s);"]),
    (Size(4096, 2048, 1024) + BF16 + RRR + SM(900) + Grid(), True,
     ["constexpr int half = 1;", "for (int j = rank * half; j < (rank + 1) * half; ++j)",
      "blasdx::tensor_copy_multicast(stage + b_offset + j * 8192, b_map,",
      "(j < half ? col0 / 2 : (problem_n / 2 + col0 / 2)) + j % half * 64, k0, item, landed + s, 3);"]),
], ids=["grid-rcr", "grid-rcr-cluster", "grouped-rrr", "grid-rrr-cluster"])
def test_the_producer_copies_b_halves_from_the_gate_and_up_origins(desc, cluster, copies):
    fusion = _fusion("swiglu_split")
    plan = aligned_plan(for_gate(desc.plan, fusion), (16, 16, 16))
    assert plan.tma and plan.cluster == cluster
    split = _b_copies(kernel_source(plan, fusion))
    for line in copies:
        assert line in split, split
    interleaved = _b_copies(kernel_source(aligned_plan(for_gate(desc.plan, _fusion("swiglu_interleaved")),
                                                       (16, 16, 16)), _fusion("swiglu_interleaved")))
    assert "gate_split" not in interleaved and "problem_n / 2" not in interleaved and "col0 / 2" not in interleaved


@pytest.mark.parametrize("arrangement, halved", [(RCR, True), (RRR, False)], ids=["rcr-half-rows", "rrr-whole-slab"])
def test_the_tensor_map_box_of_split_b_is_half_a_slab_where_k_is_contiguous(arrangement, halved):
    import numpy as np

    from blasdx.runtime.arguments import MatrixView
    from blasdx.runtime.launch import operand_layout

    desc = Size(300, 400, 320) + BF16 + arrangement + SM(900) + Grid() + blasdx.Tile(64, 128, 64)
    plan = aligned_plan(for_gate(desc.plan, _fusion("swiglu_split")), (16, 16, 16))
    assert not plan.cluster
    shape = (1, 320, 400) if arrangement is RRR else (1, 400, 320)
    view = MatrixView("b", 0, 0, np.dtype(np.float16), shape, (320 * 400, 0, 0), 2, None)
    layout = operand_layout(plan, "b", view, 1)
    part = plan.tma_operand("b")
    assert (layout.box_inner, layout.box_outer) == (64, part.slab_rows // 2 if halved else part.slab_rows)
    interleaved = aligned_plan(for_gate(desc.plan, _fusion("swiglu_interleaved")), (16, 16, 16))
    assert operand_layout(interleaved, "b", view, 1).box_outer == part.slab_rows  # a whole slab's box
    assert (layout.inner, layout.outer) == ((400, 320) if arrangement is RRR else (320, 400))  # the whole B, both halves


@pytest.mark.parametrize("c_layout", ["row_major", "col_major"])
def test_the_split_store_pairs_tiles_j_and_j_plus_half_of_one_lane(c_layout):
    desc = Size(300, 400, 320) + BF16 + Arrangement("row_major", "col_major", c_layout) + SM(900) + Grid()
    fusion = _fusion("swiglu_split")
    source = kernel_source(aligned_plan(for_gate(desc.plan, fusion), (16, 16, 16)), fusion)
    assert "values[i][j + pn / 2][v]" in source and "values[i][j + pn / 2][v + 1]" in source  # up of gate j's column
    assert "gather_four" not in source and "*reinterpret_cast<c_pair_t*>(to) = c_pair_t{v0, v1};" in source
    assert "c_t* c_tile = c + c_global(row0, col0 / 2);" in source and "gated_value(" not in source
    assert "static_assert(tiles_n == 1" in source


@pytest.mark.compile
@pytest.mark.parametrize("desc", [
    Size(4096, 2048, 1024) + BF16 + RCR + SM(900) + Grid(),  # clusters
    Size(300, 400, 320) + F16 + RCR + SM(900) + Grid(),
    Size(500, 1008, 512) + F16_F32 + RRR + SM(900) + Grid() + blasdx.Tile(128, 128, 64),
    Size(4096, 2048, 1024) + BF16 + RRR + SM(900) + Grid(),
    Size(128, 3072, 2048) + BF16 + RRR + SM(900) + Grouped(),
    Size(128, 3072, 2048) + F16 + RCR + SM(900) + Grouped(),
], ids=["grid-rcr-bf16-cluster", "grid-rcr-f16", "grid-rrr-f16-f32", "grid-rrr-bf16-cluster", "grouped-rrr-bf16",
        "grouped-rcr-f16"])
def test_split_gated_kernels_compile_without_spills(desc):
    fusion = make_fusion(prologue=None, epilogue="geglu_split", a_load=None, b_load=None, c_load=None,
                         c_store=None, has_bias=True, precisions=desc.precision, scalar_precision="float32",
                         is_complex=False)
    plan = aligned_plan(for_gate(desc.plan, fusion), (16, 16, 16))
    source = kernel_source(plan, fusion)
    assert "store_block_tile_gated(acc" in source and "gated_split_value" in source and "struct store_with_bias_op" in source
    name = kernel_name(launched_plan(plan), fusion)
    _, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
    assert f"Compiling entry function '{name}'" in log
    assert "C75" not in log, log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.compile
def test_compile_builds_the_split_gated_kernel_and_refuses_where_execute_would():
    grid = Size(512, 1024, 256) + BF16 + RCR + SM(900) + Grid()
    fusion = _fusion("swiglu_split")
    compiled = grid.compile(arch=900, epilogue=blasdx.swiglu(layout="split"))
    assert compiled.kernel_name == kernel_name(launched_plan(for_gate(grid.plan, fusion)), fusion)
    with pytest.raises(ArgumentError, match=r"must run the TMA kernel"):
        (Size(512, 1024, 256) + F16_F32 + RCR + SM(800) + Grid()).compile(arch=800, epilogue="swiglu_split")
