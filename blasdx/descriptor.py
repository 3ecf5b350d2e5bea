"""The Descriptor: operators composed with ``+``, their defaults and the traits.

A Descriptor is an immutable set of operators, at most one of each kind. Composition
validates every cross-operator rule whose operators are present (:mod:`blasdx.rules`).
Traits read the operators or their defaults; a trait that needs a missing operator
raises ``IncompleteDescriptorError`` naming it. Compiling and executing are delegated to
the downstream modules (plan, render, compiler, runtime).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from . import rules
from .errors import DescriptorError, IncompleteDescriptorError
from .instructions import Instruction, choose_instruction
from .operators import OPERATOR_KINDS, SM, Arrangement, BitOp, Block, Function, Operator, Precision, Size, Type
from .precision import PRECISIONS

if TYPE_CHECKING:
    from .compiler import CompiledKernel
    from .hooks import Fusion
    from .plan import GemmPlan
    from .runtime import Kernel

_ORDER = {cls.kind: i for i, cls in enumerate(OPERATOR_KINDS)}


class MNK(NamedTuple):
    m: int
    n: int
    k: int


class ABC(NamedTuple):
    a: Any
    b: Any
    c: Any


class XYZ(NamedTuple):
    x: int
    y: int
    z: int


# --- helpers on a plain mapping of operators, shared with blasdx.rules -------------------

def arrangement_of(ops: Mapping[str, Operator]) -> dict[str, str]:
    """Memory order of A, B, C: Arrangement, else TransposeMode, else the default."""
    if "TransposeMode" in ops:
        tm = ops["TransposeMode"]
        layout = {"N": "col_major", "T": "row_major", "C": "row_major"}
        return {"a": layout[tm.a], "b": layout[tm.b], "c": "col_major"}  # type: ignore[attr-defined]
    arr = ops.get("Arrangement", Arrangement())
    return {"a": arr.a, "b": arr.b, "c": arr.c}  # type: ignore[attr-defined]


def precision_of(ops: Mapping[str, Operator]) -> dict[str, str]:
    prec = ops.get("Precision", Precision())
    return {"a": prec.a, "b": prec.b, "c": prec.c}  # type: ignore[attr-defined]


def is_complex_of(ops: Mapping[str, Operator]) -> bool:
    return "Type" in ops and ops["Type"].value == "complex"  # type: ignore[attr-defined]


def element_sizes_of(ops: Mapping[str, Operator]) -> dict[str, int]:
    """Bytes of one stored element of A, B, C (a complex element holds two reals; a packed
    element, a byte of two int4 or a uint32 of 32 bits, holds several values)."""
    factor = 2 if is_complex_of(ops) else 1
    return {m: PRECISIONS[p].itemsize * factor for m, p in precision_of(ops).items()}


def packs_of(ops: Mapping[str, Operator]) -> dict[str, int]:
    """Values per stored element of A, B, C: 1, or 2 (int4, uint4) or 32 (binary)."""
    return {m: PRECISIONS[p].pack for m, p in precision_of(ops).items()}


def _extents(size: Size) -> dict[str, tuple[int, int]]:
    return {"a": (size.m, size.k), "b": (size.k, size.n), "c": (size.m, size.n)}


def leading_dimension_of(ops: Mapping[str, Operator]) -> dict[str, int]:
    """LeadingDimension if given, else tight: rows of col_major, columns of row_major."""
    if "LeadingDimension" in ops:
        ld = ops["LeadingDimension"]
        return {"a": ld.a, "b": ld.b, "c": ld.c}  # type: ignore[attr-defined]
    arr = arrangement_of(ops)
    return {m: rules.stored_rows(arr[m], *rc) for m, rc in _extents(ops["Size"]).items()}  # type: ignore[arg-type]


def shared_memory_parts_of(ops: Mapping[str, Operator]) -> dict[str, int]:
    """Bytes of A, B, C in shared memory: ld x (stored columns) x element size, each
    rounded up to 16 bytes so that the next matrix starts 16-byte aligned. Leading
    dimensions count values; a packed element holds ``pack`` of them."""
    arr, ld, esize = arrangement_of(ops), leading_dimension_of(ops), element_sizes_of(ops)
    pack = packs_of(ops)
    parts = {}
    for m, (rows, cols) in _extents(ops["Size"]).items():  # type: ignore[arg-type]
        outer = cols if arr[m] == "col_major" else rows
        parts[m] = _round_up(-(-ld[m] // pack[m]) * outer * esize[m], 16)
    return parts


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


def padded_leading_dimension(ld: int, element_size: int, unit: int = 16) -> int:
    """``ld`` (in stored elements) grown to an odd number of ``unit``-byte pieces, so that
    consecutive rows start in different bank groups: with 16-byte units, eight rows'
    16-byte pieces (ldmatrix, 32-bit fragment words) never share banks; with 32-byte
    units, neither do four rows' 32-byte pieces (the double fragments of mma m8n8k4,
    read half a warp at a time)."""
    step = max(1, unit // element_size)
    padded = _round_up(ld, step)
    if (padded * element_size // unit) % 2 == 0:
        padded += step
    return padded


def padding_unit_of(instruction: Instruction) -> int:
    """Bytes per piece that a warp's fragment load takes from one row (see above)."""
    return 32 if instruction.name == "mma_f64" else 16


_execute: Any = None


def takes_float_micro_tiles(precision: Mapping[str, str], is_complex: bool, m: int, n: int) -> bool:
    """Whether the FMA path can give a thread an 8x4 float micro-tile: real float32 A and B
    (accumulated in float, so C is not float64) and m, n multiples of 8 and 4. The plan
    takes it where each thread has 32 outputs or more (plan._fma_micro_tile), and
    ``suggested_block_dim`` asks for that many threads where m * n >= 4096."""
    return (not is_complex and precision["a"] == precision["b"] == "float32" and precision["c"] != "float64"
            and m % 8 == 0 and n % 4 == 0)


def _runtime_execute() -> Any:
    """blasdx.runtime.execute, imported on first use (a relative import inside execute()
    would cost a microsecond or two on every call)."""
    global _execute
    if _execute is None:
        from .runtime import execute

        _execute = execute
    return _execute


class Descriptor:
    """An immutable set of operators describing one block GEMM."""

    def __init__(self, ops: Mapping[str, Operator]) -> None:
        rules.check(ops)
        self._ops: dict[str, Operator] = dict(sorted(ops.items(), key=lambda kv: _ORDER[kv[0]]))

    @classmethod
    def of(cls, value: Operator | Descriptor) -> Descriptor:
        if isinstance(value, Descriptor):
            return value
        return cls({value.kind: value})

    # --- composition ---------------------------------------------------------------------

    def __add__(self, other: object) -> Descriptor:
        if isinstance(other, Operator):
            others = [other]
        elif isinstance(other, Descriptor):
            others = list(other._ops.values())
        else:
            return NotImplemented
        ops = dict(self._ops)
        for op in others:
            if op.kind in ops:
                raise DescriptorError(
                    f"{op.kind} is already set to {ops[op.kind]!r}; cannot add {op!r}. "
                    f"Use descriptor.replace({op!r}) to change it"
                )
            ops[op.kind] = op
        return Descriptor(ops)

    def __radd__(self, other: object) -> Descriptor:
        if isinstance(other, Operator):
            return Descriptor.of(other) + self
        return NotImplemented

    def replace(self, *operators: Operator) -> Descriptor:
        """A copy with each given operator put in place of the one of its kind."""
        ops = dict(self._ops)
        for op in operators:
            if not isinstance(op, Operator):
                raise TypeError(f"replace() takes operators, got {op!r}")
            ops[op.kind] = op
        return Descriptor(ops)

    @property
    def operators(self) -> tuple[Operator, ...]:
        return tuple(self._ops.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descriptor) and self._ops == other._ops

    def __hash__(self) -> int:
        return hash(frozenset(self._ops.values()))

    def __repr__(self) -> str:
        return " + ".join(repr(op) for op in self._ops.values())

    def _require(self, kind: type[Operator], trait: str) -> Operator:
        if kind.kind not in self._ops:
            example = {"Size": "Size(64, 64, 64)", "SM": "SM(900)", "Block": "Block()"}[kind.kind]
            raise IncompleteDescriptorError(
                f"{trait} needs the {kind.kind} operator, which this descriptor lacks; "
                f"add it, for example + {example}"
            )
        return self._ops[kind.kind]

    # --- traits --------------------------------------------------------------------------

    @property
    def size(self) -> MNK:
        s = self._require(Size, "size")
        return MNK(s.m, s.n, s.k)  # type: ignore[attr-defined]

    @property
    def precision(self) -> ABC:
        return ABC(**precision_of(self._ops))

    @property
    def type(self) -> str:
        return self._ops.get("Type", Type()).value  # type: ignore[attr-defined]

    @property
    def is_complex(self) -> bool:
        return is_complex_of(self._ops)

    @property
    def function(self) -> str:
        return self._ops.get("Function", Function()).value  # type: ignore[attr-defined]

    @property
    def bit_op(self) -> str | None:
        """'xor' or 'and' for a binary GEMM (BitOp, default 'xor'); None otherwise."""
        if self.precision.a != "binary":
            return None
        return self._ops.get("BitOp", BitOp()).value  # type: ignore[attr-defined]

    @property
    def arrangement(self) -> ABC:
        return ABC(**arrangement_of(self._ops))

    @property
    def conjugate(self) -> tuple[bool, bool]:
        """Whether A and B are conjugated (TransposeMode 'C')."""
        tm = self._ops.get("TransposeMode")
        return (False, False) if tm is None else (tm.a == "C", tm.b == "C")  # type: ignore[attr-defined]

    @property
    def leading_dimension(self) -> ABC:
        self._require(Size, "leading_dimension")
        return ABC(**leading_dimension_of(self._ops))

    @property
    def suggested_leading_dimension(self) -> ABC:
        """Tight leading dimensions padded against shared-memory bank conflicts: each is
        rounded up to an odd multiple of 16 bytes (32 for float64 tensor cores; see
        ``padded_leading_dimension``).
        Packed precisions count values, as their leading dimensions do."""
        self._require(Size, "suggested_leading_dimension")
        arr, esize, pack = arrangement_of(self._ops), element_sizes_of(self._ops), packs_of(self._ops)
        unit = padding_unit_of(self.instruction) if "SM" in self._ops else 16
        out = {}
        for m, (rows, cols) in _extents(self.size_op).items():
            tight = -(-rules.stored_rows(arr[m], rows, cols) // pack[m])  # stored elements
            out[m] = padded_leading_dimension(tight, esize[m], unit) * pack[m]
        return ABC(**out)

    @property
    def size_op(self) -> Size:
        return self._require(Size, "size")  # type: ignore[return-value]

    @property
    def element_size(self) -> ABC:
        """Bytes of one stored element of A, B and C (of a packed word for int4 and binary)."""
        return ABC(**element_sizes_of(self._ops))

    @property
    def alignment(self) -> ABC:
        """Alignment if given, else each element's own alignment (its size, at most 16)."""
        if "Alignment" in self._ops:
            al = self._ops["Alignment"]
            return ABC(al.a, al.b, al.c)  # type: ignore[attr-defined]
        return ABC(*(min(16, e) for e in element_sizes_of(self._ops).values()))

    @property
    def sm(self) -> int:
        return self._require(SM, "sm").value  # type: ignore[attr-defined]

    @property
    def instruction(self) -> Instruction:
        """The instruction the descriptor's SM offers for its precisions."""
        return self._instruction_choice[0]

    @cached_property
    def _instruction_choice(self) -> tuple[Instruction, str]:
        p = self.precision
        return choose_instruction(p.a, p.b, p.c, self.is_complex, self.sm)

    @property
    def suggested_block_dim(self) -> XYZ:
        """One warp per 32 x 32 outputs (tensor cores; float32 FMA with 4096 outputs or
        more, where each thread computes an 8x4 micro-tile: ``takes_float_micro_tiles``) or
        per 16 x 32 outputs (the other FMA GEMMs), rounded up to whole warps, between 32 and
        256 threads: ``(threads, 1, 1)``."""
        m, n, _ = self.size
        precision = dict(zip("abc", self.precision))
        large_float = takes_float_micro_tiles(precision, self.is_complex, m, n) and m * n >= 4096
        per_thread = 32 if self.instruction.is_mma or large_float else 16
        threads = _round_up(math.ceil(m * n / per_thread), 32)
        return XYZ(min(256, max(32, threads)), 1, 1)

    @property
    def block_dim(self) -> XYZ:
        self._require(Block, "block_dim")
        bd = self._ops.get("BlockDim")
        if bd is None:
            return self.suggested_block_dim
        return XYZ(bd.x, bd.y, bd.z)  # type: ignore[attr-defined]

    @property
    def max_threads_per_block(self) -> int:
        x, y, z = self.block_dim
        return x * y * z

    @property
    def shared_memory_size(self) -> int:
        """Bytes of shared memory the block GEMM needs for A, B and C (see
        ``shared_memory_parts_of``)."""
        self._require(Size, "shared_memory_size")
        return sum(shared_memory_parts_of(self._ops).values())

    @property
    def is_complete(self) -> bool:
        return "Size" in self._ops and "SM" in self._ops

    @property
    def is_executable(self) -> bool:
        return self.is_complete and "Block" in self._ops

    # --- downstream: plan, render, compile, run ------------------------------------------

    def _require_executable(self, action: str) -> None:
        for kind in (Size, SM, Block):
            self._require(kind, action)

    @cached_property
    def plan(self) -> GemmPlan:
        """The kernel decisions for this descriptor (blasdx.plan.GemmPlan)."""
        self._require_executable("planning a kernel")
        from .plan import make_plan

        return make_plan(self)

    @property
    def source(self) -> str:
        """The complete CUDA source of the batched kernel behind ``execute()``."""
        from .render import render_kernel

        return render_kernel(self.plan)

    def device_source(self, name: str = "gemm") -> str:
        """CUDA text defining the block GEMM as device code in namespace ``name``."""
        from .render import render_device_source

        return render_device_source(self.plan, name)

    def explain(self) -> str:
        """What the kernel does and why: instruction, tiling, threads, shared memory."""
        from .plan import explain

        return explain(self)

    def compile(self, arch: int | None = None, *, prologue: Any = None, epilogue: Any = None,
                a_load: Any = None, b_load: Any = None, c_load: Any = None, c_store: Any = None,
                bias: bool = False) -> CompiledKernel | Kernel:
        """With ``arch``: compile for that SM (no GPU needed) and return the compiled
        artifact. Without: return the launchable kernel for the current device. The hooks
        (and ``bias=True``) select the fused kernel that execute() with them would run."""
        fusion = self._fusion(prologue, epilogue, a_load, b_load, c_load, c_store, bias)
        if arch is not None:
            from .compiler import compile_plan

            return compile_plan(self.plan, arch, fusion=fusion)
        from .runtime import get_kernel

        return get_kernel(self.plan, fusion=fusion)

    def _fusion(self, prologue: Any, epilogue: Any, a_load: Any, b_load: Any, c_load: Any,
                c_store: Any, has_bias: bool) -> Fusion | None:
        """The element-wise hooks as a Fusion value, or None when there are none."""
        hooks = (prologue, epilogue, a_load, b_load, c_load, c_store)
        if not has_bias and all(h is None for h in hooks):
            return None
        from .hooks import make_fusion

        return make_fusion(prologue=prologue, epilogue=epilogue, a_load=a_load, b_load=b_load,
                           c_load=c_load, c_store=c_store, has_bias=has_bias,
                           precisions=tuple(self.precision),
                           scalar_precision=self.plan.scalar_precision, is_complex=self.is_complex)

    def execute(self, a: Any, b: Any, c: Any, alpha: Any = 1, beta: Any = 0, *,
                prologue: Any = None, epilogue: Any = None, a_load: Any = None, b_load: Any = None,
                c_load: Any = None, c_store: Any = None, bias: Any = None, stream: Any = None) -> Any:
        """c = c_store(alpha * a_load(op(a)) @ b_load(op(b)) + beta * c_load(c) + bias), in
        place; returns c.

        The hooks are built-in names ("relu", "gelu", ...), ``blasdx.scale(s)`` or C++
        expressions of ``x``; ``prologue`` sets a_load and b_load, ``epilogue`` is c_store.
        ``bias`` is an array with C's dtype that broadcasts to C's shape as in NumPy."""
        if "plan" not in self.__dict__:  # planned once; later calls skip the checks
            self._require_executable("execute")
        execute = _runtime_execute()
        if (bias is None and prologue is None and epilogue is None and a_load is None
                and b_load is None and c_load is None and c_store is None):
            return execute(self.plan, a, b, c, alpha, beta, stream=stream)
        fusion = self._fusion(prologue, epilogue, a_load, b_load, c_load, c_store, bias is not None)
        return execute(self.plan, a, b, c, alpha, beta, stream=stream, fusion=fusion, bias=bias)
