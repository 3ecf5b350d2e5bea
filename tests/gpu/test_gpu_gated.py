"""Gated epilogues on a GPU (issue 48): C = act(Z[:, 0::2]) * Z[:, 1::2] + beta C of the product Z = alpha A B + bias
(SwiGLU: act = silu, GeGLU: gelu), written by Grid() and Grouped() kernels, against float64 of the same (rounded)
inputs: precisions, layouts, edge tiles, split-K, the mma.sync path, groups (skewed, empty, rows past the last
offset untouched), the bias's shape refused with the product's, and the torch op's gradients. Weights kept split
(layout="split": C = act(Z[:, :n / 2]) * Z[:, n / 2:]) the same ways, and equal to interleaved on B's columns
interleaved. Marked ``gpu``."""

from __future__ import annotations

import math

import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, Grid, Grouped, Precision, Size, Tile

from .gpu_support import torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BOUND = {"float32": 1e-4, "float16": 3e-3, "bfloat16": 2e-2}
GATES = {"swiglu": blasdx.swiglu(layout="interleaved"), "geglu": blasdx.geglu(layout="interleaved")}
SPLIT = {"swiglu": blasdx.swiglu(layout="split"), "geglu": blasdx.geglu(layout="split")}


def _dtype(torch, name):
    return {"float32": torch.float32, "tfloat32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float8_e4m3": torch.float8_e4m3fn}[name]


def _gate(torch, z, gate, beta=0.0, c0=None, split=False):
    half = z.shape[-1] // 2
    g, u = (z[..., :half], z[..., half:]) if split else (z[..., 0::2], z[..., 1::2])
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


# --- weights kept split: layout="split" ----------------------------------------------------------------------------


def _weights(torch, n, k, arrangement, dtype, gen, groups=None):
    """B of (k, n) (a group each: (groups, k, n)) in the arrangement's layout, from fresh normal values."""
    lead = () if groups is None else (groups,)
    if arrangement.b == "col_major":
        return (torch.randn(*lead, n, k, device="cuda", generator=gen) * 0.5).to(dtype).transpose(-1, -2)
    return (torch.randn(*lead, k, n, device="cuda", generator=gen) * 0.5).to(dtype)


def _interleaved(torch, x):
    """x's last dimension [gate | up] put as (gate j, up j) pairs, in x's memory order (for B: its layout kept)."""
    n = x.shape[-1]
    if x.dim() >= 2 and x.stride(-2) == 1:  # column-major: interleave rows of its transpose, keep the layout
        t = x.transpose(-1, -2)
        return t.reshape(*t.shape[:-2], 2, n // 2, t.shape[-1]).transpose(-3, -2).reshape(t.shape).transpose(-1, -2)
    return x.reshape(*x.shape[:-1], 2, n // 2).transpose(-1, -2).reshape(x.shape).contiguous()


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("prec, arrangement, size, tile", [
    (("bfloat16", "bfloat16", "bfloat16"), RCR, (300, 520, 320), None),  # K-major halves; n / 2 = 260, halves of 32
    (("float16", "float16", "float32"), RRR, (256, 1008, 512), (128, 128, 64)),  # slabs in halves; 504 = 7 * 64 + 56
    (("bfloat16", "bfloat16", "bfloat16"), RRR, (1024, 2096, 512), None),  # clusters: a block copies each half
    (("bfloat16", "bfloat16", "bfloat16"), RCR, (1024, 2088, 512), None),
    (("float16", "float16", "float16"), Arrangement("row_major", "col_major", "col_major"), (260, 300, 128), None),
    (("bfloat16", "bfloat16", "float32"), RCR, (128, 256, 16384), None),  # split-K
    (("tfloat32", "tfloat32", "float32"), RCR, (200, 264, 96), None),
    (("float8_e4m3", "float8_e4m3", "bfloat16"), RCR, (512, 520, 384), None),  # FP8, partial sums promoted
], ids=["bf16-rcr-edges", "f16-f32-rrr-edges", "bf16-rrr-cluster", "bf16-rcr-cluster", "f16-c-column-major",
        "split-k", "tf32", "fp8"])
def test_grid_gates_split_weights(gate, prec, arrangement, size, tile):
    torch = torch_with_cuda()
    m, n, k = size
    gen = torch.Generator(device="cuda").manual_seed(13)
    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(_dtype(torch, prec[0]))
    b = _weights(torch, n, k, arrangement, _dtype(torch, prec[1]), gen)
    out_dtype = _dtype(torch, prec[2])
    bias = torch.randn(n, device="cuda", generator=gen).to(out_dtype)
    c0 = torch.randn(m, n // 2, device="cuda", generator=gen).to(out_dtype)
    c = c0.clone() if arrangement.c == "row_major" else c0.t().contiguous().t()
    desc = Size(m, n, k) + Precision(*prec) + arrangement + SM(900) + Grid()
    desc = desc + Tile(*tile) if tile else desc
    desc.execute(a, b, c, alpha=0.75, beta=-0.5, bias=bias, epilogue=SPLIT[gate])
    z = 0.75 * (a.double() @ b.double()) + bias.double()
    ref = _gate(torch, z, gate, -0.5, c0, split=True)
    bound = BOUND["bfloat16" if "float8" in prec[0] else prec[2]]
    if prec[0] == "tfloat32":
        bound = 2e-3
    assert torch.linalg.norm(ref) > 0 and torch.linalg.norm(c.double()) > 0
    assert bool(torch.isfinite(c).all())
    assert _error(torch, c, ref) <= bound
    # every column of C, the last tile's few included (n / 2 is no multiple of the tile's half)
    worst = ((c.double() - ref).norm(dim=0) / ref.norm(dim=0)).max()
    assert float(worst) <= 4 * bound, float(worst)


def test_grid_gates_split_weights_with_no_bias_and_beta_zero_never_reading_c():
    torch = torch_with_cuda()
    m, n, k = 384, 776, 256  # n / 2 = 388: the last tile's gate half reads up columns, never written as outputs
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16).t()
    c = torch.full((m, n // 2), float("nan"), device="cuda", dtype=torch.bfloat16)
    (Size(m, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid()).execute(
        a, b, c, epilogue="swiglu_split")
    assert bool(torch.isfinite(c).all())
    assert _error(torch, c, _gate(torch, a.double() @ b.double(), "swiglu", split=True)) <= BOUND["bfloat16"]


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("desc", [
    Size(300, 520, 320) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid(),
    Size(256, 1008, 512) + Precision("float16", "float16", "float32") + RRR + SM(900) + Grid() + Tile(128, 128, 64),
    Size(1024, 2096, 512) + Precision("bfloat16", "bfloat16", "bfloat16") + RRR + SM(900) + Grid(),
], ids=["bf16-rcr", "f16-f32-rrr", "bf16-rrr-cluster"])
def test_split_weights_give_interleaved_weights_result_bit_for_bit(gate, desc):
    """The same kernel plan (tile, K order, split-K) and the same arithmetic on the same values: the tile's column c
    of split B is interleaved B's 2c or 2c + 1, multiplied by the same wgmma in the same K order, and the epilogue
    computes act(alpha g + bias) * (alpha u + bias) + beta c alike. Lanes hold other columns, so a difference would
    mean the tensor cores' sum depends on a column's place in an instruction: report it, not loosen this."""
    torch = torch_with_cuda()
    m, n, k = desc.size
    gen = torch.Generator(device="cuda").manual_seed(17)
    prec = desc.precision
    a = torch.randn(m, k, device="cuda", generator=gen).to(_dtype(torch, prec[0]))
    b = _weights(torch, n, k, desc.arrangement, _dtype(torch, prec[1]), gen)
    bias = torch.randn(n, device="cuda", generator=gen).to(_dtype(torch, prec[2]))
    c0 = torch.randn(m, n // 2, device="cuda", generator=gen).to(_dtype(torch, prec[2]))
    split, interleaved = c0.clone(), c0.clone()
    b_interleaved, bias_interleaved = _interleaved(torch, b), _interleaved(torch, bias)
    assert b_interleaved.stride() == b.stride() and torch.equal(b_interleaved[:, 1::2], b[:, n // 2:])
    desc.execute(a, b, split, alpha=1.25, beta=0.5, bias=bias, epilogue=SPLIT[gate])
    desc.execute(a, b_interleaved, interleaved, alpha=1.25, beta=0.5, bias=bias_interleaved, epilogue=GATES[gate])
    assert bool(torch.isfinite(split).all())
    assert torch.equal(split, interleaved), float((split.double() - interleaved.double()).abs().max())


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("arrangement, n", [(RCR, 1000), (RRR, 640)], ids=["rcr", "rrr"])
@pytest.mark.parametrize("bias_per_group", [True, False])
def test_grouped_gates_split_weights(gate, arrangement, n, bias_per_group):
    torch = torch_with_cuda()
    counts = [300, 0, 1, 77, 0, 129, 512, 3]
    k = 384
    rows, groups = sum(counts) + 40, len(counts)  # 40 rows past the last offset stay as they were
    gen = torch.Generator(device="cuda").manual_seed(19)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = _weights(torch, n, k, arrangement, torch.bfloat16, gen, groups)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    bias = torch.randn(groups, n, device="cuda", generator=gen) if bias_per_group else torch.randn(n, device="cuda")
    c = torch.full((rows, n // 2), float("nan"), device="cuda")
    desc = Size(128, n, k) + Precision("bfloat16", "bfloat16", "float32") + arrangement + SM(900) + Grouped()
    desc.execute(a, b, c, alpha=1.5, offsets=offsets, bias=bias, epilogue=SPLIT[gate])
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        if end > begin:
            z = 1.5 * (a[begin:end].double() @ b[g].double()) + (bias[g] if bias_per_group else bias).double()
            assert _error(torch, c[begin:end], _gate(torch, z, gate, split=True)) <= 2e-3, f"group {g}"
        begin = end
    assert bool(torch.isnan(c[begin:]).all()), "rows past the last offset were written"


def test_split_weights_tma_cannot_copy_are_refused_before_any_launch():
    torch = torch_with_cuda()
    m, n, k = 256, 512, 128
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    storage = torch.randn(n * k + 8, device="cuda").to(torch.bfloat16)
    b = storage[4:4 + n * k].view(n, k).t()  # 8 bytes past a 16-byte boundary: no TMA, and no cp.async split copy
    c = torch.zeros(m, n // 2, device="cuda", dtype=torch.bfloat16)
    desc = Size(m, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid()
    with pytest.raises(ArgumentError, match=r"runs on the TMA kernel, whose A and B start on 16-byte boundaries .*; "
                                            r"this call's are aligned to 16 and 8 bytes: align them, or interleave"):
        desc.execute(a, b, c, epilogue=SPLIT["swiglu"])
    assert not c.any()
    desc.execute(a, b, c, epilogue=GATES["swiglu"])  # interleaved weights run there (cp.async)
    assert c.any()


@pytest.mark.parametrize("gate", ["swiglu", "geglu"])
@pytest.mark.parametrize("arrangement", [RCR, RRR], ids=["rcr", "rrr"])
def test_the_torch_op_gates_split_weights_and_differentiates(gate, arrangement):
    """grouped_gemm with layout="split": (rows, n / 2) out, and d a, d b, d bias (dz in the split layout) against
    float64 autograd of the same values."""
    torch = torch_with_cuda()
    import blasdx.pytorch

    counts = [70, 0, 1, 130, 55]
    n, k = 272, 192  # n / 2 = 136: the last tile's halves are partly past the gate's and the up's columns
    rows, groups = sum(counts), len(counts)
    gen = torch.Generator(device="cuda").manual_seed(23)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    b = _weights(torch, n, k, arrangement, torch.bfloat16, gen, groups).detach().requires_grad_()
    bias = torch.randn(groups, n, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    desc = Size(64, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + arrangement + SM(900) + Grouped()
    out = blasdx.pytorch.grouped_gemm(desc, a, b, offsets, alpha=0.5, bias=bias, epilogue=SPLIT[gate])
    assert out.shape == (rows, n // 2)
    dout = torch.randn(rows, n // 2, device="cuda", generator=gen).to(torch.bfloat16)
    out.backward(dout)
    a64, b64, bias64 = (x.detach().double().requires_grad_() for x in (a, b, bias))
    parts, begin = [], 0
    for g, end in enumerate(offsets.tolist()):
        parts.append(_gate(torch, 0.5 * (a64[begin:end] @ b64[g]) + bias64[g], gate, split=True))
        begin = end
    ref = torch.cat(parts)
    ref.backward(dout.double())
    assert _error(torch, out.detach(), ref.detach()) <= BOUND["bfloat16"]
    for name, ours, theirs in (("a", a.grad, a64.grad), ("b", b.grad, b64.grad), ("bias", bias.grad, bias64.grad)):
        assert ours.shape == theirs.shape, name
        assert _error(torch, ours, theirs) <= 3e-2, name
        # the gate's and the up's halves of d b and d bias each (a dz in the wrong layout mixes them)
        if name != "a":
            half = theirs.shape[-1] // 2
            for part in (slice(None, half), slice(half, None)):
                assert _error(torch, ours[..., part], theirs[..., part]) <= 3e-2, (name, part)
