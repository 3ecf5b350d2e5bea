"""C stored by TMA (GridPlan.tma_store) on a GPU: float32 and int32 C against float64 on edge tiles, batches, beta,
a bias with a hook, split-K, tf32, int8 and FP8, boxes of 128, 64 and 32 bytes, two wgmma tiles a warpgroup, odd n,
C's rows n apart; bitwise the register epilogue's result (the same C 4 bytes off its 16-byte boundary), each from the
kernel it names; columns past n (C a view of wider rows) and rows past m untouched. Marked ``gpu``."""

from __future__ import annotations

import pytest

import blasdx
import blasdx.pipeline
from blasdx import SM, Arrangement, BlockDim, Grid, LeadingDimension, Precision, Size, Tile

from .gpu_support import torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
SENTINEL = 7.0


@pytest.fixture(scope="module")
def torch():
    return torch_with_cuda()


def _dtype(torch, name):
    return {"float32": torch.float32, "tfloat32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "int8": torch.int8, "int32": torch.int32, "float8_e4m3": torch.float8_e4m3fn,
            "float8_e5m2": torch.float8_e5m2}[name]


def _operands(torch, batch, m, n, k, prec, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    lead = () if batch is None else (batch,)
    if prec[0] == "int8":
        a = torch.randint(-100, 100, (*lead, m, k), device="cuda", generator=gen, dtype=torch.int8)
        b = torch.randint(-100, 100, (*lead, n, k), device="cuda", generator=gen, dtype=torch.int8).transpose(-1, -2)
    else:
        a = (torch.randn(*lead, m, k, device="cuda", generator=gen) * 0.5).to(_dtype(torch, prec[0]))
        b = (torch.randn(*lead, n, k, device="cuda", generator=gen) * 0.5).to(_dtype(torch, prec[1])).transpose(-1, -2)
    return a, b, gen


def _c_in_wider_rows(torch, batch, m, n, dtype, pad, offset=0):
    """C (batch, m, n) as a view of rows of n + pad elements (+ m's pad rows below), ``offset`` elements past a
    16-byte boundary, every element SENTINEL; and the whole buffer."""
    lead = () if batch is None else (batch,)
    whole = torch.full((*lead, m + 3, n + pad), SENTINEL, device="cuda").to(dtype)
    flat = torch.full((whole.numel() + offset,), SENTINEL, device="cuda").to(dtype)
    whole = flat[offset:].view(whole.shape)
    return whole[..., :m, :n], whole


F16F32, BF16F32 = ("float16", "float16", "float32"), ("bfloat16", "bfloat16", "float32")


@pytest.mark.parametrize("prec, size, batch, beta, epilogue, ops, pad", [
    (F16F32, (1000, 1000, 520), None, 0.0, None, (), 4),  # edges on every side
    (BF16F32, (300, 264, 128), 5, 0.5, None, (), 4),  # a batch, beta
    (BF16F32, (777, 392, 256), None, -0.75, "gelu", (), 4),  # bias + hook, beta
    (F16F32, (256, 264, 16384), None, 0.0, None, (Tile(64, 128, 64),), 4),  # split-K
    (F16F32, (4096, 1032, 256), None, 0.25, None, (), 4),  # clusters
    (("tfloat32", "tfloat32", "float32"), (200, 264, 96), None, 0.0, "relu", (), 4),
    (("int8", "int8", "int32"), (520, 512, 512), None, 0.0, None, (), 4),
    (("float8_e4m3", "float8_e4m3", "float32"), (512, 520, 384), None, 0.0, None, (), 4),  # partial sums promoted
    (("float8_e5m2", "float8_e5m2", "float32"), (130, 136, 1008), 2, 1.0, "relu", (), 4),  # rows of A on 16 bytes
    (F16F32, (1000, 1000, 512), None, 0.5, None, (Tile(64, 16, 64),), 4),  # boxes of 64 bytes
    (F16F32, (1000, 1000, 512), None, 0.0, "relu", (Tile(64, 8, 64),), 4),  # boxes of 32 bytes
    (F16F32, (1000, 520, 256), None, 0.5, None, (Tile(256, 128, 64), BlockDim(256)), 4),  # two tiles a warpgroup
    (BF16F32, (600, 1001, 256), None, 0.5, None, (), 3),  # odd n, rows 1004 apart: from registers (stores_c_by_tma)
    (("int8", "int8", "int32"), (520, 512, 512), 2, 2.0, None, (), 0),  # int32 C read (beta), rows n apart
], ids=["f16f32-edges", "batch-beta", "bias-gelu-beta", "split-k", "cluster", "tf32-relu", "int8", "e4m3",
        "e5m2-batch", "64-byte-boxes", "32-byte-boxes-bias", "two-tiles-a-warpgroup", "odd-n-beta", "int32-beta-ldc-n"])
def test_tma_stores_match_float64_and_the_register_epilogue_bitwise(torch, prec, size, batch, beta, epilogue, ops, pad):
    m, n, k = size
    # C's rows n + pad elements apart, a 16-byte multiple
    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid() + LeadingDimension(k, k, n + pad)
    for op in ops:
        desc = desc + op
    a, b, gen = _operands(torch, batch, m, n, k, prec, seed=sum(size))
    out = _dtype(torch, prec[2])
    integer = out == torch.int32
    c0 = (torch.randint(-50, 50, (m, n), device="cuda", generator=gen) if integer
          else torch.randn(m, n, device="cuda", generator=gen)).to(out)
    bias = None if epilogue is None else torch.randn(n, device="cuda", generator=gen).to(out)
    kw = {} if epilogue is None else {"bias": bias, "epilogue": epilogue}
    results = []
    for offset in (0, 1):  # 16-byte aligned: TMA stores; 4 bytes off: the register epilogue
        c, whole = _c_in_wider_rows(torch, batch, m, n, out, pad, offset)
        c.copy_(c0.expand_as(c))
        desc.execute(a, b, c, alpha=1.0 if integer else 0.75, beta=beta, **kw)
        torch.cuda.synchronize()
        aligned = blasdx.plan.grid_with_alignment(desc.plan.for_batch(batch), (16, 16, 16 if offset == 0 else 4))
        whole_pieces = n * out.itemsize % 16 == 0  # (a TMA store writes a row's last 16 bytes whole)
        assert aligned.tma_store == (offset == 0 and whole_pieces)  # 16-byte aligned C by TMA, else from registers ...
        assert any(bound.kernel.plan == aligned for bound in blasdx.pipeline.BOUND_LAUNCHES.values())  # ... as launched
        assert bool((whole[..., :m, n:] == SENTINEL).all()) and bool((whole[..., m:, :] == SENTINEL).all()), \
            "written past C's edges"
        results.append(c.clone())
    assert torch.equal(results[0], results[1]), "TMA stores and the register epilogue differ"
    z = (1.0 if integer else 0.75) * (a.double() @ b.double()) + beta * c0.double()
    if epilogue:
        z = z + bias.double()
        z = torch.relu(z) if epilogue == "relu" else torch.nn.functional.gelu(z)
    if integer:
        assert torch.equal(results[0].double(), z)
        return
    bound = 2e-3 if prec[0] in ("tfloat32", "float8_e4m3", "float8_e5m2") else 1e-5
    error = float((results[0].double() - z).norm() / z.norm())
    assert error <= bound, error
