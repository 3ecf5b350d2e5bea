"""PlanOverrides and the pipeline's public seams: the planner's choices fixed by hand (what
the benchmarks and ablations use), and the in-process caches."""

from __future__ import annotations

import pytest

import blasdx
import blasdx.pipeline as pipeline
from blasdx import SM, Arrangement, Block, BlockDim, DescriptorError, PlanOverrides, Precision, Size, UnsupportedError
from blasdx.plan import kernel_plan, with_alignment

ROW = Arrangement("row_major", "row_major", "row_major")
F16 = Size(32, 32, 32) + Precision("float16") + ROW + SM(900) + Block()
F32 = Size(64, 64, 64) + Precision("float32") + ROW + SM(900) + Block()


def test_no_overrides_is_the_descriptors_own_plan():
    assert pipeline.plan(F16) is F16.plan
    assert pipeline.plan(F16, PlanOverrides()) == F16.plan
    assert PlanOverrides().is_default and not PlanOverrides(c_in_registers=False).is_default


def test_an_override_is_part_of_the_kernels_identity():
    plan = pipeline.plan(F16, PlanOverrides(min_blocks_per_sm=2))
    assert kernel_plan(plan).kernel_name != kernel_plan(F16.plan).kernel_name


def test_the_two_stage_batched_kernel_is_retired():
    """A block per item (launch.bind) left a second stage no next item to copy: it is gone, and
    PlanOverrides no longer takes pipeline_stages."""
    with pytest.raises(blasdx.DescriptorError, match="PlanOverrides takes the keyword arguments .*; got pipeline_stages"):
        PlanOverrides(pipeline_stages=2)
    assert "copy_wait_prior<1" not in pipeline.kernel_source(F16.plan)


@pytest.mark.parametrize("in_registers", [False, True])
def test_c_placement_override(in_registers):
    plan = with_alignment(pipeline.plan(F16, PlanOverrides(c_in_registers=in_registers)), (16, 16, 16))
    kernel = kernel_plan(plan)
    assert kernel.c_in_registers == in_registers
    assert (kernel.c.smem_bytes == 0) == (in_registers and not kernel.c_staged_16_bytes)
    assert ("execute_global_c(alpha" in pipeline.kernel_source(plan)) == in_registers


def test_c_in_registers_on_tensor_cores_needs_row_major_pairs():
    col = F16.replace(Arrangement("row_major", "row_major", "col_major"))
    with pytest.raises(UnsupportedError, match=r"row-major C aligned to two elements \(C is col_major"):
        kernel_plan(pipeline.plan(col, PlanOverrides(c_in_registers=True)))


def test_fma_micro_tile_and_thread_order_overrides():
    desc = F32.replace(BlockDim(256))
    plan = pipeline.plan(desc, PlanOverrides(fma_micro_tile=(4, 4, 4, 4), fma_thread_pairs=False))
    assert (plan.tile_m, plan.tile_n, plan.group_m, plan.tiles_m, plan.tiles_n) == (4, 4, 4, 16, 16)
    assert not plan.fma_thread_pairs and pipeline.plan(desc, PlanOverrides(fma_micro_tile=(4, 4, 4, 4))).fma_thread_pairs
    grouped = pipeline.plan(F32, PlanOverrides(fma_micro_tile=(8, 4, 4, 4)))
    assert (grouped.group_m, grouped.tile_m) == (4, 8)
    assert len({p.kernel_name for p in (F32.plan, grouped, plan)}) == 3


def test_min_blocks_override_caps_registers_through_launch_bounds():
    plan = pipeline.plan(F16, PlanOverrides(min_blocks_per_sm=12))
    assert f"__launch_bounds__({plan.threads}, 12)" in pipeline.kernel_source(plan)
    assert f"__launch_bounds__({plan.threads})" in F16.source


def test_overridden_plan_compiles():
    plan = pipeline.plan(F32, PlanOverrides(c_in_registers=True, fma_micro_tile=(8, 4, 8, 4)))
    assert pipeline.compile_for_arch(plan, 900).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("kwargs, match", [
    ({"fma_micro_tile": (8, 4, 3, 4)}, "groups dividing the tile"),
    ({"fma_micro_tile": (8, 4)}, r"\(tile_m, tile_n, group_m, group_n\)"),
    ({"min_blocks_per_sm": 0}, "min_blocks_per_sm must be an int >= 1"),
])
def test_bad_overrides_are_descriptor_errors(kwargs, match):
    with pytest.raises(DescriptorError, match=match):
        PlanOverrides(**kwargs)


def test_overrides_need_an_executable_descriptor():
    with pytest.raises(blasdx.IncompleteDescriptorError, match="Block"):
        pipeline.plan(Size(8, 8, 8) + SM(900), PlanOverrides(c_in_registers=False))


def test_clear_caches_empties_every_in_process_cache():
    F16.compile(arch=900)
    assert pipeline.cache_info()["compiled"] >= 1 and pipeline.cache_info()["kernel_plans"] >= 1
    pipeline.clear_caches()
    assert set(pipeline.cache_info().values()) == {0}


def test_the_kernel_parameters_are_the_order_the_launches_pass():
    """BoundLaunch.launch passes (a, b, c, alpha, beta) by position, then the batch arguments
    bind() names; the template prints the same list."""
    from blasdx.plan.kernel import BATCH_PARAMETERS, BIAS_PARAMETERS, PER_CALL_PARAMETERS, kernel_parameters

    assert [p.name for p in PER_CALL_PARAMETERS] == ["a", "b", "c", "alpha", "beta"]
    assert kernel_parameters(False) == PER_CALL_PARAMETERS + BATCH_PARAMETERS
    assert kernel_parameters(True) == PER_CALL_PARAMETERS + BATCH_PARAMETERS + BIAS_PARAMETERS
    signature = F16.source.split('extern "C"')[-1].split(")", 2)[1]
    assert [part.split()[-1] for part in signature.split("(", 1)[1].split(",")] == [
        p.name for p in kernel_parameters(False)]
