"""blasdx: cuBLASDx's block-level GEMM for Python, compiled at run time with NVRTC."""

from .codegen.hooks import BUILTINS as BUILTIN_HOOKS
from .codegen.hooks import Hook, expression, geglu, scale, swiglu
from .describe.descriptor import Descriptor
from .describe.operators import (
    SM,
    Accumulation,
    Alignment,
    Arrangement,
    BatchInvariant,
    BitOp,
    Block,
    BlockDim,
    Function,
    Grid,
    Grouped,
    InstructionFamily,
    LeadingDimension,
    MaxAlignment,
    Precision,
    Size,
    Stages,
    Tile,
    TransposeMode,
    Type,
    Warp,
)
from .errors import (
    ArgumentError,
    BlasdxError,
    CompileError,
    CompositionError,
    DescriptorError,
    DeviceError,
    IncompleteDescriptorError,
    UnsupportedError,
)
from .packing import pack, unpack
from .pipeline import show_config
from .plan import PlanOverrides
from .runtime import UserKernel, compile_kernel, gpu_available
from .version import __version__

__all__ = [
    "Descriptor", "Size", "Precision", "Type", "Function", "Arrangement", "TransposeMode",
    "BitOp", "InstructionFamily", "Accumulation", "LeadingDimension", "Alignment", "MaxAlignment", "SM", "Block", "BlockDim",
    "Grid", "Warp", "Grouped", "Tile", "Stages", "BatchInvariant",
    "BlasdxError", "DescriptorError", "CompositionError", "IncompleteDescriptorError", "UnsupportedError",
    "ArgumentError", "DeviceError", "CompileError", "show_config", "__version__",
    "Hook", "BUILTIN_HOOKS", "scale", "expression", "swiglu", "geglu", "compile_kernel", "UserKernel",
    "gpu_available", "pack", "unpack", "PlanOverrides",
]
