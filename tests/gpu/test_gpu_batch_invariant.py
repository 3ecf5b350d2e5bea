"""BatchInvariant() on a GPU (issue 49): each row of C is bitwise the same whatever the rows of the call, M = 1 to
16384, for bfloat16, float16 and float32 (and float16 -> float32, FP8 and batches of items); a group's rows are the
same whatever the routing around them (Grouped()). Edges on every side: n and k not multiples of the tile.
Marked ``gpu``."""

from __future__ import annotations

import pytest

from blasdx import SM, Arrangement, BatchInvariant, Grid, Grouped, Precision, Size

from .gpu_support import torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
ROWS = (16384, 1, 2, 3, 17, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 1000, 2047, 4097, 8192)
BOUND = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


@pytest.fixture(scope="module")
def torch():
    return torch_with_cuda()


def _dtype(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float8_e4m3": torch.float8_e4m3fn}[name]


def _operands(torch, rows, n, k, prec, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(_dtype(torch, prec[0]))
    b = torch.randn(n, k, device="cuda", generator=gen).to(_dtype(torch, prec[1])).t()  # (k, n), column-major
    return a, b


def _invariant(m, n, k, prec):
    return Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid() + BatchInvariant()


@pytest.mark.parametrize("prec", [("bfloat16",) * 3, ("float16",) * 3, ("float32",) * 3,
                                  ("float16", "float16", "float32"), ("float8_e4m3", "float8_e4m3", "bfloat16")],
                         ids=["bf16", "f16", "f32", "f16f32", "fp8"])
def test_rows_are_bitwise_the_same_for_every_m(torch, prec):
    n, k = 1000, 1000
    a, b = _operands(torch, max(ROWS), n, k, prec)
    out = _dtype(torch, prec[2])
    whole = None
    for m in ROWS:
        c = torch.full((m, n), float("nan"), device="cuda", dtype=out)
        _invariant(m, n, k, prec).execute(a[:m], b, c)
        if whole is None:  # M = 16384 first: the rows every other M must repeat, checked against float64 once
            whole = c
            ref = a.double() @ b.double()
            err = float((c.double() - ref).norm() / ref.norm())
            assert err < BOUND[prec[2]], err
        else:
            assert torch.equal(c, whole[:m]), f"M = {m}: rows differ from M = {max(ROWS)}'s"


def test_batches_repeat_the_rows_of_one_call(torch):
    """A batch of items, each of M rows, gives the rows of one 2-D call on their A's rows, whatever the batch."""
    prec, n, k = ("bfloat16",) * 3, 520, 776
    a, b = _operands(torch, 4096, n, k, prec, seed=1)
    whole = torch.empty(4096, n, device="cuda", dtype=torch.bfloat16)
    _invariant(4096, n, k, prec).execute(a, b, whole)
    for batch, m in ((1, 7), (3, 100), (8, 512), (64, 64)):
        c = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        bs = b.t().expand(batch, n, k).contiguous().transpose(1, 2)  # B of every item, column-major
        _invariant(m, n, k, prec).execute(a[:batch * m].view(batch, m, k), bs, c)
        assert torch.equal(c.view(batch * m, n), whole[:batch * m]), (batch, m)


def test_a_groups_rows_do_not_depend_on_the_routing(torch):
    """Rows that fall in the same group under two routings (a group of 3 rows or of 600) are bitwise the same."""
    prec, n, k, groups = ("bfloat16",) * 3, 768, 520, 4
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = torch.randn(1300, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(groups, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2)
    outs = []
    for ends in ((3, 1000, 1000, 1300), (600, 1000, 1100, 1300)):
        offsets = torch.tensor(ends, device="cuda", dtype=torch.int32)
        c = torch.full((1300, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        (Size(128, n, k) + Precision(*prec) + RCR + SM(900) + Grouped() + BatchInvariant()).execute(a, b, c, offsets=offsets)
        outs.append(c)
    for rows in (slice(0, 3), slice(600, 1000), slice(1100, 1300)):  # the same group in both routings
        assert torch.equal(outs[0][rows], outs[1][rows]), rows
    ref = a[600:1000].double() @ b[1].double()
    assert float((outs[1][600:1000].double() - ref).norm() / ref.norm()) < 1e-2
