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
