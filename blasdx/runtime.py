"""Load compiled kernels on a GPU and launch them: the only module that needs a device.

``get_kernel`` compiles a plan for the current device's architecture (the plan's SM
picked the algorithm) and loads it once per device; ``execute`` checks the operands
(:mod:`blasdx.arguments`) and launches one block per batch item (grid-stride). A launch
whose CuPy operands were checked once is kept (``BoundLaunch``): a later call with the
same shapes, strides, dtypes, devices and pointer alignment only checks for overlap.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arguments import bias_view, check_operands, data_alignment, scalar
from .compiler import CompiledKernel, compile_plan, supported_archs
from .errors import ArgumentError, DeviceError
from .hooks import NO_FUSION, Fusion
from .plan import GemmPlan, with_alignment

_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # what a kernel may use without raising its limit
_loaded: dict[tuple[GemmPlan, Fusion, int], Kernel] = {}
_lock = threading.Lock()


_cupy_module: Any = None


def _cupy():
    global _cupy_module
    if _cupy_module is None:  # imported once: execute() calls this on every launch
        try:
            import cupy
        except ImportError as exc:  # pragma: no cover - cupy is a dependency
            raise DeviceError(f"CuPy is required to run kernels ({exc}); pip install cupy-cuda13x") from None
        _cupy_module = cupy
    return _cupy_module


def gpu_available() -> bool:
    """Whether a CUDA GPU can run kernels here (False rather than an error)."""
    try:
        return _cupy().cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver, no device, no CuPy: all mean "no"
        return False


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
    resident_blocks: int  # blocks the whole device runs at once (the largest useful grid)

    @property
    def kernel_name(self) -> str:
        return self.compiled.kernel_name

    def launch(self, grid: int, args: tuple, stream: Any) -> None:
        self.function((grid, 1, 1), self.compiled.block_dim, args,
                      shared_mem=self.compiled.shared_memory_size, stream=stream)


def allow_dynamic_shared(cupy: Any, function: Any, nbytes: int) -> None:
    """Let ``function`` launch with ``nbytes`` of dynamic shared memory (over 48 KiB)."""
    cupy.cuda.driver.funcSetAttribute(function.ptr, _MAX_DYNAMIC_SHARED, nbytes)


def get_kernel(plan: GemmPlan, device_id: int | None = None, fusion: Fusion | None = None) -> Kernel:
    cupy = _cupy()
    if device_id is None:
        try:
            device_id = cupy.cuda.runtime.getDevice()
        except Exception:  # noqa: BLE001
            device_arch()  # raises DeviceError with the reason
    fusion = fusion or NO_FUSION  # None and NO_FUSION are the same kernel
    key = (plan, fusion, int(device_id))  # type: ignore[arg-type]
    kernel = _loaded.get(key)
    if kernel is not None:
        return kernel
    sm = device_arch(device_id)
    if sm < plan.sm:
        raise DeviceError(
            f"device {device_id} is SM {sm}, older than the descriptor's SM({plan.sm}); use "
            f".replace(SM({sm})) or run on a newer GPU"
        )
    compiled = compile_plan(plan, compile_arch_for(sm), fusion=fusion)
    with _lock:
        kernel = _loaded.get(key)
        if kernel is None:
            with cupy.cuda.Device(device_id):
                module = cupy.cuda.function.Module()
                module.load(compiled.cubin)
                function = module.get_function(compiled.kernel_name)
                if compiled.shared_memory_size > DEFAULT_DYNAMIC_SHARED:
                    allow_dynamic_shared(cupy, function, compiled.shared_memory_size)
                sms = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
                per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    function.ptr, plan.threads, compiled.shared_memory_size)
            kernel = Kernel(compiled, int(device_id), function, module,  # type: ignore[arg-type]
                            sms * max(1, per_sm))
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


@dataclass(frozen=True)
class BoundLaunch:
    """A launch whose operands were fully checked once: the kernel, grid and strides that
    every later call with the same array signature reuses (see ``_signature``)."""

    kernel: Kernel
    grid: int
    fixed_args: tuple  # batch and the three batch strides
    spans: tuple[int, int, int]  # bytes each operand covers, for the per-call overlap check
    real_scalar: Any  # NumPy type for a Python float/int alpha or beta, None to check fully
    # Python alpha/beta values already converted to real_scalar (NumPy scalars cost ~0.5 us
    # each to make), at most _MAX_SCALARS of them.
    scalars: dict = field(default_factory=dict, compare=False, hash=False)

    def launch(self, a: Any, b: Any, c: Any, alpha: Any, beta: Any, stream: Any) -> None:
        """Launch on CuPy arrays, which the kernel call passes as their data pointers."""
        k = self.kernel
        k.function((self.grid, 1, 1), k.compiled.block_dim, (a, b, c, alpha, beta, *self.fixed_args),
                   shared_mem=k.compiled.shared_memory_size, stream=stream)

    def overlaps(self, pa: int, pb: int, pc: int) -> bool:
        sa, sb, sc = self.spans
        return bool(sc) and ((sa and pc < pa + sa and pa < pc + sc) or
                             (sb and pc < pb + sb and pb < pc + sc))


_bound: dict[tuple, BoundLaunch] = {}
_MAX_BOUND = 4096


def _signature(cupy: Any, plan: GemmPlan, fusion: Fusion, a: Any, b: Any, c: Any) -> tuple | None:
    """Everything the checks of CuPy operands depend on except the pointers' high bits:
    equal signatures pass or fail the checks alike. None for other array types."""
    ndarray = cupy.ndarray
    if type(a) is not ndarray or type(b) is not ndarray or type(c) is not ndarray:
        return None
    da, db, dc = a.data, b.data, c.data
    return (plan, fusion, a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,
            c.shape, c.strides, c.dtype, da.device_id, db.device_id, dc.device_id,
            da.ptr & 15, db.ptr & 15, dc.ptr & 15)


def _bind(plan: GemmPlan, fusion: Fusion, va: Any, vb: Any, vc: Any) -> BoundLaunch:
    plan = with_alignment(plan, (data_alignment(va), data_alignment(vb), data_alignment(vc)))
    kernel = get_kernel(plan, vc.device_id, fusion)
    batch = 1 if va.batch is None else va.batch
    strides = [np.int64(v.strides[0] if v.batch is not None else 0) for v in (va, vb, vc)]
    real = None if plan.is_complex or plan.scalar_type not in ("float", "double") else (
        np.float32 if plan.scalar_type == "float" else np.float64)
    return BoundLaunch(kernel=kernel, grid=int(min(batch, kernel.resident_blocks)),
                       fixed_args=(np.int64(batch), *strides),
                       spans=(va.span_bytes, vb.span_bytes, vc.span_bytes), real_scalar=real)


_MAX_SCALARS = 64


def _scalar(value: Any, bound: BoundLaunch, plan: GemmPlan, name: str) -> Any:
    if bound.real_scalar is not None and type(value) in (float, int):
        converted = bound.scalars.get(value)
        if converted is None:
            converted = bound.real_scalar(value)
            if len(bound.scalars) < _MAX_SCALARS:
                bound.scalars[value] = converted
        return converted
    return scalar(value, plan, name)


def execute(plan: GemmPlan, a: Any, b: Any, c: Any, alpha: Any, beta: Any, *, stream: Any = None,
            fusion: Fusion = NO_FUSION, bias: Any = None) -> Any:
    cupy = _cupy()
    key = _signature(cupy, plan, fusion, a, b, c) if bias is None else None
    bound = _bound.get(key) if key is not None else None
    if bound is not None and cupy.cuda.runtime.getDevice() == bound.kernel.device_id:
        pa, pb, pc = a.data.ptr, b.data.ptr, c.data.ptr
        if bound.overlaps(pa, pb, pc):
            check_operands(plan, a, b, c)  # raises the overlap error with its message
        if bound.grid:
            bound.launch(a, b, c, _scalar(alpha, bound, plan, "alpha"), _scalar(beta, bound, plan, "beta"),
                         _stream_of(stream, cupy))
        return c
    va, vb, vc = check_operands(plan, a, b, c)
    extra: tuple = ()
    if bias is not None:
        bv = bias_view(bias, vc)
        extra = (np.uint64(bv.ptr), *(np.int64(s) for s in bv.strides))
    alpha_v, beta_v = scalar(alpha, plan, "alpha"), scalar(beta, plan, "beta")
    s = _stream_of(stream, cupy)
    with cupy.cuda.Device(vc.device_id):
        bound = _bind(plan, fusion, va, vb, vc)
        if key is not None and len(_bound) < _MAX_BOUND:
            _bound[key] = bound
        if bound.grid:
            args = (np.uint64(va.ptr), np.uint64(vb.ptr), np.uint64(vc.ptr), alpha_v, beta_v,
                    *bound.fixed_args, *extra)
            bound.kernel.launch(bound.grid, args, s)
    return c
