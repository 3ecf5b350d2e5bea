"""Warp() on a GPU: each warp of a block runs its own GEMM, through execute() (an item a warp, several warps a
block) and through the device API in a user's kernel (each warp a K loop of its own length), for every precision
family against a float64 reference (int64 for the packed types). Marked ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest

import blasdx
from blasdx import SM, Arrangement, BitOp, Precision, Size, Type, Warp
from blasdx.describe.precision import PRECISIONS
from blasdx.kinds.warp import warp_kernel_plan
from blasdx.runtime.arguments import scalar

from ..device_kernels import WARP_KERNELS
from .gpu_support import SEED, Operand, bound, relative_error, run_and_check
from .test_gpu_packed import run as run_packed

pytestmark = pytest.mark.gpu

# (precisions, complex, size, SM, arrangement): every tensor-core family a warp takes (m16n8k*, float64's m8n8k4 on
# SM 800 and m16n8k8 on SM 900, 8-bit floats and integers), FMA (float32, 16-bit integers) and complex.
FAMILIES = [
    (("float16", "float16", "float32"), False, (32, 32, 32), 900, "rcr"),
    (("float16", "float16", "float16"), False, (30, 17, 40), 900, "crc"),
    (("bfloat16", "bfloat16", "float32"), False, (16, 48, 32), 900, "rrr"),
    (("tfloat32", "tfloat32", "float32"), False, (13, 5, 16), 900, "rcr"),
    (("float64", "float64", "float64"), False, (16, 24, 8), 900, "rcr"),
    (("float64", "float64", "float64"), False, (8, 16, 12), 800, "ccr"),
    (("float8_e4m3", "float8_e5m2", "float32"), False, (32, 32, 64), 900, "rcr"),
    (("int8", "uint8", "int32"), False, (32, 32, 64), 900, "rcr"),
    (("float32", "float32", "float32"), False, (64, 32, 32), 900, "rcc"),
    (("int16", "int16", "int64"), False, (16, 16, 16), 900, "rrr"),
    (("float16", "float16", "float16"), True, (16, 16, 16), 900, "rcr"),
    (("float64", "float64", "float64"), True, (8, 16, 12), 900, "rcr"),
]
IDS = [f"{'c' if cx else ''}{'-'.join(p)}-{'x'.join(map(str, s))}-sm{sm}" for p, cx, s, sm, _ in FAMILIES]
LAYOUT = {"r": "row_major", "c": "col_major"}


def describe(precisions, is_complex, size, sm, arrangement):
    return (Size(*size) + Precision(*precisions) + Type("complex" if is_complex else "real")
            + Arrangement(*(LAYOUT[x] for x in arrangement)) + SM(sm) + Warp())


@pytest.mark.parametrize("batch", [1, 7, 130])
@pytest.mark.parametrize("spec", FAMILIES, ids=IDS)
def test_execute_runs_an_item_a_warp(spec, batch):
    """Batches of one item, of part of a block's warps and of many blocks; C poisoned where beta = 0."""
    desc = describe(*spec)
    assert warp_kernel_plan(desc.plan).threads == 32 * warp_kernel_plan(desc.plan).warps
    alpha, beta = (1.5, 0.5) if PRECISIONS[desc.precision.c].is_float else (2, -1)
    run_and_check(desc, np.random.default_rng(SEED), batch=batch, alpha=alpha, beta=beta, seed=SEED)
    run_and_check(desc, np.random.default_rng(SEED + 1), batch=batch, beta=0, seed=SEED)


@pytest.mark.parametrize("a,b,size,bit_op", [("int4", "int4", (16, 8, 64), None), ("uint4", "int4", (33, 17, 30), None),
                                            ("binary", "binary", (16, 32, 128), "xor"),
                                            ("binary", "binary", (8, 8, 256), "and")])
def test_packed_types_run_an_item_a_warp(a, b, size, bit_op):
    desc = (Size(*size) + Precision(a, b, "int32") + Arrangement("row_major", "col_major", "row_major") + SM(900)
            + Warp())
    if bit_op is not None:
        desc = desc + BitOp(bit_op)
    out, ref = run_packed(desc, 9, np.random.default_rng(SEED), alpha=2, beta=-1)
    np.testing.assert_array_equal(out, ref)


def test_hooks_and_bias_per_warp():
    import cupy

    desc = describe(("float16", "float16", "float32"), False, (32, 16, 32), 900, "rcr")
    rng = np.random.default_rng(SEED)
    a, b, c = (Operand(desc, x, 6, None, rng) for x in "abc")
    bias = rng.standard_normal(16).astype(np.float32)
    desc.execute(a.array, b.array, c.array, alpha=1.0, beta=1.0, bias=cupy.asarray(bias), epilogue="relu")
    ref = np.maximum(a.values @ b.values + c.values + bias, 0)
    assert relative_error(c.result(), ref) <= bound(desc)


@pytest.mark.parametrize("spec", [FAMILIES[i] for i in (0, 2, 3, 5, 6, 7, 8, 11)],
                         ids=[IDS[i] for i in (0, 2, 3, 5, 6, 7, 8, 11)])
def test_each_warp_runs_its_own_k_loop_through_the_device_api(spec):
    """Four warps a block, two blocks: warp w loops 1 + w % 3 times (the warps' loops differ, so only a warp's
    own barrier can hold them), each on its own tiles of shared memory; every item's C is checked."""
    import cupy

    desc = describe(*spec)
    m, n, k = desc.size
    warps, blocks, max_steps = 4, 2, 3
    items = warps * blocks
    rng = np.random.default_rng(SEED)
    a = Operand(desc, "a", items * max_steps, None, rng)
    b = Operand(desc, "b", items * max_steps, None, rng)
    c = Operand(desc, "c", items, None, rng)
    c_before = c.values
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + WARP_KERNELS, "warp_k_loops")
    per_item = [x.buffer.shape[1] * x.buffer.shape[2] for x in (a, b, c)]  # elements between items (outer x ld)
    kernel(blocks, (32 * warps, 1, 1),
           (a.array, b.array, c.array, *(np.int64(x) for x in per_item), np.int32(max_steps),
            scalar(2.0, desc.plan, "alpha"), scalar(-1.0, desc.plan, "beta")),
           shared_mem=warps * desc.shared_memory_size)
    cupy.cuda.runtime.deviceSynchronize()
    out = c.result()
    for item in range(items):
        steps = 1 + item % warps % 3
        pieces = range(item * max_steps, item * max_steps + steps)
        ref = 2.0 * sum(a.values[p] @ b.values[p] for p in pieces) - 1.0 * c_before[item]
        limit = bound(desc)
        err = relative_error(out[item], ref) if limit > 0 else float(np.max(np.abs(out[item] - ref)))
        assert err <= limit, f"{desc!r}: item {item} ({steps} steps): error {err:.3g} > {limit:.3g} (seed {SEED})"
