"""From a complete descriptor to a GemmPlan: every decision the kernel needs.

The plan is a frozen value: the instruction, the C++ types, the warp tiling (tensor
cores) or thread micro-tiles (FMA), the copy vector widths and the shared-memory layout.
Rendering only prints it; ``explain`` reports it in words.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, astuple, dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from .descriptor import (
    padded_leading_dimension,
    padding_unit_of,
    shared_memory_parts_of,
    takes_float_micro_tiles,
)
from .instructions import Instruction
from .precision import PRECISIONS, short_code
from .rules import SHARED_MEMORY_LIMIT_KIB

if TYPE_CHECKING:
    from .descriptor import Descriptor

# Accumulator registers one warp may hold for its output tile.
MAX_WARP_ACCUMULATOR_REGS = 64


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
    alignment: int
    vector_bytes: int  # bytes moved per copy instruction between global and shared
    smem_offset: int
    smem_bytes: int
    conjugate: bool
    pack: int  # values per stored element: 1, 2 (int4, uint4) or 32 (binary)


@dataclass(frozen=True)
class GemmPlan:
    """Everything the templates print, decided once from a descriptor."""

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
    shared_memory_size: int  # of one block GEMM (the descriptor's trait)
    use_cp_async: bool
    pipeline_stages: int  # items in flight per block in the batched kernel (1 or 2)
    bit_op: str  # "xor" or "and" for binary GEMMs, else ""
    # The batched kernel's FMA path keeps C in registers, between global memory and the
    # products, not in shared memory (see kernel_plan). False for the device function.
    c_in_registers: bool = False

    @cached_property
    def _hash(self) -> int:
        return hash(astuple(self))

    def __hash__(self) -> int:  # computed once: plans key the per-call launch caches
        return self._hash

    @property
    def kernel_shared_memory_size(self) -> int:
        """Dynamic shared memory of the batched kernel: one block GEMM per stage."""
        return self.pipeline_stages * self.shared_memory_size

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def digest(self) -> str:
        return hashlib.sha256(repr(asdict(self)).encode()).hexdigest()[:8]

    @property
    def kernel_name(self) -> str:
        codes = "".join(short_code(getattr(self, x).precision) for x in "abc")
        arr = "".join(getattr(self, x).layout[0] for x in "abc")
        kind = "c" if self.is_complex else ""
        return (f"blasdx_gemm_sm{self.sm}_{kind}{codes}_{self.m}x{self.n}x{self.k}_{arr}"
                f"_t{self.threads}_{self.digest}")


def _accumulator(precisions: dict[str, str]) -> tuple[str, str]:
    """C++ accumulator type and the precision name of alpha/beta for FMA and epilogue."""
    infos = [PRECISIONS[p] for p in precisions.values()]
    c = PRECISIONS[precisions["c"]]
    if c.is_float:
        if any(p.name == "float64" for p in infos):
            return "double", "float64"
        return "float", "float32"
    return c.cpp_type, c.name


def _vector_bytes(alignment: int, inner_bytes: int, ld_bytes: int) -> int:
    vec = min(alignment, 16)
    while inner_bytes % vec or ld_bytes % vec:
        vec //= 2
    return vec


def _matrix(desc: Descriptor, name: str, offset: int, smem_bytes: int) -> MatrixPlan:
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
        element_size=esize, alignment=align,
        vector_bytes=_vector_bytes(align, inner * esize, ld * esize),
        smem_offset=offset, smem_bytes=smem_bytes, conjugate=conj and desc.is_complex, pack=pack,
    )


def _warp_tile(instr: Instruction, m: int, n: int, warps: int, acc_regs: int) -> tuple[int, int]:
    """Instruction tiles (pm, pn) one warp computes per pass.

    Cost model: passes per warp x (pm*pn mma + pm + pn fragment loads); the cheapest
    tile within the accumulator register budget wins, larger tiles on ties.
    """
    tm, tn = math.ceil(m / instr.m), math.ceil(n / instr.n)
    best: tuple[float, int, int] | None = None
    for pm in range(1, min(tm, 8) + 1):
        for pn in range(1, min(tn, 8) + 1):
            if pm * pn * acc_regs > MAX_WARP_ACCUMULATOR_REGS:
                continue
            passes = math.ceil(math.ceil(tm / pm) * math.ceil(tn / pn) / warps)
            cost = passes * (pm * pn + pm + pn)
            key = (cost, -pm * pn, pm)
            if best is None or key < best:
                best = key
                choice = (pm, pn)
    return choice


def make_plan(desc: Descriptor) -> GemmPlan:
    m, n, k = desc.size

    smem = shared_memory_parts_of(desc._ops)
    offsets = {"a": 0, "b": smem["a"], "c": smem["a"] + smem["b"]}
    mats = {x: _matrix(desc, x, offsets[x], smem[x]) for x in "abc"}
    instr, reason = desc._instruction_choice
    acc, scalar_precision = _accumulator(dict(zip("abc", desc.precision)))
    if desc.is_complex:
        scalar = f"blasdx::complex<{acc}>"
    else:
        scalar = acc
    bx, by, bz = desc.block_dim
    threads = bx * by * bz
    warps = threads // 32
    if instr.is_mma:
        mma_acc = {"mma_f64": "double", "mma_i8": "int", "mma_i4": "int", "mma_b1": "int"}.get(
            instr.name, "float")
        acc_regs = 4  # every instruction here keeps 4 accumulator registers per tile
        pm, pn = _warp_tile(instr, m, n, warps, acc_regs)
        tile_m, tile_n = pm * instr.m, pn * instr.n
        group_m, group_n = tile_m, tile_n
    else:
        mma_acc = ""
        tile_m, tile_n, group_m, group_n = _fma_micro_tile(desc, acc, threads)
    return GemmPlan(
        sm=desc.sm, m=m, n=n, k=k, is_complex=desc.is_complex,
        a=mats["a"], b=mats["b"], c=mats["c"],
        instruction=instr, instruction_reason=reason,
        acc_type=acc, scalar_type=scalar, scalar_precision=scalar_precision,
        mma_acc_type=mma_acc, block_dim=(bx, by, bz), threads=threads, warps=warps,
        tile_m=tile_m, tile_n=tile_n,
        tiles_m=math.ceil(m / tile_m), tiles_n=math.ceil(n / tile_n), group_m=group_m, group_n=group_n,
        shared_memory_size=sum(smem.values()),
        use_cp_async=desc.sm >= 800,
        pipeline_stages=_pipeline_stages(desc.sm, sum(smem.values()), instr.is_mma),
        bit_op=desc.bit_op or "",
    )


def _fma_micro_tile(desc: Descriptor, acc: str, threads: int) -> tuple[int, int, int, int]:
    """(tile_m, tile_n, group_m, group_n) of the FMA path: 2x2 for complex and 64-bit
    accumulators, 8x4 where ``takes_float_micro_tiles`` (float32 A and B; m, n multiples of
    8, 4) and each thread has 32 outputs or more, 4x4 for the rest (never larger than
    m x n). A float 8x4 micro-tile (two groups of four rows, m / 2 apart: whole 8-row blocks
    would put the two rows of a warp's A load in the same banks) moves 12 16-byte
    shared-memory loads per 128 FMA where 4x4 moves 8 per 64; benchmarks/ablate_fma.py
    measures both."""
    m, n, _ = desc.size
    if desc.is_complex or acc in ("double", "long long", "unsigned long long"):
        tile_m, tile_n = min(2, m), min(2, n)
        return tile_m, tile_n, tile_m, tile_n
    precision = dict(zip("abc", desc.precision))
    if takes_float_micro_tiles(precision, desc.is_complex, m, n) and m * n >= 32 * threads:
        return 8, 4, 4, 4
    tile_m, tile_n = min(4, m), min(4, n)
    return tile_m, tile_n, tile_m, tile_n


def _pipeline_stages(sm: int, shared_memory_size: int, tensor_cores: bool) -> int:
    """Two stages (the next item's cp.async copies overlap this item's GEMM) for the FMA
    path, whose GEMM is long next to its copies, where cp.async exists and two stages still
    leave room for four resident blocks per SM. Otherwise the extra resident blocks of one
    stage hide more (benchmarks/ablate_stages.py, H200: f16 128x128x64 80% of copy
    bandwidth with one stage, 63% with two; f32 32^3 87% vs 89%; f32 64^3, whose two
    stages of 52 KiB leave room for two blocks, 66% vs 62%)."""
    if sm >= 800 and not tensor_cores and 4 * 2 * shared_memory_size <= SHARED_MEMORY_LIMIT_KIB[sm] * 1024:
        return 2
    return 1


@lru_cache(maxsize=1024)
def with_alignment(plan: GemmPlan, alignment: tuple[int, int, int]) -> GemmPlan:
    """The plan with each matrix's alignment raised to what the actual data guarantees
    (never lowered): wider global<->shared copies for the same GEMM."""
    mats = {}
    for x, align in zip((plan.a, plan.b, plan.c), alignment):
        align = max(x.alignment, min(16, align))
        vec = _vector_bytes(align, x.inner * x.element_size, x.ld * x.element_size)
        mats[x.name] = replace(x, alignment=align, vector_bytes=vec)
    if all(mats[x.name] == x for x in (plan.a, plan.b, plan.c)):
        return plan
    return replace(plan, **mats)


def _keeps_c_in_registers(plan: GemmPlan, stages_with_c_staged: int) -> bool:
    """Whether the batched kernel holds C in registers, between global memory and the
    products, instead of staging it in shared memory (see kernel_plan).

    Tensor cores, row-major C whose two neighbouring outputs of a fragment row move as one
    aligned access:
    - 8-byte elements (float64, int64): 16-byte pairs. Shared memory then holds A and B
      only, so more blocks fit, and C skips the shared-memory round trip
      (benchmarks/ablate_stages.py, H200: 32^3 f64 94-95% of copy against 92-94% staged,
      16^3 96-97% against 95-96%).
    - 16-bit elements, where one warp's tile is the whole of C and a row of C is at most
      64 bytes: 32^3 f16 86-89% against 80-85% staged, 16^3 79% against 70%, 64x32x32 91%
      against 83%. Measured, not explained: 16-bit C with 128-byte rows collapses in
      registers (64^3 f16 43-46% against 91%, 32x64x32 81% against 90%); C split among
      several warps gains nothing (32^3 over 4 warps 81% against 84%); float32 C lost
      (64^3 f16 -> f32 70% against 89%). Those stay staged.

    FMA: where staging C in shared memory would leave one stage, and where a warp's
    micro-tiles run along C's contiguous dimension (along n for row-major A, along m for
    column-major A: the order that suits A's and B's shared-memory loads), so that its
    accesses to C coalesce. Where two stages fit with C staged, cp.async fetches C one item
    ahead, which hides its latency better than loads into registers issued at the start of
    a short GEMM (benchmarks/ablate_fma.py, two runs on an H200: 32^3 f32 83-84% of copy
    with C staged, 80-81% with C in registers and two stages; 64^3 71-73% staged, 78-79% in
    registers)."""
    c = plan.c
    if plan.instruction.is_mma:
        if c.layout != "row_major" or c.vector_bytes < 2 * c.element_size:
            return False
        return c.element_size == 8 or (c.element_size == 2 and plan.tiles == 1 and c.ld * c.element_size <= 64)
    return stages_with_c_staged == 1 and plan.a.layout == c.layout


@lru_cache(maxsize=1024)
def kernel_plan(plan: GemmPlan) -> GemmPlan:
    """The plan of the batched kernel behind execute(). Its shared-memory copies of A, B
    and C have padded leading dimensions (global memory keeps the descriptor's), unless the
    padding would not fit the SM's shared-memory limit. On the FMA path, where staging C
    would cost the second stage, C skips shared memory (``_keeps_c_in_registers``): each
    thread reads its micro-tile of C into registers while it computes and writes the
    result straight back. The device function of ``device_source()`` keeps the
    descriptor's layout in shared memory."""
    limit = SHARED_MEMORY_LIMIT_KIB[plan.sm] * 1024

    def layout(pad: bool, c_in_registers: bool) -> tuple[dict[str, MatrixPlan], int]:
        offset, mats = 0, {}
        for x in (plan.a, plan.b, plan.c):
            smem_ld = padded_leading_dimension(x.ld, x.element_size, padding_unit_of(plan.instruction)) if pad else x.ld
            size = -(-smem_ld * x.outer * x.element_size // 16) * 16
            if x.name == "c" and c_in_registers:
                smem_ld, size = x.ld, 0
            mats[x.name] = replace(x, smem_ld=smem_ld, smem_offset=offset, smem_bytes=size)
            offset += size
        return mats, offset

    def fitting_layout(c_in_registers: bool) -> tuple[dict[str, MatrixPlan], int]:
        mats, size = layout(True, c_in_registers)
        return (mats, size) if size <= limit else layout(False, c_in_registers)

    mats, size = fitting_layout(False)
    c_in_registers = _keeps_c_in_registers(plan, _pipeline_stages(plan.sm, size, plan.instruction.is_mma))
    if c_in_registers:
        mats, size = fitting_layout(True)
    elif size == plan.shared_memory_size:
        return plan
    return replace(plan, **mats, shared_memory_size=size, c_in_registers=c_in_registers,
                   pipeline_stages=_pipeline_stages(plan.sm, size, plan.instruction.is_mma))


def explain(desc: Descriptor) -> str:
    """A readable account of the plan: what runs, how it is split, and why."""
    lines = [f"blasdx GEMM: {desc!r}"]
    if not desc.is_executable:
        instr, reason = desc._instruction_choice
        lines.append(f"instruction: {instr.name} ({reason})")
        lines.append("incomplete for a kernel: add Block() to plan threads and shared memory")
        return "\n".join(lines)
    p = desc.plan
    m, n, k = p.m, p.n, p.k
    lines.append(f"kernel: {p.kernel_name}")
    lines.append(f"instruction: {p.instruction.name} - {p.instruction_reason}")
    if p.instruction.is_mma:
        i = p.instruction
        pad = (f"; edges padded with zeros to {math.ceil(m / i.m) * i.m}x{math.ceil(n / i.n) * i.n}"
               f"x{math.ceil(k / i.k) * i.k}") if (m % i.m or n % i.n or k % i.k) else ""
        lines.append(
            f"warp tiling: {p.warps} warps; each pass computes a {p.tile_m}x{p.tile_n} tile of C "
            f"({p.tile_m // i.m}x{p.tile_n // i.n} instruction tiles of {i.m}x{i.n}x{i.k}, "
            f"A/B fragments reused across it); {p.tiles} tiles over {p.warps} warps{pad}"
        )
    else:
        groups = "".join(
            f"; its {name} in {tile // group} groups of {group}, {extent // (tile // group)} apart"
            for name, tile, group, extent in (("rows", p.tile_m, p.group_m, m), ("columns", p.tile_n, p.group_n, n))
            if group != tile)
        lines.append(
            f"thread tiling: each of {p.threads} threads accumulates {p.tile_m}x{p.tile_n} outputs "
            f"in {p.acc_type}{groups}; {p.tiles} micro-tiles over {p.threads} threads"
        )
    lines.append(f"threads: block_dim {p.block_dim} = {p.threads}"
                 + ("" if p.block_dim == tuple(desc.suggested_block_dim)
                    else f" (suggested {tuple(desc.suggested_block_dim)})"))
    if p.bit_op:
        lines.append(f"bits: C accumulates popcount(A {p.bit_op} B) over k in int32 ({p.bit_op}.popc)")
    for x in (p.a, p.b, p.c):
        stored = (f"{x.rows}x{x.cols} {x.precision}" if x.pack == 1 else
                  f"{x.rows * (x.pack if x.name == 'b' else 1)}x{x.cols * (x.pack if x.name == 'a' else 1)} "
                  f"{x.precision} packed {x.pack} per {x.cpp_type} along k ({x.rows}x{x.cols} stored)")
        lines.append(
            f"{x.name.upper()}: {stored}{' complex' if p.is_complex else ''} "
            f"{x.layout}, ld {x.ld}{' stored elements' if x.pack > 1 else ''}, shared memory [{x.smem_offset}, {x.smem_offset + x.smem_bytes}) "
            f"bytes, copied {x.vector_bytes} bytes at a time"
            + (" with cp.async" if p.use_cp_async and x.name != "c" and x.vector_bytes >= 4 else "")
        )
    lines.append(f"shared memory: {p.shared_memory_size} bytes; alpha/beta as {p.scalar_type}")
    k = kernel_plan(p)
    in_smem = (k.a, k.b) if k.c_in_registers else (k.a, k.b, k.c)
    lds = ", ".join(f"{x.name.upper()} {x.smem_ld}" for x in in_smem)
    padded = any(x.smem_ld != x.ld for x in in_smem)
    lines.append(
        f"execute(): shared-memory leading dimensions {lds}"
        + (" (padded against bank conflicts)" if padded else "") + "; "
        + ("C read into and written from registers by each thread, not staged in shared memory; "
           if k.c_in_registers else "")
        + ("two items in flight per block (the next item's copies overlap this GEMM)"
           if k.pipeline_stages == 2 else "one item at a time per block")
        + f"; {k.kernel_shared_memory_size} bytes of shared memory")
    return "\n".join(lines)
