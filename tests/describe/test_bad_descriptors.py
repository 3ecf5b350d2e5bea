"""shared/TESTING.md's descriptor-time bad-input catalogue (entries 1-13): each input
raises the named error with a message that says what to fix. Unit tier, no GPU."""

from __future__ import annotations

import re

import numpy as np
import pydantic
import pytest

import blasdx
from blasdx import (
    SM,
    Alignment,
    ArgumentError,
    Arrangement,
    Block,
    BlockDim,
    CompositionError,
    DescriptorError,
    Grid,
    IncompleteDescriptorError,
    LeadingDimension,
    MaxAlignment,
    PlanOverrides,
    Precision,
    Size,
    TransposeMode,
    Type,
    UnsupportedError,
)


def _tm(a, b):
    with pytest.warns(DeprecationWarning):
        return TransposeMode(a, b)


CASES = [
    # 1. sizes
    ("size zero", lambda: Size(0, 8, 8), DescriptorError, r"Size.m: m must be >= 1, got 0"),
    ("size negative", lambda: Size(8, -1, 8), DescriptorError, r"Size.n: n must be >= 1, got -1"),
    ("size float", lambda: Size(8.0, 8, 8), DescriptorError, r"Size.m: m must be an int, got 8.0 of type float"),
    ("size bool", lambda: Size(8, 8, True), DescriptorError, r"Size.k: k must be an int, got True of type bool"),
    ("size too many args", lambda: Size(1, 2, 3, 4), DescriptorError, r"Size takes at most 3 arguments"),
    ("size unknown keyword", lambda: Size(m=1, n=2, q=3), DescriptorError, r"Size.q is not an argument of Size \(arguments: m, n, k\)"),
    # 2. precisions
    ("precision float128", lambda: Precision("float128"), DescriptorError, r"unknown precision 'float128'; use one of \["),
    ("precision bool dtype", lambda: Precision(bool), DescriptorError, r"unsupported dtype 'bool'"),
    ("precision complex64", lambda: Precision("complex64"), DescriptorError, r"Type\('complex'\)"),
    ("precision complex dtype", lambda: Precision(__import__("numpy").complex64), DescriptorError,
     r"'complex64' is complex; use Precision\('float32'\) with Type\('complex'\)"),
    ("precision object", lambda: Precision(object()), DescriptorError, r"precision must be a name or a NumPy dtype"),
    # 3. precision combinations
    ("int/float mix", lambda: Precision("int8", "int8", "float32") + SM(800), DescriptorError,
     r"mixes integer and floating-point precisions"),
    ("signed inputs, unsigned accumulator", lambda: Precision("int8", "int8", "uint32") + SM(800), DescriptorError,
     r"A or B is signed, so the accumulator C must be signed too; use 'int32' for C"),
    ("narrow accumulator", lambda: Precision("int32", "int32", "int8") + SM(800), DescriptorError,
     r"C has 8 bits but a int32 x int32 accumulator needs at least 32; use 'int32' for C"),
    ("int64 inputs need int64", lambda: Precision("int64", "int64", "int32") + SM(800), DescriptorError,
     r"needs at least 64; use 'int64'"),
    # 4. type
    ("type typo", lambda: Type("reall"), DescriptorError, r"Type.value: must be 'real' or 'complex', got 'reall'"),
    ("complex unsigned", lambda: Type("complex") + Precision("uint8", "uint8", "uint32"), DescriptorError,
     r"complex values cannot have unsigned precisions \(uint8, uint8, uint32\)"),
    # 5. arrangement
    ("arrangement hyphen", lambda: Arrangement("row-major"), DescriptorError, r"did you mean 'row_major'\?"),
    ("arrangement arity", lambda: Arrangement("row_major", "col_major", "row_major", "col_major"), DescriptorError,
     r"Arrangement takes at most 3 arguments"),
    ("arrangement with transpose mode", lambda: Arrangement("row_major") + _tm("N", "N"), DescriptorError,
     r"both set the memory order; keep only Arrangement"),
    ("transpose mode letter", lambda: TransposeMode("X", "N"), DescriptorError, r"must be 'N', 'T' or 'C'"),
    # 6. leading dimensions
    ("lda < m col-major", lambda: Size(16, 8, 8) + Arrangement("col_major") + LeadingDimension(15, 8, 16), DescriptorError,
     r"lda=15 is too small for col_major A \(16x8\): lda must be >= m = 16"),
    ("lda < k row-major", lambda: Size(16, 8, 12) + Arrangement("row_major") + LeadingDimension(11, 12, 16), DescriptorError,
     r"lda=11 is too small for row_major A \(16x12\): lda must be >= k = 12"),
    # The default arrangement is checked when the descriptor is used, not while composing.
    ("ldb < k col-major", lambda: (Size(8, 8, 12) + LeadingDimension(12, 11, 8)).leading_dimension, DescriptorError,
     r"ldb=11 is too small for col_major B \(12x8\): ldb must be >= k = 12"),
    ("ldb < n row-major", lambda: Size(8, 9, 8) + Arrangement("row_major", "row_major") + LeadingDimension(8, 8, 8),
     DescriptorError, r"ldb=8 is too small for row_major B \(8x9\): ldb must be >= n = 9"),
    ("ldc < m col-major", lambda: (Size(10, 8, 8) + LeadingDimension(8, 8, 9)).leading_dimension, DescriptorError,
     r"ldc=9 is too small for col_major C \(10x8\): ldc must be >= m = 10"),
    ("ldc < n row-major", lambda: Size(8, 10, 8) + Arrangement("row_major", "col_major", "row_major") + LeadingDimension(8, 8, 9),
     DescriptorError, r"ldc=9 is too small for row_major C \(8x10\): ldc must be >= n = 10"),
    ("ld zero", lambda: LeadingDimension(0, 8, 8), DescriptorError, r"lda must be >= 1, got 0"),
    ("ld negative", lambda: LeadingDimension(8, 8, -4), DescriptorError, r"ldc must be >= 1, got -4"),
    # 7. alignment
    ("alignment 3", lambda: Alignment(3, 16, 16), DescriptorError, r"must be a power of two in bytes"),
    ("alignment 32", lambda: Alignment(32, 16, 16), DescriptorError, r"must be <= 16 bytes, got 32"),
    ("alignment below element", lambda: (Alignment(2, 16, 16) + Precision("float32")).alignment, DescriptorError,
     r"Alignment a=2 bytes is not a multiple of the A element size \(4 bytes\); use 4 or more"),
    ("alignment below complex element", lambda: Alignment(8, 8, 8) + Precision("float64") + Type("complex"),
     DescriptorError, r"A element size \(16 bytes\)"),
    # 8. SM
    ("sm 86", lambda: SM(86), DescriptorError, r"did you mean SM\(860\)\?"),
    ("sm 500", lambda: SM(500), DescriptorError,  # NVRTC 12 still targets SM 500 (Maxwell), and says so; 13 does not
     rf"must be one of {re.escape(str(list(blasdx.arch.accepted_sms())))}, got 500"
     r"( \(the installed NVRTC targets it, but blasdx has no facts for it yet\))?$"),
    ("sm 700", lambda: SM(700), DescriptorError, r"got 700 \(Volta and Xavier: blasdx, like cuBLASDx 0.7, does not"),
    ("sm as a string", lambda: SM("sm_90"), DescriptorError,
     r"must be an int such as 900 \(sm_90\), got the string 'sm_90'; did you mean SM\(900\)\?"),
    ("sm as an arch-specific string", lambda: SM("sm_90a"), DescriptorError, r"did you mean SM\(900\)\?"),
    ("sm as a compute capability", lambda: SM(90), DescriptorError, r"got 90; did you mean SM\(900\)\?"),
    ("sm as a number in a string", lambda: SM("900"), DescriptorError, r"got the string '900'; did you mean SM\(900\)\?"),
    ("descriptor plus an array", lambda: (Size(8, 8) + SM(800)) + np.array([1, 2]), CompositionError,
     r"of type ndarray$"),
    ("sm as a numpy bool", lambda: SM(np.bool_(True)), DescriptorError, r"value must be an int, got np.True_"),
    ("size as a numpy float", lambda: Size(np.float64(64), 64, 64), DescriptorError, r"m must be an int, got"),
    ("arrangement column_major", lambda: Arrangement("column_major"), DescriptorError,
     r"must be 'row_major' or 'col_major', got 'column_major' \(did you mean 'col_major'\?\)"),
    ("arrangement Row-Major", lambda: Arrangement("Row-Major"), DescriptorError, r"did you mean 'row_major'\?"),
    ("precision None", lambda: Precision(None), DescriptorError,
     r"Precision.a: needs a precision name or dtype, got None; use one of \['bfloat16', 'binary', 'float16'"),
    ("precision unknown lists the aliases", lambda: Precision("FP17"), DescriptorError,
     r"unknown precision 'FP17'; use one of \[.*\] or an alias \(half=float16, fp16=float16, bf16=bfloat16"),
    ("plan overrides with an unknown field", lambda: PlanOverrides(bogus=3), DescriptorError,
     r"PlanOverrides takes the keyword arguments c_in_registers, .*; got bogus"),
    ("size model_copy bypass", lambda: Size(64, 64, 64).model_copy(update={"m": -1}), DescriptorError,
     r"Size.m: m must be >= 1, got -1"),
    ("size model_construct bypass", lambda: Size.model_construct(m=0, n=1, k=1), DescriptorError,
     r"Size.m: m must be >= 1, got 0"),
    ("device_source named a keyword", lambda: (Size(8, 8, 8) + SM(900) + Block()).device_source("namespace"),
     DescriptorError, r"device_source name must be a C\+\+ identifier that is not a keyword.*got 'namespace'"),
    ("device_source named a reserved identifier", lambda: (Size(8, 8, 8) + SM(900) + Block()).device_source("__g"),
     DescriptorError, r"not reserved .*got '__g'"),
    ("grid block dim of part of a warp", lambda: Size(1000, 1000, 1000) + SM(900) + Grid() + BlockDim(100),
     DescriptorError, r"BlockDim\(100, 1, 1\) has 100 threads \(3 warps and 4 threads\); a Grid\(\) block runs "
                      r"whole warps: use BlockDim\(96\) or BlockDim\(128\)"),
    ("explain of a grid without SM", lambda: (Size(64, 64, 64) + Precision("float16") + Grid()).explain(),
     IncompleteDescriptorError, r"explain\(\) needs the SM operator, which this descriptor lacks; add it, for "
                                r"example \+ SM\(900\)"),
    ("explain of a grid without Size", lambda: (Precision("float16") + SM(900) + Grid()).explain(),
     IncompleteDescriptorError, r"explain\(\) needs the Size operator"),
    ("a trait of a grid without SM", lambda: (Size(64, 64, 64) + Grid()).alignment, IncompleteDescriptorError,
     r"the block tile of a Grid\(\) descriptor needs the SM operator"),
    ("explain width not an int", lambda: (Size(8, 8, 8) + SM(900)).explain(width="wide"), ArgumentError,
     r"explain\(width=\.\.\.\) takes the columns to wrap at \(0: no wrapping\), got 'wide'"),
    ("sm 0", lambda: SM(0), DescriptorError, r"got 0"),
    # 9. block dim
    ("block dim 16", lambda: BlockDim(16), DescriptorError, r"has 16 threads; a block GEMM needs 32 <= x\*y\*z <= 1024"),
    ("block dim 1025", lambda: BlockDim(1025), DescriptorError, r"has 1025 threads"),
    ("block dim 0", lambda: BlockDim(0), DescriptorError, r"BlockDim.x: must be >= 1, got 0"),
    ("block dim 3-D too big", lambda: BlockDim(16, 16, 8), DescriptorError, r"has 2048 threads"),
    ("block dim without block", lambda: (Size(8, 8, 8) + BlockDim(64) + SM(900)).explain(), DescriptorError,
     r"add Block\(\) \(one block GEMM\) or Grid\(\)"),
    # 10. composition
    ("same operator twice", lambda: Size(8, 8, 8) + Size(4, 4, 4), DescriptorError,
     r"Size is already set to Size\(8, 8, 8\); cannot add Size\(4, 4, 4\)\. Use descriptor.replace"),
    ("same operator twice via descriptors", lambda: (Size(8, 8) + SM(800)) + (SM(900) + Block()), DescriptorError,
     r"SM is already set to SM\(800\)"),
    ("operator plus int", lambda: Size(8, 8, 8) + 3, CompositionError,
     r"a descriptor adds operators \(Size, Precision, .*, BlockDim\) and descriptors only, got 3 of type int$"),
    ("int plus operator", lambda: 3 + Size(8, 8, 8), CompositionError, r"got 3 of type int$"),
    ("descriptor plus int", lambda: (Size(8, 8) + SM(800)) + 5, CompositionError, r"got 5 of type int$"),
    ("descriptor plus string", lambda: (Size(8, 8) + SM(800)) + "Block", CompositionError,
     r"got 'Block' of type str; did you mean Block\(\)\?"),
    ("sum with a start that is not 0", lambda: sum([Size(8, 8, 8), SM(900)], 1), CompositionError,
     r"got 1 of type int$"),
    ("operator class added", lambda: Size(8, 8, 8) + SM(900) + Block, DescriptorError,
     r"cannot add the class Block: add an instance, Block\(\)"),
    ("operator class first", lambda: Block + Size(8, 8, 8), DescriptorError, r"add an instance, Block\(\)"),
    ("operator called", lambda: MaxAlignment(), DescriptorError,
     r"Alignment\(16, 16, 16\) is an operator already, not a class; use it as it is"),
    ("operator field assigned", lambda: setattr(Size(8, 8, 8), "m", 4), DescriptorError,
     r"operators are immutable: cannot set Size.m"),
    ("replace with an int", lambda: (Size(8, 8, 8) + SM(900)).replace(3), DescriptorError,
     r"replace\(\) takes operators such as SM\(900\).*got 3"),
    ("replace with a class", lambda: (Size(8, 8, 8) + SM(900)).replace(SM), DescriptorError,
     r"add an instance, SM\(\.\.\.\)"),
    ("arch as sm string", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch="sm_90"), UnsupportedError,
     r"arch must be an SM number such as 800 or 900 \(an int\), got 'sm_90' \(did you mean arch=900\?\)"),
    ("arch as string", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch="900"), UnsupportedError,
     r"got '900' \(did you mean arch=900\?\)"),
    ("arch as list", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch=[900]), UnsupportedError,
     r"got \[900\]"),
    ("arch as compute capability", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch=90), UnsupportedError,
     r"got 90 \(did you mean arch=900\?\)"),
    ("compile with a bias array", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch=900, bias=np.zeros(8)),
     ArgumentError, r"compile\(bias=\.\.\.\) says which bias the kernel adds: False, True \(any shape\) or 'row' "
                    r"\(one row broadcast down C\), got ndarray; the bias array itself goes to execute\(bias=\.\.\.\)"),
    ("compile with a bias name", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch=900, bias="column"),
     ArgumentError, r"False, True \(any shape\) or 'row' \(one row broadcast down C\), got 'column'"),
    # 11. incomplete descriptors
    ("trait without size", lambda: (Precision("float16") + SM(900)).size, IncompleteDescriptorError,
     r"size needs the Size operator, which this descriptor lacks; add it, for example \+ Size\(64, 64, 64\)"),
    ("execute without block", lambda: (Size(8, 8, 8) + SM(900)).execute(None, None, None), IncompleteDescriptorError,
     r"execute needs an execution operator, which this descriptor lacks: Block\(\) runs one block GEMM of Size; "
     r"Grid\(\) runs a problem of any Size over many blocks.* Add one, for example \+ Block\(\), or \+ Grid\(\)"),
    ("compile without sm", lambda: (Size(8, 8, 8) + Block()).compile(arch=900), IncompleteDescriptorError,
     r"needs the SM operator"),
    # 12. shared memory
    # Shared memory depends on defaults (type, arrangement, leading dimensions): checked when used.
    ("shared memory over SM 900", lambda: (Size(128, 128, 192) + Precision("float32") + SM(900) + Block()).plan,
     UnsupportedError,
     r"needs 262144 bytes of shared memory, over SM 900's limit of 232448 bytes per block.*A 98304 B"),
    ("shared memory over SM 750", lambda: (Size(64, 64, 64) + Precision("float64") + SM(750) + Block()).shared_memory_size,
     UnsupportedError,
     r"over SM 750's limit of 65536 bytes"),
    # 13. NVRTC arch
    ("arch the installed nvrtc lacks", lambda: (Size(8, 8, 8) + SM(750) + Block()).compile(arch=710), UnsupportedError,
     r"NVRTC \d+\.\d+ cannot compile for SM 710; it supports \["),
    ("arch older than the descriptor", lambda: (Size(8, 8, 8) + SM(900) + Block()).compile(arch=800), UnsupportedError,
     r"arch 800 is older than the descriptor's SM\(900\)"),
    ("device_source name", lambda: (Size(8, 8, 8) + SM(900) + Block()).device_source("not valid"), DescriptorError,
     r"must be a C\+\+ identifier"),
]


@pytest.mark.parametrize("build,error,pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_descriptor_input_raises_with_a_fix(build, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        build()
    assert not isinstance(info.value, pydantic.ValidationError)
    if issubclass(error, blasdx.BlasdxError):
        assert isinstance(info.value, ValueError)


def test_error_hierarchy_matches_design():
    from blasdx.errors import (
        ArgumentError,
        BlasdxError,
        CompileError,
        DescriptorError,
        DeviceError,
        IncompleteDescriptorError,
        UnsupportedError,
    )

    assert issubclass(DescriptorError, BlasdxError) and issubclass(DescriptorError, ValueError)
    assert issubclass(IncompleteDescriptorError, DescriptorError) and issubclass(UnsupportedError, DescriptorError)
    assert issubclass(ArgumentError, BlasdxError) and issubclass(ArgumentError, ValueError)
    assert issubclass(CompileError, RuntimeError) and issubclass(DeviceError, RuntimeError)


def test_an_sm_the_installed_nvrtc_cannot_target_is_refused_when_built(monkeypatch):
    """SM() asks NVRTC (blasdx.arch.nvrtc_targets, which blasdx.compiler sets) and names both
    versions; here an NVRTC 12.8 that stops at SM 900."""
    import blasdx.arch

    monkeypatch.setattr(blasdx.arch, "nvrtc_targets", lambda: ((12, 8), (750, 800, 860, 870, 890, 900)))
    with pytest.raises(DescriptorError, match=r"the installed NVRTC 12\.8 cannot compile for SM 1000; use one of "
                                              r"\[750, 800, 860, 870, 890, 900\], or install an NVRTC"):
        SM(1000)
    with pytest.raises(DescriptorError, match=r"must be one of \[750, 800, 860, 870, 890, 900\], got 500$"):
        SM(500)
    assert blasdx.arch.accepted_sms() == (750, 800, 860, 870, 890, 900)
    with pytest.raises(DescriptorError, match=r"SM 1010 is Thor's name before CUDA 13"):
        SM(1010)
    assert SM(900).value == 900
    monkeypatch.setattr(blasdx.arch, "nvrtc_targets", lambda: None)  # NVRTC not found: the compile checks
    assert SM(1210).value == 1210


def test_blackwell_sms_the_installed_nvrtc_targets_compile():
    from blasdx import Block, Precision, Size
    from blasdx.compiler import supported_archs

    for sm in (1000, 1200):
        if sm not in supported_archs():
            pytest.skip(f"this NVRTC does not target SM {sm}")
        desc = Size(32, 32, 32) + Precision("float16", "float16", "float32") + SM(sm) + Block()
        assert desc.compile(arch=sm).cubin


def test_every_sm_list_is_the_accepted_one(monkeypatch):
    """One source of truth: SM() accepts exactly arch.accepted_sms() (the supported SMs the installed
    NVRTC targets), its refusals list them, and show_config() prints the same list."""
    import blasdx.arch

    monkeypatch.setattr(blasdx.arch, "nvrtc_targets", lambda: ((13, 5), (750, 800, 880, 900, 1000, 1070, 1100)))
    assert blasdx.arch.accepted_sms() == (750, 800, 900, 1000, 1100)
    for sm in (750, 800, 900, 1000, 1100):
        assert SM(sm).value == sm
    for sm, why in ((880, r"the installed NVRTC targets it, but blasdx has no facts for it yet"),
                    (1070, r"the installed NVRTC targets it"), (860, r"the installed NVRTC 13\.5 cannot compile"),
                    (1010, r"SM 1010 is Thor's name before CUDA 13")):
        with pytest.raises(DescriptorError, match=why) as caught:
            SM(sm)
        assert "[750, 800, 900, 1000, 1100]" in str(caught.value)
    monkeypatch.setattr(blasdx.arch, "nvrtc_targets", lambda: ((12, 9), (700, 720, 750, 800, 900, 1010)))
    with pytest.raises(DescriptorError, match=r"got 700 \(Volta and Xavier: blasdx, like cuBLASDx 0.7, does not "
                                              r"support them\)") as caught:
        SM(700)
    assert "CUDA 13" not in str(caught.value) and "[750, 800, 900, 1010]" in str(caught.value)


def test_show_config_lists_the_sms_that_sm_accepts():
    text = blasdx.show_config()
    if "NVRTC/headers: not usable" in text:
        pytest.skip("no NVRTC here")
    assert f"SM() accepts {list(blasdx.arch.accepted_sms())}" in text


def test_numpy_integers_from_shape_arithmetic_are_accepted():
    shape = np.zeros((64, 32)).shape
    desc = Size(np.int64(shape[0]), np.int32(shape[1]), np.uint16(16)) + SM(np.int32(900)) + BlockDim(np.int64(64))
    assert desc == Size(64, 32, 16) + SM(900) + BlockDim(64)
    assert type(desc.size.m) is int and type(desc.sm) is int


def test_precision_names_are_case_insensitive():
    assert Precision("FP16", "BF16", "Float32") == Precision("float16", "bfloat16", "float32")
    assert Precision("Float8_E4M3FN").a == "float8_e4m3"


def test_a_name_with_a_trailing_newline_is_not_an_identifier():
    from blasdx.codegen.identifiers import is_declarable, is_identifier

    assert not is_identifier("gemm\n") and not is_declarable("gemm\n") and is_declarable("gemm")
    with pytest.raises(DescriptorError, match="device_source name must be a C"):
        (Size(8, 8, 8) + SM(900) + Block()).device_source("gemm\n")


def test_sum_composes_operators_and_descriptors():
    ops = [Size(64, 64, 64), Precision("float16"), SM(900), Block()]
    assert sum(ops) == Size(64, 64, 64) + Precision("float16") + SM(900) + Block()
    assert sum([Size(64, 64, 64) + SM(900), Block()]) == Size(64, 64, 64) + SM(900) + Block()


def test_replace_swaps_block_and_grid():
    block = Size(64, 64, 64) + SM(900) + Block()
    assert block.replace(Grid()) == Size(64, 64, 64) + SM(900) + Grid()
    assert block.replace(Grid()).replace(Block()) == block
    with pytest.raises(DescriptorError, match=r"keep one of them \(descriptor.replace\(Grid\(\)\) puts it in "
                                              r"Block\(\)'s place\)"):
        block + Grid()


def test_a_templates_dir_that_holds_no_templates_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("BLASDX_TEMPLATES_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(blasdx.BlasdxError, match=r"BLASDX_TEMPLATES_DIR='.*nowhere' holds no blasdx templates "
                                                 r"\(no gemm.cuh.j2 there\); point it at a templates/ folder"):
        _ = (Size(8, 8, 8) + SM(900) + Block()).source
