"""What the operators say of A, B and C, defaults filled in: precisions, arrangement, element sizes,
and the threads a descriptor fixes. The traits that no instruction family decides, which the
families (:mod:`.families`) read; :mod:`.traits` holds the rest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .operators import Arrangement, Operator, Precision, TransposeMode
from .precision import PRECISIONS

Operators = Mapping[str, Operator]

# The defaults of an absent Precision and Arrangement, made once (operators are immutable).
_PRECISION, _ARRANGEMENT = Precision(), Arrangement()


def execution_of(ops: Operators) -> str | None:
    """The execution operator's name ("Block", "Grid", ...); None without one."""
    op = ops.get("Execution")
    return None if op is None else op.name  # type: ignore[attr-defined]


# The execution operators whose Size is a problem over many blocks, each computing tiles of C (Grid()'s kernel).
TILED_EXECUTIONS = ("Grid", "Grouped")


def is_tiled(ops: Operators) -> bool:
    """Whether the execution operator runs Size over many blocks of tiles (Grid(), Grouped())."""
    return execution_of(ops) in TILED_EXECUTIONS


class GivenThreads(NamedTuple):
    threads: int
    source: str  # who gives them, for explain(): "BlockDim gives", "Warp() runs"


def given_threads_of(ops: Operators) -> GivenThreads | None:
    """The threads of one GEMM where the descriptor fixes them: BlockDim's, or its execution kind's own."""
    if "BlockDim" in ops:
        return GivenThreads(ops["BlockDim"].threads, "BlockDim gives")  # type: ignore[attr-defined]
    fixed = ops["Execution"].fixed_threads if "Execution" in ops else None  # type: ignore[attr-defined]
    return None if fixed is None else GivenThreads(fixed, f"{execution_of(ops)}() runs")


def promotes_of(ops: Operators, instruction_narrow: bool) -> bool:
    """Whether partial sums go into float32 registers every PROMOTION_K of k: where the instruction's
    accumulation is narrow (``instruction_narrow``, arch.Instruction.narrow_accumulation) and
    Accumulation('fast') does not ask for the tensor cores' own sum."""
    fast = "Accumulation" in ops and ops["Accumulation"].value == "fast"  # type: ignore[attr-defined]
    return instruction_narrow and not fast


def arrangement_of(ops: Operators) -> dict[str, str]:
    """Memory order of A, B, C: Arrangement, else TransposeMode, else the default."""
    if "TransposeMode" in ops:
        tm = ops["TransposeMode"]
        layout = TransposeMode.LAYOUT
        return {"a": layout[tm.a], "b": layout[tm.b], "c": "col_major"}  # type: ignore[attr-defined]
    arr = ops.get("Arrangement", _ARRANGEMENT)
    return {"a": arr.a, "b": arr.b, "c": arr.c}  # type: ignore[attr-defined]


def precision_of(ops: Operators) -> dict[str, str]:
    prec = ops.get("Precision", _PRECISION)
    return {"a": prec.a, "b": prec.b, "c": prec.c}  # type: ignore[attr-defined]


def is_complex_of(ops: Operators) -> bool:
    return "Type" in ops and ops["Type"].value == "complex"  # type: ignore[attr-defined]


def element_sizes_of(ops: Operators) -> dict[str, int]:
    """Bytes of one stored element of A, B, C (a complex element holds two reals; a packed
    element, a byte of two int4 or a uint32 of 32 bits, holds several values)."""
    factor = 2 if is_complex_of(ops) else 1
    return {m: PRECISIONS[p].itemsize * factor for m, p in precision_of(ops).items()}


def packs_of(ops: Operators) -> dict[str, int]:
    """Values per stored element of A, B, C: 1, or 2 (int4, uint4) or 32 (binary)."""
    return {m: PRECISIONS[p].pack for m, p in precision_of(ops).items()}


def round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def takes_float_micro_tiles(precision: Mapping[str, str], is_complex: bool, m: int, n: int) -> bool:
    """Whether the FMA path can give a thread an 8x4 float micro-tile: real float32 A and B
    (accumulated in float, so C is not float64) and m, n multiples of 8 and 4. The plan
    takes it where each thread has 32 outputs or more (see the FMA micro-tile rule in
    blasdx.plan.block), and ``suggested_block_dim`` asks for that many threads where
    m * n >= 4096."""
    return (not is_complex and precision["a"] == precision["b"] == "float32" and precision["c"] != "float64"
            and m % 8 == 0 and n % 4 == 0)


def k_major(arr: dict[str, str]) -> bool:
    """Whether A and B run contiguously along k (row-major A, column-major B)."""
    return (arr["a"], arr["b"]) == ("row_major", "col_major")
