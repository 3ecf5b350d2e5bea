"""blasdx.pytorch without a GPU: the op's descriptor argument, its fake implementation (the
output's shape, dtype and strides for every C arrangement), tracing forward and backward
with torch.compile(fullgraph=True) on meta tensors, and the refusals raised before any
work. Skipped where PyTorch is not installed."""

from __future__ import annotations

import re

import pytest

from blasdx import (
    SM,
    ArgumentError,
    Arrangement,
    Block,
    BlockDim,
    Grid,
    LeadingDimension,
    Precision,
    Size,
    Type,
    Warp,
)

torch = pytest.importorskip("torch")
bt = pytest.importorskip("blasdx.pytorch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402 - after the skip

ROW = Arrangement("row_major", "row_major", "row_major")
F16 = Size(64, 32, 16) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major") \
    + SM(900) + Block()


def meta(*shape, dtype=torch.float16, requires_grad=False):
    return torch.empty(*shape, dtype=dtype, device="meta", requires_grad=requires_grad)


def test_descriptor_key_round_trips_through_its_repr():
    desc = (Size(16, 8, 24) + Precision("bfloat16", "bfloat16", "float32") + Type("complex") + ROW
            + LeadingDimension(32, 8, 16) + SM(800) + Block() + BlockDim(64))
    assert bt.descriptor_key(desc) == repr(desc) and bt.descriptor_from_key(repr(desc)) == desc
    unseen = Size(16, 8, 24) + Precision("float64") + Arrangement("col_major", "row_major", "col_major") + SM(750) + Block()
    assert bt.descriptor_from_key(repr(unseen)) == unseen  # as in a process that loaded a graph from a cache
    with pytest.raises(NameError):
        bt.descriptor_from_key("__import__('os')")  # names outside blasdx's operators do not resolve
    for execution in (Grid(), Warp()):  # every execution operator resolves
        other = unseen.replace(execution)
        assert bt.descriptor_from_key(repr(other)) == other


@pytest.mark.parametrize(("c_layout", "ldc", "strides"), [
    ("row_major", 32, (64 * 32, 32, 1)),
    ("col_major", 64, (32 * 64, 1, 64)),
    ("row_major", 40, (64 * 40, 40, 1)),
    ("col_major", 72, (32 * 72, 1, 72)),
])
def test_the_output_takes_the_descriptors_c_arrangement(c_layout, ldc, strides):
    desc = (Size(64, 32, 16) + Precision("float16", "float16", "float32") + Arrangement("row_major", "row_major", c_layout)
            + LeadingDimension(16, 32, ldc) + SM(900) + Block())
    out = bt.gemm(desc, meta(3, 64, 16), meta(3, 16, 32))
    assert out.shape == (3, 64, 32) and out.dtype == torch.float32 and out.stride() == strides


def test_complex_output_dtype_and_refusals_without_a_torch_dtype():
    desc = Size(8, 8, 8) + Precision("float32") + Type("complex") + ROW + SM(900) + Block()
    assert bt.gemm(desc, meta(8, 8, dtype=torch.complex64), meta(8, 8, dtype=torch.complex64)).dtype == torch.complex64
    half = Size(8, 8, 8) + Precision("float16") + Type("complex") + ROW + SM(900) + Block()
    with pytest.raises(ArgumentError, match="no PyTorch dtype for complex float16"):
        bt.gemm(half, meta(8, 8, 2), meta(8, 8, 2))


@pytest.mark.parametrize("epilogue", [None, "relu", "gelu", "sigmoid", "tanh", "negate"])
def test_forward_and_backward_trace_without_a_graph_break(epilogue):
    a = meta(4, 64, 16, requires_grad=True)
    b_rows = meta(4, 32, 16, requires_grad=True)  # B col-major: the transpose of a row-major (n, k)
    bias = meta(32, dtype=torch.float32, requires_grad=True)
    c = meta(4, 64, 32, dtype=torch.float32, requires_grad=True)

    def step(a, b_rows, bias, c):
        return bt.gemm(F16, a, b_rows.transpose(-1, -2), c, alpha=2.0, beta=0.5, bias=bias, epilogue=epilogue).sum()

    torch.compile(step, fullgraph=True, backend="aot_eager")(a, b_rows, bias, c).backward()
    assert a.grad.shape == a.shape and a.grad.dtype == torch.float16
    assert b_rows.grad.shape == b_rows.shape and b_rows.grad.dtype == torch.float16
    assert bias.grad.shape == (32,) and c.grad.shape == c.shape


class _GemmCalls(TorchDispatchMode):
    """Records the descriptor of every blasdx op call."""

    def __init__(self) -> None:
        super().__init__()
        self.descriptors: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.blasdx.gemm.default:
            self.descriptors.append(bt.descriptor_from_key(args[0]))
        return func(*args, **(kwargs or {}))


def test_backward_products_are_blasdx_gemms_arranged_as_the_saved_tensors():
    a = meta(4, 64, 16, requires_grad=True)
    b_rows = meta(4, 32, 16, requires_grad=True)
    with _GemmCalls() as calls:
        bt.gemm(F16, a, b_rows.transpose(-1, -2)).sum().backward()
    forward, *backward = calls.descriptors
    # da = dz (64 x 32, row-major) @ b^T (32 x 16: b is col-major, so b^T is row-major)
    da = Size(64, 16, 32) + Precision("float16", "float16", "float32") + ROW + LeadingDimension(32, 16, 16) \
        + SM(900) + Block()
    # db = a^T (16 x 64: col-major) @ dz (64 x 32, row-major)
    db = (Size(16, 32, 64) + Precision("float16", "float16", "float32") + Arrangement("col_major", "row_major", "row_major")
          + LeadingDimension(16, 32, 32) + SM(900) + Block())
    assert forward == F16 and sorted(map(repr, backward)) == sorted(map(repr, (da, db)))


@pytest.mark.parametrize("epilogue", ["satfinite", "x * x"])
def test_an_epilogue_without_a_derivative_is_refused_when_grad_is_needed(epilogue):
    a, b = meta(64, 16, requires_grad=True), meta(32, 16).t()
    with pytest.raises(ArgumentError, match=re.escape(f"epilogue={epilogue!r} has no derivative") + ".*torch.no_grad"):
        bt.gemm(F16, a, b, epilogue=epilogue)
    with torch.no_grad():
        assert bt.gemm(F16, a, b, epilogue=epilogue).shape == (64, 32)
    assert bt.gemm(F16, a.detach(), b, epilogue=epilogue).shape == (64, 32)


def test_gradients_are_refused_for_complex_and_integer_gemms():
    cdesc = Size(8, 8, 8) + Precision("float32") + Type("complex") + ROW + SM(900) + Block()
    with pytest.raises(ArgumentError, match="no gradient for complex"):
        bt.gemm(cdesc, meta(8, 8, dtype=torch.complex64, requires_grad=True), meta(8, 8, dtype=torch.complex64))
    fp8 = Size(16, 16, 32) + Precision("float8_e4m3", "float8_e4m3", "float32") + Arrangement(
        "row_major", "col_major", "row_major") + SM(900) + Block()
    with pytest.raises(ArgumentError, match="no gradient for A in float8_e4m3"):
        bt.gemm(fp8, meta(16, 32, dtype=torch.float8_e4m3fn), meta(16, 32, dtype=torch.float8_e4m3fn).t(),
                bias=meta(16, dtype=torch.float32, requires_grad=True))


def test_argument_refusals():
    a, b = meta(64, 16), meta(32, 16).t()
    with pytest.raises(ArgumentError, match=r"c has shape \(32,\), but the output has \(64, 32\)"):
        bt.gemm(F16, a, b, meta(32, dtype=torch.float32), beta=1.0)  # would broadcast if copied in
    with pytest.raises(ArgumentError, match="no c was given"):
        bt.gemm(F16, a, b, beta=1.0)
    with pytest.raises(ArgumentError, match="epilogue as a string"):
        bt.gemm(F16, a, b, epilogue=lambda x: x)
    with pytest.raises(ArgumentError, match="first argument is a blasdx descriptor"):
        bt.gemm("not a descriptor", a, b)
