"""Warp(): each warp of a block runs its own GEMM of Size on its own tiles (the block GEMM's code with the warp as
its scope: gemm_rank() the lane, gemm_sync() __syncwarp). execute() runs a batch in the warp kernel
(templates/warp.cu.j2): an item a warp, WARPS_PER_BLOCK warps a block where their tiles fit in shared memory."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

from ..arch import shared_memory_limit
from ..codegen.hooks import NO_FUSION, Fusion
from ..codegen.naming import check_namespace
from ..codegen.render import fusion_context, render_block, render_common, template
from ..errors import UnsupportedError
from ..plan import GemmPlan, PlanOverrides, make_plan, with_alignment
from ..plan.block import name_stem, plan_as
from ..plan.explain import block_gemm_lines, kernels_line
from ..plan.kernel import MAX_GRID, ItemKernelPlan, copies_asynchronously, shared_layout
from . import ExecutionKind

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor

# Warps (GEMMs) a block of the warp kernel runs at once, where their tiles fit in shared memory: four fill an SM's
# warp slots with few blocks and keep a block's shared memory small enough for several blocks an SM.
WARPS_PER_BLOCK = 4
WARP_SIZE = 32


@dataclass(frozen=True)
class WarpGemmPlan(GemmPlan):
    """A Warp() descriptor's plan: the block GEMM's, run by one warp (``scope`` "warp")."""

    execution: ClassVar[str] = "warp"  # blasdx.kinds.warp
    scope: ClassVar[str] = "warp"

    def __hash__(self) -> int:  # GemmPlan's, computed once (a frozen dataclass would make its own each call)
        return self._hash

    @property
    def kernel_name(self) -> str:
        return f"{name_stem('warp_gemm', self)}_{self.digest}"


# PlanOverrides of the batched kernel, which the warp kernel does not have (it stages C, has no launch bounds to cap).
_BATCHED_KERNEL_OVERRIDES = ("c_in_registers", "min_blocks_per_sm")


def plan_warp(desc: Descriptor, overrides: PlanOverrides) -> WarpGemmPlan:
    """The block GEMM's plan of ``desc`` (whose Warp() fixes 32 threads) with the warp as its scope; of the
    overrides, those of the block GEMM (FMA micro-tiles and thread pairs)."""
    refused = [name for name in _BATCHED_KERNEL_OVERRIDES if getattr(overrides, name) is not None]
    if refused:
        raise UnsupportedError(f"PlanOverrides({', '.join(f'{name}=...' for name in refused)}) fix the batched kernel of "
                               f"Block() descriptors; a Warp() descriptor's warp kernel has no such choice")
    return plan_as(WarpGemmPlan, make_plan(desc, overrides))


@dataclass(frozen=True)
class WarpKernelPlan(ItemKernelPlan):
    """The plan of the warp kernel behind a Warp() descriptor's execute(): ``warps`` GEMMs a block, each warp its
    own stage of shared memory (``kernel``: one warp's GEMM laid out for the kernel). A KernelPlan."""

    kernel: WarpGemmPlan
    warps: int

    execution: ClassVar[str] = "warp"

    @property
    def sm(self) -> int:
        return self.kernel.sm

    @property
    def kernel_name(self) -> str:
        return f"{self.kernel.kernel_name}_w{self.warps}"

    @property
    def threads(self) -> int:
        return self.warps * WARP_SIZE

    @property
    def block_dim(self) -> tuple[int, int, int]:
        return (self.threads, 1, 1)

    @property
    def kernel_shared_memory_size(self) -> int:
        return self.warps * self.kernel.shared_memory_size

    def blocks(self, batch: int, resident_blocks: int, splits: int) -> int:
        """A warp an item: the blocks the batch fills; past MAX_GRID, warps loop over items."""
        return min(-(-batch // self.warps), MAX_GRID)


@lru_cache(maxsize=1024)
def warp_kernel_plan(plan: WarpGemmPlan | WarpKernelPlan) -> WarpKernelPlan:
    """The warp kernel of ``plan``: A, B and C of each warp in shared memory with leading dimensions padded against
    bank conflicts (unpadded where that does not fit), as many warps a block as fit, at most WARPS_PER_BLOCK."""
    if isinstance(plan, WarpKernelPlan):
        return plan
    limit = shared_memory_limit(plan.sm)
    mats, size = shared_layout(plan, True, False)
    if size > limit:
        mats, size = shared_layout(plan, False, False)
    warps = min(WARPS_PER_BLOCK, limit // size)
    if warps < 1:
        raise UnsupportedError(f"a warp's A, B and C take {size} bytes of shared memory, over SM {plan.sm}'s "
                               f"{limit} a block; use a smaller Size")
    kernel = replace(plan, a=mats["a"], b=mats["b"], c=mats["c"], shared_memory_size=size,
                     use_cp_async=copies_asynchronously(plan))
    return WarpKernelPlan(kernel, warps)


def render_warp_block(plan: WarpGemmPlan, name: str, own_kernel: bool = False) -> str:
    """The warp GEMM in namespace ``name`` (the block GEMM's code, warp-scoped) and its warp helpers."""
    check_namespace(name)
    return render_block(plan, name, own_kernel) + "\n" + template("warp.cuh.j2").render(name=name)


def render_warp_device_source(plan: WarpGemmPlan, name: str = "gemm") -> str:
    return render_common() + "\n" + render_warp_block(plan, name)


def render_warp_kernel(plan: WarpKernelPlan, name: str, fusion: Fusion = NO_FUSION) -> str:
    ns = "blasdx_warp_gemm"
    return template("warp.cu.j2").render(
        common=render_common(), device=render_warp_block(plan.kernel, ns, own_kernel=True), ns=ns,
        threads=plan.threads, warps=plan.warps, kernel_name=name, **fusion_context(ns, fusion, plan.kernel_parameters(fusion.bias, fusion.scaled)))


def explain_warp(desc: Descriptor, plan: WarpGemmPlan) -> list[str]:
    launched = warp_kernel_plan(with_alignment(plan, (16, 16, 16)))
    kernel = launched.kernel
    copies = ", ".join(f"{x.name.upper()} {x.vector_bytes} bytes at a time" for x in (kernel.a, kernel.b, kernel.c))
    return ([f"blasdx GEMM: {desc!r}",
             kernels_line(warp_kernel_plan(plan).kernel_name, launched.kernel_name, desc.alignment),
             "scope: each warp of a block runs its own GEMM (Warp()): the device API's copies, multiply and store take "
             "the lane from the thread index (gemm_rank(), thread_rank() % 32) and synchronize the warp alone "
             "(gemm_sync(), __syncwarp); warp_index() and warp_tiles() place a warp's A, B and C in shared memory"]
            + _without_wgmma_conditions(block_gemm_lines(desc, plan))
            + [f"execute() on 16-byte aligned arrays (as CuPy and PyTorch allocate them) launches {launched.kernel_name}:",
               f"  {launched.warps} warps a block ({launched.threads} threads), one batch item a warp, "
               f"{launched.kernel_shared_memory_size} bytes of shared memory ({kernel.shared_memory_size} a warp; "
               f"device_source()'s layout: shared_memory_size bytes a warp)",
               f"  copies to shared memory: {copies}; C staged in shared memory and copied back"])


def _without_wgmma_conditions(lines: list[str]) -> list[str]:
    """The block GEMM's lines but its list of wgmma's conditions, which a warp's 32 threads never meet (the
    instruction's line says which fail)."""
    out, skipping = [], False
    for line in lines:
        skipping = line.startswith("wgmma conditions:") or (skipping and line.startswith(" "))
        if not skipping:
            out.append(line)
    return out


KIND = ExecutionKind(execution="warp", plan=plan_warp, launched=warp_kernel_plan, aligned=with_alignment,
                     render_kernel=render_warp_kernel, render_device_source=render_warp_device_source,
                     explain=explain_warp, caches=(warp_kernel_plan, with_alignment))
