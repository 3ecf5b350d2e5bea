"""Every rule that involves more than one operator, in one place.

``check(ops)`` runs each rule whose operators are all present and raises
``DescriptorError`` (or ``UnsupportedError``) naming the operators, the values, the
rule and a fix. Rules of a single operator live with the operator.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..arch import BIT_AND_MIN_SM, PACKED_MIN_SM, shared_memory_limit
from ..errors import DescriptorError, UnsupportedError
from .operators import Operator
from .precision import PRECISIONS
from .traits import (
    arrangement_of,
    element_sizes_of,
    is_complex_of,
    leading_dimension_of,
    shared_memory_parts_of,
    stored_rows,
)


def check(ops: Mapping[str, Operator]) -> None:
    """Run every cross-operator rule whose operators are present in ``ops``."""
    _check_packed(ops)
    _check_precision_type(ops)
    _check_arrangement_transpose(ops)
    _check_leading_dimension(ops)
    _check_alignment(ops)
    _check_block_dim(ops)
    _check_shared_memory(ops)


def _check_precision_type(ops: Mapping[str, Operator]) -> None:
    prec = ops.get("Precision")
    if prec is None:
        return
    a, b, c = (PRECISIONS[n] for n in (prec.a, prec.b, prec.c))  # type: ignore[attr-defined]
    names = f"Precision({a.name!r}, {b.name!r}, {c.name!r})"
    kinds = {p.is_float for p in (a, b, c)}
    if len(kinds) != 1:
        raise DescriptorError(
            f"{names} mixes integer and floating-point precisions; A, B and C must be "
            f"all floating point or all integers (for example Precision('int8', 'int8', 'int32'))"
        )
    if not c.is_float:
        if (a.signed or b.signed) and not c.signed:
            raise DescriptorError(
                f"{names}: A or B is signed, so the accumulator C must be signed too; "
                f"use {c.name.lstrip('u')!r} for C"
            )
        need = max(32, a.bits, b.bits)
        if c.bits < need:
            suggestion = f"{'int' if c.signed else 'uint'}{need}"
            raise DescriptorError(
                f"{names}: C has {c.bits} bits but a {a.name} x {b.name} accumulator needs at least "
                f"{need}; use {suggestion!r} for C"
            )
    typ = ops.get("Type")
    if typ is not None and typ.value == "complex":  # type: ignore[attr-defined]
        unsigned = [p.name for p in (a, b, c) if not p.signed]
        if unsigned:
            raise DescriptorError(
                f"Type('complex') with {names}: complex values cannot have unsigned precisions "
                f"({', '.join(unsigned)}); use signed ones such as 'int8'/'int32'"
            )


# Packed precisions by family: the operands of one tensor-core instruction.
_FOUR_BIT = frozenset({"int4", "uint4"})
_BINARY = frozenset({"binary"})


def _check_packed(ops: Mapping[str, Operator]) -> None:
    """int4, uint4 and binary run only on tensor cores, whose instructions fix the rest."""
    prec, bit_op = ops.get("Precision"), ops.get("BitOp")
    names = (prec.a, prec.b, prec.c) if prec is not None else ("float32",) * 3  # type: ignore[attr-defined]
    a, b, c = (PRECISIONS[n] for n in names)
    if bit_op is not None and not (a.name == b.name == "binary"):
        raise DescriptorError(
            f"{bit_op!r} chooses how binary GEMMs combine bits, but A and B are {a.name} and "
            f"{b.name}; use Precision('binary', 'binary', 'int32') or remove BitOp"
        )
    if not (a.is_packed or b.is_packed or c.is_packed):
        return
    what = f"Precision({a.name!r}, {b.name!r}, {c.name!r})"
    if c.is_packed:
        raise DescriptorError(
            f"{what}: C holds the accumulator, which is int32 for 4-bit and binary GEMMs; "
            f"use Precision({a.name!r}, {b.name!r}, 'int32')"
        )
    pair = {a.name, b.name}
    if not (pair <= _FOUR_BIT or pair <= _BINARY):
        raise DescriptorError(
            f"{what}: A and B must both be 4-bit (int4, uint4) or both binary; no tensor-core "
            f"instruction takes {a.name} x {b.name}. Unpack the packed side (blasdx.unpack) and "
            f"use an int8 GEMM"
        )
    if c.name != "int32":
        raise DescriptorError(
            f"{what}: 4-bit and binary tensor-core instructions accumulate into int32; "
            f"use Precision({a.name!r}, {b.name!r}, 'int32')"
        )
    if is_complex_of(ops):
        raise DescriptorError(
            f"Type('complex') with {what}: 4-bit and binary GEMMs are real only; remove Type"
        )
    arr = arrangement_of(ops)
    if (arr["a"], arr["b"]) != ("row_major", "col_major"):
        raise DescriptorError(
            f"{what} needs row-major A and column-major B (given {arr['a']} A, {arr['b']} B): the "
            f"tensor cores read packed operands along k, so k must be contiguous in both. Use "
            f"Arrangement('row_major', 'col_major', {arr['c']!r}) and pack A along its rows and B "
            f"along its columns: blasdx.pack(a, {a.name!r}, axis=-1), blasdx.pack(b, {b.name!r}, "
            f"axis=-2)"
        )
    pack = a.pack
    size = ops.get("Size")
    if size is not None and size.k % pack:  # type: ignore[attr-defined]
        kind = "a 4-bit" if pack == 2 else "a binary"
        k = size.k  # type: ignore[attr-defined]
        raise DescriptorError(
            f"Size k={k} is not a multiple of {pack}: {kind} GEMM stores {pack} values of k per "
            f"{'byte' if pack == 2 else 'uint32'}; pad k with zeros to {-(-k // pack) * pack}"
            + (" (zero bits add nothing to an xor or and count)" if pack == 32 else "")
        )
    if "LeadingDimension" in ops and size is not None:
        ld = leading_dimension_of(ops)
        for m in "ab":
            if ld[m] % pack:
                raise DescriptorError(
                    f"LeadingDimension ld{m}={ld[m]} counts {a.name if m == 'a' else b.name} values "
                    f"and must be a multiple of {pack}, the values per stored element; use "
                    f"ld{m}={-(-ld[m] // pack) * pack}"
                )
    sm = ops.get("SM")
    if sm is not None and sm.value < PACKED_MIN_SM:  # type: ignore[attr-defined]
        raise UnsupportedError(
            f"{what} needs the 4-bit/1-bit tensor-core instructions of SM 75 or newer, but the "
            f"descriptor says {sm!r} and there is no FMA path for packed values; use SM(750) or newer, "
            f"or unpack to int8 (blasdx.unpack)"
        )
    if (sm is not None and a.name == "binary" and bit_op is not None
            and bit_op.value == "and" and sm.value < BIT_AND_MIN_SM):  # type: ignore[attr-defined]
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
    if "BlockDim" in ops and "Block" not in ops:
        raise DescriptorError(
            f"{ops['BlockDim']!r} only applies to block execution; add Block() to the descriptor"
        )


def _check_shared_memory(ops: Mapping[str, Operator]) -> None:
    if not {"Block", "Size", "SM"} <= ops.keys():
        return
    parts = shared_memory_parts_of(ops)
    total = sum(parts.values())
    sm = ops["SM"].value  # type: ignore[attr-defined]
    limit = shared_memory_limit(sm)
    if total > limit:
        raise UnsupportedError(
            f"the block GEMM needs {total} bytes of shared memory, over SM {sm}'s limit of "
            f"{limit} bytes per block; use a smaller Size or precision, or a newer SM. "
            f"Details: A {parts['a']} B, B {parts['b']} B, C {parts['c']} B"
        )
