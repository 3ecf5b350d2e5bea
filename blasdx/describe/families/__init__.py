"""Instruction families, one module each: its conditions (with the words explain() and UnsupportedError
print), suggested tile and threads, where its accumulators live and its templates. The instruction is
that of the first family in FAMILIES whose conditions hold (``family_of``), decided here alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from ...arch import Instruction
from ..operands import Operators
from ..operators import Tile
from . import fma, mma, wgmma
from .common import Condition


class Family(Protocol):
    """What each family's module defines."""

    name: str  # InstructionFamily's word for it
    scope: str  # the Instruction.scope of what it issues: who issues one instruction
    accumulators: str  # where its accumulators live
    swizzled_operands: bool  # A and B lie in shared memory in the swizzled layouts its instructions read
    template: str  # its partial of templates/ (the tiles, multiply_tile, store_tile)
    accumulator_template: str  # its pieces of the device API (extending gemm/accumulator.cuh.j2)

    def conditions(self, ops: Operators, threads: int | None = None) -> tuple[Condition, ...]:
        """Each condition and whether it holds, at ``threads`` (default: BlockDim's, else its suggestion)."""
        ...

    def refusal(self, ops: Operators, conditions: tuple[Condition, ...]) -> str:
        """What the reason of a later family says of this one, where its ``conditions`` fail ("": nothing)."""
        ...

    def instruction(self, ops: Operators) -> tuple[Instruction, str]:
        """The instruction it issues where its conditions hold, and why."""
        ...

    def suggested_tile(self, ops: Operators) -> Tile | None:
        """A Grid() descriptor's tile; None where no tile shape lets its conditions hold."""
        ...

    def suggested_threads(self, ops: Operators) -> int:
        """The threads of a Block() descriptor without BlockDim."""
        ...

    def grid_tile_threads(self, ops: Operators) -> int | None:
        """The threads of a Grid() tile (Size is the tile) without BlockDim; None: its suggestion."""
        ...


# Tried in this order. tcgen05 (SM 100's MMA, whose accumulators live in tensor memory and which
# one thread issues for a pair of CTAs) would go first.
FAMILIES: tuple[Family, ...] = (wgmma, mma, fma)


class FamilyChoice(NamedTuple):
    family: Family
    instruction: Instruction
    reason: str  # explain()'s: why this instruction, and what the families before it lacked
    threads: int | None  # the threads its conditions held at (None: BlockDim's, else its suggestion)


def family_of(ops: Operators, threads: Callable[[Family], int | None] | None = None) -> FamilyChoice:
    """The first family whose conditions hold for ``ops`` (which has SM), each at ``threads(family)``
    (default: BlockDim's, else the family's suggestion): the one decision of which instruction runs."""
    notes: list[str] = []
    for family in FAMILIES:
        count = None if threads is None else threads(family)
        conditions = family.conditions(ops, count)
        if all(held for _, held in conditions):
            instruction, reason = family.instruction(ops)
            return FamilyChoice(family, instruction, "; ".join([reason, *notes]), count)
        if note := family.refusal(ops, conditions):
            notes.append(note)
    raise AssertionError("FMA's conditions always hold")


def family_named(name: str) -> Family:
    """The family InstructionFamily(name) demands."""
    return next(family for family in FAMILIES if family.name == name)


def family_issuing(instruction: Instruction) -> Family:
    """The family whose instructions ``instruction`` is one of (by who issues it)."""
    return next(family for family in FAMILIES if family.scope == instruction.scope)
