"""The Descriptor: operators composed with ``+``, their defaults and the traits.

A Descriptor is an immutable set of operators, at most one of each kind. Composition
validates every cross-operator rule whose operators are present (:mod:`.rules`).
Traits read the operators or their defaults (:mod:`.traits`); a trait that needs a
missing operator raises ``IncompleteDescriptorError`` naming it.

Planning, rendering, compiling and executing are one-line calls into
:mod:`blasdx.pipeline`, imported on first use: the one place where the description
reaches downstream (the documented seam of the layering; tests/project/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from ..arch import Instruction
from ..errors import ArgumentError, CompositionError, DescriptorError, IncompleteDescriptorError
from . import rules
from .families import family_of, wgmma
from .operands import (
    arrangement_of,
    element_sizes_of,
    execution_of,
    is_complex_of,
    is_tiled,
    packs_of,
    precision_of,
    round_up,
)
from .operators import OPERATOR_KINDS, SM, BitOp, Execution, Function, Operator, Size, Type, execution_operators
from .traits import (
    extents_of,
    item_operators_of,
    leading_dimension_of,
    padded_leading_dimension,
    shared_memory_parts_of,
    stored_rows,
    suggested_tile_of,
    tile_of,
    tile_operators_of,
)

if TYPE_CHECKING:
    from ..compiler import CompiledKernel
    from ..plan import GemmPlan, GridPlan
    from ..runtime import Kernel

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


_pipeline_module: Any = None


def _class_hint(value: object) -> str:
    """'; add an instance, Block()' where ``value`` is an operator class rather than one."""
    if isinstance(value, type) and issubclass(value, Operator):
        return f"; add an instance, {value.__name__}(...)" if value.model_fields else f"; add an instance, {value.__name__}()"
    return ""


def _not_addable(value: object) -> CompositionError:
    """The error for ``descriptor + value`` where value is neither an operator nor a descriptor."""
    if isinstance(value, type) and issubclass(value, Operator):
        return CompositionError(f"cannot add the class {value.__name__}: {_class_hint(value).strip(' ;')}")
    names = [cls.__name__ for cls in OPERATOR_KINDS]
    hint = f"; did you mean {value}()?" if isinstance(value, str) and value in names else ""
    return CompositionError(f"a descriptor adds operators ({', '.join(names)}) and descriptors only, got {value!r} "
                            f"of type {type(value).__name__}{hint}")


def _pipeline() -> Any:
    """blasdx.pipeline, imported once on first use (the seam: the pipeline imports the
    descriptor's package, so the descriptor cannot import it at module level)."""
    global _pipeline_module
    if _pipeline_module is None:
        from .. import pipeline

        _pipeline_module = pipeline
    return _pipeline_module


class Descriptor:
    """An immutable set of operators describing one block GEMM. The traits that take planning
    (block_dim, shared_memory_size, the suggestions) are computed once each, so a launch that
    reads them every call (``kernel(grid, GEMM.block_dim, args, shared_mem=GEMM.shared_memory_size)``)
    costs no more than one with them saved (read afresh, the two took about 40 us)."""

    def __init__(self, ops: Mapping[str, Operator], *, grid_tile: bool = False) -> None:
        rules.check(ops, grid_tile=grid_tile)
        self._grid_tile = grid_tile  # the tile of a Grid() descriptor (see tile_descriptor)
        self._ops: dict[str, Operator] = dict(sorted(ops.items(), key=lambda kv: _ORDER[kv[0]]))
        self._rules_hold = False  # every rule, defaults included: see _check_rules
        # The repr, made once: a plain attribute that torch.compile reads as a constant
        # (blasdx.pytorch passes it to its op; operators' reprs are beyond its tracing).
        self._repr = " + ".join(repr(op) for op in self._ops.values())

    @classmethod
    def of(cls, value: Operator | Descriptor) -> Descriptor:
        if isinstance(value, Descriptor):
            return value
        return cls({value.kind: value})

    # --- composition ---------------------------------------------------------------------

    def __add__(self, other: Operator | Descriptor) -> Descriptor:
        if isinstance(other, Operator):
            others = [other]
        elif isinstance(other, Descriptor):
            others = list(other._ops.values())
        else:
            raise _not_addable(other)
        ops = dict(self._ops)
        for op in others:
            held = ops.get("Execution")
            if isinstance(op, Execution) and isinstance(held, Execution):
                raise DescriptorError(
                    f"{held!r} and {op!r} are two ways to run ({held.summary}; {op.summary}); keep one of them "
                    f"(descriptor.replace({op!r}) puts it in {held!r}'s place)")
            if op.kind in ops:
                raise DescriptorError(
                    f"{op.kind} is already set to {ops[op.kind]!r}; cannot add {op!r}. "
                    f"Use descriptor.replace({op!r}) to change it"
                )
            ops[op.kind] = op
        return Descriptor(ops)

    def __radd__(self, other: object) -> Descriptor:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:  # sum([Size(...), SM(900), ...])
            return self
        if isinstance(other, Operator):
            return Descriptor.of(other) + self
        raise _not_addable(other)

    def replace(self, *operators: Operator) -> Descriptor:
        """A copy with each given operator put in place of the one of its kind; the execution operators
        (Block(), Grid(), ...) are one kind, so each takes the others' place."""
        ops = dict(self._ops)
        for op in operators:
            if not isinstance(op, Operator):
                raise DescriptorError(f"replace() takes operators such as SM(900) or Size(64, 64, 64), got {op!r}"
                                      + _class_hint(op))
            ops[op.kind] = op
        return Descriptor(ops)

    @property
    def operators(self) -> tuple[Operator, ...]:
        return tuple(self._ops.values())

    @property
    def operator_map(self) -> Mapping[str, Operator]:
        """The operators by kind ("Size", "SM", ...), for the ``*_of`` traits."""
        return dict(self._ops)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Descriptor) and self._ops == other._ops

    def __hash__(self) -> int:
        return hash(frozenset(self._ops.values()))

    def __repr__(self) -> str:
        return self._repr

    def _check_rules(self) -> None:
        """Every cross-operator rule with the defaults filled in: run when the descriptor is
        planned, traited or run (composition checks only rules whose operators are all
        present, so that it does not depend on order)."""
        if not self._rules_hold:
            rules.check(self._ops, complete=True, grid_tile=self._grid_tile)
            if self.is_grid:
                for kind in (Size, SM):
                    self._require(kind, "the block tile of a Grid() descriptor")
                with self._about_the_tile():
                    self.tile_descriptor._check_rules()
            self._rules_hold = True

    def _require(self, kind: type[Operator], trait: str) -> Operator:
        if kind.kind == "Execution" and kind.kind not in self._ops:
            kinds = execution_operators()
            raise IncompleteDescriptorError(
                f"{trait} needs an execution operator, which this descriptor lacks: "
                + "; ".join(cls.summary for cls in kinds) + ". Add one, for example "
                + ", or ".join(f"+ {cls.__name__}()" for cls in kinds))
        if kind.kind not in self._ops:
            example = {"Size": "Size(64, 64, 64)", "SM": "SM(900)"}[kind.kind]
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
        self._check_rules()
        return ABC(**leading_dimension_of(self._ops))

    @cached_property
    def suggested_leading_dimension(self) -> ABC:
        """Tight leading dimensions padded against shared-memory bank conflicts: each is
        rounded up to an odd multiple of 16 bytes (32 for float64 tensor cores; see
        ``padded_leading_dimension``).
        Packed precisions count values, as their leading dimensions do. For Grid(), whose
        matrices stay in global memory: tight ones rounded up to multiples of 16 bytes, which
        the tiles' copies move 16 bytes at a time (cp.async), or by TMA on SM 900."""
        self._require(Size, "suggested_leading_dimension")
        self._check_rules()
        arr, esize, pack = arrangement_of(self._ops), element_sizes_of(self._ops), packs_of(self._ops)
        unit = self.instruction.padding_unit if "SM" in self._ops else 16
        out = {}
        for m, (rows, cols) in extents_of(self.size_op).items():
            tight = -(-stored_rows(arr[m], rows, cols) // pack[m])  # stored elements
            if self.is_grid:
                out[m] = round_up(tight, max(1, 16 // esize[m]))
            else:
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
        self._check_rules()
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
        return self.instruction_choice[0]

    @cached_property
    def instruction_choice(self) -> tuple[Instruction, str]:
        """The instruction and the reason for it (``explain()`` prints both): that of the first
        instruction family whose conditions hold (``blasdx.describe.families.family_of``), with what
        the families before it lacked. Of the tile, for Grid()."""
        if self.is_grid:
            return self.tile_descriptor.instruction_choice
        self._require(SM, "sm")
        chosen = family_of(self._ops)
        return chosen.instruction, chosen.reason

    @cached_property
    def wgmma_choice(self) -> wgmma.WgmmaChoice | None:
        """Each condition of Hopper's warpgroup MMA and whether it holds, with the tile and the
        swizzled layouts it takes (None where wgmma is out of the question). Of the tile, for Grid()."""
        if self.is_grid:
            return self.tile_descriptor.wgmma_choice
        return wgmma.choice(self._ops)

    @cached_property
    def suggested_block_dim(self) -> XYZ:
        """The threads of the first instruction family whose conditions hold at its own suggestion
        (each family's ``suggested_threads``), BlockDim aside: ``(threads, 1, 1)``."""
        if self.is_grid:
            return self.tile_descriptor.suggested_block_dim
        fixed = self._ops["Execution"].fixed_threads if "Execution" in self._ops else None  # type: ignore[attr-defined]
        if fixed is not None:
            return XYZ(fixed, 1, 1)
        self._require(Size, "size")
        self._require(SM, "sm")
        ops = self._ops
        threads = family_of(ops, lambda family: family.suggested_threads(ops)).threads
        assert threads is not None
        return XYZ(threads, 1, 1)

    @cached_property
    def block_dim(self) -> XYZ:
        """BlockDim if given, else suggested_block_dim; for Grid(), of each block (its tile's)."""
        if self.is_grid:
            return self.tile_descriptor.block_dim
        self._require(Execution, "block_dim")
        self._check_rules()
        bd = self._ops.get("BlockDim")
        if bd is None:
            return self.suggested_block_dim
        return XYZ(bd.x, bd.y, bd.z)  # type: ignore[attr-defined]

    @property
    def max_threads_per_block(self) -> int:
        x, y, z = self.block_dim
        return x * y * z

    @cached_property
    def shared_memory_size(self) -> int:
        """Bytes of shared memory the block GEMM needs for A, B and C (see
        ``shared_memory_parts_of``); for Grid(), what each block of a kernel built on its device API
        takes (its stages of A and B tiles; execute()'s kernel may stage C for TMA stores too)."""
        self._require(Size, "shared_memory_size")
        if self.is_grid:
            return self.plan.stages_shared_memory_size  # type: ignore[union-attr]
        self._check_rules()
        return sum(shared_memory_parts_of(self._ops).values())

    @cached_property
    def shared_memory_size_ab(self) -> int:
        """Bytes of shared memory for A and B alone, at the offsets of ``shared_memory_size``'s
        layout: what a kernel needs whose C stays in the register accumulators (cuBLASDx's
        ``get_shared_storage_size_ab``), so that more of its blocks fit an SM. For Grid(), the
        same as ``shared_memory_size`` (its stages hold only A and B)."""
        self._require(Size, "shared_memory_size_ab")
        if self.is_grid:
            return self.shared_memory_size
        self._check_rules()
        parts = shared_memory_parts_of(self._ops)
        return parts["a"] + parts["b"]

    @property
    def is_complete(self) -> bool:
        return "Size" in self._ops and "SM" in self._ops

    @property
    def is_executable(self) -> bool:
        return self.is_complete and "Execution" in self._ops

    # --- Grid(): Size is the whole problem; each block computes tiles ---------------------

    @property
    def execution(self) -> str | None:
        """The execution operator's name ("Block", "Grid", ...), whose kind plans and runs it; None without one."""
        return execution_of(self._ops)

    @property
    def is_grid(self) -> bool:
        """Whether Size is a problem over many blocks, each computing tiles of C (Grid(), Grouped())."""
        return is_tiled(self._ops)

    @cached_property
    def tile(self) -> MNK:
        """Grid(): the block tile, Tile if given, else suggested_tile."""
        self._require_grid("tile")
        t = tile_of(self._ops)
        return MNK(t.m, t.n, t.k)

    @cached_property
    def suggested_tile(self) -> MNK:
        """Grid(): the block tile the planner suggests (see blasdx.describe.traits.suggested_tile_of)."""
        self._require_grid("suggested_tile")
        t = suggested_tile_of(self._ops)
        return MNK(t.m, t.n, t.k)

    @property
    def stages(self) -> int:
        """Grid(): K tiles in flight per block, Stages if given, else planned (see blasdx.plan.grid)."""
        self._require_grid("stages")
        return self.plan.stages  # type: ignore[union-attr]

    @cached_property
    def tile_descriptor(self) -> Descriptor:
        """Grid(): the Block() descriptor of one tile, Size(tile) with this descriptor's precisions,
        arrangement, SM, alignment, BlockDim and InstructionFamily; its device API runs each block."""
        self._require_grid("tile_descriptor")
        with self._about_the_tile():
            return Descriptor(tile_operators_of(self._ops), grid_tile=True)

    @cached_property
    def item_descriptor(self) -> Descriptor:
        """Grid(): the Block() descriptor of one batch item, Size(m, n, k) + Block() with this
        descriptor's other operators, every rule checked (a DescriptorError where one block GEMM
        cannot hold an item); the batched kernel of its plan may run a Grid() batch."""
        self._require_grid("item_descriptor")
        item = Descriptor(item_operators_of(self._ops))
        item._check_rules()
        return item

    @contextmanager
    def _about_the_tile(self) -> Iterator[None]:
        """Errors of the tile's Block() descriptor, said to be the tile's."""
        try:
            yield
        except DescriptorError as exc:
            raise type(exc)(f"the block tile {tile_of(self._ops)!r} of this Grid() descriptor: {exc}") from None

    def _require_grid(self, trait: str) -> None:
        for kind in (Size, SM):
            self._require(kind, trait)
        if not self.is_grid:
            raise DescriptorError(f"{trait} belongs to grid-level GEMMs; add Grid() (Size is then the whole problem)")

    # --- downstream: one-line calls into the pipeline -------------------------------

    def _require_executable(self, action: str) -> None:
        for kind in (Size, SM):
            self._require(kind, action)
        self._require(Execution, action)

    @cached_property
    def plan(self) -> GemmPlan | GridPlan:
        """The kernel decisions for this descriptor: blasdx.plan.GemmPlan for Block() (its WarpGemmPlan for
        Warp()), blasdx.plan.GridPlan for Grid()."""
        self._require_executable("planning a kernel")
        self._check_rules()
        return _pipeline().plan_of(self)

    @property
    def source(self) -> str:
        """The complete CUDA source of the batched kernel behind ``execute()``."""
        return _pipeline().kernel_source(self.plan)

    def device_source(self, name: str = "gemm") -> str:
        """CUDA text defining the block GEMM as device code in namespace ``name``."""
        return _pipeline().device_source(self.plan, name)

    def explain(self, width: int = 100) -> str:
        """What the kernel does and why: instruction, tiling, threads, shared memory; lines
        wrapped at ``width`` columns (0: one line per statement, for searching)."""
        if isinstance(width, bool) or not isinstance(width, int) or width < 0:
            raise ArgumentError(f"explain(width=...) takes the columns to wrap at (0: no wrapping), got {width!r}")
        for kind in (Size, SM):
            self._require(kind, "explain()")
        self._check_rules()
        return _pipeline().explain(self, width)  # type: ignore[no-any-return]

    @overload
    def compile(self, arch: int, *, prologue: Any = None, epilogue: Any = None, a_load: Any = None,
                b_load: Any = None, c_load: Any = None, c_store: Any = None,
                bias: bool | str = False) -> CompiledKernel: ...

    @overload
    def compile(self, arch: None = None, *, prologue: Any = None, epilogue: Any = None, a_load: Any = None,
                b_load: Any = None, c_load: Any = None, c_store: Any = None, bias: bool | str = False) -> Kernel: ...

    def compile(self, arch: int | None = None, *, prologue: Any = None, epilogue: Any = None,
                a_load: Any = None, b_load: Any = None, c_load: Any = None, c_store: Any = None,
                bias: bool | str = False) -> CompiledKernel | Kernel:
        """With ``arch``: compile for that SM (no GPU needed) and return the compiled
        artifact. Without: return the launchable kernel for the current device. The hooks
        (and ``bias``) select the fused kernel that execute() with them would run: ``bias=True``
        a bias of any shape, ``bias="row"`` one row of n values broadcast down C (shape (n,),
        (1, n) or (batch, 1, n), or a single value), which execute() reads by column alone."""
        if not (isinstance(bias, bool) or isinstance(bias, str) and bias == "row"):
            got = repr(bias) if isinstance(bias, str) else type(bias).__name__
            raise ArgumentError(f"compile(bias=...) says which bias the kernel adds: False, True (any shape) or "
                                f"'row' (one row broadcast down C), got {got}; the bias array itself goes to "
                                f"execute(bias=...)")
        fusion = _pipeline().fusion(self, prologue, epilogue, a_load, b_load, c_load, c_store, bias is not False)
        if bias == "row":
            fusion = fusion.reading_bias_by_column()
        plan = _pipeline().for_gate(self.plan, fusion)  # a gated epilogue's C is half as wide (GridPlan.gated)
        if arch is not None:
            return _pipeline().compile_for_arch(plan, arch, fusion)
        return _pipeline().kernel(plan, fusion, action="compile() without arch")

    def execute(self, a: Any, b: Any, c: Any, alpha: Any = 1, beta: Any = 0, *,
                prologue: Any = None, epilogue: Any = None, a_load: Any = None, b_load: Any = None,
                c_load: Any = None, c_store: Any = None, bias: Any = None, stream: Any = None,
                scale_a: Any = None, scale_b: Any = None, offsets: Any = None) -> Any:
        """c = c_store(alpha * a_load(op(a)) @ b_load(op(b)) + beta * c_load(c) + bias), in
        place; returns c.

        The hooks are built-in names ("relu", "gelu", ...), ``blasdx.scale(s)`` or C++
        expressions of ``x``; ``prologue`` sets a_load and b_load, ``epilogue`` is c_store.
        ``bias`` is an array with C's dtype that broadcasts to C's shape as in NumPy.
        ``scale_a`` and ``scale_b`` scale FP8 A and B: numbers, or float32 arrays per tensor, per
        row of A / column of B, or blockwise (blasdx.runtime.scales). ``offsets`` (Grouped()):
        int32 on the device, group g of A's and C's rows ending at row offsets[g]
        (blasdx.runtime.groups)."""
        if "plan" not in self.__dict__:  # planned once; later calls skip the checks
            self._require_executable("execute")
        pipeline = _pipeline_module or _pipeline()
        if (bias is None and prologue is None and epilogue is None and a_load is None and b_load is None
                and c_load is None and c_store is None and scale_a is None and scale_b is None and offsets is None):
            return pipeline.execute(self.plan, a, b, c, alpha, beta, stream=stream)
        fusion = pipeline.fusion(self, prologue, epilogue, a_load, b_load, c_load, c_store, bias is not None)
        return pipeline.execute(self.plan, a, b, c, alpha, beta, stream=stream, fusion=fusion, bias=bias,
                                scale_a=scale_a, scale_b=scale_b, offsets=offsets)


Operator.composition = Descriptor
