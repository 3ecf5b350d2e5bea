"""Numba kernels that the CPU tests (compiled and linked, tests/numba/) and the GPU tests (run, tests/gpu/) share."""

from __future__ import annotations

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'blasdx[numba-cu13]')")


def on_the_scheduler(g):
    """A persistent kernel over every group's tiles of a Grouped() descriptor's device API ``g``: the schedule, then
    per tile the group's K loop and its rows."""

    def kernel(a, b, c, offsets, groups, rows, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        schedule = g.make_schedule()
        g.schedule_groups(offsets, groups, rows, schedule)
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            at = g.tile_of_groups(w, schedule, groups)
            group, row0, col0, group_rows = at
            acc = g.make_accumulator()
            g.group_mainloop(a, b[group * g.b_group_size:], at, smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta, group_rows)

    return kernel


def persistent(g):
    """A persistent Grid() kernel: each block walks the tiles of C from its own, a K loop (mainloop) and the
    epilogue (store_block_tile) each, on the whole matrices."""

    def kernel(a, b, c, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):
            row0, col0 = g.block_tile_origin(t)
            acc = g.make_accumulator()
            g.mainloop(a, b, row0, col0, smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta)

    return kernel


def persistent_with_bias(g, row_stride):
    """persistent's kernel with a bias argument after C (row_stride apart, columns 1 apart) for store_block_tile."""

    def kernel(a, b, c, bias, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):
            row0, col0 = g.block_tile_origin(t)
            acc = g.make_accumulator()
            g.mainloop(a, b, row0, col0, smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta, bias, row_stride, 1)

    return kernel
