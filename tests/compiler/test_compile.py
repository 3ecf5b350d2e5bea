"""NVRTC compilation without a GPU (compile tier): the compile matrix for every SM the installed NVRTC
supports, two device sources in one kernel, CompileError, show_config(), and the registers and spills
ptxas reports (the measured kernels spill none)."""

from __future__ import annotations

import pytest

import blasdx
from blasdx import SM, Arrangement, Block, CompileError, Grid, LeadingDimension, Precision, Size
from blasdx.compiler import KernelResources, compile_source, kernel_resources, supported_archs
from blasdx.describe.traits import shared_memory_parts_of
from blasdx.plan import grid_with_alignment, kernel_plan, with_alignment

from ..support import MATRIX, describe, spec_id

pytestmark = pytest.mark.compile


ARCHS = [a for a in (750, 800, 860, 890, 900) if a in supported_archs()]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("spec", MATRIX, ids=spec_id)
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
    assert kplan.kernel_shared_memory_size == kplan.shared_memory_size
    parts = shared_memory_parts_of(desc.operator_map)
    if kplan.c_in_registers:
        assert not kplan.instruction.is_mma and kplan.a.layout == kplan.c.layout
    assert kplan.shared_memory_size >= parts["a"] + parts["b"] + (0 if kplan.c_in_registers else parts["c"])
    assert compiled.arch == arch and compiled.shared_memory_size == kplan.shared_memory_size
    assert compiled.block_dim == tuple(desc.block_dim)


def test_the_archs_design_names_are_covered_by_the_installed_nvrtc():
    assert {750, 800, 860, 890, 900} <= set(supported_archs())


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


def test_a_cubin_is_whole_to_the_end_of_its_elf_headers():
    """CuPy's getCUBIN drops a cubin's last byte; nvrtc_compile gives it back (a file cut short is not a cubin to
    cuobjdump, and loads only because a bytes object ends in a 0)."""
    import struct

    from blasdx.compiler.nvrtc import nvrtc_compile, options_for, whole_cubin

    code, _ = nvrtc_compile('extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.f; }',
                            options_for(ARCHS[-1]), "k")
    program_headers, section_headers = struct.unpack_from("<QQ", code, 0x20)
    program_size, programs, section_size, sections = struct.unpack_from("<HHHH", code, 0x36)
    assert len(code) == max(program_headers + programs * program_size, section_headers + sections * section_size)
    assert whole_cubin(code[:-1]) == code and whole_cubin(code) == code
    assert whole_cubin(b"not an ELF") == b"not an ELF"
