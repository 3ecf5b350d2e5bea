"""blasdx.pytorch.gemm on a GPU: gradcheck in float64, forward and backward against float64
PyTorch for float16, bfloat16 and float32 within TESTING's bounds, torch.compile(fullgraph)
against eager, and the no-grad path of epilogues without a derivative. Marked ``gpu``."""

from __future__ import annotations

import pytest

from blasdx import SM, Arrangement, Block, Grid, Precision, Size

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
bt = pytest.importorskip("blasdx.pytorch")

EPILOGUES = {
    None: lambda z: z,
    "negate": lambda z: -z,
    "relu": torch.relu,
    "gelu": lambda z: torch.nn.functional.gelu(z),  # the erf form, as blasdx's
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def matrix(batch, rows, cols, layout, dtype, seed):
    """A (batch, rows, cols) CUDA tensor laid out as ``layout`` (a leaf that requires grad
    is the caller's choice), filled with normal values."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    if layout == "row_major":
        return torch.randn(batch, rows, cols, device="cuda", generator=g).to(dtype)
    return torch.randn(batch, cols, rows, device="cuda", generator=g).to(dtype).transpose(-1, -2)


def leaf(x):
    return x.detach().requires_grad_(True)


def rel(x, ref) -> float:
    x, ref = x.detach().double(), ref.detach().double()
    assert torch.linalg.norm(ref) > 0 and torch.linalg.norm(x) > 0
    return float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref))


GRADCHECK_CASES = [  # (m, n, k, arrangement, batch, bias shape or None, with c)
    (4, 6, 5, ("row_major", "row_major", "row_major"), 2, (6,), True),
    (8, 4, 8, ("col_major", "col_major", "col_major"), 2, None, False),
    (5, 3, 4, ("row_major", "col_major", "col_major"), 3, (5, 1), True),
    (16, 8, 8, ("col_major", "row_major", "row_major"), 1, (1, 1, 8), False),
]


@pytest.mark.parametrize("case", GRADCHECK_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-{''.join(x[0] for x in c[3])}")
@pytest.mark.parametrize("epilogue", list(EPILOGUES))
def test_gradcheck_float64(case, epilogue):
    m, n, k, arrangement, batch, bias_shape, with_c = case
    desc = Size(m, n, k) + Precision("float64") + Arrangement(*arrangement) + SM(900) + Block()
    a = leaf(matrix(batch, m, k, arrangement[0], torch.float64, 1))
    b = leaf(matrix(batch, k, n, arrangement[1], torch.float64, 2))
    c = leaf(matrix(batch, m, n, arrangement[2], torch.float64, 3)) if with_c else None
    bias = leaf(torch.randn(*bias_shape, device="cuda", dtype=torch.float64)) if bias_shape else None
    beta = 0.5 if with_c else 0.0

    def op(a, b, c, bias):
        return bt.gemm(desc, a, b, c, alpha=1.5, beta=beta, bias=bias, epilogue=epilogue)

    assert torch.autograd.gradcheck(op, (a, b, c, bias))


@pytest.mark.parametrize(("precision", "bound", "grad_bound"), [
    (("float16", "float16", "float32"), 1e-3, 2e-3),
    (("bfloat16", "bfloat16", "float32"), 1e-2, 1e-2),
    (("float32", "float32", "float32"), 1e-5, 1e-5),
    (("float16", "float16", "float16"), 2e-3, 2e-3),
])
@pytest.mark.parametrize("epilogue", ["relu", "gelu", None])
def test_forward_and_backward_match_torch(precision, bound, grad_bound, epilogue):
    m, n, k, batch = 32, 48, 64, 3
    arrangement = ("row_major", "col_major", "row_major")
    desc = Size(m, n, k) + Precision(*precision) + Arrangement(*arrangement) + SM(900) + Block()
    in_dtype, out_dtype = getattr(torch, precision[0]), getattr(torch, precision[2])
    a = leaf(matrix(batch, m, k, arrangement[0], in_dtype, 4))
    b = leaf(matrix(batch, k, n, arrangement[1], in_dtype, 5))
    bias = leaf(torch.randn(n, device="cuda").to(out_dtype))
    out = bt.gemm(desc, a, b, alpha=0.5, bias=bias, epilogue=epilogue)
    assert out.dtype == out_dtype and out.shape == (batch, m, n)
    grad = torch.randn_like(out)
    out.backward(grad)

    a64, b64, bias64 = (leaf(x.double()) for x in (a, b, bias))
    z64 = 0.5 * a64 @ b64 + bias64
    # relu's derivative where blasdx's forward put the kink (z within rounding of 0 may differ)
    ref = z64 * (out.detach() > 0) if epilogue == "relu" else EPILOGUES[epilogue](z64)
    ref.backward(grad.double())
    assert rel(out, ref) < bound
    assert rel(a.grad, a64.grad) < grad_bound and a.grad.dtype == in_dtype
    assert rel(b.grad, b64.grad) < grad_bound and b.grad.dtype == in_dtype
    assert rel(bias.grad, bias64.grad) < grad_bound


def test_a_grid_descriptor_is_differentiable():
    """A Grid() descriptor of any size: the forward and dA, dB (grid-level GEMMs too) against float64."""
    m, n, k = 300, 200, 500
    arrangement = ("row_major", "col_major", "row_major")
    desc = Size(m, n, k) + Precision("float16", "float16", "float32") + Arrangement(*arrangement) + SM(900) + Grid()
    a = leaf(matrix(1, m, k, arrangement[0], torch.float16, 6)[0])
    b = leaf(matrix(1, k, n, arrangement[1], torch.float16, 7)[0])
    bias = leaf(torch.randn(n, device="cuda"))
    out = bt.gemm(desc, a, b, bias=bias, epilogue="gelu")
    grad = torch.randn_like(out)
    out.backward(grad)
    a64, b64, bias64 = (leaf(x.double()) for x in (a, b, bias))
    ref = torch.nn.functional.gelu(a64 @ b64 + bias64)
    ref.backward(grad.double())
    assert rel(out, ref) < 1e-3
    assert rel(a.grad, a64.grad) < 2e-3 and rel(b.grad, b64.grad) < 2e-3 and rel(bias.grad, bias64.grad) < 2e-3


def test_torch_compile_fullgraph_matches_eager():
    desc = Size(32, 32, 32) + Precision("float16", "float16", "float32") + Arrangement(
        "row_major", "col_major", "row_major") + SM(900) + Block()
    w = leaf(matrix(8, 32, 32, "col_major", torch.float16, 6))
    bias = leaf(torch.randn(32, device="cuda"))
    x = matrix(8, 32, 32, "row_major", torch.float16, 7)

    def loss(x, w, bias):
        return bt.gemm(desc, x, w, bias=bias, epilogue="gelu").square().mean()

    compiled = torch.compile(loss, fullgraph=True)
    results = []
    for fn in (loss, compiled):
        w.grad = bias.grad = None
        value = fn(x, w, bias)
        value.backward()
        results.append((value.detach(), w.grad.clone(), bias.grad.clone()))
    (v0, gw0, gb0), (v1, gw1, gb1) = results
    assert rel(v1, v0) < 1e-6 and rel(gw1, gw0) < 1e-3 and rel(gb1, gb0) < 1e-5


def test_an_epilogue_without_a_derivative_runs_without_grad():
    desc = Size(16, 16, 16) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    a = matrix(2, 16, 16, "row_major", torch.float32, 8).requires_grad_(True)
    b = matrix(2, 16, 16, "row_major", torch.float32, 9)
    with torch.no_grad():
        out = bt.gemm(desc, a, b, epilogue="x * x")
    assert rel(out, (a.double() @ b.double()) ** 2) < 1e-5


def test_c_and_beta_and_a_column_major_output():
    desc = Size(24, 40, 16) + Precision("float32") + Arrangement("col_major", "row_major", "col_major") + SM(900) + Block()
    a = matrix(2, 24, 16, "col_major", torch.float32, 10)
    b = matrix(2, 16, 40, "row_major", torch.float32, 11)
    c = matrix(2, 24, 40, "row_major", torch.float32, 12)  # any layout: copied into the output first
    out = bt.gemm(desc, a, b, c, alpha=2.0, beta=-1.0)
    assert out.stride()[-2:] == (1, 24)
    assert rel(out, 2 * a.double() @ b.double() - c.double()) < 1e-5


def test_small_float16_gradients_keep_their_digits():
    """A mean loss over many outputs gives output gradients far below float16's normal
    range (6e-5); the backward scales them before the float16 product instead of flushing
    them to subnormals (about 3% error here without the scale). B's large entries make dA
    itself representable in float16."""
    desc = Size(32, 32, 32) + Precision("float16", "float16", "float32") + Arrangement(
        "row_major", "row_major", "row_major") + SM(900) + Block()
    a = leaf(matrix(4, 32, 32, "row_major", torch.float16, 13))
    b = matrix(4, 32, 32, "row_major", torch.float16, 14) * 64
    out = bt.gemm(desc, a, b)
    grad = torch.randn_like(out) * 1e-6
    out.backward(grad)
    a64 = leaf(a.double())
    (a64 @ b.double()).backward(grad.double())
    assert rel(a.grad, a64.grad) < 2e-3
