"""Traits of a plain mapping of operators (kind -> operator): defaults filled in.

The ``*_of`` helpers here and in :mod:`.operands` (those of A, B and C that no instruction
family decides) are the one home of what a descriptor's traits mean; the rules
(:mod:`blasdx.describe.rules`), the Descriptor and the planner read them and never
re-derive them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..arch import (
    REGISTERS_PER_SM,
    SWIZZLE_ALIGNMENT,
    WGMMA_MAX_ACC_REGS,
    WGMMA_MAX_N,
    WGMMA_OF,
    WGMMA_SM,
    choose_instruction,
    swizzle_width,
)
from ..tuning import tuning_of
from .operands import (
    Operators,
    arrangement_of,
    element_sizes_of,
    is_complex_of,
    k_major,
    packs_of,
    precision_of,
    round_up,
    takes_float_micro_tiles,
)
from .operators import Block, BlockDim, Operator, Size, Tile


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


def shared_memory_parts_of(ops: Operators) -> dict[str, int]:
    """Bytes of A, B, C in shared memory: ld x (stored columns) x element size, each
    rounded up to 16 bytes so that the next matrix starts 16-byte aligned. Leading
    dimensions count values; a packed element holds ``pack`` of them. Where the GEMM runs
    on wgmma (``wgmma_choice_of``), A and B are stored tight in its swizzled layouts, each
    rounded up to 1024 bytes so that B and C start where a swizzle pattern does."""
    arr, ld, esize = arrangement_of(ops), leading_dimension_of(ops), element_sizes_of(ops)
    pack = packs_of(ops)
    choice = wgmma_choice_of(ops)
    swizzled = choice is not None and choice.holds
    parts = {}
    for m, (rows, cols) in extents_of(ops["Size"]).items():  # type: ignore[arg-type]
        outer = cols if arr[m] == "col_major" else rows
        if swizzled and m != "c":
            parts[m] = round_up(rows * cols * esize[m], SWIZZLE_ALIGNMENT)
        else:
            parts[m] = round_up(-(-ld[m] // pack[m]) * outer * esize[m], 16)
    return parts


@dataclass(frozen=True)
class WgmmaChoice:
    """Whether the block GEMM runs on Hopper's warpgroup MMA: each condition, with whether it
    held, and where all did, the layout it takes. A warpgroup computes tiles of 64 x
    ``tile_n`` outputs; A and B lie in shared memory in the swizzled layout whose rows are
    ``a_swizzle`` / ``b_swizzle`` bytes (blasdx.arch.SWIZZLE_WIDTHS)."""

    conditions: tuple[tuple[str, bool], ...]
    tile_n: int
    a_swizzle: int
    b_swizzle: int

    @property
    def holds(self) -> bool:
        return all(held for _, held in self.conditions)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(text for text, held in self.conditions if not held)


def wgmma_accumulator_registers(threads: int) -> int:
    """Float accumulator registers a thread of a ``threads``-thread block may hold:
    WGMMA_MAX_ACC_REGS, or fewer where the block's share of the register file
    (REGISTERS_PER_SM) leaves less beside the ~32 its other values take."""
    return min(WGMMA_MAX_ACC_REGS, REGISTERS_PER_SM // threads - 32)


def wgmma_tile_n(m: int, n: int, threads: int, step: int) -> int:
    """The n of a warpgroup's 64 x n tile: a multiple of ``step`` dividing n, at most 256,
    whose float accumulators (n / 2 registers a tile) fit ``wgmma_accumulator_registers``
    over the tiles each warpgroup takes; the fewest passes, then the widest tile (each
    wgmma then reads A once for more of B). 0 where none fits."""
    groups = threads // 128
    if groups == 0 or m % 64:
        return 0
    budget = wgmma_accumulator_registers(threads)
    best: tuple[tuple[int, int], int] | None = None
    for tile_n in range(step, min(n, WGMMA_MAX_N) + 1, step):
        if n % tile_n:
            continue
        passes = math.ceil(m // 64 * (n // tile_n) / groups)
        if passes * tile_n // 2 > budget:
            continue
        key = (passes, -tile_n)
        if best is None or key < best[0]:
            best = (key, tile_n)
    return 0 if best is None else best[1]


def wgmma_n_step(b_layout: str) -> int:
    """What the n of a wgmma tile is a multiple of: 8, or 16 for row-major B, which wgmma
    reads transposed, in swizzled rows of 32 bytes or more."""
    return 16 if b_layout == "row_major" else 8


def wgmma_threads(m: int, n: int, step: int) -> int:
    """Threads a wgmma block GEMM suggests: a warpgroup per widest tile, at most two, or
    the fewest more (up to eight) whose accumulators fit (``wgmma_tile_n``)."""
    widest = max((t for t in range(step, min(n, WGMMA_MAX_N) + 1, step) if n % t == 0), default=n)
    tiles = max(1, (m // 64) * (n // widest))
    fewest = min(2, tiles)
    for groups in range(fewest, min(8, tiles) + 1):
        if wgmma_tile_n(m, n, 128 * groups, step):
            return 128 * groups
    return 128 * fewest


def forbids_wgmma(ops: Operators) -> bool:
    """Whether InstructionFamily('mma') rules Hopper's warpgroup MMA out (the warp-level mma.sync runs)."""
    family = ops.get("InstructionFamily")
    return family is not None and family.value == "mma"  # type: ignore[attr-defined]


def wgmma_choice_of(ops: Operators, threads: int | None = None) -> WgmmaChoice | None:
    """Whether wgmma runs, for ``threads`` (default: BlockDim's, else the wgmma suggestion).
    None where it cannot come into question: Size or SM missing, InstructionFamily('mma'),
    or precisions no wgmma takes on an SM other than 900 (no condition worth naming)."""
    if "Size" not in ops or "SM" not in ops or forbids_wgmma(ops):
        return None
    size, sm = ops["Size"], ops["SM"].value  # type: ignore[attr-defined]
    m, n, k = size.m, size.n, size.k  # type: ignore[attr-defined]
    prec, arr = precision_of(ops), arrangement_of(ops)
    complex_ = is_complex_of(ops)
    base, _ = choose_instruction(prec["a"], prec["b"], prec["c"], complex_, sm)
    wgmma = WGMMA_OF.get(base.name)  # the wgmma form of the warp-level instruction, if any
    if sm != WGMMA_SM and wgmma is None:
        return None
    b_mn_major = arr["b"] == "row_major"  # B's n contiguous: wgmma reads it transposed
    step = wgmma_n_step(arr["b"])
    given = "BlockDim" in ops
    if threads is None:
        threads = ops["BlockDim"].threads if given else wgmma_threads(m, n, step)  # type: ignore[attr-defined]
    tile_n = wgmma_tile_n(m, n, threads, step)
    esize = element_sizes_of(ops)
    kind = " complex" if complex_ else ""
    k_step = wgmma.k if wgmma is not None else 16
    conditions: tuple[tuple[str, bool], ...] = (
        (f"SM {WGMMA_SM}, compiled for sm_90a (the descriptor says SM {sm})", sm == WGMMA_SM),
        (f"float16, bfloat16, tfloat32, float8 or 8-bit integer A and B with a tensor-core accumulator (here "
         f"{prec['a']} x {prec['b']} -> {prec['c']}{kind})", wgmma is not None),
        (f"m a multiple of 64 (m = {m})", m % 64 == 0),
        (f"k a multiple of {k_step} (k = {k})", k % k_step == 0),
        (f"n a multiple of {step}{' (row-major B is read transposed, in rows of 32 bytes or more)' if b_mn_major else ''}"
         f" (n = {n})", n % step == 0),
        (f"whole warpgroups: threads a multiple of 128 ({'BlockDim gives' if given else 'wgmma would suggest'} "
         f"{threads})", threads % 128 == 0),
    )
    if wgmma is not None and not wgmma.reads_transposed:
        conditions += ((f"row-major A and column-major B: wgmma reads {prec['a']} and {prec['b']} K-major only "
                        f"(here {arr['a']} A, {arr['b']} B)", arr["a"] == "row_major" and arr["b"] == "col_major"),)
    if m % 64 == 0 and threads % 128 == 0:  # the tiles exist: do their accumulators fit?
        conditions += ((f"a warpgroup tile of 64 x N (N a multiple of {step} dividing n, at most {WGMMA_MAX_N}) "
                        f"whose float accumulators fit {wgmma_accumulator_registers(threads)} registers a thread "
                        f"({m * n // threads} outputs a thread here)", tile_n > 0),)
    a_contiguous = m if arr["a"] == "col_major" else k
    b_contiguous = tile_n if b_mn_major else k
    return WgmmaChoice(conditions, tile_n, swizzle_width(a_contiguous * esize["a"]),
                       swizzle_width(b_contiguous * esize["b"]))


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


# --- Grid(): the whole problem over many blocks, each a block GEMM of the tile ------------

# Operators a Grid() descriptor hands to its tile's Block() descriptor, as they are.
TILE_KINDS: tuple[str, ...] = ("Precision", "Type", "Function", "BitOp", "Arrangement", "TransposeMode",
                               "Alignment", "SM", "InstructionFamily", "BlockDim")


# Tiles a problem should have before the suggested tile stops shrinking: half the 132 SMs of
# an H100 (at one block per SM, a wave of tiles half the size costs about one of full ones).
GRID_MIN_TILES = 66


def suggested_tile_of(ops: Operators) -> Tile:
    """The block tile a Grid() descriptor suggests (the alternatives measured: benchmarks/RESULTS.md, Grid
    against cuBLAS and Fused epilogues).

    - wgmma: 256 x 128, a warpgroup per 64 rows (``grid_tile_threads``), so 64 accumulators a
      thread: 128 x 128 ran slower, and 128 x 256's 128 accumulators a thread slowed the fused epilogue.
    - Other tensor cores: 128 x 128 (for float64 with 256 or 512 threads: ``grid_tile_threads``).
    - FMA: 128 x 128 x 32 for float32 (256 threads, an 8x8 micro-tile each), 128 x 128 x 64 where
      A and B are K-major and the tile keeps 128 x 64 or more (with the pipelined FMA loop); else
      128 x 64, or 64 x 64 for 64-bit and complex values.
    - k: rows of 128 bytes for wgmma (its widest swizzle), 64 bytes on mma.sync (32 values of
      float64 where A is row-major and B column-major, and in the other arrangements on SM 900,
      where they take 256 threads; 16 there before SM 900 and on tiles shrunk under 128 x 128, not
      measured since 32 spilled on 512 threads), 16 values of the other 32-bit FMA types and 8 of
      the wider ones.

    Each side shrinks to the problem's, rounded up to the instruction's shape (m to a multiple
    of 64 for wgmma, 16 otherwise); then, while the problem has fewer than GRID_MIN_TILES
    tiles, the longer side halves (m on ties), to 64 at least and to a multiple of that shape."""
    size, sm = ops["Size"], ops["SM"].value  # type: ignore[attr-defined]
    prec = precision_of(ops)
    esize = element_sizes_of(ops)["a"]
    base, _ = choose_instruction(prec["a"], prec["b"], prec["c"], is_complex_of(ops), sm)
    wgmma = WGMMA_OF.get(base.name) if sm == WGMMA_SM and not forbids_wgmma(ops) else None
    arr = arrangement_of(ops)
    if wgmma is not None and not wgmma.reads_transposed and not k_major(arr):
        wgmma = None  # K-major only: mma.sync runs
    if wgmma is not None:
        tile, m_step, k_step = (256, 128, 128 // esize), 64, wgmma.k
    elif base.is_mma:
        tile = (128, 128, 32 if esize == 8 else max(base.k, 64 // esize))  # float64: 16 in cases below
        m_step, k_step = 16, base.k
    elif takes_float_micro_tiles(prec, is_complex_of(ops), 8, 8):  # float32 (the tile's sides are multiples of 8)
        tile, m_step, k_step = (128, 128, 64 if k_major(arr) else 32), 16, 8
    else:
        tile = (128, 64, 16) if esize <= 4 else (64, 64, 8)
        m_step, k_step = 16, 8
    m = min(tile[0], round_up(size.m, m_step))  # type: ignore[attr-defined]
    n = min(tile[1], round_up(size.n, 16))  # type: ignore[attr-defined]
    k = min(tile[2], round_up(size.k, k_step))  # type: ignore[attr-defined]
    # Few tiles leave most SMs idle: halve the longer side (m on ties) down to 64.
    while math.ceil(size.m / m) * math.ceil(size.n / n) < GRID_MIN_TILES:  # type: ignore[attr-defined]
        if m >= n and m > 64:
            m = max(64, round_up(m // 2, m_step))
        elif n > 64:
            n = max(64, round_up(n // 2, 16))
        else:
            break
    if wgmma is None and not base.is_mma and k > 32 and m * n < 128 * 64:
        # A 64-deep float32 FMA tile shrunk under 128 x 64 (few threads) goes back to 32: its stages
        # left one block an SM, which ran slower.
        k = 32
    if (wgmma is None and base.is_mma and esize == 8 and not k_major(arr)
            and (not tuning_of(sm).deep_float64_tiles_any_major or m * n < 128 * 128)):
        k = min(k, 16)  # float64 where A or B is not K-major: 32 deep measured only on SM 900's 128 x 128 tiles
    return Tile(m, n, k)


def tile_of(ops: Operators) -> Tile:
    """Tile if given, else the suggestion."""
    return ops["Tile"] if "Tile" in ops else suggested_tile_of(ops)  # type: ignore[return-value]


def grid_tile_threads(ops: Operators, tile: Tile) -> int | None:
    """Threads of a Grid() descriptor's blocks where BlockDim is absent and wgmma can take the
    tile: a warpgroup per 64 rows (at most four), each holding a 64 x n slice of the tile in
    registers, so that the block has warps enough to hide its copies. On float64 tensor cores,
    a warp per 64 x 32 of the tile (at most 8 warps): where A and B are K-major its 128
    accumulators' K loop loads the next step's fragments while it multiplies
    (GemmPlan.pipelined_fragments), which outran a warp per 32 x 32, but a warp per 32 x 32 on
    tiles smaller than 128 x 128 (their blocks would be few warps) and before SM 900 (not
    measured there); in the other arrangements two passes of 32 x 32 (512 threads' 128
    registers spilled there). None elsewhere (the tile's own suggestion)."""
    if "BlockDim" in ops:
        return None
    prec = precision_of(ops)
    base, _ = choose_instruction(prec["a"], prec["b"], prec["c"], is_complex_of(ops), ops["SM"].value)  # type: ignore[attr-defined]
    if base.is_mma and base.accumulator == "double":
        if k_major(arrangement_of(ops)) and (tile.m * tile.n < 128 * 128
                                             or not tuning_of(ops["SM"].value).pipelined_float64_fragments):  # type: ignore[attr-defined]
            return min(512, max(128, tile.m * tile.n // (32 * 32) * 32))
        return min(256, max(128, tile.m * tile.n // (64 * 32) * 32))
    if tile.m % 64:
        return None
    threads = 128 * min(4, tile.m // 64)
    tile_ops = dict(ops)
    tile_ops["Size"] = Size(tile.m, tile.n, tile.k)
    choice = wgmma_choice_of(tile_ops, threads)
    return threads if choice is not None and choice.holds else None


def item_operators_of(ops: Operators) -> dict[str, Operator]:
    """The Block() descriptor of one batch item of a Grid() descriptor: its operators with Block()
    in Grid()'s place."""
    return {**{kind: op for kind, op in ops.items() if kind != "Grid"}, "Block": Block()}


def tile_operators_of(ops: Operators) -> dict[str, Operator]:
    """The Block() descriptor of a Grid() descriptor's tile: Size(tile) and the operators of
    TILE_KINDS (LeadingDimension describes the whole matrices, not the tile's copies), with
    the threads of ``grid_tile_threads`` where it has some."""
    tile = tile_of(ops)
    out = {kind: op for kind, op in ops.items() if kind in TILE_KINDS}
    out["Size"] = Size(tile.m, tile.n, tile.k)
    out["Block"] = Block()
    threads = grid_tile_threads(out, tile)
    if threads is not None:
        out["BlockDim"] = BlockDim(threads)
    return out
