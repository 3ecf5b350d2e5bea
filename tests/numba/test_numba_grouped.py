"""blasdx.numba's Grouped() device API without a GPU: Numba kernels on the groups' scheduler (make_schedule,
schedule_groups, tile_of_groups, group_mainloop, store_block_tile of a group's rows) compile and link with LTO (the
functions inlined, the accumulator in registers, the schedule in shared memory), for the precisions Grouped() takes
on SM 900; its facts, refusals and typing errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

from blasdx import SM, Arrangement, Grid, Grouped, Precision, Size, compile_kernel
from blasdx.errors import UnsupportedError

from .numba_support import cuda, link, types
from .shared_kernels import on_the_scheduler

pytestmark = pytest.mark.compile

import blasdx.numba  # noqa: E402
from blasdx.kinds.grouped import MAX_GROUPS, SCHEDULE_SIZE  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")


def grouped(a, b, c, arrangement=RCR, size=(256, 384, 320)):
    return Size(*size) + Precision(a, b, c) + arrangement + SM(900) + Grouped()


def signature(a, b, c):
    return (a[::1], b[::1], c[::1], types.int32[::1], types.int32, types.int64, types.float64, types.float64)


f16, f32, u8, u16 = types.float16, types.float32, types.uint8, types.uint16
CASES = [  # (id, descriptor, A, B and C dtypes, the wgmma's types in the PTX)
    ("bf16-f32", grouped("bfloat16", "bfloat16", "float32"), (u16, u16, f32), ".bf16.bf16"),
    ("bf16", grouped("bfloat16", "bfloat16", "bfloat16"), (u16, u16, u16), ".bf16.bf16"),
    ("f16-f32-rrr", grouped("float16", "float16", "float32", RRR), (f16, f16, f32), ".f16.f16"),
    ("f16", grouped("float16", "float16", "float16"), (f16, f16, f16), ".f16.f16"),
    ("fp8-e4m3-e5m2-f32", grouped("float8_e4m3", "float8_e5m2", "float32"), (u8, u8, f32), ".e4m3.e5m2"),
]


@pytest.mark.parametrize("desc, dtypes, instruction", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_kernel_on_the_groups_scheduler_links_with_everything_inlined(desc, dtypes, instruction):
    g = blasdx.numba.device_api(desc, arch=900)
    linked = link(on_the_scheduler(g), signature(*dtypes), 900)
    assert linked.calls == 0, "a device function was not inlined"
    assert linked.count("ld.local") == linked.count("st.local") == 0, "the accumulator or a tile left the registers"
    assert linked.stack_frame == 0
    assert linked.count("wgmma.mma_async") > 0 and instruction in linked.ptx
    assert "cp.async" in linked.ptx, "group_mainloop copies by cp.async (a device API takes no TMA)"
    assert re.search(rf"\.shared \.align 16 \.b8 {g.namespace}_schedule_\d+\[{SCHEDULE_SIZE}\];", linked.ptx)
    assert "trap;" in linked.ptx  # too many groups, or bad offsets, stop the kernel


TWIN = r"""
extern "C" __global__ void twin(const g::a_t* a, const g::b_t* b, g::c_t* c, const int* offsets, int groups,
                                long long rows, float alpha, float beta) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ g::group_schedule schedule;
  g::schedule_groups(offsets, groups, rows, schedule);
  for (long long w = blockIdx.x; w < static_cast<long long>(g::block_tiles_n) * schedule.before[groups]; w += gridDim.x) {
    const g::group_tile at = g::tile_of_groups(w, schedule, groups);
    g::accumulator acc = g::make_accumulator();
    g::group_mainloop(a, b + at.group * static_cast<long long>(g::problem_k) * g::problem_n, at, smem, acc);
    g::store_block_tile(acc, c, at.row0, at.col0, alpha, beta, blasdx::identity{}, blasdx::identity{}, at.rows);
  }
}
"""


def test_a_grouped_kernel_takes_registers_near_its_cpp_twin():
    desc = CASES[0][1]
    g = blasdx.numba.device_api(desc, arch=900)
    linked = link(on_the_scheduler(g), signature(*CASES[0][2]), 900)
    twin = compile_kernel(desc.device_source("g") + TWIN, "twin", sm=900)
    assert twin.resources is not None
    assert linked.registers <= twin.resources.registers + 32, (linked.registers, twin.resources.registers)


def test_the_facts_are_the_cpp_device_apis():
    desc = CASES[0][1]
    g = blasdx.numba.device_api(desc, arch=900)
    plan = desc.plan
    assert (g.m, g.n, g.k) == tuple(desc.tile) and (g.problem_n, g.problem_k) == (384, 320)
    assert g.block_dim == tuple(desc.block_dim) and g.threads == plan.tile.threads, "blocks of the tile's threads"
    assert g.max_groups == MAX_GROUPS and g.schedule_size == SCHEDULE_SIZE
    assert g.b_group_size == 384 * 320, "a column-major B of k x n a group"
    assert g.stages == plan.stages and g.shared_memory_size == g.stages * g.stage_size
    assert g.block_tiles_n == plan.tiles_n and g.k_tiles == plan.k_tiles
    for absent in ("problem_m", "block_tiles", "block_tiles_m", "block_tile_origin", "mainloop", "mainloop_range",
                   "rows_inside"):
        assert not hasattr(g, absent), f"{absent}: a fixed m's, which a Grouped() call's rows replace"
    grid = blasdx.numba.device_api(desc.replace(Grid()), arch=900)
    assert not any(hasattr(grid, x) for x in ("make_schedule", "schedule_groups", "tile_of_groups", "max_groups"))


def test_hooks_and_a_bias_per_group_in_store_block_tile():
    desc = grouped("float16", "float16", "float32", RRR)
    g = blasdx.numba.device_api(desc, arch=900, prologue="negate", epilogue="relu", bias="row")
    n = g.problem_n

    def kernel(a, b, c, bias, offsets, groups, rows):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        schedule = g.make_schedule()
        g.schedule_groups(offsets, groups, rows, schedule)
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            group, row0, col0, group_rows = g.tile_of_groups(w, schedule, groups)
            acc = g.make_accumulator()
            g.group_mainloop(a, b[group * g.b_group_size:], (group, row0, col0, group_rows), smem, acc)
            g.store_block_tile(acc, c, row0, col0, 1.0, 0.0, group_rows, bias[group * n:], 0, 1)

    arrays = (f16[::1], f16[::1], f32[::1], f32[::1], types.int32[::1])
    linked = link(kernel, (*arrays, types.int32, types.int64), 900)
    assert linked.calls == 0 and linked.count("ld.local") == 0 and linked.stack_frame == 0
    assert "max.f32" in linked.ptx or "setp" in linked.ptx  # relu


def test_an_epilogue_of_ones_own_sees_the_groups_rows():
    g = blasdx.numba.device_api(CASES[0][1], arch=900)

    def kernel(a, b, offsets, groups, rows, token_of_row, weight_of_row, out):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        schedule = g.make_schedule()
        g.schedule_groups(offsets, groups, rows, schedule)
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            at = g.tile_of_groups(w, schedule, groups)
            group, row0, col0, group_rows = at
            cols = g.cols_inside(col0)
            acc = g.make_accumulator()
            g.group_mainloop(a, b[group * g.b_group_size:], at, smem, acc)
            for i in range(g.accumulator_size):
                r = g.row(i)
                col = g.col(i)
                if g.in_bounds(i) and r < group_rows and col < cols:
                    row = row0 + r
                    cuda.atomic.add(out, token_of_row[row] * g.problem_n + col0 + col, weight_of_row[row] * acc[i])

    arrays = (u16[::1], u16[::1], types.int32[::1], types.int32, types.int64, types.int32[::1], f32[::1], f32[::1])
    linked = link(kernel, arrays, 900)  # (a Python loop over acc indexes it at run time: as Grid()'s, not asserted)
    assert linked.calls == 0 and linked.count("wgmma.mma_async") > 0 and "atom.global.add.f32" in linked.ptx


def test_link_source_has_numba_compile_the_grouped_source():
    g = blasdx.numba.device_api(CASES[3][1], link="source")
    linked = link(on_the_scheduler(g), signature(f16, f16, f16), 900)
    assert linked.calls == 0 and linked.count("ld.local") == 0 and linked.count("wgmma.mma_async") > 0


def test_each_schedule_is_its_own_shared_array():
    g = blasdx.numba.device_api(CASES[0][1], arch=900)

    def kernel(offsets, groups, rows, out):
        first = g.make_schedule()
        second = g.make_schedule()
        g.schedule_groups(offsets, groups, rows, first)
        g.schedule_groups(offsets[1:], groups - 1, rows, second)
        out[0] = g.scheduled_tiles(first, groups) - g.scheduled_tiles(second, groups - 1)

    linked = link(kernel, (types.int32[::1], types.int32, types.int64, types.int64[::1]), 900)
    assert len(set(re.findall(rf"\b({g.namespace}_schedule_\d+)\[{SCHEDULE_SIZE}\]", linked.ptx))) == 2


# --- refusals: descriptors device_api() cannot serve, and kernels Numba cannot type --------------------------


def test_grouped_k_is_refused_with_what_to_use():
    desc = Size(256, 384, 320) + Precision("bfloat16", "bfloat16", "float32") + Arrangement(
        "col_major", "row_major", "row_major") + SM(900) + Grouped("k")
    with pytest.raises(UnsupportedError, match=r"Grouped\('k'\) has no groups' schedule.*execute\(\).*"
                                               r"device_api\(descriptor\.tile_descriptor\)"):
        blasdx.numba.device_api(desc, arch=900)


def test_linking_for_an_sm_older_than_grouped_tiles_is_refused():
    with pytest.raises(UnsupportedError, match=r"arch 800 is older than the descriptor's SM\(900\)"):
        blasdx.numba.device_api(CASES[0][1], arch=800)
    with pytest.raises(UnsupportedError, match=r"Grouped\(\) runs Grid\(\)'s TMA kernel on wgmma tiles"):
        blasdx.numba.device_api(CASES[0][1].replace(SM(800)), arch=800)


BF16 = CASES[0][1]


def _typed(kernel_of, sig, **options):
    def action():
        link(kernel_of(blasdx.numba.device_api(BF16, arch=900, **options)), sig, 900)
    return action


def _tile_at_a_float(g):
    def kernel(offsets, out):
        schedule = g.make_schedule()
        g.schedule_groups(offsets, 4, 100, schedule)
        group, row0, col0, rows = g.tile_of_groups(0.5, schedule, 4)
        out[0] = group + row0 + col0 + rows
    return kernel


def _mainloop_of_a_pair(g):
    def kernel(a, b, out):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.group_mainloop(a, b, (0, 0), smem, acc)
        out[0] = acc[0]
    return kernel


def _store_without_the_rows(g):
    def kernel(c):
        acc = g.make_accumulator()
        g.store_block_tile(acc, c, 0, 0, 1.0, 0.0)
    return kernel


def _schedule_of_floats(g):
    words = g.schedule_size // 4

    def kernel(offsets, out):
        schedule = cuda.shared.array(words, dtype=np.float32)
        g.schedule_groups(offsets, 4, 100, schedule)
        out[0] = g.scheduled_tiles(schedule, 4)
    return kernel


I32, I64 = types.int32[::1], types.int64[::1]
TYPING_ERRORS = [  # (id, the kernel compiled, message)
    ("offsets-int64", _typed(on_the_scheduler, signature(u16, u16, f32)[:3] + (I64,) + signature(u16, u16, f32)[4:]),
     r"schedule_groups\(\) argument 1 must be the groups' ends in A's rows \(offsets\): a 1-D array of int32, "
     r"got array\(int64"),
    ("schedule-of-floats", _typed(_schedule_of_floats, (I32, I64)),
     r"schedule_groups\(\) argument 4 must be the groups' schedule: the int32 array of make_schedule\(\), "
     r"got array\(float32"),
    ("tile-at-a-float", _typed(_tile_at_a_float, (I32, I32)),
     r"tile_of_groups\(\) argument 1 must be an integer, got float64"),
    ("mainloop-of-a-pair", _typed(_mainloop_of_a_pair, (u16[::1], u16[::1], f32[::1])),
     r"group_mainloop\(\) argument 3 must be a tile of tile_of_groups\(\) \(group, row0, col0, rows\), "
     r"got UniTuple\(int64 x 2\)"),
    ("store-without-the-rows", _typed(_store_without_the_rows, (f32[::1],)),
     r"store_block_tile\(\) takes 7 arguments, got 6"),
    ("store-without-the-bias", _typed(_store_without_the_rows, (f32[::1],), bias=True),
     r"store_block_tile\(\) takes 10 arguments, got 6"),
    ("b-of-float16", _typed(on_the_scheduler, signature(u16, f16, f32)),
     r"group_mainloop\(\) argument 2 is this GEMM's B \(bfloat16\): an array of uint16, got array\(float16"),
]


@pytest.mark.parametrize("action, match", [e[1:] for e in TYPING_ERRORS], ids=[e[0] for e in TYPING_ERRORS])
def test_typing_errors(action, match):
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match=match):
        action()
