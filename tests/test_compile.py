"""Rendering and NVRTC compilation without a GPU (compile tier): the compile matrix for
every SM the installed NVRTC supports, golden renders, determinism and CompileError."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import blasdx
from blasdx import (
    SM,
    Arrangement,
    Block,
    BlockDim,
    CompileError,
    Grid,
    LeadingDimension,
    PlanOverrides,
    Precision,
    Size,
    Type,
)
from blasdx.codegen.render import render_common
from blasdx.compiler import KernelResources, compile_source, kernel_resources, supported_archs
from blasdx.describe.traits import shared_memory_parts_of
from blasdx.pipeline import kernel_source
from blasdx.plan import grid_with_alignment, kernel_plan, with_alignment

pytestmark = pytest.mark.compile

GOLDEN_DIR = Path(__file__).parent / "golden"

# (precisions, complex, arrangement, size, SM of the algorithm)
MATRIX = [
    (("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 750),
    (("float16", "float16", "float16"), False, "ccc", (30, 31, 33), 750),
    (("bfloat16", "bfloat16", "float32"), False, "rrr", (32, 32, 32), 800),
    (("tfloat32", "tfloat32", "float32"), False, "crc", (13, 5, 7), 800),
    (("float32", "float32", "float32"), False, "rcc", (64, 64, 64), 750),
    (("float64", "float64", "float64"), False, "ccr", (16, 16, 16), 800),
    (("int8", "int8", "int32"), False, "rcr", (64, 32, 64), 800),
    (("uint8", "uint8", "uint32"), False, "ccc", (8, 16, 32), 800),
    (("float8_e4m3", "float8_e5m2", "float32"), False, "rcr", (64, 64, 64), 890),
    (("int16", "int16", "int64"), False, "rrc", (16, 16, 16), 750),
    (("float16", "float16", "float16"), True, "rcr", (16, 16, 16), 750),
    (("float64", "float64", "float64"), True, "crr", (8, 16, 32), 800),
    (("int4", "uint4", "int32"), False, "rcr", (64, 32, 128), 750),
    (("binary", "binary", "int32"), False, "rcc", (32, 64, 256), 800),
    (("float16", "float16", "float32"), False, "rrr", (128, 64, 64), 900),  # wgmma, B read transposed
]
LAYOUT = {"r": "row_major", "c": "col_major"}


def describe(prec, cx, arr, size, sm):
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Block()
    return desc + Type("complex") if cx else desc


def _spec_id(spec):
    prec, cx, arr, size, sm = spec
    return f"{'c' if cx else ''}{'-'.join(prec)}_{arr}_{'x'.join(map(str, size))}_sm{sm}"


ARCHS = [a for a in (750, 800, 860, 890, 900) if a in supported_archs()]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("spec", MATRIX, ids=_spec_id)
def test_compile_matrix_yields_a_cubin(spec, arch):
    desc = describe(*spec)
    if desc.sm > arch:
        pytest.skip(f"SM({desc.sm}) algorithm needs arch >= {desc.sm}")
    compiled = desc.compile(arch=arch)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert compiled.kernel_name.encode() in compiled.cubin
    # The batched kernel holds one (padded) block GEMM: one stage, a block per item; the FMA
    # path may keep C in registers.
    kplan = kernel_plan(desc.plan)
    assert kplan.pipeline_stages == 1
    parts = shared_memory_parts_of(desc.operator_map)
    if kplan.c_in_registers:
        assert not kplan.instruction.is_mma and kplan.a.layout == kplan.c.layout
    assert kplan.shared_memory_size >= parts["a"] + parts["b"] + (0 if kplan.c_in_registers else parts["c"])
    assert compiled.arch == arch and compiled.shared_memory_size == kplan.shared_memory_size
    assert compiled.block_dim == tuple(desc.block_dim)


@pytest.mark.parametrize("size, arrangement, expected", [
    ((64, 64, 64), "rrr", True),
    ((64, 64, 64), "crc", True),
    ((64, 64, 64), "rrc", False),  # micro-tiles run along n, column-major C along m
    ((32, 32, 32), "rrr", True),  # one stage: no next item for cp.async to fetch C of
    ((32, 32, 32), "rcc", False),
])
def test_batched_fma_kernel_keeps_c_in_registers_where_its_accesses_coalesce(size, arrangement, expected):
    layouts = {"r": "row_major", "c": "col_major"}
    desc = Size(*size) + Precision("float32") + Arrangement(*(layouts[x] for x in arrangement)) + SM(900) + Block()
    kplan = kernel_plan(desc.plan)
    assert kplan.c_in_registers == expected
    assert (kplan.c.smem_bytes == 0) == (expected and not kplan.c_staged_16_bytes)  # a staged C keeps its tile
    assert ("C read into and written from registers" in desc.explain(width=0)) == expected
    source = desc.source
    assert ("execute_global_c(alpha" in source) == expected and ("store_c(sc" in source) != expected


STAGED_16_BYTES = [  # size, precision, SM, data alignment, staged (C in registers in each case)
    ((32, 32, 32), "float16", 900, 16, True),
    ((16, 16, 16), "float16", 900, 16, True),
    ((32, 32, 64), "bfloat16", 900, 16, True),
    ((32, 32, 32), "float16", 800, 16, False),  # stmatrix is SM 900's
    ((32, 32, 32), "float16", 900, 8, False),  # C's items not on 16-byte boundaries
    ((30, 30, 20), "float16", 900, 16, False),  # rows of 60 bytes: not whole 16-byte pieces
    ((32, 32, 32), "float64", 900, 16, False),  # pairs of doubles are 16 bytes already
]


@pytest.mark.parametrize("size,precision,sm,alignment,staged", STAGED_16_BYTES,
                         ids=[f"{p}-{'x'.join(map(str, s))}-sm{sm}-a{a}" for s, p, sm, a, _ in STAGED_16_BYTES])
def test_batched_kernel_moves_16_bit_c_16_bytes_a_lane(size, precision, sm, alignment, staged):
    """One-warp 16-bit C in registers on SM 900, 16-byte aligned in whole 16-byte pieces: the
    batched kernel reads and writes it 16 bytes a lane (st.global.v4 and ld.global.v4) through
    C's padded tile in shared memory (stmatrix, ldmatrix), not in 4-byte pairs."""
    desc = Size(*size) + Precision(precision) + Arrangement("row_major", "row_major", "row_major") + SM(sm) + Block()
    plan = with_alignment(desc.plan, (16, 16, alignment))
    kplan = kernel_plan(plan)
    assert kplan.c_in_registers and kplan.c_staged_16_bytes == staged
    assert (kplan.c.smem_bytes > 0) == staged
    if alignment == 16:  # explain() assumes 16-byte aligned arrays, as CuPy and PyTorch allocate them
        assert ("16 bytes a lane through its tile in shared memory" in desc.explain(width=0)) == staged
    if sm in supported_archs():
        from .test_accumulator_api import ptx_of
        ptx = ptx_of(kernel_source(plan), kplan.kernel_name, sm)
        assert ("stmatrix" in ptx) == staged
        if precision != "float64":  # 16-bit C: 16-byte stores where staged, 4-byte pairs otherwise
            assert bool(re.search(r"st\.global\.v4\.b32", ptx)) == staged
            assert bool(re.search(r"st\.global\.(b32|u32|v2\.[bu]16)\s", ptx)) != staged


@pytest.mark.parametrize("precision, size, sm, overrides, asynchronous", [
    ("float16", (32, 32, 32), 900, None, False),  # one stage on SM 900: plain loads
    ("float32", (64, 64, 64), 900, None, False),  # FMA
    ("float16", (24, 40, 56), 900, None, False),  # C staged in shared memory, copied in likewise
    ("float16", (64, 64, 64), 900, None, True),  # wgmma: no gain measured
    ("float32", (32, 32, 32), 900, PlanOverrides(pipeline_stages=2), True),  # the next item's copies run on
    ("float16", (32, 32, 32), 800, None, True),  # not measured below SM 900: cp.async kept
    ("complex", (32, 32, 32), 900, None, True),  # complex float32 lost with plain loads
])
def test_batched_kernel_copies_with_cp_async_only_where_copies_run_on(precision, size, sm, overrides, asynchronous):
    """With one item at a time, every copy into shared memory is waited for at once: on SM 900
    the batched kernel copies by ld.global and st.shared, which measured faster than cp.async."""
    desc = (Size(*size) + Precision("float32" if precision == "complex" else precision)
            + Arrangement("row_major", "row_major", "row_major") + SM(sm) + Block())
    if precision == "complex":
        desc = desc + Type("complex")
    plan = with_alignment(blasdx.pipeline.plan(desc, overrides), (16, 16, 16))
    kplan = kernel_plan(plan)
    assert kplan.use_cp_async == asynchronous
    assert desc.plan.use_cp_async  # the device API's load_a / load_b keep cp.async
    if sm in supported_archs():
        from .test_accumulator_api import ptx_of
        ptx = ptx_of(kernel_source(plan), kplan.kernel_name, sm)
        assert ("cp.async.cg.shared.global" in ptx) == asynchronous
        assert bool(re.search(r"st\.shared\.v4", ptx)) or asynchronous


@pytest.mark.parametrize("precision, size, ctype", [
    ("float16", (32, 32, 32), None), ("float16", (16, 16, 16), None), ("float32", (64, 64, 64), None),
    ("float64", (32, 32, 32), None), ("float32", (32, 32, 32), "complex"),
])
def test_batched_kernel_reads_c_in_registers_before_it_waits_for_a_and_b(precision, size, ctype):
    """Where C stays in registers, the loads of a thread's first tile of C go out with A's and
    B's copies, before the barrier that waits for them: one wait covers all three."""
    desc = Size(*size) + Precision(precision) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    if ctype:
        desc = desc + Type(ctype)
    plan = with_alignment(desc.plan, (16, 16, 16))
    kplan = kernel_plan(plan)
    assert kplan.c_in_registers
    from .test_accumulator_api import ptx_of
    ptx = ptx_of(kernel_source(plan), kplan.kernel_name, 900)
    before_wait = ptx[ptx.index(".entry"):ptx.index("bar.sync")]
    copies = sum(x.outer * x.inner * x.element_size // x.vector_bytes for x in (kplan.a, kplan.b)) // kplan.threads
    loads = len(re.findall(r"\bld\.global\.", before_wait)) + len(re.findall(r"\bcp\.async\.c[ag]\.", before_wait))
    assert loads > copies, (loads, copies)


@pytest.mark.parametrize("size, precision, bias, overrides, blocks", [
    ((128, 128, 64), ("float16",) * 3, True, None, 2),  # wgmma, 256 threads, 67 KB: two blocks fit
    ((128, 128, 64), ("float16", "float16", "float32"), True, None, 2),
    ((128, 128, 64), ("float16",) * 3, False, None, 0),  # without a bias, within 128 registers anyway
    ((128, 128, 32), ("float32",) * 3, True, None, 0),  # FMA tiles spill under the cap
    ((64, 64, 64), ("float16", "float16", "float32"), True, None, 0),  # 128 threads: no cap asked
    ((128, 256, 64), ("float16", "float16", "float32"), True, None, 0),  # shared memory for one block
    ((64, 64, 64), ("float16", "float16", "float32"), False, PlanOverrides(min_blocks_per_sm=3), 3),
])
def test_batched_kernel_with_a_bias_asks_for_two_blocks_an_sm(size, precision, bias, overrides, blocks):
    """Launch bounds of two blocks an SM keep a 256-thread wgmma batched kernel with a bias within
    128 registers a thread, where its shared memory fits twice (the bias had taken it past them)."""
    desc = Size(*size) + Precision(*precision) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    plan = with_alignment(blasdx.pipeline.plan(desc, overrides), (16, 16, 16))
    fused = blasdx.pipeline.fusion(desc, None, "relu" if bias else None, None, None, None, None, bias)
    source = kernel_source(plan, fused)
    threads = kernel_plan(plan).threads
    assert (f"__launch_bounds__({threads}, {blocks})" if blocks else f"__launch_bounds__({threads})") in source
    if blocks == 2:  # no spill test: NVRTC 13.0 spilled under the cap for float16 C, and still ran 1.15-1.2x faster
        resources = blasdx.pipeline.compile_for_arch(plan, 900, fused).resources
        assert resources is not None and resources.registers <= 128, resources


TENSOR_C_PLACEMENT = [  # size, precision, C layout, threads (None: suggested), C in registers
    ((32, 32, 32), "float64", "row_major", None, True),  # 16-byte pairs
    ((32, 32, 32), "float64", "col_major", None, False),  # pairs run along rows only
    ((32, 32, 32), "float16", "row_major", None, True),  # one warp tile, 64-byte rows
    ((32, 32, 32), "float16", "row_major", 128, False),  # C split among 4 warps
    ((64, 64, 64), "float16", "row_major", None, False),  # 128-byte rows
    ((32, 32, 32), "float32", "row_major", None, True),  # FMA: micro-tiles along row-major C
    ((64, 64, 64), "tfloat32", "row_major", None, False),  # float32 C stays staged
]


@pytest.mark.parametrize("size,precision,c_layout,threads,expected", TENSOR_C_PLACEMENT,
                         ids=[f"{p}-{s[0]}-{c[0]}-{t or 'suggested'}" for s, p, c, t, _ in TENSOR_C_PLACEMENT])
def test_batched_kernel_places_c_by_the_measured_rule(size, precision, c_layout, threads, expected):
    """With 16-byte aligned data (what execute() sees for CuPy arrays): row-major 8-byte C
    and one-warp 16-bit C with rows of at most 64 bytes go to registers on tensor cores."""
    c_precision = "float32" if precision == "tfloat32" else precision
    desc = (Size(*size) + Precision(precision, precision, c_precision) + Arrangement("row_major", "col_major", c_layout)
            + SM(900) + Block())
    if threads:
        desc = desc + BlockDim(threads)
    kplan = kernel_plan(with_alignment(desc.plan, (16, 16, 16)))
    assert kplan.c_in_registers == expected
    assert (kplan.c.smem_bytes == 0) == (expected and not kplan.c_staged_16_bytes)  # a staged C keeps its tile
    if expected and kplan.instruction.is_mma:
        source = kernel_source(with_alignment(desc.plan, (16, 16, 16)))
        assert "execute_global_c(alpha" in source and "load_c(" not in source.split("extern \"C\"")[-1]
    if precision == "float16" and expected:  # a wider C row stays staged
        wide = desc + LeadingDimension(*desc.leading_dimension[:2], 64)
        assert not kernel_plan(with_alignment(wide.plan, (16, 16, 16))).c_in_registers


def test_the_archs_design_names_are_covered_by_the_installed_nvrtc():
    assert {750, 800, 860, 890, 900} <= set(supported_archs())


def _check_golden(text: str, path: Path) -> None:
    """``text`` must equal the golden file; BLASDX_REGEN_GOLDEN=1 rewrites it on purpose."""
    if os.environ.get("BLASDX_REGEN_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}; run with BLASDX_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} changed; review the diff and regenerate on purpose"


@pytest.mark.parametrize("spec", MATRIX, ids=_spec_id)
def test_golden_render(spec):
    """The generated part of each batched kernel (its block GEMM namespace, hooks and entry
    point) is pinned; the shared helpers before it are pinned once, below."""
    source, common = describe(*spec).source, render_common()
    assert source.startswith(common + "\n")
    _check_golden(source[len(common) + 1:], GOLDEN_DIR / f"{_spec_id(spec)}.cu")


def test_golden_common_header():
    _check_golden(render_common(), GOLDEN_DIR / "common.cuh")


def test_source_is_identical_in_two_processes():
    code = ("import blasdx as b; d = b.Size(30, 31, 33) + b.Precision('float16', 'float16', 'float32') + "
            "b.SM(900) + b.Block(); import hashlib; print(hashlib.sha256(d.source.encode()).hexdigest(), "
            "d.plan.kernel_name)")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(outs) == 1


def test_kernel_name_is_readable_and_deterministic():
    desc = describe(*MATRIX[0])
    assert desc.plan.kernel_name.startswith("blasdx_gemm_sm750_f16f16f32_64x64x64_rcr_t64_")
    assert desc.plan.kernel_name == describe(*MATRIX[0]).plan.kernel_name
    assert desc.replace(BlockDim(128)).plan.kernel_name != desc.plan.kernel_name


def test_device_source_defines_the_documented_names():
    desc = describe(*MATRIX[0])
    text = desc.device_source("gemm1")
    for name in ("namespace gemm1", "using a_t", "using c_t", "constexpr int m = 64", "lda =",
                 "block_dim_x", "shared_memory_size", "void load_a", "void store_c", "void execute("):
        assert name in text, name


def test_two_device_sources_compile_in_one_kernel():
    first = describe(*MATRIX[0])
    second = first.replace(Size(64, 32, 64), LeadingDimension(64, 64, 32))
    source = first.device_source("gemm1") + second.device_source("gemm2") + """
extern "C" __global__ void chained(const gemm1::a_t* a, const gemm1::b_t* b, float* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm1::a_t*>(smem + gemm1::a_offset);
  auto* sb = reinterpret_cast<gemm1::b_t*>(smem + gemm1::b_offset);
  auto* sc = reinterpret_cast<gemm1::c_t*>(smem + gemm1::c_offset);
  gemm1::load_a(a, sa); gemm1::load_b(b, sb); gemm1::copy_wait();
  gemm1::execute(1.0f, sa, sb, 0.0f, sc);
  gemm1::store_c(sc, out);
}
"""
    entry = compile_source(source, 900, name="chained")
    assert entry.cubin[:4] == b"\x7fELF"


def test_compile_error_carries_log_options_and_numbered_source():
    with pytest.raises(CompileError) as info:
        compile_source('extern "C" __global__ void broken() { this is not cuda; }', 900, name="broken")
    err = info.value
    assert "error" in err.log and err.kernel_name == "broken"
    assert "-arch=sm_90a" in err.options  # SM 900 compiles for sm_90a, where wgmma exists
    assert "1 | extern" in err.numbered_source()
    assert "Details:" in str(err)


@pytest.mark.compile
def test_a_ptxas_failure_is_named_in_the_error_message():
    """ptxas's "fatal" lines (not NVRTC's "error:" ones) were left out of the message, which then
    listed no reason: here 128 threads asked to fit 16 blocks an SM, 32 registers each, too few
    for a wgmma's accumulators."""
    g = Size(64, 64, 64) + Precision("float16") + Arrangement(*("row_major",) * 3) + SM(900) + Block()
    plan = blasdx.pipeline.plan(g, blasdx.PlanOverrides(min_blocks_per_sm=16))
    with pytest.raises(CompileError) as info:
        blasdx.pipeline.compile_for_arch(blasdx.pipeline.launched_plan(plan), 900)
    assert "ptxas fatal" in str(info.value) and "Insufficient registers" in str(info.value)


def test_show_config_reports_nvrtc_headers_and_cache(capsys):
    text = blasdx.show_config()
    assert "NVRTC" in text and "headers" in text and "cache:" in text
    assert text in capsys.readouterr().out


def test_batched_kernel_pads_shared_memory_but_keeps_global_layout():
    desc = describe(("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 800)
    plan, kplan = desc.plan, kernel_plan(desc.plan)
    assert [x.ld for x in (kplan.a, kplan.b, kplan.c)] == [64, 64, 64]  # global memory
    assert [x.smem_ld for x in (kplan.a, kplan.b, kplan.c)] == [72, 72, 68]  # 144, 144, 272 bytes
    assert [x.smem_ld for x in (plan.a, plan.b, plan.c)] == [64, 64, 64]  # device_source keeps it
    assert "lda = 64" in desc.device_source() and "lda = 72" in desc.source
    assert kplan.pipeline_stages == 1 and kernel_plan(kplan) == kplan  # a block per item: one stage
    f32 = kernel_plan(describe(("float32",) * 3, False, "rrr", (32, 32, 32), 900).plan)
    assert f32.pipeline_stages == 1 and f32.kernel_shared_memory_size == f32.shared_memory_size
    # Two stages where asked for: the blocks that loop over items copy the next one ahead
    two = kernel_plan(blasdx.pipeline.plan(describe(("float32",) * 3, False, "rrr", (32, 32, 32), 900),
                                           PlanOverrides(pipeline_stages=2)))
    assert two.pipeline_stages == 2 and two.kernel_shared_memory_size == 2 * two.shared_memory_size
    assert not two.c_in_registers  # C staged, so that cp.async fetches it one item ahead


def test_batched_kernel_keeps_the_layout_when_padding_would_not_fit():
    desc = describe(("float64", "float64", "float64"), False, "rrr", (128, 128, 48), 900)
    padded = sum(x.outer * (x.ld + 2) * 8 for x in (desc.plan.a, desc.plan.b, desc.plan.c))  # 16 more bytes a run
    assert desc.shared_memory_size <= 227 * 1024 < padded
    launched = kernel_plan(desc.plan)
    assert (launched.a, launched.b, launched.c) == (desc.plan.a, desc.plan.b, desc.plan.c)
    assert launched.shared_memory_size == desc.shared_memory_size


NVRTC_PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Function properties for other
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     40 bytes stack frame, 40 bytes spill stores, 128 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 40 bytes cumulative stack size
"""


# The same report as ptxas prints it run on its own (and as older NVRTCs may).
PLAIN_PTXAS_LOG = """ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    16 bytes stack frame, 16 bytes spill stores, 52 bytes spill loads
ptxas info    : Used 255 registers, 384 bytes cmem[0]
"""


def test_kernel_resources_are_read_for_the_named_kernel_from_ptxas_log():
    assert kernel_resources(PLAIN_PTXAS_LOG, "k") == KernelResources(255, 16, 16, 52)
    resources = kernel_resources(NVRTC_PTXAS_LOG, "k")
    assert resources == KernelResources(registers=128, stack_frame_bytes=40, spill_store_bytes=40, spill_load_bytes=128)
    assert resources.spills
    assert not kernel_resources(NVRTC_PTXAS_LOG, "other").spills
    assert kernel_resources(NVRTC_PTXAS_LOG, "missing") is None
    assert kernel_resources("", "k") is None


def test_compiled_kernels_report_their_registers_and_spills():
    gemm = describe(("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 900)
    resources = gemm.compile(arch=900).resources
    assert resources is not None and 32 <= resources.registers <= 255
    user = blasdx.compile_kernel(gemm.device_source("gemm") + 'extern "C" __global__ void k(float* x) { x[0] = 1; }',
                                 "k", sm=900)
    assert user.resources is not None and user.resources.registers >= 1 and not user.resources.spills


@pytest.mark.parametrize("desc", [
    Size(4096, 4096, 4096) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
    + SM(900) + Grid(),
    Size(4096, 4096, 4096) + Precision("float32") + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid(),
    describe(("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900),
    describe(("float16", "float16", "float16"), False, "rrr", (128, 128, 64), 900),
    describe(("float16", "float16", "float32"), False, "rrr", (128, 128, 64), 900),  # 128 registers at most
    describe(("float64", "float64", "float64"), False, "rrr", (32, 32, 32), 900),
], ids=lambda d: repr(d).replace(" ", ""))
@pytest.mark.parametrize("fused", [False, True], ids=["plain", "gelu+bias"])
def test_the_measured_kernels_do_not_spill(desc, fused):
    """The kernels of the issues' speed targets (Grid() float16 -> float32 and float32 4096^3, the
    batched block GEMMs), on 16-byte aligned arrays, keep every value in registers: a template
    change that makes them spill shows here before any GPU run."""
    plan = grid_with_alignment(desc.plan, (16,) * 3) if desc.is_grid else with_alignment(desc.plan, (16,) * 3)
    fusion = blasdx.pipeline.fusion(desc, None, "gelu" if fused else None, None, None, None, None, fused)
    resources = blasdx.pipeline.compile_for_arch(plan, 900, fusion).resources
    assert resources is not None and not resources.spills, resources


# The kernels execute() launches on 16-byte aligned arrays (CuPy's and PyTorch's): a batched
# kernel with a fused epilogue, a cp.async grid kernel and a TMA grid kernel.
LAUNCHED_GOLDENS = {
    "launched_batched_f16f16f32_rcr_64x64x64_sm900_bias_relu": (
        Size(64, 64, 64) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
        + SM(900) + Block(), "relu"),
    "launched_grid_cp_async_f32_rrr_1000x1000x1000_sm800": (
        Size(1000, 1000, 1000) + Precision("float32") + Arrangement("row_major", "row_major", "row_major")
        + SM(800) + Grid(), None),
    "launched_grid_tma_bf16f16f32_rcr_4096x4096x4096_sm900": (
        Size(4096, 4096, 4096) + Precision("bfloat16", "bfloat16", "float32")
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid(), None),
}


@pytest.mark.parametrize("name", sorted(LAUNCHED_GOLDENS))
def test_golden_launched_kernels(name):
    from blasdx.pipeline import fusion, kernel_source

    desc, epilogue = LAUNCHED_GOLDENS[name]
    plan = (grid_with_alignment if desc.is_grid else with_alignment)(desc.plan, (16, 16, 16))
    assert ("tma" in name) == (desc.is_grid and plan.tma)
    fused = fusion(desc, None, epilogue, None, None, None, None, epilogue is not None)
    source, common = kernel_source(plan, fused), render_common()
    assert source.startswith(common + "\n")
    _check_golden(source[len(common) + 1:], GOLDEN_DIR / f"{name}.cu")
