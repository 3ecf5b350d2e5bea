"""NVRTC: CUDA source + arch + options -> cubin, through CuPy's low-level bindings.

The compiler never sees a descriptor: its cache key is the source (or an identity that
determines it, so that a cached kernel is found without rendering it), the options, the
arch, the NVRTC version, the headers' identity and the blasdx version, which is all that
NVRTC consumes. NVRTC's version and targets are read from the library directly, so that
a cache hit needs no CuPy import. NVRTC and the CUDA headers come from pip wheels (found with
cuda-pathfinder), then ``CUDA_PATH`` and /usr/local/cuda. No GPU is needed; the output
is a cubin for one ``sm_XX`` (never PTX handed to the driver), or LTO-IR for a Numba kernel's link.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from ..arch import compile_arch_name
from ..errors import INSTALL_HINT, CompileError, DeviceError, UnsupportedError
from ..version import __version__
from .cache import DEFAULT_CACHE, Entry, KernelCache, make_key

logger = logging.getLogger("blasdx.compiler")

# ptxas's -v puts each kernel's registers, stack frame and spills in the log (KernelResources).
BASE_OPTIONS: tuple[str, ...] = ("-std=c++17", "-DNDEBUG", "--device-int128", "--ptxas-options=-v")
_HEADER_PACKAGES = ("nvidia-cuda-runtime", "nvidia-cuda-crt", "nvidia-cuda-cccl", "nvidia-cuda-nvrtc",  # CUDA 13
                    "nvidia-cuda-runtime-cu12", "nvidia-cuda-cccl-cu12", "nvidia-cuda-nvrtc-cu12")  # CUDA 12


@dataclass(frozen=True)
class KernelResources:
    """What ptxas gave one kernel, per thread: registers, and the bytes of its stack frame and
    of the spills (local-memory stores and loads) where the registers did not suffice."""

    registers: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)


_FUNCTION_PROPERTIES = re.compile(
    r"Function properties for (?P<name>\S+)\s+(?:ptxas\s+\.\s+)?(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) "
    r"bytes spill stores, (?P<loads>\d+) bytes spill loads\s+ptxas info\s*: Used (?P<registers>\d+) registers")


def kernel_resources(log: str, name: str) -> KernelResources | None:
    """Kernel ``name``'s resources from a log of ptxas -v (None where the log has none)."""
    for match in _FUNCTION_PROPERTIES.finditer(log or ""):
        if match["name"] == name:
            return KernelResources(registers=int(match["registers"]), stack_frame_bytes=int(match["stack"]),
                                   spill_store_bytes=int(match["stores"]), spill_load_bytes=int(match["loads"]))
    return None


def entry_resources(entry: Entry, name: str) -> KernelResources | None:
    """Kernel ``name``'s resources from the compile log that compile_source keeps with a cubin."""
    return kernel_resources(entry.metadata.get("log", ""), name)


@dataclass(frozen=True)
class CompiledKernel:
    """A cubin for one architecture and what is needed to launch its kernel; ``resources``
    (registers, spills) as ptxas reported them."""

    cubin: bytes
    kernel_name: str
    arch: int  # as SM(): 900 for sm_90
    shared_memory_size: int
    block_dim: tuple[int, int, int]
    options: tuple[str, ...]
    resources: KernelResources | None = None


def _nvrtc() -> Any:
    try:
        from cupy.cuda import nvrtc
    except Exception as exc:  # noqa: BLE001 - any import failure means the same to a user
        raise DeviceError(
            f"NVRTC is not available through CuPy ({exc}); {INSTALL_HINT}"
        ) from None
    return nvrtc


@lru_cache(maxsize=1)
def _pathfinder() -> Any:
    """cuda.pathfinder (it finds NVRTC and the headers in pip wheels), imported on first
    use; None where it is not installed."""
    try:
        import cuda.pathfinder as pathfinder
    except ImportError:
        return None
    return pathfinder


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    """libnvrtc loaded directly, found as CuPy finds it (cuda-pathfinder): its version and
    targets cost ~6 ms this way, against ~100 ms to import CuPy. None where it is not
    found that way (CuPy's binding answers then)."""
    pathfinder = _pathfinder()
    try:
        return None if pathfinder is None else ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:  # noqa: BLE001 - not found or not loadable: fall back to CuPy
        return None


@lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    lib = _library()
    if lib is not None:
        major, minor = ctypes.c_int(), ctypes.c_int()
        if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
            return major.value, minor.value
    nvrtc = _nvrtc()
    try:
        return tuple(nvrtc.getVersion())  # type: ignore[return-value]
    except Exception as exc:  # noqa: BLE001
        raise DeviceError(
            f"NVRTC could not be loaded ({exc}); {INSTALL_HINT}, or set CUDA_PATH to a CUDA toolkit"
        ) from None


@lru_cache(maxsize=1)
def supported_archs() -> tuple[int, ...]:
    """The SMs (as 750, 800, ...) the installed NVRTC can compile for."""
    lib = _library()
    if lib is not None:
        count = ctypes.c_int()
        if lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)) == 0:
            archs = (ctypes.c_int * count.value)()
            if lib.nvrtcGetSupportedArchs(archs) == 0:
                return tuple(int(a) * 10 for a in archs)
    return tuple(int(a) * 10 for a in _nvrtc().getSupportedArchs())


@lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """Header directories: CUDA runtime headers and CCCL, from wheels, then CUDA_PATH."""
    found: list[str] = []
    pathfinder = _pathfinder()
    for lib in ("cudart", "cccl"):
        try:
            path = pathfinder.find_nvidia_header_directory(lib) if pathfinder is not None else None
        except Exception:  # noqa: BLE001 - a missing wheel just means: try the fallbacks
            path = None
        if path and path not in found:
            found.append(str(path))
    if not any(Path(d, "cuda_fp16.h").is_file() for d in found):
        for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
            if root and Path(root, "include", "cuda_fp16.h").is_file():
                found.append(str(Path(root, "include")))
                cccl = Path(root, "include", "cccl")
                if cccl.is_dir():
                    found.append(str(cccl))
                break
    if not any(Path(d, "cuda_fp16.h").is_file() for d in found):
        raise DeviceError(
            f"CUDA headers (cuda_fp16.h) not found; {INSTALL_HINT}, or set CUDA_PATH to a CUDA toolkit"
        )
    return tuple(found)


@lru_cache(maxsize=1)
def header_identity() -> tuple[tuple[str, str], ...]:
    """Versions of the header wheels (or the directories) that define what NVRTC reads."""
    ident = []
    for pkg in _HEADER_PACKAGES:
        try:
            ident.append((pkg, importlib_metadata.version(pkg)))
        except importlib_metadata.PackageNotFoundError:
            pass
    return tuple(ident) + tuple(("dir", d) for d in include_dirs())


def check_arch(arch: int) -> None:
    """``arch`` must be an SM number (900 for sm_90) that the installed NVRTC targets."""
    if isinstance(arch, bool) or not isinstance(arch, int) or arch < 100 or arch % 10:
        hint = ""
        if isinstance(arch, str) and arch.removeprefix("sm_").isdigit():
            hint = f" (did you mean arch={int(arch.removeprefix('sm_')) * (10 if arch.startswith('sm_') else 1)}?)"
        elif isinstance(arch, int) and not isinstance(arch, bool) and 10 <= arch < 100:
            hint = f" (did you mean arch={arch * 10}?)"
        raise UnsupportedError(f"arch must be an SM number such as 800 or 900 (an int), got {arch!r}{hint}")
    archs = supported_archs()
    if arch not in archs:
        major, minor = nvrtc_version()
        raise UnsupportedError(
            f"NVRTC {major}.{minor} cannot compile for SM {arch}; it supports "
            f"{list(archs)}. Use a supported SM, or install an NVRTC that targets SM {arch}"
        )


def known_targets() -> tuple[tuple[int, int], tuple[int, ...]] | None:
    """((major, minor), SMs) of NVRTC where its library loads directly, else None (asking
    CuPy's binding would import CuPy: the compile checks the arch then)."""
    if _library() is None:
        return None
    return nvrtc_version(), supported_archs()


def options_for(arch: int, extra: Iterable[str] = ()) -> tuple[str, ...]:
    return (f"-arch={compile_arch_name(arch)}", *BASE_OPTIONS, *(f"-I{d}" for d in include_dirs()), *extra)


# What compile_source can return, and the NVRTC options each adds: LTO-IR is relocatable device code for a
# link-time-optimizing link (nvJitLink: Numba's kernels, blasdx.numba); -rdc=true warns of every
# unused constexpr (177), of which a device source has many.
OUTPUTS: dict[str, tuple[str, ...]] = {"cubin": (), "ltoir": ("-rdc=true", "-dlto", "-diag-suppress=177")}


def whole_cubin(code: bytes) -> bytes:
    """A cubin as NVRTC made it: CuPy's getCUBIN (14.2) drops its last byte, as if it were a C string's NUL, where
    the ELF's program headers end (that byte is a 0 of the last one's alignment)."""
    if len(code) < 64 or code[:4] != b"\x7fELF":
        return code
    program_headers, section_headers = struct.unpack_from("<QQ", code, 0x20)
    program_size, programs, section_size, sections = struct.unpack_from("<HHHH", code, 0x36)
    end = max(program_headers + programs * program_size, section_headers + sections * section_size)
    return code + b"\0" if end == len(code) + 1 else code


def nvrtc_compile(source: str, options: tuple[str, ...], program_name: str,
                  output: str = "cubin") -> tuple[bytes, str]:
    """Run NVRTC; return (cubin or LTO-IR, as ``output`` names it, and the log) or raise CompileError."""
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(source, program_name, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"NVRTC failed to compile {program_name}: {exc}", log=log,
                               source=source, options=options, kernel_name=program_name) from None
        code = nvrtc.getLTOIR(prog) if output == "ltoir" else whole_cubin(nvrtc.getCUBIN(prog))
        return code, nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def compile_source(source: str | Callable[[], str], arch: int, *, options: Iterable[str] = (),
                   name: str = "blasdx", metadata: dict | None = None, cache: KernelCache | None = None,
                   identity: str | None = None, output: str = "cubin") -> Entry:
    """Compile ``source`` for ``arch`` (cached). ``metadata`` is stored with the cubin.

    ``source`` may be a function that makes it, with ``identity``, a text that determines
    the source (what it is rendered from and by), in its place in the cache key: a cached
    kernel is then found without making its source. ``output="ltoir"``: the entry's bytes
    are LTO-IR (OUTPUTS), for nvJitLink, in place of a cubin."""
    if identity is None and callable(source):
        raise TypeError("compile_source: a source made on demand needs an identity")
    if output not in OUTPUTS:
        raise ValueError(f"compile_source: output must be one of {sorted(OUTPUTS)}, got {output!r}")
    check_arch(arch)
    full_options = options_for(arch, (*OUTPUTS[output], *options))
    named = {"source": source} if identity is None else {"identity": identity}  # never equal to each other
    produced = {} if output == "cubin" else {"output": output}  # (cubins keep the keys they had)
    key = make_key(**named, options=full_options, arch=arch, nvrtc=nvrtc_version(), headers=header_identity(),
                   blasdx=__version__, **produced)

    def build() -> Entry:
        text = source() if callable(source) else source
        start = time.perf_counter()
        cubin, log = nvrtc_compile(text, full_options, name, output)
        logger.debug("compiled %s for sm_%d in %.3f s", name, arch // 10, time.perf_counter() - start)
        return Entry(cubin=cubin, metadata={**(metadata or {}), "key": key, "name": name,
                                            "log": log, **produced})

    return (cache or DEFAULT_CACHE).get_or_create(key, build)
