"""The grid-level GEMM (Grid(), Tile, Stages) without a GPU: operators and their rules, the
suggested tile, threads and stages, explain(), NVRTC compiles of the grid kernel for every
precision family and the SMs the installed NVRTC targets, with hooks and a bias, and a
user kernel built on a Grid() descriptor's device_source()."""

from __future__ import annotations

import itertools
import pickle
import re

import pytest

import blasdx
from blasdx import (
    SM,
    Alignment,
    Arrangement,
    Block,
    BlockDim,
    DescriptorError,
    Grid,
    IncompleteDescriptorError,
    InstructionFamily,
    LeadingDimension,
    MaxAlignment,
    Precision,
    Size,
    Stages,
    Tile,
    Type,
    UnsupportedError,
    compile_kernel,
)
from blasdx.compiler import supported_archs

RCR = Arrangement("row_major", "col_major", "row_major")
F16F32 = Precision("float16", "float16", "float32")


def arrangement_of(code: str) -> Arrangement:
    """Arrangement from a code such as "rcr" (row-major A, column-major B, row-major C)."""
    return Arrangement(*({"r": "row_major", "c": "col_major"}[x] for x in code))


def grid(*ops, size=(4096, 4096, 4096), sm=900):
    desc = Size(*size) + F16F32 + RCR + SM(sm) + Grid()
    for op in ops:
        desc = desc + op
    return desc


# --- operators and rules --------------------------------------------------------------------

def test_operators_read_back_as_code():
    for op in (Grid(), Tile(128, 64, 32), Stages(3)):
        assert eval(repr(op), vars(blasdx)) == op


@pytest.mark.parametrize("make,match", [
    (lambda: Tile(0, 64, 32), "m must be >= 1"),
    (lambda: Tile(64, 64), "Tile.k is required"),
    (lambda: Stages(1), "between 2 and 8"),
    (lambda: Stages(9), "between 2 and 8"),
    (lambda: Stages(2.0), "must be an int"),
])
def test_bad_operator_values(make, match):
    with pytest.raises(DescriptorError, match=match):
        make()


def test_block_and_grid_together_are_refused_in_any_order():
    for desc in (lambda: Size(8, 8, 8) + Block() + Grid(), lambda: Grid() + Size(8, 8, 8) + Block()):
        with pytest.raises(DescriptorError, match=r"Block\(\) and Grid\(\) are two ways to run"):
            desc()


@pytest.mark.parametrize("op", [Tile(64, 64, 32), Stages(3)])
def test_tile_and_stages_need_grid(op):
    desc = Size(64, 64, 64) + SM(900) + Block() + op  # composing is order-free: checked when used
    with pytest.raises(DescriptorError, match=r"add Grid\(\)"):
        desc.plan  # noqa: B018


def test_sizes_past_32_bit_indices_are_refused():
    with pytest.raises(UnsupportedError, match=r"m = 2147483648 is 2\*\*31 or more"):
        Size(2**31, 8, 8) + Grid()


def test_more_tiles_than_an_int_counts_are_refused():
    with pytest.raises(UnsupportedError, match="2\\*\\*31 or more"):
        grid(size=(2**30, 2**30, 64)).plan  # noqa: B018


def test_packed_precisions_are_refused():
    with pytest.raises(UnsupportedError, match="packed int4 or binary"):
        Size(64, 64, 256) + Precision("int4", "int4", "int32") + Grid()


def test_stages_past_shared_memory_name_the_fitting_count():
    with pytest.raises(UnsupportedError, match=r"over SM 900's limit.*use Stages\(4\)"):
        grid(Stages(8)).plan  # noqa: B018


def test_a_tile_past_shared_memory_names_the_fix():
    with pytest.raises(UnsupportedError, match="use a smaller Tile"):
        grid(Tile(1024, 512, 64)).plan  # noqa: B018


def test_a_bad_tile_is_reported_as_the_tile():
    with pytest.raises(DescriptorError, match=r"the block tile Tile\(64, 64, 16\) of this Grid\(\) descriptor"):
        grid(Tile(64, 64, 16), InstructionFamily("wgmma"), BlockDim(96)).plan  # noqa: B018


def test_execution_needs_block_or_grid():
    with pytest.raises(IncompleteDescriptorError, match=r"the Block operator .* or the Grid operator"):
        (Size(64, 64, 64) + SM(900)).plan  # noqa: B018


def test_grid_traits_on_a_block_descriptor_say_so():
    with pytest.raises(DescriptorError, match=r"belongs to grid-level GEMMs; add Grid\(\)"):
        (Size(64, 64, 64) + SM(900) + Block()).tile  # noqa: B018


# --- what the planner suggests ----------------------------------------------------------------

@pytest.mark.parametrize("prec,complex_,sm,tile,threads", [
    (("float16", "float16", "float32"), False, 900, (256, 128, 64), 512),
    (("bfloat16",) * 3, False, 900, (256, 128, 64), 512),
    (("float16", "float16", "float32"), False, 800, (128, 128, 32), 256),
    (("tfloat32", "tfloat32", "float32"), False, 800, (128, 128, 16), 256),
    (("int8", "int8", "int32"), False, 800, (128, 128, 64), 256),
    (("int8", "int8", "int32"), False, 900, (256, 128, 128), 512),
    (("tfloat32", "tfloat32", "float32"), False, 900, (256, 128, 32), 512),
    (("float64",) * 3, False, 900, (128, 128, 32), 256),
    (("float32",) * 3, False, 900, (128, 128, 64), 256),
    (("float32",) * 3, True, 900, (64, 64, 8), 256),
])
def test_suggested_tile_and_threads(prec, complex_, sm, tile, threads):
    desc = Size(4096, 4096, 4096) + Precision(*prec) + RCR + SM(sm) + Grid()
    if complex_:
        desc = desc + Type("complex")
    assert tuple(desc.tile) == tuple(desc.suggested_tile) == tile
    assert desc.block_dim.x == threads
    assert desc.shared_memory_size == desc.stages * desc.plan.tile.shared_memory_size <= 232448


def test_float32_grid_tiles_take_8x8_micro_tiles_and_block_gemms_8x4():
    """A Grid() tile runs a long K loop: 8x8 micro-tiles (64 outputs a thread); the batched
    kernel's GEMM of the same size stays at 8x4. Row-major A with column-major B spreads a
    micro-tile's columns (group_n 1: a warp's B loads in different banks), and C, whose 16-byte
    runs would then cross groups, moves element by element."""
    for arrangement, group_n in (("rcr", 1), ("rrr", 4), ("ccr", 4), ("crc", 4)):
        arr = arrangement_of(arrangement)
        tile = (Size(4096, 4096, 4096) + Precision("float32") + arr + SM(900) + Grid()).plan.tile
        block = (Size(128, 128, 32) + Precision("float32") + arr + SM(900) + Block() + BlockDim(256)
                 + Alignment(16, 16, 16)).plan
        assert (tile.tile_m, tile.tile_n, tile.group_m, tile.group_n) == (8, 8, 4, group_n), arrangement
        assert (block.tile_m, block.tile_n, block.group_n) == (8, 4, group_n), arrangement
        assert tile.fma_vector_loads and block.fma_vector_loads
        assert block.c_vector == (group_n == 4 or arrangement.endswith("c")), arrangement


def test_float64_grid_tiles_pipeline_a_warp_per_64x32_where_a_and_b_are_k_major():
    """128 x 128 tiles: a warp per 64 x 32 (128 accumulators) whose K loop loads the next step's
    fragments while it multiplies; smaller tiles keep a warp per 32 x 32 (more warps), and so do
    the other arrangements and the block GEMMs."""
    for size, tile, threads, warp_tile, pipelined in (
            ((4096, 4096, 4096), (128, 128, 32), 256, (64, 32), True),
            ((1000, 1000, 4096), (64, 128, 32), 256, (32, 32), False),
            ((300, 200, 100), (64, 64, 32), 128, (32, 32), False)):
        desc = Size(*size) + Precision("float64") + RCR + SM(900) + Grid()
        assert (tuple(desc.tile), desc.block_dim.x) == (tile, threads)
        assert (desc.plan.tile.tile_m, desc.plan.tile.tile_n) == warp_tile
        assert desc.plan.tile.pipelined_fragments == pipelined
        assert ("fa[now ^ 1]" in desc.source) == pipelined
    assert desc.plan.tile.k_loop_unroll == "all"
    assert "each warp loads the next step's fragments" in (Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900)
                                                           + Grid()).explain(width=0)
    assert "each warp loads the next step's fragments" not in desc.explain(width=0)
    assert (Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid() + BlockDim(512)).block_dim.x == 512
    rrr = Size(4096, 4096, 4096) + Precision("float64") + arrangement_of("rrr") + SM(900) + Grid()
    assert not rrr.plan.tile.pipelined_fragments and "fa[now ^ 1]" not in rrr.source
    assert not (Size(64, 64, 64) + Precision("float64") + RCR + SM(900) + Block()).plan.pipelined_fragments
    sm80 = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(800) + Grid()
    assert sm80.block_dim.x == 512 and not sm80.plan.tile.pipelined_fragments  # measured on an H100 only


def test_the_k_loop_stays_rolled_where_two_steps_of_fragments_do_not_fit_in_registers():
    """128x128x32 float64 tiles on 512 threads (128 registers) spilled in the unrolled K loop;
    the batched kernels and block GEMMs with room keep theirs unrolled."""
    wide = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid() + BlockDim(512)
    assert wide.block_dim.x == 512 and wide.plan.tile.k_loop_unroll == "none"
    assert "#pragma unroll 1\n  for (int k0" in wide.source
    for desc in (Size(4096, 4096, 4096) + Precision("float64") + arrangement_of("rrr") + SM(900) + Grid(),
                 Size(48, 48, 48) + Precision("float64") + RCR + SM(900) + Block(),
                 Size(128, 128, 64) + Precision("float16", "float16", "float32") + RCR + SM(800) + Block()):
        assert (desc.plan.tile if desc.is_grid else desc.plan).k_loop_unroll == "all", desc
        assert "#pragma unroll\n  for (int k0" in desc.source, desc


def test_fma_tiles_stage_c_in_shared_memory_for_hooks_column_major_and_complex_c():
    """Where it measured faster (and, with hooks, compiles in half the time); plain row-major
    float32 C and mma tiles write from registers."""
    f32 = Size(4096, 4096, 4096) + Precision("float32") + RCR + SM(900) + Grid()
    assert not f32.plan.stages_c(epilogue_hooks=False) and f32.plan.stages_c(epilogue_hooks=True)
    col_major_c = f32.replace(arrangement_of("rcc"))
    assert col_major_c.plan.stages_c(epilogue_hooks=False)
    assert (f32 + Type("complex") + Stages(4)).plan.stages_c(epilogue_hooks=False)
    assert not (f32 + Type("complex")).plan.stages_c(epilogue_hooks=False)  # two blocks' three stages: too small
    assert not grid().plan.stages_c(epilogue_hooks=True)
    fused = blasdx.pipeline.fusion(f32, None, "gelu", None, None, None, None, True)
    assert "store_block_tile_staged(acc" in blasdx.pipeline.kernel_source(f32.plan, fused)
    assert "store_block_tile_staged(acc" not in blasdx.pipeline.kernel_source(f32.plan)
    assert "store_block_tile_staged(acc" in blasdx.pipeline.kernel_source(col_major_c.plan)
    epilogue = next(line for line in f32.explain(width=0).splitlines() if line.startswith("epilogue"))
    assert "no shared memory" in epilogue and "with hooks or a bias, the accumulators staged" in epilogue
    assert "epilogue: the accumulators staged" in col_major_c.explain(width=0)


def test_fma_tiles_with_row_major_b_or_complex_values_take_two_blocks_an_sm():
    """Where it measured faster (benchmarks/RESULTS.md, Grid against cuBLAS): float32 FMA tiles with
    row-major B, or complex ones, ask ptxas for two blocks an SM and take at most three stages;
    column-major B, fewer tiles than an H100 has SMs, or stages that do not fit twice keep one."""
    def plan(arrangement, size=(4096, 4096, 4096), *more):
        desc = Size(*size) + Precision("float32") + arrangement_of(arrangement) + SM(900) + Grid()
        for op in more:
            desc = desc + op
        return desc.plan

    for arrangement in ("rrr", "crr", "rrc", "crc"):
        two = plan(arrangement)
        assert (two.blocks_per_sm, two.stages) == (2, 3), arrangement
        assert "__launch_bounds__(256, 2)" in blasdx.pipeline.kernel_source(two)
    for arrangement, stages in (("rcr", 3), ("ccc", 4)):  # RCR's tiles are 64 deep: three stages fit
        one = plan(arrangement)
        assert (one.blocks_per_sm, one.stages) == (1, stages), arrangement
        assert "__launch_bounds__(256, 1)" in blasdx.pipeline.kernel_source(one)
    assert plan("rcr", (2048, 2048, 2048), Type("complex")).blocks_per_sm == 2
    assert plan("rrr", (1000, 1000, 4096)).blocks_per_sm == 1  # 128 tiles of 64x128
    assert plan("rrr", (4096, 4096, 4096), Stages(4)).blocks_per_sm == 1  # four stages do not fit twice
    assert plan("rrr", (4096, 4096, 4096), Stages(2)).blocks_per_sm == 2
    sm80 = Size(4096, 4096, 4096) + Precision("float32") + arrangement_of("rrr") + SM(800) + Grid()
    assert sm80.plan.blocks_per_sm == 1  # measured on an H100 only
    rrr = Size(4096, 4096, 4096) + Precision("float32") + arrangement_of("rrr") + SM(900) + Grid()
    assert "two blocks share an SM (FMA tiles with row-major B" in rrr.explain(width=0)
    assert "two blocks share an SM" not in (Size(4096, 4096, 4096) + Precision("float32") + RCR + SM(900)
                                            + Grid()).explain(width=0)


@pytest.mark.parametrize("precision, arrangement, where", [
    ("float64", "rcr", "between its multiply's last two steps of k"),
    ("float64", "rrr", "between its multiply's last two steps of k"),
    ("float32", "rcr", "after its multiply"),
    ("float32", "rrr", "after its multiply"),
    ("float32", "ccc", "after its multiply"),
    ("complex", "rcr", "after its multiply"),
])
def test_the_cp_async_k_loop_copies_the_next_k_tile_among_the_multiply(precision, arrangement, where):
    """Issued before the multiply, the copies of the K tile stages - 1 ahead held every warp at
    the start of each K tile while the math pipe waited (an H100, float64 4096^3: copies left out
    of the loop, 46 -> 56 TFLOP/s). mma.sync tiles issue them after the step of k before the
    last (multiply_between); FMA tiles after the multiply (GridPlan.copies_between_steps says
    why)."""
    desc = (Size(4096, 4096, 4096) + Precision("float32" if precision == "complex" else precision)
            + arrangement_of(arrangement) + SM(900) + Grid())
    if precision == "complex":
        desc = desc + Type("complex")
    source = blasdx.pipeline.kernel_source(desc.plan)
    loop = source[source.index("for (int kt = kt_begin; kt < kt_end; ++kt)"):]
    copies = loop.index("start_copies(kt + stages - 1)")
    between = where.startswith("between")
    assert desc.plan.copies_between_steps == between
    if between:
        assert loop.index("multiply_between(sa, sb, acc, a_load, b_load, [&]") < copies < loop.index("});")
        assert "between();" in source
    else:
        assert "multiply_between(" not in loop and loop.index("multiply(sa, sb, acc") < copies
    assert copies < loop.index("copy_commit()")
    assert f"issues a K tile's copies {where}" in desc.explain(width=0)


def test_fma_tiles_on_one_block_an_sm_load_the_next_steps_while_they_multiply():
    """The vector FMA loop of a Grid() tile is software-pipelined where A is row-major and its
    block has the SM's registers (measured faster); column-major A measured slower, two blocks an
    SM (128 registers) spilled the second buffer, and block GEMMs (short K loops, many blocks an
    SM) keep the plain loop."""
    pipelined = "av[now ^ 1]"
    one = Size(4096, 4096, 4096) + Precision("float32") + RCR + SM(900) + Grid()
    two = one.replace(arrangement_of("rrr"))
    assert one.plan.fma_pipelined and pipelined in blasdx.pipeline.kernel_source(one.plan) and pipelined in one.source
    assert "loads the next four steps of k from shared memory while it multiplies" in one.explain(width=0)
    assert one.replace(arrangement_of("rcc")).plan.fma_pipelined
    deep = one + Tile(64, 128, 128) + Stages(2)
    assert deep.plan.tile.fma_vector_loads and not deep.plan.fma_pipelined  # unrolled 32 steps: the plain loop
    assert not two.plan.fma_pipelined and pipelined not in blasdx.pipeline.kernel_source(two.plan)
    ccc = one.replace(arrangement_of("ccc"))
    assert not ccc.plan.fma_pipelined and "loads the next four steps" not in ccc.explain(width=0)
    assert not (Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()).plan.fma_pipelined
    block = Size(64, 64, 64) + Precision("float32") + RCR + SM(900) + Block()
    assert block.plan.fma_vector_loads and pipelined not in block.source
    assert pipelined not in (one + Type("complex")).source  # complex values take the scalar loop


@pytest.mark.parametrize("arrangement", ["rrr", "ccr", "crc", "crr"])
def test_float64_grid_tiles_elsewhere_take_a_warp_per_64x32(arrangement):
    """Fewer registers where A or B runs along m or n (512 threads' 128 registers spilled): 256
    threads, 32 deep on SM 900 (an H100, 4096^3 RRR: 0.713x -> 0.793x torch.matmul against 16
    deep), 16 deep before SM 900 and on shrunk tiles (not measured)."""
    for size, sm, tile, threads in (((4096, 4096, 4096), 900, (128, 128, 32), 256),
                                    ((4096, 4096, 4096), 800, (128, 128, 16), 256),
                                    ((1000, 1000, 4096), 900, (64, 128, 16), 128)):
        desc = Size(*size) + Precision("float64") + arrangement_of(arrangement) + SM(sm) + Grid()
        assert (tuple(desc.tile), desc.block_dim.x) == (tile, threads)


def test_the_tile_shrinks_to_small_problems():
    assert tuple(grid(size=(5, 7, 3)).tile) == (64, 16, 16)  # wgmma: m to 64, n and k to 16
    assert tuple(grid(size=(5, 7, 3), sm=800).tile) == (16, 16, 16)
    assert tuple(grid(size=(300, 3000, 40)).tile) == (128, 128, 48)  # 3 x 24 tiles: enough


def test_the_tile_halves_until_the_problem_has_tiles_for_the_sms():
    assert tuple(grid(size=(1000, 1000, 4096)).tile) == (64, 128, 64)  # 128 tiles, not 32 of 256x128
    assert grid(size=(1000, 1000, 4096)).block_dim.x == 128  # a warpgroup per 64 rows
    assert tuple(grid(size=(100, 3000, 40)).tile) == (64, 64, 48)  # 94 tiles
    assert tuple(grid(size=(64, 64, 8192)).tile) == (64, 64, 64)  # one tile: no smaller than 64
    assert tuple(grid(size=(2048, 2048, 2048)).tile) == (256, 128, 64)  # 128 tiles already


def test_split_k_is_compiled_in_only_where_tiles_are_few():
    few = grid(size=(256, 256, 16384))
    assert few.plan.split_k and "combine_splits" in few.source
    assert few.plan.splits(16, 132) == 9 and few.plan.splits(16 * 9, 132) == 1  # a batch of 9 fills the GPU
    assert few.plan.workspace_bytes(16, 9) == 256 + 16 * 9 * few.plan.tile.accumulator_size * 128 * 4
    many = grid()
    assert not many.plan.split_k and "combine_splits" not in many.source and many.plan.splits(1, 132) == 1
    assert not grid(size=(64, 64, 256)).plan.split_k  # a K loop too short to split


def test_settable_tile_stages_and_threads():
    desc = grid(Tile(128, 64, 32), Stages(3), BlockDim(128))
    assert tuple(desc.tile) == (128, 64, 32) and desc.stages == 3 and desc.block_dim.x == 128
    assert tuple(desc.suggested_tile) == (256, 128, 64)
    assert desc.tile_descriptor == Size(128, 64, 32) + F16F32 + RCR + SM(900) + Block() + BlockDim(128)


def test_leading_dimensions_describe_the_whole_matrices():
    desc = grid(LeadingDimension(4100, 4104, 4108))
    assert (desc.plan.a.ld, desc.plan.b.ld, desc.plan.c.ld) == (4100, 4104, 4108)
    assert "LeadingDimension" not in desc.tile_descriptor.operator_map


def test_suggested_stages_fill_shared_memory_up_to_four_and_follow_the_k_loop():
    assert grid().stages == 4
    assert grid(size=(4096, 4096, 64)).stages == 2  # one K tile: nothing more to keep in flight
    assert grid(size=(4096, 4096, 192)).stages == 3


def test_suggested_leading_dimensions_are_whole_16_bytes():
    assert tuple(grid(size=(3001, 2999, 1001)).suggested_leading_dimension) == (1008, 1008, 3000)
    f64 = Size(5, 7, 3) + Precision("float64") + RCR + SM(900) + Grid()
    assert tuple(f64.suggested_leading_dimension) == (4, 4, 8)


def test_descriptors_pickle():
    desc = grid(Tile(128, 64, 32))
    assert pickle.loads(pickle.dumps(desc)) == desc


def test_explain_names_tiles_loop_order_and_instruction():
    text = grid(size=(4000, 3000, 1000)).explain(width=0)
    for part in ("16x24 = 384 tiles of 256x128", "Tile(256, 128, 64), suggested", "16 steps of 64 per tile",
                 "4 stages (suggested)", "4 x 49152 = 196608 bytes", "512 threads each (suggested)",
                 "groups of 8 tile rows", "instruction: wgmma_f16", "wgmma conditions:", "warpgroup tiling: 4 warpgroups"):
        assert part in text, part
    assert "cp.async copies the next 2 K tiles" in grid(Stages(3), InstructionFamily("mma")).explain(width=0)
    assert "lda 1008, ldb 1008" in grid(size=(3001, 2999, 1001)).explain(width=0)  # 2-byte copies: pad to 16 bytes
    assert "copies narrower" not in grid(size=(3000, 3000, 1000)).explain(width=0)
    assert "copies: TMA where A and B start" in text and "128 more threads" in text
    assert "copies: TMA" not in grid(InstructionFamily("mma")).explain(width=0)  # the tile is not wgmma's
    shared = grid(Tile(64, 128, 64), BlockDim(128), Stages(3)).explain(width=0)
    assert "two blocks share an SM" in shared


@pytest.mark.parametrize("size, prec, extra, item", [
    ((64, 64, 64), F16F32, (), True),
    ((64, 64, 512), F16F32, (), True),  # wgmma: any k one block holds
    ((100, 70, 45), Precision("float32"), (), True),
    ((32, 32, 64), Precision("float64"), (), True),
    ((32, 32, 128), Precision("float64"), (), False),  # mma.sync past ITEM_BLOCK_MAX_K
    ((64, 64, 256), Precision("float32"), (), False),  # FMA past ITEM_BLOCK_MAX_K
    ((256, 256, 64), F16F32, (), False),  # more than one block's shared memory
    ((64, 64, 64), F16F32, (Tile(64, 64, 32),), False),  # the grid kernel as described
    ((64, 64, 64), F16F32, (Stages(3),), False),
    ((64, 64, 64), F16F32, (BlockDim(256),), False),
], ids=["wgmma", "wgmma-k512", "fma-odd", "f64-k64", "f64-k128", "fma-k256", "too-big", "tile", "stages", "threads"])
def test_a_batch_item_that_one_block_gemm_holds_has_its_block_plan(size, prec, extra, item):
    desc = Size(*size) + prec + RCR + SM(900) + Grid()
    for op in extra:
        desc = desc + op
    plan = desc.plan
    assert (plan.item_block is not None) == item
    if item:
        block = Size(*size) + prec + RCR + SM(900) + Block()
        assert plan.item_block == block.plan
    assert f"{'batched kernel of Size' if item else 'this grid kernel, whatever the batch'}" in desc.explain(width=0)


def test_a_call_runs_the_item_block_from_the_batch_that_fills_the_gpu_with_it(monkeypatch):
    """pipeline.launched_kernel: the item's block kernel from a batch of its resident blocks on,
    the grid kernel for fewer items, a single problem, or a descriptor without item_block (the
    kernels stand in for loaded ones: no GPU here)."""
    from types import SimpleNamespace

    from blasdx.plan import GemmPlan, GridPlan

    loaded = []

    def fake_kernel(plan, fusion, device_id):
        loaded.append(plan)
        return SimpleNamespace(plan=plan, resident_blocks=100)

    monkeypatch.setattr(blasdx.pipeline, "kernel", fake_kernel)
    def launched(desc, batch):
        return blasdx.pipeline.launched_kernel(desc.plan, (16, 16, 16), blasdx.pipeline.NO_FUSION, 0, batch).plan

    small = grid(size=(64, 64, 64))
    assert isinstance(launched(small, 100), GemmPlan) and isinstance(launched(small, 5000), GemmPlan)
    assert isinstance(launched(small, 99), GridPlan) and isinstance(launched(small, None), GridPlan)
    loaded.clear()
    assert isinstance(launched(grid(Tile(64, 64, 32), size=(64, 64, 64)), 5000), GridPlan)
    assert len(loaded) == 1  # no item kernel was loaded to count its blocks


def test_the_item_block_leaves_the_grid_kernel_alone():
    """The grid kernel's name and source identity do not depend on item_block (another kernel's plan)."""
    from dataclasses import replace

    from blasdx.codegen.render import kernel_identity

    plan = grid(size=(64, 64, 64)).plan
    assert plan.item_block is not None
    without = replace(plan, item_block=None)
    assert plan.kernel_name == without.kernel_name
    assert kernel_identity(plan, "k") == kernel_identity(without, "k")
    text = grid(size=(32, 32, 128)).replace(Precision("float64")).explain(width=0)
    assert "k = 128 is over 64 on mma_f64" in text


# --- compiles ---------------------------------------------------------------------------------

FAMILIES = [  # precisions, complex, SM
    (("float16", "float16", "float32"), False, 900),
    (("bfloat16",) * 3, False, 900),
    (("float16",) * 3, False, 750),
    (("tfloat32", "tfloat32", "float32"), False, 800),
    (("float32",) * 3, False, 800),
    (("float64",) * 3, False, 800),
    (("int8", "int8", "int32"), False, 800),
    (("float8_e4m3", "float8_e4m3", "float32"), False, 890),
    (("float32",) * 3, True, 800),
    (("float16",) * 3, True, 750),
]


def _grid_kernel_at_alignment(desc, alignment: int):
    """The plan and PTX of desc's grid kernel for arrays aligned to ``alignment`` bytes (16: TMA)."""
    from .test_accumulator_api import ptx_of

    plan = blasdx.plan.grid_with_alignment(desc.plan, (alignment,) * 3)
    source = blasdx.pipeline.kernel_source(plan, blasdx.pipeline.fusion(desc, None, None, None, None, None, None, False))
    return plan, ptx_of(source, plan.kernel_name)


@pytest.mark.compile
@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("float16",) * 3, ("float64",) * 3],
                         ids=["f16f32", "f16-quads", "f64"])
def test_the_epilogue_reads_c_a_group_ahead_of_its_writes(prec):
    """With beta != 0 the epilogue's reads of C come in groups, each before any of the group's
    writes (c_read_group): in the PTX, every run of global loads between stores holds 8 or more
    (it held 3 or 4, each pair's read waiting on the write before it). The kernel of 16-byte aligned
    arrays, as execute() runs on CuPy's and PyTorch's."""
    from .test_accumulator_api import global_loads_between_stores

    desc = Size(256, 256, 64) + Precision(*prec) + RCR + SM(900) + Grid()
    assert "where beta != 0, C read a few instruction tiles at a time, ahead of their writes" in desc.explain(width=0)
    runs = global_loads_between_stores(_grid_kernel_at_alignment(desc, 16)[1])
    assert len(runs) >= 2 and min(runs) >= 8, runs


@pytest.mark.compile
def test_the_float64_epilogue_writes_a_pair_of_c_in_one_store():
    """The pair path's 16-byte pairs go out as one store (store_global), and only the element
    fallback writes single values: two a pair. NVVM had written every float64 pair as two 8-byte
    stores (256 st.global.f64), and the kernel spilled 16 bytes on arrays aligned to less than 16
    bytes. (8-byte pairs stay as written: store_global cost float32 RRR 8% there.) No spill under
    NVRTC 12.9 or 13 (CI runs both): see the test below for the former's K loop."""
    desc = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()
    for alignment in (16, 8):
        plan, ptx = _grid_kernel_at_alignment(desc, alignment)
        pairs = len(re.findall(r"st\.global\.v4\.b32", ptx))
        singles = len(re.findall(r"st\.global\.f64\b", ptx))
        assert pairs and singles == 2 * pairs, (alignment, pairs, singles)
        resources = blasdx.pipeline.compile_for_arch(plan, 900).resources
        assert resources is not None and not resources.spills, (alignment, resources)


@pytest.mark.compile
def test_narrow_float64_copies_go_a_step_earlier_in_the_k_loop_under_nvrtc_12():
    """Pipelined float64 tiles whose A or B is copied in pieces under 16 bytes (arrays aligned to 8)
    issue the next K tile's copies after step 1 of 4 under NVRTC 12 (ptxas 12.9 spilled 16 bytes into
    the K loop after step 2) and after step 2 under NVRTC 13; other kernels, the 16-byte one that
    CuPy's and PyTorch's arrays take included, render as before."""
    desc = Size(4096, 4096, 4096) + Precision("float64") + RCR + SM(900) + Grid()
    narrow = blasdx.plan.grid_with_alignment(desc.plan, (8,) * 3)
    wide = blasdx.plan.grid_with_alignment(desc.plan, (16,) * 3)
    rrr = Size(4096, 4096, 4096) + Precision("float64") + arrangement_of("rrr") + SM(900) + Grid()
    assert narrow.tile.copies_a_step_earlier_before_nvrtc13 and not wide.tile.copies_a_step_earlier_before_nvrtc13
    assert not rrr.plan.tile.pipelined_fragments and not rrr.plan.tile.copies_a_step_earlier_before_nvrtc13
    assert "__CUDACC_VER_MAJOR__ < 13 ? k_steps - 3" in blasdx.pipeline.kernel_source(narrow)
    for plan in (wide, rrr.plan):
        assert "__CUDACC_VER_MAJOR__" not in blasdx.pipeline.kernel_source(plan)
    # The step the installed NVRTC takes, as the compiler sees it (a float64 step of k is 8 deep).
    step = 1 if blasdx.compiler.nvrtc_version()[0] < 13 else 2
    probe = desc.device_source("g") + f"static_assert(g::between_k0 == {step} * 8);\nextern \"C\" __global__ void probe() {{}}\n"
    blasdx.compile_kernel(probe, "probe", sm=900)


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["rcr", "rrr"])
def test_the_cp_async_kernels_16_bit_epilogue_reads_each_quad_just_before_its_write(arrangement):
    """16-bit C's quads are read a group ahead in the TMA kernel (GridPlan.quads_c_read_ahead) but
    one quad at a time in the cp.async kernel (arrays aligned to less than 16 bytes), whose 128
    registers a thread the group's reads spilled into the K loop: float16 4096^3 RCR at 8-byte
    alignment 334 bytes of spill stores (70 before the read-ahead, 44 now); H100 1.06-1.17x."""
    from .test_accumulator_api import global_loads_between_stores

    layouts = {"r": "row_major", "c": "col_major"}
    desc = (Size(4096, 4096, 4096) + Precision("float16") + Arrangement(*(layouts[x] for x in arrangement)) + SM(900)
            + Grid())
    tma, tma_ptx = _grid_kernel_at_alignment(desc, 16)
    cp_async, cp_async_ptx = _grid_kernel_at_alignment(desc, 8)
    assert tma.quads_c_read_ahead and not cp_async.quads_c_read_ahead
    assert min(global_loads_between_stores(tma_ptx)) >= 8
    assert max(global_loads_between_stores(cp_async_ptx)) <= 4  # a quad's reads, then its store
    assert "on arrays aligned to less than 16 bytes (no TMA) a quad at a time, just before its write" in desc.explain(width=0)
    assert blasdx.pipeline.compile_for_arch(cp_async, 900).resources.spill_store_bytes <= 64


def test_the_16_bit_epilogue_reads_c_ahead_unless_a_cp_async_kernel_is_short_of_registers():
    """The quads read-ahead goes by registers, not by TMA alone: SM(800)'s cp.async kernels of 256
    threads (255 registers used) read ahead (measured 1.04-1.21x at beta 0.5), a 512-thread tile
    of 128 registers a thread reads each quad just before its write, at any alignment, and
    explain() says so."""
    roomy = Size(4096, 4096, 4096) + Precision("float16") + RCR + SM(800) + Grid()
    short = roomy + Tile(256, 128, 32) + BlockDim(512)
    for alignment in (16, 8):
        assert blasdx.plan.grid_with_alignment(roomy.plan, (alignment,) * 3).quads_c_read_ahead
        assert not blasdx.plan.grid_with_alignment(short.plan, (alignment,) * 3).quads_c_read_ahead
    assert "a quad at a time" not in roomy.explain(width=0)
    assert ("where beta != 0, C read a quad at a time, just before its write (the kernel's 128 registers a thread "
            "are few)") in short.explain(width=0)
    assert "ahead of their writes" not in short.explain(width=0)


def test_fma_tiles_read_c_ahead_where_a_block_has_the_sm_to_itself_and_b_is_column_major():
    """FMA tiles' epilogue reads 8 values of C before writing any (store_partial<8>) on one block an
    SM with column-major B; elsewhere one at a time, as measured (GridPlan.fma_c_read_ahead)."""
    alone = Size(256, 256, 64) + Precision("float32") + RCR + SM(900) + Grid()
    row_major_b = Size(64, 64, 256) + Precision("float32") + arrangement_of("rrr") + SM(900) + Grid()
    shared = Size(4096, 4096, 4096) + Precision("float32") + arrangement_of("rrr") + SM(900) + Grid()
    assert alone.plan.blocks_per_sm == 1 and alone.plan.fma_c_read_ahead == 8 and "store_partial<8>" in alone.source
    assert "C read 8 values a thread at a time, ahead of their writes" in alone.explain(width=0)
    assert "ahead of their writes" not in shared.explain(width=0)
    assert row_major_b.plan.blocks_per_sm == 1 and "store_partial<1>" in row_major_b.source
    assert shared.plan.blocks_per_sm == 2 and "store_partial<1>" in shared.source


@pytest.mark.compile
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f"{'c' if f[1] else ''}{f[0][0]}-{f[0][2]}_sm{f[2]}")
def test_the_grid_kernel_compiles(family):
    prec, complex_, sm = family
    desc = Size(1000, 600, 333) + Precision(*prec) + RCR + SM(sm) + Grid()
    if complex_:
        desc = desc + Type("complex")
    arch = max(a for a in supported_archs() if a <= 900)
    assert desc.compile(arch=arch).cubin[:4] == b"\x7fELF"
    hooks = dict(epilogue="negate", prologue="negate") if complex_ else dict(epilogue="relu", c_load="negate")
    assert desc.compile(arch=arch, bias=True, **hooks).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f"{'c' if f[1] else ''}{f[0][0]}-{f[0][2]}_sm{f[2]}")
def test_the_split_k_kernel_compiles(family):
    """Few tiles and a long K loop: the kernel with combine_splits, whose workspace Python sizes
    (a static_assert holds the two to the same accumulator)."""
    prec, complex_, sm = family
    desc = Size(200, 150, 4096) + Precision(*prec) + RCR + SM(sm) + Grid()
    if complex_:
        desc = desc + Type("complex")
    assert desc.plan.split_k
    arch = max(a for a in supported_archs() if a <= 900)
    assert desc.compile(arch=arch, bias=True).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["".join(x) for x in itertools.product("rc", repeat=3)])
def test_every_arrangement_compiles(arrangement):
    for prec in (("float16", "float16", "float32"), ("float64",) * 3):
        desc = Size(300, 200, 100) + Precision(*prec) + arrangement_of(arrangement) + SM(900) + Grid()
        assert desc.compile(arch=900).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
def test_a_user_kernel_on_the_device_source_compiles():
    source = grid(size=(333, 250, 190)).device_source("g") + r"""
extern "C" __global__ void tiles(const g::a_t* a, const g::b_t* b, g::c_t* c) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int t = blockIdx.x; t < g::block_tiles; t += gridDim.x) {
    int row0, col0;
    g::block_tile_origin(t, row0, col0);
    g::accumulator acc = g::make_accumulator();
    g::mainloop(a, b, row0, col0, smem, acc);
    g::store_block_tile(acc, c, row0, col0, 1.0f, 0.0f);
  }
}
"""
    assert "mainloop" in source and "problem_lda" in source
    kernel = compile_kernel(source, "tiles", sm=900)
    assert kernel.cubin[:4] == b"\x7fELF"


# --- TMA (sm_90: a producer warpgroup copies A and B by tensor maps) ---------------------------

WGMMA_FAMILIES = [("float16", "float16", "float32"), ("bfloat16", "bfloat16", "float32"), ("float16",) * 3,
                  ("tfloat32", "tfloat32", "float32"), ("float8_e4m3", "float8_e5m2", "float32"),
                  ("int8", "int8", "int32")]


def copies_in(source: str, name: str) -> str:
    """The body of load_<name>(global, ld, shared) in a rendered source."""
    start = source.index(f"void load_{name}(const {name}_t* global, long long ld, {name}_t* shared) {{")
    return source[start:source.index("\n}", start)]


@pytest.mark.parametrize("prec,shifted", [(F16F32, True), (Precision("int8", "int8", "int32"), True),
                                          (Precision("float32"), False)], ids=["f16", "i8", "f32"])
def test_rows_off_16_byte_boundaries_move_in_shifted_16_byte_pieces(prec, shifted):
    """Rows of 1- and 2-byte elements off 16-byte boundaries (an odd leading dimension, or a
    pointer only 2-byte aligned) are copied in 16-byte pieces cut from aligned loads, not
    element by element and synchronously; 4-byte elements keep 4-byte cp.async."""
    odd_k = grid(size=(4096, 4096, 4095)).replace(prec)  # A's and B's rows are 4095 elements apart
    plan = blasdx.plan.grid_with_alignment(odd_k.plan, (16, 16, 16))
    source = blasdx.pipeline.kernel_source(plan)
    assert not plan.tma
    for name in "ab":
        copies = copies_in(source, name)
        assert ("copy_runs_shifted" in copies and "copy_runs<" not in copies) == shifted, copies
    two_byte_pointers = blasdx.plan.grid_with_alignment(grid().replace(prec).plan, (2, 16, 16))
    source = blasdx.pipeline.kernel_source(two_byte_pointers)
    assert ("copy_runs<" not in copies_in(source, "a")) == shifted
    assert "copy_runs<" in copies_in(source, "b")  # B's pointer is 16-byte aligned: wide copies
    assert ("A in 16-byte pieces cut from aligned loads" in odd_k.explain(width=0)) == shifted


def test_a_users_kernel_keeps_element_copies_where_its_shared_memory_may_be_unaligned():
    """copy_runs_shifted stores 16 bytes at a time: in a user's kernel, whose shared-memory
    pointers are only as aligned as the descriptor's Alignment says, it runs with MaxAlignment."""
    block = Size(64, 64, 64) + F16F32 + RCR + SM(900) + Block()
    assert "copy_runs_shifted" not in copies_in(blasdx.pipeline.device_source(block.plan), "a")
    aligned = block + MaxAlignment
    assert "copy_runs_shifted" in copies_in(blasdx.pipeline.device_source(aligned.plan), "a")


def test_the_grid_kernel_trusts_its_planned_alignment_where_a_users_kernel_checks():
    """The grid kernel's plan has the arrays' own alignment, so where the narrow copy is a shifted
    one its copies do not test the pointer at run time (both copies compiled in cost about a
    second of compile time); a user's kernel, whose pointers may be any offsets, keeps the test."""
    aligned = blasdx.plan.grid_with_alignment(grid().plan, (8, 8, 8))
    assert "global) %" not in copies_in(blasdx.pipeline.kernel_source(aligned), "a")
    # where the narrow copy is element-wise, the test stays (without it ptxas made float64 slower)
    f64 = blasdx.plan.grid_with_alignment(grid().replace(Precision("float64")).plan, (16, 16, 16))
    assert "global) % 16 == 0" in copies_in(blasdx.pipeline.kernel_source(f64), "a")
    block = Size(64, 64, 64) + F16F32 + RCR + SM(900) + Block() + MaxAlignment
    assert "global) % 16 == 0" in copies_in(blasdx.pipeline.device_source(block.plan), "a")


@pytest.mark.compile
def test_the_shifted_copies_compile():
    desc = grid(size=(127, 8191, 8191))
    plan = blasdx.plan.grid_with_alignment(desc.plan, (2, 2, 16))
    assert "copy_runs_shifted" in blasdx.pipeline.kernel_source(plan)
    assert blasdx.pipeline.compile_for_arch(plan, 900).cubin[:4] == b"\x7fELF"
    # execute()'s batched kernel of a Block() descriptor, on arrays 1-byte aligned
    block = Size(64, 64, 64) + Precision("int8", "int8", "int32") + RCR + SM(800) + Block() + LeadingDimension(65, 65, 64)
    batched = blasdx.plan.with_alignment(block.plan, (1, 1, 4))
    assert "copy_runs_shifted" in copies_in(blasdx.pipeline.kernel_source(batched), "b")
    assert blasdx.pipeline.compile_for_arch(batched, 800).cubin[:4] == b"\x7fELF"


def test_tma_runs_on_16_byte_aligned_wgmma_tiles_only():
    aligned = blasdx.plan.grid_with_alignment(grid().plan, (16, 16, 16))
    assert aligned.tma and aligned.threads == aligned.tile.threads + 128
    assert aligned.block_dim == (aligned.threads, 1, 1)
    assert not blasdx.plan.grid_with_alignment(grid().plan, (8, 16, 16)).tma  # A's pointer
    assert not blasdx.plan.grid_with_alignment(grid(size=(4096, 4096, 4093)).plan, (16, 16, 16)).tma  # odd ld
    assert not blasdx.plan.grid_with_alignment(grid(sm=800).plan, (16, 16, 16)).tma  # no wgmma tile
    assert not blasdx.plan.grid_with_alignment(grid(InstructionFamily("mma")).plan, (16, 16, 16)).tma
    f64 = Size(512, 512, 512) + Precision("float64") + RCR + SM(900) + Grid()
    assert not blasdx.plan.grid_with_alignment(f64.plan, (16, 16, 16)).tma


def test_tma_slabs_follow_the_swizzled_tile():
    desc = grid().replace(Arrangement("col_major", "row_major", "row_major"))
    p = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    a, b = p.tma_operand("a"), p.tma_operand("b")
    # column-major A: m contiguous, 128-byte slabs of 64 m and tile k rows, one per 64 of the tile's m
    assert (a.k_inner, a.slabs, a.slab_rows, a.slab_elements) == (False, p.tile.m // 64, p.tile.k, 64)
    assert (b.k_inner, b.slabs, b.slab_rows) == (False, p.tile.n // 64, p.tile.k)
    assert a.slabs * a.slab_bytes == p.tile.a.smem_bytes and b.slabs * b.slab_bytes == p.tile.b.smem_bytes
    assert p.consumer_registers * p.tile.threads + 128 * 24 <= 65536
    # The producer keeps 24 registers a thread: the 512 threads of the 256x128 tile get 112 (96 at launch).
    assert (p.tile.threads, p.launch_registers, p.consumer_registers) == (512, 96, 112)


def test_tma_blocks_share_an_sm_where_stages_and_registers_allow():
    def plan(*ops):
        return blasdx.plan.grid_with_alignment(grid(*ops).plan, (16, 16, 16))

    assert plan().blocks_per_sm == 1  # 4 stages of 48 KiB
    small = plan(Tile(64, 128, 64), BlockDim(128), Stages(3))  # 3 x 24 KiB, 64 accumulators a thread
    assert small.blocks_per_sm == 2 and small.launch_registers == 128
    assert plan(Tile(128, 128, 64), BlockDim(256), Stages(3)).blocks_per_sm == 1  # 80 registers: too few
    # what the producer gives back covers what the tile's threads take, at the compiled count
    assert small.registers_balance(small.launch_registers)
    assert not small.registers_balance(small.launch_registers - 16)


def _compile_tma(desc, arch=900, **hooks):
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.tma
    fusion = blasdx.pipeline.fusion(desc, hooks.pop("prologue", None), hooks.pop("epilogue", None), None, None,
                                    hooks.pop("c_load", None), None, hooks.pop("bias", False))
    source = blasdx.pipeline.kernel_source(aligned, fusion)
    assert "produce_range" in source and "__grid_constant__ blasdx::tensor_map" in source
    return blasdx.pipeline.compile_for_arch(aligned, arch, fusion)


@pytest.mark.compile
@pytest.mark.parametrize("prec", WGMMA_FAMILIES, ids=lambda p: f"{p[0]}-{p[2]}")
def test_the_tma_kernel_compiles(prec):
    desc = Size(1000, 600, 336) + Precision(*prec) + RCR + SM(900) + Grid()
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"
    # a prologue: the tile multiplies by mma.sync from the same TMA-copied stages
    assert _compile_tma(desc, bias=True, epilogue="relu", prologue="negate").cubin[:4] == b"\x7fELF"
    split = Size(192, 128, 4096) + Precision(*prec) + RCR + SM(900) + Grid()
    assert split.plan.split_k and _compile_tma(split, bias=True).cubin[:4] == b"\x7fELF"


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["".join(x) for x in itertools.product("rc", repeat=3)])
def test_the_tma_kernel_compiles_in_every_arrangement(arrangement):
    desc = Size(320, 256, 192) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"


def test_the_tma_launch_puts_tensor_maps_in_aligned_slots_after_the_others():
    import ctypes

    from blasdx.runtime.launch import ArgumentBlock
    from blasdx.runtime.tensor_map import TENSOR_MAP_ALIGNMENT, TENSOR_MAP_BYTES

    block = ArgumentBlock(11, 2)
    first, second = block.map_addresses
    assert first % TENSOR_MAP_ALIGNMENT == 0 and second == first + TENSOR_MAP_BYTES
    base = ctypes.addressof(block.values)
    assert first >= base + 11 * 16 and second + TENSOR_MAP_BYTES <= base + len(block.values)
    slots = (ctypes.c_void_p * 13).from_address(block.address)
    assert list(slots)[-2:] == [first, second]


@pytest.mark.parametrize("arrangement", ["rcr", "crr", "rrr", "ccr"])
def test_tensor_maps_see_the_whole_matrices_contiguous_dimension_first(arrangement):
    import numpy as np

    from blasdx.runtime.arguments import MatrixView
    from blasdx.runtime.launch import operand_layout

    desc = Size(1000, 600, 320) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    plan = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    m, n, k = 1000, 600, 320
    for name, (rows, cols) in (("a", (m, k)), ("b", (k, n))):
        whole = getattr(plan, name)
        view = MatrixView(name, 0, 0, np.dtype(np.float16), (3, rows, cols), (rows * cols + 64, 0, 0), 2, None)
        layout = operand_layout(plan, name, view, 3)
        contiguous = cols if whole.layout == "row_major" else rows
        assert (layout.inner, layout.outer) == (contiguous, rows * cols // contiguous)
        assert layout.batch == 3 and layout.batch_stride == rows * cols + 64 and layout.ld == whole.ld
        part = plan.tma_operand(name)
        assert (layout.box_inner, layout.box_outer) == (part.slab_elements, part.slab_rows)
        assert layout.box_inner * 2 == layout.swizzle == 128


def test_clusters_of_two_share_b_where_tiles_allow():
    def plan(*ops, size=(4096, 4096, 4096)):
        return blasdx.plan.grid_with_alignment(grid(*ops, size=size).plan, (16, 16, 16))

    p = plan()
    assert p.cluster and p.launch_grid(1, 132) == 132 and p.launch_grid(1, 131) == 130
    assert p.launch_grid(1, 1000) == 2 * 8 * 32  # 16 tile rows in 8 pairs, 32 tile columns
    assert not plan(Tile(128, 128, 64), size=(128, 8192, 4096)).cluster  # one tile row
    assert not plan(size=(200, 150, 4096)).cluster  # split-K compiled in
    assert not blasdx.plan.grid_with_alignment(grid().plan, (8, 16, 16)).cluster  # no TMA
    assert "clusters of two" in grid().explain(width=0)


@pytest.mark.compile
@pytest.mark.parametrize("arrangement", ["rcr", "rrr", "ccr", "crc"])
def test_the_cluster_kernel_compiles(arrangement):
    desc = Size(2000, 2048, 512) + F16F32 + arrangement_of(arrangement) + SM(900) + Grid()
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.cluster
    source = blasdx.pipeline.kernel_source(aligned)
    assert "__cluster_dims__(2, 1, 1)" in source and "tensor_copy_multicast" in source
    assert _compile_tma(desc).cubin[:4] == b"\x7fELF"
    assert _compile_tma(desc, bias=True, epilogue="gelu").cubin[:4] == b"\x7fELF"
