"""Empty batches and zero-size operands on a GPU (shared/TESTING.md 21): a call whose shapes are
valid but whose batch has 0 items is checked like any other (dtype, shape, device, scalars, bias),
then returns C without a launch, for Block() and Grid(), CuPy arrays and PyTorch tensors, with and
without a bias and an epilogue, complex values as (real, imag) pairs included; and complex
bfloat16 stored as uint16 pairs computes the GEMM (float64 reference, TESTING.md's bfloat16
bound). Marked ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest

from blasdx import SM, ArgumentError, Arrangement, Block, Grid, LeadingDimension, Precision, Size, Type

from .gpu_support import random_values, relative_error

pytestmark = pytest.mark.gpu

SEED = int(np.random.SeedSequence().entropy % 2**31)
LAYOUT = {"r": "row_major", "c": "col_major"}
BF16_BOUND = 1e-2  # TESTING.md: bfloat16 inputs and output; complex as the real precision


def describe(prec, arr="rcr", size=(16, 8, 32), grid=False, complex_=False, extra=()):
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(900)
    desc = desc + (Grid() if grid else Block())
    for op in ((Type("complex"),) if complex_ else ()) + tuple(extra):
        desc = desc + op
    return desc


@pytest.fixture
def no_launch(monkeypatch):
    """Any launch fails the test; returns the number of bound launches before it."""
    import blasdx.pipeline
    from blasdx.runtime import launch

    def refuse(*args, **kwargs):
        pytest.fail("an empty batch launched a kernel")

    monkeypatch.setattr(launch.BoundLaunch, "launch", refuse)
    return len(blasdx.pipeline.BOUND_LAUNCHES)


# --- CuPy ----------------------------------------------------------------------------------------

# (precisions, complex, how C's elements are stored): "native" is the precision's own dtype (complex64
# for complex float32), "pairs" a trailing dimension of 2, uint16 for bfloat16.
CASES = {
    "f32": (("float32",) * 3, False, np.float32),
    "f16-f32": (("float16", "float16", "float32"), False, np.float32),
    "cf32-complex64": (("float32",) * 3, True, np.complex64),
    "cf16-pairs": (("float16",) * 3, True, np.float16),
    "cbf16-uint16-pairs": (("bfloat16",) * 3, True, np.uint16),
}
INPUT_DTYPE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


def _empty_operands(desc, view: bool):
    """A, B, C of 0 items in desc's arrangement: fresh (zero strides) or, with ``view``, the empty
    head of 3-item arrays (their strides; C's buffer NaN-filled, returned to check it stays so)."""
    import cupy

    m, n, k = desc.size
    pairs = desc.is_complex and desc.precision.c != "float32"
    out = []
    for x, (rows, cols) in zip("abc", ((m, k), (k, n), (m, n))):
        precision = getattr(desc.precision, x)
        dtype = (np.complex64 if desc.is_complex and precision == "float32" else INPUT_DTYPE[precision])
        col_major = getattr(desc.arrangement, x) == "col_major"
        shape = ((cols, rows) if col_major else (rows, cols)) + ((2,) if pairs else ())
        base = cupy.full((3, *shape), np.nan, dtype) if dtype != np.uint16 else cupy.full((3, *shape), 0x7FC0, dtype)
        array = base[:0] if view else cupy.zeros((0, *shape), dtype)
        out.append((array.swapaxes(1, 2) if col_major else array, base))
    return out


@pytest.mark.parametrize("view", [False, True], ids=["fresh", "view"])
@pytest.mark.parametrize("fused", [False, True], ids=["plain", "bias-epilogue"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
def test_empty_batch_cupy(no_launch, grid, case, fused, view):
    import cupy

    import blasdx.pipeline

    prec, complex_, c_dtype = CASES[case]
    desc = describe(prec, "rcr", (64, 64, 8192) if grid else (16, 8, 32), grid, complex_)  # Grid: split-K's size
    m, n, _ = desc.size
    (a, _), (b, _), (c, c_base) = _empty_operands(desc, view)
    before = c_base.copy()
    kwargs = {}
    if fused:
        pair = (2,) if c.ndim == 4 else ()
        kwargs = {"bias": cupy.zeros((0, 1, n, *pair), c_dtype), "epilogue": "negate" if complex_ else "relu"}
    alpha, beta = (1 + 2j, 3 - 1j) if complex_ else (2.0, 0.5)
    assert desc.execute(a, b, c, alpha, beta, **kwargs) is c
    assert c.shape[:3] == (0, m, n)
    assert bool(cupy.all(c_base.view(np.uint8) == before.view(np.uint8))), "C's memory was written"
    assert len(blasdx.pipeline.BOUND_LAUNCHES) == no_launch  # nothing bound for an empty batch


def test_empty_batch_of_a_tma_grid_kernel(no_launch):
    """16-byte aligned rows take the TMA kernel (304 x 272 x 208, as test_gpu_grid's): its tensor
    maps are never encoded for 0 items."""
    import cupy

    desc = describe(("float16", "float16", "float32"), "rcr", (304, 272, 208), grid=True)
    a = cupy.zeros((0, 304, 208), np.float16)
    b = cupy.zeros((0, 272, 208), np.float16).swapaxes(1, 2)
    c = cupy.zeros((0, 304, 272), np.float32)
    assert desc.execute(a, b, c, bias=cupy.zeros((272,), np.float32), epilogue="gelu") is c


def test_empty_bias_of_complex_bfloat16_pairs_the_issue_case(no_launch):
    """Issue 45's call: complex bfloat16 C as uint16 (real, imag) pairs, 0 items, a (0, 1, n, 2) bias."""
    import cupy

    desc = describe(("bfloat16",) * 3, "rrr", (16, 16, 16), complex_=True)
    a, b, c = (cupy.zeros((0, 16, 16, 2), np.uint16) for _ in range(3))
    for bias in (cupy.zeros((0, 1, 16, 2), np.uint16), cupy.zeros((4, 1, 16, 2), np.uint16)[:0],
                 cupy.zeros((16, 2), np.uint16)):
        assert desc.execute(a, b, c, 1, 1, bias=bias, epilogue="negate") is c


def _bad_empty_calls():
    import cupy

    f32 = describe(("float32",) * 3, "rrr", (8, 8, 8))
    cbf16 = describe(("bfloat16",) * 3, "rrr", (8, 8, 8), complex_=True)
    e32 = cupy.zeros((0, 8, 8), np.float32)
    pairs = cupy.zeros((0, 8, 8, 2), np.uint16)
    return {  # descriptor, (a, b, c), keyword arguments, error, match
        "wrong dtype": (f32, (cupy.zeros((0, 8, 8), np.float64), e32, e32.copy()), {}, ArgumentError,
                        "A has dtype float64.*never casts"),
        "wrong shape": (f32, (e32, e32, cupy.zeros((0, 8, 9), np.float32)), {}, ArgumentError,
                        r"C has shape \(0, 8, 9\), expected \(m, n\)"),
        "batch mismatch": (f32, (e32, e32, cupy.zeros((2, 8, 8), np.float32)), {}, ArgumentError,
                           "batch counts differ"),
        "host array": (f32, (np.zeros((0, 8, 8), np.float32), e32, e32.copy()), {}, ArgumentError,
                       r"NumPy \(host\) array"),
        "pairs without trailing 2": (cbf16, (pairs, pairs, cupy.zeros((0, 8, 8), np.uint16)), {}, ArgumentError,
                                     "C has dtype uint16.*trailing dimension of 2"),
        "bias dtype": (f32, (e32, e32, e32.copy()), {"bias": cupy.zeros((0, 1, 8), np.float64)}, ArgumentError,
                       "bias has dtype float64, but C has dtype float32"),
        "bias pairs without trailing 2": (cbf16, (pairs, pairs, pairs.copy()), {"bias": cupy.zeros((0, 1, 8), np.uint16)},
                                          ArgumentError, "needs a contiguous trailing dimension of 2"),
        "empty bias on 2 items": (f32, tuple(cupy.zeros((2, 8, 8), np.float32) for _ in range(3)),
                                  {"bias": cupy.zeros((0, 1, 8), np.float32)}, ArgumentError, "does not broadcast"),
        "string alpha": (f32, (e32, e32, e32.copy()), {"alpha": "1"}, ArgumentError, "alpha must be a number"),
        "hook for real values": (cbf16, (pairs, pairs, pairs.copy()), {"epilogue": "relu"}, ArgumentError,
                                 "defined for real values"),
    }


BAD = ["wrong dtype", "wrong shape", "batch mismatch", "host array", "pairs without trailing 2", "bias dtype",
       "bias pairs without trailing 2", "empty bias on 2 items", "string alpha", "hook for real values"]


@pytest.mark.parametrize("case", BAD)
def test_empty_calls_are_still_checked(case):
    desc, operands, kwargs, error, match = _bad_empty_calls()[case]
    with pytest.raises(error, match=match):
        desc.execute(*operands, **kwargs)


# --- PyTorch -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [False, True], ids=["plain", "bias-epilogue"])
@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
def test_empty_batch_torch_tensors(no_launch, grid, fused):
    """Real float16 -> float32 (fresh tensors, and a zero-strided C), complex bfloat16 as bfloat16 and
    as uint16 pairs."""
    torch = pytest.importorskip("torch")
    size = (64, 64, 8192) if grid else (16, 8, 32)
    m, n, k = size
    real = describe(("float16", "float16", "float32"), "rrr", size, grid)
    a, b = torch.zeros(0, m, k, device="cuda", dtype=torch.float16), torch.zeros(0, k, n, device="cuda").half()
    for c in (torch.zeros(0, m, n, device="cuda"), torch.empty_strided((0, m, n), (0, 0, 0), device="cuda")):
        kwargs = {"bias": torch.zeros(0, 1, n, device="cuda"), "epilogue": "relu"} if fused else {}
        assert real.execute(a, b, c, **kwargs) is c
    cx = describe(("bfloat16",) * 3, "rrr", size, grid, complex_=True)
    for dtype in (torch.bfloat16, torch.uint16):
        a, b, c = (torch.zeros(0, r, s, 2, device="cuda", dtype=dtype) for r, s in ((m, k), (k, n), (m, n)))
        kwargs = {"bias": torch.zeros(0, 1, n, 2, device="cuda", dtype=dtype), "epilogue": "negate"} if fused else {}
        assert cx.execute(a, b, c, 1 + 1j, 0.5, **kwargs) is c
    with pytest.raises(ArgumentError, match="A has dtype float32"):  # wrong dtype, empty or not
        real.execute(torch.zeros(0, m, k, device="cuda"), torch.zeros(0, k, n, device="cuda").half(),
                     torch.zeros(0, m, n, device="cuda"))
    leaf = torch.zeros(0, m, n, device="cuda", requires_grad=True)
    with pytest.raises(ArgumentError, match="requires grad"):  # TESTING.md 23, empty too
        real.execute(torch.zeros(0, m, k, device="cuda").half(), torch.zeros(0, k, n, device="cuda").half(), leaf)


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_empty_batch_through_the_torch_op_and_its_gradient(grid, dtype_name):
    torch = pytest.importorskip("torch")
    bt = pytest.importorskip("blasdx.pytorch")
    dtype = getattr(torch, dtype_name)
    m, n, k = 16, 8, 32
    desc = describe((dtype_name, dtype_name, "float32"), "rrr", (m, n, k), grid)
    a = torch.zeros(0, m, k, device="cuda", dtype=dtype, requires_grad=True)
    b = torch.zeros(0, k, n, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.randn(n, device="cuda", requires_grad=True)
    out = bt.gemm(desc, a, b, bias=bias, epilogue="relu")
    assert out.shape == (0, m, n) and out.dtype == torch.float32
    out.sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert torch.equal(bias.grad, torch.zeros(n, device="cuda"))
    with torch.no_grad():
        assert bt.gemm(desc, a, b, c=torch.zeros(0, m, n, device="cuda"), beta=1.0).shape == (0, m, n)


# --- complex bfloat16 as uint16 (real, imag) pairs, not empty ------------------------------------

def _bf16():
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def _pairs(values: np.ndarray) -> np.ndarray:
    """complex128 values (exact in bfloat16) as (..., 2) uint16 bfloat16 bits."""
    out = np.empty(values.shape + (2,), _bf16())
    out[..., 0], out[..., 1] = values.real, values.imag
    return out.view(np.uint16)


def _values(raw: np.ndarray) -> np.ndarray:
    x = raw.view(_bf16()).astype(np.float64)
    return x[..., 0] + 1j * x[..., 1]


class Pairs:
    """One complex bfloat16 operand of ``batch`` items (None: 2-D) as uint16 pairs in desc's layout
    and leading dimension, its padding (and, with ``poison``, all of it) bfloat16 NaN."""

    NAN = 0x7FC0

    def __init__(self, desc, which, batch, rng, poison=False):
        import cupy

        m, n, k = desc.size
        self.rows, self.cols = {"a": (m, k), "b": (k, n), "c": (m, n)}[which]
        self.col_major = getattr(desc.arrangement, which) == "col_major"
        ld = getattr(desc.leading_dimension, which)
        nb = 1 if batch is None else batch
        outer, inner = (self.cols, self.rows) if self.col_major else (self.rows, self.cols)
        self.values = random_values("bfloat16", (nb, self.rows, self.cols), rng, True)
        host = np.full((nb, outer, ld, 2), self.NAN, np.uint16)
        stored = np.swapaxes(self.values, 1, 2) if self.col_major else self.values
        if not poison:
            host[:, :, :inner] = _pairs(stored)
        self.inner = inner
        self.buffer = cupy.asarray(host)
        view = self.buffer[:, :, :inner]
        view = view.swapaxes(1, 2) if self.col_major else view
        self.array = view if batch is not None else view[0]

    def result(self) -> np.ndarray:
        part = _values(self.buffer.get()[:, :, :self.inner])
        return np.swapaxes(part, 1, 2) if self.col_major else part

    def padding(self) -> np.ndarray:
        return self.buffer.get()[:, :, self.inner:]


PAIR_CASES = [  # arrangement, size, Grid(), padded C
    ("rrr", (16, 16, 16), False, False),
    ("rcr", (30, 31, 33), False, True),
    ("ccc", (13, 5, 7), False, False),
    ("rcr", (127, 131, 137), True, False),
    ("crc", (64, 40, 72), True, True),
]


@pytest.mark.parametrize("arr, size, grid, padded", PAIR_CASES,
                         ids=[f"{a}-{'x'.join(map(str, s))}-{'grid' if g else 'block'}{'-ldc' if p else ''}"
                              for a, s, g, p in PAIR_CASES])
@pytest.mark.parametrize("alpha, beta", [(1, 0), (1.5 - 0.5j, 0.5 + 1j)], ids=["beta0", "complex"])
def test_complex_bfloat16_as_uint16_pairs(arr, size, grid, padded, alpha, beta):
    desc = describe(("bfloat16",) * 3, arr, size, grid, complex_=True)
    m, n, k = size
    if padded:
        lds = desc.leading_dimension
        desc = desc.replace(LeadingDimension(lds.a, lds.b, (n if arr[2] == "r" else m) + 3))
    rng = np.random.default_rng(SEED)
    batch = 3
    a, b = Pairs(desc, "a", batch, rng), Pairs(desc, "b", batch, rng)
    c = Pairs(desc, "c", batch, rng, poison=beta == 0)  # beta = 0: C, NaN throughout, is never read
    c_before = np.zeros_like(c.values) if beta == 0 else c.values
    padding = c.padding()
    assert desc.execute(a.array, b.array, c.array, alpha, beta) is c.array
    ref = alpha * np.matmul(a.values, b.values) + beta * c_before
    err = relative_error(c.result(), ref)
    assert err <= BF16_BOUND, f"{desc!r}: error {err:.3g} (seed {SEED})"
    assert np.array_equal(c.padding(), padding), "C's leading-dimension padding was written"
    if not grid and beta == 0:  # the batch equals a loop of single GEMMs
        batched = c.result()
        for i in range(batch):
            one = Pairs(desc, "c", None, rng, poison=True)
            desc.execute(a.array[i], b.array[i], one.array, alpha, beta)
            np.testing.assert_array_equal(one.result()[0], batched[i])


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
def test_complex_bfloat16_pairs_with_a_bias_and_an_epilogue(grid):
    """A (1, n, 2) uint16 bias and negate on CuPy pairs; the same GEMM on PyTorch bfloat16 and uint16
    (..., 2) tensors where PyTorch is there."""
    import cupy

    desc = describe(("bfloat16",) * 3, "rcr", (40, 24, 56), grid, complex_=True)
    rng = np.random.default_rng(SEED)
    a, b, c = (Pairs(desc, x, 2, rng) for x in "abc")
    bias_values = random_values("bfloat16", (1, 24), rng, True)
    desc.execute(a.array, b.array, c.array, 2, -1, bias=cupy.asarray(_pairs(bias_values)), epilogue="negate")
    ref = -(2 * np.matmul(a.values, b.values) - c.values + bias_values)
    assert relative_error(c.result(), ref) <= BF16_BOUND, f"seed {SEED}"
    try:
        import torch
    except ImportError:
        return
    for dtype in (torch.bfloat16, torch.uint16):
        def tensor(values, dtype=dtype):
            """complex128 values as a CUDA tensor of (..., 2) bfloat16 bits in ``dtype``."""
            return torch.from_numpy(np.ascontiguousarray(_pairs(values)).view(np.int16)).cuda().view(dtype)

        tc = tensor(c.values)
        tb = tensor(np.swapaxes(b.values, 1, 2)).transpose(1, 2)  # col-major B
        desc.execute(tensor(a.values), tb, tc, 2, -1, bias=tensor(bias_values), epilogue="negate")
        torch.cuda.synchronize()
        raw = tc.view(torch.int16).cpu().numpy().view(np.uint16)
        assert relative_error(_values(raw), ref) <= BF16_BOUND, (dtype, SEED)
