"""Names in generated code: the batched kernel's name and the namespace of a device source."""

from __future__ import annotations

import hashlib

from ..errors import DescriptorError
from ..plan import KernelPlan
from .hooks import NO_FUSION, Fusion
from .identifiers import is_declarable


def kernel_name(kernel: KernelPlan, fusion: Fusion = NO_FUSION) -> str:
    """The batched kernel's name: its plan's (``kernel`` is the batched kernel's plan), plus
    a digest of the fused hooks if any."""
    return kernel.kernel_name if fusion.is_identity else f"{kernel.kernel_name}_f{fusion.digest}"


def check_namespace(name: str) -> None:
    """A device source's namespace must be a declarable C++ identifier other than ``blasdx``."""
    if not is_declarable(name) or name == "blasdx":
        raise DescriptorError(
            f"device_source name must be a C++ identifier that is not a keyword, not reserved (no '__', no '_' and "
            f"a capital first) and not 'blasdx', got {name!r}; use for example 'gemm' or 'gemm1'"
        )


def c_abi_namespace(identity: str) -> str:
    """The namespace (and symbol prefix) of a Numba unit's C-ABI functions: ``bx_`` and 16 hex digits of
    its identity, so that two GEMMs' functions link into one kernel side by side."""
    return "bx_" + hashlib.sha256(identity.encode()).hexdigest()[:16]
