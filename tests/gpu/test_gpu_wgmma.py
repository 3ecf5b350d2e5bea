"""Hopper's warpgroup MMA (wgmma) on an sm_90 GPU: every precision it takes, every
arrangement, sizes from one 64 x 8 tile to 64 x 256 and several warpgroups, K loops; the
mma.sync fallback of the same descriptor (misaligned shared memory, load hooks); the
batched execute() with hooks and a bias; and a probe that the test kernels do take the
wgmma branch (compiled for sm_90a, shared memory 1024-byte aligned)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, InstructionFamily, Precision, Size
from blasdx.runtime.arguments import scalar

from ..device_kernels import CHAINED, KERNELS, OVERLAPPED, chained_descriptors
from .gpu_support import (
    SEED,
    Operand,
    _describe,
    _step,
    _whole_problem,
    bound,
    relative_error,
    run_and_check,
    run_k_loop,
)

pytestmark = pytest.mark.gpu

PRECISIONS = [("float16", "float16", "float32"), ("float16",) * 3, ("bfloat16", "bfloat16", "float32"),
              ("bfloat16",) * 3]
PRECISION_IDS = ["f16f32", "f16", "bf16f32", "bf16"]
ARRANGEMENTS = ["".join(x) for x in itertools.product("rc", repeat=3)]


@pytest.fixture(autouse=True)
def _sm90():
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma runs on sm_90 devices (H100, H200) only")


def _wgmma(prec, arr, size, threads=None):
    """The descriptor, demanding wgmma (so that a planner that stopped choosing it fails here)."""
    desc = _describe(prec, False, arr, size, 900, threads) + InstructionFamily("wgmma")
    assert desc.instruction.is_wgmma, desc.explain(width=0)
    return desc


@pytest.mark.parametrize("size", [(128, 128, 64), (192, 96, 48)])
@pytest.mark.parametrize("arr", ARRANGEMENTS)
@pytest.mark.parametrize("prec", PRECISIONS, ids=PRECISION_IDS)
def test_every_precision_and_arrangement(prec, arr, size):
    run_k_loop(_wgmma(prec, arr, size), tiles=3, alpha=2, beta=-1)


@pytest.mark.parametrize("size", [(64, 8, 16), (64, 16, 32), (64, 40, 32), (64, 256, 64), (128, 64, 128),
                                  (256, 128, 64), (64, 512, 16), (320, 48, 80)])
@pytest.mark.parametrize("arr", ["rcr", "rrr", "ccc"])
def test_sizes_and_k_loops(arr, size):
    if arr[1] == "r" and size[1] % 16:
        pytest.skip("row-major B needs n a multiple of 16 for wgmma (test_plan covers the fallback)")
    desc = _wgmma(("float16", "float16", "float32"), arr, size)
    for tiles in (1, 4):
        run_k_loop(desc, tiles=tiles, alpha=1, beta=0.5)


K_MAJOR = [("tfloat32", "tfloat32", "float32"), ("float8_e4m3", "float8_e5m2", "float32"),
           ("float8_e4m3", "float8_e4m3", "float16"), ("int8", "uint8", "int32"), ("int8", "int8", "int32")]


@pytest.mark.parametrize("size", [(128, 128, 64), (64, 8, 32), (192, 96, 96), (64, 256, 64)])
@pytest.mark.parametrize("prec", K_MAJOR, ids=["tf32", "e4m3e5m2", "e4m3f16", "s8u8", "s8"])
def test_k_major_precisions(prec, size):
    """tfloat32, float8 and int8 (row-major A, column-major B), in K loops."""
    run_k_loop(_wgmma(prec, "rcr", size), tiles=3, alpha=2, beta=-1)


@pytest.mark.parametrize("threads", [128, 256, 384])
def test_warpgroups_and_extra_threads(threads):
    """More tiles than warpgroups (several passes in one wgmma batch) and the reverse; a
    launch with more threads than BlockDim. (The test kernel has no __launch_bounds__: 512
    threads would need fewer registers than it takes.)"""
    desc = _wgmma(("bfloat16", "bfloat16", "float32"), "rcr", (128, 128, 64), threads)
    run_k_loop(desc, tiles=2, beta=0)
    run_k_loop(desc, tiles=2, beta=0, launch_threads=threads + 128)


PROBE = r"""
extern "C" __global__ void probe(int* out) {
  extern __shared__ __align__(16) unsigned char smem[];
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  out[0] = 1;
#else
  out[0] = 0;
#endif
  out[1] = static_cast<int>(blasdx::shared_address(smem + gemm::a_offset) & 1023);
  out[2] = static_cast<int>(blasdx::shared_address(smem + gemm::b_offset) & 1023);
}
"""


@pytest.mark.parametrize("tiles", [1, 2, 7])
@pytest.mark.parametrize("prec, arr, size", [(("float16", "float16", "float32"), "rcr", (64, 64, 64)),
                                             (("bfloat16",) * 3, "rrr", (128, 128, 64)),
                                             (("float16", "float16", "float32"), "crc", (192, 96, 48)),
                                             (K_MAJOR[1], "rcr", (128, 64, 128))])
def test_multiply_async_k_loop_overlaps_the_next_tiles_loads(prec, arr, size, tiles):
    """The device API's overlapped K loop (two stages; the next tiles load while this one
    multiplies): every value of C written once, within the bound."""
    desc = _wgmma(prec, arr, size)
    two_stages = 2 * desc.plan.c.smem_offset  # A and B of a step end where C would start
    run_k_loop(desc, tiles, alpha=2, beta=-1, source=OVERLAPPED, name="k_loop_overlapped", shared_memory=two_stages)


def test_the_test_kernels_take_the_wgmma_branch():
    """compile_kernel builds sm_90a code, and a kernel's dynamic shared memory (declared as in
    the test kernels) starts 1024-byte aligned: the conditions of the wgmma branch."""
    import cupy

    desc = _wgmma(("float16", "float16", "float32"), "rcr", (64, 64, 64))
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + PROBE, "probe")
    out = cupy.full(3, -1, dtype=np.int32)
    kernel(1, 32, (out,), shared_mem=desc.shared_memory_size)
    assert out.get().tolist() == [1, 0, 0]
    assert 0 < kernel.registers <= 255


SHIFTED = KERNELS.replace("smem + gemm::a_offset", "smem + 16 + gemm::a_offset").replace(
    "smem + gemm::b_offset", "smem + 16 + gemm::b_offset")


@pytest.mark.parametrize("prec, arr", [(("float16", "float16", "float32"), "rcr"), (("float16", "float16", "float32"), "crc"),
                                       (("bfloat16", "bfloat16", "float32"), "rrr"), (K_MAJOR[0], "rcr"),
                                       (K_MAJOR[1], "rcr"), (K_MAJOR[3], "rcr")])
def test_misaligned_shared_memory_falls_back_to_mma_sync(prec, arr):
    """A and B 16 bytes past a 1024-byte boundary: the same fragments by mma.sync."""
    import cupy

    rng = np.random.default_rng(SEED)
    desc = _wgmma(prec, arr, (128, 64, 64))
    m, n, k = desc.size
    tiles = 3
    big = _whole_problem(desc, tiles)
    a, b, c = (Operand(big, x, None, None, rng) for x in "abc")
    c.poison_all()
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + SHIFTED, "k_loop")
    visits = cupy.zeros(m * n, dtype=np.int32)
    kernel(1, desc.block_dim,
           (a.array, b.array, c.array, np.int64(a.ld), np.int64(b.ld), np.int64(c.ld), np.int32(tiles),
            np.int64(_step(a, m, k, "cols")), np.int64(_step(b, k, n, "rows")), visits,
            scalar(1, desc.plan, "alpha"), scalar(0, desc.plan, "beta")),
           shared_mem=desc.shared_memory_size + 16)
    assert bool((visits == 1).all())
    ref = a.values[0] @ b.values[0]
    if bound(desc) == 0:
        assert np.array_equal(c.result()[0], ref)
    else:
        assert relative_error(c.result()[0], ref) <= bound(desc)


@pytest.mark.parametrize("size", [(128, 64, 64), (64, 32, 32)])
@pytest.mark.parametrize("prec", PRECISIONS, ids=PRECISION_IDS)
@pytest.mark.parametrize("arr", ["rcr", "rrr", "crc", "ccc"])
def test_batched_execute(prec, arr, size):
    """Batched execute(); 64x32x32 has one tile, whose 16-bit C the mma.sync path would keep in
    registers (wgmma stages it)."""
    rng = np.random.default_rng(SEED)
    desc = _wgmma(prec, arr, size)
    run_and_check(desc, rng, batch=37, alpha=1.5, beta=-0.5)


def test_batched_execute_with_hooks_and_bias():
    """A prologue (load hooks: the mma.sync fallback), an epilogue and a bias on a wgmma GEMM."""
    import cupy

    rng = np.random.default_rng(SEED)
    desc = _wgmma(("float16", "float16", "float32"), "rcr", (64, 128, 64))
    a = cupy.asarray(rng.standard_normal((9, 64, 64)).astype(np.float16))
    b = cupy.asarray(rng.standard_normal((9, 128, 64)).astype(np.float16)).transpose(0, 2, 1)
    bias = cupy.asarray(rng.standard_normal(128).astype(np.float32))
    a64, b64 = a.get().astype(np.float64), b.get().astype(np.float64)
    c = cupy.full((9, 64, 128), np.nan, dtype=np.float32)
    desc.execute(a, b, c, epilogue="relu", bias=bias)
    want = np.maximum(a64 @ b64 + bias.get(), 0)
    assert relative_error(c.get(), want) <= bound(desc)
    desc.execute(a, b, c, prologue="relu")
    want = np.maximum(a64, 0) @ np.maximum(b64, 0)
    assert relative_error(c.get(), want) <= bound(desc)


def test_forbidding_wgmma_gives_the_same_answer():
    rng = np.random.default_rng(SEED)
    desc = _describe(("bfloat16", "bfloat16", "float32"), False, "rrr", (128, 128, 64), 900)
    assert desc.instruction.is_wgmma  # without InstructionFamily: the planner's choice
    mma = desc + InstructionFamily("mma")
    assert not mma.instruction.is_wgmma and mma.block_dim == (256, 1, 1)
    run_and_check(mma, rng, batch=5)
    run_and_check(desc, rng, batch=5)


def test_chained_wgmmas_through_store_at():
    """(A B) E with two wgmma descriptors: the first accumulator stored into the second's
    swizzled A by store_at."""
    import cupy


    rng = np.random.default_rng(SEED)
    first, second = chained_descriptors()
    assert first.instruction.is_wgmma and second.instruction.is_wgmma
    kernel = blasdx.compile_kernel(first.device_source("g1") + second.device_source("g2") + CHAINED, "chained")
    a = (rng.standard_normal((64, 64)) * 0.25).astype(np.float16)
    b = (rng.standard_normal((64, 64)) * 0.25).astype(np.float16)
    e = (rng.standard_normal((64, 32)) * 0.25).astype(np.float16)
    out = cupy.full((64, 32), np.nan, dtype=np.float16)
    column_major = (cupy.asarray(np.ascontiguousarray(x.T)) for x in (b, e))
    kernel(1, first.block_dim, (cupy.asarray(a), *column_major, out),
           shared_mem=first.shared_memory_size + second.shared_memory_size)
    ab = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16).astype(np.float64)
    assert relative_error(out.get().astype(np.float64), ab @ e.astype(np.float64)) < 4e-3


def test_block_dim_operator_in_warpgroups():
    desc = Size(128, 128, 32) + Precision("float16", "float16", "float32") + Arrangement(
        "row_major", "col_major", "row_major") + SM(900) + Block() + BlockDim(128)
    assert desc.instruction.is_wgmma and desc.plan.tile_n == 128  # two passes of 64 registers
    run_k_loop(desc, tiles=2, beta=0)
