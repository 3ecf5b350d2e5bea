"""The grid-level GEMM (Grid()) on a GPU: every precision family, every arrangement, sizes
from 1 to thousands (primes, tall and skinny, K loops of one to hundreds of tiles, edges on
every side), batches, hooks and a bias at their global coordinates, Tile/Stages/BlockDim
set by hand, PyTorch tensors, and a user kernel built on the Grid() descriptor's
device_source(). Outputs are NaN-poisoned first and checked against float64 (TESTING.md)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import blasdx
from blasdx import (
    SM,
    Accumulation,
    Arrangement,
    BlockDim,
    Grid,
    InstructionFamily,
    LeadingDimension,
    Precision,
    Size,
    Stages,
    Tile,
    Type,
    compile_kernel,
)

from .gpu_support import Operand, assert_stops_with_a_trap, bound, relative_error, run_and_check

pytestmark = pytest.mark.gpu

LAYOUT = {"r": "row_major", "c": "col_major"}


def grid(prec, arr, size, sm=900, complex_=False, *extra):
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Grid()
    for op in extra:
        desc = desc + op
    return desc + Type("complex") if complex_ else desc


FAMILIES = [  # precisions, complex
    (("float16", "float16", "float32"), False),
    (("float16",) * 3, False),
    (("bfloat16", "bfloat16", "float32"), False),
    (("tfloat32", "tfloat32", "float32"), False),
    (("float32",) * 3, False),
    (("float64",) * 3, False),
    (("int8", "int8", "int32"), False),
    (("float8_e4m3", "float8_e5m2", "float32"), False),
    (("float32",) * 3, True),
    (("float64",) * 3, True),
    (("float16",) * 3, True),
]
FAMILY_IDS = ["f16f32", "f16", "bf16f32", "tf32", "f32", "f64", "i8", "fp8", "cf32", "cf64", "cf16"]


@pytest.mark.parametrize("size", [(1, 1, 1), (5, 7, 3), (127, 131, 137), (257, 129, 300)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_every_precision_family_at_odd_sizes(family, size):
    prec, complex_ = family
    run_and_check(grid(prec, "rcr", size, 900, complex_), np.random.default_rng(1), batch=None, alpha=2, beta=-1)


@pytest.mark.parametrize("arr", ["".join(x) for x in itertools.product("rc", repeat=3)])
@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("bfloat16",) * 3, ("float64",) * 3,
                                  ("float32",) * 3, ("int8", "int8", "int32")], ids=["f16f32", "bf16", "f64", "f32", "i8"])
def test_every_arrangement(prec, arr):
    run_and_check(grid(prec, arr, (200, 136, 150)), np.random.default_rng(2), batch=None, alpha=2, beta=-1)


@pytest.mark.parametrize("size", [(4000, 3000, 1000), (1000, 1000, 4096), (8191, 16, 64), (16, 8191, 64),
                                  (64, 64, 8192), (1, 4096, 4096), (2053, 1031, 1)], ids=lambda s: "x".join(map(str, s)))
def test_large_and_skinny_problems(size):
    run_and_check(grid(("float16", "float16", "float32"), "rcr", size), np.random.default_rng(3), batch=None)


@pytest.mark.parametrize("sm", [800, 900])
def test_batched(sm):
    run_and_check(grid(("float16", "float16", "float32"), "rrr", (130, 70, 90), sm), np.random.default_rng(4),
                  batch=3, alpha=1, beta=1)


@pytest.mark.parametrize("extra", [
    (Tile(64, 64, 32), Stages(3)),
    (Tile(64, 128, 64), Stages(2)),
    (Tile(128, 256, 64), Stages(3)),
    (Tile(192, 64, 16), Stages(5), BlockDim(384)),
    (InstructionFamily("mma"),),
    (Tile(32, 32, 16), BlockDim(64)),
], ids=["64x64x32s3", "64x128x64s2", "128x256x64s3", "192x64x16s5t384", "mma", "32x32x16t64"])
def test_tile_stages_and_threads_set_by_hand(extra):
    desc = grid(("float16", "float16", "float32"), "rcr", (300, 500, 700), 900, False, *extra)
    run_and_check(desc, np.random.default_rng(5), batch=2, alpha=1, beta=0)


@pytest.mark.parametrize("prec, extra", [
    (("float64",) * 3, (Tile(64, 64, 8),)),
    (("float64",) * 3, (Tile(64, 64, 12),)),
    (("float64",) * 3, (Tile(64, 64, 20),)),
    (("float64",) * 3, (Tile(128, 128, 24),)),
    (("float16", "float16", "float32"), (InstructionFamily("mma"), Tile(64, 64, 48))),
    (("float32",) * 3, (Tile(128, 128, 4),)),
    (("float32",) * 3, (Tile(128, 128, 8),)),
    (("float32",) * 3, (Tile(128, 128, 20),)),
], ids=["f64-k8", "f64-k12", "f64-k20", "f64-128x128x24", "f16-mma-k48", "f32-k4", "f32-k8", "f32-k20"])
def test_k_tiles_of_any_number_of_instruction_steps(prec, extra):
    """mma.sync tiles issue the next K tile's copies after the step of k before the last
    (multiply_between): once a K tile whatever its number of steps, partial ones included. FMA
    tiles (after the multiply) of 1, 2 and 5 groups of four steps beside them."""
    desc = grid(prec, "rcr", (300, 500, 700), 900, False, *extra)
    run_and_check(desc, np.random.default_rng(11), batch=2, alpha=1, beta=1)


@pytest.mark.parametrize("size, cols", [((3000, 1040, 300), 128), ((2048, 1040, 300), 64)], ids=["128x128", "128x64"])
@pytest.mark.parametrize("arr", ["rrr", "ccr", "crc", "ccc", "rcr"])
def test_float64_tiles_32_deep_in_every_arrangement(arr, size, cols):
    """float64 on SM 900 takes tiles 32 deep on 256 threads whatever the arrangement: 128 x 128, or 128 x 64 where
    its waves take less time (2048 x 1040: 272 tiles in 3 waves against 144 in 2, each twice the work)."""
    desc = grid(("float64",) * 3, arr, size)
    assert tuple(desc.tile) == (128, cols, 32) and desc.block_dim.x == 256
    run_and_check(desc, np.random.default_rng(12), batch=None, alpha=1, beta=1)


def test_leading_dimensions_past_the_matrices():
    desc = grid(("float16", "float16", "float32"), "rcr", (100, 120, 140), 900, False, LeadingDimension(150, 144, 136))
    run_and_check(desc, np.random.default_rng(6), batch=2, lds={"a": 150, "b": 144, "c": 136})


@pytest.mark.parametrize("prec", [("float16",) * 3, ("bfloat16",) * 3], ids=["f16", "bf16"])
@pytest.mark.parametrize("alpha, beta", [(1, 0), (2, -1)])
def test_16_bit_c_a_quad_at_a_time_where_the_kernel_is_short_of_registers(prec, alpha, beta):
    """The cp.async kernel of 512 threads (128 registers a thread: rows of A and B off 16 bytes)
    reads each quad of C just before its write (GridPlan.quads_c_read_ahead), whole tiles in quads
    and edge tiles in pairs and elements alike."""
    desc = grid(prec, "rcr", (520, 264, 96), 900, False, Tile(256, 128, 64), BlockDim(512))
    desc = desc + LeadingDimension(97, 97, 268)
    assert desc.plan.threads == 512 and not desc.plan.quads_c_read_ahead
    run_and_check(desc, np.random.default_rng(19), batch=2, alpha=alpha, beta=beta, lds={"a": 97, "b": 97, "c": 268})


@pytest.mark.parametrize("bias_shape", ["row", "column", "matrix"])
@pytest.mark.parametrize("prec, arr, m, n", [
    (("float16", "float16", "float32"), "rcr", 300, 260),
    # FMA tiles stage C in shared memory where hooks run: 16-byte runs of C, and single values
    # where the leading dimension (259, 301) puts runs off 16-byte boundaries
    (("float32",) * 3, "rcr", 300, 260), (("float32",) * 3, "rcr", 300, 259),
    (("float32",) * 3, "rrc", 300, 260), (("float32",) * 3, "rrc", 301, 260),
], ids=["f16f32", "f32", "f32-odd-ldc", "f32-c-col-major", "f32-c-col-major-odd-ldc"])
def test_hooks_and_bias_at_global_coordinates(bias_shape, prec, arr, m, n):
    import cupy

    k = 200
    desc = grid(prec, arr, (m, n, k))
    rng = np.random.default_rng(7)
    a, b, c = (Operand(desc, x, 2, None, rng) for x in "abc")
    shape = {"row": (n,), "column": (m, 1), "matrix": (2, m, n)}[bias_shape]
    bias = rng.standard_normal(shape).astype(np.float32)
    desc.execute(a.array, b.array, c.array, 2, -1, bias=cupy.asarray(bias), epilogue="gelu", prologue="negate")
    x = 2 * np.matmul(-a.values, -b.values) - c.values + bias
    from math import erf

    ref = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    assert relative_error(c.result(), ref) < 2e-3


ITEM_BLOCK_CASES = [  # precisions, arrangement, size, complex: each batch item one block GEMM
    (("float16", "float16", "float32"), "rcr", (64, 64, 64), False),  # wgmma
    (("bfloat16", "bfloat16", "float32"), "crc", (128, 64, 192), False),  # wgmma, k past ITEM_BLOCK_MAX_K
    (("float16",) * 3, "ccc", (48, 48, 48), False),  # mma.sync
    (("float32",) * 3, "rrr", (100, 70, 45), False),  # FMA, odd sizes
    (("float64",) * 3, "rcr", (32, 32, 32), False),
    (("int8", "int8", "int32"), "rcr", (64, 64, 64), False),
    (("float8_e4m3", "float8_e5m2", "float32"), "rcr", (64, 64, 64), False),
    (("tfloat32", "tfloat32", "float32"), "rcr", (64, 32, 32), False),
    (("float32",) * 3, "crr", (32, 32, 32), True),
]


def _items_the_block_kernel_fills(desc, operands) -> int:
    """Blocks the GPU runs at once of the batched block kernel that execute() would launch for
    ``desc`` on ``operands``' data (their pointers' and batch strides' alignment)."""
    from blasdx.plan import with_alignment
    from blasdx.runtime.arguments import check_operands, data_alignment

    views = check_operands(desc.plan, *(x.array for x in operands))
    item = with_alignment(desc.plan.item_block, tuple(data_alignment(v) for v in views))
    return blasdx.pipeline.kernel(item).resident_blocks


def _launched(desc, operands, fusion=None, bias=None):
    """The kernel execute() bound for this call's operands (their launch signature)."""
    import cupy

    from blasdx.codegen.hooks import NO_FUSION
    from blasdx.runtime.launch import launch_signature

    key, _ = launch_signature(cupy.ndarray, None, desc.plan, fusion or NO_FUSION, *(x.array for x in operands), bias)
    return blasdx.pipeline.BOUND_LAUNCHES.get(key).kernel


@pytest.mark.parametrize("prec, arr, size, complex_", ITEM_BLOCK_CASES,
                         ids=["wgmma", "wgmma-k192", "mma", "fma-odd", "f64", "i8", "fp8", "tf32", "cf32"])
def test_large_batches_of_one_block_items_run_the_block_kernel(prec, arr, size, complex_):
    """A batch of as many items as the GPU runs blocks of the item's block GEMM at once runs that
    batched kernel (GridPlan.item_block), right to the bound and NaN-poisoned C written whole; a
    batch of one item fewer, and a small one, run the grid kernel."""
    desc = grid(prec, arr, size, 900, complex_)
    assert desc.plan.item_block is not None
    rng = np.random.default_rng(19)
    fills = _items_the_block_kernel_fills(desc, [Operand(desc, x, 2, None, rng) for x in "abc"])
    for batch, block_kernel in ((fills, True), (fills - 1, False), (2, False)):
        operands = [Operand(desc, x, batch, None, rng) for x in "abc"]
        operands[2].poison_all()
        desc.execute(*(x.array for x in operands), alpha=2, beta=0)
        assert (_launched(desc, operands).plan.execution == "block") == block_kernel, (batch, fills)
        ref = 2 * np.matmul(operands[0].values, operands[1].values)
        out = operands[2].result()
        err = relative_error(out, ref) if bound(desc) > 0 else float(np.max(np.abs(out - ref)))
        assert err <= bound(desc), f"{desc!r}, batch {batch}: error {err:.3g}"


def test_the_block_kernel_of_large_batches_takes_hooks_and_a_bias():
    import cupy

    desc = grid(("float16", "float16", "float32"), "rcr", (64, 64, 64))
    rng = np.random.default_rng(20)
    batch = _items_the_block_kernel_fills(desc, [Operand(desc, x, 2, None, rng) for x in "abc"])
    a, b, c = (Operand(desc, x, batch, None, rng) for x in "abc")
    bias = rng.standard_normal(64).astype(np.float32)
    on_gpu = cupy.asarray(bias)
    desc.execute(a.array, b.array, c.array, 2, -1, bias=on_gpu, epilogue="relu", prologue="negate")
    fusion = blasdx.pipeline.fusion(desc, "negate", "relu", None, None, None, None, True)
    assert _launched(desc, (a, b, c), fusion, on_gpu).plan.execution == "block"
    ref = np.maximum(2 * np.matmul(-a.values, -b.values) - c.values + bias, 0)
    assert relative_error(c.result(), ref) < 2e-3


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    desc = grid(("bfloat16", "bfloat16", "float32"), "rcr", (1000, 700, 500))
    a = torch.randn(1000, 500, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(700, 500, device="cuda", dtype=torch.bfloat16).t()  # col-major (k, n)
    c = torch.full((1000, 700), float("nan"), device="cuda")
    desc.execute(a, b, c)
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-2


def test_a_user_kernel_on_the_device_source():
    """A user kernel of the Grid() descriptor's device_source(): its own tile loop (tiles in
    reverse order) and its own epilogue (each output squared, at global coordinates)."""
    import cupy

    m, n, k = 333, 250, 190
    desc = grid(("float16", "float16", "float32"), "rcr", (m, n, k))
    source = desc.device_source("g") + r"""
extern "C" __global__ void squares(const g::a_t* a, const g::b_t* b, float* c) {
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int t = g::block_tiles - 1 - blockIdx.x; t >= 0; t -= gridDim.x) {
    int row0, col0;
    g::block_tile_origin(t, row0, col0);
    g::accumulator acc = g::make_accumulator();
    g::mainloop(a, b, row0, col0, smem, acc);
    for (int i = 0; i < g::accumulator::size; ++i) {
      const int r = row0 + acc.row(i), col = col0 + acc.col(i);
      if (acc.in_bounds(i) && r < g::problem_m && col < g::problem_n) c[g::c_global(r, col)] = acc[i] * acc[i];
    }
  }
}
"""
    kernel = compile_kernel(source, "squares")
    rng = np.random.default_rng(8)
    a, b, c = (Operand(desc, x, None, None, rng) for x in "abc")
    c.poison_all()
    kernel((7,), desc.block_dim, (a.array, b.array, c.array), shared_mem=desc.shared_memory_size)
    cupy.cuda.runtime.deviceSynchronize()
    ref = np.matmul(a.values, b.values) ** 2
    assert relative_error(c.result(), ref) < 2e-3


MISPLACED_STAGES = r'''
import cupy
from blasdx import Arrangement, Grid, Precision, SM, Size, compile_kernel
desc = (Size(333, 250, 190) + Precision(*PREC)
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid())
source = desc.device_source("g") + """
extern "C" __global__ void misplaced(const g::a_t* a, const g::b_t* b) {
  extern __shared__ __align__(1024) unsigned char smem[];
  g::accumulator acc = g::make_accumulator();
  g::mainloop(a, b, 0, 0, smem + OFFSET, acc);  // the stages off the boundary their loads need
}
""".replace("OFFSET", str(OFFSET))
assert "__trap()" in source
a = cupy.ones((333, 190), DTYPE)
b = cupy.ones((250, 190), DTYPE).T
kernel = compile_kernel(source, "misplaced")
launch = lambda: kernel((1,), desc.block_dim, (a, b), shared_mem=desc.shared_memory_size + OFFSET)
'''


@pytest.mark.parametrize("prec, dtype, offset", [(("float16", "float16", "float32"), "float16", 512),
                                                 (("float32",) * 3, "float32", 4)], ids=["wgmma-1024", "fma-16"])
def test_the_mainloop_stops_on_stages_off_their_boundary(prec, dtype, offset):
    """mainloop's wgmma read A and B at 1024-byte boundaries, and the FMA tiles' 16-byte loads at
    16-byte ones, without testing each K tile: a user kernel whose smem lies elsewhere stops (a
    trap) rather than compute garbage or fault (a misaligned load would fail otherwise)."""
    script = f"PREC, DTYPE, OFFSET = {prec!r}, {dtype!r}, {offset}\n" + MISPLACED_STAGES.replace("DTYPE)", "getattr(cupy, DTYPE))")
    assert_stops_with_a_trap(script)


SPLIT_K = [  # precisions, complex, size, batch, hooks
    (("float16", "float16", "float32"), False, (64, 64, 8192), None, {}),
    (("float64",) * 3, False, (50, 50, 2000), 3, {}),
    (("float32",) * 3, True, (30, 40, 3000), None, {}),
    (("int8", "int8", "int32"), False, (64, 64, 4096), None, {}),
    (("bfloat16",) * 3, False, (100, 100, 5000), 2, {}),
    (("bfloat16",) * 3, False, (256, 256, 8192), None, {}),  # whole tiles: at beta 0 the quads' short epilogue
]


@pytest.mark.parametrize("alpha, beta", [(2, -1), (3, 0)])
@pytest.mark.parametrize("case", SPLIT_K, ids=["f16f32", "f64-batched", "cf32", "i8", "bf16-batched", "bf16-whole"])
def test_split_k_where_tiles_are_few(case, alpha, beta):
    """Problems with fewer tiles than the GPU runs blocks at once split each tile's K loop;
    alpha and beta (C read once, or not at beta 0) and the sum of the parts come out right, integers exactly."""
    import blasdx.pipeline

    prec, complex_, size, batch, _ = case
    desc = grid(prec, "rcr", size, 900, complex_)
    run_and_check(desc, np.random.default_rng(9), batch=batch, alpha=alpha, beta=beta)
    splits = [bound.splits for bound in blasdx.pipeline.BOUND_LAUNCHES.values()
              if bound.kernel.plan.execution == "grid" and (bound.kernel.plan.m, bound.kernel.plan.k) == size[::2]]
    assert splits and max(splits) > 1, "split-K did not run"


@pytest.mark.parametrize("batch", [None, 3], ids=["one", "batched"])
def test_the_last_wave_of_deep_k_splits(batch):
    """K deep enough (SPLIT_TAIL_MIN_K), a call of a few pairs of tiles more than the GPU's clusters: the whole
    wave runs, then the last pairs' K loops in parts, all at once (GridPlan.splits); alpha, beta and the parts'
    sum come out right."""
    import cupy

    import blasdx.pipeline

    clusters = cupy.cuda.Device().attributes["MultiProcessorCount"] // 2
    pairs = clusters + 1 if batch is None else clusters // batch + 1  # of tiles a column of 128 (a batch item's)
    size = (2 * 256 * pairs, 128, 8192)
    desc = grid(("bfloat16", "bfloat16", "float32"), "rcr", size, 900, False, Tile(256, 128, 64))
    run_and_check(desc, np.random.default_rng(12), batch=batch, alpha=2, beta=-1)
    launched = [bound for bound in blasdx.pipeline.BOUND_LAUNCHES.values()
                if bound.kernel.plan.execution == "grid" and (bound.kernel.plan.m, bound.kernel.plan.k) == size[::2]]
    assert launched and all(b.kernel.plan.cluster for b in launched)
    assert max(b.splits for b in launched) > 1 and 0 < max(b.split_units for b in launched) < clusters  # a tail


@pytest.mark.parametrize("prec, size", [(("bfloat16", "bfloat16", "bfloat16"), (1024, 1024, 8192)),
                                         (("float16", "float16", "float32"), (1000, 1000, 8192)),
                                         (("bfloat16", "bfloat16", "float32"), (1024, 2048, 8192)),
                                         (("bfloat16", "bfloat16", "bfloat16"), (768, 500, 8192))],
                         ids=["64x128-bf16", "64x128-edges-f32", "128x128-f32", "64x64-edges-bf16"])
def test_deep_k_on_fewer_tiles_than_a_wave_with_deep_stages(prec, size):
    """deep_k_stages' tiles (fewer than a wave, K 8192 deep) take as many stages as fit: alpha, beta and the
    edge tiles come out right through the deeper ring of stages."""
    import blasdx.pipeline

    desc = grid(prec, "rcr", size, 900, False)
    assert desc.plan.stages > 4
    run_and_check(desc, np.random.default_rng(13), batch=None, alpha=0.5, beta=2)
    launched = [bound for bound in blasdx.pipeline.BOUND_LAUNCHES.values()
                if bound.kernel.plan.execution == "grid" and (bound.kernel.plan.m, bound.kernel.plan.n,
                                                              bound.kernel.plan.k) == size]
    assert launched and all(b.kernel.plan.stages == desc.plan.stages and b.kernel.plan.tma for b in launched)


def test_split_k_calls_share_a_kept_workspace():
    """Split calls of other tile counts and parts (counters and parts of other sizes) alternate on one stream, then on
    a second, through the workspace kept a stream (SplitWorkspaces): each result right, on every call."""
    import cupy

    import blasdx.pipeline
    from blasdx.runtime.launch import SPLIT_WORKSPACES

    rng = np.random.default_rng(14)
    # (size, batch): 16, 48 and 2 tiles, and a batch of 6 x 15 tiles whose 90 split tiles' counters take 512 bytes
    sizes = [((256, 256, 16384), None), ((512, 384, 8192), None), ((100, 90, 6000), None), ((192, 320, 16384), 6)]
    cases = [(grid(("float16", "float16", "float32"), "rcr", size), batch) for size, batch in sizes]
    operands = [[Operand(desc, x, batch, None, rng) for x in "abc"] for desc, batch in cases]
    refs = [np.matmul(a.values, b.values) for a, b, _ in operands]
    for stream in (cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)):
        with stream:
            for _ in range(3):
                for (desc, _), (a, b, c), ref in zip(cases, operands, refs):
                    c.array.fill(np.nan)
                    desc.execute(a.array, b.array, c.array)
                    assert relative_error(c.result(), ref) < 2e-3
        stream.synchronize()
    bounds = {(p.m, p.n, p.k): bound for bound in blasdx.pipeline.BOUND_LAUNCHES.values()
              if (p := bound.kernel.plan).execution == "grid" and (p.m, p.n, p.k) in [size for size, _ in sizes]}
    assert len(bounds) == 4 and min(b.splits for b in bounds.values()) > 1, bounds
    assert bounds[(192, 320, 16384)].workspace_counter_bytes > 256  # its counters end further into the kept region
    assert len(SPLIT_WORKSPACES) >= 2  # both streams'


def test_split_k_with_hooks_and_bias():
    import cupy

    m, n, k = 100, 90, 6000
    desc = grid(("float16", "float16", "float32"), "rcr", (m, n, k))
    rng = np.random.default_rng(10)
    a, b, c = (Operand(desc, x, None, None, rng) for x in "abc")
    bias = rng.standard_normal((m, 1)).astype(np.float32)
    desc.execute(a.array, b.array, c.array, 0.5, 1, bias=cupy.asarray(bias), epilogue="relu")
    ref = np.maximum(0.5 * np.matmul(a.values, b.values) + c.values + bias, 0)
    assert relative_error(c.result(), ref) < 2e-3


def test_split_k_under_cuda_graph_capture_runs_unsplit():
    torch = pytest.importorskip("torch")
    desc = grid(("float16", "float16", "float32"), "rcr", (64, 64, 8192))
    a = torch.randn(64, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 8192, device="cuda", dtype=torch.float16).t()
    c = torch.zeros(64, 64, device="cuda")
    desc.execute(a, b, c)  # bound (and split) outside the capture
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        desc.execute(a, b, c)
    torch.cuda.current_stream().wait_stream(stream)
    c.fill_(float("nan"))
    a.copy_(torch.randn_like(a))
    graph.replay()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3


TMA_FAMILIES = [("float16", "float16", "float32"), ("bfloat16",) * 3, ("tfloat32", "tfloat32", "float32"),
                ("float8_e4m3", "float8_e5m2", "float32"), ("int8", "int8", "int32")]


def tma_launches(size):
    """The bound launches of size's problem that copy A and B by TMA."""
    import blasdx.pipeline

    return [bound for bound in blasdx.pipeline.BOUND_LAUNCHES.values() if bound.tensor_maps is not None
            and (bound.kernel.plan.m, bound.kernel.plan.n, bound.kernel.plan.k) == size]


@pytest.mark.parametrize("arr", ["".join(x) for x in itertools.product("rc", repeat=3)])
@pytest.mark.parametrize("prec", TMA_FAMILIES, ids=["f16f32", "bf16", "tf32", "fp8", "i8"])
def test_tma_copies_with_edges_on_every_side(prec, arr):
    """16-byte aligned rows (304, 272 and 208 elements suit every element size) take the TMA
    kernel: edges in m, n and k (read as zeros past the bounds), batches, every arrangement
    wgmma reads."""
    if arr != "rcr" and prec[0] in ("tfloat32", "float8_e4m3", "int8") and arr[:2] != "rc":
        pytest.skip("8- and 32-bit wgmma reads K-major A and B only: the tile is mma.sync's, no TMA")
    size = (304, 272, 208)
    run_and_check(grid(prec, arr, size), np.random.default_rng(11), batch=2, alpha=2, beta=-1)
    assert tma_launches(size), "the TMA kernel did not run"


@pytest.mark.parametrize("extra", [(Tile(128, 256, 64), BlockDim(256)), (Tile(256, 128, 64), BlockDim(512)),
                                   (Tile(128, 128, 64), BlockDim(128)), (Tile(64, 64, 64), Stages(6)),
                                   (Tile(128, 128, 32), Stages(2))],
                         ids=["128x256t256", "256x128t512", "128x128t128", "64x64s6", "128x128x32s2"])
def test_tma_with_tiles_and_stages_set_by_hand(extra):
    """Several tiles per block in turn: the stages' barriers run on across tiles and K loops of
    a few K tiles (fewer than the stages, too)."""
    size = (1000, 1032, 520)
    run_and_check(grid(("float16", "float16", "float32"), "rcr", size, 900, False, *extra),
                  np.random.default_rng(12), batch=3, alpha=1, beta=1)
    assert tma_launches(size)


@pytest.mark.parametrize("prec, arr, extra", [
    (("float16", "float16", "float32"), "rcr", ()), (("float16", "float16", "float32"), "crr", ()),
    (("bfloat16",) * 3, "rrc", ()), (("tfloat32", "tfloat32", "float32"), "rcr", ()),
    (("int8", "int8", "int32"), "rcr", ()), (("float8_e4m3", "float8_e5m2", "float32"), "rcr", (Accumulation("fast"),)),
], ids=["f16f32-rcr", "f16f32-crr", "bf16-rrc", "tf32", "i8", "fp8-fast"])
def test_192_row_tiles_where_their_waves_take_less_time(prec, arr, extra):
    """1504 x 1400 x 1040: 66 tiles of 256 rows or 88 of 192, one wave either way, so the suggested tile takes 192 rows
    (three warpgroups, wave_fitted_rows) on the TMA kernel (every row 16-byte aligned); edge tiles on both sides,
    beta; bitwise the 256-row tile's C (each row meets the same instructions in the same K order). One item a call
    (a batch of two takes 256 rows: GridPlan.for_batch)."""
    import blasdx.pipeline
    import blasdx.plan

    desc = grid(prec, arr, (1504, 1400, 1040), 900, False, *extra)
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.tile.m == 192 and aligned.tma
    rng = np.random.default_rng(15)
    if not extra:  # (fast accumulation's ~14-bit sums are past run_and_check's bound: 5e-3 below, as cuBLAS's)
        run_and_check(desc, rng, batch=None, alpha=2, beta=-1)
    a, b = Operand(desc, "a", None, None, rng), Operand(desc, "b", None, None, rng)
    outs = []
    for d in (desc, desc + Tile(256, 128, desc.plan.tile.k)):
        c = Operand(d, "c", None, None, rng)
        d.execute(a.array, b.array, c.array)
        outs.append(c.result())
    assert np.array_equal(outs[0], outs[1])
    ref = np.matmul(a.values, b.values)
    if bound(desc):
        assert relative_error(outs[0], ref) <= (5e-3 if extra else bound(desc))
    else:
        assert np.array_equal(outs[0], ref)
    assert any(launch.kernel.plan == aligned for launch in blasdx.pipeline.BOUND_LAUNCHES.values())


def test_a_tile_whose_wgmma_the_tma_kernel_cannot_hold_runs_the_cp_async_kernel_on_aligned_arrays():
    """Tile(256, 192, 64): 640 threads of the TMA kernel start with 96 registers, a 64 x 192 wgmma needs about 122
    (tma_registers_refusal), so 16-byte aligned arrays run the cp.async kernel; batches, beta."""
    import blasdx.pipeline
    import blasdx.plan

    desc = grid(("float16", "float16", "float32"), "rcr", (520, 400, 264), 900, False, Tile(256, 192, 64))
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert not aligned.tma
    run_and_check(desc, np.random.default_rng(17), batch=2, alpha=2, beta=-1)
    assert any(launch.kernel.plan == aligned for launch in blasdx.pipeline.BOUND_LAUNCHES.values())


@pytest.mark.parametrize("prec, arr, size, batch, tile", [
    (("float16", "float16", "float32"), "rcr", (500, 512, 256), 64, (256, 128)),  # 64 x 64 tiles fitted to an item
    (("bfloat16",) * 3, "crr", (384, 640, 512), 48, (192, 128)),
    (("float16",) * 3, "rcr", (1024, 1024, 1024), 2, (64, 128)),  # two items: the item's tile, one wave
    (("float64",) * 3, "rcr", (1536, 1536, 64), 8, (128, 128)),  # an item's 128 x 64 (waves), the batch's 128 x 128
    (("float64",) * 3, "rrr", (1536, 1536, 64), 8, (128, 128)),
    (("float8_e4m3", "float8_e4m3", "float32"), "rcr", (2048, 2048, 256), 3, (128, 192)),  # promoted: 192 wide
], ids=["256-rows", "192-rows", "kept", "f64-rcr", "f64-rrr", "fp8-promoted"])
def test_a_batch_runs_the_tile_whose_waves_take_least_time(prec, arr, size, batch, tile):
    """GridPlan.for_batch: the grid kernel of another tile than the one fitted to an item where the batch's waves take
    less time with it (taller wgmma tiles, float64 128 x 128 in place of 128 x 64, promoted FP8 192 wide); edges (500
    rows), beta."""
    import blasdx.pipeline
    import blasdx.plan

    desc = grid(prec, arr, size)
    chosen = blasdx.plan.grid_with_alignment(desc.plan.for_batch(batch), (16, 16, 16))
    assert (chosen.tile.m, chosen.tile.n) == tile and desc.plan.item_block is None
    assert chosen.tma == chosen.tile.instruction.is_wgmma
    assert (desc.plan.tile.m, desc.plan.tile.n) != tile or batch == 2
    run_and_check(desc, np.random.default_rng(16), batch=batch, alpha=2, beta=-1)
    assert any(launch.kernel.plan == chosen for launch in blasdx.pipeline.BOUND_LAUNCHES.values())


@pytest.mark.parametrize("arr", ["rcr", "rrr", "ccr"])
def test_clusters_of_two_with_odd_tile_rows(arr):
    """Clusters of two blocks on neighbouring tile rows, each copying half of the shared B into
    both: 11 tile rows (the last pair's second tile past m reads zeros and writes nothing),
    batches, beta != 0."""
    import blasdx.plan

    size = (1400, 1024, 520)
    desc = grid(("float16", "float16", "float32"), arr, size, 900, False, Tile(128, 128, 64), BlockDim(256))
    assert blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16)).cluster
    run_and_check(desc, np.random.default_rng(14), batch=2, alpha=2, beta=-1)
    assert any(bound.kernel.plan.cluster for bound in tma_launches(size))


@pytest.mark.parametrize("arr", ["".join(x) for x in itertools.product("rc", repeat=3)])
@pytest.mark.parametrize("prec", [("float16", "float16", "float32"), ("bfloat16",) * 3,
                                  ("float8_e4m3", "float8_e5m2", "float32"), ("int8", "int8", "int32")],
                         ids=["f16f32", "bf16", "fp8", "i8"])
def test_rows_on_any_byte_boundary(prec, arr):
    """Leading dimensions of odd element counts start rows (and the second batch item) on 1- and
    2-byte boundaries: A and B move in 16-byte pieces cut from aligned loads, with edges in m, n
    and k, and C is written element by element where it is 2 bytes."""
    m, n, k = 150, 200, 264
    lds = {"a": (k if arr[0] == "r" else m) + 1, "b": (n if arr[1] == "r" else k) + 3,
           "c": (n if arr[2] == "r" else m) + 5}
    desc = grid(prec, arr, (m, n, k), 900, False, LeadingDimension(lds["a"], lds["b"], lds["c"]))
    run_and_check(desc, np.random.default_rng(15), batch=2, alpha=2, beta=-1, lds=lds)


@pytest.mark.parametrize("extra", [(), (Tile(128, 256, 64), BlockDim(256)), (Tile(64, 128, 64), BlockDim(128))],
                         ids=["suggested", "128x256", "64x128"])
@pytest.mark.parametrize("prec", [("float16",) * 3, ("bfloat16",) * 3], ids=["f16", "bf16"])
@pytest.mark.parametrize("alpha, beta", [(1, 0), (0.5, 0), (2, -1)])
def test_16_bit_c_in_quads_of_whole_tiles(prec, extra, alpha, beta):
    """Whole tiles of 16-bit row-major C, aligned to four elements, are written four neighbours a
    lane (lanes swap pairs; at beta 0 and alpha not 0 by the short epilogue of the TMA kernels); the
    edge tiles of the same problem and a C of odd leading dimension keep the pairs. Padding of C
    stays untouched."""
    desc = grid(prec, "rcr", (520, 264, 96), 900, False, *extra)  # whole tiles and edges in m and n
    run_and_check(desc + LeadingDimension(96, 96, 268), np.random.default_rng(16), batch=2, alpha=alpha, beta=beta,
                  lds={"c": 268})
    run_and_check(desc + LeadingDimension(96, 96, 267), np.random.default_rng(17), batch=None, alpha=alpha, beta=beta,
                  lds={"c": 267})
    sm80 = grid(prec, "rrr", (256, 256, 64), 800)  # the mma.sync tile of an SM 80 descriptor
    run_and_check(sm80, np.random.default_rng(18), batch=None, alpha=alpha, beta=beta)


@pytest.mark.parametrize("bias_shape", ["row", "column", "matrix"])
def test_16_bit_c_with_hooks_and_bias(bias_shape):
    """The 16-bit epilogue computes values outside the problem at the nearest element inside
    it: the bias (every shape) and the hooks still see each output's own coordinates."""
    import cupy

    m, n, k = 520, 264, 96  # whole tiles and edge tiles
    desc = grid(("float16",) * 3, "rcr", (m, n, k), 900, False, LeadingDimension(k, k, 268))
    rng = np.random.default_rng(19)
    a, b, c = (Operand(desc, x, 2, None, rng) for x in "abc")
    shape = {"row": (n,), "column": (m, 1), "matrix": (2, m, n)}[bias_shape]
    bias = rng.standard_normal(shape).astype(np.float16)
    desc.execute(a.array, b.array, c.array, 2, -1, bias=cupy.asarray(bias), epilogue="gelu", prologue="negate")
    f64 = np.float64
    x = 2 * np.matmul(-a.values.astype(f64), -b.values.astype(f64)) - c.values.astype(f64) + bias.astype(f64)
    from math import erf

    ref = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    assert relative_error(c.result().astype(f64), ref) < 5e-3


@pytest.mark.parametrize("gap", [0, 8], ids=["next-item-at-the-last-row-end", "items-m-ld-apart"])
def test_batch_items_closer_than_m_rows_of_ld_run_on_the_tma_kernel(gap):
    """Items whose last row's padding is the next item's start ((m - 1) ld + k values apart, 16-byte aligned): a
    tensor map's batch stride under rows x ld, which the TMA kernel must take (or leave to cp.async), not refuse."""
    import cupy

    m = n = k = 128
    ld, batch = 136, 3
    stride = (m - 1) * ld + k + gap
    desc = grid(("float16", "float16", "float32"), "rcr", (m, n, k)) + LeadingDimension(ld, ld, n)
    rng = np.random.default_rng(41)
    a_values = rng.standard_normal((batch, m, k)).astype(np.float16)
    bt_values = rng.standard_normal((batch, n, k)).astype(np.float16)  # column-major B: n rows of k

    def strided(values):
        buffer = cupy.zeros(batch * stride + ld, np.float16)
        view = cupy.lib.stride_tricks.as_strided(buffer, shape=values.shape, strides=(stride * 2, ld * 2, 2))
        for i in range(batch):
            view[i] = cupy.asarray(values[i])
        return view

    a, b = strided(a_values), strided(bt_values).transpose(0, 2, 1)
    c = cupy.full((batch, m, n), cupy.nan, np.float32)
    desc.execute(a, b, c)
    ref = a_values.astype(np.float64) @ bt_values.astype(np.float64).transpose(0, 2, 1)
    assert relative_error(c.get(), ref) <= bound(desc)
    aligned = blasdx.plan.grid_with_alignment(desc.plan, (16, 16, 16))
    assert aligned.tma and any(launch.kernel.plan == aligned and launch.tensor_maps
                               for launch in blasdx.pipeline.BOUND_LAUNCHES.values())
