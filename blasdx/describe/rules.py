"""Every rule that involves more than one operator, in one place.

``check(ops)`` runs, while operators are being composed, each rule whose operators are all
present; ``check(ops, complete=True)`` runs every rule with the defaults filled in, when the
descriptor is planned, traited or run. So composition is order-free: a default (float32,
the default arrangement, no Block()) never makes a descriptor look invalid before the
operator that replaces it is added. Each raises ``DescriptorError`` (or
``UnsupportedError``) naming the operators, the values, the rule and a fix. Rules of a
single operator live with the operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..arch import BIT_AND_MIN_SM, shared_memory_limit
from ..errors import DescriptorError, UnsupportedError
from .families import family_named
from .operands import arrangement_of, element_sizes_of, execution_of, is_complex_of, is_tiled, k_major, precision_of
from .operators import Operator
from .precision import PRECISIONS, PrecisionInfo
from .traits import leading_dimension_of, shared_memory_parts_of, stored_rows


def check(ops: Mapping[str, Operator], complete: bool = False, grid_tile: bool = False) -> None:
    """Run the cross-operator rules: those whose operators are all in ``ops`` (composition),
    or all of them with the defaults filled in (``complete``). The tile of a Grid()
    descriptor (``grid_tile``) keeps C in registers: its shared memory is the grid plan's to check."""
    for rule, ready in RULES:
        if (complete or ready(ops)) and not (grid_tile and rule is _check_shared_memory):
            rule(ops)


def _precisions(ops: Mapping[str, Operator]) -> tuple[PrecisionInfo, PrecisionInfo, PrecisionInfo, str]:
    """A's, B's and C's precision (the default where Precision is absent) and how to name them."""
    p = precision_of(ops)
    a, b, c = (PRECISIONS[p[m]] for m in "abc")
    return a, b, c, f"Precision({a.name!r}, {b.name!r}, {c.name!r})"


def _check_precision_kinds(ops: Mapping[str, Operator]) -> None:
    a, b, c, names = _precisions(ops)
    if len({p.is_float for p in (a, b, c)}) != 1:
        raise DescriptorError(
            f"{names} mixes integer and floating-point precisions; A, B and C must be "
            f"all floating point or all integers (for example Precision('int8', 'int8', 'int32'))"
        )


def _check_signed_accumulator(ops: Mapping[str, Operator]) -> None:
    a, b, c, names = _precisions(ops)
    if not c.is_float and (a.signed or b.signed) and not c.signed:
        raise DescriptorError(
            f"{names}: A or B is signed, so the accumulator C must be signed too; "
            f"use {c.name.lstrip('u')!r} for C"
        )


def _check_accumulator_width(ops: Mapping[str, Operator]) -> None:
    a, b, c, names = _precisions(ops)
    need = max(32, a.bits, b.bits)
    if not c.is_float and not c.is_packed and c.bits < need:
        suggestion = f"{'int' if c.signed else 'uint'}{need}"
        raise DescriptorError(
            f"{names}: C has {c.bits} bits but a {a.name} x {b.name} accumulator needs at least "
            f"{need}; use {suggestion!r} for C"
        )


def _check_complex_signed(ops: Mapping[str, Operator]) -> None:
    a, b, c, names = _precisions(ops)
    unsigned = [p.name for p in (a, b, c) if not p.signed and not p.is_packed]
    if is_complex_of(ops) and unsigned:
        raise DescriptorError(
            f"Type('complex') with {names}: complex values cannot have unsigned precisions "
            f"({', '.join(unsigned)}); use signed ones such as 'int8'/'int32'"
        )


# Packed precisions by family: the operands of one tensor-core instruction.
_FOUR_BIT = frozenset({"int4", "uint4"})
_BINARY = frozenset({"binary"})


def _check_bit_op(ops: Mapping[str, Operator]) -> None:
    a, b, _, _ = _precisions(ops)
    bit_op = ops.get("BitOp")
    if bit_op is not None and not (a.name == b.name == "binary"):
        raise DescriptorError(
            f"{bit_op!r} chooses how binary GEMMs combine bits, but A and B are {a.name} and "
            f"{b.name}; use Precision('binary', 'binary', 'int32') or remove BitOp"
        )


def _packed(ops: Mapping[str, Operator]) -> tuple[PrecisionInfo, PrecisionInfo, PrecisionInfo, str] | None:
    """The precisions where A or B is packed (int4, uint4, binary), else None."""
    a, b, c, names = _precisions(ops)
    return (a, b, c, names) if a.is_packed or b.is_packed else None


def _packed_pair(ops: Mapping[str, Operator]) -> tuple[PrecisionInfo, PrecisionInfo, str] | None:
    """A and B where both are 4-bit or both binary (one tensor-core instruction), else None."""
    found = _packed(ops)
    if found is None or not ({found[0].name, found[1].name} <= _FOUR_BIT or {found[0].name, found[1].name} <= _BINARY):
        return None
    return found[0], found[1], found[3]


def _check_packed_c(ops: Mapping[str, Operator]) -> None:
    a, b, c, names = _precisions(ops)
    if c.is_packed:
        raise DescriptorError(
            f"{names}: C holds the accumulator, which is int32 for 4-bit and binary GEMMs; "
            f"use Precision({a.name!r}, {b.name!r}, 'int32')"
        )


def _check_packed_pair(ops: Mapping[str, Operator]) -> None:
    found = _packed(ops)
    if found is not None and _packed_pair(ops) is None:
        a, b, _, names = found
        raise DescriptorError(
            f"{names}: A and B must both be 4-bit (int4, uint4) or both binary; no tensor-core "
            f"instruction takes {a.name} x {b.name}. Unpack the packed side (blasdx.unpack) and "
            f"use an int8 GEMM"
        )


def _check_packed_accumulator(ops: Mapping[str, Operator]) -> None:
    found = _packed(ops)
    if found is not None and not found[2].is_packed and found[2].name != "int32":
        a, b, _, names = found
        raise DescriptorError(
            f"{names}: 4-bit and binary tensor-core instructions accumulate into int32; "
            f"use Precision({a.name!r}, {b.name!r}, 'int32')"
        )


def _check_packed_real(ops: Mapping[str, Operator]) -> None:
    found = _packed(ops)
    if found is not None and is_complex_of(ops):
        raise DescriptorError(
            f"Type('complex') with {found[3]}: 4-bit and binary GEMMs are real only; remove Type"
        )


def _check_packed_arrangement(ops: Mapping[str, Operator]) -> None:
    found = _packed(ops)
    arr = arrangement_of(ops)
    if found is not None and not k_major(arr):
        a, b, _, names = found
        raise DescriptorError(
            f"{names} needs row-major A and column-major B (given {arr['a']} A, {arr['b']} B): the "
            f"tensor cores read packed operands along k, so k must be contiguous in both. Use "
            f"Arrangement('row_major', 'col_major', {arr['c']!r}) and pack A along its rows and B "
            f"along its columns: blasdx.pack(a, {a.name!r}, axis=-1), blasdx.pack(b, {b.name!r}, "
            f"axis=-2)"
        )


def _check_packed_k(ops: Mapping[str, Operator]) -> None:
    pair, size = _packed_pair(ops), ops.get("Size")
    if pair is None or size is None:
        return
    pack, k = pair[0].pack, size.k  # type: ignore[attr-defined]
    if k % pack:
        kind = "a 4-bit" if pack == 2 else "a binary"
        raise DescriptorError(
            f"Size k={k} is not a multiple of {pack}: {kind} GEMM stores {pack} values of k per "
            f"{'byte' if pack == 2 else 'uint32'}; pad k with zeros to {-(-k // pack) * pack}"
            + (" (zero bits add nothing to an xor or and count)" if pack == 32 else "")
        )


def _check_packed_leading_dimension(ops: Mapping[str, Operator]) -> None:
    pair = _packed_pair(ops)
    if pair is None or "LeadingDimension" not in ops or "Size" not in ops:
        return
    a, b, _ = pair
    ld = leading_dimension_of(ops)
    for m in "ab":
        if ld[m] % a.pack:
            raise DescriptorError(
                f"LeadingDimension ld{m}={ld[m]} counts {a.name if m == 'a' else b.name} values "
                f"and must be a multiple of {a.pack}, the values per stored element; use "
                f"ld{m}={-(-ld[m] // a.pack) * a.pack}"
            )


def _check_bit_and_sm(ops: Mapping[str, Operator]) -> None:
    a, b, _, _ = _precisions(ops)
    bit_op, sm = ops.get("BitOp"), ops.get("SM")
    if (a.name == b.name == "binary" and bit_op is not None and bit_op.value == "and"  # type: ignore[attr-defined]
            and sm is not None and sm.value < BIT_AND_MIN_SM):  # type: ignore[attr-defined]
        raise UnsupportedError(
            f"BitOp('and') needs SM 80 or newer (SM 75 has only xor.popc), but the descriptor says "
            f"{sm!r}; use SM(800) or newer, or BitOp('xor')"
        )


def _check_arrangement_transpose(ops: Mapping[str, Operator]) -> None:
    if "Arrangement" in ops and "TransposeMode" in ops:
        raise DescriptorError(
            f"{ops['Arrangement']!r} and {ops['TransposeMode']!r} both set the memory order; "
            f"keep only Arrangement (TransposeMode is deprecated)"
        )


def _check_leading_dimension(ops: Mapping[str, Operator]) -> None:
    ld, size = ops.get("LeadingDimension"), ops.get("Size")
    if ld is None or size is None:
        return
    arr = arrangement_of(ops)
    shapes = {"a": (size.m, size.k, "m", "k"), "b": (size.k, size.n, "k", "n"),  # type: ignore[attr-defined]
              "c": (size.m, size.n, "m", "n")}  # type: ignore[attr-defined]
    for matrix, (rows, cols, rname, cname) in shapes.items():
        layout = arr[matrix]
        need = stored_rows(layout, rows, cols)
        dim = rname if layout == "col_major" else cname
        value = getattr(ld, matrix)
        if value < need:
            raise DescriptorError(
                f"LeadingDimension ld{matrix}={value} is too small for {layout} {matrix.upper()} "
                f"({rows}x{cols}): ld{matrix} must be >= {dim} = {need}; use ld{matrix} >= {need}"
            )


def _check_alignment(ops: Mapping[str, Operator]) -> None:
    align = ops.get("Alignment")
    if align is None:
        return
    sizes = element_sizes_of(ops)
    for matrix in "abc":
        value, esize = getattr(align, matrix), sizes[matrix]
        if value % esize:
            raise DescriptorError(
                f"Alignment {matrix}={value} bytes is not a multiple of the {matrix.upper()} "
                f"element size ({esize} bytes); use {max(value, esize)} or more"
            )


def _check_block_dim(ops: Mapping[str, Operator]) -> None:
    execution = ops.get("Execution")
    if "BlockDim" in ops and (execution is None or execution.fixed_threads is not None):  # type: ignore[attr-defined]
        raise DescriptorError(
            f"{ops['BlockDim']!r} sets the threads of a block; add Block() (one block GEMM) or Grid() "
            f"(the threads of each block of the grid)"
            + (f", not {execution_of(ops)}() (whose threads it fixes)" if execution is not None else "")
        )


def _check_grid_whole_warps(ops: Mapping[str, Operator]) -> None:
    """Grid()'s kernel splits its threads into warps and warpgroups of copies and multiplies: a block
    ending in part of a warp leaves lanes out of that split (and ptxas spills for them)."""
    if not is_tiled(ops) or "BlockDim" not in ops:
        return
    threads = ops["BlockDim"].threads  # type: ignore[attr-defined]
    if threads % 32:
        raise DescriptorError(
            f"{ops['BlockDim']!r} has {threads} threads ({threads // 32} warps and {threads % 32} threads); a Grid() "
            f"block runs whole warps: use BlockDim({threads // 32 * 32 or 32}) or BlockDim({threads // 32 * 32 + 32})")


def _check_grid_operators(ops: Mapping[str, Operator]) -> None:
    for kind in ("Tile", "Stages"):
        if kind in ops and not is_tiled(ops):
            raise DescriptorError(
                f"{ops[kind]!r} describes the blocks of a grid-level GEMM; add Grid() (Size is then the whole "
                f"problem), or remove {kind}"
            )


def _check_batch_invariant(ops: Mapping[str, Operator]) -> None:
    """BatchInvariant() fixes the tile of a grid over rows whose number changes from call to call; a Block() or
    Warp() GEMM's rows are its Size's m, and a batch item's code is the same whatever the batch already."""
    if "BatchInvariant" in ops and not is_tiled(ops):
        execution = execution_of(ops)
        raise DescriptorError(
            f"BatchInvariant() keeps each row of C bitwise the same whatever the rows of a call; it applies to Grid() "
            f"and Grouped(), whose calls' rows vary, not to {execution}() (its rows are Size's m, and each batch "
            f"item runs the same code whatever the batch): use Grid(), or remove BatchInvariant()")
    if "BatchInvariant" in ops and getattr(ops["Execution"], "ragged", "m") == "k":
        raise DescriptorError(
            "BatchInvariant() keeps each row of C bitwise the same whatever the rows of a call; Grouped('k') sums over "
            "its groups' rows (the weights' gradient), so its C changes with them by definition: remove "
            "BatchInvariant(), or use it on Grid() or Grouped()")


def _check_grid_size(ops: Mapping[str, Operator]) -> None:
    if not is_tiled(ops) or "Size" not in ops:
        return
    size = ops["Size"]
    big = [f"{name} = {getattr(size, name)}" for name in "mnk" if getattr(size, name) >= 2**31]
    if big:
        raise UnsupportedError(
            f"Grid() with {size!r}: {', '.join(big)} is 2**31 or more; each dimension must stay below 2**31 "
            f"(offsets into the matrices are 64-bit, but a row or column index is not). Split the problem"
        )


def _check_grid_precision(ops: Mapping[str, Operator]) -> None:
    packed = _packed(ops) if is_tiled(ops) else None
    if packed is not None:
        raise UnsupportedError(
            f"Grid() with {packed[3]}: the grid-level GEMM does not take packed int4 or binary operands yet "
            f"(its edge tiles cut k, which packs them); use Block() per tile, or unpack to int8"
        )


def _check_shared_memory(ops: Mapping[str, Operator]) -> None:
    if not {"Size", "SM"} <= ops.keys() or execution_of(ops) is None or is_tiled(ops):  # Size is the problem
        return
    parts = shared_memory_parts_of(ops)
    total = sum(parts.values())
    sm = ops["SM"].value  # type: ignore[attr-defined]
    limit = shared_memory_limit(sm)
    if total > limit:
        raise UnsupportedError(
            f"the block GEMM needs {total} bytes of shared memory, over SM {sm}'s limit of "
            f"{limit} bytes per block; use a smaller Size or precision, a newer SM, or Grid() in place of "
            f"{execution_of(ops)}() (any Size, over many blocks). "
            f"Details: A {parts['a']} B, B {parts['b']} B, C {parts['c']} B"
        )


# What InstructionFamily(name) demands, said where the family's conditions fail ({failed}).
_DEMANDS = {
    "mma": "InstructionFamily('mma') demands a tensor-core mma instruction, but {failed}; remove InstructionFamily "
           "or change the Precision",
    "wgmma": "InstructionFamily('wgmma') demands Hopper's warpgroup MMA, but these conditions fail: {failed}. Change "
             "the descriptor to meet them, or remove InstructionFamily to let the planner fall back to mma.sync",
}


def _check_instruction_family(ops: Mapping[str, Operator]) -> None:
    """InstructionFamily(name) demands that family: every condition of it must hold (wgmma's, once
    Size gives the tile's shape)."""
    if "InstructionFamily" not in ops or "SM" not in ops or is_tiled(ops):
        return  # Grid(): its tile's Block() descriptor carries InstructionFamily and checks it
    name = ops["InstructionFamily"].value  # type: ignore[attr-defined]
    failed = [words for words, held in family_named(name).conditions(ops) if not held]
    if failed and not (name == "wgmma" and "Size" not in ops):
        raise UnsupportedError(_DEMANDS[name].format(failed="; ".join(failed)))


def _has(*kinds: str) -> Callable[[Mapping[str, Operator]], bool]:
    return lambda ops: all(kind in ops for kind in kinds)


def _never(ops: Mapping[str, Operator]) -> bool:
    return False


def _has_arrangement(ops: Mapping[str, Operator]) -> bool:
    return "Arrangement" in ops or "TransposeMode" in ops


# Each rule checks one thing, and says when it may run during composition: once every
# operator it reads is present, so that no default (float32, real, the default arrangement,
# tight leading dimensions, no Block()) decides it, and any order of composition meets the
# same rules with the same operators. The rest run when the descriptor is used
# (check(ops, complete=True)); BlockDim without Block() is only ever checked then.
RULES: tuple[tuple[Callable[[Mapping[str, Operator]], None], Callable[[Mapping[str, Operator]], bool]], ...] = (
    (_check_bit_op, _has("Precision")),
    (_check_packed_c, _has("Precision")),
    (_check_packed_pair, _has("Precision")),
    (_check_packed_accumulator, _has("Precision")),
    (_check_packed_real, _has("Precision", "Type")),
    (_check_packed_arrangement, lambda ops: "Precision" in ops and _has_arrangement(ops)),
    (_check_packed_k, _has("Precision", "Size")),
    (_check_packed_leading_dimension, _has("Precision", "Size", "LeadingDimension")),
    (_check_bit_and_sm, _has("Precision", "BitOp", "SM")),
    (_check_precision_kinds, _has("Precision")),
    (_check_signed_accumulator, _has("Precision")),
    (_check_accumulator_width, _has("Precision")),
    (_check_complex_signed, _has("Precision", "Type")),
    (_check_arrangement_transpose, _has("Arrangement", "TransposeMode")),
    (_check_leading_dimension, lambda ops: _has("Size", "LeadingDimension")(ops) and _has_arrangement(ops)),
    (_check_alignment, _has("Alignment", "Precision", "Type")),
    (_check_block_dim, _never),
    (_check_grid_whole_warps, _has("Execution", "BlockDim")),
    (_check_grid_operators, _never),
    (_check_batch_invariant, _has("Execution", "BatchInvariant")),
    (_check_grid_size, _has("Execution", "Size")),
    (_check_grid_precision, _has("Execution", "Precision")),
    (_check_instruction_family, _never),
    (_check_shared_memory, lambda ops: _has("Execution", "Size", "SM", "Precision", "Type", "LeadingDimension")(ops)
     and _has_arrangement(ops)),
)
