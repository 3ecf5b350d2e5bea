"""Instruction families as units (issue 46): each family module answers one interface, the instruction
is that of the first family whose conditions hold, and InstructionFamily('mma') forbids wgmma in one
place, wgmma's conditions."""

from __future__ import annotations

import itertools
import pickle
import re

import pytest

from blasdx import BlockDim, Grid, InstructionFamily, Size, Tile
from blasdx.arch import Instruction, shared_memory_limit
from blasdx.describe.families import FAMILIES, family_issuing, family_named, family_of, fma, mma, wgmma
from blasdx.describe.operators import INSTRUCTION_FAMILIES

from ..support import ROOT, gemm

PRECISIONS = [("float16", "float16", "float32"), ("bfloat16", "bfloat16", "float32"), ("tfloat32", "tfloat32", "float32"),
              ("float32",) * 3, ("float64",) * 3, ("int8", "int8", "int32"), ("float8_e4m3", "float8_e5m2", "float32"),
              ("int4", "int4", "int32"), ("binary", "binary", "int32")]
PACKED = {"int4", "binary"}
DEMANDS = [(), (InstructionFamily("wgmma"),), (InstructionFamily("mma"),)]


def sweep():
    """Block() descriptors over precisions, SMs 800, 890 and 900, arrangements, shapes, threads and
    InstructionFamily (composed: the rule that checks a demand runs when the descriptor is used)."""
    for prec, sm, arr, size, threads, demand in itertools.product(
            PRECISIONS, (800, 890, 900), ("rcr", "rrr"), ((128, 128, 64), (64, 40, 32), (32, 64, 256)),
            ((), (BlockDim(128),), (BlockDim(96),)), DEMANDS):
        if prec[0] in PACKED and arr != "rcr":
            continue  # packed operands are K-major only (a rule of composition)
        yield gemm(size, prec, arr, sm, *threads, *demand)


SWEEP = list(sweep())


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_every_family_answers_the_interface(family):
    assert isinstance(family.name, str) and isinstance(family.scope, str) and isinstance(family.accumulators, str)
    assert isinstance(family.swizzled_operands, bool)
    assert (ROOT / "templates" / family.template).is_file() and (ROOT / "templates" / family.accumulator_template).is_file()
    grid = gemm((4000, 3000, 1000), ("float16", "float16", "float32"), "rcr", 900).replace(Grid())
    for desc in SWEEP[:: len(SWEEP) // 40]:
        ops = desc.operator_map
        conditions = family.conditions(ops)
        assert conditions and all(isinstance(words, str) and words and isinstance(held, bool) for words, held in conditions)
        assert isinstance(family.refusal(ops, conditions), str)
        threads = family.suggested_threads(ops)
        assert isinstance(threads, int) and threads % 32 == 0
        assert family.grid_tile_threads(ops) is None or family.grid_tile_threads(ops) % 32 == 0
        if all(held for _, held in conditions):
            instruction, reason = family.instruction(ops)
            assert isinstance(instruction, Instruction) and instruction.scope == family.scope and reason
    tile = family.suggested_tile(grid.operator_map)
    assert tile is None or isinstance(tile, Tile)


def test_the_families_are_tried_in_order_and_fma_always_holds():
    assert FAMILIES == (wgmma, mma, fma)
    assert len({family.name for family in FAMILIES}) == len({family.scope for family in FAMILIES}) == len(FAMILIES)
    assert all(family_named(name).name == name for name in INSTRUCTION_FAMILIES)
    assert all(held for desc in SWEEP for _, held in fma.conditions(desc.operator_map))


@pytest.mark.parametrize("desc", SWEEP, ids=repr)
def test_the_instruction_is_that_of_the_first_family_whose_conditions_hold(desc):
    ops = desc.operator_map
    holding = [family for family in FAMILIES if all(held for _, held in family.conditions(ops))]
    chosen = family_of(ops)
    assert chosen.family is holding[0] is family_issuing(chosen.instruction)
    assert desc.instruction_choice == (chosen.instruction, chosen.reason)
    assert (desc.wgmma_choice is not None and desc.wgmma_choice.holds) == (chosen.family is wgmma)
    assert pickle.loads(pickle.dumps(desc)) == desc  # a descriptor keeps no family module of its choice


def test_instruction_family_mma_forbids_wgmma_in_one_place():
    """Only wgmma's conditions read InstructionFamily('mma'): with it, wgmma fails on that one condition
    alone and every other family's conditions are as without it; and no other module compares an
    InstructionFamily with 'mma'."""
    for desc in SWEEP:
        ops = {kind: op for kind, op in desc.operator_map.items() if kind != "InstructionFamily"}
        forbidding = {**ops, "InstructionFamily": InstructionFamily("mma")}
        for family in (mma, fma):
            assert family.conditions(forbidding) == family.conditions(ops)
        assert [words for words, held in wgmma.conditions(forbidding) if not held] == [
            "InstructionFamily other than 'mma', which forbids wgmma"]
        assert "forbids wgmma" in family_of(forbidding).reason and family_of(forbidding).family is not wgmma
    comparing = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "blasdx").rglob("*.py"))
                 if re.search(r"""(?:==|!=)\s*["']mma["']""", path.read_text())]
    assert comparing == ["blasdx/describe/families/wgmma.py"]


def test_the_suggestions_are_the_chosen_familys():
    for desc in SWEEP:
        if "BlockDim" in desc.operator_map or "InstructionFamily" in desc.operator_map:
            continue
        ops = desc.operator_map
        chosen = family_of(ops, lambda family, ops=ops: family.suggested_threads(ops))
        assert desc.suggested_block_dim.x == chosen.family.suggested_threads(ops)
        grid = desc.replace(Grid(), Size(4000, 3000, 1000)) if desc.precision.a not in PACKED else None
        if grid is not None:
            tile = next(tile for family in FAMILIES if (tile := family.suggested_tile(grid.operator_map)) is not None)
            m, n, k = grid.suggested_tile  # the family's, shallower where two K tiles exceed shared memory
            esize = grid.element_size

            def fits(depth: int, m: int = m, n: int = n, esize=esize, sm: int = grid.sm) -> bool:
                return 2 * depth * (m * esize.a + n * esize.b) <= shared_memory_limit(sm)

            assert (m, n) == (tile.m, tile.n) and (k == tile.k or (k < tile.k and fits(k) and not fits(2 * k))), grid


def test_the_family_templates_are_peers():
    """gemm.cuh.j2 includes the chosen family's partials by name; no family's partial includes another's."""
    gemm_template = (ROOT / "templates" / "gemm.cuh.j2").read_text()
    assert "{% include family_template %}" in gemm_template and "{% include accumulator_template %}" in gemm_template
    for family in FAMILIES:
        text = (ROOT / "templates" / family.template).read_text()
        assert not any(f'include "{other.template}"' in text for other in FAMILIES)
