"""The grid kernel's source without a GPU: the epilogue's reads and writes of C and the K loop's copies in
NVRTC's PTX, rows off 16-byte boundaries copied in shifted pieces, and NVRTC compiles of the grid kernel for
every precision family and the SMs the installed NVRTC targets (with hooks and a bias, split-K, TMA and
clusters), and of a user kernel built on a Grid() descriptor's device_source()."""

from __future__ import annotations

import itertools
import re

import pytest

import blasdx
from blasdx import (
    SM,
    Arrangement,
    Block,
    Grid,
    Grouped,
    LeadingDimension,
    MaxAlignment,
    Precision,
    Size,
    Type,
    compile_kernel,
)
from blasdx.compiler import supported_archs

from ..support import F16F32, RCR, arrangement_of, global_loads_between_stores, grid, ptx_of

FAMILIES = [  # precisions, complex, SM
    (("float16", "float16", "float32"), False, 900),
    (("bfloat16",) * 3, False, 900),
    (("float16",) * 3, False, 750),
    (("tfloat32", "tfloat32", "float32"), False, 800),
    (("float32",) * 3, False, 800),
    (("float64",) * 3, False, 800),
    (("int8", "int8", "int32"), False, 800),
    (("float8_e4m3", "float8_e4m3", "float32"), False, 890),
    (("float32",) * 3, True, 800),
    (("float16",) * 3, True, 750),
]


def _grid_kernel_at_alignment(desc, alignment: int, c_alignment: int | None = None):
    """The plan and PTX of desc's grid kernel for arrays aligned to ``alignment`` bytes (16: TMA), C to
    ``c_alignment`` where given."""

    plan = blasdx.plan.grid_with_alignment(desc.plan, (alignment, alignment, c_alignment or alignment))
    source = blasdx.pipeline.kernel_source(plan, blasdx.pipeline.fusion(desc, None, None, None, None, None, None, False))
    return plan, ptx_of(source, plan.kernel_name)


@pytest.mark.compile
@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("float16",) * 3, ("float64",) * 3],
                         ids=["f16f32", "f16-quads", "f64"])
def test_the_epilogue_reads_c_a_group_ahead_of_its_writes(prec):
    """With beta != 0 the epilogue's reads of C come in groups, each before any of the group's
    writes (c_read_group): in the PTX, every run of global loads between stores holds 8 or more
    (it held 3 or 4, each pair's read waiting on the write before it). The kernel of 16-byte aligned
    A and B, as execute() runs on CuPy's and PyTorch's; float32 C 8 bytes off (aligned, TMA stores it:
    test_tma_store.py)."""

    desc = Size(256, 256, 64) + Precision(*prec) + RCR + SM(900) + Grid()
    assert "where beta != 0, C read a few instruction tiles at a time, ahead of their writes" in desc.explain(width=0)
    runs = global_loads_between_stores(_grid_kernel_at_alignment(desc, 16, 8)[1])
    assert len(runs) >= 2 and min(runs) >= 8, runs


@pytest.mark.compile
def test_the_float64_epilogue_writes_a_pair_of_c_in_one_store():
    """The pair path's 16-byte pairs go out as one store (store_global), and only the element
    fallback writes single values: two a pair. NVVM had written every float64 pair as two 8-byte
    stores (256 st.global.f64), and the kernel spilled 16 bytes on arrays aligned to less than 16
    bytes. (8-byte pairs stay as written: store_global cost float32 RRR 8% there.) No spill under
    NVRTC 12.9 or 13 (CI runs both): see the test below for the former's K loop."""
    desc = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()
    for alignment in (16, 8):
        plan, ptx = _grid_kernel_at_alignment(desc, alignment)
        pairs = len(re.findall(r"st\.global\.v4\.b32", ptx))
        singles = len(re.findall(r"st\.global\.f64\b", ptx))
        assert pairs and singles == 2 * pairs, (alignment, pairs, singles)
        resources = blasdx.pipeline.compile_for_arch(plan, 900).resources
        assert resources is not None and not resources.spills, (alignment, resources)


@pytest.mark.compile
@pytest.mark.parametrize("activation", ["gelu", "sigmoid", "tanh"])
def test_a_float64_activation_is_one_function_the_grid_epilogue_calls(activation):
    """A float64 grid tile's gelu, sigmoid and tanh are called, not inlined: a thread's 64 inlined copies
    of erfc took the gelu + bias kernel's PTX to 616 KB, ptxas seconds and 352 bytes of spills, and
    ran 14-25% slower (H200, 2048^3 and 3000^3). A block GEMM's batched kernel inlines them (the call
    spilled the 32^3 one under NVRTC 12)."""
    desc = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()
    plan = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    fusion = blasdx.pipeline.fusion(desc, None, activation, None, None, None, None, True)
    ptx = ptx_of(blasdx.pipeline.kernel_source(plan, fusion), plan.kernel_name)
    functions = set(re.findall(r"^\.func .*?(\w+blasdx6called\d+" + activation + r"Ed)\b", ptx, re.M))  # declared, defined
    calls = re.findall(r"\bcall\.uni\b", ptx)
    assert len(functions) == 1 and len(calls) >= 32, (functions, len(calls))
    assert len(ptx) < 300_000, len(ptx)
    block = Size(32, 32, 32) + Precision("float64") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    plan = blasdx.plan.with_alignment(block.plan, (16, 16, 16))
    fusion = blasdx.pipeline.fusion(block, None, activation, None, None, None, None, True)
    assert "call.uni" not in ptx_of(blasdx.pipeline.kernel_source(plan, fusion), plan.kernel_name)


def test_numba_units_of_grid_tiles_call_the_float64_activations_and_block_units_inline_them():
    """blasdx.numba's units: a Grid() or Grouped() descriptor's (its tile loop's 64 values a thread) call the float64
    activations, as the grid kernel does; a Block() descriptor's inline them, as its batched kernel does. (Grouped()
    tiles are wgmma's: no float64; the unit's alias is its kind's all the same.)"""
    from blasdx.codegen.render import render_numba_unit

    def alias(execution, size=(256, 256, 64), precision="float64"):
        desc = Size(*size) + Precision(precision) + RCR + SM(900) + execution
        fusion = blasdx.pipeline.fusion(desc, None, "gelu", None, None, None, None, False)
        found = re.findall(r"namespace blasdx_activations = ([\w:]+);", render_numba_unit(desc.plan, "unit", fusion))
        assert len(found) == 1, found
        return found[0]

    assert alias(Grid()) == alias(Grouped(), precision="bfloat16") == "blasdx::called"
    assert alias(Block(), (32, 32, 32)) == "blasdx"


@pytest.mark.compile
def test_narrow_float64_copies_go_a_step_earlier_in_the_k_loop_under_nvrtc_12():
    """Pipelined float64 tiles whose A or B is copied in pieces under 16 bytes (arrays aligned to 8)
    issue the next K tile's copies after step 1 of 4 under NVRTC 12 (ptxas 12.9 spilled 16 bytes into
    the K loop after step 2) and after step 2 under NVRTC 13; other kernels, the 16-byte one that
    CuPy's and PyTorch's arrays take included, render as before."""
    desc = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()
    narrow = blasdx.plan.grid_with_alignment(desc.plan, (8,) * 3)
    wide = blasdx.plan.grid_with_alignment(desc.plan, (16,) * 3)
    rrr = Size(4096, 4096, 4096) + Precision("float64") + arrangement_of("rrr") + SM(900) + Grid()
    assert narrow.tile.copies_a_step_earlier_before_nvrtc13 and not wide.tile.copies_a_step_earlier_before_nvrtc13
    assert not rrr.plan.tile.pipelined_fragments and not rrr.plan.tile.copies_a_step_earlier_before_nvrtc13
    assert "__CUDACC_VER_MAJOR__ < 13 ? k_steps - 3" in blasdx.pipeline.kernel_source(narrow)
    for plan in (wide, rrr.plan):
        assert "__CUDACC_VER_MAJOR__" not in blasdx.pipeline.kernel_source(plan)
    # The step the installed NVRTC takes, as the compiler sees it (a float64 step of k is 8 deep).
    step = 1 if blasdx.compiler.nvrtc_version()[0] < 13 else 2
    probe = desc.device_source("g") + f"static_assert(g::between_k0 == {step} * 8);\nextern \"C\" __global__ void probe() {{}}\n"
    blasdx.compile_kernel(probe, "probe", sm=900)


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["rcr", "rrr"])
def test_the_cp_async_kernels_16_bit_epilogue_reads_each_quad_just_before_its_write(arrangement):
    """16-bit C's quads are read a group ahead in the TMA kernel (GridPlan.quads_c_read_ahead) but
    one quad at a time in the cp.async kernel (arrays aligned to less than 16 bytes), whose 128
    registers a thread the group's reads spilled into the K loop: float16 4096^3 RCR at 8-byte
    alignment 334 bytes of spill stores (70 before the read-ahead, 44 now); H100 1.06-1.17x."""

    layouts = {"r": "row_major", "c": "col_major"}
    desc = (Size(4096, 4096, 4096) + Precision("float16") + Arrangement(*(layouts[x] for x in arrangement)) + SM(900)
            + Grid())
    tma, tma_ptx = _grid_kernel_at_alignment(desc, 16)
    cp_async, cp_async_ptx = _grid_kernel_at_alignment(desc, 8)
    assert tma.quads_c_read_ahead and not cp_async.quads_c_read_ahead
    assert min(global_loads_between_stores(tma_ptx)) >= 8
    assert max(global_loads_between_stores(cp_async_ptx)) <= 4  # a quad's reads, then its store
    assert "on arrays aligned to less than 16 bytes (no TMA) a quad at a time, just before its write" in desc.explain(width=0)
    assert blasdx.pipeline.compile_for_arch(cp_async, 900).resources.spill_store_bytes <= 64


@pytest.mark.compile
def test_a_plain_16_bit_kernel_has_a_short_epilogue_for_whole_tiles():
    """Plain 16-bit TMA kernels (no hooks) write whole tiles at beta 0 by a second, short copy of the quads' epilogue
    (store_whole_tile_quads, GridPlan.short_quads_epilogue: 1.02-1.22x on the H200, most at shallow K); kernels with
    hooks keep one copy (compile time), and so do the cp.async kernels, SM 900's of 128 registers and SM 800's
    (the copy spilled there)."""
    desc = Size(4096, 4096, 4096) + Precision("bfloat16") + RCR + SM(900) + Grid()
    stores = {}
    for name, d, alignment, epilogue in (("plain", desc, 16, None), ("relu", desc, 16, "relu"), ("cp.async", desc, 8, None),
                                         ("sm800", desc.replace(SM(800)), 16, None)):
        plan = blasdx.plan.grid_with_alignment(d.plan, (alignment,) * 3)
        assert plan.short_quads_epilogue == (name in ("plain", "relu")), name
        fusion = blasdx.pipeline.fusion(d, None, epilogue, None, None, None, None, False)
        ptx = ptx_of(blasdx.pipeline.kernel_source(plan, fusion), plan.kernel_name, arch=d.sm)
        stores[name] = len(re.findall(r"st\.global\.v2\.b32", ptx))
    assert stores["relu"] > 0 and stores["plain"] == 2 * stores["relu"], stores
    assert stores["cp.async"] == stores["sm800"] == stores["relu"], stores


@pytest.mark.compile
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f"{'c' if f[1] else ''}{f[0][0]}-{f[0][2]}_sm{f[2]}")
def test_the_grid_kernel_compiles(family):
    prec, complex_, sm = family
    desc = Size(1000, 600, 333) + Precision(*prec) + RCR + SM(sm) + Grid()
    if complex_:
        desc = desc + Type("complex")
    arch = max(a for a in supported_archs() if a <= 900)
    assert desc.compile(arch=arch).cubin[:4] == b"\x7fELF"
    hooks = dict(epilogue="negate", prologue="negate") if complex_ else dict(epilogue="relu", c_load="negate")
    assert desc.compile(arch=arch, bias=True, **hooks).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f"{'c' if f[1] else ''}{f[0][0]}-{f[0][2]}_sm{f[2]}")
def test_the_split_k_kernel_compiles(family):
    """Few tiles and a long K loop: the kernel with combine_splits, whose workspace Python sizes
    (a static_assert holds the two to the same accumulator)."""
    prec, complex_, sm = family
    desc = Size(200, 150, 4096) + Precision(*prec) + RCR + SM(sm) + Grid()
    if complex_:
        desc = desc + Type("complex")
    assert desc.plan.split_k
    arch = max(a for a in supported_archs() if a <= 900)
    assert desc.compile(arch=arch, bias=True).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["".join(x) for x in itertools.product("rc", repeat=3)])
def test_every_arrangement_compiles(arrangement):
    for prec in (("float16", "float16", "float32"), ("float64",) * 3):
        desc = Size(300, 200, 100) + Precision(*prec) + arrangement_of(arrangement) + SM(900) + Grid()
        assert desc.compile(arch=900).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
def test_a_user_kernel_on_the_device_source_compiles():
    source = grid(size=(333, 250, 190)).device_source("g") + r"""
extern "C" __global__ void tiles(const g::a_t* a, const g::b_t* b, g::c_t* c) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int t = blockIdx.x; t < g::block_tiles; t += gridDim.x) {
    int row0, col0;
    g::block_tile_origin(t, row0, col0);
    g::accumulator acc = g::make_accumulator();
    g::mainloop(a, b, row0, col0, smem, acc);
    g::store_block_tile(acc, c, row0, col0, 1.0f, 0.0f);
  }
}
"""
    assert "mainloop" in source and "problem_lda" in source
    kernel = compile_kernel(source, "tiles", sm=900)
    assert kernel.cubin[:4] == b"\x7fELF"


# --- TMA (sm_90: a producer warpgroup copies A and B by tensor maps) ---------------------------

WGMMA_FAMILIES = [("float16", "float16", "float32"), ("bfloat16", "bfloat16", "float32"), ("float16",) * 3,
                  ("tfloat32", "tfloat32", "float32"), ("float8_e4m3", "float8_e5m2", "float32"),
                  ("int8", "int8", "int32")]


def copies_in(source: str, name: str) -> str:
    """The body of load_<name>(global, ld, shared) in a rendered source."""
    start = source.index(f"void load_{name}(const {name}_t* global, long long ld, {name}_t* shared) {{")
    return source[start:source.index("\n}", start)]


@pytest.mark.parametrize("prec,shifted", [(F16F32, True), (Precision("int8", "int8", "int32"), True),
                                          (Precision("float32"), False)], ids=["f16", "i8", "f32"])
def test_rows_off_16_byte_boundaries_move_in_shifted_16_byte_pieces(prec, shifted):
    """Rows of 1- and 2-byte elements off 16-byte boundaries (an odd leading dimension, or a
    pointer only 2-byte aligned) are copied in 16-byte pieces cut from aligned loads, not
    element by element and synchronously; 4-byte elements keep 4-byte cp.async."""
    odd_k = grid(size=(4096, 4096, 4095)).replace(prec)  # A's and B's rows are 4095 elements apart
    plan = blasdx.plan.grid_with_alignment(odd_k.plan, (16, 16, 16))
    source = blasdx.pipeline.kernel_source(plan)
    assert not plan.tma
    for name in "ab":
        copies = copies_in(source, name)
        assert ("copy_runs_shifted" in copies and "copy_runs<" not in copies) == shifted, copies
    two_byte_pointers = blasdx.plan.grid_with_alignment(grid().replace(prec).plan, (2, 16, 16))
    source = blasdx.pipeline.kernel_source(two_byte_pointers)
    assert ("copy_runs<" not in copies_in(source, "a")) == shifted
    assert "copy_runs<" in copies_in(source, "b")  # B's pointer is 16-byte aligned: wide copies
    assert ("A in 16-byte pieces cut from aligned loads" in odd_k.explain(width=0)) == shifted


def test_a_users_kernel_keeps_element_copies_where_its_shared_memory_may_be_unaligned():
    """copy_runs_shifted stores 16 bytes at a time: in a user's kernel, whose shared-memory
    pointers are only as aligned as the descriptor's Alignment says, it runs with MaxAlignment."""
    block = Size(64, 64, 64) + F16F32 + RCR + SM(900) + Block()
    assert "copy_runs_shifted" not in copies_in(blasdx.pipeline.device_source(block.plan), "a")
    aligned = block + MaxAlignment
    assert "copy_runs_shifted" in copies_in(blasdx.pipeline.device_source(aligned.plan), "a")


def test_the_grid_kernel_trusts_its_planned_alignment_where_a_users_kernel_checks():
    """The grid kernel's plan has the arrays' own alignment, so where the narrow copy is a shifted
    one its copies do not test the pointer at run time (both copies compiled in cost about a
    second of compile time); a user's kernel, whose pointers may be any offsets, keeps the test."""
    aligned = blasdx.plan.grid_with_alignment(grid().plan, (8, 8, 8))
    assert "global) %" not in copies_in(blasdx.pipeline.kernel_source(aligned), "a")
    # where the narrow copy is element-wise, the test stays (without it ptxas made float64 slower)
    f64 = blasdx.plan.grid_with_alignment(grid().replace(Precision("float64")).plan, (16, 16, 16))
    assert "global) % 16 == 0" in copies_in(blasdx.pipeline.kernel_source(f64), "a")
    block = Size(64, 64, 64) + F16F32 + RCR + SM(900) + Block() + MaxAlignment
    assert "global) % 16 == 0" in copies_in(blasdx.pipeline.device_source(block.plan), "a")


@pytest.mark.compile
def test_the_shifted_copies_compile():
    desc = grid(size=(127, 8191, 8191))
    plan = blasdx.plan.grid_with_alignment(desc.plan, (2, 2, 16))
    assert "copy_runs_shifted" in blasdx.pipeline.kernel_source(plan)
    assert blasdx.pipeline.compile_for_arch(plan, 900).cubin[:4] == b"\x7fELF"
    # execute()'s batched kernel of a Block() descriptor, on arrays 1-byte aligned
    block = Size(64, 64, 64) + Precision("int8", "int8", "int32") + RCR + SM(800) + Block() + LeadingDimension(65, 65, 64)
    batched = blasdx.plan.with_alignment(block.plan, (1, 1, 4))
    assert "copy_runs_shifted" in copies_in(blasdx.pipeline.kernel_source(batched), "b")
    assert blasdx.pipeline.compile_for_arch(batched, 800).cubin[:4] == b"\x7fELF"


def _compile_tma(desc, arch=900, **hooks):
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.tma
    fusion = blasdx.pipeline.fusion(desc, hooks.pop("prologue", None), hooks.pop("epilogue", None), None, None,
                                    hooks.pop("c_load", None), None, hooks.pop("bias", False))
    source = blasdx.pipeline.kernel_source(aligned, fusion)
    assert "produce_range" in source and "__grid_constant__ blasdx::tensor_map" in source
    return blasdx.pipeline.compile_for_arch(aligned, arch, fusion)


@pytest.mark.compile
@pytest.mark.parametrize("prec", WGMMA_FAMILIES, ids=lambda p: f"{p[0]}-{p[2]}")
def test_the_tma_kernel_compiles(prec):
    desc = Size(1000, 600, 336) + Precision(*prec) + RCR + SM(900) + Grid()
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"
    # a prologue: the tile multiplies by mma.sync from the same TMA-copied stages
    assert _compile_tma(desc, bias=True, epilogue="relu", prologue="negate").cubin[:4] == b"\x7fELF"
    split = Size(192, 128, 4096) + Precision(*prec) + RCR + SM(900) + Grid()
    assert split.plan.split_k and _compile_tma(split, bias=True).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["".join(x) for x in itertools.product("rc", repeat=3)])
def test_the_tma_kernel_compiles_in_every_arrangement(arrangement):
    desc = Size(320, 256, 192) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["rcr", "rrr", "ccr", "crc"])
def test_the_cluster_kernel_compiles(arrangement):
    desc = Size(2000, 2048, 512) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.cluster
    source = blasdx.pipeline.kernel_source(aligned)
    assert "__cluster_dims__(2, 1, 1)" in source and "tensor_copy_multicast" in source
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"
    assert _compile_tma(desc, bias=True, epilogue="gelu").cubin[:4] == b"\x7fELF"
