"""blasdx.numba's Grid() device API without a GPU: persistent Numba kernels over a whole problem's tiles
(block_tile_origin, mainloop, store_block_tile) compile and link with LTO (the functions inlined, the accumulator
in registers, the cp.async K loop), per precision family on SM 800 and 900; its facts, refusals and cache identity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blasdx import SM, Arrangement, Block, Grid, Precision, Size, Type, compile_kernel

from .numba_support import cuda, grid_loop_signature, link, types
from .shared_kernels import persistent, persistent_with_bias

pytestmark = pytest.mark.compile

import blasdx.numba  # noqa: E402
from blasdx.codegen.render import numba_unit_identity  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")
PROBLEM = (300, 200, 250)  # edge tiles in m, n and k


def grid(a, b, c, sm, size=PROBLEM, kind="real", arrangement=RCR):
    return Size(*size) + Precision(a, b, c) + Type(kind) + arrangement + SM(sm) + Grid()


f16, f32, f64, u8, u16 = types.float16, types.float32, types.float64, types.uint8, types.uint16
CASES = [  # (id, descriptor, A, B and C dtypes, tensor-core instruction expected in the PTX)
    ("f16-f32-sm900-wgmma", grid("float16", "float16", "float32", 900), (f16, f16, f32), "wgmma.mma_async"),
    ("f16-sm800", grid("float16", "float16", "float16", 800), (f16, f16, f16), "mma.sync.aligned.m16n8k16"),
    ("bf16-sm900-wgmma", grid("bfloat16", "bfloat16", "float32", 900), (u16, u16, f32), ".bf16.bf16"),
    ("bf16-crc-sm800", grid("bfloat16", "bfloat16", "bfloat16", 800,
                            arrangement=Arrangement("col_major", "row_major", "col_major")), (u16, u16, u16), ".bf16"),
    ("fp8-sm900-wgmma", grid("float8_e4m3", "float8_e5m2", "float32", 900), (u8, u8, f32), "e4m3.e5m2"),
    ("tf32-sm800", grid("tfloat32", "tfloat32", "float32", 800), (f32, f32, f32), ".tf32"),
    ("f32-fma-sm800", grid("float32", "float32", "float32", 800), (f32, f32, f32), "fma.rn.f32"),
    ("f64-sm900", grid("float64", "float64", "float64", 900), (f64, f64, f64), ".f64"),
    ("int8-sm800", grid("int8", "int8", "int32", 800), (types.int8, types.int8, types.int32), ".s8.s8"),
    ("int8-sm900-wgmma", grid("int8", "int8", "int32", 900), (types.int8, types.int8, types.int32), ".s8.s8"),
    ("complex64-sm800", grid("float32", "float32", "float32", 800, kind="complex"),
     (types.complex64, types.complex64, types.complex64), "fma.rn.f32"),
]


@pytest.mark.parametrize("desc, dtypes, instruction", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_persistent_grid_kernel_links_with_everything_inlined(desc, dtypes, instruction):
    arch = desc.sm
    g = blasdx.numba.device_api(desc, arch=arch)
    scalar = types.complex128 if desc.is_complex else types.float64
    linked = link(persistent(g), grid_loop_signature(*dtypes, scalar), arch)
    assert linked.calls == 0, "a device function was not inlined"
    assert linked.count("ld.local") == linked.count("st.local") == 0, "the accumulator left the registers"
    assert linked.stack_frame == 0
    assert instruction in linked.ptx
    assert "cp.async" in linked.ptx, "the K loop copies by cp.async (a Grid() device API takes no TMA)"
    if desc.instruction.is_wgmma:
        assert linked.count("wgmma.mma_async") > 0 and linked.count("mma.sync") == 0


BF16 = grid("bfloat16", "bfloat16", "float32", 900)

TWIN = r"""
extern "C" __global__ void twin(const g::a_t* a, const g::b_t* b, g::c_t* c, float alpha, float beta) {
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


def test_a_grid_kernel_takes_registers_near_its_cpp_twin():
    g = blasdx.numba.device_api(BF16, arch=900)
    linked = link(persistent(g), grid_loop_signature(u16, u16, f32), 900)
    twin = compile_kernel(BF16.device_source("g") + TWIN, "twin", sm=900)
    assert twin.resources is not None
    assert linked.registers <= twin.resources.registers + 32, (linked.registers, twin.resources.registers)


def test_the_facts_are_the_cpp_device_apis():
    g = blasdx.numba.device_api(BF16, arch=900)
    m, n, k = PROBLEM
    assert (g.problem_m, g.problem_n, g.problem_k) == (m, n, k)
    assert (g.m, g.n, g.k) == tuple(BF16.tile)
    assert (g.problem_lda, g.problem_ldb, g.problem_ldc) == (k, k, n)  # row-major A, column-major B, row-major C
    assert g.stages == BF16.stages and g.stage_size == BF16.tile_descriptor.shared_memory_size_ab
    assert g.shared_memory_size == g.shared_memory_size_ab == g.stages * g.stage_size == BF16.shared_memory_size
    assert (g.block_tiles_m, g.block_tiles_n) == (math.ceil(m / g.m), math.ceil(n / g.n))
    assert g.block_tiles == g.block_tiles_m * g.block_tiles_n and g.k_tiles == math.ceil(k / g.k)
    assert g.block_dim == tuple(BF16.block_dim) and g.threads == math.prod(g.block_dim)
    assert not hasattr(g, "c_offset"), "a Grid() tile's stages hold A and B alone"
    block = blasdx.numba.device_api(BF16.tile_descriptor, arch=900)
    assert not hasattr(block, "mainloop") and not hasattr(block, "block_tile_origin")


def test_mainloop_range_in_parts_and_a_python_epilogue():
    g = blasdx.numba.device_api(BF16, arch=900)

    def kernel(a, b, d, alpha):
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
                    d[(row0 + r) * g.problem_n + col0 + col] = acc[i] * alpha

    linked = link(kernel, (u16[::1], u16[::1], f32[::1], f32), 900)
    assert linked.calls == 0 and linked.count("wgmma.mma_async") > 0


def test_hooks_and_a_bias_in_store_block_tile():
    desc = grid("float16", "float16", "float32", 800)
    g = blasdx.numba.device_api(desc, arch=800, prologue="negate", epilogue="relu", bias=True)

    linked = link(persistent_with_bias(g, g.problem_n), (f16[::1], f16[::1], f32[::1], f32[::1], f64, f64), 800)
    assert linked.calls == 0 and linked.count("ld.local") == 0 and linked.stack_frame == 0
    assert "max.f32" in linked.ptx or "setp" in linked.ptx  # relu


def test_link_source_has_numba_compile_the_grid_source():
    desc = grid("float64", "float64", "float64", 800)
    g = blasdx.numba.device_api(desc, link="source")
    linked = link(persistent(g), grid_loop_signature(f64, f64, f64), 800)
    assert linked.calls == 0 and linked.count("ld.local") == 0 and "cp.async" in linked.ptx


def test_the_cache_identity_tells_a_grid_from_its_tile():
    tile = BF16.tile_descriptor
    assert numba_unit_identity(BF16.plan) != numba_unit_identity(tile.plan)
    assert blasdx.numba.device_api(BF16, arch=900).namespace != blasdx.numba.device_api(tile, arch=900).namespace
    other = BF16.replace(Size(301, 200, 250))  # the problem is compiled in: another unit
    assert blasdx.numba.device_api(other, arch=900).namespace != blasdx.numba.device_api(BF16, arch=900).namespace


def _typing(kernel_of, signature):
    def action():
        link(kernel_of(blasdx.numba.device_api(BF16, arch=900)), signature, 900)
    return action


def _origin_of_a_float(g):
    def kernel(c):
        row0, col0 = g.block_tile_origin(1.5)
        c[0] = row0 + col0
    return kernel


def _store_without_its_bias(g):
    def kernel(c):
        acc = g.make_accumulator()
        g.store_block_tile(acc, c, 0, 0, 1.0, 0.0)
    return kernel


def _biased(kernel_of):
    def action():
        link(kernel_of(blasdx.numba.device_api(BF16, arch=900, bias=True)), (f32[::1],), 900)
    return action


TYPING_ERRORS = [  # (id, the kernel compiled, message)
    ("wrong-dtype", _typing(persistent, grid_loop_signature(f16, u16, f32)),
     r"(?s)mainloop\(\) argument 1 is this GEMM's A \(bfloat16\): an array of uint16, got array\(float16.*"
     r"float8_e4m3: uint8"),
    ("origin-of-a-float", _typing(_origin_of_a_float, (f32[::1],)),
     r"block_tile_origin\(\) takes a tile's index \(an integer\), got float64"),
    ("bias-arguments-missing", _biased(_store_without_its_bias), r"store_block_tile\(\) takes 9 arguments, got 6"),
]


@pytest.mark.parametrize("action, match", [e[1:] for e in TYPING_ERRORS], ids=[e[0] for e in TYPING_ERRORS])
def test_typing_errors(action, match):
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match=match):
        action()


def test_a_block_descriptor_gets_no_grid_functions():
    g = blasdx.numba.device_api(Size(64, 64, 64) + Precision("float16", "float16", "float32") + RCR + SM(900)
                                + Block(), arch=900)
    assert not any(hasattr(g, name) for name in ("mainloop", "mainloop_range", "store_block_tile", "block_tiles"))
