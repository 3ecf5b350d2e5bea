"""Hopper's warpgroup MMA (wgmma.mma_async, sm_90a): a warpgroup issues each instruction for a 64 x N
tile, reading A and B from swizzled shared memory; its accumulators are registers in the fragments
of the mma.sync that computes them where wgmma cannot run (templates/gemm/wgmma.cuh.j2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...arch import (
    REGISTERS_PER_SM,
    WGMMA_MAX_ACC_REGS,
    WGMMA_MAX_N,
    WGMMA_MAX_PROMOTED_REGS,
    WGMMA_OF,
    WGMMA_SM,
    Instruction,
    swizzle_width,
)
from ..operands import (
    Operators,
    arrangement_of,
    element_sizes_of,
    given_threads_of,
    is_complex_of,
    k_major,
    precision_of,
    promotes_of,
    round_up,
)
from ..operators import Tile
from .common import Condition, chosen_instruction, fitted_tile, wave_fitted_promoted_cols, wave_fitted_rows

name = "wgmma"
scope = "warpgroup"
# A Grid() tile's rows and columns before it is fitted to the problem (suggested_tile, batch_tiles).
GRID_TILE_ROWS, GRID_TILE_COLS = 256, 128
accumulators = "registers"
swizzled_operands = True
template = "gemm/wgmma.cuh.j2"
accumulator_template = "gemm/wgmma_accumulator.cuh.j2"


@dataclass(frozen=True)
class WgmmaChoice:
    """Whether the block GEMM runs on Hopper's warpgroup MMA: each condition, with whether it
    held, and where all did, the layout it takes. A warpgroup computes tiles of 64 x
    ``tile_n`` outputs; A and B lie in shared memory in the swizzled layout whose rows are
    ``a_swizzle`` / ``b_swizzle`` bytes (blasdx.arch.SWIZZLE_WIDTHS)."""

    conditions: tuple[Condition, ...]
    tile_n: int
    a_swizzle: int
    b_swizzle: int

    @property
    def holds(self) -> bool:
        return all(held for _, held in self.conditions)

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(text for text, held in self.conditions if not held)


def accumulator_registers(threads: int, promoted: bool = False) -> int:
    """Float accumulator registers a thread of a ``threads``-thread block may hold:
    WGMMA_MAX_ACC_REGS, or fewer where the block's share of the register file
    (REGISTERS_PER_SM) leaves less beside the ~32 its other values take. ``promoted``: the
    accumulators and a pass's partial sums (``tile_width``), WGMMA_MAX_PROMOTED_REGS at most
    beside ~48 others (the Grid() tile's threads keep 240 a thread)."""
    if promoted:
        return min(WGMMA_MAX_PROMOTED_REGS, REGISTERS_PER_SM // threads - 48)
    return min(WGMMA_MAX_ACC_REGS, REGISTERS_PER_SM // threads - 32)


def tile_width(m: int, n: int, threads: int, step: int, promoted: bool = False) -> int:
    """The n of a warpgroup's 64 x n tile: a multiple of ``step`` dividing n, at most 256,
    whose float accumulators (n / 2 registers a tile; ``promoted``: and one tile's partial
    sums, n / 2 more) fit ``accumulator_registers`` over the tiles each warpgroup takes; the
    fewest passes, then the widest tile (each wgmma then reads A once for more of B). 0 where
    none fits."""
    groups = threads // 128
    if groups == 0 or m % 64:
        return 0
    budget = accumulator_registers(threads, promoted)
    best: tuple[tuple[int, int], int] | None = None
    for tile_n in range(step, min(n, WGMMA_MAX_N) + 1, step):
        if n % tile_n:
            continue
        passes = math.ceil(m // 64 * (n // tile_n) / groups)
        if (passes + (1 if promoted else 0)) * tile_n // 2 > budget:
            continue
        key = (passes, -tile_n)
        if best is None or key < best[0]:
            best = (key, tile_n)
    return 0 if best is None else best[1]


def n_step(b_layout: str) -> int:
    """What the n of a wgmma tile is a multiple of: 8, or 16 for row-major B, which wgmma
    reads transposed, in swizzled rows of 32 bytes or more."""
    return 16 if b_layout == "row_major" else 8


def warpgroup_threads(m: int, n: int, step: int, promoted: bool = False) -> int:
    """Threads a wgmma block GEMM suggests: a warpgroup per widest tile, at most two, or
    the fewest more (up to eight) whose accumulators fit (``tile_width``)."""
    widest = max((t for t in range(step, min(n, WGMMA_MAX_N) + 1, step) if n % t == 0), default=n)
    tiles = max(1, (m // 64) * (n // widest))
    fewest = min(2, tiles)
    for groups in range(fewest, min(8, tiles) + 1):
        if tile_width(m, n, 128 * groups, step, promoted):
            return 128 * groups
    return 128 * fewest


def _form(ops: Operators) -> Instruction | None:
    """The wgmma form of the warp-level instruction the precisions take on the SM, if any."""
    return WGMMA_OF.get(chosen_instruction(ops)[0].name)


def promotes(ops: Operators) -> bool:
    """Whether this descriptor's wgmma promotes its partial sums into float32 (its form's
    accumulation is narrow and Accumulation('fast') does not ask otherwise)."""
    form = _form(ops)
    return promotes_of(ops, form is not None and form.narrow_accumulation)


def _operator_conditions(ops: Operators, form: Instruction | None) -> tuple[Condition, ...]:
    """The conditions that no shape or thread count changes: InstructionFamily allows wgmma (the
    one place that reads InstructionFamily('mma'), which forbids it), SM 900, precisions with a
    wgmma form (``form``), and K-major A and B for the forms that read no other."""
    family, sm = ops.get("InstructionFamily"), ops["SM"].value  # type: ignore[attr-defined]
    prec, arr = precision_of(ops), arrangement_of(ops)
    kind = " complex" if is_complex_of(ops) else ""
    conditions: tuple[Condition, ...] = (
        ("InstructionFamily other than 'mma', which forbids wgmma", family is None or family.value != "mma"),  # type: ignore[attr-defined]
        (f"SM {WGMMA_SM}, compiled for sm_90a (the descriptor says SM {sm})", sm == WGMMA_SM),
        (f"float16, bfloat16, tfloat32, float8 or 8-bit integer A and B with a tensor-core accumulator (here "
         f"{prec['a']} x {prec['b']} -> {prec['c']}{kind})", form is not None),
    )
    if form is not None and not form.reads_transposed:
        conditions += ((f"row-major A and column-major B: wgmma reads {prec['a']} and {prec['b']} K-major only "
                        f"(here {arr['a']} A, {arr['b']} B)", k_major(arr)),)
    return conditions


def _answer(ops: Operators, threads: int | None) -> tuple[tuple[Condition, ...], WgmmaChoice | None]:
    """wgmma's conditions for ``threads`` (default: those the descriptor fixes, else the wgmma suggestion), whether
    InstructionFamily allows it first, and its choice where it comes into question: allowed, with a
    Size, and on SM 900 or for precisions it takes (other SMs are not told of the rest)."""
    if "SM" not in ops:
        return (("an SM", False),), None
    form = _form(ops)
    allowed, on_sm, takes, *k_major_ab = _operator_conditions(ops, form)
    if not allowed[1]:
        return (allowed,), None
    if "Size" not in ops:
        return (allowed, ("a Size, whose m, n and k the warpgroup tiles need", False)), None
    prec, sm = precision_of(ops), ops["SM"].value  # type: ignore[attr-defined]
    if not (on_sm[1] or takes[1]):
        return (allowed, (f"SM {WGMMA_SM} with float16, bfloat16, tfloat32, float8 or 8-bit integer A and B (the "
                          f"descriptor says SM {sm}, {prec['a']} x {prec['b']} -> {prec['c']})", False)), None
    size, arr = ops["Size"], arrangement_of(ops)
    m, n, k = size.m, size.n, size.k  # type: ignore[attr-defined]
    b_mn_major = arr["b"] == "row_major"  # B's n contiguous: wgmma reads it transposed
    step = n_step(arr["b"])
    given = given_threads_of(ops)
    promoted = promotes(ops)
    if threads is None:
        threads = given.threads if given is not None else warpgroup_threads(m, n, step, promoted)
    tile_n = tile_width(m, n, threads, step, promoted)
    k_step = form.k if form is not None else 16
    conditions: tuple[Condition, ...] = (
        on_sm, takes,
        (f"m a multiple of 64 (m = {m})", m % 64 == 0),
        (f"k a multiple of {k_step} (k = {k})", k % k_step == 0),
        (f"n a multiple of {step}{' (row-major B is read transposed, in rows of 32 bytes or more)' if b_mn_major else ''}"
         f" (n = {n})", n % step == 0),
        (f"whole warpgroups: threads a multiple of 128 ({given.source if given is not None else 'wgmma would suggest'} "
         f"{threads})", threads % 128 == 0),
        *k_major_ab,
    )
    if m % 64 == 0 and threads % 128 == 0:  # the tiles exist: do their accumulators fit?
        conditions += ((f"a warpgroup tile of 64 x N (N a multiple of {step} dividing n, at most {WGMMA_MAX_N}) "
                        f"whose float accumulators {'and one tile of partial sums (promoted into them) ' if promoted else ''}"
                        f"fit {accumulator_registers(threads, promoted)} registers a thread "
                        f"({m * n // threads} outputs a thread here)", tile_n > 0),)
    esize = element_sizes_of(ops)
    a_contiguous = m if arr["a"] == "col_major" else k
    b_contiguous = tile_n if b_mn_major else k
    choice = WgmmaChoice(conditions, tile_n, swizzle_width(a_contiguous * esize["a"]),
                         swizzle_width(b_contiguous * esize["b"]))
    return (allowed, *conditions), choice


def conditions(ops: Operators, threads: int | None = None) -> tuple[Condition, ...]:
    """Every condition of wgmma, the first whether InstructionFamily allows it."""
    return _answer(ops, threads)[0]


def choice(ops: Operators, threads: int | None = None) -> WgmmaChoice | None:
    """The conditions explain() lists, the tile and the swizzled layouts; None where wgmma is out
    of the question (forbidden, no Size or SM, or an SM other than 900 for precisions it does not take)."""
    return _answer(ops, threads)[1]


def refusal(ops: Operators, conditions: tuple[Condition, ...]) -> str:
    """What the reason of the family that runs says of wgmma: its failed conditions, on SM 900 alone
    (wgmma is Hopper's: other SMs are not told of it, as if they could hold), or that it is forbidden."""
    allowed, *rest = conditions
    if not allowed[1]:
        return "InstructionFamily('mma') forbids wgmma"
    if ops["SM"].value != WGMMA_SM or "Size" not in ops:  # type: ignore[attr-defined]
        return ""
    return "not wgmma, which needs: " + "; ".join(words for words, held in rest if not held)


def instruction(ops: Operators) -> tuple[Instruction, str]:
    prec, form = precision_of(ops), _form(ops)
    assert form is not None  # its conditions held
    return form, f"wgmma.mma_async m64nNk{form.k} (sm_90a) takes {prec['a']} x {prec['b']} -> {prec['c']}: every condition holds"


def suggested_tile(ops: Operators) -> Tile | None:
    """A Grid() tile of 256 x 128, a warpgroup per 64 rows (``grid_tile_threads``), or 192 x 128 where its waves
    take less time (``wave_fitted_rows``; BlockDim absent, so that each warpgroup has a tile): 128 x 128 ran slower,
    and 128 x 256's 128 accumulators a thread slowed the fused epilogue; where partial sums are promoted,
    128 x 128, each warpgroup's one tile with two tiles of partial sums, one in flight while the other
    is added, or 128 x 192 promoting one K tile at a time where its waves take less time
    (``wave_fitted_promoted_cols``; 256 x 128 and 128 x 256 promoting a warpgroup's two tiles one at a time
    ran slower: benchmarks/RESULTS.md, FP8 accumulation); k, rows of 128 bytes (the widest swizzle). None
    where a condition no tile changes fails."""
    form = _form(ops)
    if form is None or not all(held for _, held in _operator_conditions(ops, form)):
        return None
    rows = 128 if promotes(ops) else GRID_TILE_ROWS
    size = ops["Size"]
    m, n, k = fitted_tile(size, (rows, GRID_TILE_COLS, 128 // element_sizes_of(ops)["a"]), 64, form.k)  # type: ignore[arg-type]
    if m == GRID_TILE_ROWS and "BlockDim" not in ops:  # (a warpgroup per 64 rows: grid_tile_threads)
        m = wave_fitted_rows(size.m, size.n, size.k, n)[0]  # type: ignore[attr-defined]
    if rows == 128 and (m, n) == (128, GRID_TILE_COLS) and "BlockDim" not in ops:
        n = wave_fitted_promoted_cols(size.m, size.n)[0]  # type: ignore[attr-defined]
    return Tile(m, n, k)


def batch_tiles(ops: Operators, k: int) -> tuple[Tile, ...]:
    """The tiles ``k`` deep (the suggested one's) a batched Grid() call may run in place of the suggested one, which is
    fitted to one item (GridPlan.for_batch): GRID_TILE_ROWS and 192 rows x GRID_TILE_COLS; where partial sums are
    promoted, 128 rows x GRID_TILE_COLS and 192 columns (an item of 64 rows: GRID_TILE_COLS alone); as an item's m and
    n allow (not halved for few tiles: a batch has more)."""
    size = ops["Size"]
    n = min(GRID_TILE_COLS, round_up(size.n, 16))  # type: ignore[attr-defined]
    if promotes(ops):  # (192 wide on 128 rows alone: two warpgroups, whose turns on the tensor cores overlap)
        m = min(128, round_up(size.m, 64))  # type: ignore[attr-defined]
        return tuple(dict.fromkeys(Tile(m, min(cols, round_up(size.n, 16)) if m == 128 else n, k)  # type: ignore[attr-defined]
                                   for cols in (n, 192)))
    return tuple(dict.fromkeys(Tile(min(rows, round_up(size.m, 64)), n, k)  # type: ignore[attr-defined]
                               for rows in (GRID_TILE_ROWS, 192)))


def suggested_threads(ops: Operators) -> int:
    """A warpgroup per tile, at most two (``warpgroup_threads``)."""
    size = ops["Size"]
    return warpgroup_threads(size.m, size.n, n_step(arrangement_of(ops)["b"]), promotes(ops))  # type: ignore[attr-defined]


def grid_tile_threads(ops: Operators) -> int | None:
    """A Grid() tile's threads: a warpgroup per 64 rows (at most four), each holding a 64 x n slice of
    the tile in registers, so that the block has warps enough to hide its copies; where partial sums are
    promoted, at most two warpgroups, whose threads hold the accumulators of two slices and one slice's
    partial sums (four would keep 112 registers a thread, too few for one slice's 128)."""
    m = ops["Size"].m  # type: ignore[attr-defined]
    return None if m % 64 else 128 * min(2 if promotes(ops) else 4, m // 64)
