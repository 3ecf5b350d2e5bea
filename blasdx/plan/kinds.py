"""The execution kinds as plan types: what the pipeline and the launcher ask of any of them.

A descriptor's plan (``DescriptorPlan``) is a Block() descriptor's block GEMM (GemmPlan) or a Grid()
descriptor's GridPlan; the kernel execute() launches for it is a ``KernelPlan`` (the batched kernel's
BatchedPlan, or the GridPlan itself). A new execution kind adds its plan types here and its renderer
to blasdx.codegen.render's tables; the pipeline and the launcher never test which kind they hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .block import GemmPlan, with_alignment
from .grid import GridPlan, grid_with_alignment
from .kernel import BatchedPlan, KernelParameter, batched_plan

DescriptorPlan = GemmPlan | GridPlan


class KernelPlan(Protocol):
    """The plan of a kernel that execute() launches."""

    @property
    def kind(self) -> str: ...  # which renderer prints it (blasdx.codegen.render)
    @property
    def tma(self) -> bool: ...  # its A and B come by TMA (tensor maps bound per launch)
    @property
    def cluster(self) -> bool: ...  # its blocks run in clusters of two
    @property
    def sm(self) -> int: ...
    @property
    def kernel_name(self) -> str: ...
    @property
    def threads(self) -> int: ...
    @property
    def block_dim(self) -> tuple[int, int, int]: ...
    @property
    def kernel_shared_memory_size(self) -> int: ...
    def kernel_parameters(self, has_bias: bool, /) -> tuple[KernelParameter, ...]: ...
    def work(self, batch: int, /) -> int: ...
    def splits(self, work: int, resident_blocks: int, /) -> int: ...
    def blocks(self, batch: int, resident_blocks: int, splits: int, /) -> int: ...
    def workspace_bytes(self, work: int, splits: int, /) -> int: ...
    def registers_balance(self, launch_registers: int, /) -> bool: ...


# Each kind of descriptor plan: the kernel execute() launches for it, and the plan for arrays aligned to more.
_LAUNCHED: dict[type, Callable[[Any], Any]] = {GemmPlan: batched_plan, GridPlan: lambda plan: plan,
                                               BatchedPlan: lambda plan: plan}  # a kernel's plan is its own
_ALIGNED: dict[type, Callable[[Any, tuple[int, int, int]], Any]] = {GemmPlan: with_alignment,
                                                                    GridPlan: grid_with_alignment}


def launched_plan(plan: DescriptorPlan | BatchedPlan) -> BatchedPlan | GridPlan:
    """The plan of the kernel execute() launches for a descriptor's ``plan``."""
    return _LAUNCHED[type(plan)](plan)  # type: ignore[no-any-return]


def aligned_plan(plan: DescriptorPlan, alignment: tuple[int, int, int]) -> DescriptorPlan:
    """``plan`` for arrays whose pointers and strides are aligned to ``alignment`` bytes (A, B, C): wider copies."""
    return _ALIGNED[type(plan)](plan, alignment)  # type: ignore[no-any-return]
