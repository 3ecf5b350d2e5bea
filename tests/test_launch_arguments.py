"""The argument block a bound launch hands to cuLaunchKernel, read back without a GPU: each
parameter of the kernel's signature (KERNEL_PARAMETERS, BIAS_PARAMETERS) finds its value,
with its C++ type's width, at the address the block gives for it."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import blasdx.runtime.launch as launch
from blasdx import SM, ArgumentError, Arrangement, Block, Precision, Size, Type
from blasdx.codegen.hooks import NO_FUSION
from blasdx.compiler import CompiledKernel
from blasdx.plan.kernel import kernel_parameters
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
    return launch.Kernel(compiled, 0, SimpleNamespace(ptr=0xF00), None, resident_blocks=2)


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
    batch = launch.MAX_GRID + 5
    a, b, c = (_view(x, 0x1000 * (i + 1), 256, batch) for i, x in enumerate("abc"))
    assert launch.bind(_kernel(), a, b, c).grid == launch.MAX_GRID


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
