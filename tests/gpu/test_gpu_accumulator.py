"""The register-accumulator device API on a GPU: K loops over real matrices (run-time
leading dimensions), every precision family and arrangement, odd sizes, each value's
(row, col) checked element by element, load/store with alpha and beta on NaN-poisoned C,
more threads than BlockDim, and two descriptors chained through an accumulator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import blasdx
from blasdx import SM, Arrangement, Block, MaxAlignment, Precision, Size
from blasdx.runtime.arguments import scalar

from ..device_kernels import (
    CHAIN_CASES,
    CHAINED,
    EDGES,
    KERNELS,
    chain_descriptors,
    chain_id,
    chain_source,
    chained_descriptors,
)
from .gpu_support import (
    SEED,
    Operand,
    _describe,
    assert_stops_with_a_trap,
    bound,
    random_values,
    relative_error,
    run_k_loop,
    storage_dtype,
)

pytestmark = pytest.mark.gpu


FAMILIES = [  # precisions, complex, size, SM
    (("float16", "float16", "float32"), False, (64, 64, 64), 900),
    (("float16", "float16", "float16"), False, (30, 31, 40), 900),
    (("bfloat16", "bfloat16", "float32"), False, (32, 48, 32), 900),
    (("tfloat32", "tfloat32", "float32"), False, (13, 5, 16), 900),
    (("float64", "float64", "float64"), False, (16, 24, 8), 900),
    (("int8", "uint8", "int32"), False, (32, 32, 64), 900),
    (("float8_e4m3", "float8_e5m2", "float32"), False, (32, 32, 64), 900),
    (("float32", "float32", "float32"), False, (64, 64, 32), 900),
    (("float32", "float32", "float32"), False, (30, 31, 33), 900),
    (("int16", "int16", "int64"), False, (16, 16, 16), 900),
    (("float16", "float16", "float16"), True, (16, 16, 16), 900),
    (("float64", "float64", "float64"), True, (8, 16, 12), 900),
]


@pytest.mark.parametrize("tiles", [1, 3, 64])
@pytest.mark.parametrize("spec", FAMILIES, ids=[f"{'c' if s[1] else ''}{'-'.join(s[0])}" for s in FAMILIES])
def test_k_loop_in_every_precision_family(spec, tiles):
    prec, cx, size, sm = spec
    run_k_loop(_describe(prec, cx, "rcr", size, sm), tiles, alpha=2, beta=-1)


@pytest.mark.parametrize("spec", FAMILIES[:1] + FAMILIES[4:6] + FAMILIES[7:8] + FAMILIES[11:],
                         ids=["f16f32-wgmma", "f64", "i8", "f32", "cf64"])
def test_k_loop_in_the_shared_memory_of_a_and_b_alone(spec):
    """A K loop that keeps C in registers runs in shared_memory_size_ab bytes (C's part left out)."""
    prec, cx, size, sm = spec
    desc = _describe(prec, cx, "rcr", size, sm)
    run_k_loop(desc, tiles=3, alpha=2, beta=-1, shared_memory=desc.shared_memory_size_ab)


ARRANGEMENTS = ["".join(x) for x in itertools.product("rc", repeat=3)]


@pytest.mark.parametrize("arr", ARRANGEMENTS)
@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("float32",) * 3, ("float64",) * 3],
                         ids=["f16", "f32", "f64"])
def test_every_arrangement_with_poisoned_c(prec, arr):
    run_k_loop(_describe(prec, False, arr, (48, 40, 24), 900), tiles=2, beta=0)


@pytest.mark.parametrize("prec, size, threads", [
    (("float16", "float16", "float32"), (64, 64, 64), 32),  # mma.sync, several tiles a warp
    (("float16", "float16", "float32"), (64, 64, 64), 64),
    (("float16", "float16", "float32"), (64, 64, 64), 256),  # wgmma
    (("float16", "float16", "float16"), (32, 32, 32), 48),  # a warp and a half: threads past the workers
    (("float64",) * 3, (16, 24, 8), None),
    (("int8", "uint8", "int32"), (32, 32, 64), None),
    (("float32",) * 3, (30, 31, 33), None),  # FMA
], ids=lambda x: "-".join(x) if isinstance(x, tuple) and isinstance(x[0], str) else str(x))
def test_threads_and_extra_threads(prec, size, threads):
    """Fewer warps than tiles (several tiles a thread), threads past the workers, and a launch
    with more threads than BlockDim: where every thread of BlockDim works, those multiply a
    worker's tiles into values that are not part of C (multiply has no branch); C is the same."""
    desc = _describe(prec, False, "rcr", size, 900, threads)
    run_k_loop(desc, tiles=2, beta=0)
    run_k_loop(desc, tiles=2, beta=0, launch_threads=desc.max_threads_per_block + 64)


PARTIAL_WARP = r'''
import cupy
from blasdx import Arrangement, Block, Precision, SM, Size, compile_kernel
desc = Size(32, 32, 32) + Precision("float16") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
kernel = compile_kernel(desc.device_source("g") + """
extern "C" __global__ void once(const g::a_t* a, const g::b_t* b, g::c_t* c) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<g::a_t*>(smem + g::a_offset);
  auto* sb = reinterpret_cast<g::b_t*>(smem + g::b_offset);
  g::load_a(a, sa); g::load_b(b, sb); g::copy_wait();
  g::accumulator acc = g::make_accumulator();
  g::multiply(sa, sb, acc);
  g::store(acc, c, g::ldc, g::scalar_t(1), g::scalar_t(0));
}
""", "once")
a, b = cupy.ones((32, 32), cupy.float16), cupy.ones((32, 32), cupy.float16)
c = cupy.zeros((32, 32), cupy.float16)
kernel((1,), (64,), (a, b, c), shared_mem=desc.shared_memory_size)  # a whole warp past BlockDim: runs
assert bool((c == 32).all()), c
launch = lambda: kernel((1,), (48,), (a, b, c), shared_mem=desc.shared_memory_size)  # half a warp past it: stops
'''


def test_a_block_ending_in_part_of_a_warp_past_blockdim_stops():
    """Threads past a BlockDim whose threads all work multiply a worker's tiles with mma.sync and
    ldmatrix, which need whole warps: a launch of more threads than BlockDim that ends in part of
    a warp stops (a trap) instead of running those on missing lanes; a whole extra warp runs."""
    assert_stops_with_a_trap(PARTIAL_WARP)


@pytest.mark.parametrize("prec, size, arr", [
    (("float16",) * 3, (32, 32, 32), "rrr"),  # mma.sync
    (("bfloat16",) * 3, (64, 48, 32), "crr"),
    (("float16",) * 3, (64, 64, 64), "rcr"),  # wgmma
], ids=["f16-32", "bf16-64x48x32", "f16-64-wgmma"])
@pytest.mark.parametrize("c_extra", [0, 2, 1], ids=["ldc-n", "ldc-n+2", "ldc-n+1"])
@pytest.mark.parametrize("beta", [0, -1])
def test_16_bit_c_at_any_leading_dimension(prec, size, arr, c_extra, beta):
    """16-bit row-major C of whole tiles, in global memory: store() writes four neighbours a lane
    on wgmma tiles where ldc is a multiple of four, pairs where ldc is even, else single values.
    Each value once, within the bound, on NaN-poisoned C where beta = 0; and the same through C
    in shared memory (pairs)."""
    desc = _describe(prec, False, arr, size, 900)
    run_k_loop(desc, tiles=2, alpha=2, beta=beta, c_ld=size[1] + c_extra)
    run_k_loop(desc, tiles=2, alpha=2, beta=beta, c_ld=size[1] + c_extra, source=THROUGH_SHARED_C,
               name="through_shared_c")


# KERNELS' K loop with C through shared memory: load_c there, store() there, then store_c.
THROUGH_SHARED_C = r"""
extern "C" __global__ void through_shared_c(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long lda,
                                            long long ldb, long long ldc, int tiles, long long a_step,
                                            long long b_step, int* visits, gemm::scalar_t alpha, gemm::scalar_t beta) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  auto* sc = reinterpret_cast<gemm::c_t*>(smem + gemm::c_offset);
  gemm::accumulator acc = gemm::make_accumulator();
  gemm::load_c(c, ldc, sc);
  for (int t = 0; t < tiles; ++t) {
    gemm::load_a(a + t * a_step, lda, sa);
    gemm::load_b(b + t * b_step, ldb, sb);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  for (int i = 0; i < gemm::accumulator::size; ++i)
    if (acc.in_bounds(i)) atomicAdd(visits + acc.row(i) * gemm::n + acc.col(i), 1);
  gemm::store(acc, sc, gemm::ldc, alpha, beta);
  __syncthreads();
  gemm::store_c(sc, c, ldc);
}
"""


@pytest.mark.parametrize("spec", FAMILIES[:2] + FAMILIES[4:5] + FAMILIES[7:8] + FAMILIES[10:],
                         ids=["f16f32", "f16", "f64", "f32", "cf16", "cf64"])
def test_load_then_store(spec):
    """load reads C into the accumulators; store(2, 1) then writes 3 C, in place."""
    import cupy

    prec, cx, size, sm = spec
    desc = _describe(prec, cx, "rcr", size, sm)
    c, _ = run_k_loop(desc, tiles=1)
    before = c.result()[0]
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + KERNELS, "load_then_store")
    kernel(1, desc.block_dim, (c.array, np.int64(c.ld), scalar(2, desc.plan, "alpha"), scalar(1, desc.plan, "beta")))
    cupy.cuda.Device().synchronize()
    assert relative_error(c.result()[0], 3 * before) <= 2 * bound(desc) + 1e-12


@pytest.mark.parametrize("prec", ["int4", "binary"])
def test_packed_k_loop(prec):
    """4-bit and binary operands, packed along k, in a K loop of 4 tiles (exact)."""
    import cupy

    rng = np.random.default_rng(SEED)
    m, n, k, tiles = 32, 32, (64 if prec == "int4" else 256), 4
    desc = Size(m, n, k) + Precision(prec, prec, "int32") + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    lo, hi = (-8, 8) if prec == "int4" else (0, 2)
    a = rng.integers(lo, hi, size=(m, k * tiles))
    b = rng.integers(lo, hi, size=(k * tiles, n))
    a_dev = cupy.asarray(blasdx.pack(a, prec, axis=-1))
    b_dev = cupy.asarray(blasdx.pack(np.ascontiguousarray(b.T), prec, axis=-1))  # B column-major: k contiguous
    c = cupy.full((m, n), -77, dtype=np.int32)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + KERNELS, "k_loop")
    visits = cupy.zeros(m * n, dtype=np.int32)
    per = blasdx.describe.precision.PRECISIONS[prec].pack
    kernel(1, desc.block_dim, (a_dev, b_dev, c, np.int64(k * tiles), np.int64(k * tiles), np.int64(n), np.int32(tiles),
                               np.int64(k // per), np.int64(k // per), visits, np.int32(1), np.int32(0)),
           shared_mem=desc.shared_memory_size)
    ref = a @ b if prec == "int4" else (a[:, :, None] ^ b[None, :, :]).sum(axis=1)
    assert bool((visits == 1).all())
    assert np.array_equal(c.get(), ref)


def test_chained_gemms_through_an_accumulator():
    """(A B) E with the first accumulator stored to shared memory as the second's A."""
    import cupy

    rng = np.random.default_rng(SEED)
    first, second = chained_descriptors()
    kernel = blasdx.compile_kernel(first.device_source("g1") + second.device_source("g2") + CHAINED, "chained")
    a = (rng.standard_normal((64, 64)) * 0.25).astype(np.float16)
    b = (rng.standard_normal((64, 64)) * 0.25).astype(np.float16)
    e = (rng.standard_normal((64, 32)) * 0.25).astype(np.float16)
    out = cupy.full((64, 32), np.nan, dtype=np.float16)
    column_major = (cupy.asarray(np.ascontiguousarray(x.T)) for x in (b, e))  # B and E stored by columns
    kernel(1, first.block_dim, (cupy.asarray(a), *column_major, out),
           shared_mem=first.shared_memory_size + second.shared_memory_size)
    ab = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    ref = ab @ e.astype(np.float64)
    assert relative_error(out.get().astype(np.float64), ref) < 4e-3


@pytest.mark.parametrize("b_shift", [0, 16], ids=["b_aligned", "b_off_1024"])
@pytest.mark.parametrize("case", CHAIN_CASES, ids=chain_id)
def test_multiply_chained(case, b_shift):
    """(A B) E with the first accumulator as the second GEMM's A: from registers (wgmma, or
    mma.sync on the same fragments where E is not 1024-byte aligned) or through shared memory;
    every element of the NaN-poisoned output written and within the bound."""
    import cupy

    if case[0] == 900 and cupy.cuda.Device().compute_capability != "90":
        pytest.skip("SM(900) descriptors run on sm_90 devices")
    first, second = chain_descriptors(case)
    (m, n1, k), n2 = first.size, second.size[1]
    p1, p2 = first.precision, second.precision
    rng = np.random.default_rng(SEED)
    a, b = (Operand(first, x, None, random_values(getattr(p1, x), (1, *shape), rng, False) / 4, rng)
            for x, shape in (("a", (m, k)), ("b", (k, n1))))
    e = Operand(second, "b", None, random_values(p2.b, (1, n1, n2), rng, False) / 4, rng)
    out = Operand(second, "c", None, None, rng)
    out.poison_all()
    kernel = blasdx.compile_kernel(chain_source(case), "chain")
    shared = -(-first.shared_memory_size_ab // 1024) * 1024 + second.shared_memory_size + 1024
    kernel(1, second.block_dim, (a.array, b.array, e.array, out.array, np.int32(b_shift)), shared_mem=shared)
    got = out.result()[0]
    ab = (a.values[0] @ b.values[0]).astype(storage_dtype(p2.a)).astype(np.float64)  # the accumulator as the second A
    assert relative_error(got, ab @ e.values[0]) <= bound(first) + bound(second)


EDGE_CASES = [  # precisions, arrangement, the descriptor's tile, the problem (M, N, K)
    (("float16", "float16", "float32"), "rcr", (64, 64, 32), (100, 70, 45)),  # wgmma on SM 900
    (("bfloat16", "bfloat16", "float32"), "rrr", (128, 64, 32), (130, 65, 33)),  # wgmma, B transposed
    (("float16", "float16", "float16"), "ccc", (32, 32, 32), (45, 33, 70)),  # mma.sync with ldmatrix
    (("tfloat32", "tfloat32", "float32"), "rcr", (32, 32, 16), (40, 50, 30)),
    (("float32", "float32", "float32"), "crr", (32, 32, 16), (33, 47, 20)),  # FMA
    (("float64", "float64", "float64"), "crc", (16, 16, 8), (37, 21, 19)),
    (("int8", "int8", "int32"), "rcr", (32, 32, 32), (50, 40, 70)),
]


# With MaxAlignment (shared memory 16-byte aligned), rows of 1- and 2-byte elements off 16-byte
# boundaries (odd leading dimensions) move in 16-byte pieces cut from aligned loads.
ALIGNED_EDGE_CASES = [spec for spec in EDGE_CASES if spec[0][0] in ("float16", "bfloat16", "int8")]


@pytest.mark.parametrize("spec,aligned", [(s, False) for s in EDGE_CASES] + [(s, True) for s in ALIGNED_EDGE_CASES],
                         ids=[f"{'-'.join(p)}-{a}" for p, a, _, _ in EDGE_CASES]
                         + [f"{'-'.join(p)}-{a}-max_alignment" for p, a, _, _ in ALIGNED_EDGE_CASES])
def test_edge_tiles_of_a_larger_problem(spec, aligned):
    """A problem of any size walked in the descriptor's tiles: edge tiles load partly (zeros
    past the matrix) and store partly; every element of the NaN-poisoned C is written once."""
    rng = np.random.default_rng(SEED)
    prec, arr, tile, (big_m, big_n, big_k) = spec
    desc = _describe(prec, False, arr, tile, 900)
    if aligned:
        desc = desc + MaxAlignment
        assert "copy_runs_shifted" in desc.device_source("gemm")
    whole = Size(big_m, big_n, big_k)
    for op in desc.operators:
        if op.kind not in ("Size", "Execution", "BlockDim"):
            whole = whole + op
    a, b, c = (Operand(whole, x, None, None, rng) for x in "abc")
    c.poison_all()
    strides = [(x.ld, 1) if x.layout == "row_major" else (1, x.ld) for x in (a, b, c)]
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + EDGES, "edges")
    kernel(1, desc.block_dim,
           (a.array, b.array, c.array, np.int32(big_m), np.int32(big_n), np.int32(big_k), np.int64(a.ld),
            np.int64(b.ld), np.int64(c.ld), *(np.int64(v) for pair in strides for v in pair),
            scalar(1, desc.plan, "alpha"), scalar(0, desc.plan, "beta")),
           shared_mem=desc.shared_memory_size)
    out, ref = c.result()[0], a.values[0] @ b.values[0]
    if bound(desc) == 0:
        assert np.array_equal(out, ref), f"{desc!r} over {spec[3]} (seed {SEED})"
    else:
        assert relative_error(out, ref) <= bound(desc), f"{desc!r} over {spec[3]} (seed {SEED})"
