"""Fusion on a GPU: execute() hooks and bias against NumPy, compile_kernel launches, and
the bound-launch fast path. Marked ``gpu``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, Block, Precision, Size, Type

from .gpu_support import Operand, bound, relative_error

pytestmark = pytest.mark.gpu

_erf = np.vectorize(math.erf)
REFERENCE = {
    "identity": lambda x: x,
    "negate": lambda x: -x,
    "conj": np.conj,
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
}
ROW_MAJOR = Arrangement("row_major", "row_major", "row_major")


def describe(a, b, c, size=(30, 31, 33), complex_=False):
    desc = Size(*size) + Precision(a, b, c) + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    return desc + Type("complex") if complex_ else desc


def operands(desc, batch, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(Operand(desc, x, batch, None, rng) for x in "abc")


CASES = [  # (precisions, complex, hooks)
    (("float16", "float16", "float32"), False, dict(epilogue="relu")),
    (("float16", "float16", "float32"), False, dict(epilogue="gelu", c_load="negate")),
    (("float16", "float16", "float32"), False, dict(a_load="negate", b_load="tanh", epilogue="sigmoid")),
    (("float32", "float32", "float32"), False, dict(prologue="relu", epilogue="tanh")),
    (("float64", "float64", "float64"), False, dict(a_load=blasdx.scale(0.5), epilogue="x * x - T(1)")),
    (("int8", "int8", "int32"), False, dict(a_load="relu", epilogue=blasdx.scale(-3), c_load="negate")),
    (("float32", "float32", "float32"), True, dict(a_load="conj", c_load=blasdx.scale(2j), epilogue="negate")),
    (("float16", "float16", "float16"), True, dict(prologue=blasdx.scale(1 - 1j))),
]


def _hook_ref(hook):
    hook = blasdx.codegen.hooks.to_hook(hook, "test")
    if hook.factor is not None:
        return lambda x: hook.factor * x if np.iscomplexobj(x) else hook.factor.real * x
    if hook.name == "expression":
        assert hook.expression == "x * x - T(1)"
        return lambda x: x * x - 1
    return REFERENCE[hook.name]


@pytest.mark.parametrize("precisions, complex_, hooks", CASES,
                         ids=[f"{'c' if cx else ''}{p[0]}-{'-'.join(h)}" for p, cx, h in CASES])
def test_hooks_match_numpy(precisions, complex_, hooks):
    desc = describe(*precisions, complex_=complex_)
    a, b, c = operands(desc, batch=5)
    alpha, beta = 2, 1
    desc.execute(a.array, b.array, c.array, alpha, beta, **hooks)
    pro = hooks.get("prologue")
    fa, fb = _hook_ref(hooks.get("a_load", pro)), _hook_ref(hooks.get("b_load", pro))
    fcl, fcs = _hook_ref(hooks.get("c_load")), _hook_ref(hooks.get("epilogue"))
    ref = fcs(alpha * np.matmul(fa(a.values), fb(b.values)) + beta * fcl(c.values))
    # Load hooks store their result in the input precision again (rounding like the input).
    limit = 0 if bound(desc) == 0 else 3 * bound(desc)
    err = relative_error(c.result(), ref) if limit else float(np.max(np.abs(c.result() - ref)))
    assert err <= limit, f"{hooks}: error {err:.3g} > {limit:.3g}"


def test_satfinite_clamps_to_float16_range():
    desc = describe("float16", "float16", "float16", size=(32, 32, 32))
    a, b, c = operands(desc, batch=2)
    desc.execute(a.array, b.array, c.array, 1e5, 0, epilogue="satfinite")
    out = c.result()
    ref = np.clip(1e5 * np.matmul(a.values, b.values), -65504, 65504)
    assert np.all(np.isfinite(out)) and np.max(np.abs(out)) == 65504
    assert relative_error(out, ref) < 2e-3
    desc.execute(a.array, b.array, c.array, 1e5, 0)  # without it the large values overflow
    assert not np.all(np.isfinite(c.result()))


@pytest.mark.parametrize("precision, reach, relative, absolute", [("float32", 14, 2e-6, 1e-10),
                                                                 ("float64", 35, 1e-12, 0.0)])
def test_gelu_is_accurate_element_by_element(precision, reach, relative, absolute):
    """gelu(x) for x across its range, each element against float64 x Phi(x) from erfc: no
    cancellation where Phi(x) is small (0.5 x (1 + erf(x / sqrt 2)) in float32 misses by 6%
    at x = -4 and by 100% below x = -5)."""
    import cupy

    x = np.concatenate([np.linspace(-reach, reach, 2**16), np.geomspace(1e-8, reach, 2**14),
                        -np.geomspace(1e-8, reach, 2**14)]).astype(precision)
    items = x.size // 256
    a = cupy.asarray(x[: items * 256].reshape(items, 16, 16))
    b = cupy.asarray(np.broadcast_to(np.eye(16, dtype=precision), (items, 16, 16)).copy())  # A @ I = A exactly
    c = cupy.full_like(a, np.nan)
    desc = Size(16, 16, 16) + Precision(precision) + ROW_MAJOR + SM(900) + Block()
    desc.execute(a, b, c, epilogue="gelu")
    values, out = a.get().astype(np.float64), c.get().astype(np.float64)
    ref = 0.5 * values * np.vectorize(math.erfc)(-values / math.sqrt(2))
    excess = np.abs(out - ref) - (relative * np.abs(ref) + absolute)
    worst = np.argmax(excess)
    assert excess.flat[worst] <= 0, f"gelu({values.flat[worst]!r}) = {out.flat[worst]!r}, float64 {ref.flat[worst]!r}"


@pytest.mark.parametrize("shape", ["n", "1n", "m1", "b1n", "bm1", "bmn", "11"])
def test_bias_broadcasts_like_numpy(shape):
    import cupy

    desc = describe("float32", "float32", "float32", size=(24, 20, 16))
    batch, (m, n, _) = 3, desc.size
    a, b, c = operands(desc, batch=batch)
    dims = {"b": batch, "m": m, "n": n, "1": 1}
    host = np.random.default_rng(1).standard_normal([dims[ch] for ch in shape]).astype(np.float32)
    desc.execute(a.array, b.array, c.array, 1, 1, bias=cupy.asarray(host), epilogue="relu")
    ref = np.maximum(np.matmul(a.values, b.values) + c.values + host, 0)
    assert relative_error(c.result(), ref) < 1e-5


@pytest.mark.parametrize("shape", ["n", "bm1"])
def test_bias_calls_after_the_first_take_the_bound_launch(shape):
    """A second call with a bias of the same signature skips the checks but takes its own
    bias pointer each call; a bias that overlaps C is still refused."""
    import cupy

    desc = describe("float16", "float16", "float32", size=(32, 32, 32))
    batch, (m, n, _) = 5, desc.size
    a, b, c = operands(desc, batch=batch, seed=3)
    dims = {"b": batch, "m": m, "n": n, "1": 1}
    rng = np.random.default_rng(4)
    for _ in range(3):
        host = rng.standard_normal([dims[ch] for ch in shape]).astype(np.float32)
        c.poison_all()
        desc.execute(a.array, b.array, c.array, bias=cupy.asarray(host), epilogue="relu")
        ref = np.maximum(np.matmul(a.values, b.values) + host, 0)
        assert relative_error(c.result(), ref) < bound(desc)
    inside_c = c.array.reshape(-1)[: host.size].reshape(host.shape) if shape == "n" else c.array[:, :, :1]
    with pytest.raises(ArgumentError, match="bias overlaps C"):
        desc.execute(a.array, b.array, c.array, bias=inside_c, epilogue="relu")


@pytest.mark.parametrize("shape, alike", [("n", True), ("b1n", True), ("11", True), ("m1", False), ("bmn", False)])
def test_a_bias_alike_on_every_row_runs_the_kernel_that_reads_it_by_column(shape, alike):
    """Where the bias's row stride is 0, execute() binds the kernel that reads the bias by
    column alone (Fusion.bias_rows_alike), and it computes the same GEMM."""
    import dataclasses

    import cupy

    blasdx.pipeline.clear_caches()
    desc = describe("float16", "float16", "float32", size=(32, 32, 32))
    batch, (m, n, _) = 3, desc.size
    a, b, c = operands(desc, batch=batch, seed=5)
    dims = {"b": batch, "m": m, "n": n, "1": 1}
    host = np.random.default_rng(6).standard_normal([dims[ch] for ch in shape]).astype(np.float32)
    desc.execute(a.array, b.array, c.array, bias=cupy.asarray(host), epilogue="relu")
    assert relative_error(c.result(), np.maximum(np.matmul(a.values, b.values) + host, 0)) < bound(desc)
    general = blasdx.pipeline.fusion(desc, None, "relu", None, None, None, None, True)
    by_column = dataclasses.replace(general, bias_rows_alike=True).digest
    names = [launch.kernel.kernel_name for launch in blasdx.pipeline.BOUND_LAUNCHES.values()]
    assert len(names) == 1 and names[0].endswith(f"_f{by_column if alike else general.digest}"), names


@pytest.mark.parametrize("arrangement", [("row_major",) * 3, ("col_major", "row_major", "col_major"),
                                         ("row_major", "row_major", "col_major")], ids=["rrr", "crc", "rrc"])
def test_bias_and_epilogue_on_float_micro_tiles(arrangement):
    """float32 64x64x64: 8x4 micro-tiles with C in registers (rrr, crc) or in shared memory
    (rrc); the bias and the epilogue see each element's own row and column."""
    import cupy

    desc = Size(64, 64, 64) + Precision("float32") + Arrangement(*arrangement) + SM(900) + Block()
    a, b, c = operands(desc, batch=3)
    host = np.random.default_rng(3).standard_normal((3, 64, 1)).astype(np.float32)
    host_n = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    bias = host + host_n  # (3, 64, 64): differs along both m and n
    desc.execute(a.array, b.array, c.array, 2, -1, bias=cupy.asarray(bias), epilogue="tanh")
    ref = np.tanh(2 * np.matmul(a.values, b.values) - c.values + bias)
    assert relative_error(c.result(), ref) < 1e-5


@pytest.mark.parametrize("precisions,size", [(("float64",) * 3, (32, 32, 32)), (("float64",) * 3, (30, 30, 20)),
                                             (("float16",) * 3, (30, 30, 20)), (("float16",) * 3, (32, 32, 32)),
                                             (("float16",) * 3, (32, 32, 64))],
                         ids=["f64-32", "f64-30x30x20", "f16-30x30x20", "f16-32-staged", "f16-32x32x64-staged"])
def test_bias_and_epilogue_with_tensor_core_c_in_registers(precisions, size):
    """Row-major float64 C (and 16-bit C of one warp tile) on tensor cores goes between
    global memory and registers in pairs (16-bit C of whole 16-byte pieces: 16 bytes a lane,
    through shared memory); the bias and the epilogue still see each element's own row and column, and a
    partial warp tile (30x30) passes no element outside m x n to them."""
    import cupy

    from blasdx.plan import kernel_plan, with_alignment

    m, n, k = size
    desc = Size(m, n, k) + Precision(*precisions) + ROW_MAJOR + SM(900) + Block()
    assert kernel_plan(with_alignment(desc.plan, (16, 16, 16))).c_in_registers
    a, b, c = operands(desc, batch=3)
    rng = np.random.default_rng(3)
    bias = (rng.standard_normal((3, m, 1)) + rng.standard_normal(n)).astype(precisions[2])  # varies along m and n
    desc.execute(a.array, b.array, c.array, 2, -1, bias=cupy.asarray(bias), epilogue="tanh")
    ref = np.tanh(2 * np.matmul(a.values, b.values) - c.values + bias)
    assert relative_error(c.result(), ref) < (1e-12 if precisions[2] == "float64" else 2e-3)


def test_bias_on_a_complex_float16_gemm():
    import cupy

    desc = describe("float16", "float16", "float16", size=(16, 16, 16), complex_=True)
    a, b, c = operands(desc, batch=2)
    host = np.random.default_rng(2).standard_normal((16, 2)).astype(np.float16)
    desc.execute(a.array, b.array, c.array, 1, 0, bias=cupy.asarray(host))
    ref = np.matmul(a.values, b.values) + (host[:, 0] + 1j * host[:, 1]).astype(np.complex128)
    assert relative_error(c.result(), ref) < 5e-3


def test_bad_bias_is_an_argument_error():
    import cupy

    desc = describe("float32", "float32", "float32", size=(24, 20, 16))
    a, b, c = operands(desc, batch=3)
    cases = [
        (cupy.zeros(20, dtype=np.float64), "dtype float64, but C has dtype float32"),
        (cupy.zeros(21, dtype=np.float32), "does not broadcast"),
        (cupy.zeros((4, 24, 20), dtype=np.float32), "does not broadcast"),
        (cupy.zeros((1, 1, 24, 20), dtype=np.float32), "broadcasts to C's shape"),
        (np.zeros(20, dtype=np.float32), "NumPy"),
        (c.array[0, 0], "overlaps C"),
        (cupy.lib.stride_tricks.as_strided(cupy.zeros(1, np.float32), shape=(20,), strides=(2**32,)),
         "past the kernel's 32-bit offsets"),
    ]
    for bias, match in cases:
        with pytest.raises(ArgumentError, match=match):
            desc.execute(a.array, b.array, c.array, bias=bias)


def test_compile_kernel_launches_a_user_kernel_with_large_shared_memory():
    """A user kernel whose dynamic shared memory is over 48 KiB: the limit is raised."""
    import cupy

    gemm = Size(64, 64, 80) + Precision("float32") + ROW_MAJOR + SM(900) + Block()
    assert gemm.shared_memory_size > 48 * 1024
    source = gemm.device_source("g") + r'''
extern "C" __global__ void relu_gemm(const float* a, const float* b, float* c, float shift) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* sa = reinterpret_cast<float*>(smem + g::a_offset);
  float* sb = reinterpret_cast<float*>(smem + g::b_offset);
  float* sc = reinterpret_cast<float*>(smem + g::c_offset);
  g::load_a(a, sa);
  g::load_b(b, sb);
  g::copy_wait();
  g::execute(1.0f, sa, sb, 0.0f, sc);
  for (int i = blasdx::thread_rank(); i < g::m * g::n; i += blockDim.x) sc[i] = fmaxf(sc[i] + shift, 0.0f);
  __syncthreads();
  g::store_c(sc, c);
}
'''
    kernel = blasdx.compile_kernel(source, "relu_gemm")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 80)).astype(np.float32), rng.standard_normal((80, 64)).astype(np.float32)
    c = cupy.full((64, 64), np.nan, dtype=np.float32)
    kernel(1, gemm.block_dim, (cupy.asarray(a), cupy.asarray(b), c, np.float32(0.25)),
           shared_mem=gemm.shared_memory_size)
    ref = np.maximum(a.astype(np.float64) @ b + 0.25, 0)
    assert relative_error(c.get(), ref) < 1e-5
    with pytest.raises(ArgumentError, match="over this GPU's limit"):
        kernel(1, gemm.block_dim, (cupy.asarray(a), cupy.asarray(b), c, np.float32(0)), shared_mem=1 << 20)
    with pytest.raises(ArgumentError, match="grid must be"):
        kernel(0, gemm.block_dim, (), shared_mem=0)


def test_bound_launch_reuses_checks_but_still_catches_overlap_and_new_alignment():
    import cupy

    desc = describe("float16", "float16", "float32", size=(32, 32, 32))
    a, b, c = operands(desc, batch=4)
    desc.execute(a.array, b.array, c.array)
    first = c.result()
    c.poison_all()
    desc.execute(a.array, b.array, c.array)  # the fast path
    assert np.array_equal(c.result(), first)
    # Same shapes and strides, but C now aliases A's memory: caught on the fast path too.
    alias = cupy.ndarray(c.array.shape, c.array.dtype, a.buffer.data, strides=c.array.strides)
    with pytest.raises(ArgumentError, match="overlaps"):
        desc.execute(a.array, b.array, alias)
    # Another GEMM with other arrays and an odd pointer offset still runs correctly.
    a2, b2, c2 = operands(desc, batch=4, seed=5)
    desc.execute(a2.array, b2.array, c2.array)
    assert relative_error(c2.result(), np.matmul(a2.values, b2.values)) < 2e-3


@pytest.mark.parametrize("precision,offset", [("float16", 0), ("float16", 2), ("float32", 0), ("float32", 4)],
                         ids=["f16-aligned", "f16-2-byte-offset", "f32-aligned", "f32-4-byte-offset"])
def test_device_function_with_shared_memory_not_16_byte_aligned(precision, offset):
    """ldmatrix (f16) and the 16-byte FMA loads (f32) need 16-byte aligned matrices; other
    pointers take the element-wise loads."""
    import cupy

    gemm = Size(32, 32, 32) + Precision(precision, precision, "float32") \
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
    source = gemm.device_source("g") + r'''
extern "C" __global__ void offset_gemm(const g::a_t* a, const g::b_t* b, float* c, int offset) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<g::a_t*>(smem + offset);
  auto* sb = reinterpret_cast<g::b_t*>(smem + offset + g::b_offset);
  auto* sc = reinterpret_cast<g::c_t*>(smem + g::c_offset + 16);
  g::load_a(a, sa);
  g::load_b(b, sb);
  g::copy_wait();
  g::execute(1.0f, sa, sb, 0.0f, sc);
  g::store_c(sc, c);
}
'''
    kernel = blasdx.compile_kernel(source, "offset_gemm")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 32)).astype(precision)
    b = rng.standard_normal((32, 32)).astype(precision)
    c = cupy.full((32, 32), np.nan, dtype=np.float32)
    b_col = cupy.asarray(np.ascontiguousarray(b.T))  # column-major B: columns stored contiguously
    kernel(1, gemm.block_dim, (cupy.asarray(a), b_col, c, np.int32(offset)),
           shared_mem=gemm.shared_memory_size + 32)
    assert relative_error(c.get(), a.astype(np.float64) @ b) < (1e-3 if precision == "float16" else 1e-5)


@pytest.mark.parametrize("precisions,offset", [
    (("float16", "float16", "float16"), 0), (("float16", "float16", "float16"), 2),
    (("float16", "float16", "float32"), 0), (("float16", "float16", "float32"), 4),
    (("float64", "float64", "float64"), 0), (("float64", "float64", "float64"), 8),
], ids=["f16-pairs", "f16-c-2-byte-offset", "f16-f32-pairs", "f16-f32-c-4-byte-offset", "f64-pairs",
        "f64-c-8-byte-offset"])
def test_device_function_reads_c_in_pairs_only_where_aligned(precisions, offset):
    """The tensor-core epilogue reads and writes two neighbours of a row of C as one access
    where C is aligned to two elements; a C one element off takes them one at a time. Both
    with beta != 0 (C read) on sizes with a partial tile at the right edge (n odd)."""
    import cupy

    for size in ((32, 32, 32), (32, 29, 32)):
        gemm = Size(*size) + Precision(*precisions) + ROW_MAJOR + SM(900) + Block()
        source = gemm.device_source("g") + r'''
extern "C" __global__ void c_offset_gemm(const g::a_t* a, const g::b_t* b, g::c_t* c, int offset) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<g::a_t*>(smem + g::a_offset);
  auto* sb = reinterpret_cast<g::b_t*>(smem + g::b_offset);
  auto* sc = reinterpret_cast<g::c_t*>(smem + g::c_offset + offset);
  g::load_a(a, sa);
  g::load_b(b, sb);
  g::copy_wait();
  for (int i = threadIdx.x; i < g::m * g::ldc; i += blockDim.x) sc[i] = c[i];  // C at any offset
  __syncthreads();
  g::execute(g::scalar_t(1.5), sa, sb, g::scalar_t(-0.5), sc);
  for (int i = threadIdx.x; i < g::m * g::ldc; i += blockDim.x) c[i] = sc[i];
}
'''
        kernel = blasdx.compile_kernel(source, "c_offset_gemm")
        m, n, k = size
        rng = np.random.default_rng(6)
        a = rng.standard_normal((m, k)).astype(precisions[0])
        b = rng.standard_normal((k, n)).astype(precisions[1])
        c = rng.standard_normal((m, n)).astype(precisions[2])
        c_dev = cupy.asarray(c)
        kernel(1, gemm.block_dim, (cupy.asarray(a), cupy.asarray(b), c_dev, np.int32(offset)),
               shared_mem=gemm.shared_memory_size + 16)
        ref = 1.5 * (a.astype(np.float64) @ b) - 0.5 * c.astype(np.float64)
        tol = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[precisions[2]]
        assert relative_error(c_dev.get().astype(np.float64), ref) < tol, (size, offset)
