"""From a descriptor to plans: every decision the kernels need, as frozen values.

- :mod:`.block`: the block GEMM's plan (GemmPlan): instruction, types, tiling, copies and
  the shared-memory layout of ``device_source()``.
- :mod:`.kernel`: the batched kernel behind ``execute()``: padded shared memory, items in
  flight, where C lives, and the kernel's parameter list.
- :mod:`.grid`: the grid-level GEMM of a Grid() descriptor (GridPlan): its tile's block
  GEMM, stages of the K loop, tile order.
- :mod:`.kinds`: what the pipeline and the launcher ask of any execution kind's plans (blasdx.kinds holds the kinds).
- :mod:`.overrides`: PlanOverrides, the planner's choices fixed by hand.
- :mod:`.explain`: the plans in words.
"""

from .block import GemmPlan, MatrixPlan, make_plan, with_alignment
from .grid import GridPlan, grid_with_alignment, make_grid_plan
from .kernel import KERNEL_PARAMETERS, BatchedPlan, batched_plan, kernel_plan
from .kinds import DescriptorPlan, KernelPlan
from .overrides import NO_OVERRIDES, PlanOverrides

__all__ = ["GemmPlan", "MatrixPlan", "make_plan", "with_alignment", "GridPlan", "make_grid_plan",
           "grid_with_alignment", "kernel_plan", "KERNEL_PARAMETERS", "BatchedPlan", "batched_plan",
           "DescriptorPlan", "KernelPlan",
           "PlanOverrides", "NO_OVERRIDES"]
