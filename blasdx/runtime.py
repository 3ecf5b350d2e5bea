"""Load compiled kernels on a GPU and launch them: the only module that needs a device.

``get_kernel`` compiles a plan for the current device's architecture (the plan's SM
picked the algorithm) and loads it once per device; ``execute`` checks the operands
(:mod:`blasdx.arguments`) and launches one block per batch item (grid-stride).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .arguments import check_operands, data_alignment, scalar
from .compiler import CompiledKernel, compile_plan, supported_archs
from .errors import ArgumentError, DeviceError
from .plan import GemmPlan, with_alignment

_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_loaded: dict[tuple[str, int], Kernel] = {}
_lock = threading.Lock()


def _cupy():
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - cupy is a dependency
        raise DeviceError(f"CuPy is required to run kernels ({exc}); pip install cupy-cuda13x") from None
    return cupy


def device_arch(device_id: int | None = None) -> int:
    """The compute capability of a device as an SM number (900 for 9.0)."""
    cupy = _cupy()
    try:
        dev = cupy.cuda.Device(device_id) if device_id is not None else cupy.cuda.Device()
        return int(dev.compute_capability) * 10
    except Exception as exc:  # noqa: BLE001 - CUDA raises several types for "no GPU"
        raise DeviceError(
            f"no usable CUDA GPU ({type(exc).__name__}: {str(exc).splitlines()[0]}); execute() needs "
            f"one. GEMM.compile(arch=900) compiles without a GPU"
        ) from None


def compile_arch_for(device_sm: int) -> int:
    """The newest SM NVRTC can target whose cubin runs on a device of ``device_sm``."""
    if device_sm in supported_archs():
        return device_sm
    same_major = [a for a in supported_archs() if a // 100 == device_sm // 100 and a <= device_sm]
    if not same_major:
        raise DeviceError(f"the installed NVRTC cannot compile for this GPU (SM {device_sm}); "
                          f"it supports {list(supported_archs())}")
    return max(same_major)


@dataclass
class Kernel:
    """A loaded kernel on one device, ready to launch."""

    compiled: CompiledKernel
    device_id: int
    function: Any
    module: Any
    multiprocessors: int

    @property
    def kernel_name(self) -> str:
        return self.compiled.kernel_name

    def launch(self, grid: int, args: tuple, stream: Any) -> None:
        self.function((grid, 1, 1), self.compiled.block_dim, args,
                      shared_mem=self.compiled.shared_memory_size, stream=stream)


def get_kernel(plan: GemmPlan, device_id: int | None = None) -> Kernel:
    cupy = _cupy()
    if device_id is None:
        try:
            device_id = cupy.cuda.runtime.getDevice()
        except Exception:  # noqa: BLE001
            device_arch()  # raises DeviceError with the reason
    key = (plan.kernel_name, int(device_id))  # type: ignore[arg-type]
    kernel = _loaded.get(key)
    if kernel is not None:
        return kernel
    sm = device_arch(device_id)
    if sm < plan.sm:
        raise DeviceError(
            f"device {device_id} is SM {sm}, older than the descriptor's SM({plan.sm}); use "
            f".replace(SM({sm})) or run on a newer GPU"
        )
    compiled = compile_plan(plan, compile_arch_for(sm))
    with _lock:
        kernel = _loaded.get(key)
        if kernel is None:
            with cupy.cuda.Device(device_id):
                module = cupy.cuda.function.Module()
                module.load(compiled.cubin)
                function = module.get_function(compiled.kernel_name)
                if compiled.shared_memory_size > 48 * 1024:
                    cupy.cuda.driver.funcSetAttribute(function.ptr, _MAX_DYNAMIC_SHARED,
                                                      compiled.shared_memory_size)
                sms = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
            kernel = Kernel(compiled, int(device_id), function, module, sms)  # type: ignore[arg-type]
            _loaded[key] = kernel
    return kernel


def _stream_of(stream: Any, cupy: Any) -> Any:
    if stream is None:
        return cupy.cuda.get_current_stream()
    if isinstance(stream, cupy.cuda.Stream) or isinstance(stream, cupy.cuda.ExternalStream):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is None and hasattr(stream, "__cuda_stream__"):
        handle = stream.__cuda_stream__()[1]
    if handle is None and isinstance(stream, int):
        handle = stream
    if handle is None:
        raise ArgumentError(
            f"stream must be a cupy.cuda.Stream, a torch.cuda.Stream, a raw handle (int) or None, "
            f"got {type(stream).__name__}"
        )
    return cupy.cuda.ExternalStream(int(handle))


def execute(plan: GemmPlan, a: Any, b: Any, c: Any, alpha: Any, beta: Any, *, stream: Any = None) -> Any:
    va, vb, vc = check_operands(plan, a, b, c)
    plan = with_alignment(plan, (data_alignment(va), data_alignment(vb), data_alignment(vc)))
    alpha_v, beta_v = scalar(alpha, plan, "alpha"), scalar(beta, plan, "beta")
    cupy = _cupy()
    s = _stream_of(stream, cupy)
    batch = 1 if va.batch is None else va.batch
    with cupy.cuda.Device(vc.device_id):
        kernel = get_kernel(plan, vc.device_id)
        if batch == 0:
            return c
        strides = [np.int64(v.strides[0] if v.batch is not None else 0) for v in (va, vb, vc)]
        grid = int(min(batch, kernel.multiprocessors * 32))
        args = (np.uint64(va.ptr), np.uint64(vb.ptr), np.uint64(vc.ptr), alpha_v, beta_v,
                np.int64(batch), *strides)
        kernel.launch(grid, args, s)
    return c
