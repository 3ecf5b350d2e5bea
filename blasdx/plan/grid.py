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

from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from ..arch import BLOCK_RESERVED_SHARED, REGISTERS_PER_SM, TMA_MIN_SM, shared_memory_limit
from ..describe.precision import PRECISIONS
from ..describe.traits import GRID_MIN_TILES
from ..errors import DescriptorError, UnsupportedError
from ..tuning import tuning_of
from .block import GemmPlan, MatrixPlan, digest_of, make_plan, matrix_plan, name_stem, vector_bytes_of
from .kernel import shared_layout

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor

# Stages the planner suggests at most: 4 x 48 KiB of 256x128x64 float16 tiles fill an SM's
# shared memory for one block (benchmarks/grid_gemm.py measures 2 to 6; 3 lose everywhere).
MAX_SUGGESTED_STAGES = 4
# ... and for FMA tiles on two blocks an SM (fma_blocks_share_sm): complex 2048^3 RRR with 4 stages
# read 0.44x torch.matmul, with 3 0.54x (float32 RRR 4096^3: 3 stages 0.76x, 2 stages 0.75x).
MAX_SUGGESTED_STAGES_TWO_BLOCKS = 3
# The deepest tile whose FMA loop is pipelined (GridPlan.fma_pipelined): unrolled, 16 steps of four.
MAX_PIPELINED_FMA_K = 64
# Tile rows per group of the tile order: a group's tiles run column by column, so the blocks
# running at once share rows of A and columns of B in L2.
GROUP_M = 8
# Batches of small problems (GridPlan.item_block): where one block GEMM holds a whole batch item,
# the batched block kernel (a block an item, several an SM, a new item's block starting as one
# ends) outruns the persistent grid (at most two tiles an SM, each one's epilogue waiting on C).
# H100, batches of 512 MiB, beta 0.5, ms of the grid kernel / the block kernel (twentieth
# session, benchmarks/RESULTS.md): 64x64x64 float16 -> float32 0.364 / 0.186, 64x64x512 0.236 /
# 0.182, 128x128x64 float16 0.426 / 0.183, 100x70x45 float32 1.56 / 0.55, 32x32x32 float64 0.253 /
# 0.179, 64x64x64 float32 0.261 / 0.180; but 32x32x128 float64 0.195 / 0.370 and 64x64x256 float32
# 0.229 / 0.474, where a block's one long K step of mma.sync or FMA tiles runs unpipelined: past
# k = ITEM_BLOCK_MAX_K, those keep the grid kernel (wgmma tiles do not).
ITEM_BLOCK_MAX_K = 64
# The TMA kernel's producer warpgroup (GridPlan.tma), and the registers each of its threads keeps
# (setmaxnreg): one thread issues the copies; the rest of the register file goes to the tile's. 24
# (setmaxnreg's least) rather than 40 gives the 512 threads of a 256x128 tile 112 registers, not 104:
# their spills went from 144 to 44 bytes and an H100 ran 4096^3 float16 4-6% faster.
PRODUCER_THREADS = 128
PRODUCER_REGISTERS = 24
# The most registers setmaxnreg gives a thread.
MAX_THREAD_REGISTERS = 240
# Registers a tile's thread needs beside its accumulators (addresses, the epilogue's values)
# for the TMA kernel to run two blocks on an SM; and the static shared memory that kernel takes
# (its mbarriers, at most).
SPARE_REGISTERS = 32
TMA_STATIC_SHARED = 256
# Split-K: parts of a tile's K loop at most, and K tiles each part takes at least (a pipeline
# of a few stages needs a few K tiles to fill).
MAX_SPLITS = 16
MIN_SPLIT_K_TILES = 4
# Values of padding after each line of C staged in shared memory (GridPlan.stages_c): lines 4 banks apart.
STAGED_C_PADDING = 4


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
    tile: GemmPlan
    stages: int  # K tiles in flight per block
    group_m: int  # tile rows per group of the tile order
    # Whether the kernel can split a tile's K loop over several blocks (split-K): where a batch
    # item has fewer tiles than GRID_MIN_TILES; elsewhere the kernel leaves that code out (its
    # registers would cost every tile).
    split_k: bool = False
    # Whether A and B come by TMA (sm_90): a producer warpgroup copies each K tile's swizzled
    # slabs (TmaOperand) while the tile's warpgroups multiply. grid_with_alignment decides, from
    # the arrays' alignment; the cp.async K loop (mainloop_range) runs elsewhere.
    tma: bool = False
    # The block GEMM of a whole batch item, whose batched kernel execute() runs in place of the
    # grid kernel on large batches (item_block_choice); None where the grid kernel always runs.
    # Not in the repr, which identifies the grid kernel's source in the kernel cache.
    item_block: GemmPlan | None = field(default=None, repr=False)

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def copies_between_steps(self) -> bool:
        """Whether the cp.async K loop (without wgmma in flight) issues each K tile's copies among
        the multiply's instructions, after the step of k before the last (mma.sync tiles:
        multiply_between), rather than after the multiply (FMA tiles). Issued before the multiply,
        they held every warp at the start of each K tile while the math pipe waited. On an H100
        against after the multiply: float64 4096^3 RCR 47.1-48.1 -> 50.0-50.7 TFLOP/s. FMA tiles
        measured +1-2% with them among their steps (float32 RCR, RCC), but the copies' code,
        inlined in both the vector and the scalar loop, took the float32 kernel's cold compile
        from 1.25 to 1.43 s, and ptxas spilled 676 bytes on two blocks an SM (RRR)."""
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
        per_block = self.kernel_shared_memory_size + TMA_STATIC_SHARED + BLOCK_RESERVED_SHARED
        accumulators = self.tile.accumulator_size * self.accumulator_bytes // 4
        fits = 2 * per_block <= shared_memory_limit(self.sm) + BLOCK_RESERVED_SHARED
        # ptxas compiles all of the kernel within its launch's registers (setmaxnreg adds none to the
        # code, it only keeps the producer's from the tile's), so those must hold the accumulators.
        return 2 if fits and self._launch_registers(2) >= accumulators + SPARE_REGISTERS else 1

    @property
    def fma_c_read_ahead(self) -> int:
        """Values of C an FMA tile's epilogue reads before it writes any (store_partial's
        ReadAhead): 8 where a block has the SM's registers to itself and B is column-major, else 1.
        On an H100, beta 0.5, float32, ms reading 1 -> 8 ahead, three alternating rounds (twentieth
        session, benchmarks/RESULTS.md): 512 MiB batches of 256x256x64 RCR 0.983 -> 0.441, 100x70x200 RCR
        1.164 -> 0.746, 4096^3 RCR 3.51 -> 3.38; but row-major B lost or held, 64x64x256 RRR 0.233 ->
        0.254, 128x128x128 RRR 0.356 -> 0.358, and two blocks an SM (RRR 4096^3, 128 registers)
        spilled more (40 -> 64 bytes; 3.52 -> 3.64)."""
        return 8 if self.blocks_per_sm == 1 and self.b.layout == "col_major" else 1

    @property
    def quads_c_read_ahead(self) -> bool:
        """Whether the 16-bit quads epilogue (store_tile_quads) reads C a group of instruction
        tiles ahead of its writes (c_read_group), or each quad just before it is written: the
        latter only in a cp.async kernel (no TMA) whose threads have 128 registers or fewer (the
        256x128 tile's 512 threads), where the group's reads spilled into the K loop (float16
        4096^3 RCR at 8-byte alignment: 334 bytes of spill stores; 44 a quad at a time). On an
        H100, three alternating rounds, ms, group ahead -> quad at a time there: float16 4096^3 RCR
        1.07x (beta 0) and 1.10x (beta 0.5), RRR 1.03x and 1.06x, 4000x3000x1000 1.15x and 1.10x;
        but where registers are plenty (cp.async kernels of 128 or 256 threads, 204-255 registers
        used), quad at a time -> group ahead at beta 0.5: 1.04-1.21x (SM(800) 4096^3 1.04x,
        256x256x64 x 64 1.21x; SM(900) at 8-byte alignment 1000^3 1.07x); twenty-second session,
        benchmarks/RESULTS.md."""
        return self.tma or self.launch_registers > 128

    @property
    def fma_pipelined(self) -> bool:
        """Whether the tile's vector FMA loop (float32 micro-tiles read 16 bytes at a time) loads
        the next four steps of k while it multiplies: where A is row-major (each load four steps
        of one row) and a block has the SM's registers to itself. On an H100 (three interleaved
        rounds, ratio to torch.matmul, median): float32 RCR 4096^3 0.785 -> 0.797x, 8192^3 0.777
        -> 0.807x, 1000x1000x4096 0.641 -> 0.719x, RCC 4096^3 0.749 -> 0.808x, gelu + bias 4096^3
        0.728 -> 0.797x; but CCC 4096^3 0.784 -> 0.765x, and on two blocks an SM (RRR, 128
        registers) the second buffer spilled (0.763 -> 0.742x). One block pipelined against two
        plain (fma_blocks_share_sm off for row-major A, two rounds, ``benchmarks/grid_ab.py``): RRR
        4096^3 0.762 -> 0.772x, 8192^3 0.764 -> 0.787x, RRC 0.758 -> 0.782x, but 4000x3000x1000
        0.754 -> 0.740x and 3001x2999x997 0.689 -> 0.664x: two blocks stay. The loop unrolls over
        the tile's k: tiles deeper than MAX_PIPELINED_FMA_K keep the plain loop (compile time)."""
        return (self.tile.fma_vector_loads and self.blocks_per_sm == 1 and self.a.layout == "row_major"
                and self.tile.k <= MAX_PIPELINED_FMA_K)

    @property
    def cluster(self) -> bool:
        """Whether the TMA kernel runs in clusters of two blocks on vertically neighbouring tiles,
        each block copying half of their shared B into both (TMA multicast): one block an SM, no
        split-K, two tile rows or more, and B's half on a 1024-byte boundary (half of each slab's
        rows where k is B's contiguous dimension, half of its slabs where n is)."""
        if not self.tma or self.split_k or self.blocks_per_sm > 1 or self.tiles_m < 2:
            return False
        b = self.tma_operand("b")
        return b.slab_rows // 2 * b.swizzle % 1024 == 0 if b.k_inner else b.slabs % 2 == 0

    def launch_grid(self, items: int, resident_blocks: int) -> int:
        """Blocks of a launch on ``items`` batch items without split-K: one per tile (per pair of
        tiles and two of them, in clusters), at most as many as the GPU runs at once."""
        if self.cluster:
            pairs = items * -(-self.tiles_m // 2) * self.tiles_n
            return 2 * min(pairs, resident_blocks // 2)
        return min(items * self.tiles, resident_blocks)

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
        gives back, where the compiled kernel starts with ``launch_registers`` per thread."""
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
        """Whether the grid kernel's epilogue stages C through shared memory (free after the K loop)
        before it writes it (store_block_tile_staged): FMA tiles whose epilogue has hooks or a bias
        (``epilogue_hooks``; one copy of them in a loop, not one per value: half the compile time of
        a fused float32 kernel), or whose C is column-major or complex (a warp then writes runs of
        C, not scattered values), where the tile fits. Measured on an H100 against writing from
        registers, float32 4096^3: fused gelu + bias 1.09x, column-major C 1.13x, complex (2048^3)
        1.05x; but plain row-major C 0.94x, so that keeps writing from registers."""
        if self.tile.instruction.is_mma or not (epilogue_hooks or self.is_complex or self.c.layout == "col_major"):
            return False
        t = self.tile
        outer, inner = (t.m, t.n) if self.c.layout == "row_major" else (t.n, t.m)
        return outer * (inner + STAGED_C_PADDING) * self.accumulator_bytes <= self.kernel_shared_memory_size

    def splits(self, tiles: int, resident_blocks: int) -> int:
        """How many parts each tile's K loop splits into (split-K) where ``tiles`` (of every batch
        item) are fewer than the blocks the GPU runs at once: enough to fill them, each part at
        least MIN_SPLIT_K_TILES K tiles deep, at most MAX_SPLITS; 1 otherwise."""
        if not self.split_k or tiles >= resident_blocks:
            return 1
        return max(1, min(-(-resident_blocks // tiles), self.k_tiles // MIN_SPLIT_K_TILES, MAX_SPLITS))

    def workspace_bytes(self, tiles: int, splits: int) -> int:
        """split-K's workspace: a counter per tile (256-byte aligned), then each tile's parts (every
        thread's accumulator)."""
        part = self.tile.accumulator_size * self.tile.threads * self.accumulator_bytes
        return -(-4 * tiles // 256) * 256 + tiles * splits * part

    @property
    def kernel_shared_memory_size(self) -> int:
        return self.stages * self.tile.shared_memory_size

    @property
    def digest(self) -> str:
        fields = asdict(self)
        del fields["item_block"]  # another kernel's plan: nothing of it is in this one's code
        del fields["tile"]["instruction_reason"]  # explain()'s words
        return digest_of(fields)

    @property
    def kernel_name(self) -> str:
        t = self.tile
        return f"{name_stem('grid', self)}_tile{t.m}x{t.n}x{t.k}_s{self.stages}_t{self.threads}_{self.digest}"


def suggested_stages(stage_bytes: int, k_tiles: int, sm: int, blocks_per_sm: int = 1) -> int:
    """MAX_SUGGESTED_STAGES, fewer where the K loop is shorter or the shared memory of each of
    ``blocks_per_sm`` blocks smaller; at least 2."""
    per_block = (shared_memory_limit(sm) + BLOCK_RESERVED_SHARED) // blocks_per_sm - BLOCK_RESERVED_SHARED
    return max(2, min(MAX_SUGGESTED_STAGES, k_tiles, per_block // stage_bytes))


def fma_blocks_share_sm(tile: GemmPlan, b_layout: str, is_complex: bool, tiles: int) -> bool:
    """Whether the cp.async grid kernel of an FMA tile of float32 values (real or complex) asks
    for two blocks an SM (its launch bounds halve the registers; ptxas spills a little): on SM 900
    (where it was measured), where B is row-major or the values complex, and C has a tile for each
    of an H100's 132 SMs at least (2 * GRID_MIN_TILES; split-K's problems have fewer).
    benchmarks/ablate_grid_blocks.py, H100, ratio to torch.matmul with one block / two blocks of
    three stages: float32 RRR 4096^3 0.70 / 0.76, 8192^3 0.71 / 0.77, 2048^3 0.70 / 0.76,
    4000x3000x1000 0.68 / 0.75, 3001x2999x997 0.63 / 0.69, CRR 0.75 / 0.77, RRC 0.78 / 0.79, CRC
    0.78 / 0.84; complex 2048^3 RRR 0.49 / 0.54, CCC 0.48 / 0.54, RCR 0.40 / 0.44. Column-major B
    loses (RCR 0.79 / 0.70, CCC 0.75 / 0.73), and so do fewer tiles (1000x1000x4096 RRR, 128
    tiles of 64x128: 0.61 / 0.54)."""
    float32 = all(x.precision == "float32" for x in (tile.a, tile.b, tile.c))
    return (tuning_of(tile.sm).fma_grid_two_blocks and not tile.instruction.is_mma and float32 and tiles >= 2 * GRID_MIN_TILES
            and (is_complex or b_layout == "row_major"))


def make_grid_plan(desc: Descriptor) -> GridPlan:
    """The grid kernel's plan of an executable Grid() descriptor."""
    tile_desc = desc.tile_descriptor
    block = make_plan(tile_desc, long_k_loop=True)
    limit = shared_memory_limit(desc.sm)
    mats, stage_bytes = shared_layout(block, True, True)
    if 2 * stage_bytes > limit:  # unpadded, where padding costs the second stage
        mats, stage_bytes = shared_layout(block, False, True)
    tile = replace(block, a=mats["a"], b=mats["b"], c=mats["c"], shared_memory_size=stage_bytes, pipeline_stages=1)
    k_tiles = -(-desc.size.k // block.k)
    given = desc.operator_map.get("Stages")
    stages = given.value if given is not None else suggested_stages(stage_bytes, k_tiles, desc.sm)  # type: ignore[attr-defined]
    if stages * stage_bytes > limit:
        fitting = limit // stage_bytes
        fix = f"use Stages({fitting})" if fitting >= 2 else "use a smaller Tile"
        raise UnsupportedError(
            f"{stages} stages of the {block.m}x{block.n}x{block.k} tile take {stages} x {stage_bytes} bytes of shared "
            f"memory, over SM {desc.sm}'s limit of {limit} bytes per block; {fix}")
    problem = {x: matrix_plan(desc, x, 0, 0) for x in "abc"}
    tiles = -(-desc.size.m // block.m) * -(-desc.size.n // block.n)
    if tiles >= 2**31:  # far past any GPU's memory for C, but said rather than overflowed
        raise UnsupportedError(
            f"C of {desc.size.m} x {desc.size.n} has {tiles} tiles of {block.m}x{block.n}, 2**31 or more (the "
            f"kernel counts tiles in an int); split the problem, or use a larger Tile")
    split_k = tiles < GRID_MIN_TILES and k_tiles >= 2 * MIN_SPLIT_K_TILES
    if given is None and fma_blocks_share_sm(tile, problem["b"].layout, desc.is_complex, tiles):
        stages = min(MAX_SUGGESTED_STAGES_TWO_BLOCKS, suggested_stages(stage_bytes, k_tiles, desc.sm, blocks_per_sm=2))
    return GridPlan(sm=desc.sm, m=desc.size.m, n=desc.size.n, k=desc.size.k, is_complex=desc.is_complex,
                    a=problem["a"], b=problem["b"], c=problem["c"], tile=tile, stages=stages, group_m=GROUP_M,
                    split_k=split_k, item_block=item_block_choice(desc)[0])


def item_block_choice(desc: Descriptor) -> tuple[GemmPlan | None, str]:
    """The block GEMM of one batch item of a Grid() descriptor (Size(m, n, k) + Block() with its
    other operators), whose batched kernel execute() runs on batches of at least as many items as
    the GPU runs blocks of it at once (GridPlan.item_block); None where the grid kernel runs
    whatever the batch. With why, as explain() says it."""
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
    if mats["a"] == tile.a and mats["b"] == tile.b and tma == plan.tma:
        return plan
    return replace(plan, tile=replace(tile, a=mats["a"], b=mats["b"]), tma=tma)


def tma_runs(plan: GridPlan, a_alignment: int, b_alignment: int) -> bool:
    """Whether the grid kernel copies A and B by TMA: on sm_90+, where the tile is wgmma's
    (A and B in swizzled slabs) and both arrays start, and step between rows and batch items,
    on multiples of 16 bytes (``*_alignment`` says so of the pointer, the batch stride and the
    leading dimension), as the tensor maps need."""
    whole = (plan.a, plan.b)
    return (plan.sm >= TMA_MIN_SM and plan.tile.a.swizzle > 0 and plan.tile.b.swizzle > 0 and a_alignment >= 16
            and b_alignment >= 16 and all(x.ld * x.element_size % 16 == 0 and x.ld * x.element_size < 2**40 for x in whole))
