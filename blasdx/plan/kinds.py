"""What the pipeline and the launcher ask of any execution kind's plans (blasdx.kinds holds the kinds).

A descriptor's plan (``DescriptorPlan``: a Block() descriptor's block GEMM, GemmPlan; a Grid() descriptor's
GridPlan; ...) and the plan of the kernel execute() launches for it (``KernelPlan``: the batched kernel's
BatchedPlan, the GridPlan itself, ...) each name their kind (``execution``); the pipeline and the launcher never
test which kind they hold.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from .block import MatrixPlan
from .kernel import KernelParameter


class DescriptorPlan(Protocol):
    """The plan of an executable descriptor."""

    execution: ClassVar[str]  # its kind: blasdx.kinds.<execution>
    @property
    def sm(self) -> int: ...
    @property
    def a(self) -> MatrixPlan: ...
    @property
    def b(self) -> MatrixPlan: ...
    @property
    def c(self) -> MatrixPlan: ...
    @property
    def is_complex(self) -> bool: ...
    @property
    def scalar_type(self) -> str: ...  # alpha and beta, in C++
    @property
    def scalar_precision(self) -> str: ...
    @property
    def kernel_name(self) -> str: ...
    @property
    def item_block(self) -> DescriptorPlan | None: ...  # a batched alternative for large batches (GridPlan's)


class KernelPlan(Protocol):
    """The plan of a kernel that execute() launches."""

    execution: ClassVar[str]  # its kind: blasdx.kinds.<execution>
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
