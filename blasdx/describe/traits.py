"""Traits of a plain mapping of operators (kind -> operator): defaults filled in.

The ``*_of`` helpers here and in :mod:`.operands` (those of A, B and C that no instruction
family decides) are the one home of what a descriptor's traits mean; the rules
(:mod:`blasdx.describe.rules`), the Descriptor and the planner read them and never
re-derive them.
"""

from __future__ import annotations

from ..arch import SWIZZLE_ALIGNMENT, shared_memory_limit
from .families import FAMILIES, family_of
from .families.common import GRID_MIN_TILES
from .operands import Operators, arrangement_of, element_sizes_of, execution_of, packs_of, round_up
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
    dimensions count values; a packed element holds ``pack`` of them. Where the instruction
    family that runs reads swizzled operands (wgmma), A and B are stored tight in those layouts,
    each rounded up to 1024 bytes so that B and C start where a swizzle pattern does."""
    arr, ld, esize = arrangement_of(ops), leading_dimension_of(ops), element_sizes_of(ops)
    pack = packs_of(ops)
    swizzled = "SM" in ops and family_of(ops).family.swizzled_operands
    parts = {}
    for m, (rows, cols) in extents_of(ops["Size"]).items():  # type: ignore[arg-type]
        outer = cols if arr[m] == "col_major" else rows
        if swizzled and m != "c":
            parts[m] = round_up(rows * cols * esize[m], SWIZZLE_ALIGNMENT)
        else:
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


# --- Grid(): the whole problem over many blocks, each a block GEMM of the tile ------------

# Operators a Grid() descriptor hands to its tile's Block() descriptor, as they are.
TILE_KINDS: tuple[str, ...] = ("Precision", "Type", "Function", "BitOp", "Arrangement", "TransposeMode",
                               "Alignment", "SM", "InstructionFamily", "Accumulation", "BlockDim")


# BatchInvariant(): the rows whose suggested tile fixes n and k (and so the instruction and the K order) for every
# m; and the rows a tile's height is a multiple of (a warpgroup's, every family's warp tiles' multiple).
INVARIANT_ROWS = 16384
INVARIANT_ROW_STEP = 64


def suggested_tile_of(ops: Operators) -> Tile:
    """The block tile a Grid() descriptor suggests: that of the first instruction family that can run
    its tiles (each family's ``suggested_tile``; the alternatives measured: benchmarks/RESULTS.md, Grid
    against cuBLAS and Fused epilogues). Under BatchInvariant(), ``invariant_tile_of``."""
    if "BatchInvariant" in ops:
        return invariant_tile_of(ops)
    if execution_of(ops) == "Grouped":
        return _with_two_stages(ops, suggested_grouped_tile_of(ops))
    tile = next(tile for family in FAMILIES if (tile := family.suggested_tile(ops)) is not None)
    return _with_two_stages(ops, tile)


def suggested_grouped_tile_of(ops: Operators) -> Tile:
    """Grouped()'s tile: 128 x 256 where n has the columns and A's values are 16-bit or wider, else 128 x 128 (FP8's
    promoted partial sums need the registers); 64 x 128 where Size's m, a typical group's rows, is at most 64 (a
    warpgroup's 64 x 256 spilled with a fused epilogue); 128 bytes of A's k deep. Its groups are a few rows to a few
    thousand: a tile fitted to the whole problem, as Grid()'s, would waste most of a small group's (the
    alternatives measured: benchmarks/RESULTS.md, Grouped GEMM)."""
    size, esize = ops["Size"], element_sizes_of(ops)["a"]
    # Grouped('k'): m is the weights' rows, fixed; k a typical group's rows, which the K loop walks
    rows = 64 if size.m <= 64 else 128  # type: ignore[attr-defined]
    wide = rows == 128 and size.n >= 256 and esize >= 2  # type: ignore[attr-defined]
    return Tile(rows, 256 if wide else 128, max(8, 128 // esize))


def reference_tile_of(ops: Operators) -> Tile:
    """The tile suggested for INVARIANT_ROWS rows of this descriptor's n and k: BatchInvariant()'s n and k."""
    size = ops["Size"]
    unfitted = {kind: op for kind, op in ops.items() if kind != "BatchInvariant"}
    return suggested_tile_of({**unfitted, "Size": Size(INVARIANT_ROWS, size.n, size.k)})  # type: ignore[attr-defined]


def invariant_tile_of(ops: Operators) -> Tile:
    """BatchInvariant()'s tile: ``reference_tile_of``'s n and k for every m, so that each row meets the same
    instructions in the same K order (a warpgroup's 64 x n tile and its wgmma, a warp's mma.sync, a thread's FMA
    chain over k); its height fitted to m in steps of INVARIANT_ROW_STEP rows as Grid()'s is (no taller than m,
    halved while the tiles are fewer than GRID_MIN_TILES), which changes how many rows a block holds, never the
    arithmetic of one (blasdx.plan.grid checks the instruction too). Grouped(): the reference tile (its rows are
    the call's, not Size's)."""
    reference, size = reference_tile_of(ops), ops["Size"]
    if execution_of(ops) == "Grouped":
        return reference
    m, n = size.m, size.n  # type: ignore[attr-defined]
    height = min(reference.m, round_up(m, INVARIANT_ROW_STEP))
    while height > INVARIANT_ROW_STEP and -(-m // height) * -(-n // reference.n) < GRID_MIN_TILES:
        height = max(INVARIANT_ROW_STEP, round_up(height // 2, INVARIANT_ROW_STEP))
    return Tile(height, reference.n, reference.k)


def _with_two_stages(ops: Operators, tile: Tile) -> Tile:
    """``tile`` with k halved, to a multiple of 8 (every instruction's k of 4- and 8-byte values), while two K
    tiles of its A and B exceed the SM's shared memory: the K loop keeps at least two in flight (SMs of
    99 KiB take float32's and float64's 128 x 128 tiles shallower)."""
    esize, limit = element_sizes_of(ops), shared_memory_limit(ops["SM"].value)  # type: ignore[attr-defined]
    k = tile.k
    while k > 8 and 2 * k * (tile.m * esize["a"] + tile.n * esize["b"]) > limit:
        k = max(8, k // 2 // 8 * 8)
    return tile if k == tile.k else Tile(tile.m, tile.n, k)


def tile_of(ops: Operators) -> Tile:
    """Tile if given, else the suggestion."""
    return ops["Tile"] if "Tile" in ops else suggested_tile_of(ops)  # type: ignore[return-value]


def grid_tile_threads(ops: Operators, tile: Tile) -> int | None:
    """Threads of a Grid() descriptor's blocks where BlockDim is absent: those of the family that runs
    the tile at its own ``grid_tile_threads`` (a warpgroup per 64 rows for wgmma, so that the block
    has warps enough to hide its copies; float64 warp tiles). None elsewhere (the tile's own suggestion)."""
    if "BlockDim" in ops:
        return None
    tile_ops = {**ops, "Size": Size(tile.m, tile.n, tile.k)}
    return family_of(tile_ops, lambda family: family.grid_tile_threads(tile_ops)).threads


def item_operators_of(ops: Operators) -> dict[str, Operator]:
    """The Block() descriptor of one batch item of a Grid() descriptor: its operators with Block()
    in Grid()'s place (BatchInvariant(), a grid's, left out)."""
    return {kind: op for kind, op in {**ops, "Execution": Block()}.items() if kind != "BatchInvariant"}


def tile_operators_of(ops: Operators) -> dict[str, Operator]:
    """The Block() descriptor of a Grid() descriptor's tile: Size(tile) and the operators of
    TILE_KINDS (LeadingDimension describes the whole matrices, not the tile's copies), with
    the threads of ``grid_tile_threads`` where it has some."""
    tile = tile_of(ops)
    out = {kind: op for kind, op in ops.items() if kind in TILE_KINDS}
    out["Size"] = Size(tile.m, tile.n, tile.k)
    out["Execution"] = Block()
    threads = grid_tile_threads(out, tile)
    if threads is not None:
        out["BlockDim"] = BlockDim(threads)
    return out
