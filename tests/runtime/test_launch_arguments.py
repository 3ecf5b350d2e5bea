"""The argument block a bound launch hands to cuLaunchKernel, read back without a GPU: each
parameter of the kernel's signature (KERNEL_PARAMETERS, BIAS_PARAMETERS) finds its value,
with its C++ type's width, at the address the block gives for it. And execute()'s checks of
empty operands and biases (and complex values stored as pairs) on __cuda_array_interface__
objects: an empty batch passes them (its strides and pointers address nothing) and returns C
without a launch, a wrong dtype, shape, batch or device is refused all the same."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import blasdx
import blasdx.runtime.launch as launch
from blasdx import SM, ArgumentError, Arrangement, Block, Grid, Grouped, MaxAlignment, Precision, Size, Type
from blasdx.codegen.hooks import NO_FUSION
from blasdx.compiler import CompiledKernel
from blasdx.plan import batched_plan
from blasdx.plan.kernel import MAX_GRID, kernel_parameters
from blasdx.runtime.arguments import BiasView, MatrixView


def _view(name: str, ptr: int, batch_stride: int, batch: int = 3) -> MatrixView:
    return MatrixView(name, ptr, 0, np.dtype(np.float32), (batch, 16, 16), (batch_stride, 16, 1), 4, None)


@pytest.fixture(autouse=True)
def launches(monkeypatch) -> list:
    """The driver's launch replaced by a recorder of its arguments."""
    calls: list = []
    fake = SimpleNamespace(cuda=SimpleNamespace(driver=SimpleNamespace(launchKernel=lambda *args: calls.append(args))))
    monkeypatch.setattr(launch, "cupy_module", lambda: fake)
    return calls


def _slots(params: int, has_bias: bool) -> dict[str, bytes]:
    """(name, slot bytes) per parameter, read through the kernelParams pointer as the driver would."""
    names = [p.name for p in kernel_parameters(has_bias)]
    slots = (ctypes.c_void_p * len(names)).from_address(params)
    return {name: ctypes.string_at(slots[i], 16) for i, name in enumerate(names)}


def _kernel() -> launch.Kernel:
    compiled = CompiledKernel(cubin=b"", kernel_name="k", arch=900, shared_memory_size=4096,
                              block_dim=(64, 1, 1), options=())
    plan = batched_plan((Size(16, 16, 16) + Precision("float32") + SM(900) + Block()).plan)
    return launch.Kernel(compiled, 0, SimpleNamespace(ptr=0xF00), None, resident_blocks=2, plan=plan)


@pytest.mark.parametrize("has_bias", [False, True])
def test_every_parameter_gets_its_value(launches, has_bias):
    desc = Size(16, 16, 16) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") + SM(900) \
        + Block()
    bias = BiasView(0x5000, (0, 0, 1), 64, None) if has_bias else None
    bound = launch.bind(_kernel(), _view("a", 0x1000, 256), _view("b", 0x2000, 300), _view("c", 0x3000, 512),
                        bias)
    assert bound.grid == 3  # one block per item, more than the 2 the device runs at once
    bound.launch(0x1000, 0x2000, 0x3000, bound.scalar_bytes(1.5, np.float32(-2), desc.plan), 77, 0x5000)
    (*config, params, extra), = launches
    assert config == [0xF00, 3, 1, 1, 64, 1, 1, 4096, 77] and extra == 0
    values = _slots(params, has_bias)

    def q(name):
        return struct.unpack_from("<q", values[name])[0]

    assert (q("a"), q("b"), q("c")) == (0x1000, 0x2000, 0x3000)
    assert struct.unpack_from("<f", values["alpha"])[0] == 1.5
    assert struct.unpack_from("<f", values["beta"])[0] == -2.0
    assert (q("batch"), q("stride_a"), q("stride_b"), q("stride_c")) == (3, 256, 300, 512)
    if has_bias:
        assert (q("bias"), q("bias_batch_stride"), q("bias_row_stride"), q("bias_col_stride")) == (0x5000, 0, 0, 1)


def test_batches_past_the_largest_grid_launch_the_largest_grid(launches):
    # The batched kernel's blocks loop over the items past MAX_GRID (grid-stride).
    batch = MAX_GRID + 5
    a, b, c = (_view(x, 0x1000 * (i + 1), 256, batch) for i, x in enumerate("abc"))
    assert launch.bind(_kernel(), a, b, c).grid == MAX_GRID


@pytest.mark.parametrize(("precision", "value", "fmt", "expected"), [
    ("float64", 0.25, "<d", (0.25,)),
    ("int8", 3, "<i", (3,)),
])
def test_scalars_take_the_kernels_scalar_type(precision, value, fmt, expected):
    c = "int32" if precision == "int8" else precision
    desc = Size(16, 16, 16) + Precision(precision, precision, c) + SM(900) + Block()
    bound = launch.bind(_kernel(), _view("a", 0, 256), _view("b", 0, 256), _view("c", 0, 256))
    slots = bound.scalar_bytes(value, 0, desc.plan)
    assert len(slots) == 32 and struct.unpack_from(fmt, slots) == expected


def test_complex_double_scalars_fill_a_whole_slot():
    desc = Size(8, 8, 8) + Precision("float64") + Type("complex") + SM(900) + Block()
    bound = launch.bind(_kernel(), _view("a", 0, 64), _view("b", 0, 64), _view("c", 0, 64))
    assert struct.unpack("<4d", bound.scalar_bytes(1.5 - 2j, 3, desc.plan)) == (1.5, -2.0, 3.0, 0.0)


def test_python_scalars_are_converted_once_and_checked():
    desc = Size(16, 16, 16) + Precision("int8", "int8", "int32") + SM(900) + Block()
    bound = launch.bind(_kernel(), _view("a", 0, 256), _view("b", 0, 256), _view("c", 0, 256))
    assert bound.scalar_bytes(2, 1, desc.plan) is bound.scalar_bytes(2.0, 1.0, desc.plan)
    with pytest.raises(ArgumentError, match="beta=0.5 is not an integer"):
        bound.scalar_bytes(1, 0.5, desc.plan)


class _FakeArray:
    """What launch_signature reads of a CuPy array."""

    def __init__(self, ptr: int, shape=(2, 16, 16), strides=(1024, 64, 4), device: int = 0) -> None:
        self.data = SimpleNamespace(ptr=ptr, device_id=device)
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(np.float32)


def test_launch_signature_keys_layout_and_alignment_not_addresses():
    plan = (Size(16, 16, 16) + Precision("float32") + SM(900) + Block()).plan

    def signature(a, b, c, bias=None):
        return launch.launch_signature(_FakeArray, None, plan, NO_FUSION, a, b, c, bias)

    key, pointers = signature(_FakeArray(0x1000), _FakeArray(0x2000), _FakeArray(0x3000))
    assert pointers == (0x1000, 0x2000, 0x3000, 0)
    assert signature(_FakeArray(0x9000), _FakeArray(0xA000), _FakeArray(0xB000))[0] == key  # other addresses
    assert signature(_FakeArray(0x1008), _FakeArray(0x2000), _FakeArray(0x3000))[0] != key  # 8-byte aligned A
    assert signature(_FakeArray(0x1000, strides=(1024, 4, 64)), _FakeArray(0x2000), _FakeArray(0x3000))[0] != key
    assert signature(_FakeArray(0x1000, device=1), _FakeArray(0x2000), _FakeArray(0x3000))[0] != key
    with_bias = signature(_FakeArray(0x1000), _FakeArray(0x2000), _FakeArray(0x3000), _FakeArray(0x4000, (16,), (4,)))
    assert with_bias[1] == (0x1000, 0x2000, 0x3000, 0x4000) and with_bias[0][:len(key)] == key
    assert signature(_FakeArray(0x1000), _FakeArray(0x2000), _FakeArray(0x3000), object()) is None  # a mix: no fast path
    assert signature(_FakeArray(0x1000), object(), _FakeArray(0x3000)) is None


# --- execute()'s argument checks on empty operands (shared/TESTING.md 21), without a GPU ----------
# Arrays are objects with __cuda_array_interface__ whose shape, dtype and byte strides are NumPy's
# (NumPy >= 1.23, like CuPy, gives an empty array zero strides; a view keeps its base's).

class _Interface:
    """A GPU array as __cuda_array_interface__ describes it (nothing behind the pointer)."""

    def __init__(self, x: np.ndarray, ptr: int = 0x10000, strides: tuple | None = None) -> None:
        self.__cuda_array_interface__ = {"shape": x.shape, "typestr": x.dtype.str, "data": (ptr, False),
                                         "strides": x.strides if strides is None else strides, "version": 3}


@pytest.fixture
def no_gpu(monkeypatch):
    """The argument checks without CuPy's device queries: pointers at or past 0xD000000 lie on
    device 1, others on device 0."""
    import blasdx.runtime.arguments as arguments

    runtime = SimpleNamespace(getDevice=lambda: 0,
                              pointerGetAttributes=lambda ptr: SimpleNamespace(device=int(ptr >= 0xD000000)))
    fake = SimpleNamespace(ndarray=type("NotCupy", (), {}), cuda=SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(arguments, "cupy_module", lambda: fake)
    return arguments


RRR = Arrangement("row_major", "row_major", "row_major")
RCR = Arrangement("row_major", "col_major", "row_major")
M, N, K = 8, 4, 16


def _gemm(precision=("float32",) * 3, complex_=False, grid=False, extra=()):
    desc = Size(M, N, K) + Precision(*precision) + RRR + SM(900) + (Grid() if grid else Block())
    for op in ((Type("complex"),) if complex_ else ()) + tuple(extra):
        desc = desc + op
    return desc


def _operands(batch, dtype, pairs=False, view=False, ptr=0x100000):
    """A, B, C of ``batch`` row-major items: fresh arrays (zero strides where empty) or, with
    ``view``, the first ``batch`` items of three-item arrays (their strides)."""
    tail = (2,) if pairs else ()
    out = []
    for i, (rows, cols) in enumerate(((M, K), (K, N), (M, N))):
        x = np.zeros((3, rows, cols, *tail), dtype)[:batch] if view else np.zeros((batch, rows, cols, *tail), dtype)
        out.append(_Interface(x, ptr + i * 0x100000))
    return out


EMPTY_ACCEPTED = {  # descriptor, operand dtype, (real, imag) pairs
    "f32": (_gemm(), np.float32, False),
    "cf32-complex64": (_gemm(complex_=True), np.complex64, False),
    "cf32-pairs": (_gemm(complex_=True), np.float32, True),
    "cf16-pairs": (_gemm(("float16",) * 3, True), np.float16, True),
    "cbf16-uint16-pairs": (_gemm(("bfloat16",) * 3, True), np.uint16, True),
    "cbf16-uint16-pairs-grid": (_gemm(("bfloat16",) * 3, True, grid=True), np.uint16, True),
    "f16-grid": (_gemm(("float16", "float16", "float16"), grid=True), np.float16, False),
}


@pytest.mark.parametrize("view", [False, True], ids=["zero-strides", "view-strides"])
@pytest.mark.parametrize("case", list(EMPTY_ACCEPTED))
def test_empty_batches_pass_the_checks(no_gpu, case, view):
    desc, dtype, pairs = EMPTY_ACCEPTED[case]
    va, vb, vc = no_gpu.check_operands(desc.plan, *_operands(0, dtype, pairs, view))
    assert (va.shape, vb.shape, vc.shape) == ((0, M, K), (0, K, N), (0, M, N))
    assert va.span_bytes == vb.span_bytes == vc.span_bytes == 0
    assert vc.element_size == (2 if pairs else 1) * np.dtype(dtype).itemsize


@pytest.mark.parametrize("batch", [0, 2])
def test_complex_float8_as_uint8_pairs(no_gpu, batch):
    """Complex float8 A and B as uint8 (real, imag) pairs, complex float32 C as float32 pairs."""
    desc = _gemm(("float8_e4m3", "float8_e4m3", "float32"), True)
    a, b = (_Interface(np.zeros((batch, r, c, 2), np.uint8), p) for r, c, p in ((M, K, 0x100000), (K, N, 0x200000)))
    c = _Interface(np.zeros((batch, M, N, 2), np.float32), 0x300000)
    va, vb, vc = no_gpu.check_operands(desc.plan, a, b, c)
    assert (va.element_size, vc.element_size, vc.batch) == (2, 8, batch)


@pytest.mark.parametrize("batch", [0, 2])
def test_complex_float16_takes_float16_pairs_not_uint16(no_gpu, batch):
    """Raw integer storage stands in only for what NumPy and CuPy have no dtype for (bfloat16,
    float8); float16 has one, so uint16 pairs for it are a wrong dtype, empty or not."""
    desc = _gemm(("float16",) * 3, True)
    with pytest.raises(ArgumentError, match=r"A has dtype uint16.*expected float16 with a trailing dimension of 2"):
        no_gpu.check_operands(desc.plan, *_operands(batch, np.uint16, pairs=True))
    no_gpu.check_operands(desc.plan, *_operands(batch, np.float16, pairs=True))


def test_empty_operands_skip_stride_and_alignment_checks_only(no_gpu):
    """Odd, negative and misaligned strides and a misaligned pointer address nothing in an empty
    array; the same on one item are refused."""
    desc = _gemm(extra=(MaxAlignment,))
    good = _operands(0, np.float32)
    odd = _Interface(np.zeros((0, M, K), np.float32), ptr=0x10001, strides=(-7, 3, 5))
    no_gpu.check_operands(desc.plan, odd, *good[1:])
    with pytest.raises(ArgumentError, match="not a multiple of its 4-byte element"):
        no_gpu.check_operands(desc.plan, _Interface(np.zeros((1, M, K), np.float32), strides=(-7, 3, 5)),
                              *_operands(1, np.float32)[1:])


def _bad_empty_calls():
    f32, cbf16 = _gemm(), _gemm(("bfloat16",) * 3, True)
    a, b, c = _operands(0, np.float32)
    pa, pb, pc = _operands(0, np.uint16, pairs=True)

    def empty(shape, dtype=np.float32, ptr=0x900000):
        return _Interface(np.zeros(shape, dtype), ptr)

    return {  # descriptor, (a, b, c), error, match
        "wrong dtype": (f32, (empty((0, M, K), np.float64), b, c), ArgumentError, "A has dtype float64.*never casts"),
        "wrong C dtype": (f32, (a, b, empty((0, M, N), np.float16)), ArgumentError, "C has dtype float16"),
        "wrong rows": (f32, (empty((0, M + 1, K)), b, c), ArgumentError, r"A has shape \(0, 9, 16\), expected \(m, k\)"),
        "wrong cols": (f32, (a, b, empty((0, M, N + 1))), ArgumentError, r"C has shape \(0, 8, 5\)"),
        "batch mismatch": (f32, (a, b, _operands(2, np.float32)[2]), ArgumentError, "batch counts differ: A 0, B 0, C 2"),
        "2-D with 3-D": (f32, (a, empty((K, N)), c), ArgumentError, "all be 2-D.*or all 3-D"),
        "4-D": (f32, (empty((0, 1, M, K)), b, c), ArgumentError, "A has 4 dimensions"),
        "pairs without trailing 2": (cbf16, (pa, pb, empty((0, M, N), np.uint16)), ArgumentError,
                                     "C has dtype uint16.*with a trailing dimension of 2"),
        "pairs with trailing 3": (cbf16, (pa, pb, empty((0, M, N, 3), np.uint16)), ArgumentError,
                                  "C has dtype uint16.*with a trailing dimension of 2"),
        "pairs of the wrong dtype": (cbf16, (pa, pb, empty((0, M, N, 2), np.int16)), ArgumentError,
                                     r"C has dtype int16.*expected bfloat16 with a trailing dimension of 2 \(real, imag\) or uint16"),
        "host array": (f32, (np.zeros((0, M, K), np.float32), b, c), ArgumentError, r"NumPy \(host\) array"),
    }


BAD_EMPTY = _bad_empty_calls()


@pytest.mark.parametrize("case", list(BAD_EMPTY))
def test_empty_operands_with_a_wrong_dtype_or_shape_are_refused(no_gpu, case):
    desc, operands, error, match = BAD_EMPTY[case]
    with pytest.raises(error, match=match):
        no_gpu.check_operands(desc.plan, *operands)


def _c_view(no_gpu, batch, pairs=False):
    desc = _gemm(("bfloat16",) * 3, True) if pairs else _gemm()
    return no_gpu.check_operands(desc.plan, *_operands(batch, np.uint16 if pairs else np.float32, pairs))[2]


EMPTY_BIASES = {  # bias shape, complex pairs (C has 0 items)
    "(0, 1, n)": ((0, 1, N), False),
    "(0, m, n)": ((0, M, N), False),
    "(0, m, 1)": ((0, M, 1), False),
    "(0, 1, n, 2) pairs": ((0, 1, N, 2), True),
    "(0, m, n, 2) pairs": ((0, M, N, 2), True),
    "(n,) on an empty C": ((N,), False),
    "(m, 1, 2) pairs on an empty C": ((M, 1, 2), True),
}


@pytest.mark.parametrize("view", [False, True], ids=["zero-strides", "view-strides"])
@pytest.mark.parametrize("case", list(EMPTY_BIASES))
def test_biases_of_an_empty_batch_pass(no_gpu, case, view):
    shape, pairs = EMPTY_BIASES[case]
    dtype = np.uint16 if pairs else np.float32
    x = np.zeros((3, *shape[1:]), dtype)[:0] if view and shape[0] == 0 else np.zeros(shape, dtype)
    ptr = 0x800002 if x.size == 0 else 0x800000  # an empty bias's pointer addresses nothing: unaligned is fine
    bias = no_gpu.bias_view(_Interface(x, ptr), _c_view(no_gpu, 0, pairs))
    assert bias.span_bytes == 0  # nothing read: no overlap with C


def _bad_empty_biases():
    def bias(shape, dtype=np.float32, ptr=0x800000):
        return _Interface(np.zeros(shape, dtype), ptr)

    return {  # C's batch, C as pairs, bias, match
        "wrong dtype": (0, False, bias((0, 1, N), np.float64), "bias has dtype float64, but C has dtype float32"),
        "pairs of the wrong dtype": (0, True, bias((0, 1, N, 2), np.int16), "bias has dtype int16, but C has dtype uint16"),
        "pairs without trailing 2": (0, True, bias((0, 1, N), np.uint16), "needs a contiguous trailing dimension of 2"),
        "pairs with trailing 1": (0, True, bias((0, 1, N, 1), np.uint16), "needs a contiguous trailing dimension of 2"),
        "wrong n": (0, False, bias((0, 1, N + 1)), r"bias has shape \(0, 1, 5\), which does not broadcast"),
        "empty on 2 items": (2, False, bias((0, 1, N)), r"bias has shape \(0, 1, 4\), which does not broadcast"),
        "empty pairs on 2 items": (2, True, bias((0, 1, N, 2), np.uint16), r"bias has shape \(0, 1, 4\), which does not"),
        "empty on one GEMM": (None, False, bias((0, N)), r"bias has shape \(0, 4\), which does not broadcast"),
        "more dimensions than C": (0, False, bias((1, 0, 1, N)), r"bias has shape \(1, 0, 1, 4\); give a bias"),
        "other device": (0, False, bias((0, 1, N), ptr=0xD000000), "bias is on device 1 but C is on device 0"),
    }


BAD_EMPTY_BIASES = _bad_empty_biases()


@pytest.mark.parametrize("case", list(BAD_EMPTY_BIASES))
def test_empty_biases_with_a_wrong_dtype_shape_or_device_are_refused(no_gpu, case):
    batch, pairs, bias, match = BAD_EMPTY_BIASES[case]
    if batch is None:
        desc = _gemm()
        vc = no_gpu.check_operands(desc.plan, *(_Interface(np.zeros(s, np.float32), 0x100000 * (i + 1))
                                                for i, s in enumerate(((M, K), (K, N), (M, N)))))[2]
    else:
        vc = _c_view(no_gpu, batch, pairs)
    with pytest.raises(ArgumentError, match=match):
        no_gpu.bias_view(bias, vc)


def test_complex_bfloat16_as_uint16_pairs_with_a_bias(no_gpu):
    """One item and more, 2-D and 3-D, C row- or column-major: complex bfloat16 stored as uint16
    (real, imag) pairs counts one element per pair, and so does its bias."""
    for arrangement in (RRR, RCR, Arrangement("col_major", "row_major", "col_major")):
        desc = _gemm(("bfloat16",) * 3, True).replace(arrangement)
        for batch in (None, 1, 3):
            arrays = []
            for i, (x, rows, cols) in enumerate((("a", M, K), ("b", K, N), ("c", M, N))):
                col_major = getattr(desc.arrangement, x) == "col_major"
                store = np.zeros((*(() if batch is None else (batch,)), *((cols, rows) if col_major else (rows, cols)), 2),
                                 np.uint16)
                arrays.append(_Interface(np.swapaxes(store, -2, -3) if col_major else store, 0x100000 * (i + 1)))
            va, vb, vc = no_gpu.check_operands(desc.plan, *arrays)
            assert vc.element_size == 4 and vc.shape[-2:] == (M, N)
            assert vc.strides[-2:] == ((N, 1) if desc.arrangement.c == "row_major" else (1, M))
            bias = no_gpu.bias_view(_Interface(np.zeros((1, N, 2), np.uint16), 0x800000), vc)
            assert bias.strides == (0, 0, 1) and bias.span_bytes == N * 4
    with pytest.raises(ArgumentError, match="trailing .real, imag. dimension must be contiguous"):
        no_gpu.check_operands(desc.plan, *arrays[:2], _Interface(np.zeros((3, M, N, 4), np.uint16)[..., ::2], 0x300000))


@pytest.fixture
def no_launch(monkeypatch, no_gpu):
    """pipeline.execute() up to the launch: the kernel is 'loaded' (recorded), bind and launch recorded."""
    import blasdx.pipeline as pipeline

    calls: dict[str, list] = {"loaded": [], "bound": [], "launched": []}

    class _Device:
        def __init__(self, device_id):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    fake = SimpleNamespace(ndarray=type("NotCupy", (), {}), cuda=SimpleNamespace(Device=_Device))
    monkeypatch.setattr(pipeline, "cupy_module", lambda: fake)
    monkeypatch.setattr(pipeline, "stream_handle", lambda stream, tensor=None: 0)

    def launched_kernel(block, alignment, fusion, device_id, batch):
        calls["loaded"].append((block, fusion, batch))
        return "kernel"

    def bind(kernel, va, vb, vc, bias=None):
        calls["bound"].append(vc.batch)
        return SimpleNamespace(grid=1, scalar_bytes=lambda *args: b"",
                               launch=lambda *args: calls["launched"].append(args))

    monkeypatch.setattr(pipeline, "launched_kernel", launched_kernel)
    monkeypatch.setattr(pipeline, "bind", bind)
    return calls


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["plain", "bias-and-epilogue"])
def test_an_empty_batch_returns_c_without_a_launch(no_launch, grid, with_bias):
    """The whole execute() path: an empty batch is checked and its kernel loaded (so a device too old
    or a hook that does not compile still raises), but nothing is bound or launched (a grid of 0
    blocks is a launch error; a Grid() GEMM's split-K count divides by its 0 tiles); one item is."""
    desc = _gemm(("float16", "float16", "float32"), grid=grid).replace(Size(64, 64, 8192) if grid else Size(M, N, K))
    m, n, k = desc.size
    for batch, launched in ((0, 0), (1, 1)):
        a, b, c = (_Interface(np.zeros((batch, *s), d), 0x1000000 * (i + 1))
                   for i, (s, d) in enumerate((((m, k), np.float16), ((k, n), np.float16), ((m, n), np.float32))))
        kwargs = {"bias": _Interface(np.zeros((batch, 1, n), np.float32), 0x8000000), "epilogue": "relu"} \
            if with_bias else {}
        assert desc.execute(a, b, c, 2.0, 0.5, **kwargs) is c
        assert len(no_launch["loaded"]) == batch + 1 and no_launch["loaded"][-1][2] == batch
        assert (len(no_launch["bound"]), len(no_launch["launched"])) == (launched, launched)
    with pytest.raises(ArgumentError, match="alpha must be a number"):  # scalars are checked on empty batches too
        desc.execute(*(_Interface(np.zeros((0, *s), d), 0x1000000 * (i + 1)) for i, (s, d) in
                       enumerate((((m, k), np.float16), ((k, n), np.float16), ((m, n), np.float32)))), "2")


class _CudaRuntimeError(RuntimeError):
    pass


class _PointerOnly:
    """A GPU array as far as its __cuda_array_interface__ goes."""

    def __init__(self, shape, dtype, ptr):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": np.dtype(dtype).str, "data": (ptr, False),
                                         "version": 3, "strides": None}


@pytest.mark.parametrize("gpu, error, pattern", [
    (False, blasdx.DeviceError, r"no usable CUDA GPU \(.*\); execute\(\) needs one\. Without a GPU, "
                                r"GEMM.compile\(arch=900\)"),
    (True, ArgumentError, r"the CUDA runtime cannot say which device holds the array at 0x100000"),
])
def test_a_failing_pointer_query_is_a_blasdx_error(monkeypatch, gpu, error, pattern):
    import blasdx.runtime.arguments as arguments

    def refuse(ptr):
        raise _CudaRuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    runtime = SimpleNamespace(getDevice=lambda: 0, pointerGetAttributes=refuse, CUDARuntimeError=_CudaRuntimeError)
    fake = SimpleNamespace(ndarray=type("NotCupy", (), {}), cuda=SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(arguments, "cupy_module", lambda: fake)
    monkeypatch.setattr(arguments, "gpu_available", lambda: gpu)
    desc = Size(64, 64, 64) + SM(900) + Block()
    with pytest.raises(error, match=pattern):
        desc.execute(_PointerOnly((64, 64), "float32", 0x100000), _PointerOnly((64, 64), "float32", 0x200000),
                     _PointerOnly((64, 64), "float32", 0x300000))


def test_execute_without_a_driver_raises_device_error():
    """On a machine with CuPy and no driver (CI's), execute() says so instead of CuPy's CUDARuntimeError."""
    pytest.importorskip("cupy")
    if blasdx.gpu_available():
        pytest.skip("a GPU is here")
    desc = Size(64, 64, 64) + SM(900) + Block()
    with pytest.raises(blasdx.DeviceError, match=r"no usable CUDA GPU \((no NVIDIA driver is installed|the NVIDIA "
                                                 r"driver is older).*\); execute\(\) needs one"):
        desc.execute(_PointerOnly((64, 64), "float32", 1 << 20), _PointerOnly((64, 64), "float32", 2 << 20),
                     _PointerOnly((64, 64), "float32", 3 << 20))
    with pytest.raises(blasdx.DeviceError, match=r"compile\(\) without arch needs one"):
        desc.compile()


# --- C apart from its inputs, on their device: one message per fault on every execute() path --------

GROUPED = Size(128, 256, 128) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grouped()


def _block_operands(a_ptr, b_ptr, c_ptr):
    return [_Interface(np.zeros(s, np.float32), p) for s, p in (((M, K), a_ptr), ((K, N), b_ptr), ((M, N), c_ptr))]


def _grouped_operands(a_ptr, b_ptr, c_ptr):
    return [_Interface(np.zeros((1000, 128), np.float16), a_ptr),
            _Interface(np.zeros((8, 256, 128), np.float16).swapaxes(1, 2), b_ptr),  # column-major a group
            _Interface(np.zeros((1000, 256), np.float32), c_ptr)]


@pytest.mark.parametrize("pointers, message", [
    ((0x100000, 0x600000, 0x100000),
     r"^C overlaps A in memory; the output must not alias an input: pass a separate C \(C\.copy\(\) with CuPy, C\.clone\(\) with PyTorch\)$"),
    ((0x100000, 0x600000, 0x600000), r"^C overlaps B in memory; the output must not alias an input"),
    ((0xD100000, 0x600000, 0xA00000), r"^A, B and C are on different devices \(1, 0, 0\); move them to one device$"),
], ids=["c-on-a", "c-on-b", "a-on-device-1"])
@pytest.mark.parametrize("path", ["execute", "grouped"])
def test_c_on_an_input_or_another_device_is_named_alike_on_every_path(no_gpu, path, pointers, message):
    from blasdx.runtime.groups import check_grouped_operands

    with pytest.raises(ArgumentError, match=message):
        if path == "execute":
            no_gpu.check_operands(_gemm().plan, *_block_operands(*pointers))
        else:
            offsets = _Interface(np.zeros(8, np.int32), 0xB00000)
            check_grouped_operands(GROUPED.plan, *_grouped_operands(*pointers), offsets, GROUPED.plan.max_groups)
