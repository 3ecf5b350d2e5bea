"""Operators, composition, defaults and traits (unit tier: pure Python)."""

from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest

import blasdx
from blasdx import (
    SM,
    Alignment,
    Arrangement,
    Block,
    BlockDim,
    Descriptor,
    Function,
    Grid,
    IncompleteDescriptorError,
    InstructionFamily,
    LeadingDimension,
    MaxAlignment,
    Precision,
    Size,
    TransposeMode,
    Type,
)
from blasdx.describe.operators import OPERATOR_KINDS, Execution, Operator

OPERATORS = [
    Size(64, 32, 16), Size(8, 16), Precision("float16", "float16", "float32"), Precision("int8", "int8", "int32"),
    Type("complex"), Function("MM"), Arrangement("col_major", "row_major", "row_major"),
    LeadingDimension(70, 40, 80), Alignment(16, 8, 4), SM(900), SM(750), Block(), BlockDim(16, 8, 2),
]


@pytest.mark.parametrize("op", OPERATORS, ids=repr)
def test_repr_evaluates_back_to_an_equal_hashable_operator(op):
    again = eval(repr(op), vars(blasdx))
    assert again == op and hash(again) == hash(op)


@pytest.mark.parametrize("op", [op for op in OPERATORS if type(op).model_fields], ids=repr)
def test_operators_are_immutable(op):
    field = next(iter(type(op).model_fields))
    before = getattr(op, field)
    with pytest.raises(blasdx.DescriptorError, match=f"operators are immutable: cannot set {type(op).__name__}.{field}"):
        setattr(op, field, 1)
    assert getattr(op, field) == before


def test_keyword_and_positional_arguments_agree():
    assert Size(m=4, n=5, k=6) == Size(4, 5, 6)
    assert Size(4, 5).k == 1
    assert Precision("half") == Precision("float16", "float16", "float16")
    assert Precision(np.float16, np.float32, np.float32) == Precision("float16", "float32", "float32")


def test_ml_dtypes_are_precisions():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert Precision(ml_dtypes.bfloat16).a == "bfloat16"
    assert Precision(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float32).b == "float8_e5m2"


def test_max_alignment_is_sixteen_bytes():
    assert MaxAlignment == Alignment(16, 16, 16)


def _mission_example():
    return Size(8, 16, 32) + Precision("float16", "float16", "float32") + SM(800) + Block()


def test_the_mission_example_is_complete_and_executable():
    desc = _mission_example()
    assert isinstance(desc, Descriptor) and desc.is_complete and desc.is_executable


def test_composition_order_does_not_matter():
    ops = [Size(64, 64, 64), Precision("float16"), Arrangement("row_major", "col_major", "row_major"), SM(900), Block()]
    descs = {repr(sum(perm[1:], perm[0])) for perm in itertools.permutations(ops)}
    assert len(descs) == 1
    first = sum(ops[1:], ops[0])
    assert first == sum(reversed(ops[:-1]), ops[-1]) and hash(first) == hash(sum(reversed(ops[:-1]), ops[-1]))


def test_descriptor_repr_evaluates_back():
    desc = _mission_example() + Arrangement("col_major", "col_major", "row_major") + LeadingDimension(8, 40, 16)
    assert eval(repr(desc), vars(blasdx)) == desc


def test_descriptor_plus_descriptor():
    assert (Size(8, 8, 8) + SM(800)) + (Precision("float64") + Block()) == Size(8, 8, 8) + SM(800) + Precision("float64") + Block()


def test_replace_swaps_one_operator_and_keeps_the_original():
    desc = _mission_example()
    newer = desc.replace(SM(900))
    assert newer.sm == 900 and desc.sm == 800
    assert newer.size == desc.size


def test_defaults_follow_cublasdx():
    desc = Size(8, 16) + SM(800)
    assert desc.size == (8, 16, 1)
    assert desc.precision == ("float32", "float32", "float32")
    assert desc.type == "real" and desc.function == "MM"
    assert desc.arrangement == ("row_major", "col_major", "col_major")
    # tight: row-major A (8x1) -> k, col-major B (1x16) -> k, col-major C (8x16) -> m
    assert desc.leading_dimension == (1, 1, 8)
    assert desc.alignment == (4, 4, 4)
    assert not desc.is_executable


def test_complex_elements_double_in_size_and_alignment():
    desc = Size(4, 4, 4) + Precision("float64") + Type("complex") + SM(800)
    assert desc.element_size == (16, 16, 16) and desc.alignment == (16, 16, 16)
    half = Size(4, 4, 4) + Precision("float16") + Type("complex") + SM(800)
    assert half.alignment == (4, 4, 4)


def test_leading_dimension_trait_follows_arrangement():
    desc = Size(30, 31, 33) + Arrangement("col_major", "row_major", "row_major") + SM(900)
    assert desc.leading_dimension == (30, 31, 31)
    assert (desc + LeadingDimension(32, 40, 64)).leading_dimension == (32, 40, 64)


def test_suggested_leading_dimension_pads_against_bank_conflicts():
    desc = Size(64, 64, 64) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900)
    # 64 halves = 128 bytes, 8 units of 16 bytes: grown to 9 units (72 halves)
    assert desc.suggested_leading_dimension == (72, 72, 72)
    # 32 halves = 64 bytes, 4 units: 5 units, so that 8 rows start in 8 different bank groups
    assert desc.replace(Size(32, 32, 32)).suggested_leading_dimension == (40, 40, 40)
    # float64 tensor cores read 32 bytes of a row per half warp: odd multiples of 32 bytes
    f64 = Size(32, 32, 32) + Precision("float64") + SM(900)
    assert f64.instruction.name == "mma_f64_m16n8k8"
    assert f64.suggested_leading_dimension == (36, 36, 36)  # 256 B -> 288 B (9 x 32)
    assert f64.replace(SM(750)).suggested_leading_dimension == (34, 34, 34)  # FMA: 16-byte units
    odd = Size(30, 31, 33) + Precision("float32") + SM(900)
    # row-major A: 33 -> 36 (144 B, 9 units); col-major B: 33 -> 36; col-major C: 30 -> 32 (8 units) -> 36
    assert odd.suggested_leading_dimension == (36, 36, 36)
    for ld, tight in zip(odd.suggested_leading_dimension, odd.leading_dimension):
        assert ld >= tight


def test_suggested_block_dim_formula():
    tc = Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(800) + Block()
    assert tc.suggested_block_dim == (64, 1, 1)  # 4096 outputs / 64 per thread (16-bit, ldmatrix)
    assert tc.block_dim == tc.suggested_block_dim and tc.max_threads_per_block == 64
    assert (tc.plan.tile_m, tc.plan.tile_n) == (64, 32)  # one 64x32 tile per warp
    assert (Size(64, 64, 64) + Precision("tfloat32", "tfloat32", "float32") + SM(900)).suggested_block_dim == (128, 1, 1)
    assert (Size(64, 64, 64) + Precision("int8", "int8", "int32") + SM(900)).suggested_block_dim == (128, 1, 1)
    assert (Size(128, 128, 64) + Precision("float16") + SM(800)).suggested_block_dim == (256, 1, 1)  # capped
    # wgmma (SM 900): a warpgroup per 64 x N tile (N the widest dividing n up to 256), at most two.
    assert (Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(900)).suggested_block_dim == (128, 1, 1)
    assert (Size(128, 128, 64) + Precision("float16") + SM(900)).suggested_block_dim == (256, 1, 1)
    assert (Size(64, 512, 64) + Precision("bfloat16", "bfloat16", "float32") + SM(900)).suggested_block_dim == (256, 1, 1)
    # 256 x 256: 128 floats a thread even at 512 threads, past their register share: mma.sync.
    assert (Size(256, 256, 64) + Precision("float16") + SM(900)).suggested_block_dim == (256, 1, 1)
    assert (Size(32, 64, 64) + Precision("float16") + SM(900)).suggested_block_dim == (32, 1, 1)  # m < 64: mma.sync
    forbid = Size(64, 64, 64) + Precision("float16") + SM(900) + InstructionFamily("mma")
    assert forbid.suggested_block_dim == (64, 1, 1)
    assert (Size(8, 8, 8) + SM(900)).suggested_block_dim == (32, 1, 1)  # at least a warp
    fma = Size(64, 64, 64) + Precision("float32") + SM(900)
    assert fma.suggested_block_dim == (128, 1, 1)  # 4096 / 32 per thread: 8x4 micro-tiles
    assert (fma + Block()).plan.tile_m == 8 and (fma + Block()).plan.group_m == 4
    assert (Size(32, 32, 32) + Precision("float32") + SM(900)).suggested_block_dim == (64, 1, 1)  # 16 each
    assert (Size(60, 64, 64) + Precision("float32") + SM(900)).suggested_block_dim == (256, 1, 1)  # m % 8: 4x4
    assert (Size(64, 64, 64) + Precision("float64") + SM(750)).suggested_block_dim == (256, 1, 1)
    # float32 A and B with a 16-bit C: the same 8x4 micro-tiles; a float64 C accumulates in double: 4x4.
    assert (Size(64, 64, 64) + Precision("float32", "float32", "float16") + SM(900)).suggested_block_dim == (128, 1, 1)
    assert (Size(64, 64, 64) + Precision("float32", "float32", "float64") + SM(900)).suggested_block_dim == (256, 1, 1)
    # With more threads than 8x4 micro-tiles would need, each thread takes a 4x4 one.
    assert (fma + Block() + BlockDim(256)).plan.tile_m == 4


def test_block_dim_operator_overrides_the_suggestion():
    desc = _mission_example() + BlockDim(16, 8)
    assert desc.block_dim == (16, 8, 1) and desc.max_threads_per_block == 128


def test_launch_traits_are_computed_once():
    """A user launch reads GEMM.block_dim and GEMM.shared_memory_size every call; planned afresh
    on each read they took about 20 us each on the CPU machine, and the GPU machine's launches
    that read them took 67-87 us of host time."""
    block = _mission_example() + LeadingDimension(72, 72, 72)
    grid = Size(4096, 4096, 4096) + Precision("float16", "float16", "float32") + SM(900) + blasdx.Grid()
    for desc, traits in ((block, ("block_dim", "suggested_block_dim", "shared_memory_size", "shared_memory_size_ab",
                                  "suggested_leading_dimension")),
                         (grid, ("block_dim", "shared_memory_size", "shared_memory_size_ab", "tile", "suggested_tile"))):
        for trait in traits:
            assert getattr(desc, trait) is getattr(desc, trait), trait


def test_shared_memory_size_formula():
    desc = Size(30, 31, 33) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major") + SM(900)
    # A 30 rows x ld 33 halves = 1980 B -> 1984; B 31 cols x ld 33 halves = 2046 -> 2048; C 30 x 31 floats = 3720 -> 3728
    assert desc.shared_memory_size == 1984 + 2048 + 3728
    assert desc.shared_memory_size_ab == 1984 + 2048  # A and B: C in the register accumulators
    explained = (desc + Block()).explain(width=0)
    assert "shared memory: 7760 bytes (A and B alone" in explained and ": 4032, shared_memory_size_ab)" in explained


def test_largest_fitting_size_passes_and_the_next_raises():
    base = Precision("float32") + SM(900) + Block()
    # A 128x160 + B 160x128 + C 128x128 floats: 229376 bytes fit in 227 KiB (232448)
    assert (Size(128, 128, 160) + base).shared_memory_size == (2 * 128 * 160 + 128 * 128) * 4 == 229376
    with pytest.raises(blasdx.UnsupportedError,
                       match=r"needs 262144 bytes of shared memory, over SM 900's limit of 232448 .*"
                             r"Details: A 98304 B, B 98304 B, C 65536 B"):
        _ = (Size(128, 128, 192) + Precision("float32") + SM(900) + Block()).shared_memory_size


@pytest.mark.parametrize("sm,limit_kib", [(750, 64), (800, 163), (860, 99), (870, 163), (890, 99), (900, 227), (1000, 227),
                                          (1030, 227), (1100, 227), (1200, 99), (1210, 99)])
def test_shared_memory_limit_per_sm(sm, limit_kib):
    if sm not in blasdx.compiler.supported_archs():
        pytest.skip(f"this NVRTC does not target SM {sm}")
    fits = Size(64, 64, 64) + Precision("float64") + SM(sm)
    need = fits.shared_memory_size  # 96 KiB
    if need <= limit_kib * 1024:
        assert (fits + Block()).is_executable
    else:
        with pytest.raises(blasdx.UnsupportedError, match=f"limit of {limit_kib * 1024} bytes"):
            _ = (fits + Block()).plan


@pytest.mark.parametrize("prec,sm,instr", [
    (("float16", "float16", "float32"), 750, "mma_f16"),
    (("float16", "float16", "float32"), 1000, "mma_f16"),
    (("float64", "float64", "float64"), 1200, "mma_f64_m16n8k8"),
    (("float8_e4m3", "float8_e4m3", "float32"), 1200, "mma_fp8"),
    (("float16", "float16", "float16"), 900, "mma_f16"),
    (("bfloat16", "bfloat16", "float32"), 750, "fma"),
    (("bfloat16", "bfloat16", "float32"), 800, "mma_bf16"),
    (("tfloat32", "tfloat32", "float32"), 800, "mma_tf32"),
    (("float64", "float64", "float64"), 800, "mma_f64"),
    (("float64", "float64", "float64"), 900, "mma_f64_m16n8k8"),
    (("float64", "float64", "float64"), 750, "fma"),
    (("int8", "int8", "int32"), 800, "mma_i8"),
    (("uint8", "int8", "int32"), 860, "mma_i8"),
    (("float8_e4m3", "float8_e5m2", "float32"), 890, "mma_fp8"),
    (("float8_e4m3", "float8_e5m2", "float32"), 800, "fma"),
    (("float32", "float32", "float32"), 900, "fma"),
    (("int16", "int16", "int32"), 900, "fma"),
])
def test_instruction_table(prec, sm, instr):
    desc = Size(32, 32, 32) + Precision(*prec) + SM(sm) + Block()
    assert desc.instruction.name == instr
    assert instr in desc.explain(width=0)


def test_complex_uses_fma_and_explain_says_why():
    desc = Size(16, 16, 16) + Precision("float16") + Type("complex") + SM(900) + Block()
    assert desc.instruction.name == "fma"
    assert "complex GEMMs use FMA" in desc.explain(width=0)


def test_explain_reports_tiling_threads_and_shared_memory():
    text = (_mission_example() + BlockDim(64)).explain(width=0)
    for part in ("compile() and .source build blasdx_gemm_sm800_f16f16f32_8x16x32", "instruction: mma_f16",
                 "warp tiling", "threads: block_dim (64, 1, 1) = 64 (suggested (32, 1, 1))", "shared memory:"):
        assert part in text, part


def _kernel_names(text: str) -> set[str]:
    return set(re.findall(r"\bblasdx_(?:gemm|grid)_\w+", text))


@pytest.mark.compile
@pytest.mark.parametrize("desc", [
    Size(64, 64, 64) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
    + SM(900) + Block(),
    Size(13, 5, 7) + Precision("float64") + SM(800) + Block() + Alignment(16, 16, 16),
    Size(4000, 3000, 1000) + Precision("float16") + SM(900) + Grid(),
    Size(1000, 1000, 100) + Precision("float32") + SM(800) + Grid(),
], ids=["block wgmma", "block aligned", "grid tma", "grid cp.async"])
def test_explain_names_only_kernels_that_compile_and_source_and_execute_use(desc):
    """Every kernel name explain() prints is compile()'s (and in .source) or the one execute()
    launches on 16-byte aligned arrays (compile() of the descriptor with Alignment(16, 16, 16))."""
    from blasdx.pipeline import compile_for_arch
    from blasdx.plan import grid_with_alignment, with_alignment

    text = desc.explain()
    names = _kernel_names(text)
    compiled = desc.compile(arch=desc.sm).kernel_name
    aligned_plan = (grid_with_alignment if desc.is_grid else with_alignment)(desc.plan, (16, 16, 16))
    launched = compile_for_arch(aligned_plan, desc.sm).kernel_name  # what execute() binds on aligned arrays
    assert compiled in names and compiled in desc.source
    assert names == {compiled, launched}, names


def test_explain_wraps_at_100_columns_and_lists_the_wgmma_conditions_one_a_line():
    desc = Size(128, 128, 64) + Precision("float16") + SM(900) + Block()
    for d in (desc, Size(4000, 3000, 1000) + Precision("float16") + SM(900) + Grid()):
        lines = d.explain().splitlines()
        assert max(len(line) for line in lines) <= 100 and len(lines) > 20
        assert d.explain(width=0).split() == d.explain().split()  # the same words, wrapped
        assert d.explain(width=60).split() == d.explain().split()
        assert max(len(line) for line in d.explain(width=0).splitlines()) > 100
    conditions = desc.explain().split("wgmma conditions:\n")[1].split("warpgroup tiling")[0]
    assert conditions.startswith("  SM 900, compiled for sm_90a") and conditions.count(": holds") == 7


@pytest.mark.parametrize("sm", [800, 1000, 1200])
def test_explain_off_hopper_says_nothing_of_wgmma(sm):
    desc = Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(sm) + Block()
    assert "wgmma" not in desc.explain()
    assert "wgmma" not in (desc.replace(Grid()).explain())


@pytest.mark.parametrize("desc, reason", [
    (Size(32, 32, 32) + Precision("float16") + SM(1000) + Block(),
     "(one item at a time per block: on SM 1000 plain loads stored to shared memory are taken to move the same "
     "bytes faster than cp.async, as measured on SM 900: blasdx.tuning)"),
    (Size(32, 32, 32) + Precision("float16") + SM(750) + Block(), "(SM 750 has no cp.async: it came with SM 800)"),
    (Size(13, 5, 7) + Precision("float16") + SM(800) + Block(),
     "(cp.async moves 4, 8 or 16 bytes: narrower copies are plain loads)"),
], ids=["sm1000 one stage", "sm750", "2-byte copies"])
def test_explain_says_why_execute_copies_without_cp_async(desc, reason):
    text = desc.explain(width=0)
    assert "(ld.global, st.shared)" in text and reason in text


def test_explain_gives_one_copy_width_per_matrix():
    """load_a()'s width on 16-byte aligned pointers is the one execute()'s kernel copies with."""
    text = (Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(800) + Block()).explain(width=0)
    assert "load_a() copies with cp.async 16 bytes at a time where both pointers are 16-byte aligned" in text
    assert "copies to shared memory: A 16 bytes at a time (cp.async), B 16 bytes at a time (cp.async)" in text


def test_explain_warns_of_a_block_dim_that_ends_in_part_of_a_warp():
    desc = Size(64, 64, 64) + Precision("float16") + SM(900) + Block()
    text = (desc + BlockDim(33)).explain(width=0)
    assert ("warning: 33 threads end in part of a warp (1 of its 32 lanes); the GPU runs whole warps, so "
            "BlockDim(64) costs the same warps and uses every lane") in text
    assert "warning" not in (desc + BlockDim(64)).explain(width=0)


def test_explain_on_a_descriptor_without_block_says_what_is_missing():
    assert "add Block()" in (Size(8, 8, 8) + SM(900)).explain(width=0)


@pytest.mark.parametrize("trait,needs", [
    ("size", "Size"), ("leading_dimension", "Size"), ("shared_memory_size", "Size"), ("sm", "SM"),
    ("block_dim", "Execution"), ("source", "Execution"), ("suggested_block_dim", "SM"),
])
def test_traits_name_the_missing_operator(trait, needs):
    desc = Precision("float16") + Arrangement("row_major")
    if needs != "Size":
        desc = desc + Size(8, 8, 8)
    if needs == "Execution":
        desc = desc + SM(900)
    words = "an execution operator.*Add one, for example [+] Block()" if needs == "Execution" else f"the {needs} operator.*add it"
    with pytest.raises(IncompleteDescriptorError, match=f"needs {words}"):
        getattr(desc, trait)


def test_execute_on_an_incomplete_descriptor_names_the_missing_operator():
    with pytest.raises(IncompleteDescriptorError, match="execute needs the SM operator"):
        (Size(8, 8, 8) + Block()).execute(None, None, None)
    with pytest.raises(IncompleteDescriptorError, match="execute needs an execution operator"):
        (Size(8, 8, 8) + SM(900)).execute(None, None, None)


def test_transpose_mode_warns_and_maps_to_arrangement():
    with pytest.warns(DeprecationWarning, match=r"use Arrangement\('row_major', 'col_major'\) and conjugate"):
        tm = TransposeMode("C", "N")
    desc = Size(4, 4, 4) + Type("complex") + tm + SM(900)
    assert desc.arrangement == ("row_major", "col_major", "col_major")
    assert desc.conjugate == (True, False)


def test_operator_kinds_list_every_operator_class():
    """OPERATOR_KINDS orders the operators in a repr and names them for the PyTorch op's key: every class."""
    assert set(OPERATOR_KINDS) == set(Operator.__subclasses__()) - {Execution} | set(Execution.__subclasses__())


def test_operator_kinds_cover_design():
    names = {cls.__name__ for cls in Operator.__subclasses__() + Execution.__subclasses__()}
    assert names >= {"Size", "Precision", "Type", "Function", "Arrangement", "TransposeMode", "LeadingDimension",
                     "Alignment", "SM", "Block", "Grid", "BlockDim"}


def test_no_warning_for_plain_operators():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _mission_example()


def test_with_alignment_widens_copies_but_never_narrows():
    from blasdx.plan import with_alignment

    plan = (Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(900) + Block()).plan
    assert (plan.a.vector_bytes, plan.c.vector_bytes) == (2, 4)
    wide = with_alignment(plan, (16, 16, 16))
    assert (wide.a.vector_bytes, wide.b.vector_bytes, wide.c.vector_bytes) == (16, 16, 16)
    assert wide.kernel_name != plan.kernel_name
    low = with_alignment(plan, (1, 1, 1))
    assert (low.a.vector_bytes, low.c.vector_bytes) == (2, 4)  # never narrower than the descriptor says
    # execute()'s kernel places A, B and C in its own 16-byte aligned shared memory; a user's kernel
    # (device_source) has pointers only as aligned as the descriptor's Alignment
    assert (plan.a.shared_alignment, low.a.shared_alignment, wide.a.shared_alignment) == (2, 16, 16)
    aligned = (Size(64, 64, 64) + Precision("float16", "float16", "float32") + SM(900) + Block() + MaxAlignment).plan
    assert with_alignment(aligned, (16, 16, 16)) is aligned
    odd = (Size(30, 31, 33) + Precision("float16") + SM(900) + Block()).plan
    assert with_alignment(odd, (16, 16, 16)).a.vector_bytes == 2  # 33 halves per row: no wider vector fits


@pytest.mark.parametrize("alias, canonical", [
    ("fp16", "float16"), ("half", "float16"), ("bf16", "bfloat16"), ("tf32", "tfloat32"), ("fp32", "float32"),
    ("fp64", "float64"), ("float8_e4m3fn", "float8_e4m3"),
])
def test_precision_aliases_are_canonicalised(alias, canonical):
    assert Precision(alias) == Precision(canonical)
    assert repr(Precision(alias, "fp32", None)).startswith(f"Precision({canonical!r}, 'float32'")


def test_dtypes_of_numpy_ml_dtypes_and_torch_name_precisions():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert Precision(np.float16, np.dtype("float32")) == Precision("float16", "float32")
    assert Precision(ml_dtypes.bfloat16).a == "bfloat16"
    assert Precision(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2).b == "float8_e5m2"
    # torch.dtype objects, seen through their module and name (PyTorch need not be installed)
    torch_dtype = type("dtype", (), {"__module__": "torch", "__str__": lambda self: self.name})
    for name, canonical in (("torch.float16", "float16"), ("torch.bfloat16", "bfloat16"),
                            ("torch.float8_e4m3fn", "float8_e4m3"), ("torch.int8", "int8")):
        dtype = torch_dtype()
        dtype.name = name
        assert Precision(dtype).a == canonical
    unknown = torch_dtype()
    unknown.name = "torch.complex32"
    with pytest.raises(blasdx.DescriptorError, match="unknown precision 'complex32'"):
        Precision(unknown)


def test_explain_describes_the_kernel_execute_launches():
    from blasdx.plan import kernel_plan, with_alignment

    desc = Size(32, 32, 32) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    text = desc.explain(width=0)
    launched = kernel_plan(with_alignment(desc.plan, (16, 16, 16)))
    assert f"launches {launched.kernel_name}:" in text
    assert "32 threads a block, one block per batch item" in text
    # One item at a time: each copy is waited for at once, so plain loads, not cp.async
    assert "A 16 bytes at a time (ld.global, st.shared), B 16 bytes at a time (ld.global, st.shared)" in text
    assert "C read into and written from registers by each thread" in text  # 16-byte pairs once aligned
    assert "warp tiling: 1 warp;" in text and "1 tile over 1 warp" in text

