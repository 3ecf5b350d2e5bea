"""Users' own kernels around block GEMMs: compile with blasdx's headers, options and cache.

``compile_kernel(source, name, sm=...)`` compiles at once (no GPU needed when ``sm`` is
given), so a mistake surfaces where the kernel is defined. The returned ``UserKernel``
is called like ``cupy.RawKernel``: ``kernel(grid, block, args, shared_mem=..., stream=...)``;
on first use on a device it loads the cubin for that device (recompiling for its
architecture if it differs) and raises the dynamic shared-memory limit as a launch needs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ..codegen.identifiers import CPP_KEYWORDS, is_identifier
from ..compiler import Entry, check_arch, compile_source, entry_resources
from ..errors import ArgumentError, CompileError, DeviceError, UnsupportedError
from .device import (
    CU_FUNC_ATTRIBUTE_NUM_REGS,
    DEFAULT_DYNAMIC_SHARED,
    allow_dynamic_shared,
    compile_arch_for,
    cupy_module,
    device_arch,
    load_function,
    stream_of,
)


class UserKernel:
    """A compiled user kernel; call it like a ``cupy.RawKernel``."""

    def __init__(self, source: str, name: str, sm: int, options: tuple[str, ...]) -> None:
        self.source = source
        self.name = name
        self.sm = sm
        self.options = options
        entry = self._compile(sm)
        self.cubin = entry.cubin
        # registers, stack frame and spills a thread, as ptxas reported them for ``sm``
        self.resources = entry_resources(entry, name)
        self._functions: dict[int, tuple[Any, Any, list[int]]] = {}  # device -> (module, fn, [limit])
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<blasdx.UserKernel {self.name!r} sm={self.sm}>"

    def _compile(self, arch: int) -> Entry:
        entry = compile_source(self.source, arch, options=self.options, name=self.name,
                               metadata={"kernel_name": self.name})
        if self.name.encode() + b"\0" not in entry.cubin:
            raise CompileError(
                f"the source compiled, but it defines no kernel named {self.name!r}; declare it as "
                f'extern "C" __global__ void {self.name}(...) so that its name is not mangled',
                source=self.source, options=self.options, kernel_name=self.name)
        return entry

    def _function(self, device_id: int) -> tuple[Any, list[int]]:
        loaded = self._functions.get(device_id)  # loaded before: no lock on the launch path
        if loaded is not None:
            return loaded[1], loaded[2]
        with self._lock:
            loaded = self._functions.get(device_id)
            if loaded is None:
                device_sm = device_arch(device_id)
                if device_sm < self.sm:
                    raise DeviceError(f"device {device_id} is SM {device_sm}, older than this "
                                      f"kernel's sm={self.sm}; compile it with sm={device_sm}")
                arch = compile_arch_for(device_sm)
                cubin = self.cubin if arch == self.sm else self._compile(arch).cubin
                module, function = load_function(cubin, self.name, device_id)
                loaded = (module, function, [DEFAULT_DYNAMIC_SHARED])
                self._functions[device_id] = loaded
        return loaded[1], loaded[2]

    @property
    def registers(self) -> int:
        """Registers a thread of this kernel takes on the current device (which bound the
        threads a block may have: 65536 registers an SM)."""
        cupy = cupy_module()
        function, _ = self._function(cupy.cuda.runtime.getDevice())
        return int(cupy.cuda.driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS, function.ptr))

    def __call__(self, grid: Any, block: Any, args: tuple, *, shared_mem: int = 0,
                 stream: Any = None) -> None:
        """Launch on the current device; ``args`` as for ``cupy.RawKernel`` (CuPy arrays,
        NumPy scalars)."""
        cupy = cupy_module()
        if not isinstance(args, tuple):
            raise ArgumentError(f"args must be a tuple of kernel arguments, got {type(args).__name__}")
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, int) or shared_mem < 0:
            raise ArgumentError(f"shared_mem must be a byte count >= 0, got {shared_mem!r}")
        device_id = cupy.cuda.runtime.getDevice()
        function, limit = self._function(device_id)
        if shared_mem > limit[0]:
            most = cupy.cuda.Device(device_id).attributes["MaxSharedMemoryPerBlockOptin"]
            if shared_mem > most:
                raise ArgumentError(f"shared_mem={shared_mem} bytes is over this GPU's limit of "
                                    f"{most} bytes per block; use smaller tiles or fewer GEMMs per block")
            allow_dynamic_shared(function, shared_mem)
            limit[0] = shared_mem
        function(_dims(grid, "grid"), _dims(block, "block"), args, shared_mem=shared_mem,
                 stream=stream_of(stream))


def _dims(value: Any, what: str) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                      for d in dims):
        raise ArgumentError(f"{what} must be a positive int or a tuple of 1 to 3 of them, got {value!r}")
    return dims


def compile_kernel(source: str, name: str, *, sm: int | None = None,
                   options: Iterable[str] = ()) -> UserKernel:
    """Compile a user's CUDA source (typically around ``GEMM.device_source()``) with
    blasdx's headers, options and cache; ``name`` is its ``extern "C" __global__`` kernel.

    ``sm`` (as 900) compiles for that architecture without a GPU; by default it is the
    current device's. ``options`` are extra NVRTC flags such as ``("-DTILE=64",)``."""
    if not isinstance(source, str) or not source.strip():
        raise ArgumentError("compile_kernel needs the kernel's CUDA source as a non-empty string")
    if not is_identifier(name) or name in CPP_KEYWORDS:
        raise ArgumentError(f"name must be the kernel's C identifier (not a keyword), got {name!r}")
    if isinstance(options, str):
        raise ArgumentError(f"options must be a sequence of flags, got the string {options!r}; "
                            f"write options=({options!r},)")
    options = tuple(options)
    for opt in options:
        if not isinstance(opt, str) or not opt.startswith("-"):
            raise ArgumentError(f"each option must be an NVRTC flag string such as '-DN=4', got {opt!r}")
        if opt.startswith(("-arch", "--gpu-architecture")):
            raise ArgumentError(f"option {opt!r}: the architecture comes from sm=, not from options")
    if sm is None:
        sm = compile_arch_for(device_arch(action="compile_kernel() without sm"))
    elif isinstance(sm, bool) or not isinstance(sm, int):
        raise UnsupportedError(f"sm must be an SM number such as 900, got {sm!r}")
    check_arch(sm)
    return UserKernel(source, name, sm, options)
