"""The GPU side: devices, streams and module loading (:mod:`.device`), execute()'s
argument checks (:mod:`.arguments`), loaded kernels and their launches (:mod:`.launch`),
and users' own kernels (:mod:`.user_kernel`). Nothing here renders."""

from .device import gpu_available
from .launch import Kernel
from .user_kernel import UserKernel, compile_kernel

__all__ = ["gpu_available", "Kernel", "UserKernel", "compile_kernel"]
