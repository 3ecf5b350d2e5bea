"""blasdx.numba on a GPU: Numba kernels around the device API against NumPy float64, per precision family (a K
loop over a problem larger than the tile, edge tiles, alpha and beta, bias and a hook), and bitwise equal to the
same kernel written in C++ and compiled by compile_kernel (the same instructions); the same for persistent kernels
over a Grid() descriptor's tiles (block_tile_origin, mainloop, store_block_tile) in several arrangements; and kernels
on a Grouped() descriptor's groups' scheduler against float64 and bitwise execute(), skewed, empty and one-row
groups, the rows past the offsets untouched, too many groups and bad offsets stopped on the device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blasdx import SM, Arrangement, Block, Grid, Grouped, LeadingDimension, Precision, Size, Type, compile_kernel
from blasdx.describe.precision import PRECISIONS
from blasdx.packing import pack
from blasdx.runtime.arguments import scalar as kernel_scalar

from .gpu_support import Operand, bound, relative_error, storage_dtype, torch_with_cuda

pytestmark = pytest.mark.gpu

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'blasdx[numba-cu13]')")
cp = pytest.importorskip("cupy")
import blasdx.numba  # noqa: E402

from ..numba.shared_kernels import on_the_scheduler, persistent, persistent_with_bias  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")


def gemm(size, a, b, c, sm, kind="real"):
    return Size(*size) + Precision(a, b, c) + Type(kind) + RCR + SM(sm) + Block()


CASES = [  # (id, descriptor, problem M x N x K: edge tiles unless packed)
    ("f16-f32-wgmma", gemm((64, 64, 64), "float16", "float16", "float32", 900), (200, 136, 300)),
    ("bf16-wgmma", gemm((64, 64, 32), "bfloat16", "bfloat16", "float32", 900), (130, 70, 100)),
    ("fp8-e4m3", gemm((64, 64, 64), "float8_e4m3", "float8_e4m3", "float32", 900), (128, 128, 256)),
    ("tf32", gemm((32, 32, 32), "tfloat32", "tfloat32", "float32", 800), (70, 50, 90)),
    ("f32-fma", gemm((32, 32, 32), "float32", "float32", "float32", 800), (70, 50, 90)),
    ("f64", gemm((32, 32, 16), "float64", "float64", "float64", 800), (70, 50, 90)),
    ("int8", gemm((32, 32, 32), "int8", "int8", "int32", 800), (70, 50, 90)),
    ("int4", gemm((32, 32, 64), "int4", "int4", "int32", 800), (64, 96, 192)),
    ("binary", gemm((32, 32, 256), "binary", "binary", "int32", 800), (64, 64, 512)),
    ("complex64", gemm((16, 16, 16), "float32", "float32", "float32", 800, "complex"), (40, 24, 40)),
]


def values(precision, shape, rng, is_complex):
    info = PRECISIONS[precision]
    if precision == "binary":
        return rng.integers(0, 2, size=shape).astype(np.float64)
    if precision == "int4":
        return rng.integers(-8, 8, size=shape).astype(np.float64)
    if not info.is_float:
        return rng.integers(-20, 21, size=shape).astype(np.float64)
    x = rng.standard_normal(shape).astype(storage_dtype(precision)).astype(np.float64)
    return x + 1j * rng.standard_normal(shape).astype(np.float32) if is_complex else x


def device(x, precision, is_complex):
    """x (float64, k along the last axis for A and B^T) as the kernel reads it."""
    info = PRECISIONS[precision]
    if info.pack > 1:
        return cp.asarray(pack(x.astype(np.int8 if info.signed else np.uint8), precision, axis=-1)).ravel()
    if is_complex:
        return cp.asarray(x.astype(np.complex64 if info.bits == 32 else np.complex128)).ravel()
    stored = x.astype(storage_dtype(precision))
    return cp.asarray(stored.view(info.raw_name) if info.raw_name else stored).ravel()


def reference(desc, a, bt, c, alpha, beta):
    if desc.precision.a == "binary":  # xor: popcount(a xor b) = a + b - 2ab
        product = a.sum(1)[:, None] + bt.sum(1)[None, :] - 2 * a @ bt.T
    else:
        product = a @ bt.T
    return alpha * product + beta * c


def kernels(g, edges):
    """The tile of C at block (x, y): a K loop, edge tiles where ``edges``."""
    if edges:
        def kernel(a, b, c, M, N, K, alpha, beta):
            smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
            row0 = cuda.blockIdx.x * g.m
            col0 = cuda.blockIdx.y * g.n
            rows = min(g.m, M - row0)
            cols = min(g.n, N - col0)
            acc = g.make_accumulator()
            for k0 in range(0, K, g.k):
                ks = min(g.k, K - k0)
                g.load_a_partial(a, K, row0, k0, smem, rows, ks)
                g.load_b_partial(b, K, k0, col0, smem, ks, cols)
                g.copy_wait()
                g.multiply(smem, acc)
                cuda.syncthreads()
            g.store_partial(acc, c[row0 * N + col0:], N, rows, cols, alpha, beta)
    else:
        def kernel(a, b, c, M, N, K, alpha, beta):
            smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
            row0 = cuda.blockIdx.x * g.m
            col0 = cuda.blockIdx.y * g.n
            ld = K // g.k * g.k  # A and B's leading dimension, in values (packed operands too)
            acc = g.make_accumulator()
            for t in range(K // g.k):
                g.load_a(a, ld, row0, t * g.k, smem)
                g.load_b(b, ld, t * g.k, col0, smem)
                g.copy_wait()
                g.multiply(smem, acc)
                cuda.syncthreads()
            g.store(acc, c[row0 * N + col0:], N, alpha, beta)
    return cuda.jit(kernel)


TWIN = r"""
extern "C" __global__ void twin(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int M, int N, int K,
                                gemm::scalar_t alpha, gemm::scalar_t beta) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  const int row0 = blockIdx.x * gemm::m, col0 = blockIdx.y * gemm::n;
  auto acc = gemm::make_accumulator();
#if EDGES
  const int rows = min(gemm::m, M - row0), cols = min(gemm::n, N - col0);
  for (int k0 = 0; k0 < K; k0 += gemm::k) {
    const int ks = min(gemm::k, K - k0);
    gemm::load_a(a + (long long)row0 * K + k0, K, sa, rows, ks);
    gemm::load_b(b + (long long)col0 * K + k0, K, sb, ks, cols);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  gemm::store_partial(acc, c + (long long)row0 * N + col0, N, rows, cols, alpha, beta);
#else
  const long long ke = K / gemm::k * KE, ld = K / gemm::k * gemm::k;  // in stored elements; ld in values
  for (int t = 0; t < K / gemm::k; ++t) {
    gemm::load_a(a + row0 * ke + t * KE, ld, sa);
    gemm::load_b(b + col0 * ke + t * KE, ld, sb);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  gemm::store(acc, c + (long long)row0 * N + col0, N, alpha, beta);
#endif
}
"""


def _run(desc, problem, alpha, beta, seed=7):
    M, N, K = problem
    p, cx = desc.precision, desc.is_complex
    edges = PRECISIONS[p.a].pack == 1
    rng = np.random.default_rng(seed)
    a, bt, c = values(p.a, (M, K), rng, cx), values(p.b, (N, K), rng, cx), values(p.c, (M, N), rng, cx)
    g = blasdx.numba.device_api(desc)
    grid = (math.ceil(M / desc.size.m), math.ceil(N / desc.size.n))
    da, db, dc = device(a, p.a, cx), device(bt, p.b, cx), device(c, p.c, cx)
    out = dc.copy()
    kernels(g, edges)[grid, g.block_dim, 0, g.shared_memory_size_ab](da, db, out, M, N, K, alpha, beta)
    return g, (da, db, dc), out, reference(desc, a, bt, c, alpha, beta), edges, grid


@pytest.mark.parametrize("desc, problem", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_numba_kernel_matches_numpy_and_the_cpp_twin_bitwise(desc, problem):
    cx, is_float = desc.is_complex, PRECISIONS[desc.precision.c].is_float
    alpha, beta = ((1.5 - 0.5j), (0.5 + 0.25j)) if cx else ((1.5, 0.5) if is_float else (2, 1))
    g, (da, db, dc), out, ref, edges, grid = _run(desc, problem, alpha, beta)
    got = out.get().reshape(ref.shape).astype(np.complex128 if cx else np.float64)
    limit = bound(desc)
    err = relative_error(got, ref) if limit > 0 else float(np.max(np.abs(got - ref)))
    assert err <= limit, f"{desc!r}: error {err:.3g} > {limit:.3g}"
    ke = PRECISIONS[desc.precision.a].pack
    twin = compile_kernel(desc.device_source("gemm") + TWIN, "twin",
                          options=(f"-DEDGES={int(edges)}", f"-DKE={desc.size.k // ke}"))
    cpp = dc.copy()
    scalar = np.complex64 if cx else (np.float64 if desc.precision.c == "float64" else
                                      (np.float32 if is_float else np.int32))
    M, N, K = problem
    twin(grid, g.block_dim, (da, db, cpp, np.int32(M), np.int32(N), np.int32(K), scalar(alpha), scalar(beta)),
         shared_mem=g.shared_memory_size_ab)
    assert cp.array_equal(out.view(cp.uint8), cpp.view(cp.uint8)), "Numba and C++ kernels differ"


def test_hooks_and_bias():
    desc = CASES[0][1]
    M, N, K = 130, 200, 128
    rng = np.random.default_rng(3)
    a, bt = values("float16", (M, K), rng, False), values("float16", (N, K), rng, False)
    c, bias = rng.standard_normal((M, N)), rng.standard_normal(N).astype(np.float32)
    g = blasdx.numba.device_api(desc, epilogue="relu", bias="row")

    @cuda.jit
    def kernel(a, b, c, bias, M, N, K, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        row0 = cuda.blockIdx.x * g.m
        col0 = cuda.blockIdx.y * g.n
        rows = min(g.m, M - row0)
        cols = min(g.n, N - col0)
        acc = g.make_accumulator()
        for k0 in range(0, K, g.k):
            g.load_a_partial(a, K, row0, k0, smem, rows, g.k)
            g.load_b_partial(b, K, k0, col0, smem, g.k, cols)
            g.copy_wait()
            g.multiply(smem, acc)
            cuda.syncthreads()
        g.store_partial(acc, c[row0 * N + col0:], N, rows, cols, alpha, beta, bias[col0:], 0, 1)

    out = cp.asarray(c.astype(np.float32)).ravel()
    grid = (math.ceil(M / 64), math.ceil(N / 64))
    kernel[grid, g.block_dim, 0, g.shared_memory_size_ab](
        device(a, "float16", False), device(bt, "float16", False), out, cp.asarray(bias), M, N, K, 1.5, 0.5)
    ref = np.maximum(1.5 * a @ bt.T + 0.5 * c.astype(np.float32) + bias[None, :], 0)
    assert relative_error(out.get().reshape(M, N).astype(np.float64), ref) <= bound(desc)


def test_a_python_epilogue_by_row_and_column_and_the_async_multiply():
    desc = CASES[0][1]
    rng = np.random.default_rng(5)
    a, bt = values("float16", (64, 64), rng, False), values("float16", (64, 64), rng, False)
    g = blasdx.numba.device_api(desc)

    @cuda.jit
    def kernel(a, b, d):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.load_a(a, 64, 0, 0, smem)
        g.load_b(b, 64, 0, 0, smem)
        g.copy_wait()
        g.multiply_async(smem, acc)
        g.multiply_wait(acc)
        for i in range(g.accumulator_size):
            if g.in_bounds(i):
                d[g.row(i) * 64 + g.col(i)] = acc[i] * acc[i]

    d = cp.zeros(64 * 64, np.float32)
    kernel[1, g.block_dim, 0, g.shared_memory_size_ab](device(a, "float16", False), device(bt, "float16", False), d)
    assert relative_error(d.get().reshape(64, 64).astype(np.float64), (a @ bt.T) ** 2) <= 2 * bound(desc)


def test_allow_shared_memory_lets_a_launch_take_over_48_kib():
    from numba.core import types

    desc = gemm((128, 128, 64), "float16", "float16", "float32", 900)
    g = blasdx.numba.device_api(desc)
    assert g.shared_memory_size > 48 * 1024
    kernel = kernels(g, edges=False)
    kernel.compile((types.float16[::1], types.float16[::1], types.float32[::1], types.int64, types.int64, types.int64,
                    types.float64, types.float64))
    blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)
    M, N, K = 256, 256, 128
    rng = np.random.default_rng(11)
    a, bt = values("float16", (M, K), rng, False), values("float16", (N, K), rng, False)
    out = cp.zeros(M * N, np.float32)
    kernel[(2, 2), g.block_dim, 0, g.shared_memory_size](device(a, "float16", False), device(bt, "float16", False),
                                                         out, M, N, K, 1.0, 0.0)
    assert relative_error(out.get().reshape(M, N).astype(np.float64), a @ bt.T) <= bound(desc)


# --- Grid(): persistent kernels over the tiles of a whole problem ----------------------------------------------

LAYOUT = {"r": "row_major", "c": "col_major"}


def grid(prec, arr, size, sm=900, kind="real"):
    return Size(*size) + Precision(*prec) + Type(kind) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Grid()


GRID_CASES = [  # (id, descriptor): problems whose tiles do not divide m, n or k (edge tiles on every side)
    ("f16-f32-wgmma-rcr", grid(("float16", "float16", "float32"), "rcr", (300, 200, 250))),
    ("f16-rrr", grid(("float16",) * 3, "rrr", (257, 130, 190))),  # 16-bit C: the quads epilogue
    ("bf16-f32-crc", grid(("bfloat16", "bfloat16", "float32"), "crc", (200, 300, 170))),
    ("bf16-ccr", grid(("bfloat16",) * 3, "ccr", (130, 200, 100))),
    ("fp8-e4m3-rcr", grid(("float8_e4m3", "float8_e4m3", "float32"), "rcr", (200, 136, 300))),
    ("tf32-rrr", grid(("tfloat32", "tfloat32", "float32"), "rrr", (130, 70, 100), 800)),
    ("f32-fma-ccc", grid(("float32",) * 3, "ccc", (130, 70, 100), 800)),
    ("f64-crr", grid(("float64",) * 3, "crr", (70, 150, 90))),
    ("int8-rcr", grid(("int8", "int8", "int32"), "rcr", (100, 70, 90))),
    ("complex64-rcc", grid(("float32",) * 3, "rcc", (40, 72, 40), 800, "complex")),
    ("f16-f32-padded-lds", grid(("float16", "float16", "float32"), "rcr", (100, 120, 140))
     + LeadingDimension(150, 144, 136)),  # padding poisoned, never read, never written
]


def numba_dtype(precision, is_complex):
    """The name of the Numba dtype of a precision's arrays (blasdx.numba.ARRAY_DTYPES; int32 C's is its own)."""
    key = f"complex {precision}" if is_complex else precision
    return blasdx.numba.ARRAY_DTYPES.get(key, precision).split()[0]


def flat(operand):
    """The whole buffer of a gpu_support Operand (padding included) as the 1-D array the device API takes."""
    return operand.buffer.ravel().view(numba_dtype(operand.precision, operand.is_complex))


def grid_kernel(g, desc, body, extra=()):
    """``body`` (a Python kernel over g) compiled for the arrays of ``desc``, then ``extra`` argument types, then
    alpha and beta as Python numbers; allowed g.shared_memory_size of dynamic shared memory."""
    from numba.core import types

    arrays = [getattr(types, numba_dtype(getattr(desc.precision, x), desc.is_complex))[::1] for x in "abc"]
    if desc.is_complex:
        scalar = types.complex128
    else:
        scalar = types.float64 if PRECISIONS[desc.precision.c].is_float else types.int64
    kernel = cuda.jit(body)
    kernel.compile((*arrays, *extra, scalar, scalar))
    blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)
    return kernel


GRID_TWIN = r"""
extern "C" __global__ void twin(const g::a_t* a, const g::b_t* b, g::c_t* c, g::scalar_t alpha, g::scalar_t beta) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int t = blockIdx.x; t < g::block_tiles; t += gridDim.x) {
    int row0, col0;
    g::block_tile_origin(t, row0, col0);
    g::accumulator acc = g::make_accumulator();
    g::mainloop(a, b, row0, col0, smem, acc);
    g::store_block_tile(acc, c, row0, col0, alpha, beta);
  }
}
"""

BLOCKS = 5  # fewer than the tiles: each block walks several


def operands(desc, seed):
    rng = np.random.default_rng(seed)
    return tuple(Operand(desc, x, None, None, rng) for x in "abc")


@pytest.mark.parametrize("desc", [c[1] for c in GRID_CASES], ids=[c[0] for c in GRID_CASES])
def test_a_grid_kernel_matches_numpy_and_the_cpp_twin_bitwise(desc):
    cx, is_float = desc.is_complex, PRECISIONS[desc.precision.c].is_float
    alpha, beta = ((1.5 - 0.5j), (0.5 + 0.25j)) if cx else ((1.5, 0.5) if is_float else (2, 1))
    a, b, c = operands(desc, 21)
    before = c.host()
    g = blasdx.numba.device_api(desc)
    blocks = min(BLOCKS, g.block_tiles)
    grid_kernel(g, desc, persistent(g))[blocks, g.block_dim, 0, g.shared_memory_size](
        flat(a), flat(b), flat(c), alpha, beta)
    ref = alpha * (a.values[0] @ b.values[0]) + beta * c.values[0]
    got = c.result()[0]
    limit = bound(desc)
    err = relative_error(got, ref) if limit > 0 else float(np.max(np.abs(got - ref)))
    assert err <= limit, f"{desc!r}: error {err:.3g} > {limit:.3g}"
    assert c.padding_untouched(before), "C's leading-dimension padding was written"
    numba_out = c.host()
    c.upload(before)
    twin = compile_kernel(desc.device_source("g") + GRID_TWIN, "twin")
    twin((blocks,), g.block_dim, (flat(a), flat(b), flat(c), kernel_scalar(alpha, desc.plan, "alpha"),
                                  kernel_scalar(beta, desc.plan, "beta")), shared_mem=g.shared_memory_size)
    assert np.array_equal(numba_out.view(np.uint8), c.host().view(np.uint8)), "Numba and C++ kernels differ"


def test_beta_zero_never_reads_c_and_every_element_is_written():
    desc = GRID_CASES[2][1]
    a, b, c = operands(desc, 22)
    c.poison_all()  # NaN: read anywhere, it would show
    g = blasdx.numba.device_api(desc)
    grid_kernel(g, desc, persistent(g))[BLOCKS, g.block_dim, 0, g.shared_memory_size](
        flat(a), flat(b), flat(c), 1.0, 0.0)
    assert relative_error(c.result()[0], a.values[0] @ b.values[0]) <= bound(desc)


@pytest.mark.parametrize("bias", [True, "row"])
def test_hooks_and_a_bias_in_store_block_tile(bias):
    from numba.core import types

    desc = GRID_CASES[0][1]  # row-major C
    m, n, _ = desc.size
    a, b, c = operands(desc, 23)
    rng = np.random.default_rng(24)
    values = rng.standard_normal((m, n) if bias is True else n).astype(np.float32)
    g = blasdx.numba.device_api(desc, a_load="negate", epilogue="relu", bias=bias)
    kernel = grid_kernel(g, desc, persistent_with_bias(g, n if bias is True else 0), (types.float32[::1],))
    kernel[BLOCKS, g.block_dim, 0, g.shared_memory_size](flat(a), flat(b), flat(c), cp.asarray(values.ravel()),
                                                          1.5, 0.5)
    ref = np.maximum(1.5 * (-a.values[0] @ b.values[0]) + 0.5 * c.values[0] + values, 0)
    assert relative_error(c.result()[0], ref) <= bound(desc)


def test_mainloop_range_in_parts_is_mainloop_and_a_python_epilogue_sees_each_value_once():
    from numba.core import types

    desc = GRID_CASES[0][1]
    m, n, _ = desc.size
    a, b, _ = operands(desc, 25)
    g = blasdx.numba.device_api(desc)

    def body(a, b, d, visits, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):
            row0, col0 = g.block_tile_origin(t)
            rows = g.rows_inside(row0)
            cols = g.cols_inside(col0)
            acc = g.make_accumulator()
            half = g.k_tiles // 2
            g.mainloop_range(a, b, row0, col0, 0, half, smem, acc)
            g.mainloop_range(a, b, row0, col0, half, g.k_tiles, smem, acc)
            for i in range(g.accumulator_size):
                r = g.row(i)
                col = g.col(i)
                if g.in_bounds(i) and r < rows and col < cols:
                    d[(row0 + r) * g.problem_n + col0 + col] = alpha * acc[i] + beta
                    cuda.atomic.add(visits, (row0 + r) * g.problem_n + col0 + col, 1)

    kernel = grid_kernel(g, desc, body, (types.int32[::1],))
    d, visits = cp.full(m * n, np.nan, np.float32), cp.zeros(m * n, np.int32)
    kernel[BLOCKS, g.block_dim, 0, g.shared_memory_size](flat(a), flat(b), d, visits, 1.0, 0.0)
    assert bool((visits == 1).all()), "each value of C once"
    assert relative_error(d.get().reshape(m, n).astype(np.float64), a.values[0] @ b.values[0]) <= bound(desc)
    c = cp.full(m * n, np.nan, np.float32)  # the same products from mainloop, written by store_block_tile
    grid_kernel(g, desc, persistent(g))[BLOCKS, g.block_dim, 0, g.shared_memory_size](flat(a), flat(b), c, 1.0, 0.0)
    assert cp.array_equal(c, d), "mainloop_range over two parts differs from mainloop"


# --- Grouped(): a kernel of one's own on the groups' scheduler ----------------------------------------------------

SKEWED = [300, 0, 1, 77, 0, 129, 512, 3]  # empty, one-row and ragged groups
TAIL = 40  # C's rows past the last offset: never written
RAW_TORCH = {"bfloat16": "int16", "float8_e4m3": "uint8", "float8_e5m2": "uint8"}  # torch dtypes CAI exports


def grouped(prec, arr="rcr", n=384, k=320):
    return Size(256, n, k) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(900) + Grouped()


GROUPED_CASES = [  # (id, descriptor): n = 384 leaves an edge tile of columns
    ("bf16-f32", grouped(("bfloat16", "bfloat16", "float32"))),
    ("bf16", grouped(("bfloat16",) * 3)),
    ("f16", grouped(("float16",) * 3)),
    ("f16-f32-rrr", grouped(("float16", "float16", "float32"), "rrr")),
    ("fp8-e4m3-f32", grouped(("float8_e4m3", "float8_e4m3", "float32"))),
]


def as_numba(torch, t, precision):
    """A contiguous tensor's elements as the 1-D Numba array the device API takes (blasdx.numba.ARRAY_DTYPES)."""
    flat = t.reshape(-1)
    if precision in RAW_TORCH:
        flat = flat.view(getattr(torch, RAW_TORCH[precision]))
    return cuda.as_cuda_array(flat).view(np.dtype(numba_dtype(precision, False)))


def torch_dtype(torch, precision):
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
            "float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[precision]


def group_operands(torch, desc, counts, seed):
    """A (rows + TAIL, k); B's storage, (groups, n, k) for column-major B, (groups, k, n) for row-major; the offsets."""
    m, n, k = desc.size
    gen = torch.Generator(device="cuda").manual_seed(seed)
    p = desc.precision
    a = torch.randn(sum(counts) + TAIL, k, device="cuda", generator=gen).to(torch_dtype(torch, p.a))
    shape = (len(counts), n, k) if desc.arrangement.b == "col_major" else (len(counts), k, n)
    b = torch.randn(*shape, device="cuda", generator=gen).to(torch_dtype(torch, p.b))
    offsets = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    return a, b, offsets


def b_of_group(desc, b, g):
    """Group g's B as a (k, n) view of its storage."""
    return b[g].transpose(0, 1) if desc.arrangement.b == "col_major" else b[g]


def group_reference(torch, desc, a, b, offsets, c0, alpha, beta, bias=None, relu=False):
    """float64 C: every group's rows, the rows past the last offset as c0 had them."""
    out = c0.double().clone()
    begin = 0
    for g, end in enumerate(offsets.tolist()):
        if end > begin:
            value = alpha * (a[begin:end].double() @ b_of_group(desc, b, g).double()) + beta * c0[begin:end].double()
            if bias is not None:
                value = value + bias[g].double()
            out[begin:end] = value.clamp(min=0) if relu else value
        begin = end
    return out


def scheduler_kernel(g, desc, body, extra=()):
    """``body`` compiled for the descriptor's arrays, the offsets, groups and rows, then ``extra``, alpha and beta."""
    from numba.core import types

    arrays = [getattr(types, numba_dtype(getattr(desc.precision, x), False))[::1] for x in "abc"]
    kernel = cuda.jit(body)
    # groups and rows as Python ints arrive (int64): a launch with other types would compile a kernel allowed 48 KiB
    kernel.compile((*arrays, types.int32[::1], types.int64, types.int64, *extra, types.float64, types.float64))
    blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)
    return kernel


def run_on_the_scheduler(torch, desc, a, b, c, offsets, alpha, beta, blocks=BLOCKS):
    g = blasdx.numba.device_api(desc)
    p = desc.precision
    scheduler_kernel(g, desc, on_the_scheduler(g))[blocks, g.block_dim, 0, g.shared_memory_size](
        as_numba(torch, a, p.a), as_numba(torch, b, p.b), as_numba(torch, c, p.c), cuda.as_cuda_array(offsets),
        offsets.numel(), a.shape[0], alpha, beta)
    torch.cuda.synchronize()


def assert_tail_untouched(torch, c, before):
    assert torch.equal(c[-TAIL:].view(torch.uint8), before[-TAIL:].view(torch.uint8)), "rows past the offsets written"


@pytest.mark.parametrize("desc", [c[1] for c in GROUPED_CASES], ids=[c[0] for c in GROUPED_CASES])
def test_a_kernel_on_the_groups_scheduler_matches_float64(desc):
    torch = torch_with_cuda()
    a, b, offsets = group_operands(torch, desc, SKEWED, 31)
    c = torch.randn(a.shape[0], desc.size.n, device="cuda").to(torch_dtype(torch, desc.precision.c))
    c[-TAIL:] = float("nan")
    before = c.clone()
    run_on_the_scheduler(torch, desc, a, b, c, offsets, 1.5, 0.5)
    ref = group_reference(torch, desc, a, b, offsets, before, 1.5, 0.5)
    rows = int(offsets[-1])
    err = float(torch.linalg.norm(c[:rows].double() - ref[:rows]) / torch.linalg.norm(ref[:rows]))
    assert err <= bound(desc), f"{desc!r}: error {err:.3g} > {bound(desc):.3g}"
    assert_tail_untouched(torch, c, before)


@pytest.mark.parametrize("desc", [c[1] for c in GROUPED_CASES[:4]], ids=[c[0] for c in GROUPED_CASES[:4]])
def test_a_kernel_on_the_groups_scheduler_is_execute_bitwise(desc):
    """16-bit inputs: execute()'s TMA kernel and group_mainloop's cp.async run the same tile's wgmma in the same K
    order (FP8's TMA path promotes its partial sums in pairs of K tiles: held to float64 above instead)."""
    torch = torch_with_cuda()
    a, b, offsets = group_operands(torch, desc, SKEWED, 32)
    ours = torch.full((a.shape[0], desc.size.n), float("nan"), device="cuda", dtype=torch_dtype(torch, desc.precision.c))
    theirs = ours.clone()
    run_on_the_scheduler(torch, desc, a, b, ours, offsets, 1.0, 0.0)
    storage = b.transpose(1, 2) if desc.arrangement.b == "col_major" else b
    desc.execute(a, storage, theirs, offsets=offsets)
    torch.cuda.synchronize()
    assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8)), "the Numba kernel and execute() differ"
    assert bool(torch.isnan(ours[-TAIL:]).all()), "rows past the offsets written"


@pytest.mark.parametrize("counts", [[0, 0, 1, 0, 1], [0] * 5, [1] * 7, [g % 7 for g in range(1024)]],
                         ids=["empty-and-one-row", "all-empty", "one-row-each", "1024-groups"])
def test_empty_single_row_and_many_groups(counts):
    torch = torch_with_cuda()
    desc = GROUPED_CASES[0][1]
    a, b, offsets = group_operands(torch, desc, counts, 33)
    c = torch.full((a.shape[0], desc.size.n), float("nan"), device="cuda")
    run_on_the_scheduler(torch, desc, a, b, c, offsets, 1.0, 0.0, blocks=132)
    ref = group_reference(torch, desc, a, b, offsets, c.clone(), 1.0, 0.0)
    inside = ~torch.isnan(ref)
    assert bool(torch.isnan(c[~inside]).all()), "rows outside every group written"
    if bool(inside.any()):
        assert float(torch.linalg.norm(c[inside] - ref[inside]) / torch.linalg.norm(ref[inside])) <= bound(desc)


def test_no_groups_run_no_tiles():
    torch = torch_with_cuda()
    desc = GROUPED_CASES[0][1]
    a, b, _ = group_operands(torch, desc, [5], 34)
    c = torch.full((a.shape[0], desc.size.n), float("nan"), device="cuda")
    run_on_the_scheduler(torch, desc, a, b, c, torch.zeros(0, device="cuda", dtype=torch.int32), 1.0, 0.0)
    assert bool(torch.isnan(c).all())


def test_a_relu_and_a_bias_per_group_in_store_block_tile():
    from numba.core import types

    torch = torch_with_cuda()
    desc = GROUPED_CASES[3][1]  # row-major B
    n = desc.size.n
    a, b, offsets = group_operands(torch, desc, SKEWED, 35)
    bias = torch.randn(len(SKEWED), n, device="cuda")
    c = torch.full((a.shape[0], n), float("nan"), device="cuda")
    g = blasdx.numba.device_api(desc, epilogue="relu", bias="row")

    def body(a, b, c, offsets, groups, rows, bias, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        schedule = g.make_schedule()
        g.schedule_groups(offsets, groups, rows, schedule)
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            group, row0, col0, group_rows = g.tile_of_groups(w, schedule, groups)
            acc = g.make_accumulator()
            g.group_mainloop(a, b[group * g.b_group_size:], (group, row0, col0, group_rows), smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta, group_rows, bias[group * n:], 0, 1)

    kernel = scheduler_kernel(g, desc, body, (types.float32[::1],))
    kernel[BLOCKS, g.block_dim, 0, g.shared_memory_size](
        as_numba(torch, a, "float16"), as_numba(torch, b, "float16"), cuda.as_cuda_array(c.view(-1)),
        cuda.as_cuda_array(offsets), len(SKEWED), a.shape[0], cuda.as_cuda_array(bias.view(-1)), 1.0, 0.0)
    torch.cuda.synchronize()
    ref = group_reference(torch, desc, a, b, offsets, c.clone(), 1.0, 0.0, bias=bias, relu=True)
    rows = int(offsets[-1])
    assert float(torch.linalg.norm(c[:rows].double() - ref[:rows]) / torch.linalg.norm(ref[:rows])) <= bound(desc)
    assert bool(torch.isnan(c[-TAIL:]).all()), "rows past the offsets written"


TRAP = r"""
import sys
import numpy as np
from numba import cuda
from numba.core import types
import blasdx.numba
from blasdx import SM, Arrangement, Grouped, Precision, Size

desc = Size(256, 384, 320) + Precision("bfloat16", "bfloat16", "float32") + Arrangement(
    "row_major", "col_major", "row_major") + SM(900) + Grouped()
g = blasdx.numba.device_api(desc)
GROUPS, ROWS = {groups}, {rows}


def body(a, b, c, offsets, groups, rows):
    smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
    schedule = g.make_schedule()
    g.schedule_groups(offsets, groups, rows, schedule)
    for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
        at = g.tile_of_groups(w, schedule, groups)
        group, row0, col0, group_rows = at
        acc = g.make_accumulator()
        g.group_mainloop(a, b[group * g.b_group_size:], at, smem, acc)
        g.store_block_tile(acc, c, row0, col0, 1.0, 0.0, group_rows)


kernel = cuda.jit(body)
kernel.compile((types.uint16[::1], types.uint16[::1], types.float32[::1], types.int32[::1], types.int64, types.int64))
blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)
offsets = np.minimum(np.arange(1, GROUPS + 1), {last}).astype(np.int32)
offsets[-1] = {last}  # the last group's end: the rows' end, or past it
a = cuda.to_device(np.zeros(ROWS * 320, np.uint16))
b = cuda.to_device(np.zeros(GROUPS * g.b_group_size, np.uint16))
c = cuda.to_device(np.zeros(ROWS * 384, np.float32))
try:
    kernel[4, g.block_dim, 0, g.shared_memory_size](a, b, c, cuda.to_device(offsets), GROUPS, ROWS)
    cuda.synchronize()
except Exception as error:  # the trap ends the context: Numba's CudaAPIError
    print("stopped:", error)
    sys.exit(0 if "LAUNCH_FAILED" in str(error) else 1)
print("ran on")
sys.exit(1)
"""


@pytest.mark.parametrize("groups, rows, last", [(1025, 2000, 2000), (4, 100, 101)],
                         ids=["more-groups-than-the-schedule-holds", "offsets-past-the-rows"])
def test_too_many_groups_or_offsets_past_the_rows_stop_the_kernel(groups, rows, last):
    """A trap ends the CUDA context, so each runs in a child process."""
    import subprocess
    import sys

    script = TRAP.format(groups=groups, rows=rows, last=last)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "stopped:" in result.stdout, result.stdout + result.stderr
