"""CUDA source -> cubin: NVRTC (:mod:`.nvrtc`) and the kernel cache (:mod:`.cache`).

This package sees text only (source, arch, options), never a descriptor or a plan, so
its cache key covers all that NVRTC consumes.
"""

from .. import arch
from .cache import DEFAULT_CACHE, Entry, KernelCache, make_key
from .nvrtc import (
    CompiledKernel,
    KernelResources,
    check_arch,
    compile_source,
    entry_resources,
    header_identity,
    include_dirs,
    kernel_resources,
    known_targets,
    nvrtc_version,
    options_for,
    supported_archs,
)

arch.nvrtc_targets = known_targets  # SM() refuses what this NVRTC cannot compile for

__all__ = ["DEFAULT_CACHE", "Entry", "KernelCache", "make_key", "CompiledKernel", "KernelResources", "check_arch",
           "compile_source", "entry_resources", "header_identity", "include_dirs", "kernel_resources",
           "nvrtc_version", "options_for", "supported_archs"]
