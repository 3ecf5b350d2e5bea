"""From a complete descriptor to a GemmPlan: every decision the block GEMM needs.

The plan is a frozen value: the instruction, the C++ types, the warp tiling (tensor
cores) or thread micro-tiles (FMA), the copy vector widths and the shared-memory layout.
Rendering only prints it; :mod:`.explain` reports it in words; :mod:`.kernel` derives the
batched kernel's plan from it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, astuple, dataclass, fields, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..arch import (
    CP_ASYNC_MIN_SM,
    MAX_REGISTERS_PER_THREAD,
    PROMOTION_K,
    REGISTERS_PER_SM,
    WGMMA_MAX_PROMOTED_REGS,
    Instruction,
)
from ..describe.operands import arrangement_of, k_major, promotes_of, takes_float_micro_tiles
from ..describe.precision import PRECISIONS, short_code
from ..describe.traits import shared_memory_parts_of
from ..errors import ArgumentError
from ..tuning import tuning_of
from .overrides import NO_OVERRIDES, PlanOverrides

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor

PlanType = TypeVar("PlanType", bound="GemmPlan")

# Accumulator registers one warp may hold for its output tile.
MAX_WARP_ACCUMULATOR_REGS = 64
# ... and a float64 Grid() tile's whose fragments are pipelined: a warp's 64 x 32 (128 registers).
PIPELINED_WARP_ACCUMULATOR_REGS = 128


@dataclass(frozen=True)
class MatrixPlan:
    """How one matrix is stored and copied: ``outer`` runs of ``inner`` elements ``ld`` apart."""

    name: str  # "a", "b" or "c"
    precision: str
    cpp_type: str  # storage element type
    layout: str  # "row_major" or "col_major"
    rows: int  # stored elements: k counts packed elements (k / pack) for int4 and binary
    cols: int
    ld: int  # in global memory, in stored elements (the LeadingDimension, / pack)
    smem_ld: int  # in shared memory: ld, or padded against bank conflicts in the batched kernel
    outer: int
    inner: int
    element_size: int
    alignment: int  # of the pointers the copies see (global memory; shared memory in a user's kernel)
    vector_bytes: int  # bytes moved per copy instruction between global and shared
    # Of the shared-memory copy: `alignment` in a user's kernel, 16 in blasdx's own kernels (their
    # shared memory is theirs to place), where copies may then store 16 bytes at a time.
    shared_alignment: int
    smem_offset: int
    smem_bytes: int
    conjugate: bool
    pack: int  # values per stored element: 1, 2 (int4, uint4) or 32 (binary)
    # wgmma: A and B in shared memory in the swizzled layout with rows of this many bytes
    # (blasdx.arch.SWIZZLE_WIDTHS; smem_ld unused), 0 for the plain layout at smem_ld.
    swizzle: int = 0

    @property
    def shifted_copies(self) -> bool:
        """Whether copies that would move 1 or 2 bytes at a time, synchronously (rows off the
        vectors' boundaries), move 16-byte pieces cut from aligned loads instead
        (copy_runs_shifted). They store whole 16-byte pieces, so shared memory must take them."""
        return (self.pack == 1 and self.element_size < 4 and self.inner * self.element_size % 16 == 0
                and self.shared_alignment >= 16 and self.smem_offset % 16 == 0
                and (self.swizzle > 0 or self.smem_ld * self.element_size % 16 == 0))

    @property
    def wide_copies_shifted(self) -> bool:
        """Whether even the copies the plan's alignment allows are shifted ones (vector_bytes
        under 4: rows of 1- or 2-byte elements off 4-byte boundaries)."""
        return self.shifted_copies and self.vector_bytes < 4


@dataclass(frozen=True)
class GemmPlan:
    """The block GEMM of a Block() descriptor, as device_source() prints it: everything decided once from the
    descriptor. Its kinds add their own fields: the batched kernel's (BatchedGemmPlan), a Grid() tile's (TilePlan)."""

    execution: ClassVar[str] = "block"  # its kind: blasdx.kinds.block

    sm: int
    m: int
    n: int
    k: int
    is_complex: bool
    a: MatrixPlan
    b: MatrixPlan
    c: MatrixPlan
    instruction: Instruction
    instruction_reason: str
    acc_type: str  # accumulator of the FMA path and of the epilogue
    scalar_type: str  # alpha and beta
    scalar_precision: str  # precision name of alpha/beta's real part
    mma_acc_type: str  # accumulator of the mma instruction ("" on FMA)
    block_dim: tuple[int, int, int]
    threads: int
    warps: int
    tile_m: int  # output tile per warp pass (mma) or per thread (FMA)
    tile_n: int
    tiles_m: int
    tiles_n: int
    # FMA: a micro-tile's rows come in groups of group_m rows m / (tile_m / group_m) apart,
    # its columns likewise (group_m = tile_m: one block of rows). Equal to the tile on mma.
    group_m: int
    group_n: int
    shared_memory_size: int  # of A, B and C as this GEMM lays them out (the descriptor's trait, or a kernel's stage)
    use_cp_async: bool
    bit_op: str  # "xor" or "and" for binary GEMMs, else ""
    # FMA: threads t and t^1 take the same rows, t and t^2 the same columns (see the template).
    fma_thread_pairs: bool = False
    overrides: PlanOverrides = NO_OVERRIDES
    # The k after which the tensor cores' partial sums go into the float32 accumulators (wgmma's
    # FP8, whose own sum keeps about 14 bits: arch.PROMOTION_K); 0 where their sum runs the whole K
    # loop (every other instruction, and Accumulation('fast')).
    promote_k: int = 0
    # Whose threads run the GEMM: "block" (the block's first `threads`, its barrier __syncthreads) or
    # "warp" (each warp of the block its own GEMM, by lane, its barrier __syncwarp).
    scope: ClassVar[str] = "block"

    @property
    def item_block(self) -> None:
        """A Grid() descriptor's batched alternative (GridPlan.item_block); a block GEMM is its own."""
        return None

    def for_batch(self, batch: int | None) -> GemmPlan:
        """The plan a call on ``batch`` items runs (GridPlan.for_batch): a block GEMM's, whatever the batch."""
        return self

    # The batched kernel's choices (BatchedGemmPlan's fields) and a Grid() tile's (TilePlan's), off elsewhere.
    @property
    def c_in_registers(self) -> bool:
        return False

    @property
    def c_staged_16_bytes(self) -> bool:
        return False

    @property
    def pipelined_fragments(self) -> bool:
        return False

    @property
    def partial_sum_values(self) -> int:
        """Values a thread holds beside its accumulator while it promotes partial sums (promote_k): a
        warpgroup tile's (64 x tile_n over 128 threads), two where the TMA K loop takes K tiles in pairs."""
        if not self.promote_k:
            return 0
        return self.tile_n // 2 * (2 if self.promotes_in_pairs else 1)

    def gated(self, split: bool = False) -> GemmPlan:
        """No gated epilogue here (DescriptorPlan.gated): the block GEMM's tiles are C's whole width."""
        raise ArgumentError(f"a gated epilogue (SwiGLU, GeGLU) runs on Grid() and Grouped() descriptors; this one is "
                            f"{self.execution.capitalize()}(): use descriptor.replace(Grid()), or apply the gate after "
                            f"the GEMM")

    def scales_refusal(self, scale_a: str, scale_b: str, load_hooks: bool) -> str:
        """Why the batched kernel cannot take FP8 scales of these recipes on the device ("" where it can;
        blasdx.runtime.scales names them). Scales that do not vary along k multiply the products; blockwise ones
        each K block's products (multiply_scaled): the whole GEMM is one K block, or FP8 wgmma promotes every
        PROMOTION_K of k; B's blocks need one column block (n <= PROMOTION_K); load hooks take no scales there."""
        if self.execution != "block":
            return (f"scale_a= and scale_b= on the device are taken by Block() and Grid() descriptors "
                    f"({self.execution.capitalize()}() ones take scales as numbers only); describe the GEMM with "
                    f"Block() (descriptor.replace(Block())) or pass the scales as numbers")
        if "block" not in (scale_a, scale_b):
            return ""
        if self.k > PROMOTION_K and not self.promote_k:
            why = ("Accumulation('fast') keeps wgmma's own sum" if self.instruction.narrow_accumulation else
                   f"{self.instruction.name} does not promote its partial sums")
            return (f"blockwise scales multiply the products of each {PROMOTION_K} of k, but this GEMM's k is "
                    f"{self.k} and {why}; use FP8 wgmma with Accumulation('accurate') (SM 900: explain() lists "
                    f"its conditions), a k of at most {PROMOTION_K}, or Grid()")
        if load_hooks:
            return ("blockwise scales multiply the partial sums as they are promoted, which load hooks (a_load, b_load, "
                    "prologue) do not take; apply the hooks to the data first")
        if scale_b == "block" and self.n > PROMOTION_K:
            return (f"B's blockwise scales on Block(): one column block of B ({PROMOTION_K} columns) a GEMM, but n is "
                    f"{self.n}; split the GEMM into descriptors of n <= {PROMOTION_K}, or use Grid() "
                    f"(descriptor.replace(Grid()))")
        return ""

    @property
    def promotes_one_tile(self) -> bool:
        """Whether the TMA K loop promotes the partial sums of each warpgroup's one tile itself, K tile by K tile
        (consume_range_promoted): partial sums promoted, every warpgroup one tile (a pass), a K tile at most
        promote_k deep."""
        return (bool(self.promote_k) and self.k <= self.promote_k and self.accumulator_size == self.tile_n // 2
                and self.tiles == self.threads // 128)

    @property
    def promotes_in_pairs(self) -> bool:
        """Whether that loop (promotes_one_tile) multiplies K tiles in pairs, into two tiles of partial sums in turn:
        where the accumulators and two tiles of partial sums fit WGMMA_MAX_PROMOTED_REGS (else one at a time)."""
        return self.promotes_one_tile and self.accumulator_size + self.tile_n <= WGMMA_MAX_PROMOTED_REGS

    @cached_property
    def _hash(self) -> int:
        return hash(astuple(self))

    def __hash__(self) -> int:  # computed once: plans key the per-call launch caches
        return self._hash

    @property
    def kernel_shared_memory_size(self) -> int:
        """Dynamic shared memory of the batched kernel: one block GEMM (an item at a time a block)."""
        return self.shared_memory_size

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def accumulator_size(self) -> int:
        """Values each thread's ``accumulator`` holds (the device API's accumulator::size): its
        passes over the tiles its warpgroup, warp or thread takes, times a tile's values."""
        instr = self.instruction
        if instr.is_wgmma and instr.fallback is not None:  # a warpgroup's 64 x tile_n in mma.sync fragments
            tile_threads, values = 128, self.tile_n // instr.fallback.n * instr.fallback.c_values
        elif instr.is_mma:
            tile_threads, values = 32, self.tile_m // instr.m * (self.tile_n // instr.n) * instr.c_values
        else:
            tile_threads, values = 1, self.tile_m * self.tile_n
        workers = self.warps * 32 if instr.is_mma else self.threads
        return math.ceil(self.tiles / (workers // tile_threads)) * values

    @property
    def digest(self) -> str:
        """8 hex digits over every field that makes the kernel (the overrides only where any is set;
        not instruction_reason, explain()'s words)."""
        fields = asdict(self)
        if self.overrides.is_default:
            del fields["overrides"]
        del fields["instruction_reason"]
        return digest_of(fields)

    @cached_property
    def fma_vector_loads(self) -> bool:
        """float FMA: micro-tiles with sides of 4 or 8 read 16 bytes at a time where the
        layout allows (shared-memory leading dimensions multiples of 4)."""
        # A column-major A (row-major B) is read 16 bytes along m (n): four rows (columns) of a group.
        return (not self.instruction.is_mma and not self.is_complex and self.acc_type == "float"
                and self.a.cpp_type == self.b.cpp_type == "float"
                and self.tile_m % 4 == 0 and self.tile_n % 4 == 0
                and (self.a.layout == "row_major" or self.group_m % 4 == 0)
                and (self.b.layout == "col_major" or self.group_n % 4 == 0)
                and self.a.smem_ld % 4 == 0 and self.b.smem_ld % 4 == 0)

    @cached_property
    def k_loop_unroll(self) -> str:
        """mma.sync: how a warp tile's K loop unrolls. "all" where it is at most 16 instruction steps of k and two
        steps' fragments fit in a thread's registers beside its accumulators and ~32 other values; "none" where they
        do not (unrolled, they spilled: benchmarks/RESULTS.md, Grid against cuBLAS); else "" (the compiler's choice)."""
        instr = self.instruction
        k_steps = -(-self.k // instr.k)
        if self.pipelined_fragments:
            return "all"  # two steps' fragments live by design (make_plan sized the warp tile for them)
        if not instr.is_mma or instr.is_wgmma or k_steps > 16:
            return ""
        pm, pn = self.tile_m // instr.m, self.tile_n // instr.n
        words = 2 if instr.fragment_type == "double" else 1  # 32-bit registers a value takes
        accumulators = pm * pn * instr.c_values * (2 if self.mma_acc_type == "double" else 1)
        fragments = (pm * instr.a_regs + pn * instr.b_regs) * words
        budget = min(MAX_REGISTERS_PER_THREAD, REGISTERS_PER_SM // self.threads) - 32
        return "all" if accumulators + min(k_steps, 2) * fragments <= budget else "none"

    @cached_property
    def c_vector(self) -> bool:
        """FMA with C in registers: C's micro-tiles move 16 bytes at a time."""
        along = self.group_n if self.c.layout == "row_major" else self.group_m  # C's 16 bytes: 4 of a group
        return self.fma_vector_loads and self.c.cpp_type == "float" and self.c.vector_bytes == 16 and along % 4 == 0

    @property
    def copies_a_step_earlier_before_nvrtc13(self) -> bool:
        """Whether the Grid() K loop's copies of a later K tile (multiply_tile's between_k0) go a
        step earlier where NVRTC is older than 13: pipelined fragments with A or B copied in pieces
        under 16 bytes (16 cp.async a thread and operand, not 8), where ptxas 12.9 spilled 16 bytes
        into the K loop before the last step and ran slower there; ptxas 13 spills at neither and
        runs that step faster (the template gives the figures)."""
        return self.pipelined_fragments and min(self.a.vector_bytes, self.b.vector_bytes) < 16

    @property
    def kernel_name(self) -> str:
        return f"{name_stem('gemm', self)}_t{self.threads}_{self.digest}"


def plan_as(cls: type[PlanType], plan: GemmPlan, **changes: Any) -> PlanType:
    """``plan``'s fields, with ``changes``, as a ``cls`` (a GemmPlan of another kind or role)."""
    return cls(**{f.name: getattr(plan, f.name) for f in fields(plan)} | changes)


@dataclass(frozen=True)
class TilePlan(GemmPlan):
    """A Grid() descriptor's tile: the block GEMM multiplied over a whole problem's K tiles."""

    def __hash__(self) -> int:  # GemmPlan's, computed once (a frozen dataclass would make its own each call)
        return self._hash

    # float64 mma tiles with A and B K-major: the K loop, unrolled, loads the next step's fragments
    # into a second set of registers while the current step multiplies (see make_plan).
    pipelined_fragments: bool = False  # type: ignore[misc]  # the base's property, a field here


def digest_of(fields: dict[str, Any]) -> str:
    """8 hex digits of a plan's fields: the end of its kernel's name."""
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:8]


def name_stem(kind: str, plan: GemmPlan | Any) -> str:
    """The readable start of a kernel's name (grep-able, as CUTLASS's):
    blasdx_<kind>_sm<SM>_<c for complex><precisions>_<m>x<n>x<k>_<arrangement>."""
    codes = "".join(short_code(getattr(plan, x).precision) for x in "abc")
    arr = "".join(getattr(plan, x).layout[0] for x in "abc")
    return f"blasdx_{kind}_sm{plan.sm}_{'c' if plan.is_complex else ''}{codes}_{plan.m}x{plan.n}x{plan.k}_{arr}"


def _accumulator(precisions: dict[str, str]) -> tuple[str, str]:
    """C++ accumulator type and the precision name of alpha/beta for FMA and epilogue."""
    infos = [PRECISIONS[p] for p in precisions.values()]
    c = PRECISIONS[precisions["c"]]
    if c.is_float:
        if any(p.name == "float64" for p in infos):
            return "double", "float64"
        return "float", "float32"
    return c.cpp_type, c.name


def vector_bytes_of(alignment: int, inner_bytes: int, ld_bytes: int) -> int:
    vec = min(alignment, 16)
    while inner_bytes % vec or ld_bytes % vec:
        vec //= 2
    return vec


def matrix_plan(desc: Descriptor, name: str, offset: int, smem_bytes: int) -> MatrixPlan:
    m, n, k = desc.size
    precision = getattr(desc.precision, name)
    pack = PRECISIONS[precision].pack  # packed along k (A row-major, B col-major: checked)
    rows, cols = {"a": (m, k // pack), "b": (k // pack, n), "c": (m, n)}[name]
    layout = getattr(desc.arrangement, name)
    outer, inner = (cols, rows) if layout == "col_major" else (rows, cols)
    cpp = PRECISIONS[precision].cpp_type
    esize = getattr(desc.element_size, name)
    ld = getattr(desc.leading_dimension, name) // pack
    align = getattr(desc.alignment, name)
    conj = {"a": desc.conjugate[0], "b": desc.conjugate[1], "c": False}[name]
    return MatrixPlan(
        name=name, precision=precision,
        cpp_type=f"blasdx::complex<{cpp}>" if desc.is_complex else cpp,
        layout=layout, rows=rows, cols=cols, ld=ld, smem_ld=ld, outer=outer, inner=inner,
        element_size=esize, alignment=align, shared_alignment=align,
        vector_bytes=vector_bytes_of(align, inner * esize, ld * esize),
        smem_offset=offset, smem_bytes=smem_bytes, conjugate=conj and desc.is_complex, pack=pack,
    )


def _warp_tile(instr: Instruction, m: int, n: int, warps: int, acc_regs: int,
               budget: int = MAX_WARP_ACCUMULATOR_REGS) -> tuple[int, int]:
    """Instruction tiles (pm, pn) one warp computes per pass.

    Cost model: passes per warp x (pm*pn mma + pm + pn fragment loads); the cheapest
    tile within the accumulator register budget wins, larger tiles on ties.
    """
    tm, tn = math.ceil(m / instr.m), math.ceil(n / instr.n)
    best: tuple[float, int, int] | None = None
    choice = (1, 1)
    for pm in range(1, min(tm, 8) + 1):
        for pn in range(1, min(tn, 8) + 1):
            if pm * pn * acc_regs > budget:
                continue
            passes = math.ceil(math.ceil(tm / pm) * math.ceil(tn / pn) / warps)
            cost = passes * (pm * pn + pm + pn)
            key = (cost, -pm * pn, pm)
            if best is None or key < best:
                best = key
                choice = (pm, pn)
    return choice


def make_plan(desc: Descriptor, overrides: PlanOverrides = NO_OVERRIDES, long_k_loop: bool = False) -> GemmPlan:
    """The block GEMM's plan for an executable descriptor (``overrides`` fixes choices);
    ``long_k_loop``: the GEMM is a Grid() tile, multiplied over a whole problem's K tiles."""
    m, n, k = desc.size

    smem = shared_memory_parts_of(desc.operator_map)
    offsets = {"a": 0, "b": smem["a"], "c": smem["a"] + smem["b"]}
    mats = {x: matrix_plan(desc, x, offsets[x], smem[x]) for x in "abc"}
    instr, reason = desc.instruction_choice
    acc, scalar_precision = _accumulator(dict(zip("abc", desc.precision)))
    if desc.is_complex:
        scalar = f"blasdx::complex<{acc}>"
    else:
        scalar = acc
    bx, by, bz = desc.block_dim
    threads = bx * by * bz
    warps = threads // 32
    pipelined = False
    if instr.is_wgmma:
        choice = desc.wgmma_choice
        assert choice is not None and choice.holds  # the descriptor chose wgmma on them
        mats["a"] = replace(mats["a"], swizzle=choice.a_swizzle)
        mats["b"] = replace(mats["b"], swizzle=choice.b_swizzle)
        tile_m, tile_n = instr.m, choice.tile_n
        group_m, group_n = tile_m, tile_n
    elif instr.is_mma:
        acc_regs = instr.c_values * (2 if instr.accumulator == "double" else 1)  # 32-bit registers per tile
        # float64 Grid() tiles on SM 900 (where it was measured) with A and B K-major, where each warp
        # can take 64 x 32 of the tile.
        pipelined = (long_k_loop and tuning_of(desc.sm).pipelined_float64_fragments and instr.accumulator == "double" and m * n >= warps * 64 * 32
                     and k_major(arrangement_of(desc.operator_map)))
        budget = PIPELINED_WARP_ACCUMULATOR_REGS if pipelined else MAX_WARP_ACCUMULATOR_REGS
        pm, pn = _warp_tile(instr, m, n, warps, acc_regs, budget)
        tile_m, tile_n = pm * instr.m, pn * instr.n
        group_m, group_n = tile_m, tile_n
    else:
        tile_m, tile_n, group_m, group_n = overrides.fma_micro_tile or _fma_micro_tile(desc, acc, threads, long_k_loop)
    tiles_m, tiles_n = math.ceil(m / tile_m), math.ceil(n / tile_n)
    # FMA micro-tiles in pairs of threads sharing rows and columns, where the tile counts are even.
    pairs = not instr.is_mma and tiles_m % 2 == 0 and tiles_n % 2 == 0
    if overrides.fma_thread_pairs is not None:
        pairs = pairs and overrides.fma_thread_pairs
    promote_k = PROMOTION_K if promotes_of(desc.operator_map, instr.narrow_accumulation) else 0  # FP8 wgmma alone
    plan = GemmPlan(
        sm=desc.sm, m=m, n=n, k=k, is_complex=desc.is_complex,
        a=mats["a"], b=mats["b"], c=mats["c"],
        instruction=instr, instruction_reason=reason,
        acc_type=acc, scalar_type=scalar, scalar_precision=scalar_precision,
        mma_acc_type=instr.accumulator, block_dim=(bx, by, bz), threads=threads, warps=warps,
        tile_m=tile_m, tile_n=tile_n, tiles_m=tiles_m, tiles_n=tiles_n, group_m=group_m, group_n=group_n,
        shared_memory_size=sum(smem.values()),
        use_cp_async=desc.sm >= CP_ASYNC_MIN_SM,
        bit_op=desc.bit_op or "", fma_thread_pairs=pairs, overrides=overrides, promote_k=promote_k,
    )
    return plan_as(TilePlan, plan, pipelined_fragments=pipelined) if long_k_loop else plan


def make_tile_plan(desc: Descriptor) -> TilePlan:
    """The plan of a Grid() descriptor's tile (``desc``, its tile_descriptor): a block GEMM over a whole K loop."""
    plan = make_plan(desc, long_k_loop=True)
    assert isinstance(plan, TilePlan)
    return plan


def _fma_micro_tile(desc: Descriptor, acc: str, threads: int, long_k_loop: bool) -> tuple[int, int, int, int]:
    """(tile_m, tile_n, group_m, group_n) of the FMA path: 2x2 for complex and 64-bit
    accumulators; where ``takes_float_micro_tiles`` (float32 A and B; m, n multiples of 8, 4),
    8x8 in a long K loop (a Grid() tile) where each thread has 64 outputs or more (n a multiple
    of 8), 8x4 where it has 32 or more; 4x4 for the rest (never larger than m x n). The batched
    kernel's GEMMs, one K tile each, stay at 8x4, which moved their bytes faster than 8x8.

    A float micro-tile's rows come in groups of four, m / 2 apart (whole 8-row blocks would put
    the two rows of a warp's A load in the same banks), and so do its columns, except where A
    is row-major and B column-major: each of a warp's B loads then reads k along 16 columns,
    which fall in different banks only as neighbours, so the columns lie n / tile_n apart
    (group_n 1). 8x4 moves 12 16-byte shared-memory loads per 128 FMA where 4x4 moves 8 per
    64, 8x8 16 per 256; for Grid() tiles 8x8 with group_n 1 ran fastest (benchmarks/RESULTS.md,
    Grid against cuBLAS)."""
    m, n, _ = desc.size
    if desc.is_complex or acc in ("double", "long long", "unsigned long long"):
        tile_m, tile_n = min(2, m), min(2, n)
        return tile_m, tile_n, tile_m, tile_n
    precision = dict(zip("abc", desc.precision))
    if takes_float_micro_tiles(precision, desc.is_complex, m, n) and m * n >= 32 * threads:
        tile_n = 8 if long_k_loop and n % 8 == 0 and m * n >= 64 * threads else 4
        return 8, tile_n, 4, 1 if k_major(arrangement_of(desc.operator_map)) else 4
    tile_m, tile_n = min(4, m), min(4, n)
    return tile_m, tile_n, tile_m, tile_n



@lru_cache(maxsize=1024)
def with_alignment(plan: GemmPlan, alignment: tuple[int, int, int]) -> GemmPlan:
    """The plan with each matrix's alignment raised to what the actual data guarantees
    (never lowered): wider global<->shared copies for the same GEMM, in a kernel of blasdx's
    own (its shared memory 16-byte aligned)."""
    mats = {}
    for x, align in zip((plan.a, plan.b, plan.c), alignment):
        align = max(x.alignment, min(16, align))
        vec = vector_bytes_of(align, x.inner * x.element_size, x.ld * x.element_size)
        mats[x.name] = replace(x, alignment=align, vector_bytes=vec, shared_alignment=16)
    if all(mats[x.name] == x for x in (plan.a, plan.b, plan.c)):
        return plan
    return replace(plan, a=mats["a"], b=mats["b"], c=mats["c"])
