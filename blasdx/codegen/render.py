"""Render plans into CUDA source with the Jinja templates.

Python has decided everything in the plan (blasdx.plan); this module turns a plan into a
plain context of strings and numbers, and the templates print it. It never plans again:
the batched kernel's plan comes in from the pipeline. Rendering needs no GPU.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import jinja2

from .. import settings
from ..arch import MMA_I8, PROMOTION_K, SM75_FORMS_MIN_ARCH, WIDEN_4BIT_MIN_ARCH
from ..describe.families import family_issuing
from ..errors import ArgumentError, BlasdxError
from ..plan import BatchedPlan, GemmPlan, GridPlan, KernelPlan, MatrixPlan
from ..plan.block import vector_bytes_of
from ..plan.grid import PRODUCER_REGISTERS, STAGED_C_PADDING, TmaOperand
from ..plan.kernel import KernelParameter, launch_min_blocks
from .hooks import GATES, NO_FUSION, Fusion
from .naming import check_namespace

BATCHED_NAMESPACE = "blasdx_block_gemm"


def templates_dir() -> Path:
    """``BLASDX_TEMPLATES_DIR`` if set, else templates/ inside the installed package, else
    beside it in a source checkout."""
    explicit = settings.templates_dir()
    if explicit is not None:
        if not (explicit / "gemm.cuh.j2").is_file():
            raise BlasdxError(f"BLASDX_TEMPLATES_DIR={str(explicit)!r} holds no blasdx templates (no gemm.cuh.j2 there); "
                              f"point it at a templates/ folder of blasdx, or unset it to use the installed ones")
        return explicit
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "gemm.cuh.j2").is_file():
            return candidate
    raise BlasdxError(f"blasdx templates not found next to {here}; reinstall blasdx")


@lru_cache(maxsize=4)
def _generator_digest(directory: Path) -> str:
    """SHA-256 of what turns a plan into source: every template in ``directory`` and every
    module of the blasdx package (planning facts, hooks, this renderer). Reading them takes
    a few milliseconds; parsing the templates takes tens."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for root, pattern in ((directory, "*.j2"), (package, "*.py")):
        for path in sorted(root.rglob(pattern)):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def kernel_identity(kernel: KernelPlan, name: str, fusion: Fusion = NO_FUSION) -> str:
    """A text that determines ``blasdx.kinds.render_launched(kernel, name, fusion)``'s source without
    rendering it: the generator's digest and the inputs' reprs (the plan's dataclass repr
    holds every field; the fusion's, every hook's expression), for the kernel cache."""
    return f"{_generator_digest(templates_dir())} {name} {kernel!r} {fusion!r}"


@lru_cache(maxsize=4)
def _environment(directory: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def template(name: str) -> jinja2.Template:
    return _environment(templates_dir()).get_template(name)


def matrix_context(x: MatrixPlan, use_cp_async: bool, own_kernel: bool = False) -> dict:
    """What the templates print of one matrix; ``own_kernel``: a kernel blasdx launches, whose
    plan has the arrays' own alignment (blasdx.plan.with_alignment, grid_with_alignment)."""
    ctx = asdict(x)
    ctx["row_major"] = x.layout == "row_major"
    ctx["async"] = "true" if use_cp_async and x.vector_bytes >= 4 else "false"
    # Copies one element at a time (a run-time leading dimension that vectors do not divide).
    ctx["element_async"] = "true" if use_cp_async and x.element_size >= 4 else "false"
    # load_x's copies: the wide one where the leading dimension and pointer allow vector_bytes,
    # the narrow one elsewhere; bytes per copy, or "shifted".
    ctx["wide_copy"] = "shifted" if x.wide_copies_shifted else x.vector_bytes
    ctx["narrow_copy"] = "shifted" if x.shifted_copies else x.element_size
    # Whether load_x checks the pointer's alignment at run time: in a user's kernel, where the plan does not
    # promise vector_bytes, or where the narrow copy is element-wise (dropping the test there ran float64 Grid()
    # slower); not beside a shifted narrow copy, whose code compiled in beside the wide one cost compile time.
    ctx["pointer_check"] = not own_kernel or x.alignment < x.vector_bytes or not x.shifted_copies
    # In a user's kernel whose declared alignment (Alignment; the element's by default) keeps the
    # copies narrower than the layout allows: the width load_x takes where a run-time test finds
    # both pointers (and the leading dimension) aligned to it, as arrays from CuPy and PyTorch and
    # __align__(16) shared memory are; 0 where there is nothing to test.
    widest = vector_bytes_of(16, x.inner * x.element_size, x.ld * x.element_size)
    ctx["checked_copy"] = widest if not own_kernel and widest > x.vector_bytes else 0
    ctx["checked_async"] = "true" if use_cp_async and widest >= 4 else "false"
    # A user's kernel keeps 16-byte cp.async in L1 as plain loads do (blocks of an SM may share
    # a tile); blasdx's kernels stream each item once and leave it in L2.
    ctx["copies_through_l1"] = not own_kernel
    return ctx


def _context(plan: GemmPlan, name: str, own_kernel: bool = False, fma_pipelined: bool = False) -> dict:
    """The block GEMM's template context: the plan's values, spelled for C++; ``fma_pipelined``:
    the vector FMA loop loads the next steps' values while it multiplies (GridPlan.fma_pipelined)."""
    instr = plan.instruction
    family = family_issuing(instr)
    ctx = {
        "name": name,
        "kernel_name": plan.kernel_name,
        "description": f"{plan.m}x{plan.n}x{plan.k}, {instr.name}, {plan.threads} threads",
        "a": matrix_context(plan.a, plan.use_cp_async, own_kernel),
        "b": matrix_context(plan.b, plan.use_cp_async, own_kernel),
        "c": matrix_context(plan.c, plan.use_cp_async, own_kernel),
        "m": plan.m, "n": plan.n, "k": plan.k,
        "scalar_type": plan.scalar_type,
        "acc_type": f"blasdx::complex<{plan.acc_type}>" if plan.is_complex else plan.acc_type,
        "block_dim": plan.block_dim,
        "threads": plan.threads,
        "warp_scope": plan.scope == "warp",
        "warps": plan.warps,
        "shared_memory_size": plan.shared_memory_size,
        "mma": instr.is_mma,  # unread here: the templates before the families' read it (benchmarks/ab.py's templates base)
        "instr": instr.name,
        "tile_m": plan.tile_m, "tile_n": plan.tile_n,
        "tiles_m": plan.tiles_m, "tiles_n": plan.tiles_n, "tiles": plan.tiles,
        "group_m": plan.group_m, "group_n": plan.group_n,
        "ldmatrix": False,  # set with the fragment instruction below
        "packed": instr.packed,
        "fma_vector": plan.fma_vector_loads,
        "fma_pipelined": fma_pipelined,
        "pipelined_fragments": plan.pipelined_fragments,
        "copies_a_step_earlier_before_nvrtc13": plan.copies_a_step_earlier_before_nvrtc13,
        "fma_pairs": plan.fma_thread_pairs,
        "c_in_registers": plan.c_in_registers,
        "c_staged_16_bytes": plan.c_staged_16_bytes,
        "c_vector": plan.c_vector,
        "promote_k": plan.promote_k,  # partial sums into float32 every promote_k of k (wgmma's FP8), else 0
        "scale_block": PROMOTION_K,  # k of a scale's block (multiply_scaled), as blockwise-scaled FP8 takes it
        "workers_text": f"{plan.warps} warps" if instr.is_mma else f"{plan.threads} threads",
        # The family's partials: its tiles (gemm.cuh.j2 includes it) and its pieces of the device API.
        "family_template": family.template,
        "accumulator_template": family.accumulator_template,
    }
    ctx["wgmma"] = instr.is_wgmma
    if instr.fallback is not None:  # wgmma
        ctx.update(wgmma_ptx=instr.spelled(plan.a.precision, plan.b.precision, n=plan.tile_n),
                   warpgroups=plan.threads // 128, wgmma_transposes=instr.reads_transposed,
                   # wgmma reads K-major A and B as they are, MN-major ones transposed.
                   a_transposed=int(plan.a.layout == "col_major"), b_transposed=int(plan.b.layout == "row_major"))
        # Everything below describes the warp-level mma.sync that computes the same
        # fragments where wgmma cannot run: each warp's 16-row share of the 64-row tile.
        instr = instr.fallback
        ctx["instr"] = instr.name
    if instr.is_mma:
        a, b = plan.a.precision, plan.b.precision
        ctx.update(
            instruction_ptx=instr.spelled(a, b, plan.bit_op),
            im=instr.m, in_=instr.n, ik=instr.k,
            pm=1 if ctx["wgmma"] else plan.tile_m // instr.m, pn=plan.tile_n // instr.n,
            frag_type=instr.fragment_type,
            mma_acc_type=plan.mma_acc_type,
            a_regs=instr.a_regs, b_regs=instr.b_regs, c_vals=instr.c_values,
            epr=32 // instr.operand_bits if instr.operand_bits <= 32 else 1,
            bit_op=plan.bit_op,
            fragments=instr.fragments,
            ptx_arch=instr.ptx_arch or instr.min_sm,
            ptx_sm75=instr.spelled(a, b, plan.bit_op, instr.ptx_sm75) if instr.ptx_sm75 else "",
            sm75_arch=SM75_FORMS_MIN_ARCH,
        )
        ctx["k_loop_unroll"] = plan.k_loop_unroll
        # ldmatrix loads 8x8 blocks of 16-bit values; 16-bit operands take it in either layout
        # (.trans for MN-major ones), 8- and 32-bit ones where k is contiguous (K-major: row-major
        # A, column-major B), whose blocks then hold the m16n8 fragments as they are.
        k_major_ok = instr.fragments == "m16n8" and instr.operand_bits in (8, 32)
        ctx.update(ldmatrix_a=instr.ldmatrix or (k_major_ok and plan.a.layout == "row_major"),
                   ldmatrix_b=instr.ldmatrix or (k_major_ok and plan.b.layout == "col_major"),
                   ldmatrix_elements=128 // instr.operand_bits)
        ctx["ldmatrix"] = ctx["ldmatrix_a"] or ctx["ldmatrix_b"]
        if instr.packed:
            # Bytes of k per row of A (and column of B); each instruction takes 32 of them.
            value_bits = plan.a.element_size * 8 // plan.a.pack  # 4 or 1
            ctx.update(k_bytes=plan.k * value_bits // 8, ik=32, values_per_word=32 // value_bits,
                       widen_arch=WIDEN_4BIT_MIN_ARCH,
                       # 4-bit fragments widened to bytes keep their signs: int8 mma's spelling.
                       ptx_widened=MMA_I8.spelled("int8" if a == "int4" else "uint8",
                                                  "int8" if b == "int4" else "uint8"))
    return ctx


def render_common() -> str:
    """The shared device helpers (types, conversions, mma operands, copies)."""
    return template("common.cuh.j2").render()


def render_block(plan: GemmPlan, name: str, own_kernel: bool = False, fma_pipelined: bool = False) -> str:
    """The block GEMM of ``plan`` in namespace ``name`` (without the common helpers);
    ``own_kernel``: for a kernel blasdx launches (see matrix_context)."""
    check_namespace(name)
    return template("gemm.cuh.j2").render(**_context(plan, name, own_kernel, fma_pipelined))


def render_device_source(plan: GemmPlan, name: str = "gemm") -> str:
    """Common helpers plus the block GEMM in namespace ``name``, ready to #include."""
    return render_common() + "\n" + render_block(plan, name)


def render_grid_block(plan: GridPlan, name: str, own_kernel: bool = False) -> str:
    """A Grid() descriptor's device code in namespace ``name`` (without the common helpers):
    the tile's block GEMM, then the tile loop's pieces (block_tile_origin, mainloop, store_block_tile)."""
    tile = plan.tile
    grid = template("grid.cuh.j2").render(
        name=name, kernel_name=plan.kernel_name, problem_m=plan.m, problem_n=plan.n, problem_k=plan.k,
        tile_m=tile.m, tile_n=tile.n, tile_k=tile.k,
        problem_lda=plan.a.ld, problem_ldb=plan.b.ld, problem_ldc=plan.c.ld,
        a=matrix_context(plan.a, False), b=matrix_context(plan.b, False), c=matrix_context(plan.c, False),
        stages=plan.stages, tiles_m=plan.tiles_m, tiles_n=plan.tiles_n, k_tiles=plan.k_tiles, group_m=plan.group_m,
        swizzled=tile.a.swizzle > 0, overlapped=_overlapped(plan), split_k=plan.split_k,
        paired_store=tile.instruction.is_mma, fma_c_read_ahead=plan.fma_c_read_ahead,
        quads_c_read_ahead=plan.quads_c_read_ahead, short_quads_epilogue=plan.short_quads_epilogue,
        copies_between_steps=plan.copies_between_steps, promote_k=tile.promote_k)
    return render_block(tile, name, own_kernel, plan.fma_pipelined) + "\n" + grid


def _overlapped(plan: GridPlan) -> bool:
    """Whether the cp.async K loop (mainloop_range) keeps a K tile's wgmma in flight while it
    copies the next: wgmma, and stages enough for a K tile in flight beside the one copied."""
    return plan.tile.instruction.is_wgmma and plan.stages >= 3


def render_grid_device_source(plan: GridPlan, name: str = "gemm") -> str:
    """Common helpers plus a Grid() descriptor's device code in namespace ``name``."""
    return render_common() + "\n" + render_grid_block(plan, name)


def render_grouped_block(plan: GridPlan, name: str) -> str:
    """A Grouped() descriptor's device code in namespace ``name`` (without the common helpers): Grid()'s, then the
    groups' scheduler (schedule_groups, tile_of_groups, group_mainloop) for blocks of the tile's threads."""
    return render_grid_block(plan, name) + "\n" + template("grouped.cuh.j2").render(
        ns=name, max_groups=plan.max_groups, schedule_size=plan.schedule_size, block_threads=plan.tile.threads)


def render_grouped_device_source(plan: GridPlan, name: str = "gemm") -> str:
    """Common helpers plus a Grouped() descriptor's device code in namespace ``name``."""
    return render_common() + "\n" + render_grouped_block(plan, name)


def render_grid_kernel(plan: GridPlan, name: str, fusion: Fusion = NO_FUSION) -> str:
    """The complete source of the grid kernel behind a Grid() descriptor's ``execute()``."""
    ns = BATCHED_NAMESPACE
    tma = {}
    if plan.tma:  # a grouped kernel's A is one matrix (item 0), its B one a group (Grouped('k'): one matrix too)
        ragged_k = getattr(plan, "ragged_k", False)
        tma = {"a_tma": _tma_context(plan.tma_operand("a"), "row0", "0" if plan.grouped else "item"),
               "b_tma": _tma_context(plan.tma_operand("b"), "col0", "0" if ragged_k else "item", plan.gate_split),
               "producer_registers": PRODUCER_REGISTERS, "consumer_registers": plan.consumer_registers}
    if plan.tma_store:
        tma.update(c_box_swizzle=plan.c_box_swizzle, c_staging_offset=plan.c_staging_offset,
                   c_staging_buffers=plan.c_staging_buffers)
    tma["cluster"] = plan.cluster
    return template("grid.cu.j2").render(
        common=render_common(), device=render_grid_block(plan, ns, own_kernel=True), ns=ns, block_threads=plan.threads,
        tile_threads=plan.tile.threads, blocks_per_sm=plan.blocks_per_sm, kernel_name=name, swizzled=plan.tile.a.swizzle > 0,
        acc_bytes=plan.accumulator_bytes, acc_size=plan.tile.accumulator_size, split_k=plan.split_k,
        overlapped=_overlapped(plan), tma=plan.tma, promotes=plan.tile.promote_k > 0,
        promotes_one_tile=plan.tile.promotes_one_tile, promotes_in_pairs=plan.tile.promotes_in_pairs,
        scale_b_by_columns=plan.scale_b_by_columns, stages_c=plan.stages_c(fusion.has_epilogue),
        c=matrix_context(plan.c, False), staged_padding=STAGED_C_PADDING, grouped=plan.grouped,
        ragged_k=getattr(plan, "ragged_k", False), max_groups=plan.max_groups, schedule_size=plan.schedule_size,
        tma_store=plan.tma_store,
        gate_split=plan.gate_split, **tma,
        **fusion_context(ns, fusion, plan.kernel_parameters(fusion.bias, fusion.scaled), grid=True,
                         called_activations=True))


def _tma_context(operand: TmaOperand, origin: str, item: str, halves: bool = False) -> dict:
    """What tma.cuh.j2 prints of one operand: its slabs and the box coordinates of slab 0
    (``k0`` along k; ``origin``, the tile's row0 or col0, along m or n; ``item``, its batch item). ``halves``
    (GridPlan.gate_split, B): the tile's halves along n come from B's columns col0 / 2 (the gate's) and
    problem_n / 2 + col0 / 2 (the up's)."""
    inner, outer = ("k0", origin) if operand.k_inner else (origin, "k0")
    return {"slabs": operand.slabs, "slab_bytes": operand.slab_bytes, "slab_elements": operand.slab_elements,
            "slab_rows": operand.slab_rows, "swizzle": operand.swizzle, "split_rows": operand.k_inner,
            "inner_origin": inner, "outer_origin": outer, "item": item, "halves": halves,
            "gate_origin": f"{origin} / 2", "up_origin": f"(problem_n / 2 + {origin} / 2)"}


def fusion_context(ns: str, fusion: Fusion, parameters: tuple[KernelParameter, ...] = (), grid: bool = False,
                   called_activations: bool = False) -> dict:
    """What hooks.cuh.j2 prints of ``fusion``, and a kernel's parameter list of ``parameters`` (its plan's
    kernel_parameters for the fusion's bias and scales). ``called_activations``: the built-in float64 activations
    are called, not inlined (a grid tile's 64 values a thread: templates/common.cuh.j2)."""
    storage = {"a_load": f"{ns}::a_t", "b_load": f"{ns}::b_t", "c_load": f"{ns}::c_t",
               "c_store": f"{ns}::c_t"}
    unresolved = [slot for slot, hook in fusion.slots if hook.function is not None]
    if unresolved:
        raise ArgumentError(f"{', '.join(unresolved)}: a Python function is a hook of blasdx.numba.device_api, which "
                            f"compiles it with Numba; execute() takes built-in names, scale() and C++ expressions")
    hooks = [(slot, storage[slot], None if hook.is_identity else hook.expression)
             for slot, hook in fusion.slots]
    declarations = sorted({hook.declaration for _, hook in fusion.slots if hook.declaration})
    spelled = [(p.name, f"{ns}::{p.cpp_type}" if p.cpp_type == "scalar_t" else p.cpp_type) for p in parameters]
    return {"parameters": spelled, "fusion_identity": fusion.is_identity, "hooks": hooks,
            "declarations": declarations, "bias": fusion.bias,
            "bias_rows_alike": fusion.bias_rows_alike, "scale_a": fusion.scale_a, "scale_b": fusion.scale_b,
            "scale_block": PROMOTION_K, "grid": grid, "called_activations": called_activations, "gate": fusion.gate,
            "gate_expression": GATES.get(fusion.gate, "")}


def render_batched_kernel(plan: BatchedPlan, name: str, fusion: Fusion = NO_FUSION) -> str:
    """The complete source of the batched kernel behind a Block() descriptor's ``execute()``, ``name`` its kernel
    name."""
    ns = BATCHED_NAMESPACE
    kernel = plan.kernel  # the block GEMM laid out for the kernel (blasdx.plan.kernel_plan)
    return template("kernel.cu.j2").render(
        common=render_common(), device=render_block(kernel, ns, own_kernel=True), ns=ns,
        threads=kernel.threads, min_blocks=launch_min_blocks(kernel, fusion.bias), kernel_name=name,
        c_in_registers=kernel.c_in_registers, swizzled=kernel.a.swizzle > 0, promote_k=kernel.promote_k,
        **fusion_context(ns, fusion, plan.kernel_parameters(fusion.bias, fusion.scaled)),
    )


# Bytes of the accumulator's and the scalars' C types (render_numba_unit's static_asserts).
_CPP_BYTES = {"float": 4, "double": 8, "int": 4}

# The plans whose device API blasdx.numba offers: a Block() descriptor's, and a Grid() or Grouped() descriptor's (its
# tile's block GEMM, with the K loop and tile helpers of templates/grid.cuh.j2, and the groups' scheduler of
# templates/grouped.cuh.j2).
NumbaPlan = GemmPlan | GridPlan


def numba_unit_identity(plan: NumbaPlan, fusion: Fusion = NO_FUSION) -> str:
    """A text that determines render_numba_unit(plan, ns, fusion)'s source (ns is made from it) without
    rendering it, as kernel_identity does for execute()'s kernels."""
    return f"{_generator_digest(templates_dir())} numba {plan!r} {fusion!r}"


def render_numba_unit(plan: NumbaPlan, ns: str, fusion: Fusion = NO_FUSION) -> str:
    """The block GEMM of ``plan`` (a Grid() plan's tile, with grid.cuh.j2's pieces; a Grouped() plan's, with
    grouped.cuh.j2's too) with its device API as extern "C" functions named ``<ns>_<function>``
    (templates/numba.cu.j2), with ``fusion``'s hooks, for a Numba kernel's link (blasdx.numba)."""
    check_namespace(ns)
    tile_loop = ""  # which tile loop numba.cu.j2 wraps: none, "grid" (numba_grid.cuh.j2), "grouped" (numba_grouped.cuh.j2)
    max_groups = schedule_size = 0
    if isinstance(plan, GridPlan):
        tile: GemmPlan = plan.tile
        tile_loop = "grouped" if plan.grouped else "grid"
        device = render_grouped_block(plan, ns) if plan.grouped else render_grid_block(plan, ns)
        max_groups, schedule_size = plan.max_groups, plan.schedule_size
    else:
        tile, device = plan, render_block(plan, ns)
    value = tile.mma_acc_type or tile.acc_type
    scalar = tile.scalar_type.removeprefix("blasdx::complex<").removesuffix(">")
    wide = 2 if tile.is_complex else 1
    return template("numba.cu.j2").render(
        common=render_common(), device=device, ns=ns, tile_loop=tile_loop, acc_size=tile.accumulator_size,
        acc_bytes=_CPP_BYTES[value] * wide, scalar_bytes=_CPP_BYTES[scalar] * wide, scalar_part=scalar,
        complex_scalar=tile.is_complex, a_layout=tile.a.layout, b_layout=tile.b.layout, a_pack=tile.a.pack,
        b_pack=tile.b.pack, max_groups=max_groups, schedule_size=schedule_size,
        partial_loads=tile.a.pack == 1 and tile.b.pack == 1, a_precision=tile.a.precision,
        **fusion_context(ns, fusion, called_activations=bool(tile_loop)))

