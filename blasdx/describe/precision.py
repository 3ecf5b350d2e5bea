"""The precision names blasdx knows: their storage, their C++ types and their kinds.

One table (``PRECISIONS``) holds every fact about a precision; the rest of the package
looks names up here and never re-derives them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PrecisionInfo:
    """What one precision is: its name, storage, C++ type and numeric kind."""

    name: str
    bits: int  # storage bits of one real element (of one packed word for packed precisions)
    is_float: bool
    signed: bool
    cpp_type: str  # the C++ type in generated code (the packed word for packed precisions)
    numpy_name: str  # the NumPy dtype of arrays passed to execute (storage type)
    pack: int = 1  # values per stored element: 2 for 4-bit integers, 32 for binary
    raw_name: str = ""  # the unsigned dtype of its width that stands in where NumPy/CuPy lack its own

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    @property
    def is_packed(self) -> bool:
        return self.pack > 1

    @property
    def value_bits(self) -> int:
        """Bits of one value: 4 for int4, 1 for binary, else the storage bits."""
        return self.bits // self.pack


_TABLE = [
    PrecisionInfo("float16", 16, True, True, "__half", "float16"),
    PrecisionInfo("bfloat16", 16, True, True, "__nv_bfloat16", "bfloat16", raw_name="uint16"),
    PrecisionInfo("tfloat32", 32, True, True, "float", "float32"),
    PrecisionInfo("float32", 32, True, True, "float", "float32"),
    PrecisionInfo("float64", 64, True, True, "double", "float64"),
    PrecisionInfo("float8_e4m3", 8, True, True, "__nv_fp8_e4m3", "float8_e4m3fn", raw_name="uint8"),
    PrecisionInfo("float8_e5m2", 8, True, True, "__nv_fp8_e5m2", "float8_e5m2", raw_name="uint8"),
    PrecisionInfo("int8", 8, False, True, "signed char", "int8"),
    PrecisionInfo("uint8", 8, False, False, "unsigned char", "uint8"),
    PrecisionInfo("int16", 16, False, True, "short", "int16"),
    PrecisionInfo("uint16", 16, False, False, "unsigned short", "uint16"),
    PrecisionInfo("int32", 32, False, True, "int", "int32"),
    PrecisionInfo("uint32", 32, False, False, "unsigned int", "uint32"),
    PrecisionInfo("int64", 64, False, True, "long long", "int64"),
    PrecisionInfo("uint64", 64, False, False, "unsigned long long", "uint64"),
    # Packed along k (see blasdx.packing): two 4-bit values per byte, low nibble first;
    # 32 one-bit values per uint32, bit 0 first. Tensor cores only (SM 75+).
    PrecisionInfo("int4", 8, False, True, "unsigned char", "uint8", pack=2),
    PrecisionInfo("uint4", 8, False, False, "unsigned char", "uint8", pack=2),
    PrecisionInfo("binary", 32, False, False, "unsigned int", "uint32", pack=32),
]

PRECISIONS: dict[str, PrecisionInfo] = {p.name: p for p in _TABLE}
# Names users type for a precision; the repr shows the canonical name.
ALIASES: dict[str, str] = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "tf32": "tfloat32",
                           "fp32": "float32", "fp64": "float64", "float8_e4m3fn": "float8_e4m3"}

# NumPy / ml_dtypes dtype names that map to a precision (ml_dtypes names its
# e4m3 type "float8_e4m3fn").
# Packed precisions are names only: a uint8 dtype means uint8, never packed int4.
_DTYPE_NAMES: dict[str, str] = {p.numpy_name: p.name for p in _TABLE
                                if p.name != "tfloat32" and not p.is_packed}
_DTYPE_NAMES["float8_e4m3fn"] = "float8_e4m3"


def normalize_precision(value: object) -> str:
    """Return the canonical precision name for a name (any case) or a dtype, or raise ValueError."""
    if isinstance(value, str):
        name = ALIASES.get(value.lower(), value.lower())
        if name in PRECISIONS:
            return name
        raise ValueError(
            f"unknown precision {value!r}; use one of {sorted(PRECISIONS)} or an alias "
            f"({', '.join(f'{a}={n}' for a, n in ALIASES.items())}); complex data is Type('complex') with a "
            f"real precision"
        )
    if value is None:
        raise ValueError(f"needs a precision name or dtype, got None; use one of {sorted(PRECISIONS)}")
    if type(value).__module__ == "torch":  # a torch.dtype: torch.float16, torch.float8_e4m3fn...
        return normalize_precision(str(value).removeprefix("torch."))
    try:
        dtype = np.dtype(value)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(
            f"precision must be a name or a NumPy dtype, got {value!r} of type "
            f"{type(value).__name__}; use one of {sorted(PRECISIONS)}"
        ) from None
    if dtype.kind == "c":
        real = np.dtype(f"f{dtype.itemsize // 2}").name
        raise ValueError(
            f"precision {dtype.name!r} is complex; use Precision({real!r}) with Type('complex')"
        )
    if dtype.name in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype.name]
    raise ValueError(f"unsupported dtype {dtype.name!r}; use one of {sorted(PRECISIONS)}")


def info(name: str) -> PrecisionInfo:
    return PRECISIONS[name]


def short_code(name: str) -> str:
    """Compact code used in kernel names: f16, bf16, tf32, f32, f64, e4m3, e5m2, s8, u8, s4, b1..."""
    special = {"float16": "f16", "bfloat16": "bf16", "tfloat32": "tf32", "float32": "f32",
               "float64": "f64", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2",
               "int4": "s4", "uint4": "u4", "binary": "b1"}
    if name in special:
        return special[name]
    p = PRECISIONS[name]
    return f"{'s' if p.signed else 'u'}{p.bits}"
