"""What the instruction families share: the instruction arch chooses for the precisions, a block's
threads for a rate of outputs, and a Grid() tile fitted to its problem."""

from __future__ import annotations

import math

from ...arch import Instruction, choose_instruction
from ..operands import Operators, is_complex_of, precision_of, round_up
from ..operators import Size

# A condition of a family: the words explain() and UnsupportedError print, and whether it holds.
Condition = tuple[str, bool]

# Blocks a wave of Grid() tiles takes: the 132 SMs of an H100 SXM or an H200 at one block each, the GPUs
# the suggested tiles were measured on (on others the waves fall otherwise; the results are the same).
WAVE_BLOCKS = 132
# Tiles a problem should have before the suggested tile stops shrinking: half a wave's blocks
# (at one block per SM, a wave of tiles half the size costs about one of full ones).
GRID_MIN_TILES = WAVE_BLOCKS // 2
# The share of 256-row tiles' waves (their count times 256 rows) at or under which wgmma's suggested tile takes
# 192 rows: a 192-row tile costs about 3/4 of a 256-row one, so it pays where it leaves no more waves, as
# 3072^3's 384 tiles in 3 waves where 288 tall ones take 3 too (H200: 0.76 -> 0.99x cuBLAS), and loses a
# few percent where the waves are many anyway (benchmarks/RESULTS.md, Grid against cuBLAS).
SHORTER_TILE_SHARE = 0.85
# The rate of a wgmma tile under 192 rows (one or two warpgroups) against a taller one's, a wave's work alike: where a
# batch's waves of tall tiles take as long as short ones', the tall ones ran 7-35% faster (16 x 1024^3, 64 x
# 512x512x256); 12 x 768^3's 64-row tiles, 7 waves for 2 of 256 rows, 30% faster (benchmarks/RESULTS.md, Grid against cuBLAS).
SHORT_TILE_RATE = 0.9
# The least k for 192-row tiles: where their waves take less time they ran 1.05-1.21x faster at k = 256-1000 too
# (3000x2000x1000, 3072x3072x768, 3000x2000x256; H200), their epilogue now short; shallower K loops were not measured.
SHORTER_TILE_MIN_K = 256


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


def tiles_of(m: int, n: int, tile_m: int, tile_n: int) -> int:
    """Tiles of ``tile_m`` x ``tile_n`` that cover an ``m`` x ``n`` C."""
    return math.ceil(m / tile_m) * math.ceil(n / tile_n)


def wave_fitted_rows(m: int, n: int, k: int, tile_n: int) -> tuple[int, str]:
    """192 or 256 rows for a wgmma tile ``tile_n`` wide (a warpgroup per 64) of an ``m`` x ``n`` x ``k`` problem,
    whichever's waves of WAVE_BLOCKS tiles take less time by SHORTER_TILE_SHARE (a wave's time its tile's rows) where
    k is SHORTER_TILE_MIN_K or more, with why where 192 is taken."""
    waves = {rows: math.ceil(tiles_of(m, n, rows, tile_n) / WAVE_BLOCKS) for rows in (192, 256)}
    if k < SHORTER_TILE_MIN_K or waves[192] * 192 > SHORTER_TILE_SHARE * waves[256] * 256:
        return 256, ""
    return 192, (f"192 rows, not 256: {tiles_of(m, n, 192, tile_n)} tiles of 192 take {waves[192]} waves of "
                 f"{WAVE_BLOCKS} blocks, {tiles_of(m, n, 256, tile_n)} of 256 {waves[256]}, whose tiles each take 4/3 "
                 f"the time")


# The rate of float64's 128 x 64 Grid() tile (a warp per 32 x 32) against its 128 x 128 (a warp per 64 x 32) on a
# wave's work: where A or B is not K-major (128 x 128 spilled 100 bytes on RRR) 0.87-0.99, 0.89 the median (H200, RRR
# and CCC, 2048^3 to 6144x2048x2048); K-major (RCR, whose 128 x 128 loads the next fragments as it multiplies) 0.82
# (1536^3 and 2560^3). It pays where 128 x 128 leaves a wave nearly empty: 1536^3 RRR 0.47 -> 0.57x cuBLAS, RCR 0.51 ->
# 0.56x (benchmarks/RESULTS.md, Grid against cuBLAS).
HALF_WIDTH_FLOAT64_RATE = 0.89
HALF_WIDTH_FLOAT64_PIPELINED_RATE = 0.82


def wave_fitted_float64_cols(m: int, n: int, rate: float) -> tuple[int, str]:
    """64 or 128 columns for a float64 Grid() tile of 128 rows over an ``m`` x ``n`` C, whichever's waves of
    WAVE_BLOCKS tiles take less time, 128 x 64 tiles at ``rate`` (HALF_WIDTH_FLOAT64_RATE or its pipelined one);
    with why where 64 is taken."""
    waves = {cols: math.ceil(tiles_of(m, n, 128, cols) / WAVE_BLOCKS) for cols in (64, 128)}
    if tiles_of(m, n, 128, 64) == tiles_of(m, n, 128, 128) or waves[64] * 64 / rate >= waves[128] * 128:
        return 128, ""  # (n of 64 or less: the same tiles, the tile as narrow as n anyway)
    return 64, (f"64 columns, not 128: {tiles_of(m, n, 128, 64)} tiles of 128x64 take {waves[64]} waves of "
                f"{WAVE_BLOCKS} blocks, {tiles_of(m, n, 128, 128)} of 128x128 {waves[128]}, whose tiles each take "
                f"{2 * rate:.2f} the time")


# The rate of a 128 x 192 wgmma tile whose partial sums are promoted (Accumulation('accurate'): each K tile's added
# before the next one's wgmma start, the two warpgroups' turns on the tensor cores overlapping) against 128 x 128's,
# whose K tiles go in pairs, on a wave's outputs: 1.12-1.15 (H200, e4m3 -> float32 RCR 8192^3, 8192x7168x2048,
# 4096x1536x7168, 4096x24576x1536: benchmarks/RESULTS.md, FP8 accumulation).
WIDE_PROMOTED_TILE_RATE = 1.13


def wave_fitted_promoted_cols(m: int, n: int) -> tuple[int, str]:
    """128 or 192 columns for a promoted wgmma tile of 128 rows over an ``m`` x ``n`` C, whichever's waves of
    WAVE_BLOCKS tiles take less time, 128 x 192 tiles at WIDE_PROMOTED_TILE_RATE; with why where 192 is taken."""
    waves = {cols: math.ceil(tiles_of(m, n, 128, cols) / WAVE_BLOCKS) for cols in (128, 192)}
    if n <= 128 or waves[192] * 192 / WIDE_PROMOTED_TILE_RATE >= waves[128] * 128:
        return 128, ""
    return 192, (f"192 columns, not 128: {tiles_of(m, n, 128, 192)} tiles of 128x192 take {waves[192]} waves of "
                 f"{WAVE_BLOCKS} blocks, {tiles_of(m, n, 128, 128)} of 128x128 {waves[128]}, whose tiles each take "
                 f"{1.5 / WIDE_PROMOTED_TILE_RATE:.2f} the time")


def wave_time(tile_m: int, tile_n: int, tiles: int, rate: float = 1.0) -> float:
    """The time ``tiles`` of ``tile_m`` x ``tile_n`` take in waves of WAVE_BLOCKS, in tile outputs: a wave takes its
    tile's outputs at ``rate`` (against the family's tile of rate 1: GridPlan.wave_rate)."""
    return math.ceil(tiles / WAVE_BLOCKS) * tile_m * tile_n / rate
