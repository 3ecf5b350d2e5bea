"""The execution kinds as units (blasdx.kinds): each execution operator's module answers the pipeline, and every
kernel plan answers the launcher's questions itself, so that neither tests which kind it holds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from blasdx import SM, Arrangement, Block, Grid, Precision, Size, kinds
from blasdx.describe.operators import execution_operators
from blasdx.kinds import aligned_plan, launched_plan
from blasdx.plan import BatchedPlan, GridPlan, batched_plan
from blasdx.plan.kernel import GRID_PARAMETERS, KERNEL_PARAMETERS, MAX_GRID, TMA_PARAMETERS, TMA_STORE_PARAMETERS

ROOT = Path(__file__).resolve().parents[2]
RCR = Arrangement("row_major", "col_major", "row_major")
BLOCK = Size(64, 64, 64) + Precision("float16", "float16", "float32") + RCR + SM(900) + Block()
GRID = Size(4096, 4096, 4096) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grid()


def test_a_block_descriptor_launches_its_batched_kernel():
    launched = launched_plan(BLOCK.plan)
    assert isinstance(launched, BatchedPlan) and launched == batched_plan(BLOCK.plan)
    assert launched_plan(launched) is launched  # a kernel's plan is its own
    assert (launched.execution, launched.tma, launched.cluster) == ("block", False, False)
    assert launched.kernel_name == BLOCK.compile(arch=900).kernel_name
    assert launched.kernel_parameters(True)[:len(KERNEL_PARAMETERS)] == KERNEL_PARAMETERS
    assert launched.work(7) == 7 and launched.splits(7, 100) == 1 and launched.workspace_bytes(7, 100, 1) == 0
    assert launched.blocks(7, 100, 1) == 7 and launched.blocks(2**40, 100, 1) == MAX_GRID  # a block an item
    assert launched.registers_balance(0)


def test_a_grid_descriptor_launches_its_own_plan():
    plan = GRID.plan
    assert launched_plan(plan) is plan and plan.execution == "grid"
    aligned = aligned_plan(plan, (16, 16, 16))
    assert isinstance(aligned, GridPlan) and aligned.tma and not plan.tma  # TMA where the arrays allow it
    params = aligned.kernel_parameters(False)
    assert aligned.tma_store  # float32 C leaves by TMA stores: C's tensor map last
    assert params == KERNEL_PARAMETERS + GRID_PARAMETERS + TMA_PARAMETERS + TMA_STORE_PARAMETERS
    assert plan.kernel_parameters(False) == KERNEL_PARAMETERS + GRID_PARAMETERS
    assert aligned.work(3) == 3 * aligned.tiles
    assert aligned.blocks(3, 100, 1) <= 100 and aligned.blocks(1, 1000, 4) == min(aligned.tiles * 4, 1000)
    assert plan.registers_balance(0)  # no register hand-over without TMA


@pytest.mark.parametrize("operator", execution_operators(), ids=lambda cls: cls.__name__)
def test_every_execution_operator_has_its_kind_module(operator):
    """A kind is found by its operator's name alone: blasdx.kinds.<name> with a KIND of that name, one summary."""
    kind = kinds.named(operator.__name__.lower())
    assert isinstance(kind, kinds.ExecutionKind) and kind.execution == operator.__name__.lower()
    assert operator().name == operator.__name__ and operator.summary.startswith(f"{operator.__name__}() ")


def test_aligned_plans_of_each_kind_widen_copies():
    block = aligned_plan(BLOCK.plan, (16, 16, 16))
    assert block.a.vector_bytes == 16 > BLOCK.plan.a.vector_bytes


@pytest.mark.parametrize("module", ["blasdx/pipeline.py", "blasdx/runtime/launch.py"])
def test_the_pipeline_and_the_launcher_never_test_the_kind_they_hold(module):
    """Dispatch on a plan's kind lives in its methods and in its kind's module (blasdx.kinds); the launcher
    narrows a TMA plan's type once, for the tensor maps it binds."""
    tree = ast.parse((ROOT / module).read_text())
    tests = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", "") == "isinstance" and "Plan" in ast.unparse(node.args[1])]
    allowed = ["isinstance(plan, GridPlan)"] if module.endswith("launch.py") else []
    assert tests == allowed, tests
    source = (ROOT / module).read_text()
    assert ".is_grid" not in source and ".grid_plan" not in source
