"""Block(): one block GEMM of Size, whose device API a user's kernel calls; execute() runs a batch, an item a
block, in the batched kernel (blasdx.plan.kernel, templates/kernel.cu.j2)."""

from __future__ import annotations

from ..codegen.render import render_batched_kernel, render_device_source
from ..plan import BatchedPlan, GemmPlan, batched_plan, kernel_plan, make_plan, with_alignment
from ..plan.explain import explain_block
from . import ExecutionKind


def _launched(plan: GemmPlan | BatchedPlan) -> BatchedPlan:
    return plan if isinstance(plan, BatchedPlan) else batched_plan(plan)


KIND = ExecutionKind(execution="block", plan=make_plan, launched=_launched, aligned=with_alignment,
                     render_kernel=render_batched_kernel, render_device_source=render_device_source,
                     explain=explain_block, caches=(kernel_plan, with_alignment))
