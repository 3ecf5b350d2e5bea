"""The grid-level GEMM (Grid(), Tile, Stages) without a GPU: the suggested tile, threads and stages,
the K loop and epilogue the planner picks, explain(), the batch item that one block GEMM holds, and the
TMA and cluster plans of sm_90 tiles."""

from __future__ import annotations

import itertools
import pickle
from dataclasses import replace

import pytest

import blasdx
from blasdx import (
    SM,
    Alignment,
    Arrangement,
    BatchInvariant,
    Block,
    BlockDim,
    Grid,
    Grouped,
    InstructionFamily,
    LeadingDimension,
    Precision,
    Size,
    Stages,
    Tile,
    Type,
)
from blasdx.arch import accepted_sms, shared_memory_limit
from blasdx.describe.families import common
from blasdx.errors import UnsupportedError
from blasdx.plan.grid import SPLIT_PART_K, grid_with_alignment

from ..support import F16F32, RCR, arrangement_of, grid


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
    deep), 16 deep before SM 900; tiles under 128 x 128 a warp per 32 x 32, 32 deep on SM 900 (an H200, 1000^3
    RRR: 0.47x -> 0.67x cuBLAS against 64 x 128 x 16 on 128 threads, which spilled)."""
    for size, sm, tile, threads in (((4096, 4096, 4096), 900, (128, 128, 32), 256),
                                    ((4096, 4096, 4096), 800, (128, 128, 16), 256),
                                    ((1000, 1000, 4096), 900, (64, 128, 32), 256),
                                    ((1000, 1000, 4096), 800, (64, 128, 16), 256)):
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


def test_wgmma_tiles_take_192_rows_where_their_waves_take_less_time():
    # 3072^3: 288 tiles of 256 rows take 3 waves of 132 blocks, and 384 of 192 rows 3 too, each 3/4 the time
    assert (grid(size=(3072, 3072, 3072)).tile.m, grid(size=(3072, 3072, 3072)).block_dim.x) == (192, 384)
    assert grid(size=(3000, 3000, 12288)).tile.m == 192  # deep K alike (no last wave to split)
    assert grid(size=(1536, 1536, 1536)).replace(Precision("tfloat32", "tfloat32", "float32")).tile.m == 192
    assert grid(size=(1504, 1400, 1040)).tile.m == 192  # 66 tiles or 88: one wave either way
    for size in ((4096, 4096, 4096),  # 512 tiles in 4 waves, 704 of 192 in 6: 256 rows
                 (2048, 2048, 2048),  # 128 tiles in one wave, 176 in two
                 (6144, 5120, 2048),  # 8 waves of 256 rows or 10 of 192: 0.94 of the time, under the margin
                 (1536, 1536, 128)):  # a K loop under SHORTER_TILE_MIN_K (not measured)
        assert grid(size=size).tile.m == 256, size
    assert grid(size=(3000, 2000, 1000)).tile.m == grid(size=(1536, 1536, 256)).tile.m == 192  # shallower K alike
    assert grid(BlockDim(512), size=(3072, 3072, 3072)).tile.m == 256  # threads given: a warpgroup a 64 rows
    fp8 = grid(size=(3072, 3072, 3072)).replace(Precision("float8_e4m3", "float8_e4m3", "float32"))
    assert fp8.tile.m == 128  # promoted partial sums keep their 128 x 128 tile
    lines = grid(size=(3072, 3072, 3072)).explain(width=0)
    assert ("384 tiles of 192x128 per batch item (Tile(192, 128, 64), suggested: 192 rows, not 256: 384 tiles of 192 "
            "take 3 waves of 132 blocks, 288 of 256 3, whose tiles each take 4/3 the time)") in lines
    assert "not 256" not in grid(Tile(192, 128, 64), size=(3072, 3072, 3072)).explain(width=0)


def test_a_batched_call_runs_the_tile_whose_waves_take_least_time():
    # the suggested tile is fitted to one item; a batch's waves of 132 tiles may take less time with taller ones
    def plan(size, prec=F16F32):
        return (Size(*size) + prec + RCR + SM(900) + Grid()).plan

    def tile(p):
        return p.tile.m, p.tile.n

    bf16 = Precision("bfloat16", "bfloat16", "bfloat16")
    one = plan((1024, 1024, 1024), bf16)
    assert tile(one) == (64, 128) and [tile(g) for g in one.batch_grids] == [(256, 128), (192, 128)]
    assert one.for_batch(None) is one and one.for_batch(1) is one  # 128 tiles of 64 rows: one wave
    assert tile(one.for_batch(16)) == (256, 128)  # 512 tiles of 256 rows: 4 waves, of 64 rows 16
    assert tile(plan((768, 768, 768)).for_batch(12)) == (64, 128)  # 7 waves of 64 rows, 2 of 256 (216 tiles)
    assert tile(plan((384, 640, 512), bf16).for_batch(48)) == (192, 128)  # 4 waves of 192 rows, 22 of 64x64
    assert one.for_batch(16).batch_grids == () and one.for_batch(16).item_block is None
    assert replace(one, batch_grids=()).kernel_name == one.kernel_name  # not in the grid kernel's name
    # no switch: a tile given, BatchInvariant(), a gated epilogue, Grouped(), float32 FMA
    desc = Size(1024, 1024, 1024) + bf16 + RCR + SM(900) + Grid()
    assert one.for_batch(4) is one  # 128 tiles of 256 rows fill no wave: they would split their K loops
    for fixed in (desc + Tile(64, 128, 64), desc + Stages(3), desc + BlockDim(256), desc + BatchInvariant(),
                  desc.replace(Precision("float32", "float32", "float32"))):
        assert fixed.plan.batch_grids == (), fixed
    assert plan((1024, 2048, 1024)).gated().batch_grids == ()
    assert (Size(128, 1024, 1024) + bf16 + RCR + SM(900) + Grouped()).plan.batch_grids == ()
    assert "the grid kernel's tile on a batch is this one or 256x128, 192x128" in desc.explain(width=0)


def test_batched_float64_and_promoted_fp8_calls_fit_their_tiles_to_the_batch():
    def plan(size, prec, arrangement=RCR, sm=900):
        return (Size(*size) + Precision(*prec) + arrangement + SM(sm) + Grid()).plan

    f64 = ("float64",) * 3
    item = plan((1536, 1536, 64), f64)  # 288 tiles of 128 x 64 at 0.82 (K-major): 3 waves; 144 of 128 x 128: 2
    assert (item.tile.m, item.tile.n) == (128, 64) and [(g.tile.m, g.tile.n) for g in item.batch_grids] == [(128, 128)]
    assert (item.wave_rate, item.batch_grids[0].wave_rate) == (0.82, 1.0)
    assert item.for_batch(1) is item
    assert (item.for_batch(8).tile.m, item.for_batch(8).tile.n) == (128, 128)  # 9 waves of 128 x 128, 18 of 128 x 64
    assert plan((1536, 1536, 64), f64, Arrangement("row_major", "row_major", "row_major")).wave_rate == 0.89
    assert plan((1536, 1536, 64), f64, sm=1000).batch_grids == ()  # the waves of SM 900's 132 SMs only
    assert plan((64, 64, 64), ("float16",) * 3, sm=800).batch_grids == ()  # mma.sync 16-bit: no batch tiles
    fp8 = ("float8_e4m3", "float8_e4m3", "float32")
    deep = plan((2048, 2048, 256), fp8)  # 256 tiles of 128 x 128 and 176 of 128 x 192: 2 waves each
    assert (deep.tile.n, [g.tile.n for g in deep.batch_grids]) == (128, [192])
    assert deep.for_batch(3).tile.n == 192 and deep.for_batch(3).wave_rate == common.WIDE_PROMOTED_TILE_RATE
    assert not deep.for_batch(3).tile.promotes_in_pairs and deep.for_batch(1) is deep
    short = plan((64, 7168, 2048), fp8)  # 64 rows: one warpgroup, whose adds nothing overlaps: never 192 wide
    assert all(g.tile.n != 192 for g in short.batch_grids) and short.for_batch(16).tile.n != 192
    invariant = (Size(2048, 2048, 4096) + Precision(*fp8) + RCR + SM(900) + Grid() + BatchInvariant()).explain(width=0)
    assert "128x192 per batch item (Tile(128, 192, 128), suggested);" in invariant  # no reason without its words
    text = (Size(1536, 1536, 64) + Precision(*f64) + RCR + SM(900) + Grid()).explain(width=0)
    assert "this one or 128x128 (fitted to an item's 1536 rows)" in text
    assert "each tile at its rate on a wave's outputs: 128x64 0.82, 128x128 1.00" in text


def test_split_k_is_compiled_in_only_where_tiles_are_few_or_k_deep():
    few = grid(size=(256, 256, 16384))
    part = few.plan.tile.accumulator_size * 128 * 4
    assert few.plan.split_k and "combine_splits" in few.source
    # every tile, in as many parts as fill the GPU without a second round: 8 x 16 = 128 parts on 132 blocks (9 would
    # leave 12 parts for a second round, the call 2/9 of a tile's time against 1/8)
    assert few.plan.splits(16, 132) == 8 and few.plan.split_units(16, 132, 8) == 16
    assert few.plan.splits(16, 264) == 16 and few.plan.splits(40, 132) == 3 and few.plan.splits(60, 132) == 2
    assert few.plan.workspace_bytes(16, 132, 8) == 256 + 16 * 8 * part
    assert few.plan.workspace_counter_bytes(16, 132, 8) == 256  # the counters, zero in a kept workspace
    # a batch of 9: a wave of 132 tiles, then the last 12 in 6 parts (1/6 + 6 x 400/16384 of a tile's time)
    assert few.plan.splits(16 * 9, 132) == 6 and few.plan.split_units(16 * 9, 132, 6) == 12
    assert few.plan.blocks(9, 132, 6) == 132 and few.plan.workspace_bytes(16 * 9, 132, 6) == 256 + 12 * 6 * part
    assert few.plan.splits(16 * 33, 132) == 1  # whole waves
    many = grid()
    assert not many.plan.split_k and "combine_splits" not in many.source and many.plan.splits(1, 132) == 1
    assert not grid(size=(64, 64, 256)).plan.split_k  # a K loop too short to split
    assert not grid(size=(3072, 3072, 4096)).plan.split_k and grid(size=(3072, 3072, 8192)).plan.split_k
    shallow = grid(size=(256, 256, 2048)).plan  # few tiles, K under SPLIT_TAIL_MIN_K: a batch that fills the GPU whole
    assert shallow.split_k and shallow.splits(shallow.tiles * 17, 132) == 1


def test_deep_k_loops_on_fewer_tiles_than_a_wave_take_as_many_stages_as_fit():
    """Each block's K loop is the call's time there: more stages keep more of it in flight (one block an SM)."""
    deep = grid(size=(1024, 1024, 8192)).plan  # 128 tiles of 64x128, 24 KiB a stage
    assert (deep.tile.m, deep.tile.n, deep.tiles, deep.stages) == (64, 128, 128, 8)
    assert grid_with_alignment(deep, (16, 16, 16)).blocks_per_sm == 1
    assert "8 stages (suggested: as many as fit, up to 8, where 128 tiles (fewer than a wave) run K loops of k = 8192" in (
        grid(size=(1024, 1024, 8192)).explain(width=0))
    assert grid(size=(2048, 1024, 8192)).plan.stages == 6  # 128x128 tiles, a buffer of C's TMA stores beside them
    small = grid(size=(768, 512, 8192))  # 96 tiles of 64x64: DEEP_K_SMALL_TILE_STAGES
    assert (small.plan.tile.m, small.plan.tile.n, small.plan.stages) == (64, 64, 6)
    assert "6 stages (suggested: as many as fit, up to 6, where 96 tiles" in small.explain(width=0)
    assert "; 4 on a batch of a wave of tiles or more)" in small.explain(width=0)
    grouped = Size(1024, 1024, 8192) + F16F32 + RCR + SM(900) + Grouped()
    assert "as many as fit" not in grouped.explain(width=0)
    assert grid(size=(1024, 1024, 4096)).plan.stages == 4  # shallower K: no gain measured
    assert grid(size=(2560, 2560, 8192)).plan.stages == 4  # 200 tiles: more than a wave
    assert grid(size=(256, 256, 16384)).plan.stages == 4  # 16 tiles: every K loop split over the SMs instead
    assert grid(Stages(3), size=(1024, 1024, 8192)).plan.stages == 3  # given
    # a batch of a wave of tiles or more: the suggested stages (GridPlan.batch_stages); one item keeps the deep ones
    assert deep.for_batch(None) is deep and deep.for_batch(1).stages == 8 and deep.batch_stages == 4
    two = deep.for_batch(2)
    assert (two.tile.m, two.stages, two.batch_stages) == (64, 4, 0) and two.kernel_name != deep.kernel_name
    assert grid(Stages(8), size=(1024, 1024, 8192)).plan.kernel_name == deep.kernel_name  # batch_stages: no kernel's
    assert (Size(1024, 1024, 8192) + F16F32 + RCR + SM(900) + Grouped()).plan.stages == 4  # rows come at the call
    assert grid(size=(1024, 1024, 8192), sm=800).plan.stages == 4  # mma.sync tiles: not measured


def test_explain_says_whether_and_how_k_loops_split():
    def line(size):
        return next(x for x in grid(size=size).explain(width=0).splitlines() if x.startswith("split-K:"))

    assert "512 tiles a batch item, 66 or more, and k = 4096: the last wave's K loops split from k = 8192" in line(
        (4096, 4096, 4096))
    assert line((64, 64, 256)) == "split-K: none (a K loop of 4 steps, fewer than 8)"
    assert line((16384, 16384, 8192)) == "split-K: none (8192 tiles a batch item, 1024 or more)"
    deep, few = line((3072, 3072, 8192)), line((256, 256, 16384))
    assert "split into the parts that end the last wave soonest" in deep and "parts as fill it" not in deep
    assert "each tile's K loop splits into as many parts as fill it in one round" in few


def test_the_last_wave_splits_into_the_parts_that_end_it_soonest():
    """Deep K (SPLIT_TAIL_MIN_K): the tiles past the call's whole waves split, all their parts at once, into the
    count that minimizes 1 / parts + parts x SPLIT_PART_K / k; none where the last wave is full or would
    need a second round of parts."""
    plan = blasdx.plan.grid_with_alignment(grid(Tile(256, 128, 64), size=(2304, 1024, 16384)).plan, (8, 16, 16))  # no TMA
    assert plan.split_k and not plan.cluster and plan.blocks_per_sm == 1 and plan.tiles == 9 * 8
    cost = SPLIT_PART_K / 16384
    best = min(range(1, 17), key=lambda p: 1 / p + (cost * p if p > 1 else 0))
    assert best == 6 and plan.splits(72, 66) == best and plan.split_units(72, 66, best) == 6
    assert plan.blocks(1, 66, best) == 66 and plan.workspace_counter_bytes(72, 66, best) == 256
    assert plan.splits(66 + 40, 66) == 1  # 40 tiles in two parts would take two rounds
    assert plan.splits(2 * 66, 66) == 1 and plan.split_units(2 * 66, 66, 1) == 0


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
    assert f"{'batched kernel of Size' if item else 'grid kernel, whatever the batch'}" in desc.explain(width=0)


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


def test_tiles_whose_wgmma_the_tma_kernels_registers_cannot_hold_copy_by_cp_async():
    # ptxas compiles all of the TMA kernel within its launch's registers: 640 threads start with 96, and a 64 x 192
    # wgmma's 96 accumulators need about 122 (C7602); such a tile runs the cp.async kernel, and explain() says why
    def aligned(desc):
        return blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))

    for wide, words in ((Tile(256, 192, 64), "640 threads start with 96 registers each"),
                        (Tile(192, 256, 64), "512 threads start with 128 registers each")):
        assert not aligned(grid(wide)).tma and not aligned(grid(wide)).cluster
        assert f"(no TMA: the TMA kernel's {words}" in grid(wide).explain(width=0)
    # at the limit, or many accumulators a thread but one wgmma's within the launch's registers: TMA
    for fits in (Tile(192, 192, 64), Tile(128, 256, 64), Tile(192, 128, 64), BlockDim(384)):
        assert aligned(grid(fits)).tma, fits
    fp8 = grid(Tile(192, 192, 128)).replace(Precision("float8_e4m3", "float8_e4m3", "float32"))
    assert fp8.plan.tile.promote_k and aligned(fp8).tma
    with pytest.raises(UnsupportedError, match=r"Grouped\(\) runs Grid\(\)'s TMA kernel, but the TMA kernel's 640 "
                                               r"threads .* a tile at most 128 wide"):
        _ = (Size(128, 4096, 1024) + F16F32 + RCR + SM(900) + Grouped() + Tile(256, 192, 64)).plan


@pytest.mark.compile
@pytest.mark.parametrize("tile, tma", [(Tile(192, 192, 64), True), (Tile(128, 256, 64), True),
                                       (Tile(192, 128, 64), True), (Tile(256, 192, 64), False)], ids=str)
def test_the_widest_tiles_compile_on_the_tma_kernel_or_else_cp_async(tile, tma):
    desc = grid(tile, size=(3072, 3072, 3072))
    plan = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    fusion = blasdx.pipeline.fusion(desc, None, None, None, None, None, None, False)
    resources = blasdx.pipeline.compile_for_arch(plan, 900, fusion).resources  # (256 x 192's TMA kernel: C7602)
    assert plan.tma == tma and resources is not None
    assert not resources.spills or not tma, resources  # (96 accumulators of 128 registers: cp.async's spill a few)


def test_clusters_of_two_share_b_where_tiles_allow():
    def plan(*ops, size=(4096, 4096, 4096)):
        return blasdx.plan.grid_with_alignment(grid(*ops, size=size).plan, (16, 16, 16))

    p = plan()
    assert p.cluster and p.launch_grid(1, 132) == 132 and p.launch_grid(1, 131) == 130
    assert p.launch_grid(1, 1000) == 2 * 8 * 32  # 16 tile rows in 8 pairs, 32 tile columns
    assert not plan(Tile(128, 128, 64), size=(128, 8192, 4096)).cluster  # one tile row
    tail = plan(Tile(256, 128, 64), size=(3072, 3072, 8192))  # split-K compiled in (the last wave's K loops): clusters split alike
    assert tail.split_k and tail.cluster and tail.splits(tail.tiles, 132) == 5
    assert tail.split_units(tail.tiles, 132, 5) == 144 % 66 and tail.blocks(1, 132, 5) == 132
    assert not blasdx.plan.grid_with_alignment(grid().plan, (8, 16, 16)).cluster  # no TMA
    assert "clusters of two" in grid().explain(width=0)


@pytest.mark.parametrize("sm", accepted_sms())
def test_every_suggested_tile_keeps_two_k_tiles_in_shared_memory(sm):
    """A Grid() descriptor without Tile plans on every SM: where two K tiles of the family's tile exceed the
    SM's shared memory (99 KiB: float32's and float64's 128 x 128 tiles), the suggestion is shallower."""
    for precision, arrangement, kind in itertools.product(
            [("float64",) * 3, ("float32",) * 3, ("float16", "float16", "float32"), ("int8", "int8", "int32")],
            ["rcr", "rrr", "ccc"], ["real", "complex"]):
        if kind == "complex" and precision[0] == "int8":
            continue
        desc = (Size(2048, 2048, 2048) + Precision(*precision) + Type(kind) + SM(sm) + Grid()
                + Arrangement(*({"r": "row_major", "c": "col_major"}[x] for x in arrangement)))
        assert desc.plan.stages >= 2 and desc.plan.kernel_shared_memory_size <= shared_memory_limit(sm), desc
    shallow = Size(4096, 4096, 28) + Precision("float64") + SM(sm) + Grid()  # k rounds up to 28 before halving
    assert shallow.tile.k % 4 == 0 and shallow.plan.stages >= 2  # whole steps of every float64 instruction


@pytest.mark.parametrize("arrangement, size, cols", [
    ("rrr", (1536, 1536, 1536), 64),  # 288 tiles of 128 x 64 in 3 waves, 144 of 128 x 128 in 2 (the second 12)
    ("ccc", (2560, 2560, 2560), 64),  # 800 in 7 waves, 400 in 4 (3.03)
    ("rrr", (3000, 3000, 3000), 128),  # 1128 in 9 waves, 576 in 5 (4.36): full waves either way
    ("rcr", (1536, 1536, 1536), 64),
    ("rcr", (2560, 2560, 2560), 128),  # K-major: 128 x 128 pipelined, 128 x 64 at 0.82 the rate (3.5 / 0.82 > 4)
], ids=["rrr-1536", "ccc-2560", "rrr-3000", "rcr-1536", "rcr-2560"])
def test_float64_tiles_take_64_columns_where_their_waves_take_less_time(arrangement, size, cols):
    desc = Size(*size) + Precision("float64") + arrangement_of(arrangement) + SM(900) + Grid()
    assert (tuple(desc.tile), desc.block_dim.x) == ((128, cols, 32), 256)
    said = desc.explain(width=0)
    assert ("suggested: 64 columns, not 128" in said) == (cols == 64)
    assert ("288 tiles of 128x64 take 3 waves of 132 blocks, 144 of 128x128 2" in said) == (size == (1536,) * 3)
    assert tuple((desc + BlockDim(256)).tile)[:2] == (128, 128), "a given BlockDim keeps the tile"
    assert tuple(desc.replace(SM(800)).tile)[:2] == (128, 128), "waves measured on SM 900 alone (tuning)"
    assert tuple(desc.replace(SM(1000)).tile)[:2] == (128, 128), "Hopper's 132 SMs"


def test_a_float64_tile_as_narrow_as_n_is_not_said_to_follow_the_waves():
    desc = Size(65536, 64, 1024) + Precision("float64") + RCR + SM(900) + Grid()
    assert tuple(desc.tile)[:2] == (128, 64) and "64 columns, not 128" not in desc.explain(width=0)
