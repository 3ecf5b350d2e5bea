"""blasdx: cuBLASDx's block-level GEMM for Python, compiled at run time with NVRTC."""

from .compiler import show_config
from .descriptor import Descriptor
from .errors import (
    ArgumentError,
    BlasdxError,
    CompileError,
    DescriptorError,
    DeviceError,
    IncompleteDescriptorError,
    UnsupportedError,
)
from .hooks import BUILTINS as BUILTIN_HOOKS
from .hooks import Hook, expression, scale
from .operators import (
    SM,
    Alignment,
    Arrangement,
    BitOp,
    Block,
    BlockDim,
    Function,
    LeadingDimension,
    MaxAlignment,
    Precision,
    Size,
    TransposeMode,
    Type,
)
from .packing import pack, unpack
from .runtime import gpu_available
from .user_kernel import UserKernel, compile_kernel

__version__ = "0.1.0"

__all__ = [
    "Descriptor", "Size", "Precision", "Type", "Function", "Arrangement", "TransposeMode",
    "BitOp", "LeadingDimension", "Alignment", "MaxAlignment", "SM", "Block", "BlockDim",
    "BlasdxError", "DescriptorError", "IncompleteDescriptorError", "UnsupportedError",
    "ArgumentError", "DeviceError", "CompileError", "show_config", "__version__",
    "Hook", "BUILTIN_HOOKS", "scale", "expression", "compile_kernel", "UserKernel",
    "gpu_available", "pack", "unpack",
]
