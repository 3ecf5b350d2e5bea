"""Traits of a plain mapping of operators (kind -> operator): defaults filled in.

The ``*_of`` helpers here are the one home of what a descriptor's traits mean; the rules
(:mod:`blasdx.describe.rules`), the Descriptor and the planner read them and never
re-derive them.
"""

from __future__ import annotations

from collections.abc import Mapping

from .operators import Arrangement, Operator, Precision, Size
from .precision import PRECISIONS

Operators = Mapping[str, Operator]


def arrangement_of(ops: Operators) -> dict[str, str]:
    """Memory order of A, B, C: Arrangement, else TransposeMode, else the default."""
    if "TransposeMode" in ops:
        tm = ops["TransposeMode"]
        layout = {"N": "col_major", "T": "row_major", "C": "row_major"}
        return {"a": layout[tm.a], "b": layout[tm.b], "c": "col_major"}  # type: ignore[attr-defined]
    arr = ops.get("Arrangement", Arrangement())
    return {"a": arr.a, "b": arr.b, "c": arr.c}  # type: ignore[attr-defined]


def precision_of(ops: Operators) -> dict[str, str]:
    prec = ops.get("Precision", Precision())
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


def extents_of(size: Size) -> dict[str, tuple[int, int]]:
    """(rows, cols) of A, B and C."""
    return {"a": (size.m, size.k), "b": (size.k, size.n), "c": (size.m, size.n)}


def stored_rows(layout: str, rows: int, cols: int) -> int:
    """The extent a leading dimension must cover: rows for col_major, cols for row_major."""
    return rows if layout == "col_major" else cols


def leading_dimension_of(ops: Operators) -> dict[str, int]:
    """LeadingDimension if given, else tight: rows of col_major, columns of row_major."""
    if "LeadingDimension" in ops:
        ld = ops["LeadingDimension"]
        return {"a": ld.a, "b": ld.b, "c": ld.c}  # type: ignore[attr-defined]
    arr = arrangement_of(ops)
    return {m: stored_rows(arr[m], *rc) for m, rc in extents_of(ops["Size"]).items()}  # type: ignore[arg-type]


def round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def shared_memory_parts_of(ops: Operators) -> dict[str, int]:
    """Bytes of A, B, C in shared memory: ld x (stored columns) x element size, each
    rounded up to 16 bytes so that the next matrix starts 16-byte aligned. Leading
    dimensions count values; a packed element holds ``pack`` of them."""
    arr, ld, esize = arrangement_of(ops), leading_dimension_of(ops), element_sizes_of(ops)
    pack = packs_of(ops)
    parts = {}
    for m, (rows, cols) in extents_of(ops["Size"]).items():  # type: ignore[arg-type]
        outer = cols if arr[m] == "col_major" else rows
        parts[m] = round_up(-(-ld[m] // pack[m]) * outer * esize[m], 16)
    return parts


def padded_leading_dimension(ld: int, element_size: int, unit: int = 16) -> int:
    """``ld`` (in stored elements) grown to an odd number of ``unit``-byte pieces, so that
    consecutive rows start in different bank groups: with 16-byte units, eight rows'
    16-byte pieces (ldmatrix, 32-bit fragment words) never share banks; with 32-byte
    units, neither do four rows' 32-byte pieces (the double fragments of mma m8n8k4,
    read half a warp at a time). The unit is the instruction's ``padding_unit``."""
    step = max(1, unit // element_size)
    padded = round_up(ld, step)
    if (padded * element_size // unit) % 2 == 0:
        padded += step
    return padded


def takes_float_micro_tiles(precision: Mapping[str, str], is_complex: bool, m: int, n: int) -> bool:
    """Whether the FMA path can give a thread an 8x4 float micro-tile: real float32 A and B
    (accumulated in float, so C is not float64) and m, n multiples of 8 and 4. The plan
    takes it where each thread has 32 outputs or more (see the FMA micro-tile rule in
    blasdx.plan.block), and ``suggested_block_dim`` asks for that many threads where
    m * n >= 4096."""
    return (not is_complex and precision["a"] == precision["b"] == "float32" and precision["c"] != "float64"
            and m % 8 == 0 and n % 4 == 0)
