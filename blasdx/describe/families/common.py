"""What the instruction families share: the instruction arch chooses for the precisions, a block's
threads for a rate of outputs, and a Grid() tile fitted to its problem."""

from __future__ import annotations

import math

from ...arch import Instruction, choose_instruction
from ..operands import Operators, is_complex_of, precision_of, round_up
from ..operators import Size

# A condition of a family: the words explain() and UnsupportedError print, and whether it holds.
Condition = tuple[str, bool]

# Tiles a problem should have before the suggested tile stops shrinking: half the 132 SMs of
# an H100 (at one block per SM, a wave of tiles half the size costs about one of full ones).
GRID_MIN_TILES = 66


def chosen_instruction(ops: Operators) -> tuple[Instruction, str]:
    """The warp-level tensor-core instruction or FMA for the precisions on the SM, and why (arch)."""
    prec = precision_of(ops)
    return choose_instruction(prec["a"], prec["b"], prec["c"], is_complex_of(ops), ops["SM"].value)  # type: ignore[attr-defined]


def block_threads(outputs: int, per_thread: int) -> int:
    """Threads for ``outputs`` at ``per_thread`` each, rounded up to whole warps, from 32 to 256."""
    return min(256, max(32, round_up(math.ceil(outputs / per_thread), 32)))


def fitted_tile(size: Size, tile: tuple[int, int, int], m_step: int, k_step: int) -> tuple[int, int, int]:
    """``tile`` shrunk to the problem, its sides rounded up to the instruction's shape (m to
    ``m_step``, n to 16, k to ``k_step``); then, while the problem has fewer than GRID_MIN_TILES
    tiles, the longer side halves (m on ties), to 64 at least: few tiles leave most SMs idle."""
    m = min(tile[0], round_up(size.m, m_step))
    n = min(tile[1], round_up(size.n, 16))
    k = min(tile[2], round_up(size.k, k_step))
    while math.ceil(size.m / m) * math.ceil(size.n / n) < GRID_MIN_TILES:
        if m >= n and m > 64:
            m = max(64, round_up(m // 2, m_step))
        elif n > 64:
            n = max(64, round_up(n // 2, 16))
        else:
            break
    return m, n, k
