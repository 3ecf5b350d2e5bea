"""Scaled FP8 on a GPU (issue 47): execute(..., scale_a=, scale_b=) with scales per tensor (numbers or one value
on the device), per row of A and column of B, and DeepSeek's blockwise recipe (A 1 x 128, B 128 x 128) in
torch.nn.functional.scaled_mm's layouts and contiguous ones, against a float64 reference of the scaled operands,
beside cuBLAS's blockwise GEMM where torch has it. Marked ``gpu``."""

from __future__ import annotations

import pytest

from blasdx import (
    SM,
    Accumulation,
    ArgumentError,
    Arrangement,
    Block,
    BlockDim,
    Grid,
    LeadingDimension,
    Precision,
    Size,
    Stages,
    Tile,
)

from .gpu_support import torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
ACCURATE = 1.8e-4  # as test_gpu_fp8_accumulation: float32 partial sums every 128 of k
BOUND = {"float32": ACCURATE, "float16": 2e-3, "bfloat16": 1e-2}


def _data(torch, m, n, k, fp8=("float8_e4m3", "float8_e4m3"), seed=0):
    """FP8 A (m, k) row-major and B (k, n) column-major, and blockwise scales of 2^-8 .. 2^8 varying per block."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    a = (torch.randn(m, k, device="cuda", generator=gen) * 0.5).to(dtype[fp8[0]])
    b = (torch.randn(n, k, device="cuda", generator=gen) * 0.5).to(dtype[fp8[1]]).t()
    kb, nb = -(-k // 128), -(-n // 128)
    sa = torch.exp2(torch.randint(-8, 9, (m, kb), device="cuda", generator=gen).float())
    sb = torch.exp2(torch.randint(-8, 9, (kb, nb), device="cuda", generator=gen).float())
    return a, b, sa, sb


def _reference(torch, a, b, sa=None, sb=None, kind_a="block", kind_b="block"):
    """float64 (scale_a A) @ (scale_b B) for each recipe."""
    m, k = a.shape
    n = b.shape[1]
    ad, bd = a.double(), b.double()
    rows, ks, cols = torch.arange(m, device="cuda"), torch.arange(k, device="cuda"), torch.arange(n, device="cuda")
    if sa is not None:
        s = sa.double()
        ad = ad * {"tensor": lambda: s.reshape(()), "row": lambda: s.reshape(m, 1),
                   "block": lambda: s[rows[:, None], ks[None, :] // 128]}[kind_a]()
    if sb is not None:
        s = sb.double()
        bd = bd * {"tensor": lambda: s.reshape(()), "col": lambda: s.reshape(1, n),
                   "block": lambda: s[ks[:, None] // 128, cols[None, :] // 128]}[kind_b]()
    return ad @ bd


def _error(torch, c, ref):
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


def _grid(m, n, k, prec=("float8_e4m3", "float8_e4m3", "float32"), *more):
    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Grid()
    for op in more:
        desc = desc + op
    return desc


SHAPES = [(1024, 768, 4096), (712, 520, 1000), (256, 256, 8192)]


@pytest.mark.parametrize("size", SHAPES, ids=["tma", "ragged", "split-k"])
@pytest.mark.parametrize("layout", ["scaled_mm", "contiguous"])
def test_blockwise_scales_ride_the_promotion(size, layout):
    torch = torch_with_cuda()
    m, n, k = size
    a, b, sa, sb = _data(torch, m, n, k)
    if layout == "scaled_mm":  # A's (m, k/128) strides (1, m); B's (k/128, n/128) strides (1, k/128)
        sa, sb = sa.t().contiguous().t(), sb.t().contiguous().t()
    ref = _reference(torch, a, b, sa, sb)
    c = torch.full((m, n), float("nan"), device="cuda")
    _grid(m, n, k).execute(a, b, c, scale_a=sa, scale_b=sb)
    err = _error(torch, c, ref)
    assert err <= ACCURATE, err


@pytest.mark.parametrize("tile", [(128, 192, 128), (128, 160, 128), (128, 256, 128)], ids=["192", "160", "256"])
@pytest.mark.parametrize("aligned", [True, False], ids=["tma", "cp-async"])
def test_blockwise_scales_on_tiles_over_two_column_blocks(tile, aligned):
    """Tiles wider than a column block of B's scales (K tiles promoted one at a time, each column by its block's
    scale): tiles from the start and the middle of a block, the last one past n with no next block, odd k; by TMA,
    and on arrays one byte off (cp.async)."""
    torch = torch_with_cuda()
    m, n, k = 300, 1000, 1040
    if aligned:
        a, b, sa, sb = _data(torch, m, n, k, seed=11)
        more = ()
    else:
        a_store, b_store, sa, sb = _data(torch, m, n, k + 1, seed=11)
        a, b = a_store[:, 1:], b_store[1:, :]
        more = (LeadingDimension(k + 1, k + 1, n),)
    ref = _reference(torch, a, b, sa, sb)
    c = torch.full((m, n), float("nan"), device="cuda")
    desc = _grid(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), Tile(*tile), *more)
    assert not desc.plan.tile.promotes_in_pairs
    desc.execute(a, b, c, scale_a=sa, scale_b=sb)
    assert _error(torch, c, ref) <= ACCURATE


@pytest.mark.parametrize("scaled", [True, False], ids=["blockwise", "unscaled"])
def test_a_block_with_an_idle_warpgroup_promotes_by_the_generic_loop(scaled):
    """Tile(64, 128, 128) on 256 threads: one warpgroup has no tile, so the promoted TMA loop (promotes_one_tile)
    does not run; the generic loop still promotes every K tile, with blockwise scales and without."""
    torch = torch_with_cuda()
    m, n, k = 256, 256, 512
    a, b, sa, sb = _data(torch, m, n, k, seed=21)
    desc = _grid(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), Tile(64, 128, 128), BlockDim(256))
    assert not desc.plan.tile.promotes_one_tile and desc.plan.tile.promote_k > 0
    c = torch.full((m, n), float("nan"), device="cuda")
    if scaled:
        desc.execute(a, b, c, scale_a=sa, scale_b=sb)
        ref = _reference(torch, a, b, sa, sb)
    else:
        desc.execute(a, b, c)
        ref = _reference(torch, a, b)
    assert _error(torch, c, ref) <= ACCURATE


@pytest.mark.parametrize("kinds", [("block", "block"), ("tensor", "tensor"), ("row", "col")])
@pytest.mark.parametrize("out", ["float32", "bfloat16"])
def test_the_suggested_wide_tile_takes_every_recipe(kinds, out):
    """A problem whose waves take 128 x 192 tiles (wave_fitted_promoted_cols) scales and promotes as 128 x 128."""
    torch = torch_with_cuda()
    m, n, k = 2048, 3000, 1024
    a, b, _, _ = _data(torch, m, n, k, seed=12)
    gen = torch.Generator(device="cuda").manual_seed(13)
    shapes = {"tensor": (1,), "row": (m, 1), "col": (n,), "block": None}
    block_shape = {"a": (m, k // 128), "b": (k // 128, -(-n // 128))}
    sa = torch.exp2(torch.randint(-8, 9, shapes[kinds[0]] or block_shape["a"], device="cuda", generator=gen).float())
    sb = torch.exp2(torch.randint(-8, 9, shapes[kinds[1]] or block_shape["b"], device="cuda", generator=gen).float())
    ref = _reference(torch, a, b, sa, sb, *kinds)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[out]
    desc = _grid(m, n, k, ("float8_e4m3", "float8_e4m3", out))
    assert (desc.plan.tile.m, desc.plan.tile.n) == (128, 192)
    wide = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    desc.execute(a, b, wide, scale_a=sa, scale_b=sb)
    assert _error(torch, wide, ref) <= BOUND[out]
    narrow = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    (desc + Tile(128, 128, 128)).execute(a, b, narrow, scale_a=sa, scale_b=sb)
    assert _error(torch, wide, narrow.double()) <= (1e-6 if out == "float32" else 8e-3)


@pytest.mark.parametrize("fp8", [("float8_e4m3", "float8_e5m2"), ("float8_e5m2", "float8_e4m3")])
@pytest.mark.parametrize("out", ["float32", "bfloat16", "float16"])
def test_blockwise_scales_both_formats_every_output_with_bias_and_hook(fp8, out):
    torch = torch_with_cuda()
    m, n, k = 384, 256, 2048
    a, b, sa, sb = _data(torch, m, n, k, fp8, seed=1)
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[out]
    sb = sb / 64  # keep float16 outputs in range
    bias = torch.randn(n, device="cuda").to(dtype)
    ref = torch.relu(_reference(torch, a, b, sa, sb) + bias.double())
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    _grid(m, n, k, (*fp8, out)).execute(a, b, c, scale_a=sa, scale_b=sb, bias=bias, epilogue="relu")
    assert _error(torch, c, ref) <= BOUND[out]


@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("row", "col"), ("row", "tensor"), ("block", "col"),
                                   ("tensor", "block")])
@pytest.mark.parametrize("fast", [False, True])
def test_scales_per_tensor_row_and_column_on_every_accumulation(kinds, fast):
    torch = torch_with_cuda()
    kind_a, kind_b = kinds
    if fast and "block" in kinds:
        pytest.skip("blockwise scales need the promotion (refused: test_scales_refused_before_launch)")
    m, n, k = 512, 384, 4096
    a, b, _, _ = _data(torch, m, n, k, seed=2)
    gen = torch.Generator(device="cuda").manual_seed(3)
    shapes = {"tensor": (1,), "row": (m, 1), "col": (n,), "block": None}
    kb, nb = k // 128, -(-n // 128)
    block_shape = {"a": (m, kb), "b": (kb, nb)}
    sa = torch.exp2(torch.randint(-8, 9, shapes[kind_a] or block_shape["a"], device="cuda", generator=gen).float())
    sb = torch.exp2(torch.randint(-8, 9, shapes[kind_b] or block_shape["b"], device="cuda", generator=gen).float())
    ref = _reference(torch, a, b, sa, sb, kind_a, kind_b)
    c = torch.full((m, n), float("nan"), device="cuda")
    desc = _grid(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), *((Accumulation("fast"),) if fast else ()))
    desc.execute(a, b, c, scale_a=sa, scale_b=sb)
    assert _error(torch, c, ref) <= (5e-3 if fast else ACCURATE)


def test_number_scales_fold_into_alpha_on_every_kind():
    torch = torch_with_cuda()
    m, n, k = 128, 128, 256
    a, b, _, _ = _data(torch, m, n, k, seed=4)
    ref = 0.5 * 4.0 * 2.0 * (a.double() @ b.double())
    for desc in (_grid(m, n, k), Size(m, n, k) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Block()):
        c = torch.full((m, n), float("nan"), device="cuda")
        desc.execute(a, b, c, alpha=0.5, scale_a=4.0, scale_b=2)
        assert _error(torch, c, ref) <= ACCURATE


@pytest.mark.parametrize("stages", [(), (Stages(2),)], ids=["overlapped", "two-stages"])
def test_blockwise_scales_without_tma(stages):
    """Arrays one byte off alignment: the cp.async K loop promotes and scales the same way (two stages:
    multiply_scaled)."""
    torch = torch_with_cuda()
    m, n, k = 256, 384, 2048
    a_store, b_store, sa, sb = _data(torch, m, n, k + 1, seed=5)
    a, b = a_store[:, 1:], b_store[1:, :]
    sa, sb = sa[:, : k // 128].contiguous(), sb[: k // 128].contiguous()
    ref = _reference(torch, a, b, sa, sb)
    c = torch.full((m, n), float("nan"), device="cuda")
    _grid(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), LeadingDimension(k + 1, k + 1, n), *stages).execute(
        a, b, c, scale_a=sa, scale_b=sb)
    assert _error(torch, c, ref) <= ACCURATE


def test_scales_refused_before_launch():
    torch = torch_with_cuda()
    m, n, k = 256, 256, 512
    a, b, sa, sb = _data(torch, m, n, k, seed=6)
    c = torch.full((m, n), float("nan"), device="cuda")
    grid = _grid(m, n, k)
    cases = [
        (dict(scale_a=sa.double(), scale_b=sb), "FP8 scales are float32"),
        (dict(scale_a=sa[:, :2], scale_b=sb), r"shape \(256, 2\), which is no FP8 scaling recipe"),
        (dict(scale_a=sa, scale_b=sb.t()), r"scale_b has shape \(2, 4\)|strides"),
        (dict(scale_a=sa.cpu(), scale_b=sb), "tensor on cpu"),
        (dict(scale_a=sa, scale_b=float("inf")), "not finite"),
        (dict(scale_a=sa.repeat(1, 2)[:, ::2], scale_b=sb), r"strides \(8, 2\)"),
    ]
    for kwargs, message in cases:
        c.fill_(float("nan"))
        with pytest.raises(ArgumentError, match=message):
            grid.execute(a, b, c, **kwargs)
        assert bool(torch.isnan(c).all())  # nothing launched
    with pytest.raises(ArgumentError, match=r"remove Accumulation\('fast'\)"):
        (grid + Accumulation("fast")).execute(a, b, c, scale_a=sa, scale_b=sb)
    with pytest.raises(ArgumentError, match=r"K tiles go in pairs.*Tile\(128, 128, 128\)"):
        (grid + Tile(128, 96, 128)).execute(a, b, c, scale_a=sa, scale_b=sb)
    with pytest.raises(ArgumentError, match="load hooks"):
        grid.execute(a, b, c, scale_a=sa, scale_b=sb, a_load="negate")
    block = Size(64, 256, 256) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Block()
    a64, b64, sa64, sb64 = _data(torch, 64, 256, 256, seed=7)
    c64 = torch.full((64, 256), float("nan"), device="cuda")
    for desc, kwargs, message in [
        (block, dict(scale_a=sa64, scale_b=sb64), "one column block of B"),
        (block + Accumulation("fast"), dict(scale_a=sa64, scale_b=2.0),
         r"k is 256 and Accumulation\('fast'\)"),
        (block, dict(scale_a=sa64, scale_b=1.0, a_load="negate"), "load hooks"),
    ]:
        with pytest.raises(ArgumentError, match=message):
            desc.execute(a64, b64, c64, **kwargs)
        assert bool(torch.isnan(c64).all())
    f16 = Size(m, n, k) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grid()
    with pytest.raises(ArgumentError, match="scale FP8 operands"):
        f16.execute(a.half(), b.half(), c, scale_a=sa, scale_b=sb)


def _block(m, n, k, prec=("float8_e4m3", "float8_e4m3", "float32"), *more):
    desc = Size(m, n, k) + Precision(*prec) + RCR + SM(900) + Block()
    for op in more:
        desc = desc + op
    return desc


def _batch(torch, batch, m, n, k, seed, fp8=("float8_e4m3", "float8_e4m3")):
    """A batch of FP8 A (m, k) and B (k, n) column-major, and blockwise scales shared by every item."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dtype = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    a = (torch.randn(batch, m, k, device="cuda", generator=gen) * 0.5).to(dtype[fp8[0]])
    b = (torch.randn(batch, n, k, device="cuda", generator=gen) * 0.5).to(dtype[fp8[1]]).transpose(1, 2)
    sa = torch.exp2(torch.randint(-8, 9, (m, -(-k // 128)), device="cuda", generator=gen).float())
    sb = torch.exp2(torch.randint(-8, 9, (-(-k // 128), -(-n // 128)), device="cuda", generator=gen).float())
    return a, b, sa, sb


def _batch_reference(torch, a, b, sa, sb, kind_a="block", kind_b="block"):
    return torch.stack([_reference(torch, a[i], b[i], sa, sb, kind_a, kind_b) for i in range(a.shape[0])])


@pytest.mark.parametrize("size, more", [
    ((64, 128, 512), ()),  # wgmma, each promotion's partial sums scaled
    ((128, 64, 384), ()),  # two warpgroups
    ((64, 40, 256), ()),  # wgmma, n inside one tile
    ((64, 128, 128), (Accumulation("fast"),)),  # one K block: the products scaled once
    ((48, 40, 128), ()),  # mma.sync tiles, one K block; rows past m read the last row's scale
], ids=["wgmma", "two-warpgroups", "edge-columns", "fast-one-k-block", "mma-edges"])
@pytest.mark.parametrize("layout", ["scaled_mm", "contiguous"])
def test_block_batched_blockwise_scales(size, more, layout):
    """Block()'s batched kernel: one set of blockwise scales for every item of the batch."""
    torch = torch_with_cuda()
    m, n, k = size
    a, b, sa, sb = _batch(torch, 24, m, n, k, seed=11)
    if layout == "scaled_mm":
        sa, sb = sa.t().contiguous().t(), sb.t().contiguous().t()
    c = torch.full((24, m, n), float("nan"), device="cuda")
    _block(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), *more).execute(a, b, c, scale_a=sa, scale_b=sb)
    assert _error(torch, c, _batch_reference(torch, a, b, sa, sb)) <= ACCURATE


@pytest.mark.parametrize("kinds", [("tensor", "tensor"), ("row", "col"), ("block", "col"), ("tensor", "block")])
@pytest.mark.parametrize("out", ["float32", "bfloat16", "float16"])
def test_block_batched_scales_every_recipe_and_output_with_bias_and_hook(kinds, out):
    torch = torch_with_cuda()
    kind_a, kind_b = kinds
    m, n, k = 64, 128, 256
    a, b, sa, sb = _batch(torch, 16, m, n, k, seed=12, fp8=("float8_e5m2", "float8_e4m3"))
    gen = torch.Generator(device="cuda").manual_seed(13)
    shapes = {"tensor": (1,), "row": (m,), "col": (1, n)}
    if kind_a != "block":
        sa = torch.exp2(torch.randint(-4, 5, shapes[kind_a], device="cuda", generator=gen).float())
    if kind_b != "block":
        sb = torch.exp2(torch.randint(-4, 5, shapes[kind_b], device="cuda", generator=gen).float())
    sb = sb / 64  # keep float16 outputs in range
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[out]
    bias = torch.randn(n, device="cuda").to(dtype)
    c = torch.randn(16, m, n, device="cuda").to(dtype)
    ref = torch.relu(_batch_reference(torch, a, b, sa, sb, kind_a, kind_b) + 0.5 * c.double() + bias.double())
    _block(m, n, k, ("float8_e5m2", "float8_e4m3", out)).execute(a, b, c, beta=0.5, scale_a=sa, scale_b=sb, bias=bias,
                                                                 epilogue="relu")
    assert _error(torch, c, ref) <= BOUND[out]


def test_block_scales_not_along_k_take_load_hooks_and_fast_accumulation():
    torch = torch_with_cuda()
    m, n, k = 64, 256, 384
    a, b, _, _ = _batch(torch, 8, m, n, k, seed=14)
    sa = torch.exp2(torch.randint(-4, 5, (m, 1), device="cuda").float())
    sb = torch.exp2(torch.randint(-4, 5, (n,), device="cuda").float())
    c = torch.full((8, m, n), float("nan"), device="cuda")
    _block(m, n, k, ("float8_e4m3", "float8_e4m3", "float32"), Accumulation("fast")).execute(
        a, b, c, scale_a=sa, scale_b=sb, a_load="negate")
    assert _error(torch, c, -_batch_reference(torch, a, b, sa, sb, "row", "col")) <= 5e-3


def test_a_bound_scaled_launch_reads_each_calls_scales_and_numbers():
    """The second call of a signature takes the bound launch (blasdx.runtime.launch.scales_signature): new scale
    arrays and new numbers each call, each result right; C overlapping a scale is refused there too."""
    torch = torch_with_cuda()
    from blasdx.pipeline import BOUND_LAUNCHES

    m, n, k = 256, 384, 1024
    a, b, sa, sb = _data(torch, m, n, k, seed=8)
    grid = _grid(m, n, k)
    for step in range(3):
        sa_now, sb_now = sa * 2.0**step, sb[:, :1].reshape(-1, 1).repeat(1, sb.shape[1]).contiguous() * 0.5**step
        c = torch.full((m, n), float("nan"), device="cuda")
        before = len(BOUND_LAUNCHES.values())
        grid.execute(a, b, c, alpha=1.5, scale_a=sa_now, scale_b=sb_now)
        if step:
            assert len(BOUND_LAUNCHES.values()) == before  # no new binding: the bound launch ran
        assert _error(torch, c, 1.5 * _reference(torch, a, b, sa_now, sb_now)) <= ACCURATE
        c.fill_(float("nan"))
        grid.execute(a, b, c, scale_a=sa_now, scale_b=3.0)
        assert _error(torch, c, 3.0 * _reference(torch, a, b, sa_now, None)) <= ACCURATE
    both = torch.empty(m * n + m * (k // 128), device="cuda")
    c, inside = both[: m * n].view(m, n), both[m * n - 4:].view(-1)[: m * (k // 128)].view(m, k // 128)
    with pytest.raises(ArgumentError, match="overlaps C"):
        grid.execute(a, b, c, scale_a=inside, scale_b=sb)


def test_the_torch_op_takes_scales_and_compiles_without_a_graph_break():
    torch = torch_with_cuda()
    import blasdx.pytorch

    m, n, k = 256, 384, 1024
    a, b, sa, sb = _data(torch, m, n, k, seed=9)
    grid = _grid(m, n, k, ("float8_e4m3", "float8_e4m3", "bfloat16"))
    ref = 2.0 * _reference(torch, a, b, sa, sb)
    out = blasdx.pytorch.gemm(grid, a, b, scale_a=sa, scale_b=sb, alpha=0.5, epilogue=None) * 4.0
    assert out.dtype == torch.bfloat16 and _error(torch, out, ref) <= 1e-2

    def layer(a, b, sa, sb):
        return blasdx.pytorch.gemm(grid, a, b, scale_a=sa, scale_b=sb, alpha=2.0)

    compiled = torch.compile(layer, fullgraph=True)
    assert _error(torch, compiled(a, b, sa, sb), ref) <= 1e-2
    assert _error(torch, blasdx.pytorch.gemm(grid, a, b, scale_a=2.0, scale_b=sb), 2.0 * _reference(torch, a, b, None, sb,
                                                                                                      kind_b="block")) <= 1e-2
    with pytest.raises(ArgumentError, match="FP8 scales are float32"):
        blasdx.pytorch.gemm(grid, a, b, scale_a=sa.half(), scale_b=sb)


DEVICE_K_LOOP = r'''
struct block_scale {
  const float* a;  // A's scales of this K block, by row (column-major (M, K / 128))
  float b;
  __device__ __forceinline__ float operator()(int r, int) const { return a[r] * b; }
};
extern "C" __global__ void scaled_k_loop(const gemm::a_t* a, const gemm::b_t* b, float* c, const float* scale_a,
                                         const float* scale_b, int blocks, int shift) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* ta = reinterpret_cast<gemm::a_t*>(smem + shift + gemm::a_offset);  // shift 16: not 1024-aligned, no wgmma
  auto* tb = reinterpret_cast<gemm::b_t*>(smem + shift + gemm::b_offset);
  gemm::accumulator acc = gemm::make_accumulator();
  for (int kb = 0; kb < blocks; ++kb) {
    gemm::load_a(a + kb * gemm::k, blocks * gemm::k, ta);
    gemm::load_b(b + kb * gemm::k, blocks * gemm::k, tb);
    gemm::copy_wait();
    gemm::multiply_scaled(ta, tb, acc, block_scale{scale_a + kb * gemm::m, scale_b[kb]});
    __syncthreads();
  }
  gemm::store(acc, c, gemm::n, 1.0f, 0.0f);
}
'''


@pytest.mark.parametrize("shift, fast", [(0, False), (16, False), (0, True)], ids=["wgmma-promoted", "mma-fallback", "fast"])
def test_device_api_multiplies_with_a_scale_per_k_block(shift, fast):
    """multiply_scaled in a user's K loop of 128-deep blocks: the promoted wgmma scales each promotion; the mma.sync
    fallback and Accumulation('fast') scale a temporary accumulator's products once a call."""
    torch = torch_with_cuda()
    import blasdx

    m, n, k, blocks = 128, 128, 128, 16
    a, b, sa, sb = _data(torch, m, n, k * blocks, seed=10)
    sb = sb[:, :1].contiguous()  # one column block
    desc = Size(m, n, k) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Block()
    if fast:
        desc = desc + Accumulation("fast")
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + DEVICE_K_LOOP, "scaled_k_loop")
    c = torch.full((m, n), float("nan"), device="cuda")
    import cupy

    kernel(1, (desc.max_threads_per_block, 1, 1),
           (cupy.from_dlpack(a.view(torch.uint8)), cupy.from_dlpack(b.t().contiguous().view(torch.uint8)),
            cupy.from_dlpack(c), cupy.from_dlpack(sa.t().contiguous()), cupy.from_dlpack(sb), np_int(blocks),
            np_int(shift)), shared_mem=desc.shared_memory_size_ab + shift)
    torch.cuda.synchronize()
    assert _error(torch, c, _reference(torch, a, b, sa, sb)) <= ACCURATE  # fast too: a call's 128 of k, then float32


def np_int(x):
    import numpy as np

    return np.int32(x)
