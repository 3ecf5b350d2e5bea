"""The plans in words: what runs, how it is split, and why (``Descriptor.explain()``)."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING

from ..arch import WGMMA_SM
from ..describe.families.common import (
    GRID_MIN_TILES,
    WAVE_BLOCKS,
    tiles_of,
    wave_fitted_promoted_cols,
    wave_fitted_rows,
)
from ..describe.families.mma import float64_wave_fitted_cols
from ..describe.operators import execution_operators
from ..describe.traits import INVARIANT_ROW_STEP, INVARIANT_ROWS
from .block import GemmPlan, MatrixPlan, with_alignment
from .grid import (
    MAX_SPLIT_K_TILES,
    MAX_SPLITS,
    MIN_SPLIT_K_TILES,
    SPLIT_TAIL_MIN_K,
    TMA_STORE_ROWS,
    GridPlan,
    deep_k_stages,
    grid_with_alignment,
    item_block_choice,
    tma_registers_refusal,
)
from .kernel import kernel_plan

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor


# explain()'s lines wrap at this width by default, continued two spaces further in.
WIDTH = 100


def text(lines: list[str], width: int = WIDTH) -> str:
    """explain()'s ``lines`` wrapped at ``width`` columns (0: one line per statement)."""
    return "\n".join(_wrapped(lines, width) if width else lines)


def _wrapped(lines: list[str], width: int) -> list[str]:
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_on_hyphens=False,
                             break_long_words=False) or [line]
    return out


def explain_block(desc: Descriptor, p: GemmPlan | None) -> list[str]:
    lines = [f"blasdx GEMM: {desc!r}"]
    if p is None:
        instr, reason = desc.instruction_choice
        lines.append(f"instruction: {instr.name} ({reason})")
        kinds = execution_operators()
        lines.append(f"incomplete for a kernel: add {', '.join(f'{cls.__name__}()' for cls in kinds[:-1])} or "
                     f"{kinds[-1].__name__}() to plan threads and shared memory ("
                     + "; ".join(cls.summary for cls in kinds) + ")")
        return lines
    launched = kernel_plan(with_alignment(p, (16, 16, 16)))
    lines.append(kernels_line(kernel_plan(p).kernel_name, launched.kernel_name, desc.alignment))
    lines += block_gemm_lines(desc, p)
    in_smem = (launched.a, launched.b) if launched.c_in_registers else (launched.a, launched.b, launched.c)
    lds = ", ".join(f"{x.name.upper()} {'swizzled' if x.swizzle else x.smem_ld}" for x in in_smem)
    padded = any(x.smem_ld != x.ld for x in in_smem)
    copies = ", ".join(f"{x.name.upper()} {x.vector_bytes} bytes at a time"
                       + (" (cp.async)" if launched.use_cp_async and x.vector_bytes >= 4 else " (ld.global, st.shared)")
                       for x in in_smem)
    copies += _plain_copies_reason(p, launched, in_smem)
    lines.append(f"execute() on 16-byte aligned arrays (as CuPy and PyTorch allocate them) launches "
                 f"{launched.kernel_name}:")
    lines.append(f"  {launched.threads} threads a block, one block per batch item")
    lines.append(f"  copies to shared memory: {copies}; shared-memory leading dimensions {lds}"
                 + (" (padded against bank conflicts)" if padded else ""))
    lines.append(
        "  " + (("C read into and written from registers by each thread, 16 bytes a lane through its tile in "
                 "shared memory (ldmatrix, stmatrix)" if launched.c_staged_16_bytes else
                 "C read into and written from registers by each thread, not staged in shared memory")
                if launched.c_in_registers else "C staged in shared memory and copied back")
        + "; one item at a time per block"
        + f"; {launched.kernel_shared_memory_size} bytes of shared memory")
    return lines


def block_gemm_lines(desc: Descriptor, p: GemmPlan) -> list[str]:
    """The block GEMM of ``p`` in words: instruction, tiling, threads, A, B and C in shared memory."""
    m, n, k = p.m, p.n, p.k
    lines = [f"instruction: {p.instruction.name} - {p.instruction_reason}"]
    if p.promote_k:
        lines.append(f"accumulation: accurate - wgmma keeps about 14 bits of its running sum for 8-bit floats, so each "
                     f"{p.promote_k} of k runs into partial sums of its own, which are waited for and added to the "
                     f"float32 accumulators (as cuBLAS does by default: relative errors near 1e-4 at K of thousands); "
                     f"a warpgroup's wgmma no longer overlap each other, and its threads hold one tile of partial sums "
                     f"more. Accumulation('fast') keeps wgmma's own sum")
    elif p.instruction.narrow_accumulation:
        lines.append("accumulation: fast (Accumulation('fast')) - in wgmma's accumulators over the whole K loop, which "
                     "for 8-bit floats keep about 14 bits of the running sum (cuBLAS's use_fast_accum: relative errors "
                     "near 1e-3 at K of thousands, where the default promotion into float32 keeps about 1e-4)")
    elif "Accumulation" in desc.operator_map:
        lines.append(f"accumulation: {p.instruction.name} keeps the precision of its accumulator type over the whole K "
                     f"loop: Accumulation('{desc.operator_map['Accumulation'].value}') changes nothing here")  # type: ignore[attr-defined]
    choice = desc.wgmma_choice
    if choice is not None and p.sm == WGMMA_SM:  # wgmma is Hopper's: no other SM hears of its conditions
        lines.append("wgmma conditions:")
        lines += [f"  {text}: {'holds' if held else 'FAILS'}" for text, held in choice.conditions]
    if p.instruction.is_wgmma:
        warpgroups = p.threads // 128
        lines.append(
            f"warpgroup tiling: {_count(warpgroups, 'warpgroup')}; each pass computes a {p.tile_m}x{p.tile_n} tile of C "
            f"with {p.k // p.instruction.k} wgmma m64n{p.tile_n}k{p.instruction.k} (warp w of a group holds rows 16 (w % 4) .. "
            f"16 (w % 4) + 15); {_count(p.tiles, 'tile')} over {_count(warpgroups, 'warpgroup')}; where wgmma cannot run "
            f"(not sm_90a, A or B not 1024-byte aligned, load hooks) {p.instruction.fallback.name if p.instruction.fallback else ''} "
            f"computes the same fragments")
    elif p.instruction.is_mma:
        i = p.instruction
        pad = (f"; edges padded with zeros to {math.ceil(m / i.m) * i.m}x{math.ceil(n / i.n) * i.n}"
               f"x{math.ceil(k / i.k) * i.k}") if (m % i.m or n % i.n or k % i.k) else ""
        lines.append(
            f"warp tiling: {_count(p.warps, 'warp')}; each pass computes a {p.tile_m}x{p.tile_n} tile of C "
            f"({p.tile_m // i.m}x{p.tile_n // i.n} instruction tiles of {i.m}x{i.n}x{i.k}, "
            f"A/B fragments reused across it); {_count(p.tiles, 'tile')} over {_count(p.warps, 'warp')}{pad}"
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
    if p.threads % 32:
        whole = -(-p.threads // 32) * 32
        lines.append(f"  warning: {p.threads} threads end in part of a warp ({p.threads % 32} of its 32 lanes); the GPU "
                     f"runs whole warps, so BlockDim({whole}) costs the same warps and uses every lane")
    if p.bit_op:
        lines.append(f"bits: C accumulates popcount(A {p.bit_op} B) over k in int32 ({p.bit_op}.popc)")
    aligned = with_alignment(p, (16, 16, 16))
    for x, x_aligned in zip((p.a, p.b, p.c), (aligned.a, aligned.b, aligned.c)):
        stored = (f"{x.rows}x{x.cols} {x.precision}" if x.pack == 1 else
                  f"{x.rows * (x.pack if x.name == 'b' else 1)}x{x.cols * (x.pack if x.name == 'a' else 1)} "
                  f"{x.precision} packed {x.pack} per {x.cpp_type} along k ({x.rows}x{x.cols} stored)")
        swizzled = (f"in wgmma's {x.swizzle}-byte swizzled layout, {_CONTIGUOUS[x.name, x.layout]} contiguous"
                    if x.swizzle else "")
        lines.append(
            f"{x.name.upper()}: {stored}{' complex' if p.is_complex else ''} "
            f"{x.layout}, ld {x.ld}{' stored elements' if x.pack > 1 else ''}, shared memory [{x.smem_offset}, {x.smem_offset + x.smem_bytes}) "
            f"bytes{' ' + swizzled if swizzled else ''}; device_source()'s load_{x.name}() copies"
            + (" with cp.async" if p.use_cp_async and x.name != "c" and x_aligned.vector_bytes >= 4 else "")
            + f" {_width(x, x_aligned)}"
        )
    lines.append(f"shared memory: {p.shared_memory_size} bytes (A and B alone, for a kernel whose C stays in the "
                 f"register accumulators: {p.c.smem_offset}, shared_memory_size_ab); alpha/beta as {p.scalar_type}")
    suggested = desc.suggested_leading_dimension
    unpadded = [x for x, ld in zip((p.a, p.b, p.c), suggested) if not x.swizzle and x.ld != ld]
    if unpadded:
        names = ", ".join(f"{x.name.upper()} ({x.ld})" for x in unpadded)
        lines.append(f"device_source() keeps the leading dimensions of {names} in shared memory, whose rows then "
                     f"start in the same banks (conflicting loads); + LeadingDimension{tuple(suggested)} "
                     f"(suggested_leading_dimension) pads them, as execute() pads its own copies")
    return lines


def kernels_line(compiled: str, launched: str, alignment: tuple[int, int, int]) -> str:
    """The kernels a user can compile, find in a profiler or grep: compile()'s (the descriptor's
    alignment) and the one execute() launches on 16-byte aligned arrays, if another."""
    fused = " (with hooks or a bias, the name ends in _f and a digest of them)"
    if compiled == launched:
        return f"kernel: {compiled}, built by compile() and launched by execute(){fused}"
    return (f"kernels: compile() and .source build {compiled} (arrays aligned to Alignment{tuple(alignment)} "
            f"bytes); execute() on 16-byte aligned arrays launches {launched}{fused}")


def _width(declared: MatrixPlan, aligned: MatrixPlan) -> str:
    """How many bytes load_x() moves at a time: where 16-byte alignment widens them, its run-time test says."""
    if declared.vector_bytes == aligned.vector_bytes:
        return f"{declared.vector_bytes} bytes at a time"
    return (f"{aligned.vector_bytes} bytes at a time where both pointers are 16-byte aligned (tested at run time; "
            f"Alignment(16, ...) drops the test), else {declared.vector_bytes}")


def _plain_copies_reason(p: GemmPlan, launched: GemmPlan, in_smem: tuple[MatrixPlan, ...]) -> str:
    """Why execute()'s kernel copies without cp.async, where it does."""
    if not any(not launched.use_cp_async or x.vector_bytes < 4 for x in in_smem):
        return ""
    if not p.use_cp_async:
        return f" (SM {p.sm} has no cp.async: it came with SM 800)"
    if not launched.use_cp_async:
        return (f" (one item at a time per block: on SM {p.sm} plain loads stored to shared memory are taken to move "
                f"the same bytes faster than cp.async, as measured on SM 900: blasdx.tuning)")
    return " (cp.async moves 4, 8 or 16 bytes: narrower copies are plain loads)"


def explain_grid(desc: Descriptor, p: GridPlan) -> list[str]:
    """explain() of a Grid() descriptor: the tiles, the K loop, the order of the blocks, and
    the block GEMM that computes each tile (its own explain())."""
    t = p.tile
    ops = desc.operator_map
    launched = grid_with_alignment(p, (16, 16, 16))
    kernels = kernels_line(p.kernel_name, launched.kernel_name, desc.alignment)
    given = {kind: "given" if kind in ops else "suggested" for kind in ("Tile", "Stages", "BlockDim")}
    rows, why = wave_fitted_rows(p.m, p.n, p.k, t.n)
    if given["Tile"] == "suggested" and t.instruction.is_wgmma and t.m == rows == 192 and "BatchInvariant" not in ops:
        given["Tile"] += f": {why}"
    if (given["Tile"] == "suggested" and t.promote_k and (t.m, t.n) == (128, 192) and "BlockDim" not in ops
            and "BatchInvariant" not in ops):  # (BatchInvariant(): fitted to INVARIANT_ROWS rows, said below)
        given["Tile"] += f": {wave_fitted_promoted_cols(p.m, p.n)[1]}"
    cols, why_cols = float64_wave_fitted_cols(ops)
    if (given["Tile"] == "suggested" and t.instruction.accumulator == "double" and (t.m, t.n) == (128, cols) == (128, 64)
            and not p.is_complex and tiles_of(p.m, p.n, 128, 128) >= GRID_MIN_TILES and "BatchInvariant" not in ops):
        given["Tile"] += f": {why_cols}"  # (where fewer tiles, the tile shrank to the problem: fitted_tile)
    if p.batch_stages:  # (deepened: deep_k_stages)
        given["Stages"] += (f": as many as fit, up to {deep_k_stages(t, p.tiles, p.k)}, where "
                            f"{_count(p.tiles, 'tile')} (fewer than a wave) run K loops of k = {p.k}, each block's the "
                            f"call's time; {p.batch_stages} on a batch of a wave of tiles or more")
    if launched.tma and t.promote_k:
        overlap = (f"with TMA (below), the copies of up to {p.stages} K tiles run ahead of the multiplies; "
                   + ("K tiles go in pairs, the second's wgmma running while the first's partial sums are added"
                      if t.promotes_in_pairs else "each K tile's partial sums are added before the next one's wgmma start"))
    elif launched.tma:
        overlap = (f"with TMA (below), the copies of up to {p.stages} K tiles run ahead of the multiplies, and each "
                   "multiply runs while the one before it ends")
    elif t.instruction.is_wgmma and t.promote_k:
        ahead = p.stages - 2 if p.stages >= 3 else p.stages - 1  # mainloop_range's overlapped loop, or the plain one
        overlap = (f"the copies of the next {ahead} K tile{'s' if ahead > 1 else ''} run while the block multiplies one, "
                   f"whose partial sums are added before the next one's wgmma start")
    elif t.instruction.is_wgmma and p.stages >= 3:
        overlap = (f"the multiply of each K tile runs while the next one's ends and the copies of the following "
                   f"{p.stages - 2} run")
    else:
        where = "between its multiply's last two steps of k" if p.copies_between_steps else "after its multiply"
        overlap = (f"cp.async copies the next {p.stages - 1} K tiles while the block multiplies one (each thread "
                   f"issues a K tile's copies {where})")
    if p.fma_pipelined:
        overlap += ("; within a K tile each thread loads the next four steps of k from shared memory while it "
                    "multiplies the current ones (FMA tiles with row-major A on one block an SM)")
    if t.pipelined_fragments:
        overlap += ("; within a K tile each warp loads the next step's fragments from shared memory while it "
                    "multiplies the current ones (float64 tiles with A and B K-major)")
    lines = [
        f"blasdx GEMM: {desc!r}",
        kernels + "; grid-level: Size is the whole problem",
        f"tiles: {p.m}x{p.n} C in {p.tiles_m}x{p.tiles_n} = {_count(p.tiles, 'tile')} of {t.m}x{t.n} per batch item "
        f"(Tile({t.m}, {t.n}, {t.k}), {given['Tile']}); the edge tiles read zeros past m, n and k and write only "
        f"inside C",
        f"K loop: {_count(p.k_tiles, 'step')} of {t.k} per tile, {p.stages} stages ({given['Stages']}): {overlap}; "
        f"{p.stages} x {t.shared_memory_size} = {p.stages_shared_memory_size} bytes of shared memory a block"
        + (f" ({launched.kernel_shared_memory_size} with C's staging for TMA stores)" if launched.tma_store else ""),
        f"blocks: {t.threads} threads each ({given['BlockDim']}); a persistent grid of at most as many blocks as the "
        f"GPU runs at once walks the (batch item, tile) pairs, tiles in groups of {p.group_m} tile rows taken column "
        f"by column (the blocks running together share A and B in L2)",
        _split_k_line(desc, p),
        *_invariance_lines(desc, p),
        _batches_line(desc, p),
        _epilogue_line(launched),
        _copies_line(launched) + _narrow_copies_hint(launched, desc.suggested_leading_dimension),
        "each tile is the block GEMM of tile_descriptor:",
    ]
    # The tile's instruction, its conditions and how its warps split it; its own copies,
    # shared memory and threads are the grid's, said above.
    tile_lines = block_gemm_lines(desc.tile_descriptor, t)
    keep = False
    for line in tile_lines:  # a kept line and the lines indented under it
        keep = line.startswith(_TILE_LINES) or (keep and line.startswith(" "))
        if keep:
            lines.append("  " + line)
    return lines


def _split_k_line(desc: Descriptor, p: GridPlan) -> str:
    if "BatchInvariant" in desc.operator_map:
        return "split-K: never (BatchInvariant(): each tile's K loop runs whole, in one order, on one block)"
    if not p.split_k:
        if p.k_tiles < 2 * MIN_SPLIT_K_TILES:
            why = f"a K loop of {_count(p.k_tiles, 'step')}, fewer than {2 * MIN_SPLIT_K_TILES}"
        elif p.tiles >= MAX_SPLIT_K_TILES:
            why = f"{_count(p.tiles, 'tile')} a batch item, {MAX_SPLIT_K_TILES} or more"
        else:
            why = (f"{_count(p.tiles, 'tile')} a batch item, {GRID_MIN_TILES} or more, and k = {p.k}: the last "
                   f"wave's K loops split from k = {SPLIT_TAIL_MIN_K}")
        return f"split-K: none ({why})"
    few = (f"where a call has fewer tiles than the GPU runs blocks at once (a batch item fewer than "
           f"{GRID_MIN_TILES}), each tile's K loop splits into as many parts as fill it in one round; elsewhere "
           if p.tiles < GRID_MIN_TILES else "")
    return (f"split-K: {few}the call's tiles (of every batch item) run in whole waves of as many as the GPU runs at "
            f"once, and the K loops of the rest, which would leave SMs idle, split into the parts that end the last "
            f"wave soonest; parts up to {MAX_SPLITS}, of {MIN_SPLIT_K_TILES} K tiles or more, in a workspace kept "
            f"a stream (CuPy's pool); the last part to finish adds them up in order (the same result whichever it "
            f"is). Not under stream capture (CUDA graphs)")


def _invariance_lines(desc: Descriptor, p: GridPlan) -> list[str]:
    """What BatchInvariant() fixes, where the descriptor has it."""
    if "BatchInvariant" not in desc.operator_map:
        return []
    t = p.tile
    rows = "a group's rows or how many groups" if p.grouped else "Size's m (or the batch)"
    height = ("Tile given, the same for every m" if "Tile" in desc.operator_map or p.grouped else
              f"the tile's height, {t.m} rows here, follows m in steps of {INVARIANT_ROW_STEP} (as many rows a block "
              f"holds, never what a row meets), n and k those of {INVARIANT_ROWS} rows")
    float32 = (" float32 runs float32 (never tfloat32, its own Precision);"
               if "float32" in (p.a.precision, p.b.precision) else "")
    width = f"{t.instruction.name} {t.tile_n} wide" if t.instruction.is_wgmma else t.instruction.name
    return [f"batch invariance (BatchInvariant()): every row of C is bitwise the same whatever {rows}: each row meets "
            f"the same instructions ({width}) in the same K order, {t.k} of k a step, for every m ({height}); no "
            f"split-K, no kernel switched by the batch;{float32} the rows past m are read as zeros and never change "
            f"a row inside it"]


def _batches_line(desc: Descriptor, p: GridPlan) -> str:
    """Which kernel execute() runs on a batch (GridPlan.item_block, GridPlan.for_batch), and why."""
    item, why = item_block_choice(desc)
    others = ""
    if p.batch_grids:
        tiles = ", ".join(f"{g.tile.m}x{g.tile.n}" for g in p.batch_grids)
        rates = ", ".join(f"{g.tile.m}x{g.tile.n} {g.wave_rate:.2f}" for g in (p, *p.batch_grids))
        others = (f"; the grid kernel's tile on a batch is this one or {tiles} (fitted to an item's {p.m} rows), "
                  f"whichever's waves of {WAVE_BLOCKS} tiles over the whole batch take least time (each tile at its "
                  f"rate on a wave's outputs: {rates})")
    if item is None:
        return f"batches: {'the' if others else 'this'} grid kernel, whatever the batch ({why}){others}"
    m, n, k = desc.size
    return (f"batches: {why}, so a call of at least as many items as the GPU runs blocks of it at once runs the "
            f"batched kernel of Size({m}, {n}, {k}) + Block() in its place (a block an item, several an SM); "
            f"smaller batches run the grid kernel{others}")


def _epilogue_line(p: GridPlan) -> str:
    """How the tiles' results reach C (GridPlan.stages_c)."""
    ahead = ("a few instruction tiles" if p.tile.instruction.is_mma else
             f"{p.fma_c_read_ahead} values a thread" if p.fma_c_read_ahead > 1 else "")
    quads_alone = ""  # 16-bit row-major C where a kernel's registers are few (GridPlan.quads_c_read_ahead)
    if p.tile.instruction.is_mma and p.c.element_size == 2 and p.c.layout == "row_major":
        aligned, unaligned = (grid_with_alignment(p, (alignment,) * 3) for alignment in (16, 8))
        if not aligned.quads_c_read_ahead:
            ahead, quads_alone = "", (f"; where beta != 0, C read a quad at a time, just before its write (the kernel's "
                                      f"{aligned.launch_registers} registers a thread are few)")
        elif not unaligned.quads_c_read_ahead:
            quads_alone = (f"; on arrays aligned to less than 16 bytes (no TMA) a quad at a time, just before its "
                           f"write, as that kernel's {unaligned.launch_registers} registers a thread are few")
    direct = ("epilogue: alpha, beta, the hooks and the bias applied in registers, C written from them (no shared memory)"
              + (f"; where beta != 0, C read {ahead} at a time, ahead of their writes" if ahead else "") + quads_alone)
    staged = ("the accumulators staged in shared memory (free after the K loop), then alpha, beta, the hooks and the "
              "bias applied and C written in runs of 16 bytes along its contiguous dimension")
    if p.tma_store:
        return (f"epilogue: alpha, beta (C read two instruction tiles at a time) and the hooks and the bias applied in "
                f"registers, then C staged in shared memory a box of {TMA_STORE_ROWS} rows x {p.c_box_swizzle} bytes "
                f"at a time ({p.c_staging_buffers} buffer(s) a warpgroup) and written by TMA stores, asynchronous (a "
                f"tile's last ones drain while the next tile's K loop runs); where C does not start and step on "
                f"16-byte boundaries, {direct.removeprefix('epilogue: ')}")
    if p.stages_c(epilogue_hooks=False):
        return f"epilogue: {staged}"
    if p.stages_c(epilogue_hooks=True):
        return f"{direct}; with hooks or a bias, {staged} (the hooks' code once, in a loop)"
    return direct


def _copies_line(p: GridPlan) -> str:
    """How the K loop copies A and B on 16-byte aligned arrays (``p`` planned for them)."""
    def width(x: MatrixPlan) -> str:
        if x.wide_copies_shifted:
            return "in 16-byte pieces cut from aligned loads (copy_runs_shifted)"
        return f"{x.vector_bytes} bytes at a time"

    cp_async = (f"A {width(p.tile.a)} and B {width(p.tile.b)} (cp.async where 4 bytes or more), from leading "
                f"dimensions {p.a.ld} and {p.b.ld}")
    if not p.tma:
        sharing = ("; two blocks share an SM (FMA tiles with row-major B or complex values: ptxas gets half the "
                   "registers, the copies of one block run while the other computes)") if p.blocks_per_sm == 2 else ""
        refusal = tma_registers_refusal(p) if p.tile.a.swizzle and p.tile.b.swizzle and p.sm >= WGMMA_SM else ""
        no_tma = f" (no TMA: {refusal})" if refusal else ""
        return f"copies on 16-byte aligned arrays: {cp_async}{sharing}{no_tma}"
    a, b = p.tma_operand("a"), p.tma_operand("b")
    sharing = "; two blocks share an SM, one's epilogue running while the other multiplies" if p.blocks_per_sm == 2 else ""
    if p.cluster:
        sharing += ("; blocks run in clusters of two on vertically neighbouring tiles, each copying half of their "
                    "shared B into both (TMA multicast: half the reads of B from L2)")
    return (f"copies: TMA where A and B start, and step between rows and batch items, on multiples of 16 bytes: a "
            f"producer warpgroup ({p.threads - p.tile.threads} more threads a block, one of which copies) brings "
            f"each K tile as {_count(a.slabs, 'slab')} of A and {_count(b.slabs, 'slab')} of B ({a.swizzle}-byte "
            f"swizzled rows, as wgmma reads them) into the next free stage, the next tile's while this one's "
            f"epilogue runs; mbarriers say when a stage has landed and when it is free{sharing}. Elsewhere "
            f"{cp_async}")


def _narrow_copies_hint(p: GridPlan, suggested_lds: tuple[int, int, int]) -> str:
    """Where a leading dimension keeps copies under 16 bytes: the suggested one that would not."""
    narrow = [whole.name for whole, x in ((p.a, p.tile.a), (p.b, p.tile.b)) if x.vector_bytes < 16]
    if not narrow:
        return ""
    suggested = ", ".join(f"ld{name} {suggested_lds['abc'.index(name)]}" for name in narrow)
    return (f"; copies narrower than 16 bytes take more instructions, and where rows lie off 4-byte boundaries "
            f"they wait for their data instead of running ahead: leading dimensions of multiples of 16 bytes "
            f"({suggested}, suggested_leading_dimension, with LeadingDimension and arrays padded so) copy 16 bytes "
            f"with cp.async, or by TMA where the tile is wgmma's")


_TILE_LINES = ("instruction:", "accumulation:", "wgmma conditions:", "warpgroup tiling:", "warp tiling:", "thread tiling:", "bits:")


# The dimension along which a stored A or B runs contiguously.
_CONTIGUOUS = {("a", "row_major"): "k", ("a", "col_major"): "m", ("b", "row_major"): "n", ("b", "col_major"): "k"}


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
