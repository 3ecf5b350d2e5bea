"""Grouped() on a GPU (issue 48): C_g = alpha A_g B_g + beta C_g over groups of rows cut by int32 offsets on the
device, against a float64 loop over the groups of the same (rounded) inputs; skewed, empty and one-row groups,
1 to 1024 groups, bias per group and for all, hooks, a CUDA graph replayed on other offsets, beside
torch._grouped_mm; bad arguments refused before launch and bad offsets' values stopped on the device.
Marked ``gpu``."""

from __future__ import annotations

import pytest

from blasdx import SM, ArgumentError, Arrangement, Grid, Grouped, Precision, Size, Tile

from .gpu_support import assert_stops_with_a_trap, torch_with_cuda

pytestmark = pytest.mark.gpu

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BOUND = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1e-2}


def _dtype(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _operands(torch, counts, n, k, prec=("bfloat16", "bfloat16", "bfloat16"), b_row_major=False, seed=0):
    """A (rows, k), B (groups, k, n) (column-major per group unless ``b_row_major``) and the offsets of ``counts``."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rows, groups = sum(counts), len(counts)
    a = torch.randn(rows, k, device="cuda", generator=gen).to(_dtype(torch, prec[0]))
    if b_row_major:
        b = torch.randn(groups, k, n, device="cuda", generator=gen).to(_dtype(torch, prec[1]))
    else:
        b = torch.randn(groups, n, k, device="cuda", generator=gen).to(_dtype(torch, prec[1])).transpose(1, 2)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    return a, b, offsets


def _reference(torch, a, b, offsets, c0=None, alpha=1.0, beta=0.0, bias=None):
    """float64 C of every group's rows; rows past the last offset keep c0 (None: NaN)."""
    rows, n = a.shape[0], b.shape[2]
    out = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.float64) if c0 is None else c0.double().clone()
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        if end > begin:
            value = alpha * (a[begin:end].double() @ b[g].double())
            if beta:
                value = value + beta * c0[begin:end].double()
            if bias is not None:
                value = value + (bias[g] if bias.dim() == 2 else bias).double()
            out[begin:end] = value
        begin = end
    return out


def _error(torch, c, ref):
    inside = ~torch.isnan(ref)
    assert bool(torch.isnan(c[~inside]).all()), "rows past the last group were written"
    return float(torch.linalg.norm(c[inside].double() - ref[inside]) / torch.linalg.norm(ref[inside]))


def _grouped(n, k, prec=("bfloat16", "bfloat16", "bfloat16"), m=256, arrangement=RCR):
    return Size(m, n, k) + Precision(*prec) + arrangement + SM(900) + Grouped()


SKEWED = [300, 0, 1, 77, 0, 129, 512, 3]  # empty, one-row and ragged groups


@pytest.mark.parametrize("prec", [("bfloat16", "bfloat16", "bfloat16"), ("float16", "float16", "float32"),
                                  ("bfloat16", "bfloat16", "float32"), ("float16", "float16", "float16")])
def test_skewed_groups_every_output(prec):
    torch = torch_with_cuda()
    n, k = 384, 320
    a, b, offsets = _operands(torch, SKEWED + [40], n, k, prec)  # C has 40 rows past the last offset
    offsets = offsets[:-1].contiguous()
    b = b[:-1]
    c = torch.full((a.shape[0], n), float("nan"), device="cuda", dtype=_dtype(torch, prec[2]))
    _grouped(n, k, prec).execute(a, b, c, offsets=offsets)
    assert _error(torch, c, _reference(torch, a, b, offsets)) <= BOUND[prec[2]]


@pytest.mark.parametrize("prec", [("float8_e4m3", "float8_e5m2", "bfloat16"), ("tfloat32", "tfloat32", "float32"),
                                  ("int8", "int8", "int32")], ids=["fp8", "tf32", "int8"])
def test_fp8_tf32_and_int8_groups(prec):
    """The other wgmma precisions (FP8 with its partial sums promoted), against float64 of the same values (tf32:
    the inputs rounded by the tensor cores, within tf32's bound; int8: exactly)."""
    torch = torch_with_cuda()
    n, k = 256, 384
    counts = [130, 0, 1, 257, 64]
    gen = torch.Generator(device="cuda").manual_seed(9)
    rows, groups = sum(counts), len(counts)
    if prec[0] == "int8":
        a = torch.randint(-8, 8, (rows, k), device="cuda", generator=gen, dtype=torch.int8)
        b = torch.randint(-8, 8, (groups, n, k), device="cuda", generator=gen, dtype=torch.int8).transpose(1, 2)
    else:
        dtype = {"float8_e4m3": torch.float8_e4m3fn, "tfloat32": torch.float32}
        a = (torch.randn(rows, k, device="cuda", generator=gen) * 0.5).to(dtype[prec[0]])
        b = (torch.randn(groups, n, k, device="cuda", generator=gen) * 0.5).to(
            torch.float8_e5m2 if prec[1] == "float8_e5m2" else torch.float32).transpose(1, 2)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    out_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32, "int32": torch.int32}[prec[2]]
    c = torch.zeros(rows, n, device="cuda", dtype=out_dtype)
    _grouped(n, k, prec).execute(a, b, c, offsets=offsets)
    begin = 0
    ref = torch.zeros(rows, n, device="cuda", dtype=torch.float64)
    for g, end in enumerate(offsets.tolist()):
        ref[begin:end] = a[begin:end].double() @ b[g].double()
        begin = end
    if prec[0] == "int8":
        assert torch.equal(c.double(), ref)
    else:
        bound = {"bfloat16": 1e-2, "float32": 5e-3}[prec[2]]
        assert float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)) <= bound


@pytest.mark.parametrize("bias_per_group", [True, False])
def test_alpha_beta_bias_and_hooks(bias_per_group):
    torch = torch_with_cuda()
    n, k = 256, 512
    a, b, offsets = _operands(torch, SKEWED, n, k, ("float16", "float16", "float32"), seed=1)
    groups = len(SKEWED)
    bias = torch.randn(groups, n, device="cuda") if bias_per_group else torch.randn(n, device="cuda")
    c0 = torch.randn(a.shape[0], n, device="cuda")
    c = c0.clone()
    _grouped(n, k, ("float16", "float16", "float32")).execute(a, b, c, alpha=2.0, beta=-0.5, offsets=offsets,
                                                              bias=bias, epilogue="relu")
    ref = torch.relu(_reference(torch, a, b, offsets, c0, 2.0, -0.5, bias))
    assert _error(torch, c, ref) <= BOUND["float32"]


@pytest.mark.parametrize("groups, rows", [(1, 1000), (1024, 3000), (7, 1000)], ids=["one", "1024", "seven"])
def test_one_to_1024_groups(groups, rows):
    torch = torch_with_cuda()
    gen = torch.Generator(device="cpu").manual_seed(groups)
    cuts = torch.sort(torch.randint(0, rows + 1, (groups - 1,), generator=gen)).values.tolist()
    counts = [end - begin for begin, end in zip([0] + cuts, cuts + [rows])]
    n, k = 128, 128
    a, b, offsets = _operands(torch, counts, n, k, seed=2)
    c = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    _grouped(n, k, m=64).execute(a, b, c, offsets=offsets)
    assert _error(torch, c, _reference(torch, a, b, offsets)) <= BOUND["bfloat16"]


def test_row_major_b_and_all_rows_in_one_group_of_many():
    torch = torch_with_cuda()
    n, k = 200, 264  # n not a multiple of the tile's
    counts = [0, 0, 777, 0]
    a, b, offsets = _operands(torch, counts, n, k, ("float16", "float16", "float32"), b_row_major=True, seed=3)
    c = torch.full((777, n), float("nan"), device="cuda")
    _grouped(n, k, ("float16", "float16", "float32"), arrangement=RRR).execute(a, b, c, offsets=offsets)
    assert _error(torch, c, _reference(torch, a, b, offsets)) <= BOUND["float32"]


def test_matches_torch_grouped_mm():
    torch = torch_with_cuda()
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch without _grouped_mm")
    n, k = 512, 1024
    a, b, offsets = _operands(torch, [640, 8, 0, 1000, 352], n, k, seed=4)
    c = torch.empty(a.shape[0], n, device="cuda", dtype=torch.bfloat16)
    _grouped(n, k).execute(a, b, c, offsets=offsets)
    theirs = torch._grouped_mm(a, b, offs=offsets)
    assert float(torch.linalg.norm((c - theirs).double()) / torch.linalg.norm(theirs.double())) <= 1e-2


def test_the_activations_gradient_is_a_grouped_product_of_b_transposed():
    """dA_g = dC_g B_g^T: Grouped() on B's transpose (the same memory, row-major per group)."""
    torch = torch_with_cuda()
    n, k = 384, 256  # the forward's: A (rows, k), B (E, k, n)
    a, b, offsets = _operands(torch, SKEWED, n, k, seed=7)
    dc = torch.randn(a.shape[0], n, device="cuda", dtype=torch.bfloat16)
    da = torch.full((a.shape[0], k), float("nan"), device="cuda", dtype=torch.float32)
    desc = Size(256, k, n) + Precision("bfloat16", "bfloat16", "float32") + RRR + SM(900) + Grouped()
    desc.execute(dc, b.transpose(1, 2), da, offsets=offsets)
    assert _error(torch, da, _reference(torch, dc, b.transpose(1, 2), offsets)) <= BOUND["float32"]


def _ragged_k_reference(torch, a, b, offsets, c0, alpha=1.0, beta=0.0):
    out = c0.double().clone() * beta
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        out[g] += alpha * (a[:, begin:end].double() @ b[begin:end].double())
        begin = end
    return out


@pytest.mark.parametrize("prec", [("bfloat16", "bfloat16", "float32"), ("float16", "float16", "float16")])
def test_the_weights_gradient_groups_k(prec):
    """dB_g = X_g^T dC_g (Grouped('k')): A = X.T (m, rows) column-major, B = dC (rows, n) row-major, C (E, m, n);
    groups of any rows (the last K tile's rows past the group zeroed), an empty group's C scaled by beta."""
    torch = torch_with_cuda()
    m, n = 320, 384
    counts = [300, 0, 1, 77, 0, 129, 64, 3]
    rows, groups = sum(counts), len(counts)
    gen = torch.Generator(device="cuda").manual_seed(8)
    x = torch.randn(rows, m, device="cuda", generator=gen).to(_dtype(torch, prec[0]))
    dc = torch.randn(rows, n, device="cuda", generator=gen).to(_dtype(torch, prec[1]))
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    c0 = torch.randn(groups, m, n, device="cuda").to(_dtype(torch, prec[2]))
    c = c0.clone()
    desc = (Size(m, n, 128) + Precision(*prec) + Arrangement("col_major", "row_major", "row_major") + SM(900)
            + Grouped("k"))
    desc.execute(x.t(), dc, c, alpha=2.0, beta=0.5, offsets=offsets)
    ref = _ragged_k_reference(torch, x.t(), dc, offsets, c0, 2.0, 0.5)
    assert float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)) <= BOUND[prec[2]]
    assert torch.equal(c[1], (c0[1].double() * 0.5).to(c.dtype))  # an empty group: beta * C
    if hasattr(torch, "_grouped_mm") and prec[0] == "bfloat16":
        theirs = torch._grouped_mm(x.t(), dc, offs=offsets)
        c.zero_()
        desc.execute(x.t(), dc, c, offsets=offsets)
        assert float(torch.linalg.norm((c - theirs).double()) / torch.linalg.norm(theirs.double())) <= 4e-3  # theirs bf16


@pytest.mark.parametrize("b_row_major", [False, True])
def test_the_torch_op_and_its_gradients(b_row_major):
    """blasdx.pytorch.grouped_gemm against a float64 loop over the groups, forward and backward (a, b, bias per
    group, relu), the rows past the last offset zero in out and in a's gradient; the same under
    torch.compile(fullgraph=True). (torch.autograd.gradcheck needs float64, which Grouped()'s wgmma kernels do not
    take: the float64 loop is the reference.)"""
    torch = torch_with_cuda()
    import blasdx.pytorch

    n, k, counts = 256, 192, [100, 0, 1, 150, 29]
    groups, rows = len(counts), sum(counts) + 20
    gen = torch.Generator(device="cuda").manual_seed(20)
    a = torch.randn(rows, k, device="cuda", generator=gen).bfloat16().requires_grad_()
    if b_row_major:
        base = torch.randn(groups, k, n, device="cuda", generator=gen).bfloat16().requires_grad_()
        b = base
    else:
        base = torch.randn(groups, n, k, device="cuda", generator=gen).bfloat16().requires_grad_()
        b = base.transpose(1, 2)
    bias = torch.randn(groups, n, device="cuda", generator=gen).bfloat16().requires_grad_()
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    weight = torch.randn(rows, n, device="cuda", generator=gen)
    desc = _grouped(n, k, arrangement=RRR if b_row_major else RCR)

    def reference():
        a64, b64, bias64 = (x.detach().double().requires_grad_() for x in (a, b, bias))
        out = torch.zeros(rows, n, device="cuda", dtype=torch.float64)
        begin = 0
        for g, end in enumerate(offsets.tolist()):
            out[begin:end] = torch.relu(1.5 * a64[begin:end] @ b64[g] + bias64[g])
            begin = end
        (out * weight.double()).sum().backward()
        return out, a64.grad, b64.grad, bias64.grad

    ref_out, ref_da, ref_db, ref_dbias = reference()

    def step(fn):
        for x in (a, base, bias):
            x.grad = None
        out = fn(a, b, offsets, bias)
        (out.float() * weight).sum().backward()
        return out, a.grad, (base.grad if b_row_major else base.grad.transpose(1, 2)), bias.grad

    def layer(a, b, offsets, bias):
        return blasdx.pytorch.grouped_gemm(desc, a, b, offsets, alpha=1.5, bias=bias, epilogue="relu")

    for fn in (layer, torch.compile(layer, fullgraph=True)):
        out, da, db, dbias = step(fn)
        assert bool((out[sum(counts):] == 0).all()) and bool((da[sum(counts):] == 0).all())
        for ours, theirs in ((out, ref_out), (da, ref_da), (db, ref_db), (dbias, ref_dbias)):
            assert float(torch.linalg.norm(ours.double() - theirs) / torch.linalg.norm(theirs)) <= 1e-2
    assert float(torch.linalg.norm(db[1].double())) == 0  # an empty group's weights get no gradient


def test_grouped_k_of_no_rows_writes_beta_c():
    """A call whose groups hold no rows (an expert-parallel rank that got no tokens): every group's C is beta * C."""
    torch = torch_with_cuda()
    m, n, groups = 128, 256, 4
    desc = Size(m, n, 64) + Precision("bfloat16", "bfloat16", "float32") + Arrangement("col_major", "row_major",
                                                                                        "row_major") + SM(900) + Grouped("k")
    x = torch.empty(0, m, device="cuda", dtype=torch.bfloat16)
    dc = torch.empty(0, n, device="cuda", dtype=torch.bfloat16)
    offsets = torch.zeros(groups, device="cuda", dtype=torch.int32)
    c0 = torch.randn(groups, m, n, device="cuda")
    c = c0.clone()
    desc.execute(x.t(), dc, c, beta=0.5, offsets=offsets)
    assert torch.equal(c, c0 * 0.5)
    c.fill_(float("nan"))
    desc.execute(x.t(), dc, c, offsets=offsets)
    assert bool((c == 0).all())


def test_the_torch_op_refuses_a_gradient_it_cannot_compute_before_any_work():
    torch = torch_with_cuda()
    import blasdx.pytorch

    a = torch.randn(64, 128, device="cuda").requires_grad_()
    b = torch.randn(2, 256, 128, device="cuda").transpose(1, 2).requires_grad_()  # column-major: tf32's forward runs
    offsets = torch.tensor([30, 64], device="cuda", dtype=torch.int32)
    tf32 = _grouped(256, 128, ("tfloat32", "tfloat32", "float32"))
    with pytest.raises(ArgumentError, match=r"gradient of a is .* cannot run"):  # dz b^T: row-major B, no tf32 wgmma
        blasdx.pytorch.grouped_gemm(tf32, a, b, offsets)
    blasdx.pytorch.grouped_gemm(tf32, a.detach(), b.detach(), offsets)  # without gradients it runs
    with pytest.raises(ArgumentError, match="gelu"):
        blasdx.pytorch.grouped_gemm(_grouped(256, 128, ("float16", "float16", "float32")),
                                    a.half().detach().requires_grad_(), b.detach().half(), offsets, epilogue="gelu")


def test_a_cuda_graph_replays_on_other_offsets():
    """One kernel for every routing: the offsets' values are read on the device, so a captured launch serves
    new ones."""
    torch = torch_with_cuda()
    n, k = 256, 256
    a, b, offsets = _operands(torch, [100, 200, 300, 400], n, k, seed=5)
    c = torch.full((1000, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    desc = _grouped(n, k)
    desc.execute(a, b, c, offsets=offsets)  # compiled and loaded before the capture
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        desc.execute(a, b, c, offsets=offsets)
    for counts in ([1000, 0, 0, 0], [0, 1, 998, 1], [250, 250, 250, 250]):
        offsets.copy_(torch.tensor(counts, device="cuda").cumsum(0))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _error(torch, c, _reference(torch, a, b, offsets)) <= BOUND["bfloat16"]


def test_a_bound_launch_takes_each_calls_offsets_and_pointers():
    """The second call of a signature takes the bound launch: new offsets (values and arrays), new A, B and C, each
    result right; C overlapping the offsets is refused there too."""
    torch = torch_with_cuda()
    from blasdx.pipeline import BOUND_LAUNCHES

    n, k = 256, 192
    desc = _grouped(n, k)
    for step, counts in enumerate(([50, 0, 450, 12], [0, 0, 0, 512], [128, 128, 128, 128])):
        a, b, offsets = _operands(torch, counts, n, k, seed=10 + step)
        c = torch.full((512, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        before = len(BOUND_LAUNCHES)
        desc.execute(a, b, c, offsets=offsets)
        if step:
            assert len(BOUND_LAUNCHES) == before  # the bound launch ran
        assert _error(torch, c, _reference(torch, a, b, offsets)) <= BOUND["bfloat16"]
    both = torch.zeros(512 * n, device="cuda", dtype=torch.bfloat16)
    inside = both[:8].view(torch.int32)  # four int32 offsets in C's memory
    with pytest.raises(ArgumentError, match="C overlaps offsets"):
        desc.execute(a, b, both.view(512, n), offsets=inside)


def test_bad_arguments_are_refused_before_launch():
    torch = torch_with_cuda()
    n, k = 128, 128
    a, b, offsets = _operands(torch, [10, 20, 30], n, k, seed=6)
    c = torch.full((60, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    desc = _grouped(n, k)
    cases = [
        (dict(offsets=offsets.long()), "int32"),
        (dict(offsets=offsets[:2]), r"shape \(2,\) but there are 3 groups"),
        (dict(offsets=offsets.cpu()), "cpu|host"),
        (dict(offsets=None), "needs offsets="),
        (dict(offsets=offsets, bias=torch.zeros(2, n, device="cuda", dtype=torch.bfloat16)), r"= \(3, 128\)"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ArgumentError, match=message):
            desc.execute(a, b, c, **kwargs)
    with pytest.raises(ArgumentError, match="C takes the rows of A"):
        desc.execute(a, b, c[:50], offsets=offsets)
    with pytest.raises(ArgumentError, match="use Grouped"):
        (Size(60, n, k) + Precision("bfloat16", "bfloat16", "bfloat16") + RCR + SM(900) + Grid()).execute(
            a, b[0], c, offsets=offsets)
    assert bool(torch.isnan(c).all())  # nothing launched


DECREASING = '''
import torch
from blasdx import SM, Arrangement, Grouped, Precision, Size
a = torch.randn(100, 64, device="cuda").half()
b = torch.randn(2, 64, 64, device="cuda").half()
c = torch.empty(100, 64, device="cuda", dtype=torch.float16)
desc = Size(64, 64, 64) + Precision("float16", "float16", "float16") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Grouped()
def launch():
    desc.execute(a, b, c, offsets=torch.tensor([{first}, {second}], device="cuda", dtype=torch.int32))
'''


RAGGED_K = '''
import torch
from blasdx import SM, Arrangement, Grouped, Precision, Size
x = torch.randn(100, 64, device="cuda").half()
dc = torch.randn(100, 64, device="cuda").half()
c = torch.empty(2, 64, 64, device="cuda", dtype=torch.float32)
desc = Size(64, 64, 64) + Precision("float16", "float16", "float32") + Arrangement("col_major", "row_major", "row_major") + SM(900) + Grouped("k")
def launch():
    desc.execute(x.t(), dc, c, offsets=torch.tensor([{first}, {second}], device="cuda", dtype=torch.int32))
'''


@pytest.mark.parametrize("script", [DECREASING, RAGGED_K], ids=["rows", "k"])
@pytest.mark.parametrize("first, second", [(60, 40), (60, 101)], ids=["decreasing", "past-the-rows"])
def test_bad_offsets_values_stop_the_kernel(script, first, second):
    torch_with_cuda()
    assert_stops_with_a_trap(script.format(first=first, second=second))


def _blockwise(torch, x, scale, along_rows):
    """x (float) times its blockwise scale expanded to x's shape: A's (rows, K/128) along k, B's (K/128, N/128)."""
    if along_rows:
        return x * scale.repeat_interleave(128, dim=1)[:, :x.shape[1]]
    return x * scale.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:x.shape[0], :x.shape[1]]


@pytest.mark.parametrize("recipe, tile", [("block-block", None), ("row-col", None), ("tensor-block", None),
                                          ("block-block", (128, 192, 128))], ids=["block-block", "row-col",
                                                                                 "tensor-block", "block-block-192"])
def test_fp8_groups_take_scales_on_the_device(recipe, tile):
    """FP8 groups scaled as DeepSeek-V3 trains them (A per row and 128 of k, B per 128 x 128 block of each group's
    matrix) and the other recipes, B's scales a set a group; against float64 of the scaled values. Tiles of 192
    columns (K tiles promoted one at a time) reach two column blocks of B's scales, the second tile from the
    middle of one."""
    torch = torch_with_cuda()
    counts = [130, 0, 1, 257, 64, 300]
    n, k = 384, 640  # 5 K blocks, 3 column blocks
    rows, groups = sum(counts) + 17, len(counts)  # 17 rows past the last offset
    gen = torch.Generator(device="cuda").manual_seed(21)
    a = (torch.randn(rows, k, device="cuda", generator=gen)).to(torch.float8_e4m3fn)
    b = (torch.randn(groups, n, k, device="cuda", generator=gen)).to(torch.float8_e4m3fn).transpose(1, 2)
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    kinds = recipe.split("-")
    if kinds[0] == "block":  # column-major, as torch.nn.functional.scaled_mm takes them
        sa = (torch.rand(k // 128, rows, device="cuda", generator=gen) + 0.5).t()
    elif kinds[0] == "row":
        sa = torch.rand(rows, device="cuda", generator=gen) + 0.5
    else:
        sa = torch.tensor([0.75], device="cuda")
    if kinds[1] == "block":
        sb = torch.rand(groups, k // 128, n // 128, device="cuda", generator=gen) + 0.5
    else:
        sb = torch.rand(groups, n, device="cuda", generator=gen) + 0.5
    c = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    desc = _grouped(n, k, ("float8_e4m3", "float8_e4m3", "bfloat16"))
    if tile:
        desc = desc + Tile(*tile)
        assert not desc.plan.tile.promotes_in_pairs
    desc.execute(a, b, c, offsets=offsets, scale_a=sa, scale_b=sb)
    ref = torch.full((rows, n), float("nan"), device="cuda", dtype=torch.float64)
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        x, y = a[begin:end].double(), b[g].double()
        x = _blockwise(torch, x, sa[begin:end].double(), True) if kinds[0] == "block" else \
            x * (sa[begin:end, None] if kinds[0] == "row" else sa).double()
        y = _blockwise(torch, y, sb[g].double(), False) if kinds[1] == "block" else y * sb[g][None, :].double()
        ref[begin:end] = x @ y
        begin = end
    assert _error(torch, c, ref) <= 1e-2


def test_grouped_scales_in_a_shape_without_the_groups_are_refused_before_launch():
    torch = torch_with_cuda()
    n, k = 256, 256
    a = torch.randn(64, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(2, n, k, device="cuda").to(torch.float8_e4m3fn).transpose(1, 2)
    offsets = torch.tensor([30, 64], device="cuda", dtype=torch.int32)
    c = torch.zeros(64, n, device="cuda", dtype=torch.bfloat16)
    desc = _grouped(n, k, ("float8_e4m3", "float8_e4m3", "bfloat16"))
    with pytest.raises(ArgumentError, match=r"scale_b has shape \(3, 2\); Grouped\(\) takes one value for all groups "
                                            r"or one set a group, its first dimension the 2 groups"):
        desc.execute(a, b, c, offsets=offsets, scale_b=torch.ones(3, 2, device="cuda"))
    with pytest.raises(ArgumentError, match=r"scale_a has shape \(30,\), which is no FP8 scaling recipe"):
        desc.execute(a, b, c, offsets=offsets, scale_a=torch.ones(30, device="cuda"))
    assert not c.any()
