"""GEMM.execute on a GPU: every precision, arrangement, size, block dim, alpha/beta and
batch against a float64 reference (shared/TESTING.md). Marked ``gpu``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from blasdx import (
    SM,
    ArgumentError,
    Arrangement,
    Block,
    BlockDim,
    DeviceError,
    InstructionFamily,
    LeadingDimension,
    PlanOverrides,
    Precision,
    Size,
    TransposeMode,
    Type,
    UnsupportedError,
)

from .gpu_support import Operand, poison_value, relative_error, run_and_check

pytestmark = pytest.mark.gpu

SEED = int(np.random.SeedSequence().entropy % 2**31)

STAGED_C = [((32, 32, 32), "float16"), ((16, 16, 16), "float16"), ((32, 32, 64), "bfloat16")]


@pytest.mark.parametrize("size,precision", STAGED_C, ids=[f"{p}-{'x'.join(map(str, s))}" for s, p in STAGED_C])
def test_16_bit_c_moved_16_bytes_a_lane(size, precision):
    """One-warp 16-bit C on SM 900 (kernel_plan's c_staged_16_bytes): read and written 16 bytes
    a lane through its padded tile in shared memory. alpha and beta; C poisoned where beta = 0;
    at ldc = n + 8 (whole 16-byte pieces still) the padding between C's rows stays untouched."""
    from blasdx.plan import kernel_plan, with_alignment

    desc = Size(*size) + Precision(precision) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    assert kernel_plan(with_alignment(desc.plan, (16, 16, 16))).c_staged_16_bytes
    run_and_check(desc, _rng(), batch=7, alpha=1.5, beta=0.5, seed=SEED)
    run_and_check(desc, _rng(), batch=3, beta=0, seed=SEED)
    m, n, k = size
    padded = desc + LeadingDimension(k, n, n + 8)
    # C in registers takes rows of at most 64 bytes (keeps_c_in_registers): 16^3 keeps its staging
    assert kernel_plan(with_alignment(padded.plan, (16, 16, 16))).c_staged_16_bytes == (2 * (n + 8) <= 64)
    run_and_check(padded, _rng(), batch=3, alpha=2, beta=-1, seed=SEED)


# (a, b, c, complex): every path blasdx has (tensor-core and FMA), real and complex.
PRECISIONS = [
    ("float16", "float16", "float32", False),
    ("float16", "float16", "float16", False),
    ("bfloat16", "bfloat16", "float32", False),
    ("bfloat16", "bfloat16", "bfloat16", False),
    ("tfloat32", "tfloat32", "float32", False),
    ("float32", "float32", "float32", False),
    ("float64", "float64", "float64", False),
    ("float8_e4m3", "float8_e4m3", "float32", False),
    ("float8_e5m2", "float8_e4m3", "float16", False),
    ("int8", "int8", "int32", False),
    ("uint8", "uint8", "uint32", False),
    ("uint8", "int8", "int64", False),
    ("int16", "int16", "int32", False),
    ("uint16", "uint16", "uint32", False),
    ("int32", "int32", "int64", False),
    ("uint64", "uint64", "uint64", False),
    ("float16", "float32", "float32", False),
    ("float16", "float16", "float16", True),
    ("float32", "float32", "float32", True),
    ("float64", "float64", "float64", True),
    ("int8", "int8", "int32", True),
    ("float8_e4m3", "float8_e4m3", "float32", True),
]
PREC_IDS = [f"{'c' if cx else ''}{a}-{b}-{c}" for a, b, c, cx in PRECISIONS]
ARRANGEMENTS = list(itertools.product(("row_major", "col_major"), repeat=3))
SIZES = [(1, 1, 1), (8, 16, 32), (16, 16, 16), (30, 31, 33), (13, 5, 7), (64, 64, 64), (128, 128, 64)]


def describe(prec, size=(30, 31, 33), arrangement=("row_major", "col_major", "row_major"), extra=(), block=True):
    a, b, c, cx = prec
    desc = Size(*size) + Precision(a, b, c) + Arrangement(*arrangement) + SM(900)
    if block:
        desc = desc + Block()
    if cx:
        desc = desc + Type("complex")
    for op in extra:
        desc = desc + op
    return desc


def _rng():
    return np.random.default_rng(SEED)


@pytest.mark.parametrize("prec", PRECISIONS, ids=PREC_IDS)
@pytest.mark.parametrize("arrangement", ARRANGEMENTS, ids=["".join(x[0] for x in a) for a in ARRANGEMENTS])
def test_every_precision_and_arrangement(prec, arrangement):
    run_and_check(describe(prec, arrangement=arrangement), _rng(), batch=3, seed=SEED)


@pytest.mark.parametrize("prec", PRECISIONS, ids=PREC_IDS)
@pytest.mark.parametrize("size", SIZES, ids=["x".join(map(str, s)) for s in SIZES])
def test_every_precision_and_size_with_padded_leading_dimensions(prec, size):
    unblocked = describe(prec, size=size, arrangement=("col_major", "row_major", "col_major"), block=False)
    lds = LeadingDimension(*(ld + 3 for ld in unblocked.leading_dimension))
    if unblocked.replace(lds).shared_memory_size > 227 * 1024:  # does not fit: must raise once used
        with pytest.raises(UnsupportedError, match="bytes of shared memory, over SM 900's limit"):
            _ = (unblocked.replace(lds) + Block()).plan
        return
    padded = unblocked.replace(lds) + Block()
    run_and_check(padded, _rng(), batch=2, beta=1 if not prec[2].startswith("float") else 0.5, seed=SEED)


FLOAT_FMA_SIZES = [(64, 64, 64), (128, 96, 40), (64, 64, 30)]


@pytest.mark.parametrize("arrangement", ARRANGEMENTS, ids=["".join(x[0] for x in a) for a in ARRANGEMENTS])
@pytest.mark.parametrize("size", FLOAT_FMA_SIZES, ids=["x".join(map(str, s)) for s in FLOAT_FMA_SIZES])
def test_float_fma_micro_tiles_in_every_arrangement(size, arrangement):
    """float32 with the suggested threads: 8x4 micro-tiles in two groups of rows, 16-byte
    shared-memory loads (k = 30 leaves a scalar tail), C in registers where A and C share a
    layout (16-byte global accesses), in shared memory otherwise; 128x96 has 384 micro-tiles
    for 256 threads."""
    from blasdx.plan import kernel_plan

    desc = describe(PRECISIONS[5], size=size, arrangement=arrangement)
    assert (desc.plan.tile_m, desc.plan.tile_n, desc.plan.group_m) == (8, 4, 4)
    assert kernel_plan(desc.plan).c_in_registers == (arrangement[0] == arrangement[2])
    run_and_check(desc, _rng(), batch=5, alpha=1.5, beta=0.5, seed=SEED)
    run_and_check(desc, _rng(), batch=2, beta=0, seed=SEED)  # C poisoned: never read


@pytest.mark.parametrize("c_precision", ["float16", "bfloat16"])
def test_float_micro_tiles_with_narrow_c(c_precision):
    """float32 A and B with a 16-bit C take the 8x4 micro-tiles too (suggested 128 threads
    at 64x64): C converts per element, in registers (rrr) or staged (rrc)."""
    for arrangement in (("row_major",) * 3, ("row_major", "row_major", "col_major")):
        desc = describe(("float32", "float32", c_precision, False), size=(64, 64, 64), arrangement=arrangement)
        assert desc.block_dim == (128, 1, 1) and (desc.plan.tile_m, desc.plan.tile_n) == (8, 4)
        run_and_check(desc, _rng(), batch=4, alpha=1.5, beta=0.5, seed=SEED)
        run_and_check(desc, _rng(), batch=2, beta=0, seed=SEED)


TENSOR_C_IN_REGISTERS = [PRECISIONS[6], PRECISIONS[11]]
TENSOR_C_SIZES = [(32, 32, 32), (30, 30, 30), (64, 64, 64), (48, 40, 24)]


@pytest.mark.parametrize("prec", TENSOR_C_IN_REGISTERS, ids=["f64", "u8s8-s64"])
@pytest.mark.parametrize("size", TENSOR_C_SIZES, ids=["x".join(map(str, s)) for s in TENSOR_C_SIZES])
def test_tensor_core_c_in_registers(prec, size):
    """Row-major C of 8-byte elements skips shared memory on the tensor-core path: pairs of
    neighbouring outputs read into registers and written straight back (16 bytes); 30x30 and
    48x40 leave partial warp tiles; a padded C (ld n + 2) must keep its padding; beta = 0
    never reads the poisoned C. mma.sync's path (wgmma, which 8-bit integers with row-major A
    take on SM 900, stages C)."""
    from blasdx.plan import kernel_plan, with_alignment

    for a_layout in ("row_major", "col_major"):
        desc = describe(prec, size=size, arrangement=(a_layout, "col_major", "row_major"),
                        extra=(InstructionFamily("mma"),))
        assert kernel_plan(with_alignment(desc.plan, (16, 16, 16))).c_in_registers
        beta = 1 if prec[2].startswith(("int", "uint")) else 0.5
        run_and_check(desc, _rng(), batch=5, alpha=1 if beta == 1 else 1.5, beta=beta, seed=SEED)
        run_and_check(desc, _rng(), batch=2, beta=0, seed=SEED)
    padded = desc.replace(LeadingDimension(desc.leading_dimension[0], desc.leading_dimension[1], size[1] + 2))
    run_and_check(padded, _rng(), batch=3, beta=beta, seed=SEED)


HALF_C_IN_REGISTERS = [(32, 32, 32), (30, 30, 30), (16, 16, 16), (64, 32, 32), (20, 12, 24)]


@pytest.mark.parametrize("prec", [PRECISIONS[1], PRECISIONS[3]], ids=["f16", "bf16"])
@pytest.mark.parametrize("size", HALF_C_IN_REGISTERS, ids=["x".join(map(str, s)) for s in HALF_C_IN_REGISTERS])
def test_tensor_core_half_c_in_registers(prec, size):
    """16-bit row-major C in registers where one warp's tile is all of C (one warp here) and
    rows are at most 64 bytes: 4-byte pairs, partial tiles (30x30, 20x12), beta = 0 with a poisoned C; a
    128-byte row (ld 64) keeps C staged."""
    from blasdx.plan import kernel_plan, with_alignment

    for a_layout in ("row_major", "col_major"):
        desc = describe(prec, size=size, arrangement=(a_layout, "col_major", "row_major"), extra=(BlockDim(32),))
        assert kernel_plan(with_alignment(desc.plan, (16, 16, 16))).c_in_registers
        run_and_check(desc, _rng(), batch=5, alpha=1.5, beta=0.5, seed=SEED)
        run_and_check(desc, _rng(), batch=2, beta=0, seed=SEED)
    wide = desc.replace(LeadingDimension(desc.leading_dimension[0], desc.leading_dimension[1], 64))
    assert not kernel_plan(with_alignment(wide.plan, (16, 16, 16))).c_in_registers
    run_and_check(wide, _rng(), batch=3, beta=0.5, seed=SEED)


def test_suggested_leading_dimension_runs():
    desc = describe(PRECISIONS[0], size=(64, 64, 64))
    run_and_check(desc.replace(LeadingDimension(*desc.suggested_leading_dimension)), _rng(), seed=SEED)


def test_largest_size_that_fits_sm90_shared_memory():
    desc = describe(("float16", "float16", "float32", False), size=(128, 128, 320))
    assert desc.shared_memory_size <= 227 * 1024
    run_and_check(desc, _rng(), batch=2, seed=SEED)


BLOCK_DIMS = [(32,), (64,), (128,), (256,), (1024,), (16, 16), (32, 4), (4, 4, 4), (33,), (48, 3)]


@pytest.mark.parametrize("prec", [PRECISIONS[0], PRECISIONS[5], PRECISIONS[6], PRECISIONS[9], PRECISIONS[18]],
                         ids=["f16", "f32", "f64", "s8", "c64"])
@pytest.mark.parametrize("block_dim", BLOCK_DIMS, ids=["x".join(map(str, b)) for b in BLOCK_DIMS])
def test_block_dims(prec, block_dim):
    run_and_check(describe(prec, size=(64, 40, 48), extra=(BlockDim(*block_dim),)), _rng(), seed=SEED)


FLOAT_SCALARS = [(1, 0), (1, 1), (2, -0.5), (0, 1), (1.5, 0)]
COMPLEX_SCALARS = [(1 + 2j, 3 - 1j), (1 + 2j, 0)]
INT_SCALARS = [(1, 0), (1, 1), (2, -1), (0, 1), (3, 2)]


@pytest.mark.parametrize("prec", PRECISIONS, ids=PREC_IDS)
def test_alpha_beta(prec):
    a, b, c, cx = prec
    info_c = c.startswith("float") or c == "bfloat16"
    scalars = COMPLEX_SCALARS + FLOAT_SCALARS if cx and info_c else FLOAT_SCALARS if info_c else INT_SCALARS
    if c.startswith("uint"):
        scalars = [(x, y) for x, y in scalars if x >= 0 and y >= 0]
    for alpha, beta in scalars:
        run_and_check(describe(prec), _rng(), alpha=alpha, beta=beta, seed=SEED)


@pytest.mark.parametrize("batch", [1, 7, 65537])
@pytest.mark.parametrize("prec", [PRECISIONS[0], PRECISIONS[6], PRECISIONS[9]], ids=["f16", "f64", "s8"])
def test_batches_match_reference_and_single_gemms(prec, batch):
    desc = describe(prec, size=(16, 8, 16))
    rng = _rng()
    run_and_check(desc, rng, batch=batch, seed=SEED)
    if batch == 7:  # the batch equals a loop of single GEMMs
        a, b = Operand(desc, "a", 7, None, rng), Operand(desc, "b", 7, None, rng)
        c = Operand(desc, "c", 7, None, rng)
        desc.execute(a.array, b.array, c.array)
        batched = c.result()
        for i in range(7):
            ci = Operand(desc, "c", None, None, rng)
            desc.execute(a.array[i], b.array[i], ci.array)
            np.testing.assert_array_equal(ci.result()[0], batched[i])


def test_empty_batch_is_a_no_op_returning_c():
    import cupy

    desc = describe(PRECISIONS[5], size=(8, 8, 8))
    a = cupy.ones((0, 8, 8), dtype=np.float32)
    b = cupy.ones((0, 8, 8), dtype=np.float32).swapaxes(1, 2)
    c = cupy.ones((0, 8, 8), dtype=np.float32)
    assert desc.execute(a, b, c) is c


def test_beta_zero_ignores_nan_in_c():
    run_and_check(describe(PRECISIONS[0]), _rng(), beta=0, seed=SEED)  # C poisoned whole


@pytest.mark.parametrize("prec", [PRECISIONS[0], PRECISIONS[5], PRECISIONS[6]], ids=["f16", "f32", "f64"])
def test_nan_and_inf_in_inputs_propagate(prec):
    desc = describe(prec, size=(16, 16, 16))
    rng = _rng()
    a, b, c = (Operand(desc, x, None, None, rng) for x in "abc")
    host = a.host()
    host[0, 0, 0] = np.nan  # one element of A: row 0 (row-major) poisons row 0 of C
    a.upload(host)
    host = b.host()
    host[0, 3, 0] = np.inf  # B col-major: element (0, 3) makes column 3 infinite or NaN
    b.upload(host)
    desc.execute(a.array, b.array, c.array)
    out = c.result()[0]
    assert np.all(np.isnan(out[0, :])), "NaN in A must reach its row of C"
    assert np.all(~np.isfinite(out[1:, 3])), "Inf in B must reach its column of C"
    assert np.all(np.isfinite(np.delete(np.delete(out, 0, 0), 3, 1)))


def test_transpose_mode_conjugates():
    with pytest.warns(DeprecationWarning):
        desc = Size(8, 8, 8) + Precision("float32") + Type("complex") + TransposeMode("C", "N") + SM(900) + Block()
    run_and_check(desc, _rng(), seed=SEED)


def test_torch_tensors_through_dlpack_including_bfloat16():
    torch = pytest.importorskip("torch")
    for dtype, prec, bound in ((torch.float16, "float16", 1e-3), (torch.bfloat16, "bfloat16", 1e-2)):
        desc = Size(32, 32, 32) + Precision(prec, prec, "float32") + Arrangement("row_major", "row_major", "row_major") \
            + SM(900) + Block()
        a = torch.randn(4, 32, 32, device="cuda").to(dtype)
        b = torch.randn(4, 32, 32, device="cuda").to(dtype)
        c = torch.full((4, 32, 32), float("nan"), device="cuda")
        out = desc.execute(a, b, c)
        assert out is c
        ref = torch.matmul(a.double(), b.double())
        err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
        assert err < bound, (prec, err)


def test_torch_float8_tensors():
    torch = pytest.importorskip("torch")
    desc = Size(32, 16, 64) + Precision("float8_e4m3", "float8_e4m3", "float32") + \
        Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    a = torch.randn(32, 64, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(16, 64, device="cuda").to(torch.float8_e4m3fn).t()
    c = torch.zeros(32, 16, device="cuda")
    desc.execute(a, b, c)
    ref = a.double() @ b.double()
    assert float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)) < 7e-2


def test_non_default_stream():
    import cupy

    desc = describe(PRECISIONS[5], size=(32, 32, 32))
    rng = _rng()
    a, b, c = (Operand(desc, x, 64, None, rng) for x in "abc")
    stream = cupy.cuda.Stream(non_blocking=True)
    desc.execute(a.array, b.array, c.array, stream=stream)
    stream.synchronize()
    assert relative_error(c.result(), a.values @ b.values) < 1e-5


def test_raw_uint16_for_bfloat16():
    import cupy
    import ml_dtypes

    desc = Size(16, 16, 16) + Precision("bfloat16", "bfloat16", "float32") + \
        Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    rng = _rng()
    a = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((16, 16)).astype(ml_dtypes.bfloat16)
    c = cupy.zeros((16, 16), dtype=np.float32)
    desc.execute(cupy.asarray(a.view(np.uint16)), cupy.asarray(b.view(np.uint16)), c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert relative_error(c.get().astype(np.float64), ref) < 1e-2


# --- execute-time bad input (shared/TESTING.md 14-21) -----------------------------------------

def _f32_operands(batch=None):
    import cupy

    shape = (8, 8) if batch is None else (batch, 8, 8)
    a = cupy.ones(shape, dtype=np.float32)
    b = cupy.ones(shape, dtype=np.float32).swapaxes(-1, -2)  # col-major view
    c = cupy.zeros(shape, dtype=np.float32)
    return a, b, c


def _desc_f32():
    return Size(8, 8, 8) + Precision("float32") + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()


def test_good_operands_run():
    a, b, c = _f32_operands()
    _desc_f32().execute(a, b, c)
    assert float(c[0, 0]) == 8.0


def _bad_cases():
    import cupy

    a, b, c = _f32_operands()
    a3, b3, c3 = _f32_operands(batch=2)
    big = cupy.zeros((8, 9), dtype=np.float32)
    return [
        ("numpy host array", (np.ones((8, 8), np.float32), b, c), {}, ArgumentError, "host.*cupy.asarray"),
        ("list", ([[1.0]], b, c), {}, ArgumentError, "not a GPU array"),
        ("wrong shape", (cupy.ones((8, 9), np.float32), b, c), {}, ArgumentError, r"shape \(8, 9\), expected \(m, k\)"),
        ("wrong dtype", (a.astype(np.float64), b, c), {}, ArgumentError, "dtype float64.*never casts"),
        ("batch mismatch", (a3, b3, _f32_operands(batch=3)[2]), {}, ArgumentError, "batch counts differ"),
        ("2-D mixed with 3-D", (a3, b, c), {}, ArgumentError, "all be 2-D.*or all 3-D"),
        ("row-major array for col-major B", (a, cupy.ones((8, 8), np.float32), c), {}, ArgumentError,
         "strides.*col_major with leading dimension 8"),
        ("padded view without LeadingDimension", (big[:, :8], b, c), {}, ArgumentError, "leading dimension 8"),
        ("broadcast batch", (cupy.broadcast_to(a, (2, 8, 8)), b3, c3), {}, ArgumentError, "batch stride 0"),
        ("reversed view", (a[::-1], b, c), {}, ArgumentError, "strides|negative"),
        ("misaligned pointer", (cupy.zeros(65, np.float32)[1:].reshape(8, 8), b, c), {},
         None, None),
        ("C overlaps A", (c, b, c), {}, ArgumentError, "C overlaps A"),
        ("complex alpha on a real GEMM", (a, b, c), {"alpha": 1j}, ArgumentError, "complex but the GEMM is real"),
        ("string beta", (a, b, c), {"beta": "1"}, ArgumentError, "beta must be a number"),
        ("array alpha", (a, b, c), {"alpha": cupy.ones(1)}, ArgumentError, "alpha must be a number"),
    ]


@pytest.mark.parametrize("index", range(15))
def test_bad_execute_arguments_raise_before_launch(index):
    name, args, kwargs, error, pattern = _bad_cases()[index]
    if error is None:  # misaligned for Alignment(16): use a descriptor that declares it
        from blasdx import MaxAlignment

        with pytest.raises(ArgumentError, match="not aligned to 16 bytes"):
            _desc_f32().replace(MaxAlignment).execute(*args, **kwargs)
        return
    with pytest.raises(error, match=pattern):
        _desc_f32().execute(*args, **kwargs)


def test_integer_gemm_rejects_fractional_alpha():
    import cupy

    desc = Size(8, 8, 8) + Precision("int8", "int8", "int32") + Arrangement("row_major", "row_major", "row_major") \
        + SM(900) + Block()
    a = cupy.ones((8, 8), np.int8)
    with pytest.raises(ArgumentError, match="not an integer"):
        desc.execute(a, a.copy(), cupy.zeros((8, 8), np.int32), alpha=0.5)


def test_device_older_than_descriptor_sm_is_a_device_error(monkeypatch):
    import blasdx.pipeline as pipeline

    monkeypatch.setattr(pipeline, "device_arch", lambda device_id=None: 800)
    pipeline.clear_caches()  # kernels loaded and bound by earlier tests would skip the device check
    a, b, c = _f32_operands()
    with pytest.raises(DeviceError, match="older than the descriptor's SM"):
        _desc_f32().execute(a, b, c)
    pipeline.clear_caches()


def test_poison_values_are_not_zero():
    assert np.isnan(poison_value("float32")) and poison_value("int8") != 0


OVERRIDE_CASES = [  # precision, size, arrangement, threads, overrides: kernels the planner would not choose
    (PRECISIONS[1], (32, 32, 32), "rrr", None, PlanOverrides(c_in_registers=False)),
    (PRECISIONS[1], (64, 64, 64), "rrr", None, PlanOverrides(c_in_registers=True)),
    (PRECISIONS[1], (30, 30, 30), "rcr", None, PlanOverrides(c_in_registers=True)),
    (PRECISIONS[5], (64, 64, 64), "rrr", None, PlanOverrides(c_in_registers=False)),
    (PRECISIONS[5], (64, 64, 64), "rrr", 256, PlanOverrides(fma_micro_tile=(4, 4, 4, 4), fma_thread_pairs=False)),
    (PRECISIONS[5], (64, 64, 64), "crc", 128, PlanOverrides(fma_micro_tile=(8, 4, 8, 4))),
    (PRECISIONS[5], (30, 31, 33), "crr", None, PlanOverrides(c_in_registers=True)),
    (PRECISIONS[6], (32, 32, 32), "rrr", None, PlanOverrides(c_in_registers=False)),
    (PRECISIONS[6], (32, 32, 32), "rcr", None, PlanOverrides(min_blocks_per_sm=16)),
]


@pytest.mark.parametrize("prec, size, arrangement, threads, overrides", OVERRIDE_CASES,
                         ids=[f"{p[0]}-{'x'.join(map(str, s))}-{a}-{o}" for p, s, a, _, o in OVERRIDE_CASES])
def test_overridden_plans_compute_the_same_gemm(prec, size, arrangement, threads, overrides):
    """The variants the ablations run (blasdx.PlanOverrides) are correct GEMMs too."""
    layouts = {"r": "row_major", "c": "col_major"}
    desc = describe(prec, size=size, arrangement=tuple(layouts[x] for x in arrangement),
                    extra=(BlockDim(threads),) if threads else ())
    run_and_check(desc, _rng(), batch=5, alpha=1.5, beta=0.5, seed=SEED, overrides=overrides)
    run_and_check(desc, _rng(), batch=3, beta=0, seed=SEED, overrides=overrides)
