"""Grid(): a problem of any Size over many blocks, each computing tiles of C with the block GEMM of its tile and a
pipelined K loop (blasdx.plan.grid, templates/grid.cuh.j2 and grid.cu.j2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..codegen.render import render_grid_device_source, render_grid_kernel
from ..errors import UnsupportedError
from ..plan import GridPlan, PlanOverrides, grid_with_alignment, make_grid_plan
from ..plan.explain import explain_grid
from . import ExecutionKind

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor


def _plan(desc: Descriptor, overrides: PlanOverrides) -> GridPlan:
    if not overrides.is_default:
        raise UnsupportedError("PlanOverrides fix choices of Block() descriptors; a Grid() descriptor takes its "
                               "choices as operators (Tile, Stages, BlockDim)")
    return make_grid_plan(desc)


def _launched(plan: GridPlan) -> GridPlan:
    return plan  # the grid kernel's plan is the descriptor's


KIND = ExecutionKind(execution="grid", plan=_plan, launched=_launched, aligned=grid_with_alignment,
                     render_kernel=render_grid_kernel, render_device_source=render_grid_device_source,
                     explain=explain_grid, caches=(grid_with_alignment,))
