"""The GPU side: CuPy, devices, streams and module loading (one loader for every kernel).

CuPy is imported on first use, once (execute() asks for it on every call); nothing here
runs at import time. Generated kernels and users' kernels both load through
``load_function``.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from ..compiler import supported_archs
from ..errors import INSTALL_HINT, ArgumentError, DeviceError

# The driver's CUfunction_attribute values that blasdx reads or sets.
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1  # static shared memory
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # what a kernel may use without raising its limit

_cupy_module: Any = None


class _LaunchConfig(ctypes.Structure):
    """The driver's CUlaunchConfig (no attributes: a kernel's __cluster_dims__ give its cluster)."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attributes", ctypes.c_void_p), ("attribute_count", ctypes.c_uint)]


def driver_function(name: str, needed_for: str) -> Any:
    """The CUDA driver's (libcuda's) function ``name``, through ctypes, for what CuPy does not
    bind; a DeviceError saying that ``needed_for`` needs a CUDA 12 driver where it is absent."""
    try:
        return getattr(ctypes.CDLL("libcuda.so.1"), name)
    except (OSError, AttributeError) as exc:
        raise DeviceError(f"the CUDA driver has no {name} ({exc}); {needed_for} needs a CUDA 12 driver") from None


def max_active_clusters(function: Any, threads: int, shared_memory: int, cluster_blocks: int) -> int:
    """Clusters of ``function`` (a kernel compiled with __cluster_dims__ of ``cluster_blocks``
    blocks) that the current device runs at once (the driver's cuOccupancyMaxActiveClusters:
    a cluster's blocks share a GPC, so this can be fewer than the SMs over the cluster size)."""
    query = driver_function("cuOccupancyMaxActiveClusters", "a clustered launch")
    config = _LaunchConfig((cluster_blocks, 1, 1), (threads, 1, 1), shared_memory, None, None, 0)
    count = ctypes.c_int(0)
    result = query(ctypes.byref(count), ctypes.c_void_p(function.ptr), ctypes.byref(config))
    if result != 0:
        raise DeviceError(f"cuOccupancyMaxActiveClusters failed (CUresult {result})")
    return count.value


def cupy_module() -> Any:
    """The cupy module, imported once."""
    global _cupy_module
    if _cupy_module is None:
        try:
            import cupy
        except ImportError as exc:  # pragma: no cover - the cu12 and cu13 extras install CuPy
            raise DeviceError(f"CuPy is required to run kernels ({exc}); {INSTALL_HINT}") from None
        _cupy_module = cupy
    return _cupy_module


def gpu_available() -> bool:
    """Whether a CUDA GPU can run kernels here (False rather than an error)."""
    try:
        return cupy_module().cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver, no device, no CuPy: all mean "no"
        return False


def current_device(action: str = "execute()") -> int:
    """The current device's id, or DeviceError saying why there is none (and that ``action`` needs one)."""
    try:
        return cupy_module().cuda.runtime.getDevice()
    except Exception:  # noqa: BLE001
        device_arch(action=action)  # raises DeviceError with the reason
        raise


def device_arch(device_id: int | None = None, action: str = "execute()") -> int:
    """The compute capability of a device as an SM number (900 for 9.0)."""
    cupy = cupy_module()
    try:
        dev = cupy.cuda.Device(device_id) if device_id is not None else cupy.cuda.Device()
        return int(dev.compute_capability) * 10
    except Exception as exc:  # noqa: BLE001 - CUDA raises several types for "no GPU"
        raise no_gpu_error(exc, action) from None


def no_gpu_error(exc: Exception, action: str) -> DeviceError:
    """The DeviceError for a CUDA call that failed because no GPU is usable: no driver at all, a
    driver older than CuPy's CUDA, or no device; ``action`` is what needed the GPU."""
    try:
        ctypes.CDLL("libcuda.so.1")
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        if "InsufficientDriver" in reason:
            reason = f"the NVIDIA driver is older than CuPy's CUDA runtime needs; update the driver ({reason})"
    except OSError:
        reason = "no NVIDIA driver is installed: libcuda.so.1 cannot be loaded"
    return DeviceError(f"no usable CUDA GPU ({reason}); {action} needs one. Without a GPU, GEMM.compile(arch=900) "
                       f"and blasdx.compile_kernel(source, name, sm=900) compile")


def compile_arch_for(device_sm: int) -> int:
    """The newest SM NVRTC can target whose cubin runs on a device of ``device_sm``."""
    if device_sm in supported_archs():
        return device_sm
    same_major = [a for a in supported_archs() if a // 100 == device_sm // 100 and a <= device_sm]
    if not same_major:
        raise DeviceError(f"the installed NVRTC cannot compile for this GPU (SM {device_sm}); "
                          f"it supports {list(supported_archs())}")
    return max(same_major)


def allow_dynamic_shared(function: Any, nbytes: int) -> None:
    """Let ``function`` launch with ``nbytes`` of dynamic shared memory (over 48 KiB)."""
    cupy_module().cuda.driver.funcSetAttribute(function.ptr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)


def load_function(cubin: bytes, name: str, device_id: int, shared_memory: int = 0) -> tuple[Any, Any]:
    """Load ``cubin`` on a device and return (module, function ``name``), its dynamic
    shared-memory limit raised to ``shared_memory`` where that and the function's static
    shared memory are over the default."""
    cupy = cupy_module()
    with cupy.cuda.Device(device_id):
        module = cupy.cuda.function.Module()
        module.load(cubin)
        function = module.get_function(name)
        static = cupy.cuda.driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function.ptr) if shared_memory else 0
        if shared_memory + static > DEFAULT_DYNAMIC_SHARED:  # the default covers static and dynamic together
            allow_dynamic_shared(function, shared_memory)
    return module, function


_external: dict[tuple[int, int], Any] = {}  # CuPy views of foreign stream handles, made once each


def torch_stream_handle(tensor: Any) -> int:
    """The raw handle of PyTorch's current stream on ``tensor``'s (CUDA) device."""
    torch = sys.modules["torch"]  # a tensor was passed, so PyTorch is imported
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton's launcher calls: ~20x cheaper
    index = tensor.get_device()
    return raw(index) if raw is not None else torch.cuda.current_stream(index).cuda_stream


class _StreamHandle:
    """A raw stream handle seen through the CUDA stream protocol (``__cuda_stream__``)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return 0, self.handle


def _external_stream(handle: int, device_id: int) -> Any:
    """A CuPy stream on a foreign handle, made once per handle: Stream.from_external where
    CuPy has it (14+), else ExternalStream."""
    key = (handle, device_id)
    stream = _external.get(key)
    if stream is None:
        cuda = cupy_module().cuda
        from_external = getattr(cuda.Stream, "from_external", None)
        if from_external is not None:
            with cuda.Device(device_id):
                stream = from_external(_StreamHandle(int(handle)))
        else:
            stream = cuda.ExternalStream(int(handle), int(device_id))
        if len(_external) < 256:
            _external[key] = stream
    return stream


def stream_handle(stream: Any, tensor: Any = None) -> int:
    """The raw handle of the stream a launch goes on: ``stream`` as ``stream_of`` reads it;
    where that is None, PyTorch's current stream if ``tensor`` (C) is a PyTorch tensor,
    else CuPy's."""
    if stream is None and tensor is not None:
        return torch_stream_handle(tensor)
    return stream_of(stream).ptr


def stream_of(stream: Any) -> Any:
    """A CuPy stream for ``stream``: None (CuPy's current stream), a CuPy stream, a
    torch.cuda.Stream, an object with ``__cuda_stream__`` or a raw handle."""
    cupy = cupy_module()
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
    device = getattr(getattr(stream, "device", None), "index", None)  # torch.cuda.Stream knows its device
    return _external_stream(int(handle), cupy.cuda.runtime.getDevice() if device is None else device)
