"""Composition is order-free (DESIGN.md): any permutation of a descriptor's operators, and
any split into sub-descriptors added together, gives an equal descriptor or the same error.
A property test over random valid and invalid descriptors (hypothesis), and the orders that
used to fail."""

from __future__ import annotations

import functools
import operator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blasdx import (
    SM,
    Alignment,
    Arrangement,
    BitOp,
    Block,
    BlockDim,
    DescriptorError,
    LeadingDimension,
    Precision,
    Size,
    Type,
)
from blasdx.describe import rules

REPORTED = [  # issue 18: each raised in this order and was accepted in another
    [SM(900), BlockDim(64), Block(), Size(8, 8, 8)],
    [Size(16, 8, 12), LeadingDimension(12, 8, 8), Arrangement("row_major", "row_major", "row_major")],
    [Alignment(2, 2, 2), Precision("float16")],
    [BitOp("and"), Precision("binary", "binary", "int32")],
    [Size(128, 128, 192), SM(900), Block(), Precision("float16")],
]


def compose(ops):
    return functools.reduce(operator.add, ops)


@pytest.mark.parametrize("ops", REPORTED, ids=["blockdim-before-block", "ld-before-arrangement",
                                                "alignment-before-precision", "bitop-before-precision",
                                                "smem-before-precision"])
def test_reported_orders_compose(ops):
    forward, backward = compose(ops), compose(ops[::-1])
    assert forward == backward
    assert forward.alignment == backward.alignment  # reading a trait runs every rule with defaults: they hold


def test_descriptors_add_to_descriptors():
    assert (Size(8, 8, 8) + BlockDim(64)) + (SM(900) + Block()) == Size(8, 8, 8) + SM(900) + Block() + BlockDim(64)


def test_a_rule_that_needs_a_default_runs_when_the_descriptor_is_used():
    desc = Size(8, 8, 12) + LeadingDimension(12, 11, 8)  # col-major B (the default) needs ldb >= 12
    with pytest.raises(DescriptorError, match="ldb=11 is too small for col_major B"):
        _ = desc.leading_dimension
    with pytest.raises(DescriptorError, match="ldb=11"):
        _ = (desc + SM(900) + Block()).plan
    assert (desc + Arrangement("row_major", "row_major")).leading_dimension == (12, 11, 8)


PRECISIONS = [("float16", "float16", "float32"), ("float16",), ("float64",), ("int8", "int8", "int32"),
              ("int8", "int8", "int16"), ("binary", "binary", "int32"), ("int4", "uint4", "int32"), ("float32",)]
LAYOUTS = ["row_major", "col_major"]

OPERATORS = {
    "Size": st.builds(Size, st.integers(1, 96), st.integers(1, 96), st.sampled_from([1, 8, 32, 64, 256])),
    "Precision": st.sampled_from(PRECISIONS).map(lambda p: Precision(*p)),
    "Type": st.sampled_from(["real", "complex"]).map(Type),
    "Arrangement": st.tuples(*[st.sampled_from(LAYOUTS)] * 3).map(lambda a: Arrangement(*a)),
    "LeadingDimension": st.tuples(*[st.integers(1, 300)] * 3).map(lambda ld: LeadingDimension(*ld)),
    "Alignment": st.tuples(*[st.sampled_from([1, 2, 4, 8, 16])] * 3).map(lambda al: Alignment(*al)),
    "SM": st.sampled_from([750, 800, 900]).map(SM),
    "Block": st.just(Block()),
    "BlockDim": st.sampled_from([32, 64, 128, 256]).map(BlockDim),
    "BitOp": st.sampled_from(["xor", "and"]).map(BitOp),
}


@st.composite
def operator_sets(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(OPERATORS)), min_size=2, max_size=len(OPERATORS), unique=True))
    ops = [draw(OPERATORS[kind]) for kind in kinds]
    orders = [draw(st.permutations(ops)) for _ in range(3)]
    splits = [draw(st.integers(1, len(ops) - 1)) for _ in orders]
    return ops, orders, splits


def _outcome(build):
    try:
        return build(), None
    except DescriptorError as exc:
        return None, exc


def _violated(ops):
    """The messages of the rules that fail on the whole set while composing."""
    by_kind = {op.kind: op for op in ops}
    failed = []
    for rule, ready in rules.RULES:
        if ready(by_kind):
            try:
                rule(by_kind)
            except DescriptorError as exc:
                failed.append(str(exc))
    return failed


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operator_sets())
def test_any_order_and_any_split_give_the_same_descriptor_or_error(case):
    ops, orders, splits = case
    reference, error = _outcome(lambda: compose(ops))
    violated = _violated(ops)
    for order, split in zip(orders, splits):
        for build in (lambda o=order: compose(o), lambda o=order, s=split: compose(o[:s]) + compose(o[s:])):
            desc, exc = _outcome(build)
            if error is None:
                assert exc is None and desc == reference, (ops, order, exc)
            else:
                assert exc is not None, (ops, order)
                if len(violated) == 1:  # one rule broken: every order names it alike
                    assert str(exc) == str(error), (ops, order)
    if error is None:  # once complete, every order checks the same whole set
        _, used = _outcome(lambda: reference.explain())
        for order in orders:
            _, again = _outcome(lambda o=order: compose(o).explain())
            assert str(again) == str(used)
