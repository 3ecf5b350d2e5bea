"""The execution kinds, one module each: ``blasdx.kinds.<name>`` serves the execution operator of that name
(``block`` serves Block()) with an ``ExecutionKind`` named ``KIND``: its planner, the kernel execute() launches for
its plans, their aligned forms, its renderers and its explainer. The pipeline reaches a kind only through
``of_descriptor`` and ``of_plan``; a new kind is its operator, its module here, its template and its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..codegen.hooks import Fusion
from ..describe.operators import execution_operators
from ..plan import DescriptorPlan, KernelPlan, PlanOverrides

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor


@dataclass(frozen=True)
class ExecutionKind:
    """What the pipeline asks of an execution kind; each plan of the kind names it (``plan.execution``)."""

    execution: str  # its plans' `execution` and its module's name
    plan: Callable[[Descriptor, PlanOverrides], Any]  # a descriptor's plan (UnsupportedError for overrides it has none of)
    launched: Callable[[Any], KernelPlan]  # the kernel execute() launches for a plan of this kind (a kernel plan: itself)
    aligned: Callable[[Any, tuple[int, int, int]], Any]  # a plan for arrays aligned to (A, B, C) bytes: wider copies
    render_kernel: Callable[[Any, str, Fusion], str]  # a kernel plan's complete source, named
    render_device_source: Callable[[Any, str], str]  # a descriptor plan's device code in a namespace
    explain: Callable[[Descriptor, Any], list[str]]  # a descriptor plan in words, one statement a line
    caches: tuple[Any, ...] = ()  # its planners' memos (functools.lru_cache): pipeline.clear_caches() empties them


def every_kind() -> tuple[ExecutionKind, ...]:
    """The kind of every execution operator."""
    return tuple(named(cls.__name__.lower()) for cls in execution_operators())


@cache
def named(execution: str) -> ExecutionKind:
    """The kind of plans whose ``execution`` is ``execution`` (the operator's name in lower case)."""
    return import_module(f"{__name__}.{execution}").KIND  # type: ignore[no-any-return]


def of_descriptor(desc: Descriptor) -> ExecutionKind:
    """The kind of an executable descriptor's execution operator."""
    return named(desc.execution.lower())  # type: ignore[union-attr]


def of_plan(plan: DescriptorPlan | KernelPlan) -> ExecutionKind:
    return named(plan.execution)


def launched_plan(plan: DescriptorPlan | KernelPlan) -> KernelPlan:
    """The plan of the kernel execute() launches for a descriptor's ``plan`` (a kernel's plan is its own)."""
    return of_plan(plan).launched(plan)


def aligned_plan(plan: DescriptorPlan, alignment: tuple[int, int, int]) -> DescriptorPlan:
    """``plan`` for arrays whose pointers and strides are aligned to ``alignment`` bytes (A, B, C): wider copies."""
    return of_plan(plan).aligned(plan, alignment)  # type: ignore[no-any-return]


def render_launched(plan: KernelPlan, name: str, fusion: Fusion) -> str:
    """The source of the kernel execute() launches (``plan`` from ``launched_plan``), named ``name``."""
    return of_plan(plan).render_kernel(plan, name, fusion)


def render_device_source(plan: DescriptorPlan, name: str = "gemm") -> str:
    """A descriptor plan's device code in namespace ``name``, ready to #include."""
    return of_plan(plan).render_device_source(plan, name)
