"""int4, uint4 and binary GEMMs on a GPU: exact results against an int64 NumPy reference
across sizes, batches, layouts of C, leading dimensions and both bit operations; the
device function inside a user kernel; the bad inputs only a GPU array can show.
Marked ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, BitOp, Block, LeadingDimension, Precision, Size

from ..device_kernels import DEVICE_KERNEL

pytestmark = pytest.mark.gpu


RANGE = {"int4": (-8, 7), "uint4": (0, 15), "binary": (0, 1)}


def describe(a, b, size, c_layout="row_major", bit_op=None, ld=None):
    desc = (Size(*size) + Precision(a, b, "int32") + Arrangement("row_major", "col_major", c_layout)
            + SM(900) + Block())
    if bit_op is not None:
        desc = desc + BitOp(bit_op)
    if ld is not None:
        desc = desc + LeadingDimension(*ld)
    return desc


def values(precision, shape, rng):
    lo, hi = RANGE[precision]
    return rng.integers(lo, hi + 1, size=shape).astype(np.int64)


def reference(desc, a, b, c, alpha, beta):
    """alpha * op(A, B) + beta * C in int64, op the matrix product or the bit count."""
    if desc.bit_op == "xor":  # popcount(a xor b) = a + b - 2ab for bits
        product = a.sum(-1)[..., :, None] + b.sum(-2)[..., None, :] - 2 * (a @ b)
    else:  # "and" counts a * b; 4-bit values multiply
        product = a @ b
    out = alpha * product + beta * c
    assert np.abs(out).max() < 2**31, "test data overflows int32"
    return out


def packed_on_device(values, precision, axis, ld=None):
    """Packed on the GPU along ``axis`` (-1 for A, -2 for B), runs ``ld`` values apart."""
    import cupy

    if ld is None:
        return blasdx.pack(cupy.asarray(values), precision, axis=axis)
    k = values.shape[axis]
    pad = [(0, 0)] * values.ndim
    pad[axis] = (0, ld - k)
    full = blasdx.pack(cupy.asarray(np.pad(values, pad)), precision, axis=axis)
    index = [slice(None)] * values.ndim
    index[axis] = slice(0, k // blasdx.describe.precision.PRECISIONS[precision].pack)
    return full[tuple(index)]


def run(desc, batch, rng, alpha=1, beta=0, lds=(None, None)):
    import cupy

    m, n, k = desc.size
    pa, pb = desc.precision.a, desc.precision.b
    lead = () if batch is None else (batch,)
    a = values(pa, (*lead, m, k), rng)
    b = values(pb, (*lead, k, n), rng)
    c = rng.integers(-1000, 1000, size=(*lead, m, n)).astype(np.int64)
    a_dev = packed_on_device(a, pa, -1, lds[0])
    b_dev = packed_on_device(b, pb, -2, lds[1])
    c_host = c.astype(np.int32)
    if desc.arrangement.c == "row_major":
        c_dev = cupy.asarray(c_host)
    else:
        c_dev = cupy.asarray(np.ascontiguousarray(np.swapaxes(c_host, -1, -2))).swapaxes(-1, -2)
    desc.execute(a_dev, b_dev, c_dev, alpha=alpha, beta=beta)
    return c_dev.get().astype(np.int64), reference(desc, a, b, c, alpha, beta)


FOUR_BIT_CASES = [  # (a, b, size, batch)
    ("int4", "int4", (16, 8, 64), None),
    ("int4", "int4", (64, 64, 128), 7),
    ("uint4", "uint4", (64, 32, 256), 3),
    ("int4", "uint4", (33, 17, 30), 4),  # odd m, n; k = 15 bytes: a partial last word
    ("uint4", "int4", (128, 64, 64), 2),
    ("int4", "int4", (8, 40, 2), 5),  # k = one byte
]


@pytest.mark.parametrize("a,b,size,batch", FOUR_BIT_CASES, ids=lambda v: str(v).replace(" ", ""))
def test_four_bit_gemm_is_exact(a, b, size, batch):
    rng = np.random.default_rng(sum(size))
    desc = describe(a, b, size)
    out, ref = run(desc, batch, rng, alpha=2, beta=-1)
    np.testing.assert_array_equal(out, ref)


BINARY_CASES = [  # (size, batch, bit_op)
    ((8, 8, 32), None, "xor"),
    ((64, 64, 512), 6, "xor"),
    ((64, 64, 512), 6, "and"),
    ((40, 24, 96), 3, "and"),  # k = 3 words: a partial instruction
    ((128, 128, 256), 2, "xor"),
    ((17, 9, 1024), 4, "and"),
]


@pytest.mark.parametrize("size,batch,bit_op", BINARY_CASES, ids=lambda v: str(v).replace(" ", ""))
def test_binary_gemm_counts_bits_exactly(size, batch, bit_op):
    rng = np.random.default_rng(sum(size))
    desc = describe("binary", "binary", size, bit_op=bit_op)
    out, ref = run(desc, batch, rng, alpha=1, beta=1)
    np.testing.assert_array_equal(out, ref)


def test_binary_defaults_to_xor_hamming_distance():
    import cupy

    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2, size=(32, 128))
    desc = describe("binary", "binary", (32, 32, 128))
    packed = cupy.asarray(blasdx.pack(codes, "binary"))
    out = cupy.zeros((32, 32), dtype=cupy.int32)
    desc.execute(packed, packed.T, out)
    hamming = (codes[:, None, :] != codes[None, :, :]).sum(-1)
    np.testing.assert_array_equal(out.get(), hamming)
    assert (np.diag(out.get()) == 0).all()


@pytest.mark.parametrize("precision", ["int4", "binary"])
def test_column_major_c_and_padded_leading_dimensions(precision):
    rng = np.random.default_rng(11)
    k = 64 if precision == "int4" else 256
    extra = 2 if precision == "int4" else 32  # one stored element more per run
    size = (24, 40, k)
    desc = describe(precision, precision, size, c_layout="col_major", ld=(k + extra, k + 3 * extra, 24))
    out, ref = run(desc, 3, rng, alpha=3, beta=2, lds=(k + extra, k + 3 * extra))
    np.testing.assert_array_equal(out, ref)


def test_epilogue_on_a_four_bit_gemm():
    import cupy

    rng = np.random.default_rng(3)
    desc = describe("int4", "int4", (32, 32, 64))
    a, b = values("int4", (4, 32, 64), rng), values("int4", (4, 64, 32), rng)
    c = cupy.zeros((4, 32, 32), dtype=cupy.int32)
    desc.execute(packed_on_device(a, "int4", -1), packed_on_device(b, "int4", -2), c,
                 epilogue="relu", bias=cupy.arange(32, dtype=cupy.int32))
    np.testing.assert_array_equal(c.get(), np.maximum(a @ b + np.arange(32), 0))


def test_device_function_in_a_user_kernel():
    import cupy

    desc = describe("binary", "binary", (64, 64, 256))
    rng = np.random.default_rng(9)
    a, b = values("binary", (64, 256), rng), values("binary", (256, 64), rng)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + DEVICE_KERNEL, "hamming")
    c = cupy.zeros((64, 64), dtype=cupy.int32)
    kernel((1,), tuple(desc.block_dim), (packed_on_device(a, "binary", -1), packed_on_device(b, "binary", 0), c),
           shared_mem=desc.shared_memory_size)
    hamming = reference(desc, a, b, np.zeros((64, 64), np.int64), 1, 0)
    np.testing.assert_array_equal(c.get(), 256 - 2 * hamming)


def test_pack_and_unpack_run_on_cupy_arrays():
    import cupy

    rng = np.random.default_rng(1)
    x = cupy.asarray(values("int4", (6, 64), rng))
    p = blasdx.pack(x, "int4", axis=0)
    assert isinstance(p, cupy.ndarray) and p.shape == (3, 64) and p.dtype == cupy.uint8
    assert p.strides == (1, 3)  # the packed axis is contiguous
    cupy.testing.assert_array_equal(blasdx.unpack(p, "int4", axis=0), x)


def test_bad_packed_arguments_are_refused():
    import cupy

    desc = describe("int4", "int4", (16, 16, 64))
    a = cupy.zeros((16, 32), dtype=cupy.uint8)
    b = cupy.zeros((16, 32), dtype=cupy.uint8).T  # (32, 16) with k contiguous
    c = cupy.zeros((16, 16), dtype=cupy.int32)
    desc.execute(a, b, c)  # the right form runs
    with pytest.raises(ArgumentError, match=r"blasdx.pack\(x, 'int4', axis=-1\)"):
        desc.execute(cupy.zeros((16, 32), dtype=cupy.int8), b, c)  # int8, not packed bytes
    with pytest.raises(ArgumentError, match=r"\(m, k/2\).*packed 2 per uint8"):
        desc.execute(cupy.zeros((16, 64), dtype=cupy.uint8), b, c)  # unpacked shape
    with pytest.raises(ArgumentError, match="strides"):
        desc.execute(a, cupy.zeros((32, 16), dtype=cupy.uint8), c)  # B packed along n
    with pytest.raises(ArgumentError, match="no load hook"):
        desc.execute(a, b, c, prologue="negate")
