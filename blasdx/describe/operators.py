"""The operators a user adds together to describe one block GEMM.

Each operator is a frozen pydantic model: immutable, comparable, hashable, with a
``repr`` that evaluates back to an equal operator. Checks that involve one operator live
here; checks across operators live in :mod:`blasdx.describe.rules`.

``a + b`` returns a Descriptor. Operators never import the Descriptor (whose traits and
rules import them): :mod:`blasdx.describe.descriptor` registers itself as
``Operator.composition`` when it is imported, which ``import blasdx`` always does.
"""

from __future__ import annotations

import difflib
import numbers
import re
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .. import arch
from ..arch import SUPPORTED_SMS, accepted_sms
from ..errors import DescriptorError
from .precision import normalize_precision

if TYPE_CHECKING:
    from .descriptor import Descriptor

LAYOUTS: tuple[str, ...] = ("row_major", "col_major")


def _extent(value: object, what: str) -> int:
    """m, n or k of Size or Tile: an int of at least 1."""
    value = _strict_int(value, what)
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {value}; a GEMM needs a positive size")
    return value


def _strict_int(value: object, what: str) -> int:
    """An int, or a NumPy integer (shape arithmetic yields them); never a bool or a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what} must be an int, got {value!r} of type {type(value).__name__}")
    return int(value)


class Operator(BaseModel):
    """Base of all operators: positional arguments, typed errors, code-like repr."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ClassVar[str] = "Operator"
    # The class that composes operators (blasdx.describe.descriptor.Descriptor, registered there).
    composition: ClassVar[Any] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise DescriptorError(
                f"{type(self).__name__} takes at most {len(names)} arguments "
                f"({', '.join(names)}), got {len(args)}: {args!r}"
            )
        for name, value in zip(names, args):
            if name in kwargs:
                raise DescriptorError(f"{type(self).__name__}: {name} given twice")
            kwargs[name] = value
        try:
            super().__init__(**kwargs)
        except ValidationError as exc:
            raise DescriptorError(_describe(type(self).__name__, exc)) from None

    def __repr__(self) -> str:
        values = ", ".join(repr(getattr(self, name)) for name in type(self).model_fields)
        return f"{type(self).__name__}({values})"

    __str__ = __repr__

    def __add__(self, other: Operator | Descriptor) -> Descriptor:
        return Operator.composition.of(self) + other  # type: ignore[no-any-return]

    def __radd__(self, other: object) -> Descriptor:
        # Block + Size(...) (the class, not Block()), 5 + Size(...) and sum()'s start, 0: the descriptor says
        return Operator.composition.of(self).__radd__(other)  # type: ignore[no-any-return]

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Any:
        """A copy with ``update``'s fields, validated as a new operator is (never a bypass)."""
        return type(self)(**{**{name: getattr(self, name) for name in type(self).model_fields}, **(update or {})})

    @classmethod
    def model_construct(cls, _fields_set: Any = None, **values: Any) -> Any:
        """Validated, as ``cls(**values)``: an operator is never built unchecked."""
        return cls(**values)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise DescriptorError(
            f"{self!r} is an operator already, not a class; use it as it is (for example + MaxAlignment), "
            f"without ()"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise DescriptorError(
            f"operators are immutable: cannot set {type(self).__name__}.{name}; make a new one, for example "
            f"descriptor.replace({type(self).__name__}(...))"
        )


def _describe(cls_name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if err["type"] == "missing":
            msg = "is required"
        if err["type"] == "extra_forbidden":
            msg = f"is not an argument of {cls_name} (arguments: {', '.join(_fields(cls_name))})"
        if not field:
            parts.append(msg)
        elif err["type"] in ("missing", "extra_forbidden"):
            parts.append(f"{cls_name}.{field} {msg}")
        else:
            parts.append(f"{cls_name}.{field}: {msg}")
    return "; ".join(parts)


def _fields(cls_name: str) -> list[str]:
    for cls in Operator.__subclasses__():
        if cls.__name__ == cls_name:
            return list(cls.model_fields)
    return []


class Size(Operator):
    """Size(m, n, k=1): C is m x n, the inner dimension is k."""

    kind: ClassVar[str] = "Size"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, m: int, n: int, k: int = 1) -> None: ...
    m: int
    n: int
    k: int = 1

    @field_validator("m", "n", "k", mode="before")
    @classmethod
    def _positive(cls, v: object, info) -> int:
        return _extent(v, info.field_name)


class Precision(Operator):
    """Precision(a, b=a, c=a): the real precision of A, B and C (names or dtypes)."""

    kind: ClassVar[str] = "Precision"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, a: object = "float32", b: object = None, c: object = None) -> None: ...
    a: str = "float32"
    b: str | None = None
    c: str | None = None

    @field_validator("a", "b", "c", mode="before")
    @classmethod
    def _name(cls, v: object, info) -> str | None:
        if v is None and info.field_name != "a":  # b and c default to a
            return None
        return normalize_precision(v)

    def model_post_init(self, __context: Any) -> None:
        if self.b is None:
            object.__setattr__(self, "b", self.a)
        if self.c is None:
            object.__setattr__(self, "c", self.a)


class Type(Operator):
    """Type('real' | 'complex')."""

    kind: ClassVar[str] = "Type"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: str = "real") -> None: ...
    value: str = "real"

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in ("real", "complex"):
            raise ValueError(f"must be 'real' or 'complex', got {v!r}")
        return v  # type: ignore[return-value]


class Function(Operator):
    """Function('MM'): the only function is the matrix multiply."""

    kind: ClassVar[str] = "Function"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: str = "MM") -> None: ...
    value: str = "MM"

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v != "MM":
            raise ValueError(f"must be 'MM' (matrix multiply), got {v!r}")
        return "MM"


class BitOp(Operator):
    """BitOp('xor' | 'and'): how a binary GEMM combines bits before counting them.

    With Precision('binary', 'binary', 'int32'), C(i, j) accumulates popcount(A(i, :) op
    B(:, j)): 'xor' counts differing bits (Hamming distance), 'and' counts common set bits.
    """

    kind: ClassVar[str] = "BitOp"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: str = "xor") -> None: ...
    value: str = "xor"

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in ("xor", "and"):
            raise ValueError(f"must be 'xor' (Hamming distance) or 'and' (common set bits), got {v!r}")
        return v  # type: ignore[return-value]


def _layout(v: object, field: str) -> str:
    if v not in LAYOUTS:
        hint = ""
        if isinstance(v, str):
            spelled = v.lower().replace("-", "_").replace(" ", "_").replace("column", "col")
            close = difflib.get_close_matches(spelled, LAYOUTS, n=1, cutoff=0.6)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
        raise ValueError(f"must be 'row_major' or 'col_major', got {v!r}{hint}")
    return v  # type: ignore[return-value]


class Arrangement(Operator):
    """Arrangement(a, b='col_major', c='col_major'): memory order of each matrix."""

    kind: ClassVar[str] = "Arrangement"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, a: str = "row_major", b: str = "col_major", c: str = "col_major") -> None: ...
    a: str = "row_major"
    b: str = "col_major"
    c: str = "col_major"

    @field_validator("a", "b", "c", mode="before")
    @classmethod
    def _check(cls, v: object, info) -> str:
        return _layout(v, info.field_name)


class TransposeMode(Operator):
    """Deprecated: TransposeMode(a, b) with 'N', 'T' or 'C'; use Arrangement instead.

    N is col_major, T is row_major, C is row_major with the matrix conjugated.
    """

    kind: ClassVar[str] = "TransposeMode"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, a: str, b: str) -> None: ...
    a: str
    b: str

    @field_validator("a", "b", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in ("N", "T", "C"):
            raise ValueError(f"must be 'N', 'T' or 'C', got {v!r}")
        return v  # type: ignore[return-value]

    # The memory order each mode means (C: row-major, conjugated).
    LAYOUT: ClassVar[dict[str, str]] = {"N": "col_major", "T": "row_major", "C": "row_major"}

    def model_post_init(self, __context: Any) -> None:
        layout = self.LAYOUT
        warnings.warn(
            f"TransposeMode is deprecated; use Arrangement({layout[self.a]!r}, {layout[self.b]!r})"
            + (" and conjugate the data" if "C" in (self.a, self.b) else ""),
            DeprecationWarning, stacklevel=4,
        )


class LeadingDimension(Operator):
    """LeadingDimension(lda, ldb, ldc) in elements (in values for packed int4 and binary)."""

    kind: ClassVar[str] = "LeadingDimension"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, a: int, b: int, c: int) -> None: ...
    a: int
    b: int
    c: int

    @field_validator("a", "b", "c", mode="before")
    @classmethod
    def _positive(cls, v: object, info) -> int:
        v = _strict_int(v, f"ld{info.field_name}")
        if v < 1:
            raise ValueError(f"ld{info.field_name} must be >= 1, got {v}")
        return v


class Alignment(Operator):
    """Alignment(a, b, c): guaranteed byte alignment of the A, B and C pointers."""

    kind: ClassVar[str] = "Alignment"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, a: int, b: int, c: int) -> None: ...
    a: int
    b: int
    c: int

    @field_validator("a", "b", "c", mode="before")
    @classmethod
    def _check(cls, v: object, info) -> int:
        v = _strict_int(v, info.field_name)
        if v < 1 or v & (v - 1):
            raise ValueError(f"must be a power of two in bytes (1, 2, 4, 8 or 16), got {v}")
        if v > 16:
            raise ValueError(f"must be <= 16 bytes, got {v}; use Alignment(16, ...) (MaxAlignment)")
        return v


MaxAlignment = Alignment(16, 16, 16)


class SM(Operator):
    """SM(cc): the architecture whose algorithm to use, as 750, 800, 900, 1000...: one that
    cuBLASDx 0.7 accepts and the installed NVRTC can compile for."""

    kind: ClassVar[str] = "SM"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: int) -> None: ...
    value: int

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> int:
        accepted = accepted_sms()
        if isinstance(v, str):
            spelled = re.fullmatch(r"\s*(?:sm|compute)?_?(\d+)a?\s*", v.lower())
            meant = next((sm for sm in (int(spelled[1]), int(spelled[1]) * 10) if sm in accepted), None) if spelled else None
            hint = f"; did you mean SM({meant})?" if meant else ""
            raise ValueError(f"must be an int such as 900 (sm_90), got the string {v!r}{hint}")
        v = _strict_int(v, "value")
        if v in accepted:
            return v
        if v * 10 in accepted:
            raise ValueError(f"must be one of {list(accepted)}, got {v}; did you mean SM({v * 10})?")
        targets = arch.nvrtc_targets()
        if v in SUPPORTED_SMS and targets is not None:  # blasdx supports it; this NVRTC does not
            (major, minor), _ = targets
            thor = {1010: " (SM 1010 is Thor's name before CUDA 13; NVRTC 13 calls it SM 1100)",
                    1100: " (SM 1100 is Thor's name from CUDA 13; NVRTC 12 calls it SM 1010)"}.get(v, "")
            raise ValueError(f"the installed NVRTC {major}.{minor} cannot compile for SM {v}{thor}; use one of "
                             f"{list(accepted)}, or install an NVRTC (nvidia-cuda-nvrtc) that targets SM {v}")
        why = (" (Volta and Xavier: blasdx, like cuBLASDx 0.7, does not support them)" if v in (700, 720) else
               " (the installed NVRTC targets it, but blasdx has no facts for it yet)"
               if targets is not None and v in targets[1] else "")
        raise ValueError(f"must be one of {list(accepted)}, got {v}{why}")


INSTRUCTION_FAMILIES: tuple[str, ...] = ("wgmma", "mma")
ACCUMULATIONS: tuple[str, ...] = ("accurate", "fast")


class InstructionFamily(Operator):
    """InstructionFamily('wgmma' | 'mma'): demand Hopper's warpgroup MMA (an
    ``UnsupportedError`` names each condition that fails, instead of a silent fallback) or
    forbid it ('mma': warp-level mma.sync). Without it the planner takes wgmma wherever its
    conditions hold and says so in ``explain()``."""

    kind: ClassVar[str] = "InstructionFamily"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: str) -> None: ...
    value: str

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in INSTRUCTION_FAMILIES:
            raise ValueError(f"must be 'wgmma' (Hopper's warpgroup MMA) or 'mma' (warp-level mma.sync), got {v!r}")
        return v  # type: ignore[return-value]


class Accumulation(Operator):
    """Accumulation('accurate' | 'fast'): where the tensor cores keep the running sum in fewer bits
    than C's type (FP8 wgmma: about 14), 'accurate' (the default) promotes partial sums into float32
    registers every 128 of k; 'fast' leaves the whole K loop in the tensor cores' own sum (cuBLAS's
    use_fast_accum: relative errors near 1e-3 at K of thousands, against about 1e-4). It changes
    nothing where the tensor cores keep C's precision; ``explain()`` says which runs."""

    kind: ClassVar[str] = "Accumulation"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: str) -> None: ...
    value: str

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in ACCUMULATIONS:
            raise ValueError(f"must be 'accurate' (partial sums promoted into float32) or 'fast' (the tensor cores' "
                             f"own sum over the whole K loop), got {v!r}")
        return v  # type: ignore[return-value]


class Execution(Operator):
    """Base of the execution operators, one kind: how the GEMM runs (Block(), Grid(), ...). A descriptor holds one;
    ``descriptor.replace`` puts another in its place. blasdx.kinds.<name> plans, renders and explains each."""

    kind: ClassVar[str] = "Execution"
    summary: ClassVar[str]  # what it runs, in the words of errors that list the execution operators
    # The threads of one GEMM where the kind fixes them; None where BlockDim or the planner says.
    fixed_threads: ClassVar[int | None] = None

    def model_post_init(self, __context: Any) -> None:
        if type(self) is Execution:
            raise ValueError("Execution is the base of the execution operators; use one of them: "
                             + ", ".join(f"{cls.__name__}()" for cls in execution_operators()))

    @property
    def name(self) -> str:
        """The operator's name ("Block", "Grid", ...)."""
        return type(self).__name__


def execution_operators() -> tuple[type[Execution], ...]:
    """Every execution operator, in the order they were defined."""
    return tuple(Execution.__subclasses__())


class Block(Execution):
    """Block(): the GEMM is executed by one thread block (Size fits in shared memory)."""

    summary: ClassVar[str] = "Block() runs one block GEMM of Size"


class BlockDim(Operator):
    """BlockDim(x, y=1, z=1): the threads of the block that run the GEMM."""

    kind: ClassVar[str] = "BlockDim"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, x: int, y: int = 1, z: int = 1) -> None: ...
    x: int
    y: int = 1
    z: int = 1

    @field_validator("x", "y", "z", mode="before")
    @classmethod
    def _check(cls, v: object, info) -> int:
        v = _strict_int(v, info.field_name)
        if v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v

    def model_post_init(self, __context: Any) -> None:
        total = self.x * self.y * self.z
        if not 32 <= total <= 1024:
            raise ValueError(
                f"BlockDim{(self.x, self.y, self.z)} has {total} threads; "
                f"a block GEMM needs 32 <= x*y*z <= 1024 threads"
            )

    @property
    def threads(self) -> int:
        return self.x * self.y * self.z


class Grid(Execution):
    """Grid(): the GEMM runs over a grid of blocks, so Size(m, n, k) is the whole problem, of
    any size. Each block computes tiles of C (``Tile``, suggested where absent) with a
    pipelined K loop (``Stages``) on the block GEMM's device API."""

    summary: ClassVar[str] = "Grid() runs a problem of any Size over many blocks"


class Warp(Execution):
    """Warp(): each warp of a block runs its own GEMM of Size on its own tiles in shared memory (the scope of
    CUDA's warp matrix functions); the device API takes the lane from the thread index, and execute() runs a
    batch with an item a warp, several warps a block."""

    summary: ClassVar[str] = "Warp() runs a GEMM of Size on each warp of a block"
    fixed_threads: ClassVar[int | None] = 32


class Grouped(Execution):
    """Grouped(ragged='m' | 'k'): one GEMM per group (a mixture-of-experts layer's experts) on one persistent grid
    of Grid()'s tiles, the groups from ``offsets`` on the device at each call (torch._grouped_mm's: group g ends at
    offsets[g]). 'm' (the default): C_g = A_g B_g, group g a run of A's and C's rows, B one matrix a group (the
    forward product and the activations' gradient); Size(m, n, k) fixes n and k, and m, a typical group's rows,
    only guides the suggested Tile. 'k': C_g = A_g B_g, group g a run of A's columns and B's rows (the weights'
    gradient, A^T dC), C one matrix a group; Size fixes m and n, and k, a typical group's rows, guides the Tile."""

    summary: ClassVar[str] = "Grouped() runs one GEMM per group of rows, each group's rows from offsets at the call"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, ragged: str = "m") -> None: ...
    ragged: str = "m"

    @field_validator("ragged", mode="before")
    @classmethod
    def _check(cls, v: object) -> str:
        if v not in ("m", "k"):
            raise ValueError(f"must be 'm' (groups of A's and C's rows) or 'k' (groups of A's columns and B's rows, "
                             f"C one matrix a group), got {v!r}")
        return v  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "Grouped()" if self.ragged == "m" else f"Grouped({self.ragged!r})"

    __str__ = __repr__


class Tile(Operator):
    """Tile(m, n, k): with Grid(), the block tile: each block computes m x n tiles of C, k of
    the inner dimension per step of its K loop (the block GEMM of Size(m, n, k))."""

    kind: ClassVar[str] = "Tile"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, m: int, n: int, k: int) -> None: ...
    m: int
    n: int
    k: int

    @field_validator("m", "n", "k", mode="before")
    @classmethod
    def _positive(cls, v: object, info) -> int:
        return _extent(v, info.field_name)


class BatchInvariant(Operator):
    """BatchInvariant(): with Grid() or Grouped(), every row of C is bitwise the same whatever the number of rows
    in the call (Size's m, or a group's rows), as inference servers need for reproducible sampling: the same
    instructions in the same K order for every m (the tile's n and k, its instruction and wgmma's width; only the
    tile's height, how many rows a block holds, follows m, unless Tile fixes it too), no split-K, no batched block
    kernel in the grid's place, and float32 never silently tfloat32. ``explain()`` says what it fixes."""

    kind: ClassVar[str] = "BatchInvariant"


MAX_STAGES = 8


class Stages(Operator):
    """Stages(s): with Grid(), the K tiles in flight per block: while the block multiplies
    one, the next ones are copied (by cp.async, or by TMA on SM 900) (2 <= s <= 8)."""

    kind: ClassVar[str] = "Stages"

    if TYPE_CHECKING:  # the positional signature, for type checkers (Operator.__init__ takes it)
        def __init__(self, value: int) -> None: ...
    value: int

    @field_validator("value", mode="before")
    @classmethod
    def _check(cls, v: object) -> int:
        v = _strict_int(v, "value")
        if not 2 <= v <= MAX_STAGES:
            raise ValueError(f"must be between 2 and {MAX_STAGES} K tiles in flight, got {v}")
        return v


OPERATOR_KINDS: tuple[type[Operator], ...] = (
    Size, Precision, Type, Function, BitOp, Arrangement, TransposeMode, LeadingDimension,
    Alignment, SM, InstructionFamily, Accumulation, Block, Grid, Warp, Grouped, Tile, Stages, BatchInvariant, BlockDim,
)
