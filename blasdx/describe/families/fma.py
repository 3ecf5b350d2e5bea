"""FMA on the CUDA cores: each thread multiplies micro-tiles of C into its registers; it takes every
precision, complex ones included, on every SM (templates/gemm/fma.cuh.j2)."""

from __future__ import annotations

from ...arch import FMA, Instruction
from ..operands import (
    Operators,
    arrangement_of,
    element_sizes_of,
    is_complex_of,
    k_major,
    precision_of,
    takes_float_micro_tiles,
)
from ..operators import Tile
from .common import Condition, block_threads, chosen_instruction, fitted_tile

name = "fma"
scope = "thread"
accumulators = "registers"
swizzled_operands = False
template = "gemm/fma.cuh.j2"
accumulator_template = "gemm/fma_accumulator.cuh.j2"


def conditions(ops: Operators, threads: int | None = None) -> tuple[Condition, ...]:
    return (("FMA, which takes every precision on every SM", True),)


def refusal(ops: Operators, conditions: tuple[Condition, ...]) -> str:
    return ""  # its conditions always hold


def instruction(ops: Operators) -> tuple[Instruction, str]:
    """FMA, with the reason no tensor-core instruction takes the precisions (arch.choose_instruction)."""
    return FMA, chosen_instruction(ops)[1]


def suggested_tile(ops: Operators) -> Tile:
    """A Grid() tile of 128 x 128 x 32 for float32 (256 threads, an 8x8 micro-tile each), 64 deep where A
    and B are K-major and the tile keeps 128 x 64 or more (deeper tiles under it left one block an SM,
    which ran slower); else 128 x 64 x 16, or 64 x 64 x 8 for 64-bit and complex values."""
    size, esize = ops["Size"], element_sizes_of(ops)["a"]
    if takes_float_micro_tiles(precision_of(ops), is_complex_of(ops), 8, 8):  # the tile's sides are multiples of 8
        tile = (128, 128, 64 if k_major(arrangement_of(ops)) else 32)
    else:
        tile = (128, 64, 16) if esize <= 4 else (64, 64, 8)
    m, n, k = fitted_tile(size, tile, 16, 8)  # type: ignore[arg-type]
    return Tile(m, n, 32 if k > 32 and m * n < 128 * 64 else k)


def suggested_threads(ops: Operators) -> int:
    """A thread per 32 outputs for float32 with 4096 or more (an 8x4 micro-tile each:
    ``takes_float_micro_tiles``), else per 16."""
    m, n = ops["Size"].m, ops["Size"].n  # type: ignore[attr-defined]
    large_float = takes_float_micro_tiles(precision_of(ops), is_complex_of(ops), m, n) and m * n >= 4096
    return block_threads(m * n, 32 if large_float else 16)


def grid_tile_threads(ops: Operators) -> int | None:
    return None  # the tile's own suggestion
