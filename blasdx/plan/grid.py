"""The grid-level GEMM (``Grid()``): a problem of any size over many blocks.

Each block computes tiles of C, one after another: for a tile, a pipelined K loop copies K
tiles of A and B ahead while the block GEMM of the tile (``tile``, planned from the
descriptor's ``tile_descriptor`` like any Block() descriptor) multiplies the current one into
register accumulators; the epilogue (alpha, beta, hooks, bias) then writes the tile from
registers. The copies are every thread's cp.async, or on sm_90, where the tile is wgmma's and
the arrays are 16-byte aligned, TMA's from a producer warpgroup (``GridPlan.tma``). The grid
is persistent: as many blocks as the GPU runs at once, walking the (batch item, tile) pairs
in an L2-friendly order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, ClassVar

from ..arch import BLOCK_RESERVED_SHARED, PROMOTION_K, REGISTERS_PER_SM, TMA_MIN_SM, shared_memory_limit
from ..describe.families import mma, wgmma
from ..describe.families.common import (
    GRID_MIN_TILES,
    SHORT_TILE_RATE,
    WAVE_BLOCKS,
    WIDE_PROMOTED_TILE_RATE,
    wave_time,
)
from ..describe.operators import MAX_STAGES, Size
from ..describe.precision import PRECISIONS
from ..describe.traits import INVARIANT_ROWS
from ..errors import ArgumentError, DescriptorError, UnsupportedError
from ..tuning import tuning_of
from .block import (
    GemmPlan,
    MatrixPlan,
    TilePlan,
    digest_of,
    make_plan,
    make_tile_plan,
    matrix_plan,
    name_stem,
    vector_bytes_of,
)
from .kernel import KernelParameter, kernel_parameters, shared_layout

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor

# Stages the planner suggests at most: 4 x 48 KiB of 256x128x64 float16 tiles fill an SM's
# shared memory for one block (benchmarks/grid_gemm.py measures 2 to 6; 3 lose everywhere).
MAX_SUGGESTED_STAGES = 4
# ... and for FMA tiles on two blocks an SM (fma_blocks_share_sm), where three stages outran four
# (complex) and two (float32): benchmarks/RESULTS.md, Grid against cuBLAS.
MAX_SUGGESTED_STAGES_TWO_BLOCKS = 3
# The deepest tile whose FMA loop is pipelined (GridPlan.fma_pipelined): unrolled, 16 steps of four.
MAX_PIPELINED_FMA_K = 64
# Tile rows per group of the tile order: a group's tiles run column by column, so the blocks
# running at once share rows of A and columns of B in L2.
GROUP_M = 8
# Batches of small problems (GridPlan.item_block): where one block GEMM holds a batch item, the batched block
# kernel (a new item's block starts as one ends) outruns the persistent grid, but for mma.sync and FMA tiles past
# k = ITEM_BLOCK_MAX_K, whose one long K step it runs unpipelined: benchmarks/RESULTS.md, Grid against cuBLAS.
ITEM_BLOCK_MAX_K = 64
# The TMA kernel's producer warpgroup (GridPlan.tma), and the registers each of its threads keeps
# (setmaxnreg): one thread issues the copies, so it keeps setmaxnreg's least and the rest of the
# register file goes to the tile's threads (those of a 256x128 tile spilled less, and ran faster).
PRODUCER_THREADS = 128
PRODUCER_REGISTERS = 24
# The most registers setmaxnreg gives a thread.
MAX_THREAD_REGISTERS = 240
# Registers a tile's thread needs beside its accumulators (addresses, the epilogue's values)
# for the TMA kernel to run two blocks on an SM; and the static shared memory that kernel takes
# (its mbarriers, at most).
SPARE_REGISTERS = 32
TMA_STATIC_SHARED = 256
# The stages of deep_k_stages' 64 x 64 tiles (as many as fit elsewhere): eight ran 3-14% slower than six on
# four shapes (768x512x8192, 640x640x8192, 1024x384x8192, 4096x128x16384; benchmarks/RESULTS.md, Grid against cuBLAS).
DEEP_K_SMALL_TILE_STAGES = 6
# Split-K: parts of a tile's K loop at most, and K tiles each part takes at least (a pipeline
# of a few stages needs a few K tiles to fill).
MAX_SPLITS = 16
MIN_SPLIT_K_TILES = 4
# ... and where K is at least SPLIT_TAIL_MIN_K deep and a batch item has fewer than MAX_SPLIT_K_TILES tiles, those of
# the call's last wave, which would leave SMs idle (GridPlan.splits): elsewhere the split's code cost 3-5% of the
# kernels that did not split, and parts of shallower K loops more than they gained. What each part of a split tile
# costs, in tiles' time: SPLIT_PART_K / k for 4-byte accumulators (they are written and read back, against the
# tile's 2 k flops an output; 1536^3 bf16 in five parts ran at a third of the speed of its one wave of 72 tiles;
# 3072x3072x8192's last 12 pairs of tiles in five parts gained 21%): benchmarks/RESULTS.md, Grid against cuBLAS.
SPLIT_TAIL_MIN_K = 8192
MAX_SPLIT_K_TILES = 1024
SPLIT_PART_K = 400
# How weights kept split, [gate | up], interleave once (a gated epilogue's fix where layout='split' cannot run).
INTERLEAVE_WEIGHTS = "w.view(k, 2, n // 2).transpose(1, 2).reshape(k, n) (PyTorch; B (k, n), n = 2 * C's columns)"
# Values of padding after each line of C staged in shared memory (GridPlan.stages_c): lines 4 banks apart.
STAGED_C_PADDING = 4
# The TMA stores of C (GridPlan.tma_store): a warpgroup stages a box of TMA_STORE_ROWS rows (a wgmma tile's) and
# one swizzle's bytes at a time, in one of its MAX_STAGING_BUFFERS buffers where they fit beside the stages (a box
# is written while the store of the one before reads), else in one.
TMA_STORE_ROWS = 64
MAX_STAGING_BUFFERS = 2
# ... of C of 4 bytes an element or more (float32, int32): 16-bit C, which the register epilogue writes in quads,
# lost (0.73-0.95x it) where float32 gained (1.00-1.27x): benchmarks/RESULTS.md, Grid against cuBLAS.
TMA_STORE_MIN_BYTES = 4


@dataclass(frozen=True)
class TmaOperand:
    """One operand's part of a stage as the TMA kernel copies it: ``slabs`` boxes of
    ``slab_rows`` rows of ``swizzle`` bytes (``slab_elements`` elements) each, the tile's
    swizzled layout (blasdx::swizzled_offset), which the copies write swizzled."""

    name: str  # "a" or "b"
    k_inner: bool  # whether k is the operand's contiguous dimension (else m for A, n for B)
    slabs: int
    slab_rows: int
    slab_elements: int
    swizzle: int
    element_size: int

    @property
    def slab_bytes(self) -> int:
        return self.slab_rows * self.swizzle


@dataclass(frozen=True)
class GridPlan:
    """Everything the grid kernel prints, decided once from a Grid() descriptor."""

    execution: ClassVar[str] = "grid"  # blasdx.kinds.grid
    grouped: ClassVar[bool] = False  # Grouped()'s plan (blasdx.kinds.grouped) says True
    max_groups: ClassVar[int] = 0  # the most groups its kernel takes
    schedule_size: ClassVar[int] = 0  # bytes of its groups' schedule in shared memory (grouped.cuh.j2's group_schedule)

    sm: int
    m: int
    n: int
    k: int
    is_complex: bool
    # The whole matrices in global memory, as execute() checks its arrays against them.
    a: MatrixPlan
    b: MatrixPlan
    c: MatrixPlan
    # One block's GEMM of a tile: A and B in shared memory at padded (or swizzled) layouts,
    # one stage of shared_memory_size bytes; C stays in registers.
    tile: TilePlan
    stages: int  # K tiles in flight per block
    group_m: int  # tile rows per group of the tile order
    # Whether the kernel can split the K loops of the call's tiles over several blocks (split-K, GridPlan.splits):
    # where a batch item has fewer than GRID_MIN_TILES tiles, or fewer than MAX_SPLIT_K_TILES and K is at least
    # SPLIT_TAIL_MIN_K deep; elsewhere the kernel leaves that code out (its registers would cost every tile).
    split_k: bool = False
    # Whether A and B come by TMA (sm_90): a producer warpgroup copies each K tile's swizzled
    # slabs (TmaOperand) while the tile's warpgroups multiply. grid_with_alignment decides, from
    # the arrays' alignment; the cp.async K loop (mainloop_range) runs elsewhere.
    tma: bool = False
    # Whether C leaves by TMA stores: each warpgroup writes its tile (alpha, beta, hooks and bias applied) box by box (c_box_swizzle bytes
    # a row, swizzled) into shared memory after the stages and one of its threads stores the box by TMA, so the
    # tile's warpgroups go on to the next tile's K loop while C drains (templates/tma_store.cuh.j2; from registers,
    # the stores held them: benchmarks/RESULTS.md, Grid against cuBLAS). grid_with_alignment decides, where A and B
    # come by TMA, C's alignment allows and tma_store_fits.
    tma_store: bool = False
    # A gated epilogue's product (gated) with gate and up the halves of B's columns, weights kept as [gate | up]
    # (blasdx.swiglu(layout="split")): the tile at col0 multiplies B's columns col0 / 2 .. (gate) into its first
    # n / 2 columns and n / 2 + col0 / 2 .. (up) into the rest, as TMA copies them (tma.cuh.j2's produce_range).
    gate_split: bool = False
    # The block GEMM of a whole batch item, whose batched kernel execute() runs in place of the
    # grid kernel on large batches (item_block_choice); None where the grid kernel always runs.
    # Not in the repr, which identifies the grid kernel's source in the kernel cache.
    item_block: GemmPlan | None = field(default=None, repr=False)
    # The grid kernel's plans of other tiles a batched call may run (for_batch): the suggested tile is fitted to one
    # batch item, and a batch's tiles may fill the GPU's waves better with taller ones. Not in the repr either.
    batch_grids: tuple[GridPlan, ...] = field(default=(), repr=False)
    # The stages of a batched call of a wave of tiles or more, where deep_k_stages deepened these for a batch item's
    # fewer (for_batch; 0: these). Not in the repr either.
    batch_stages: int = field(default=0, repr=False)

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def copies_between_steps(self) -> bool:
        """Whether the cp.async K loop (no wgmma in flight) issues a K tile's copies among the multiply's steps,
        after the step of k before the last (mma.sync tiles: multiply_between; issued first, they held the warps
        while the math pipe waited), not after it (FMA tiles: benchmarks/RESULTS.md, Grid against cuBLAS)."""
        return self.tile.instruction.is_mma and not self.tile.instruction.is_wgmma

    @property
    def scalar_precision(self) -> str:
        return self.tile.scalar_precision

    @property
    def scalar_type(self) -> str:
        return self.tile.scalar_type

    @property
    def block_dim(self) -> tuple[int, int, int]:
        return (self.threads, 1, 1) if self.tma else self.tile.block_dim

    @property
    def threads(self) -> int:
        """Threads of the kernel's blocks: the tile's, and the producer warpgroup's with TMA."""
        return self.tile.threads + (PRODUCER_THREADS if self.tma else 0)

    @property
    def blocks_per_sm(self) -> int:
        """Blocks of the kernel an SM runs at once (its launch bounds ask ptxas for them). TMA: two
        where their stages fit in its shared memory twice and half the register file leaves the
        threads their accumulators and some (one block's epilogue then runs while the other
        multiplies); else one. cp.async: two where ``fma_blocks_share_sm`` and their stages fit
        twice; else one."""
        if not self.tma:
            per_block = self.kernel_shared_memory_size + BLOCK_RESERVED_SHARED
            fits = 2 * per_block <= shared_memory_limit(self.sm) + BLOCK_RESERVED_SHARED
            return 2 if fits and fma_blocks_share_sm(self.tile, self.b.layout, self.is_complex, self.tiles) else 1
        accumulators = (self.tile.accumulator_size + self.tile.partial_sum_values) * self.accumulator_bytes // 4
        fits = self._fits_two_blocks(self.kernel_shared_memory_size)
        # ptxas compiles all of the kernel within its launch's registers (setmaxnreg adds none to the
        # code, it only keeps the producer's from the tile's), so those must hold the accumulators.
        return 2 if fits and self._launch_registers(2) >= accumulators + SPARE_REGISTERS else 1

    @property
    def static_shared_memory_size(self) -> int:
        """Bytes of the TMA kernel's static shared memory, at most (its mbarriers)."""
        return TMA_STATIC_SHARED

    @property
    def fma_c_read_ahead(self) -> int:
        """Values of C an FMA tile's epilogue reads before it writes any (store_partial's ReadAhead): 8 where a
        block has the SM's registers to itself and B is column-major, else 1 (row-major B gained nothing from
        reading ahead, two blocks an SM spilled more: benchmarks/RESULTS.md, Grid against cuBLAS)."""
        return 8 if self.blocks_per_sm == 1 and self.b.layout == "col_major" else 1

    @property
    def quads_c_read_ahead(self) -> bool:
        """Whether the 16-bit quads epilogue (store_tile_quads) reads C a group of instruction tiles ahead of
        its writes (c_read_group), not each quad just before its write: all but cp.async kernels of 128 registers
        a thread or fewer, whose group reads spilled into the K loop (benchmarks/RESULTS.md, Grid against cuBLAS)."""
        return self.tma or self.launch_registers > 128

    @property
    def short_quads_epilogue(self) -> bool:
        """Whether plain whole tiles of 16-bit C (no hooks, beta 0) take the quads' short epilogue
        (store_whole_tile_quads): the TMA kernels, where it measured faster (benchmarks/RESULTS.md, Grid against
        cuBLAS); the cp.async kernels keep one copy (a second spilled there)."""
        return self.tma

    @property
    def fma_pipelined(self) -> bool:
        """Whether the tile's vector FMA loop (float32 micro-tiles read 16 bytes at a time) loads the next four
        steps of k while it multiplies: A row-major (a load holds four steps of a row), one block an SM (on two
        the second buffer spilled), the tile at most MAX_PIPELINED_FMA_K deep (it unrolls over k: compile time)."""
        return (self.tile.fma_vector_loads and self.blocks_per_sm == 1 and self.a.layout == "row_major"
                and self.tile.k <= MAX_PIPELINED_FMA_K)

    @property
    def cluster(self) -> bool:
        """Whether the TMA kernel runs in clusters of two blocks on vertically neighbouring tiles,
        each block copying half of their shared B into both (TMA multicast; with split-K, the pair's parts of its
        K loops alike): one block an SM, two tile rows or more, and B's half on a 1024-byte boundary (half of
        each slab's rows where k is B's contiguous dimension, half of its slabs where n is)."""
        if not self.tma or self.blocks_per_sm > 1 or self.tiles_m < 2:
            return False
        b = self.tma_operand("b")
        return b.slab_rows // 2 * b.swizzle % 1024 == 0 if b.k_inner else b.slabs % 2 == 0


    def scales_refusal(self, scale_a: str, scale_b: str, load_hooks: bool) -> str:
        """Why the grid kernel cannot take FP8 scales ("" where it can). Scales that do not vary along k multiply
        the products once, on every path; blockwise ones multiply the partial sums of each PROMOTION_K of k as they
        are promoted: the tile must promote them (FP8 wgmma, Accumulation('accurate')), see them as they come (no
        load hooks, which take mma.sync) and lie in one block of the scales along k and, for B's, in one column block
        where its K tiles go in pairs, else in two at most (column_blocks_reached; each column scaled by its own:
        scale_b_by_columns)."""
        tile = self.tile
        if self.gate_split and scale_b in ("col", "block"):
            return (f"B's {scale_b} scales follow B's columns, which layout='split' gathers from two places into a "
                    f"tile; scale B per tensor, or interleave the weights (and their scales) once and pass "
                    f"layout='interleaved': {INTERLEAVE_WEIGHTS}")
        if "block" not in (scale_a, scale_b):
            return ""
        if not tile.promote_k:
            if tile.instruction.narrow_accumulation:
                why, fix = "Accumulation('fast') keeps wgmma's own sum", "remove Accumulation('fast')"
            else:
                why = f"{tile.instruction.name} does not promote them (blockwise scales ride FP8 wgmma's promotion)"
                fix = "describe the GEMM for wgmma (SM 900, row-major A, column-major B: explain() lists its conditions)"
            return (f"blockwise scales multiply the partial sums of each {PROMOTION_K} of k as they are promoted into "
                    f"float32, but {why}; {fix}, or scale per tensor, per row of A or per column of B")
        if load_hooks:
            return ("blockwise scales need wgmma's promotion, which load hooks (a_load, b_load, prologue) replace by "
                    "mma.sync; apply the hooks to the data first")
        if PROMOTION_K % tile.k:
            return (f"blockwise scales: the tile's K step ({tile.k}) must divide {PROMOTION_K}, so that each K tile "
                    f"lies in one block of the scales; use Tile({tile.m}, {tile.n}, {PROMOTION_K})")
        blocks = column_blocks_reached(tile.n, self.n)
        if scale_b == "block" and (blocks > 2 or (blocks == 2 and tile.promotes_in_pairs)):
            why = ("two column blocks of B's scales, and their K tiles go in pairs, which scale a tile's columns alike"
                   if blocks == 2 else "three column blocks of B's scales (a tile's are scaled over two at most)")
            return (f"blockwise scales: tiles {tile.n} wide over C's {self.n} columns reach {why}; use "
                    f"Tile({tile.m}, {PROMOTION_K}, {tile.k})")
        return ""

    @property
    def scale_b_by_columns(self) -> bool:
        """Whether a tile reaches two column blocks of B's blockwise scales (k_tile_scale's by_columns: each column
        scaled by its block's)."""
        return column_blocks_reached(self.tile.n, self.n) > 1

    def gate_refusal(self, split: bool = False) -> str:
        """Why the grid kernel cannot gate its products (execute()'s epilogue=blasdx.swiglu/geglu; "" where it can):
        a lane must hold each pair of the product's columns (2j, 2j + 1), as mma.sync and wgmma tiles do (c_col), of
        real floating-point values, and C its default leading dimension (its columns are half of the product's).
        ``split`` (layout="split"): split_refusal's conditions too."""
        c = self.c
        if self.is_complex or not PRECISIONS[c.precision].is_float:
            what = f"complex {c.precision}" if self.is_complex else c.precision
            return f"a gated epilogue (SwiGLU, GeGLU) needs real floating-point values; this GEMM's C is {what}"
        if not self.tile.instruction.is_mma:
            return (f"a gated epilogue runs on tensor-core tiles, whose lanes hold the product's columns 2j and 2j + 1 "
                    f"side by side; this GEMM's tiles run {self.tile.instruction.name} (explain() says why): describe "
                    f"it for the tensor cores (TF32 for float32), or apply the gate after the GEMM")
        if self.n % 2:
            return f"a gated epilogue pairs the product's columns (gate, up), so n must be even; Size's n is {self.n}"
        if c.ld != (self.n if c.layout == "row_major" else self.m):
            return (f"a gated epilogue writes C with n / 2 = {self.n // 2} columns at its own leading dimension; this "
                    f"descriptor's LeadingDimension sets C's to {c.ld}: leave C's at its default")
        return self.split_refusal() if split else ""

    def split_refusal(self) -> str:
        """Why the kernel cannot gate weights kept split (layout="split"; "" where it can): TMA copies B's gate and
        up halves of each tile from their two places (gate_split), so the kernel must be TMA's (SM 900, wgmma tiles,
        16-byte leading dimensions), a warpgroup's tile the block tile's whole width (its lanes hold gate and up of
        a column, tile_n / 2 apart), and each half whole boxes: rows of 8 swizzled lines (K-major B) or slabs."""
        t = self.tile
        fix = f"or interleave the weights once and pass layout='interleaved': {INTERLEAVE_WEIGHTS}"
        if not tma_runs(self, 16, 16):
            what = "run the TMA kernel (SM 900, wgmma tiles)"
            why = (f"this GEMM's tiles run {t.instruction.name} on SM {self.sm} (explain() says why)"
                   if self.sm < TMA_MIN_SM or not (t.a.swizzle and t.b.swizzle) else
                   f"its Tile cannot: {registers}" if (registers := tma_registers_refusal(self)) else
                   f"its leading dimensions must be multiples of 16 bytes, and this descriptor's lda, ldb are "
                   f"{self.a.ld}, {self.b.ld} elements of {self.a.element_size} and {self.b.element_size} bytes")
            return (f"blasdx.swiglu/geglu(layout='split') copies each tile's gate and up columns of B from their two "
                    f"places by TMA, so it must {what}; {why}: describe it so, {fix}")
        b = self.tma_operand("b")
        if t.tile_n != t.n:
            return (f"layout='split' needs one warpgroup across the tile's {t.n} columns (its lanes hold gate and up "
                    f"of a column); this tile's warpgroups are {t.tile_n} wide: use a Tile of n <= 256, {fix}")
        if b.k_inner and b.slab_rows // 2 * b.swizzle % 1024:
            return (f"layout='split' copies the gate and up halves of the tile's {t.n} columns of B as boxes on "
                    f"1024-byte boundaries, but half of them is {t.n // 2} lines of {b.swizzle} bytes: use a Tile "
                    f"whose n is a multiple of {2 * 1024 // b.swizzle}, {fix}")
        if not b.k_inner and b.slabs % 2:
            return (f"layout='split' copies the gate and up halves of the tile's {t.n} columns of row-major B as "
                    f"whole slabs of {b.slab_elements} columns, but the tile has {b.slabs}: use a Tile whose n is a "
                    f"multiple of {2 * b.slab_elements} (Tile({t.m}, {2 * b.slab_elements * -(-b.slabs // 2)}, {t.k})), "
                    f"{fix}")
        half_bytes = self.n // 2 * b.element_size
        if not b.k_inner and half_bytes % 16:
            # a box's first element along a tensor map's contiguous dimension must lie on a 16-byte boundary
            # (the GPU stops the kernel with an illegal instruction otherwise)
            return (f"layout='split' copies the up half of row-major B from its column n / 2 = {self.n // 2}, "
                    f"{half_bytes} bytes into each row, but TMA copies start on 16-byte boundaries: make n / 2 a "
                    f"multiple of {16 // b.element_size} (pad both halves of the weights with zero columns), store B "
                    f"column-major (k contiguous), {fix}")
        return ""

    def gated(self, split: bool = False) -> GridPlan:
        """This plan for a gated epilogue (Fusion.gate): C holds n / 2 columns, C(r, j) the gate of the product's
        columns 2j and 2j + 1 (templates/gated_c.cuh.j2), or j and n / 2 + j where ``split`` (gate_split); no
        batched alternative (item_block) takes it. ArgumentError where gate_refusal says why not."""
        refusal = self.gate_refusal(split)
        if refusal:
            raise ArgumentError(refusal)
        c, cols = self.c, self.n // 2
        row_major = c.layout == "row_major"
        gated_c = replace(c, cols=cols, ld=cols if row_major else c.ld, smem_ld=cols if row_major else c.smem_ld,
                          outer=c.rows if row_major else cols, inner=cols if row_major else c.rows)
        return replace(self, c=gated_c, item_block=None, batch_grids=(), tma_store=False, gate_split=split)

    def for_batch(self, batch: int | None) -> GridPlan:
        """The plan a call on ``batch`` items (None: one) runs: of this one and those of batch_grids whose tiles
        fill a wave of WAVE_BLOCKS (fewer would split their K loops, which wave_time does not count), the one whose
        waves of the call's tiles take least time (wave_time at each one's wave_rate), this one on ties; each at its
        batch_stages where the call's tiles fill a wave."""
        if batch is None:
            return self
        fill = [g for g in self.batch_grids if batch * g.tiles >= WAVE_BLOCKS]
        chosen = min((self, *fill), key=lambda p: wave_time(p.tile.m, p.tile.n, batch * p.tiles, p.wave_rate))
        return chosen._batch_staged if chosen.batch_stages and batch * chosen.tiles >= WAVE_BLOCKS else chosen

    @cached_property
    def _batch_staged(self) -> GridPlan:
        """This plan at its batch_stages (for_batch), made once."""
        return replace(self, stages=self.batch_stages, batch_stages=0)

    @property
    def wave_rate(self) -> float:
        """The rate of this plan's tile on a wave's outputs against its family's tile of rate 1 (for_batch): a wgmma
        tile under 192 rows SHORT_TILE_RATE, a promoted 128 x 192 one WIDE_PROMOTED_TILE_RATE, a float64 one under 128
        wide half_width_float64_rate; else 1."""
        t = self.tile
        if t.instruction.is_wgmma and t.promote_k:
            return WIDE_PROMOTED_TILE_RATE if (t.m, t.n) == (128, 192) else 1.0
        if t.instruction.is_wgmma:
            return SHORT_TILE_RATE if t.m < 192 else 1.0
        if t.instruction.accumulator == "double" and not self.is_complex and t.n < 128:
            return mma.half_width_float64_rate(self.sm, {"a": self.a.layout, "b": self.b.layout})
        return 1.0

    def kernel_parameters(self, has_bias: bool, scaled: bool = False) -> tuple[KernelParameter, ...]:
        return kernel_parameters(has_bias, grid=True, tma=self.tma, scaled=scaled, tma_store=self.tma_store)

    def work(self, batch: int) -> int:
        """Blocks' worth of work in a call on ``batch`` items without split-K: a block a tile."""
        return batch * self.tiles

    def blocks(self, batch: int, resident_blocks: int, splits: int) -> int:
        """Blocks of a launch: persistent, at most as many as the GPU runs at once."""
        if splits > 1:
            units, at_once = self._units(self.work(batch), resident_blocks)
            blocks = min(units + self.split_units(self.work(batch), resident_blocks, splits) * (splits - 1), at_once)
            return 2 * blocks if self.cluster else blocks
        return self.launch_grid(batch, resident_blocks)

    def launch_grid(self, items: int, resident_blocks: int) -> int:
        """Blocks of a launch on ``items`` batch items without split-K: one per tile (per pair of
        tiles and two of them, in clusters), at most as many as the GPU runs at once."""
        units, at_once = self._units(items * self.tiles, resident_blocks)
        return 2 * min(units, at_once) if self.cluster else min(units, at_once)

    @property
    def launch_registers(self) -> int:
        """Registers per thread as many as the register file gives each thread of blocks_per_sm
        blocks: what the TMA kernel's blocks start with (ptxas compiles a kernel with setmaxnreg to
        that), and the most the cp.async kernel's threads get."""
        return self._launch_registers(self.blocks_per_sm)

    @property
    def consumer_registers(self) -> int:
        """Registers per thread of the tile's warpgroups in the TMA kernel, after setmaxnreg: the
        launch's plus their share of what the producer gives back, which is all the block has
        (setmaxnreg.inc waits for registers that never come where this asks more)."""
        return self._consumer_registers(self.blocks_per_sm)

    def _launch_registers(self, blocks: int) -> int:
        return REGISTERS_PER_SM // (self.threads * blocks) // 8 * 8

    def _consumer_registers(self, blocks: int) -> int:
        base = self._launch_registers(blocks)
        released = PRODUCER_THREADS * (base - PRODUCER_REGISTERS)
        return min(MAX_THREAD_REGISTERS, base + released // self.tile.threads) // 8 * 8

    def registers_balance(self, launch_registers: int) -> bool:
        """Whether the tile's warpgroups get their consumer_registers from what the producer
        gives back, where the compiled kernel starts with ``launch_registers`` per thread (without
        TMA there is no hand-over)."""
        if not self.tma:
            return True
        grow = max(0, self.consumer_registers - launch_registers) * self.tile.threads
        return grow <= PRODUCER_THREADS * (launch_registers - PRODUCER_REGISTERS)

    def tma_operand(self, name: str) -> TmaOperand:
        """How the TMA kernel copies operand ``name`` ("a" or "b") of a stage."""
        part = getattr(self.tile, name)
        return TmaOperand(name=name, k_inner=(part.layout == "row_major") == (name == "a"),
                          slabs=part.inner * part.element_size // part.swizzle, slab_rows=part.outer,
                          slab_elements=part.swizzle // part.element_size, swizzle=part.swizzle,
                          element_size=part.element_size)

    @property
    def tiles_m(self) -> int:
        return -(-self.m // self.tile.m)

    @property
    def tiles_n(self) -> int:
        return -(-self.n // self.tile.n)

    @property
    def tiles(self) -> int:
        """Tiles of C per batch item."""
        return self.tiles_m * self.tiles_n

    @property
    def k_tiles(self) -> int:
        """Steps of each tile's K loop."""
        return -(-self.k // self.tile.k)

    @property
    def accumulator_bytes(self) -> int:
        """Bytes of one accumulator value of the tile's block GEMM (its acc_value_t)."""
        t = self.tile
        name = t.mma_acc_type if t.instruction.is_mma else t.acc_type
        size = next(p.itemsize for p in PRECISIONS.values() if p.cpp_type == name and not p.is_packed)
        return 2 * size if self.is_complex else size

    def stages_c(self, epilogue_hooks: bool) -> bool:
        """Whether the epilogue stages C in shared memory (store_block_tile_staged) before writing it: FMA tiles
        where it fits and ``epilogue_hooks`` (one copy of the hooks, half the compile time) or C column-major or
        complex (a warp writes runs); plain row-major C lost (benchmarks/RESULTS.md, Grid against cuBLAS)."""
        if self.tile.instruction.is_mma or not (epilogue_hooks or self.is_complex or self.c.layout == "col_major"):
            return False
        t = self.tile
        outer, inner = (t.m, t.n) if self.c.layout == "row_major" else (t.n, t.m)
        return outer * (inner + STAGED_C_PADDING) * self.accumulator_bytes <= self.kernel_shared_memory_size

    def splits(self, tiles: int, resident_blocks: int) -> int:
        """How many parts the K loops of the call's last split_units tiles (of ``tiles``, of every batch item) split
        into (split-K), each part at least MIN_SPLIT_K_TILES K tiles deep, at most MAX_SPLITS; 1 without split-K's
        code, or where splitting gains nothing. A batch item of fewer than GRID_MIN_TILES tiles, and fewer in the
        call than the GPU runs at once: all of them split, into as many parts as the GPU runs at once (one part more
        would leave a second round of parts, a part's time more). Elsewhere, K at least
        SPLIT_TAIL_MIN_K deep: the whole waves run first, then the rest, which would leave SMs idle, in the parts
        that end the last wave soonest (SPLIT_PART_K), all at once (a second round of parts lost 2-3%)."""
        if not self.split_k:
            return 1
        units, at_once = self._units(tiles, resident_blocks)
        most = max(1, min(self.k_tiles // MIN_SPLIT_K_TILES, MAX_SPLITS))
        if self._all_split(units, at_once):
            return min(at_once // units, most)
        if self.k < SPLIT_TAIL_MIN_K:  # (few tiles a batch item, K shallower, and a batch that fills the GPU)
            return 1
        wave = self._wave(at_once)
        rest = units % wave
        part_cost = SPLIT_PART_K * self.accumulator_bytes / 4 / self.k

        def last_wave(parts: int) -> float:  # in tiles' time
            return 1 / parts + (part_cost * parts if parts > 1 else 0)

        return min(range(1, min(most, wave // rest if rest else 1) + 1), key=last_wave)

    def split_units(self, tiles: int, resident_blocks: int, splits: int) -> int:
        """The call's units (tiles, or pairs of tiles in clusters) whose K loops split into ``splits`` parts
        (splits): all of few tiles, else its last ones, past its whole waves (of as many as it has SMs); none where
        splits is 1."""
        units, at_once = self._units(tiles, resident_blocks)
        if splits == 1:
            return 0
        return units if self._all_split(units, at_once) else units % self._wave(at_once)

    def _all_split(self, units: int, at_once: int) -> bool:
        """Whether every tile of a call splits (splits): few tiles a batch item, fewer in the call than run at once."""
        return units < at_once and self.tiles < GRID_MIN_TILES

    def _wave(self, at_once: int) -> int:
        """Units of a whole wave, where ``at_once`` run at once: one an SM (the blocks an SM runs share its time)."""
        return max(1, at_once // self.blocks_per_sm)

    def _units(self, tiles: int, resident_blocks: int) -> tuple[int, int]:
        """What the kernel's blocks walk in a call on ``tiles`` tiles (of every batch item), and how many of them
        run at once: its tiles and blocks, or in clusters its pairs of vertically neighbouring tiles and clusters."""
        if self.cluster:
            return tiles // self.tiles * -(-self.tiles_m // 2) * self.tiles_n, resident_blocks // 2
        return tiles, resident_blocks

    def workspace_bytes(self, tiles: int, resident_blocks: int, splits: int) -> int:
        """split-K's workspace: a counter per split tile (workspace_counter_bytes), then each split tile's parts
        (every thread's accumulator)."""
        part = self.tile.accumulator_size * self.tile.threads * self.accumulator_bytes
        return self.workspace_counter_bytes(tiles, resident_blocks, splits) + self._split_tiles(
            tiles, resident_blocks, splits) * splits * part

    def workspace_counter_bytes(self, tiles: int, resident_blocks: int, splits: int) -> int:
        """The start of split-K's workspace, which is zero before a launch (combine_splits' counters, a split
        tile's each, 256-byte aligned); the parts after them need not be (each is written before it is read)."""
        return -(-4 * self._split_tiles(tiles, resident_blocks, splits) // 256) * 256

    def _split_tiles(self, tiles: int, resident_blocks: int, splits: int) -> int:
        """The call's tiles whose K loops split: its split units' (two a pair in clusters)."""
        return self.split_units(tiles, resident_blocks, splits) * (2 if self.cluster else 1)

    @property
    def c_box_swizzle(self) -> int:
        """Bytes of a row of the boxes of C that TMA stores (tma_store), their swizzle."""
        return c_box_swizzle(self.tile)

    @property
    def c_staging_offset(self) -> int:
        """Where C's staging buffers (tma_store) start in the kernel's shared memory: after the stages, on a
        1024-byte boundary (the swizzle's)."""
        return -(-self.stages * self.tile.shared_memory_size // 1024) * 1024

    @property
    def tma_store_fits(self) -> bool:
        """Whether the kernel stores C by TMA where A, B and C are aligned for it (tma_store): C's layout allows
        (stores_c_by_tma), it is the product's width (a gated epilogue's is half of it) and a buffer of it fits
        beside the stages (make_grid_plan left room where the stages were its choice)."""
        return (stores_c_by_tma(self.tile, self.c, self.sm, self.is_complex) and self.c.cols == self.n
                and self._fits_one_block(self.c_staging_offset + c_staging_bytes(self.tile, 1)))

    @property
    def c_staging_buffers(self) -> int:
        """Buffers of C's boxes a warpgroup (tma_store): MAX_STAGING_BUFFERS where they fit beside the stages, else
        one (make_grid_plan reserves that much); 0 without TMA stores."""
        if not self.tma_store:
            return 0
        one, most = (self.c_staging_offset + c_staging_bytes(self.tile, b) for b in (1, MAX_STAGING_BUFFERS))
        # (never at the cost of the second block an SM that one buffer leaves room for)
        keeps_blocks = self._fits_two_blocks(most) or not self._fits_two_blocks(one)
        return MAX_STAGING_BUFFERS if self._fits_one_block(most) and keeps_blocks else 1

    def _fits_one_block(self, dynamic: int) -> bool:
        """Whether a block of ``dynamic`` bytes of dynamic shared memory (and the static) fits an SM's limit."""
        return dynamic + self.static_shared_memory_size <= shared_memory_limit(self.sm)

    def _fits_two_blocks(self, dynamic: int) -> bool:
        """Whether two blocks of ``dynamic`` bytes of dynamic shared memory (and the static) fit an SM."""
        per_block = dynamic + self.static_shared_memory_size + BLOCK_RESERVED_SHARED
        return 2 * per_block <= shared_memory_limit(self.sm) + BLOCK_RESERVED_SHARED

    @property
    def stages_shared_memory_size(self) -> int:
        """Bytes of the K loop's stages (A and B): the shared memory of a kernel of the device API's, which stores C
        from registers."""
        return self.stages * self.tile.shared_memory_size

    @property
    def kernel_shared_memory_size(self) -> int:
        """Bytes of the grid kernel's dynamic shared memory: the stages, then C's staging buffers (tma_store)."""
        if self.tma_store:
            return self.c_staging_offset + c_staging_bytes(self.tile, self.c_staging_buffers)
        return self.stages_shared_memory_size

    @property
    def digest(self) -> str:
        fields = asdict(self)
        del fields["item_block"], fields["batch_grids"], fields["batch_stages"]  # other kernels': not in this one's code
        if not self.tma_store:  # (the other kernels keep their names)
            del fields["tma_store"]
        if not self.gate_split:  # (the other kernels keep their names)
            del fields["gate_split"]
        del fields["tile"]["instruction_reason"]  # explain()'s words
        return digest_of(fields)

    @property
    def kernel_name(self) -> str:
        t = self.tile
        return f"{name_stem('grid', self)}_tile{t.m}x{t.n}x{t.k}_s{self.stages}_t{self.threads}_{self.digest}"


def column_blocks_reached(tile_n: int, n: int, block: int = PROMOTION_K) -> int:
    """The most column blocks of ``block`` columns (B's blockwise scales) that one tile ``tile_n`` wide covers of C's
    ``n`` columns, tiles from column 0 on: their first columns' offsets in a block repeat every block / gcd(tile_n,
    block) tiles, and the last tile stops at n."""
    tiles = -(-n // tile_n)
    firsts = set(range(min(tiles, block // math.gcd(tile_n, block)))) | {tiles - 1}
    return max((min((t + 1) * tile_n, n) - 1) // block - t * tile_n // block + 1 for t in firsts)


def suggested_stages(stage_bytes: int, k_tiles: int, sm: int, blocks_per_sm: int = 1, reserved: int = 0) -> int:
    """MAX_SUGGESTED_STAGES, fewer where the K loop is shorter or the shared memory of each of
    ``blocks_per_sm`` blocks (less ``reserved`` bytes of it) smaller; at least 2."""
    per_block = (shared_memory_limit(sm) + BLOCK_RESERVED_SHARED) // blocks_per_sm - BLOCK_RESERVED_SHARED - reserved
    return max(2, min(MAX_SUGGESTED_STAGES, k_tiles, per_block // stage_bytes))


def c_box_swizzle(tile: TilePlan) -> int:
    """Bytes of a row of the boxes of C that TMA stores (GridPlan.tma_store): 128, the widest swizzle, or the
    wgmma tile's width where narrower."""
    return min(128, tile.tile_n * tile.c.element_size)


def c_staging_bytes(tile: TilePlan, buffers: int) -> int:
    """Shared memory of C's staging buffers (GridPlan.tma_store): ``buffers`` boxes a warpgroup."""
    return tile.threads // 128 * buffers * TMA_STORE_ROWS * c_box_swizzle(tile)


def stores_c_by_tma(tile: TilePlan, c: MatrixPlan, sm: int, is_complex: bool) -> bool:
    """Whether the TMA kernel stores C by TMA (GridPlan.tma_store): sm_90+, wgmma tiles whose A and B come by TMA,
    real row-major C (a lane's pair of values, neighbours in a row, go to shared memory as one) of at least
    TMA_STORE_MIN_BYTES an element, the wgmma tile a whole number of boxes of 32 bytes or more, and C's rows whole
    16-byte pieces, apart and wide (``c``, the whole C: a TMA store wrote a row's last piece whole, past n = 1001
    float32 columns into the next three, on the H200)."""
    swizzle = c_box_swizzle(tile)
    return (sm >= TMA_MIN_SM and tile.instruction.is_wgmma and tile.a.swizzle > 0 and tile.b.swizzle > 0
            and not is_complex and c.layout == "row_major" and c.element_size >= TMA_STORE_MIN_BYTES
            and swizzle in (32, 64, 128) and tile.tile_n * tile.c.element_size % swizzle == 0
            and c.ld * c.element_size % 16 == 0 and c.inner * c.element_size % 16 == 0)


def deep_k_stages(tile: TilePlan, tiles: int, k: int) -> int:
    """The most stages of a wgmma tile (partial sums not promoted) of a problem of ``tiles`` tiles, at least
    GRID_MIN_TILES (fewer split their K loops over every SM) and fewer than a wave, whose K loops are SPLIT_TAIL_MIN_K
    or deeper: MAX_STAGES (as many as fit, one block an SM, outran four by 4-21% on 64 x 128, 128 x 128 and 192 x 128
    tiles at k = 8192-16384; none at k = 4096), DEEP_K_SMALL_TILE_STAGES on 64 x 64 (two blocks an SM still); 0
    elsewhere (the suggested stages): benchmarks/RESULTS.md, Grid against cuBLAS."""
    if not (tile.instruction.is_wgmma and not tile.promote_k and GRID_MIN_TILES <= tiles < 2 * GRID_MIN_TILES
            and k >= SPLIT_TAIL_MIN_K):
        return 0
    return DEEP_K_SMALL_TILE_STAGES if (tile.m, tile.n) == (64, 64) else MAX_STAGES


def fma_blocks_share_sm(tile: GemmPlan, b_layout: str, is_complex: bool, tiles: int) -> bool:
    """Whether the cp.async grid kernel of a float32 FMA tile (real or complex) asks for two blocks an SM (launch
    bounds halving the registers): where tuning says (SM 900), B is row-major or values complex, and C has at least
    2 * GRID_MIN_TILES tiles (column-major B and fewer tiles lost: benchmarks/RESULTS.md, Grid against cuBLAS)."""
    float32 = all(x.precision == "float32" for x in (tile.a, tile.b, tile.c))
    return (tuning_of(tile.sm).fma_grid_two_blocks and not tile.instruction.is_mma and float32 and tiles >= 2 * GRID_MIN_TILES
            and (is_complex or b_layout == "row_major"))


def make_grid_plan(desc: Descriptor) -> GridPlan:
    """The grid kernel's plan of an executable Grid() descriptor."""
    block = _invariant_checked(desc, make_tile_plan(desc.tile_descriptor))
    limit = shared_memory_limit(desc.sm)
    mats, stage_bytes = shared_layout(block, True, True)
    if 2 * stage_bytes > limit:  # unpadded, where padding costs the second stage
        mats, stage_bytes = shared_layout(block, False, True)
    tile = replace(block, a=mats["a"], b=mats["b"], c=mats["c"], shared_memory_size=stage_bytes)
    k_tiles = -(-desc.size.k // block.k)
    problem = {x: matrix_plan(desc, x, 0, 0) for x in "abc"}
    # room for a buffer of C's TMA stores (GridPlan.tma_store_fits), where TMA can store C
    reserved = c_staging_bytes(tile, 1) if stores_c_by_tma(tile, problem["c"], desc.sm, desc.is_complex) else 0
    given = desc.operator_map.get("Stages")
    stages = (given.value if given is not None  # type: ignore[attr-defined]
              else suggested_stages(stage_bytes, k_tiles, desc.sm, reserved=reserved))
    if stages * stage_bytes > limit:
        fitting = limit // stage_bytes
        fix = f"use Stages({fitting})" if fitting >= 2 else "use a smaller Tile"
        raise UnsupportedError(
            f"{stages} stages of the {block.m}x{block.n}x{block.k} tile take {stages} x {stage_bytes} bytes of shared "
            f"memory, over SM {desc.sm}'s limit of {limit} bytes per block; {fix}")
    tiles = -(-desc.size.m // block.m) * -(-desc.size.n // block.n)
    if tiles >= 2**31:  # far past any GPU's memory for C, but said rather than overflowed
        raise UnsupportedError(
            f"C of {desc.size.m} x {desc.size.n} has {tiles} tiles of {block.m}x{block.n}, 2**31 or more (the "
            f"kernel counts tiles in an int); split the problem, or use a larger Tile")
    # BatchInvariant(): one K order whatever the tiles, so never split-K
    split_k = ((tiles < GRID_MIN_TILES or (tiles < MAX_SPLIT_K_TILES and desc.size.k >= SPLIT_TAIL_MIN_K))
               and k_tiles >= 2 * MIN_SPLIT_K_TILES and "BatchInvariant" not in desc.operator_map)
    if given is None and fma_blocks_share_sm(tile, problem["b"].layout, desc.is_complex, tiles):
        stages = min(MAX_SUGGESTED_STAGES_TWO_BLOCKS, suggested_stages(stage_bytes, k_tiles, desc.sm, blocks_per_sm=2))
    suggested = stages
    if given is None and tiles < 2 * GRID_MIN_TILES:
        # fewer tiles than SMs (split-K at most filling one round of blocks; none under BatchInvariant()): each
        # block's K loop, or its part, is the call's time, and deeper stages keep more of it in flight
        # (benchmarks/RESULTS.md, Batch invariance; Grid against cuBLAS). Grouped()'s rows come at the call.
        deepest = (MAX_STAGES if "BatchInvariant" in desc.operator_map else
                   deep_k_stages(tile, tiles, desc.size.k) if desc.execution == "Grid" else 0)
        stages = max(stages, min(deepest, k_tiles, (limit - reserved) // stage_bytes))
    plan = GridPlan(sm=desc.sm, m=desc.size.m, n=desc.size.n, k=desc.size.k, is_complex=desc.is_complex,
                    a=problem["a"], b=problem["b"], c=problem["c"], tile=tile, stages=stages, group_m=GROUP_M,
                    split_k=split_k, item_block=item_block_choice(desc)[0],
                    # a batch's tiles may fill waves (BatchInvariant(): no kernel switched by the batch)
                    batch_stages=0 if "BatchInvariant" in desc.operator_map or stages == suggested else suggested)
    return replace(plan, batch_grids=_batch_grids(desc, plan))


def _batch_grids(desc: Descriptor, plan: GridPlan) -> tuple[GridPlan, ...]:
    """The plans of the other tiles a batched call may run (GridPlan.for_batch: wgmma.batch_tiles, mma.batch_tiles for
    float64), where the tile is suggested (no Tile, Stages or BlockDim), and not under BatchInvariant() (no kernel
    switched by the batch)."""
    ops, t = desc.operator_map, plan.tile
    if any(kind in ops for kind in ("Tile", "Stages", "BlockDim", "BatchInvariant")):
        return ()
    if t.instruction.is_wgmma:
        tiles = wgmma.batch_tiles(ops, t.k)
    elif t.instruction.is_mma:
        tiles = mma.batch_tiles(ops, t.k)
    else:
        return ()
    return tuple(make_grid_plan(desc + tile) for tile in tiles if (tile.m, tile.n) != (t.m, t.n))


def tma_registers_refusal(plan: GridPlan) -> str:
    """Why the TMA kernel cannot run this wgmma tile for want of registers ("" where it can): ptxas compiles all of
    that kernel within its launch's registers (setmaxnreg moves registers between warpgroups at run time, it adds none
    to the code), and fails (C7602) where one warpgroup's wgmma of 64 x tile_n needs more than they hold (its
    accumulators and about SPARE_REGISTERS: 256 x 192 and 192 x 256 tiles)."""
    t, on_tma = plan.tile, replace(plan, tma=True)
    fragment = t.tile_n // 2 * plan.accumulator_bytes // 4
    have = on_tma._launch_registers(1)
    if fragment + SPARE_REGISTERS <= have:
        return ""
    widest = (have - SPARE_REGISTERS) * 8 // plan.accumulator_bytes // 16 * 16
    return (f"the TMA kernel's {on_tma.threads} threads start with {have} registers each, within which ptxas compiles "
            f"all of it, and a warpgroup's 64 x {t.tile_n} wgmma keeps {fragment} accumulators a thread (about "
            f"{fragment + SPARE_REGISTERS} registers with the rest): a tile at most {widest} wide, or fewer threads")


def _invariant_checked(desc: Descriptor, block: TilePlan) -> TilePlan:
    """``block``, the tile of ``desc``; under BatchInvariant() with the tile suggested (its height fitted to m:
    traits.invariant_tile_of), the reference tile of INVARIANT_ROWS rows in its place wherever a row would meet
    another instruction or K order in it (another wgmma width, K step or promotion): never, as planned today."""
    if "BatchInvariant" not in desc.operator_map or "Tile" in desc.operator_map:
        return block
    size = desc.size
    reference = make_tile_plan(desc.replace(Size(INVARIANT_ROWS, size.n, size.k)).tile_descriptor)

    def arithmetic(t: TilePlan) -> tuple:
        return t.instruction.name, t.k, t.tile_n if t.instruction.is_wgmma else 0, t.promote_k

    return block if arithmetic(block) == arithmetic(reference) else reference


def item_block_choice(desc: Descriptor) -> tuple[GemmPlan | None, str]:
    """The block GEMM of one batch item of a Grid() descriptor (Size(m, n, k) + Block() with its
    other operators), whose batched kernel execute() runs on batches of at least as many items as
    the GPU runs blocks of it at once (GridPlan.item_block); None where the grid kernel runs
    whatever the batch. With why, as explain() says it."""
    if "BatchInvariant" in desc.operator_map:
        return None, "BatchInvariant(): no batch switches the kernel"
    given = [kind for kind in ("Tile", "Stages", "BlockDim") if kind in desc.operator_map]
    if given:
        return None, f"{', '.join(given)} given: the grid kernel as described"
    try:
        item = make_plan(desc.item_descriptor)
    except DescriptorError as exc:  # its first clause: what the block GEMM lacks (the rest advises Block() users)
        return None, f"a batch item is more than one block GEMM holds: {str(exc).split(';')[0]}"
    if not item.instruction.is_wgmma and desc.size.k > ITEM_BLOCK_MAX_K:
        return None, (f"k = {desc.size.k} is over {ITEM_BLOCK_MAX_K} on {item.instruction.name} tiles, where one "
                      f"block's whole K loop at once loses to the grid's pipelined one")
    return item, "a batch item is one block GEMM"


@lru_cache(maxsize=1024)
def grid_with_alignment(plan: GridPlan, alignment: tuple[int, int, int]) -> GridPlan:
    """The plan with the tile's copies of A and B as wide as the data allow: ``alignment`` is
    each array's (pointer and batch stride); a tile starts a whole number of leading
    dimensions and tile widths further on, so the leading dimension's bytes bound it too."""
    tile = plan.tile
    mats = {}
    for x, whole, align in zip((tile.a, tile.b), (plan.a, plan.b), alignment):
        ld_bytes = whole.ld * whole.element_size
        align = max(whole.alignment, min(16, align, ld_bytes & -ld_bytes))
        vec = vector_bytes_of(align, x.inner * x.element_size, ld_bytes)
        mats[x.name] = replace(x, alignment=align, vector_bytes=vec, shared_alignment=16)
    tma = tma_runs(plan, mats["a"].alignment, mats["b"].alignment)
    if plan.gate_split and not tma:
        raise ArgumentError(
            f"blasdx.swiglu/geglu(layout='split') runs on the TMA kernel, whose A and B start on 16-byte boundaries "
            f"(pointers and batch strides); this call's are aligned to {mats['a'].alignment} and "
            f"{mats['b'].alignment} bytes: align them, or interleave the weights once and pass "
            f"layout='interleaved': {INTERLEAVE_WEIGHTS}")
    # TMA stores C where it starts, and steps between batch items, on 16-byte boundaries (its rows: tma_store_fits)
    tma_store = tma and plan.tma_store_fits and alignment[2] >= 16
    if mats["a"] == tile.a and mats["b"] == tile.b and tma == plan.tma and tma_store == plan.tma_store:
        return plan
    return replace(plan, tile=replace(tile, a=mats["a"], b=mats["b"]), tma=tma, tma_store=tma_store)


def tma_runs(plan: GridPlan, a_alignment: int, b_alignment: int) -> bool:
    """Whether the grid kernel copies A and B by TMA: on sm_90+, where the tile is wgmma's
    (A and B in swizzled slabs) and both arrays start, and step between rows and batch items,
    on multiples of 16 bytes (``*_alignment`` says so of the pointer, the batch stride and the
    leading dimension), as the tensor maps need, and its launch's registers hold a warpgroup's wgmma
    (tma_registers_refusal; elsewhere the cp.async kernel runs the tile)."""
    whole = (plan.a, plan.b)
    return (plan.sm >= TMA_MIN_SM and plan.tile.a.swizzle > 0 and plan.tile.b.swizzle > 0 and a_alignment >= 16
            and b_alignment >= 16 and all(x.ld * x.element_size % 16 == 0 and x.ld * x.element_size < 2**40 for x in whole)
            and not tma_registers_refusal(plan))
