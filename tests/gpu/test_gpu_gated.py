"""Gated epilogues on a GPU (issue 48): C = act(Z[:, 0::2]) * Z[:, 1::2] + beta C of the product Z = alpha A B + bias
(SwiGLU: act = silu, GeGLU: gelu), written by Grid() and Grouped() kernels, against float64 of the same (rounded)
inputs: precisions, layouts, edge tiles, split-K, the mma.sync path, groups (skewed, empty, rows past the last
offset untouched), the bias's shape refused with the product's, and the torch op's gradients. Marked ``gpu``."""

from __future__ import annotations

import math

import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, Grid, Grouped, Precision, Size

from .gpu_support import torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BOUND = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}
GATES = {"swiglu": blasdx.swiglu(layout="interleaved"), "geglu": blasdx.geglu(layout="interleaved")}


def _dtype(torch, name):
    return {"float32": torch.float32, "tfloat32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float8_e4m3": torch.float8_e4m3fn}[name]


def _gate(torch, z, gate, beta=0.0, c0=None):
    g, u = z[..., 0::2], z[..., 1::2]
    act = g * torch.sigmoid(g) if gate == "swiglu" else 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))
    out = act * u
    return out + beta * c0.double() if beta else out


def _error(torch, c, ref):
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("prec, arrangement, sm, size", [
    (("bfloat16", "bfloat16", "bfloat16"), RCR, 900, (300, 520, 320)),  # TMA, edge tiles in m and n
    (("float16", "float16", "float32"), RRR, 900, (256, 1024, 512)),
    (("tfloat32", "tfloat32", "float32"), RCR, 900, (200, 264, 96)),
    (("float8_e4m3", "float8_e4m3", "bfloat16"), RCR, 900, (512, 512, 384)),  # FP8, partial sums promoted
    (("float16", "float16", "float32"), RRR, 800, (333, 410, 250)),  # mma.sync, cp.async
    (("bfloat16", "bfloat16", "float32"), RCR, 900, (128, 256, 16384)),  # split-K: few tiles, deep k
    (("float16", "float16", "float16"), Arrangement("row_major", "col_major", "col_major"), 900, (260, 300, 128)),
], ids=["bf16-tma-edges", "f16-f32-rrr", "tf32", "fp8", "mma-sync", "split-k", "c-column-major"])
def test_grid_gates_the_product(gate, prec, arrangement, sm, size):
    torch = torch_with_cuda()
    m, n, k = size
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(_dtype(torch, prec[0]))
    b = torch.randn(n, k, device="cuda", generator=gen) * 0.5
    b = (b.to(_dtype(torch, prec[1])).t() if arrangement.b == "col_major" else b.t().contiguous().to(_dtype(torch, prec[1])))
    out_dtype = _dtype(torch, prec[2])
    bias = torch.randn(n, device="cuda", generator=gen).to(out_dtype)
    c0 = torch.randn(m, n // 2, device="cuda", generator=gen).to(out_dtype)
    c = c0.clone() if arrangement.c == "row_major" else c0.t().contiguous().t()
    desc = Size(m, n, k) + Precision(*prec) + arrangement + SM(sm) + Grid()
    desc.execute(a, b, c, alpha=0.75, beta=-0.5, bias=bias, epilogue=GATES[gate])
    z = 0.75 * (a.double() @ b.double()) + bias.double()
    bound = BOUND["bfloat16" if "float8" in prec[0] else prec[2]]
    if prec[0] == "tfloat32":
        bound = 2e-3
    assert _error(torch, c, _gate(torch, z, gate, -0.5, c0)) <= bound


def test_grid_gates_with_no_bias_and_beta_zero_never_reading_c():
    torch = torch_with_cuda()
    m, n, k = 384, 768, 256
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16).t()
    c = torch.full((m, n // 2), float("nan"), device="cuda", dtype=torch.bfloat16)
    (Size(m, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid()).execute(
        a, b, c, epilogue="swiglu_interleaved")
    assert _error(torch, c, _gate(torch, a.double() @ b.double(), "swiglu")) <= BOUND["bfloat16"]


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("bias_per_group", [True, False])
def test_grouped_gates_each_groups_product(gate, bias_per_group):
    torch = torch_with_cuda()
    counts = [300, 0, 1, 77, 0, 129, 512, 3]
    n, k = 640, 384
    rows, groups = sum(counts) + 40, len(counts)  # 40 rows past the last offset stay as they were
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    bias = torch.randn(groups, n, device="cuda", generator=gen) if bias_per_group else torch.randn(n, device="cuda")
    c = torch.full((rows, n // 2), float("nan"), device="cuda")
    desc = Size(128, n, k) + Precision("bfloat16", "bfloat16", "float32") + RCR + SM(900) + Grouped()
    desc.execute(a, b, c, alpha=1.5, offsets=offsets, bias=bias, epilogue=GATES[gate])
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        if end > begin:
            z = 1.5 * (a[begin:end].double() @ b[g].double()) + (bias[g] if bias_per_group else bias).double()
            assert _error(torch, c[begin:end], _gate(torch, z, gate)) <= 2e-3, f"group {g}"
        begin = end
    assert bool(torch.isnan(c[begin:]).all()), "rows past the last offset were written"


def test_the_bias_is_checked_against_the_products_columns_before_any_launch():
    torch = torch_with_cuda()
    m, n, k = 256, 512, 128
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16).t()
    c = torch.zeros(m, n // 2, device="cuda", dtype=torch.bfloat16)
    desc = Size(m, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid()
    with pytest.raises(ArgumentError, match=r"broadcast to the product's shape \(before the gate\) \(256, 512\)"):
        desc.execute(a, b, c, bias=torch.zeros(n // 2, device="cuda", dtype=torch.bfloat16), epilogue=GATES["swiglu"])
    with pytest.raises(ArgumentError, match=r"C has shape \(256, 512\), expected .* = \(256, 256\)"):
        desc.execute(a, b, torch.zeros(m, n, device="cuda", dtype=torch.bfloat16), epilogue=GATES["swiglu"])
    assert not c.any()


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
def test_the_torch_op_gates_and_differentiates(gate):
    """grouped_gemm with a gated epilogue: (rows, n / 2) out, and d a, d b, d bias against float64 autograd of the
    same values (the backward computes z again, one Grouped() GEMM)."""
    torch = torch_with_cuda()
    import blasdx.pytorch

    counts = [70, 0, 1, 130, 55]
    n, k = 256, 192
    rows, groups = sum(counts), len(counts)
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    b = torch.randn(groups, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2).requires_grad_()
    bias = torch.randn(groups, n, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    desc = Size(64, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grouped()
    out = blasdx.pytorch.grouped_gemm(desc, a, b, offsets, alpha=0.5, bias=bias, epilogue=GATES[gate])
    assert out.shape == (rows, n // 2)
    dout = torch.randn(rows, n // 2, device="cuda", generator=gen).to(torch.bfloat16)
    out.backward(dout)
    a64, b64, bias64 = (x.detach().double().requires_grad_() for x in (a, b, bias))
    parts, begin = [], 0
    for g, end in enumerate(offsets.tolist()):
        parts.append(_gate(torch, 0.5 * (a64[begin:end] @ b64[g]) + bias64[g], gate))
        begin = end
    ref = torch.cat(parts)
    ref.backward(dout.double())
    assert _error(torch, out.detach(), ref.detach()) <= BOUND["bfloat16"]
    for name, ours, theirs in (("a", a.grad, a64.grad), ("b", b.grad, b64.grad), ("bias", bias.grad, bias64.grad)):
        assert ours.shape == theirs.shape, name
        assert _error(torch, ours, theirs) <= 3e-2, name
