"""int4, uint4 and binary without a GPU: descriptors and their errors, pack/unpack, plans,
and NVRTC compiles of the kernel and of the device function for SM 75, 80 and 90."""

from __future__ import annotations

import numpy as np
import pytest

import blasdx
from blasdx import (
    SM,
    ArgumentError,
    Arrangement,
    BitOp,
    Block,
    DescriptorError,
    LeadingDimension,
    Precision,
    Size,
    Type,
    UnsupportedError,
)
from blasdx.compiler import supported_archs

from ..device_kernels import DEVICE_KERNEL

RCR = Arrangement("row_major", "col_major", "row_major")


def describe(a="int4", b=None, c="int32", size=(64, 64, 128), sm=900, *extra):
    desc = Size(*size) + Precision(a, b or a, c) + RCR + SM(sm) + Block()
    for op in extra:
        desc = desc + op
    return desc


# --- descriptors ------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,instr", [("int4", "int4", "mma_i4"), ("uint4", "uint4", "mma_i4"),
                                       ("int4", "uint4", "mma_i4"), ("binary", "binary", "mma_b1")])
def test_packed_precisions_use_their_tensor_core_instruction(a, b, instr):
    desc = describe(a, b, size=(64, 64, 256))
    assert desc.instruction.name == instr
    assert desc.plan.mma_acc_type == "int"


def test_packed_storage_sizes_count_values():
    desc = describe("int4", size=(64, 48, 128))
    assert desc.leading_dimension == (128, 128, 48)  # in values
    assert desc.element_size == (1, 1, 4)  # one stored byte holds two values
    assert desc.shared_memory_size == 64 * 64 + 48 * 64 + 64 * 48 * 4
    plan = desc.plan
    assert (plan.a.rows, plan.a.cols, plan.a.ld, plan.a.pack) == (64, 64, 64, 2)
    assert (plan.b.rows, plan.b.cols, plan.b.ld, plan.b.pack) == (64, 48, 64, 2)
    binary = describe("binary", size=(32, 32, 512))
    assert binary.element_size == (4, 4, 4)
    assert (binary.plan.a.rows, binary.plan.a.cols, binary.plan.a.ld) == (32, 16, 16)
    assert binary.shared_memory_size == 32 * 64 * 2 + 32 * 32 * 4
    # A suggested leading dimension stays a whole number of stored elements.
    assert all(ld % 32 == 0 for ld in binary.suggested_leading_dimension[:2])


def test_bit_op_defaults_to_xor_and_reads_back():
    assert describe("binary").bit_op == "xor"
    assert describe("binary", "binary", "int32", (64, 64, 128), 900, BitOp("and")).bit_op == "and"
    assert describe("int4").bit_op is None
    assert repr(BitOp("and")) == "BitOp('and')"
    assert eval(repr(BitOp("and")), vars(blasdx)) == BitOp("and")


def test_explain_says_how_values_are_packed_and_counted():
    text = describe("binary", "binary", "int32", (64, 64, 256), 900, BitOp("and")).explain(width=0)
    assert "mma_b1" in text and "and.popc" in text
    assert "packed 32 per unsigned int along k" in text
    assert "packed 2 per unsigned char along k" in describe("uint4").explain(width=0)


BAD = [  # (descriptor builder, error type, message fragment)
    (lambda: describe("int4", size=(8, 8, 7)), DescriptorError, r"k=7 is not a multiple of 2.*pad k with zeros to 8"),
    (lambda: describe("binary", size=(8, 8, 48)), DescriptorError, r"k=48 is not a multiple of 32.*to 64"),
    (lambda: Size(8, 8, 64) + Precision("int4", "int4", "int32") + Arrangement("col_major", "col_major"),
     DescriptorError, r"needs row-major A and column-major B.*Arrangement\('row_major', 'col_major'"),
    (lambda: Size(8, 8, 64) + Precision("binary", "binary", "int32") + Arrangement("row_major", "row_major"),
     DescriptorError, r"row-major A and column-major B \(given row_major A, row_major B\)"),
    (lambda: describe("int4", c="int64"), DescriptorError, r"accumulate into int32.*'int32'\)"),
    (lambda: describe("int4", c="int4"), DescriptorError, r"C holds the accumulator"),
    (lambda: describe("int4", c="float32"), DescriptorError, r"accumulate into int32"),
    (lambda: describe("int4", "int8"), DescriptorError, r"must both be 4-bit \(int4, uint4\) or both binary"),
    (lambda: describe("binary", "uint4"), DescriptorError, r"no tensor-core instruction takes binary x uint4"),
    (lambda: describe("int4") + Type("complex"), DescriptorError, r"real only"),
    (lambda: describe("binary", sm=720), DescriptorError, r"must be one of \[750"),
    (lambda: describe("binary", "binary", "int32", (8, 8, 128), 750, BitOp("and")), UnsupportedError,
     r"BitOp\('and'\) needs SM 80.*BitOp\('xor'\)"),
    (lambda: describe("float16", c="float32") + BitOp("xor"), DescriptorError, r"binary GEMMs.*remove BitOp"),
    (lambda: describe("int4", size=(8, 8, 64)) + LeadingDimension(65, 64, 8), DescriptorError,
     r"lda=65 counts int4 values and must be a multiple of 2.*use lda=66"),
    (lambda: describe("binary", size=(8, 8, 64)) + LeadingDimension(64, 80, 8), DescriptorError,
     r"ldb=80 .*multiple of 32.*use ldb=96"),
    (lambda: BitOp("or"), DescriptorError, r"'xor' \(Hamming distance\) or 'and'"),
]


@pytest.mark.parametrize("build,error,match", BAD, ids=range(len(BAD)))
def test_bad_packed_descriptors_say_what_to_fix(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_unsigned_numpy_dtypes_still_mean_themselves():
    assert Precision(np.uint8) == Precision("uint8")
    assert Precision(np.uint32) == Precision("uint32")


def test_load_hooks_are_refused_on_packed_operands_and_store_hooks_compile():
    desc = describe("int4", size=(32, 32, 64))
    with pytest.raises(ArgumentError, match="no load hook can see their values"):
        desc.compile(arch=900, prologue="negate")
    with pytest.raises(ArgumentError, match="b_load"):
        desc.compile(arch=900, b_load="x + 1")
    assert desc.compile(arch=900, epilogue="relu", bias=True).cubin[:4] == b"\x7fELF"


# --- compiles -----------------------------------------------------------------------------

COMPILES = [  # (a, b, size, sm of the descriptor, bit op)
    ("int4", "int4", (64, 64, 128), 750, None),
    ("uint4", "int4", (33, 17, 30), 800, None),
    ("binary", "binary", (64, 64, 512), 750, "xor"),
    ("binary", "binary", (40, 24, 96), 800, "and"),
]


@pytest.mark.compile
@pytest.mark.parametrize("arch", [a for a in (750, 800, 900) if a in supported_archs()])
@pytest.mark.parametrize("a,b,size,sm,bit_op", COMPILES, ids=lambda v: str(v).replace(" ", ""))
def test_packed_kernels_compile(a, b, size, sm, bit_op, arch):
    if arch < sm:
        pytest.skip(f"SM({sm}) needs arch >= {sm}")
    extra = (BitOp(bit_op),) if bit_op else ()
    desc = describe(a, b, "int32", size, sm, *extra)
    compiled = desc.compile(arch=arch)
    assert compiled.cubin[:4] == b"\x7fELF"
    code = {"int4": "s4", "uint4": "u4", "binary": "b1"}
    assert f"_{code[a]}{code[b]}s32_" in compiled.kernel_name
    assert compiled.kernel_name.encode() in compiled.cubin
    source = desc.source
    if bit_op:
        assert f"b1.b1.s32.{bit_op}.popc" in source


@pytest.mark.compile
def test_the_device_function_compiles_in_a_user_kernel():

    desc = describe("binary", size=(64, 64, 256))
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + DEVICE_KERNEL, "hamming", sm=900)
    assert kernel.cubin[:4] == b"\x7fELF"


# --- pack / unpack ------------------------------------------------------------------------

def test_pack_order_is_low_nibble_and_bit_zero_first():
    assert blasdx.pack(np.array([3, -1]), "int4").tolist() == [0xF3]
    assert blasdx.pack(np.array([1, 15], dtype=np.uint8), "uint4").tolist() == [0xF1]
    bits = np.zeros(64, dtype=bool)
    bits[[0, 5, 33]] = True
    assert blasdx.pack(bits, "binary").tolist() == [0b100001, 0b10]


@pytest.mark.parametrize("precision", ["int4", "uint4", "binary"])
@pytest.mark.parametrize("axis", [-1, -2, 0])
def test_pack_round_trips_and_leaves_the_packed_axis_contiguous(precision, axis):
    rng = np.random.default_rng(0)
    lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "binary": (0, 1)}[precision]
    per = 2 if precision != "binary" else 32
    shape = [2 * per, 2 * per, 3 * per]
    x = rng.integers(lo, hi + 1, size=shape)
    p = blasdx.pack(x, precision, axis=axis)
    expected = list(shape)
    expected[axis] //= per
    assert list(p.shape) == expected
    assert p.strides[axis] == p.itemsize  # contiguous along the packed axis
    np.testing.assert_array_equal(blasdx.unpack(p, precision, axis=axis), x)


PACK_ERRORS = [
    (lambda: blasdx.pack(np.array([8, 0]), "int4"), r"int4 values must lie in \[-8, 7\]"),
    (lambda: blasdx.pack(np.array([-1, 0]), "uint4"), r"\[0, 15\]"),
    (lambda: blasdx.pack(np.array([2] + [0] * 31), "binary"), r"\[0, 1\]"),
    (lambda: blasdx.pack(np.zeros(3, dtype=int), "int4"), r"not a multiple of 2.*pad it with zeros to 4"),
    (lambda: blasdx.pack(np.zeros(40, dtype=int), "binary"), r"not a multiple of 32.*to 64"),
    (lambda: blasdx.pack(np.zeros(2), "int4"), r"integer or bool values, got dtype float64"),
    (lambda: blasdx.pack(np.zeros(2, dtype=int), "int8"), r"'int8' is not packed"),
    (lambda: blasdx.pack(np.zeros((2, 2), dtype=int), "int4", axis=2), r"axis=2 is out of range"),
    (lambda: blasdx.unpack(np.zeros(2, dtype=np.uint8), "binary"), r"must have dtype uint32"),
]


@pytest.mark.parametrize("call,match", PACK_ERRORS, ids=range(len(PACK_ERRORS)))
def test_pack_errors_say_what_to_fix(call, match):
    with pytest.raises(ArgumentError, match=match):
        call()
