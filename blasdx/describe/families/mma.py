"""The warp-level tensor-core instructions (mma.sync): a warp issues each instruction and holds
its tile's accumulators in registers, in the instruction's fragment layout
(templates/gemm/mma.cuh.j2)."""

from __future__ import annotations

from ...arch import Instruction
from ...tuning import tuning_of
from ..operands import Operators, arrangement_of, element_sizes_of, is_complex_of, k_major, round_up
from ..operators import Tile
from .common import (
    HALF_WIDTH_FLOAT64_PIPELINED_RATE,
    HALF_WIDTH_FLOAT64_RATE,
    Condition,
    block_threads,
    chosen_instruction,
    fitted_tile,
    wave_fitted_float64_cols,
)

name = "mma"
scope = "warp"
accumulators = "registers"
swizzled_operands = False
template = "gemm/mma.cuh.j2"
accumulator_template = "gemm/mma_accumulator.cuh.j2"


def conditions(ops: Operators, threads: int | None = None) -> tuple[Condition, ...]:
    """A tensor-core instruction for the precisions on the SM (arch.choose_instruction; its reason
    the words). No InstructionFamily forbids mma.sync: 'wgmma' refuses a descriptor whose wgmma
    conditions fail (the rules) rather than let it run."""
    base, reason = chosen_instruction(ops)
    return ((reason, base.is_mma),)


def refusal(ops: Operators, conditions: tuple[Condition, ...]) -> str:
    return ""  # FMA's reason says why no tensor-core instruction takes the precisions


def instruction(ops: Operators) -> tuple[Instruction, str]:
    return chosen_instruction(ops)


def suggested_tile(ops: Operators) -> Tile | None:
    """A Grid() tile of 128 x 128 (float64 with 256 or 512 threads: ``grid_tile_threads``), k of 64
    bytes; float64 128 x 64 where its waves take less time (``wave_fitted_float64_cols``, BlockDim absent, tuning);
    float64 where A or B is not K-major 16 deep, but 32 on SM 900's 128 x 128 and 128 x 64 tiles (tuning), where
    alone it was measured. None without a tensor-core instruction."""
    base, _ = chosen_instruction(ops)
    if not base.is_mma:
        return None
    esize = element_sizes_of(ops)["a"]
    size = ops["Size"]
    m, n, k = fitted_tile(size, (128, 128, 32 if esize == 8 else max(base.k, 64 // esize)), 16, base.k)  # type: ignore[arg-type]
    if esize == 8 and (m, n) == (128, 128):
        n = float64_wave_fitted_cols(ops)[0]
    if (esize == 8 and not k_major(arrangement_of(ops))
            and (not tuning_of(ops["SM"].value).deep_float64_tiles_any_major or m * n < 128 * 64)):  # type: ignore[attr-defined]
        k = min(k, 16)
    return Tile(m, n, k)


def float64_wave_fitted_cols(ops: Operators) -> tuple[int, str]:
    """The columns of a float64 Grid() tile of 128 rows (``wave_fitted_float64_cols``, and why where 64), 128 where
    BlockDim is given (a warp per 32 x 32 for 128 x 64: grid_tile_threads) or the SM's waves are not measured (tuning).
    A 128 x 64 tile runs at a lower rate where 128 x 128 pipelines its fragments (A and B K-major)."""
    sm, size = ops["SM"].value, ops["Size"]  # type: ignore[attr-defined]
    if "BlockDim" in ops or not tuning_of(sm).float64_tiles_fitted_to_waves:
        return 128, ""
    return wave_fitted_float64_cols(size.m, size.n, half_width_float64_rate(sm, arrangement_of(ops)))  # type: ignore[attr-defined]


def half_width_float64_rate(sm: int, arrangement: dict[str, str]) -> float:
    """The rate of a float64 128 x 64 Grid() tile against 128 x 128 on a wave's work: lower where 128 x 128 pipelines
    its fragments (A and B K-major, tuning)."""
    pipelined = k_major(arrangement) and tuning_of(sm).pipelined_float64_fragments
    return HALF_WIDTH_FLOAT64_PIPELINED_RATE if pipelined else HALF_WIDTH_FLOAT64_RATE


def batch_tiles(ops: Operators, k: int) -> tuple[Tile, ...]:
    """The tiles a batched float64 Grid() call may run in place of the suggested one, which is fitted to one item
    (GridPlan.for_batch): 128 x 128 and 128 x 64, ``k`` deep (as an item's m and n allow), where the SM's waves are
    measured (tuning); none for other precisions or complex values."""
    sm, size = ops["SM"].value, ops["Size"]  # type: ignore[attr-defined]
    if element_sizes_of(ops)["a"] != 8 or is_complex_of(ops) or not tuning_of(sm).float64_tiles_fitted_to_waves:
        return ()
    m = min(128, round_up(size.m, 16))  # type: ignore[attr-defined]
    return tuple(dict.fromkeys(Tile(m, min(cols, round_up(size.n, 16)), k) for cols in (128, 64)))  # type: ignore[attr-defined]


def suggested_threads(ops: Operators) -> int:
    """A warp per 64 x 32 outputs where fragments load with ldmatrix (16-bit operands: a warp per
    32 x 32 ran no faster batched and slower as a block GEMM), else per 32 x 32."""
    size = ops["Size"]
    return block_threads(size.m * size.n, 64 if chosen_instruction(ops)[0].ldmatrix else 32)  # type: ignore[attr-defined]


def grid_tile_threads(ops: Operators) -> int | None:
    """float64 Grid() tiles: a warp per 64 x 32 (at most 8 warps), whose K loop loads the next
    step's fragments while it multiplies where A and B are K-major (GemmPlan.pipelined_fragments);
    a warp per 32 x 32 on tiles under 128 x 128 (128 x 64 spilled on 128 threads where A or B is not K-major), and
    where A and B are K-major but the pipeline is not measured (tuning)."""
    base, _ = chosen_instruction(ops)
    if base.accumulator != "double":
        return None
    tile, sm = ops["Size"], ops["SM"].value  # type: ignore[attr-defined]
    outputs = tile.m * tile.n  # type: ignore[attr-defined]
    if outputs < 128 * 128 or (k_major(arrangement_of(ops)) and not tuning_of(sm).pipelined_float64_fragments):
        return min(512, max(128, outputs // (32 * 32) * 32))
    return min(256, max(128, outputs // (64 * 32) * 32))
