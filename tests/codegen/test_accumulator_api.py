"""The register-accumulator device API (DESIGN.md "Accumulators in registers") without a GPU:
names, documentation and an NVRTC compile of a K-loop kernel that uses all of it, for every
path (mma.sync m16n8 with and without ldmatrix, packed 4-bit and 1-bit, f64, FMA, complex)
and the SMs the installed NVRTC targets."""

from __future__ import annotations

import re

import pytest

from blasdx import SM, Arrangement, Block, BlockDim, CompileError, Precision, Size, compile_kernel
from blasdx.compiler import supported_archs
from blasdx.pipeline import fusion, kernel_source
from blasdx.plan import with_alignment

from ..device_kernels import (
    CHAIN_CASES,
    CHAINED,
    EDGES,
    KERNELS,
    MULTIPLY_CHAINED,
    REPEATED_MULTIPLY,
    chain_descriptors,
    chain_id,
    chain_source,
    chained_descriptors,
)
from ..support import describe, global_loads_between_stores, ptx_of, spec_id

pytestmark = pytest.mark.compile


SPECS = [  # precisions, complex, arrangement, size, SM
    (("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 800),
    (("float16", "float16", "float16"), False, "ccc", (30, 31, 33), 750),
    (("bfloat16", "bfloat16", "bfloat16"), False, "rrr", (32, 32, 32), 800),
    (("tfloat32", "tfloat32", "float32"), False, "crc", (13, 5, 7), 800),
    (("float64", "float64", "float64"), False, "rrc", (16, 16, 16), 800),
    (("int8", "uint8", "int32"), False, "rcr", (64, 32, 64), 800),
    (("float8_e4m3", "float8_e5m2", "float32"), False, "rcr", (64, 64, 64), 890),
    (("int4", "uint4", "int32"), False, "rcr", (64, 32, 128), 750),
    (("binary", "binary", "int32"), False, "rcc", (32, 64, 256), 800),
    (("float32", "float32", "float32"), False, "rrr", (64, 64, 64), 800),
    (("float32", "float32", "float32"), False, "ccr", (30, 31, 33), 750),
    (("int16", "int16", "int64"), False, "rrc", (16, 16, 16), 750),
    (("float16", "float16", "float16"), True, "rcr", (16, 16, 16), 750),
    (("float64", "float64", "float64"), True, "crr", (8, 16, 32), 800),
]


ARCHS = [a for a in (750, 800, 900) if a in supported_archs()]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_the_accumulator_api_compiles(spec, arch):
    desc = describe(*spec)
    if desc.sm > arch:
        pytest.skip(f"SM({desc.sm}) algorithm needs arch >= {desc.sm}")
    kernel = compile_kernel(desc.device_source("gemm") + KERNELS, "k_loop", sm=arch)
    assert kernel.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("spec", [x for x in SPECS if x[0][0] not in ("int4", "binary")], ids=spec_id)
def test_edge_tiles_compile(spec, arch):
    """load_a/load_b with rows and cols and store_partial, on every path but the packed ones
    (whose k is counted in packed elements: no partial ones)."""
    desc = describe(*spec)
    if desc.sm > arch:
        pytest.skip(f"SM({desc.sm}) algorithm needs arch >= {desc.sm}")
    assert compile_kernel(desc.device_source("gemm") + EDGES, "edges", sm=arch).cubin[:4] == b"\x7fELF"


def test_edge_tiles_compile_on_wgmma():
    desc = describe(("bfloat16", "bfloat16", "float32"), False, "rrr", (128, 64, 32), 900)
    assert desc.instruction.is_wgmma
    assert compile_kernel(desc.device_source("gemm") + EDGES, "edges", sm=900).cubin[:4] == b"\x7fELF"


def test_packed_operands_have_no_partial_loads():
    text = describe(*SPECS[7]).device_source("gemm")  # int4
    assert "int rows, int cols)" in text  # C's
    assert "load_a(const a_t* global, long long ld, a_t* shared, int rows, int cols)" not in text


def test_two_descriptors_chain_through_the_accumulator_api():
    first, second = chained_descriptors()
    source = first.device_source("g1") + second.device_source("g2") + CHAINED
    assert compile_kernel(source, "chained", sm=900).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("case", CHAIN_CASES, ids=chain_id)
def test_multiply_chained_compiles_and_says_where_a_comes_from(case):
    """The static_assert in the kernel checks a_from_registers against the case's expectation."""
    if case[0] not in supported_archs():
        pytest.skip(f"needs an NVRTC for SM {case[0]}")
    assert compile_kernel(chain_source(case), "chain", sm=case[0]).cubin[:4] == b"\x7fELF"


def test_multiply_chained_needs_the_first_c_to_be_the_second_a():
    first, second = chain_descriptors(CHAIN_CASES[0])
    source = (first.device_source("g1") + second.replace(Size(64, 64, 32)).device_source("g2")
              + MULTIPLY_CHAINED.replace("EXPECT", "false"))
    with pytest.raises(CompileError, match="multiply_chained needs the other GEMM's C to be this m x k A"):
        compile_kernel(source, "chain", sm=900)


def test_multiply_chained_refuses_a_packed_a():
    first = Size(32, 64, 32) + Precision("int8", "int8", "int32") + Arrangement("row_major", "col_major", "row_major") \
        + SM(800) + Block()
    second = Size(32, 32, 64) + Precision("int4", "int4", "int32") + Arrangement("row_major", "col_major", "row_major") \
        + SM(800) + Block()
    source = first.device_source("g1") + second.device_source("g2") + MULTIPLY_CHAINED.replace("EXPECT", "false")
    with pytest.raises(CompileError, match="multiply_chained needs an A of whole elements, not packed int4"):
        compile_kernel(source, "chain", sm=800)


def test_loads_move_16_bytes_where_a_run_time_test_finds_the_pointers_aligned():
    """Without Alignment a descriptor promises element-aligned pointers only; its load_a/load_b
    test theirs at run time and copy 16 bytes at a time where they allow (arrays from CuPy and
    PyTorch, __align__(16) shared memory), element by element elsewhere. execute()'s own kernel
    streams through L2 (.cg) on its arrays' known alignment, with no test."""
    desc = Size(64, 64, 64) + Precision("float16", "float16", "float32") + Arrangement(
        "row_major", "col_major", "row_major") + SM(800) + Block()
    assert desc.alignment.a == 2 and desc.plan.a.vector_bytes == 2
    ptx = ptx_of(desc.device_source("gemm") + KERNELS, "k_loop", 800)
    # 16 bytes a copy, kept in L1 as plain loads are (blocks of an SM may read the same tile)
    sixteen_bytes = r"cp\.async\.{}\.shared\.global \[[^]]*\], \[[^]]*\], 16;"
    assert re.search(sixteen_bytes.format("ca"), ptx)
    assert "ld.global.u16" in ptx  # the element-wise copies stay for pointers off 16 bytes
    own_plan = with_alignment(desc.plan, (16, 16, 16))  # execute()'s, for arrays on 16-byte boundaries
    own = ptx_of(kernel_source(own_plan), own_plan.kernel_name, 800)
    assert not re.search(sixteen_bytes.format("ca"), own) and re.search(sixteen_bytes.format("cg"), own)


def test_device_source_documents_who_owns_what():
    text = describe(*SPECS[0]).device_source("gemm")
    for name in ("struct accumulator", "make_accumulator()", "void multiply(", "void multiply_chained(",
                 "constexpr bool a_from_registers", "void load(", "void store(",
                 "int row(int i)", "int col(int i)", "bool in_bounds(int i)", "static constexpr int size",
                 "rows g = lane / 4", "load_a(const a_t* global, long long ld, a_t* shared)"):
        assert name in text, name
    fma = describe(*SPECS[9]).device_source("gemm")
    assert "thread t of the first 128 takes micro-tiles t, t + 128" in fma


@pytest.mark.parametrize("spec", [
    (("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900),  # wgmma: A and B swizzled, 1024-byte parts
    (("float16", "float16", "float16"), False, "ccc", (30, 31, 33), 750),
    (("float64", "float64", "float64"), True, "crr", (8, 16, 32), 800),
], ids=spec_id)
def test_device_source_says_the_shared_memory_of_a_and_b_alone(spec):
    """gemm::shared_memory_size_ab (A and B, where C stays in registers) is the descriptor's
    shared_memory_size_ab, less than shared_memory_size by C's part, and C starts there."""
    desc = describe(*spec)
    assert desc.shared_memory_size_ab < desc.shared_memory_size
    check = (f"static_assert(gemm::shared_memory_size_ab == {desc.shared_memory_size_ab}, \"A and B\");\n"
             f"static_assert(gemm::shared_memory_size == {desc.shared_memory_size}, \"A, B and C\");\n"
             "static_assert(gemm::c_offset == gemm::shared_memory_size_ab, \"C after A and B\");\n"
             'extern "C" __global__ void nothing() {}\n')
    compile_kernel(desc.device_source("gemm") + check, "nothing", sm=desc.sm)


def forward_branches_in_multiply_loop(ptx: str) -> int:
    """Forward branches (an if, not an inner loop's back edge) inside the loop of ``ptx`` that
    holds the most mma or fma instructions (the shortest such loop, if several)."""
    lines = ptx.splitlines()
    labels = {line.strip()[:-1]: i for i, line in enumerate(lines) if re.fullmatch(r"\$L__BB\w+:", line.strip())}
    targets = [(i, re.search(r"\bbra(?:\.uni)?\s+(\$L__BB\w+);", line)) for i, line in enumerate(lines)]
    branches = [(i, labels[t.group(1)]) for i, t in targets if t]
    loops = [(start, end) for end, start in branches if start < end]

    def multiplies(loop):
        return sum(1 for line in lines[loop[0]:loop[1]] if re.search(r"\b(mma|fma)\.", line))

    start, end = min(loops, key=lambda loop: (-multiplies(loop), loop[1] - loop[0]))
    assert multiplies((start, end)), "no loop that multiplies"
    return sum(1 for at, to in branches if start < at < end and to > at)


@pytest.mark.parametrize("spec", [
    (("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900),
    (("float16", "float16", "float32"), False, "rcr", (64, 32, 32), 800),
    (("float64", "float64", "float64"), False, "rrr", (16, 16, 16), 900),
    (("int8", "int8", "int32"), False, "rcr", (64, 64, 64), 800),
    (("tfloat32", "tfloat32", "float32"), False, "rcr", (32, 64, 32), 800),
], ids=spec_id)
def test_multiply_puts_no_branch_in_a_callers_loop(spec):
    """Where every thread of block_dim works on mma.sync tiles, multiply does not branch around
    the threads past them (they multiply a worker's tiles into values that are not part of C): with no branch in
    the loop, ptxas hoists the loads of A and B that a loop of repeated multiplies shares (the
    anchor harness's 32^3 float16 kernel: 8 ldmatrix a repeat before, 24 per 16 repeats after,
    SASS). A descriptor with threads past its workers keeps the branch."""
    desc = describe(*spec)
    assert forward_branches_in_multiply_loop(ptx_of(desc.device_source("gemm") + REPEATED_MULTIPLY, "repeated", desc.sm)) == 0
    idle = describe(("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900) + BlockDim(48)
    assert forward_branches_in_multiply_loop(ptx_of(idle.device_source("gemm") + REPEATED_MULTIPLY, "repeated", idle.sm)) == 1


@pytest.mark.parametrize("spec, quad_store", [
    ((("float16", "float16", "float16"), False, "rrr", (64, 64, 64), 900), r"st\.global\.v4\.[bu]16"),  # wgmma
    ((("bfloat16", "bfloat16", "bfloat16"), False, "crr", (128, 64, 32), 900), r"st\.global\.v4\.[bu]16"),
    ((("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900), r"st\.global\.v4\.[bfu]32"),
    ((("int8", "int8", "int32"), False, "rcr", (64, 64, 64), 900), r"st\.global\.v4\.[bsu]32"),
    ((("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900), None),  # mma.sync
    ((("float64", "float64", "float64"), False, "rrr", (32, 32, 32), 900), None),
], ids=lambda x: x if isinstance(x, str) or x is None else spec_id(x))
def test_store_writes_c_of_wgmma_tiles_in_quads(spec, quad_store):
    """store() of a wgmma tile's 16- or 32-bit row-major C to global memory: lanes t and t ^ 1
    trade a pair (one shuffle of a 32- or 64-bit word, in registers: no local memory) and each
    writes four neighbours in one store, so that 16-bit stores fill whole 32-byte sectors (pairs
    filled half of one each) and 32-bit C goes out in half the instructions. mma.sync tiles keep
    pairs: there quads measured slower."""
    desc = describe(*spec)
    ptx = ptx_of(desc.device_source("gemm") + REPEATED_MULTIPLY, "repeated", desc.sm)
    assert bool(quad_store and re.search(quad_store, ptx)) == (quad_store is not None)
    assert ("shfl.sync.bfly" in ptx) == (quad_store is not None)
    assert ".local" not in ptx


UPDATE_C = r"""
extern "C" __global__ void update(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long ldc, gemm::scalar_t beta) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::copy_wait();
  auto acc = gemm::make_accumulator();
  gemm::multiply(sa, sb, acc);
  gemm::store(acc, c, ldc, gemm::scalar_t(1), beta);
}
"""


@pytest.mark.parametrize("spec, group_loads", [
    ((("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900), 4),  # wgmma quads: 2 tiles x 2 pairs
    ((("float16", "float16", "float16"), False, "rrr", (64, 64, 64), 900), 8),  # wgmma quads: 4 tiles x 2 pairs
    ((("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900), 8),  # mma.sync pairs
    ((("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 800), 4),
    ((("float64", "float64", "float64"), False, "rrr", (32, 32, 32), 900), 2),  # 16-byte pairs: one tile
    ((("float16", "float16", "float16"), False, "rcc", (32, 32, 32), 900), 16),  # column-major C: element by element
], ids=lambda x: str(x) if isinstance(x, int) else spec_id(x))
def test_store_reads_c_a_group_ahead_of_its_writes(spec, group_loads):
    """store() to global memory with beta != 0 reads C a group of instruction tiles (32 bytes a
    lane, c_read_group) before writing any of them: in the PTX, every run of global loads
    between stores holds a whole group (each pair's read had waited for the write before it, the
    compiler unable to tell that they do not alias: runs of 1 or 2). Quads and pairs alike."""
    desc = describe(*spec)
    runs = global_loads_between_stores(ptx_of(desc.device_source("gemm") + UPDATE_C, "update", desc.sm))
    assert len(runs) >= 2 and min(runs) >= group_loads, runs


@pytest.mark.parametrize("spec, element_load", [
    ((("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900), r"ld\.shared\.u16"),
    ((("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900), r"ld\.shared\.u16"),  # wgmma's fallback
    ((("float16", "float16", "float32"), False, "ccc", (64, 32, 64), 800), r"ld\.shared\.u16"),
    ((("float32", "float32", "float32"), False, "rrr", (64, 64, 64), 900), r"ld\.shared\.f32"),
    # 8- and 32-bit operands with k contiguous (row-major A, column-major B) load by ldmatrix too
    ((("int8", "int8", "int32"), False, "rcr", (64, 64, 64), 800), r"ld\.shared\.[us]8"),
    ((("int8", "int8", "int32"), False, "rcr", (64, 64, 64), 900), r"ld\.shared\.[us]8"),  # wgmma's fallback
    ((("float8_e4m3", "float8_e4m3", "float32"), False, "rcr", (32, 32, 64), 900), r"ld\.shared\.[us]8"),
    ((("tfloat32", "tfloat32", "float32"), False, "rcr", (32, 64, 32), 800), r"ld\.shared\.f32"),
    ((("tfloat32", "tfloat32", "float32"), False, "rcr", (64, 64, 32), 900), r"ld\.shared\.f32"),  # wgmma's fallback
], ids=lambda x: x if isinstance(x, str) else spec_id(x))
def test_multiply_on_aligned_shared_memory_has_no_element_wise_fallback(spec, element_load):
    """A and B at constant offsets of an __align__(16) shared buffer: the alignment test of
    multiply's vector loads (ldmatrix, 16-byte FMA loads) folds at compile time, and the
    element-wise loads it guards are gone. Tested on generic addresses, it ran every call and
    kept them (the window's base is known only at run time)."""
    desc = describe(*spec)
    ptx = ptx_of(desc.device_source("gemm") + REPEATED_MULTIPLY, "repeated", desc.sm)
    assert re.search(r"ldmatrix|ld\.shared\.v4\.f32", ptx)
    assert not re.search(element_load, ptx)


def test_multiply_on_shared_memory_aligned_for_wgmma_has_no_mma_sync_fallback():
    """README's advice for wgmma descriptors: with the buffer declared __align__(1024) and A and B
    at a_offset / b_offset, where they lie is settled at compile time and the mma.sync fallback
    leaves the kernel (on __align__(16) it stays, for A or B off a 1024-byte boundary)."""
    desc = describe(("float16", "float16", "float32"), False, "rrr", (64, 64, 64), 900)
    assert desc.instruction.is_wgmma
    aligned_16 = ptx_of(desc.device_source("gemm") + REPEATED_MULTIPLY, "repeated")
    aligned_1024 = ptx_of(desc.device_source("gemm") + REPEATED_MULTIPLY.replace("__align__(16)", "__align__(1024)"),
                          "repeated")
    assert "wgmma.mma_async" in aligned_16 and "mma.sync" in aligned_16
    assert "wgmma.mma_async" in aligned_1024 and "mma.sync" not in aligned_1024


@pytest.mark.parametrize("spec, element_load", [
    ((("float16", "float16", "float16"), False, "rrr", (32, 32, 32), 900), r"ld\.shared\.u16"),
    ((("float32", "float32", "float32"), False, "rrr", (64, 64, 64), 900), r"ld\.shared\.f32"),
], ids=lambda x: x if isinstance(x, str) else spec_id(x))
def test_execute_kernels_on_aligned_arrays_have_no_element_wise_fallback(spec, element_load):
    """execute()'s batched kernel places A and B in its own __align__'d shared memory, so the same
    test folds there: its multiply keeps only the vector loads (32 element loads before)."""
    desc = describe(*spec)
    plan = with_alignment(desc.plan, (16,) * 3)
    source = kernel_source(plan, fusion(desc, None, None, None, None, None, None, False))
    ptx = ptx_of(source, plan.kernel_name, desc.sm)
    assert re.search(r"ldmatrix|ld\.shared\.v4\.f32", ptx)
    assert not re.search(element_load, ptx)


@pytest.mark.parametrize("spec, element_store", [
    ((("float32", "float32", "float32"), False, "rrr", (64, 64, 64), 900), r"st\.global\.f32"),  # FMA, 16-byte runs
    ((("float64", "float64", "float64"), False, "rrr", (64, 64, 64), 900), r"st\.global\.f64"),  # mma, pairs
    ((("float64", "float64", "float64"), False, "rrr", (32, 32, 32), 800), r"st\.global\.f64"),
], ids=lambda x: x if isinstance(x, str) else spec_id(x))
def test_execute_kernels_write_c_from_registers_16_bytes_at_a_time(spec, element_store):
    """The batched kernel writes C from registers in 16-byte pieces where the plan says so (an FMA
    micro-tile's runs of four floats, an mma tile's pairs of doubles): NVVM had split both stores
    into their elements (32 st.global.f32 a thread at 64^3 float32, 64 st.global.f64 at 64^3
    float64), which blasdx::store_global keeps whole."""
    desc = describe(*spec)
    plan = with_alignment(desc.plan, (16,) * 3)
    ptx = ptx_of(kernel_source(plan, fusion(desc, None, None, None, None, None, None, False)), plan.kernel_name, desc.sm)
    assert "st.global.v4.b32" in ptx
    assert not re.search(element_store, ptx)
