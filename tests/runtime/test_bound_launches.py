"""execute()'s bound launches without a GPU (CuPy's arrays, current device, driver and stream faked; kernels
'loaded' from their plans, cuLaunchKernel recorded): the first call of a signature checks and binds, a later one
relaunches with its own pointers, scales, offsets and numbers (BoundLaunches.relaunch, which execute(),
execute_scaled() and execute_grouped() share), and one that relaunch refuses (C overlapping an input, another
current device, the driver's refusal) takes the checked path, which names the fault or binds again."""

from __future__ import annotations

import ctypes
import struct
from contextlib import nullcontext
from types import SimpleNamespace

import numpy as np
import pytest

import blasdx.pipeline as pipeline
import blasdx.runtime.arguments as arguments
import blasdx.runtime.launch as launch
from blasdx import SM, ArgumentError, Arrangement, Block, Grid, Grouped, Precision, Size
from blasdx.compiler import CompiledKernel
from blasdx.kinds import launched_plan
from blasdx.runtime.arguments import expected_dtypes
from blasdx.runtime.tensor_map import TensorMap

RRR = Arrangement("row_major", "row_major", "row_major")
RCR = Arrangement("row_major", "col_major", "row_major")


class _DriverError(Exception):
    pass


class _Array:
    """What execute() reads of a CuPy array (the fake CuPy's ndarray): pointer, device, shape, byte strides, dtype."""

    def __init__(self, shape, dtype, ptr, strides=None):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.strides = strides or np.empty(self.shape, self.dtype).strides
        self.data = SimpleNamespace(ptr=ptr, device_id=0)
        self.device = SimpleNamespace(id=0)


@pytest.fixture
def gpu(monkeypatch):
    """A fake GPU 0: ``launched`` holds each launch's (A, B, C) pointers and alpha's first 8 bytes, ``binds``
    counts the checked path's bindings; set ``device`` (the current one) or ``refusals`` (launches the driver
    refuses before it takes one)."""
    state = SimpleNamespace(device=0, refusals=0, launched=[], binds=0, made=[], zeroed=[])

    def launch_kernel(*args):
        if state.refusals:
            state.refusals -= 1
            raise _DriverError("CUDA_ERROR_INVALID_CONTEXT")
        slots = (ctypes.c_void_p * 4).from_address(args[-2])
        state.launched.append(tuple(ctypes.string_at(slots[i], 8) for i in range(4)))

    def empty(nbytes, dtype):  # split-K's workspaces (made, their counters zeroed: SplitWorkspaces)
        state.made.append(SimpleNamespace(nbytes=nbytes, data=SimpleNamespace(ptr=0x9000000 + 0x100000 * len(state.made))))
        return state.made[-1]

    cupy = SimpleNamespace(ndarray=_Array, uint8=np.uint8, empty=empty, cuda=SimpleNamespace(
        runtime=SimpleNamespace(getDevice=lambda: state.device, streamIsCapturing=lambda stream: False,
                                memsetAsync=lambda ptr, value, nbytes, stream: state.zeroed.append((ptr, nbytes))),
        Device=lambda device_id: nullcontext(),
        driver=SimpleNamespace(CUDADriverError=_DriverError, launchKernel=launch_kernel)))
    for module in (pipeline, arguments, launch):
        monkeypatch.setattr(module, "cupy_module", lambda: cupy)
    monkeypatch.setattr(launch, "stream_of", lambda stream: nullcontext())
    monkeypatch.setattr(launch, "SPLIT_WORKSPACES", launch.SplitWorkspaces())
    for module in (pipeline, launch):
        monkeypatch.setattr(module, "stream_handle", lambda stream, tensor=None: 0)
    monkeypatch.setattr(pipeline, "BOUND_LAUNCHES", launch.BoundLaunches())
    monkeypatch.setattr(TensorMap, "write", lambda self, pointer: None)

    def kernel(plan, fusion=None, device_id=None, action=""):
        compiled = CompiledKernel(cubin=b"", kernel_name="k", arch=900, shared_memory_size=0, block_dim=(128, 1, 1),
                                  options=())
        return launch.Kernel(compiled, device_id, SimpleNamespace(ptr=0xF00), None, resident_blocks=132,
                             plan=launched_plan(plan))

    def bind(*args, **kwargs):
        state.binds += 1
        return launch.bind(*args, **kwargs)

    monkeypatch.setattr(pipeline, "kernel", kernel)
    monkeypatch.setattr(pipeline, "bind", bind)
    return state


def _pointers(launched):
    """(A, B, C) pointers of a recorded launch."""
    return tuple(struct.unpack("<Q", slot)[0] for slot in launched[:3])


def _matrices(desc, base, apart=0x100000):
    """A, B, C of ``desc`` (one GEMM, contiguous in its arrangement) at ``base``, ``base`` + ``apart`` (1 MiB),
    + 2 ``apart``."""
    plan = desc.plan
    out = []
    for i, mat in enumerate((plan.a, plan.b, plan.c)):
        dtype = expected_dtypes(mat, False)[-1][0]
        item = np.dtype(dtype).itemsize
        strides = (mat.cols * item, item) if mat.layout == "row_major" else (item, mat.rows * item)
        out.append(_Array((mat.rows, mat.cols), dtype, base + i * apart, strides))
    return out


BLOCK = Size(32, 32, 32) + Precision("float16", "float16", "float32") + RRR + SM(900) + Block()


def test_a_later_call_relaunches_with_its_own_pointers_and_numbers(gpu):
    a, b, c = _matrices(BLOCK, 0x1000000)
    BLOCK.execute(a, b, c, 2.0)
    assert gpu.binds == 1 and _pointers(gpu.launched[-1]) == (0x1000000, 0x1100000, 0x1200000)
    a2, b2, c2 = _matrices(BLOCK, 0x5000000)
    BLOCK.execute(a2, b2, c2, 0.5)
    assert gpu.binds == 1 and _pointers(gpu.launched[-1]) == (0x5000000, 0x5100000, 0x5200000)
    assert struct.unpack("<f", gpu.launched[-1][3][:4]) == (0.5,)


@pytest.mark.parametrize("case, message", [
    ("c-on-a", r"^C overlaps A in memory; the output must not alias an input: pass a separate C \(C\.copy\(\) with CuPy, C\.clone\(\) with PyTorch\)$"),
    ("c-on-b", r"^C overlaps B in memory"),
    ("bias-on-c", r"^bias overlaps C in memory"),
])
def test_a_call_whose_c_overlaps_an_input_is_refused_as_on_its_first_call(gpu, case, message):
    """The bound launch's signature holds no addresses: relaunch sees the overlap, and the checked path names it."""
    a, b, c = _matrices(BLOCK, 0x1000000)
    BLOCK.execute(a, b, c, bias=_Array((32,), np.float32, 0x1300000))
    a2, b2, c2 = _matrices(BLOCK, 0x5000000)
    bias = _Array((32,), np.float32, 0x5300000)
    if case == "c-on-a":
        c2 = _Array(c2.shape, c2.dtype, a2.data.ptr)
    elif case == "c-on-b":
        c2 = _Array(c2.shape, c2.dtype, b2.data.ptr)
    else:
        bias = _Array((32,), np.float32, c2.data.ptr + 64)
    with pytest.raises(ArgumentError, match=message):
        BLOCK.execute(a2, b2, c2, bias=bias)
    assert len(gpu.launched) == 1 and gpu.binds == 1


def test_another_current_device_or_a_driver_refusal_takes_the_checked_path(gpu):
    a, b, c = _matrices(BLOCK, 0x1000000)
    BLOCK.execute(a, b, c)
    gpu.device = 1  # the arrays are on device 0: the checked path launches there
    BLOCK.execute(a, b, c)
    assert gpu.binds == 2 and len(gpu.launched) == 2
    gpu.device, gpu.refusals = 0, 1  # no current context in this thread: the checked path makes it current
    BLOCK.execute(a, b, c)
    assert gpu.binds == 3 and len(gpu.launched) == 3


FP8_BLOCK = Size(64, 128, 256) + Precision("float8_e4m3", "float8_e4m3", "float32") + RCR + SM(900) + Block()


def test_a_scaled_call_relaunches_with_its_own_scales_and_numbers(gpu):
    a, b, c = _matrices(FP8_BLOCK, 0x1000000)
    FP8_BLOCK.execute(a, b, c, 1.5, scale_a=_Array((64,), np.float32, 0x1400000), scale_b=2.0)
    assert gpu.binds == 1 and struct.unpack("<f", gpu.launched[-1][3][:4]) == (3.0,)
    FP8_BLOCK.execute(a, b, c, 1.5, scale_a=_Array((64,), np.float32, 0x1500000), scale_b=4.0)
    assert gpu.binds == 1 and struct.unpack("<f", gpu.launched[-1][3][:4]) == (6.0,)  # alpha times this call's number
    bound, = pipeline.BOUND_LAUNCHES.values()
    offset = bound.scale_offsets[0]
    assert struct.unpack("<Q", bound.arguments.values.raw[offset:offset + 8]) == (0x1500000,)
    with pytest.raises(ArgumentError, match="^scale_a overlaps C in memory"):
        FP8_BLOCK.execute(a, b, c, scale_a=_Array((64,), np.float32, c.data.ptr), scale_b=2.0)
    with pytest.raises(ArgumentError, match=r"^scale_b=inf is not finite"):
        FP8_BLOCK.execute(a, b, c, scale_a=_Array((64,), np.float32, 0x1500000), scale_b=float("inf"))
    FP8_BLOCK.execute(a, b, c, 2.0, scale_a=3.0, scale_b=0.5)  # numbers alone: execute()'s own bound launch
    assert gpu.binds == 2 and struct.unpack("<f", gpu.launched[-1][3][:4]) == (3.0,)


GROUPED = Size(128, 256, 128) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grouped()
ROWS, GROUPS = 1000, 8


def _grouped_operands(base):
    return (_Array((ROWS, 128), np.float16, base), _Array((GROUPS, 128, 256), np.float16, base + 0x100000,
                                                            strides=(2 * 128 * 256, 2, 2 * 128)),
            _Array((ROWS, 256), np.float32, base + 0x200000), _Array((GROUPS,), np.int32, base + 0x400000))


def test_a_grouped_call_relaunches_with_its_own_offsets(gpu):
    a, b, c, offsets = _grouped_operands(0x1000000)
    GROUPED.execute(a, b, c, offsets=offsets)
    a2, b2, c2, offsets2 = _grouped_operands(0x5000000)
    GROUPED.execute(a2, b2, c2, offsets=offsets2)
    assert gpu.binds == 1 and _pointers(gpu.launched[-1]) == (0x5000000, 0x5100000, 0x5200000)
    bound, = pipeline.BOUND_LAUNCHES.values()
    offset = bound.offsets_offset
    assert struct.unpack("<Q", bound.arguments.values.raw[offset:offset + 8]) == (0x5400000,)
    with pytest.raises(ArgumentError, match=r"^C overlaps offsets in memory; the output must not alias an input"):
        GROUPED.execute(a2, b2, c2, offsets=_Array((GROUPS,), np.int32, c2.data.ptr + 16))
    assert gpu.binds == 1 and len(gpu.launched) == 2


SPLIT = Size(256, 256, 16384) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grid()


def test_a_split_call_passes_its_parts_and_the_kept_workspace(gpu):
    """16 tiles on 132 blocks: 8 parts each; the workspace is made and its counters zeroed on the first call alone, and
    every launch's pointer puts its counters just before the parts (SplitWorkspaces)."""
    for base in (0x10000000, 0x50000000):
        SPLIT.execute(*_matrices(SPLIT, base, apart=0x1000000))
    bound, = pipeline.BOUND_LAUNCHES.values()
    assert (bound.splits, bound.split_units, bound.workspace_counter_bytes) == (8, 16, 256)
    workspace, = gpu.made
    assert gpu.zeroed == [(workspace.data.ptr, 8192)] and workspace.nbytes == 8192 + bound.workspace_bytes - 256
    slots = bound.arguments.values.raw[bound.splits_offset:bound.splits_offset + 40]
    assert struct.unpack("<q8xq8xQ", slots) == (8, 16, workspace.data.ptr + 8192 - 256)
    assert len(gpu.launched) == 2 and gpu.binds == 1
