"""Grouped() without a GPU (issue 48): the operator, the tile it suggests, what it refuses, explain(), its kernel
compiling for every wgmma precision with the hooks and a bias, and execute()'s checks of A, B, C, the offsets and
the bias (on __cuda_array_interface__ objects, the device queries faked)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from blasdx import (
    SM,
    ArgumentError,
    Arrangement,
    Block,
    Grid,
    Grouped,
    Precision,
    Size,
    Stages,
    Tile,
    UnsupportedError,
)
from blasdx.codegen.hooks import NO_FUSION
from blasdx.codegen.naming import kernel_name
from blasdx.compiler.nvrtc import nvrtc_compile, options_for
from blasdx.kinds import launched_plan
from blasdx.kinds.grouped import MAX_GROUPS, GroupedPlan
from blasdx.pipeline import fusion, kernel_source
from blasdx.plan.kernel import GROUP_PARAMETERS

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")
BF16 = Precision("bfloat16", "bfloat16", "bfloat16")


def _grouped(m=512, n=1536, k=2048, precision=BF16, arrangement=RCR, *more):
    desc = Size(m, n, k) + precision + arrangement + SM(900) + Grouped()
    for op in more:
        desc = desc + op
    return desc


def test_grouped_plans_grid_tiles_with_tma_and_a_schedule():
    plan = _grouped().plan
    assert isinstance(plan, GroupedPlan) and plan.execution == "grouped" and plan.tma
    assert not plan.split_k and not plan.cluster and plan.item_block is None
    assert plan.kernel_name.startswith("blasdx_grouped_sm900_bf16bf16bf16_512x1536x2048_rcr_tile128x256x64")
    names = [p.name for p in plan.kernel_parameters(True)]
    assert names[names.index("bias_col_stride") + 1:names.index("splits")] == [p.name for p in GROUP_PARAMETERS]
    assert plan.tile_rows_bound(1000, 7) == 1000 // 128 + 7
    assert plan.tile_rows_bound(5, 64) == 5  # no more tile rows than rows
    assert plan.grouped_blocks(65536, 128, 132) == 132 and plan.grouped_blocks(100, 1, 132) == 6  # 1 tile row, 6 columns


@pytest.mark.parametrize("size, precision, tile", [
    ((512, 1536, 2048), BF16, (128, 256, 64)),
    ((48, 1536, 2048), BF16, (64, 128, 64)),  # small groups: 64 rows (64 x 256 on one warpgroup spilled)
    ((512, 128, 2048), BF16, (128, 128, 64)),  # n of one narrow tile
    ((512, 1536, 2048), Precision("float8_e4m3", "float8_e4m3", "bfloat16"), (128, 128, 128)),  # promoted FP8
])
def test_the_suggested_tile_suits_groups_not_the_whole_problem(size, precision, tile):
    desc = Size(*size) + precision + RCR + SM(900) + Grouped()
    assert tuple(desc.tile) == tile
    assert tuple((desc + Tile(64, 128, 64)).tile) == (64, 128, 64)  # Tile and Stages as for Grid()
    assert (desc + Stages(2)).plan.stages == 2


def test_the_schedule_fits_beside_the_stages():
    plan = _grouped().plan
    assert plan.static_shared_memory_size >= 4 * (2 * MAX_GROUPS + 1)
    assert plan.kernel_shared_memory_size + plan.static_shared_memory_size <= 227 * 1024


@pytest.mark.parametrize("desc, message", [
    (_grouped(precision=Precision("float32", "float32", "float32")), "its tile runs fma"),
    (_grouped(arrangement=Arrangement("col_major", "col_major", "row_major")), "A is col_major"),
    (_grouped(arrangement=Arrangement("row_major", "col_major", "col_major")), "C col_major"),
    (Size(512, 1536, 2048) + BF16 + RCR + SM(800) + Grouped(), "its tile runs mma"),
])
def test_what_grouped_cannot_run_is_refused_with_the_fix(desc, message):
    with pytest.raises(UnsupportedError, match=message):
        _ = desc.plan


def test_explain_says_how_the_groups_run():
    text = _grouped().explain(width=0)
    assert re.search(r"groups: each call's offsets .* at most 1024 groups", text)
    assert "Size's m (512) only chose the tile" in text
    for grid_only in ("split-K", "batches:", "Elsewhere", "per batch item", "Size is the whole problem"):
        assert grid_only not in text  # Grid()'s words that do not hold here


@pytest.mark.parametrize("precision, arrangement, m", [
    (BF16, RCR, 512),
    (Precision("float16", "float16", "float32"), RRR, 512),
    (Precision("bfloat16", "bfloat16", "float32"), RCR, 48),
    (Precision("float8_e4m3", "float8_e5m2", "bfloat16"), RCR, 512),
    (Precision("tfloat32", "tfloat32", "float32"), RCR, 512),
    (Precision("int8", "int8", "int32"), RCR, 512),
], ids=["bf16", "f16-f32-rrr", "bf16-f32-small", "fp8", "tf32", "int8"])
def test_grouped_kernels_compile_without_spills(precision, arrangement, m):
    desc = _grouped(m, 1536, 1024, precision, arrangement)
    plan = desc.plan
    with_bias = fusion(desc, None, "relu", None, None, None, None, True)
    for f in (NO_FUSION, with_bias):
        name = kernel_name(launched_plan(plan), f)
        source = kernel_source(plan, f)
        assert "schedule_groups(static_cast<const int*>(offsets)" in source
        _, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
        assert f"Compiling entry function '{name}'" in log
        assert "C75" not in log, log
        assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


# --- execute()'s checks, without a GPU ----------------------------------------------------------

class _Interface:
    """A GPU array as __cuda_array_interface__ describes it (nothing behind the pointer)."""

    def __init__(self, shape, dtype, ptr, strides=None):
        x = np.empty(0, dtype)
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": x.dtype.str, "data": (ptr, False),
                                         "strides": strides, "version": 3}


@pytest.fixture
def no_gpu(monkeypatch):
    """The argument checks without CuPy's device queries: pointers at or past 0xD0000000 lie on device 1."""
    import blasdx.runtime.arguments as arguments

    runtime = SimpleNamespace(getDevice=lambda: 0,
                              pointerGetAttributes=lambda ptr: SimpleNamespace(device=int(ptr >= 0xD0000000)))
    fake = SimpleNamespace(ndarray=type("NotCupy", (), {}), cuda=SimpleNamespace(runtime=runtime))
    monkeypatch.setattr(arguments, "cupy_module", lambda: fake)


ROWS, GROUPS, N, K = 1000, 8, 256, 128


def _arrays(**changes):
    f16 = np.float16
    arrays = {
        "a": _Interface((ROWS, K), f16, 0x1000000),
        "b": _Interface((GROUPS, K, N), f16, 0x2000000, strides=(2 * K * N, 2, 2 * K)),  # column-major a group
        "c": _Interface((ROWS, N), np.float32, 0x3000000),
        "offsets": _Interface((GROUPS,), np.int32, 0x4000000),
    }
    arrays.update(changes)
    return arrays


@pytest.mark.parametrize("changes, message", [
    (dict(offsets=_Interface((GROUPS,), np.int64, 0x4000000)), "offsets have dtype int64; they are int32"),
    (dict(offsets=_Interface((GROUPS - 1,), np.int32, 0x4000000)), r"shape \(7,\) but there are 8 groups"),
    (dict(offsets=_Interface((GROUPS,), np.int32, 0x4000000, strides=(8,))), "not contiguous"),
    (dict(offsets=_Interface((GROUPS,), np.int32, 0xD4000000)), "offsets are on device 1"),
    (dict(offsets=None), "needs offsets="),
    (dict(b=_Interface((MAX_GROUPS + 1, K, N), np.float16, 0x2000000, strides=(2 * K * N, 2, 2 * K)),
          offsets=_Interface((MAX_GROUPS + 1,), np.int32, 0x4000000)), "takes 1 to 1024"),
    (dict(c=_Interface((ROWS - 1, N), np.float32, 0x3000000)), "C takes the rows of A"),
    (dict(a=_Interface((GROUPS, ROWS, K), np.float16, 0x1000000)), r"A \(rows, k\) and C \(rows, n\), each 2-D"),
    (dict(b=_Interface((K, N), np.float16, 0x2000000)), r"B \(groups, k, n\)"),
    (dict(b=_Interface((GROUPS, K, N), np.float16, 0x2000000, strides=(2 * K * N, 2 * N, 2))), "strides"),
    (dict(c=_Interface((ROWS, N), np.float32, 0x1000000)), "C overlaps A"),
    (dict(offsets=_Interface((GROUPS,), np.int32, 0x3000010)), "C overlaps offsets"),
    (dict(a=_Interface((ROWS, K), np.float32, 0x1000000)), "A has dtype float32"),
])
def test_bad_grouped_arguments_are_refused_before_any_launch(no_gpu, changes, message):
    desc = Size(128, N, K) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grouped()
    arrays = _arrays(**changes)
    with pytest.raises(ArgumentError, match=message):
        desc.execute(arrays["a"], arrays["b"], arrays["c"], offsets=arrays["offsets"])


@pytest.mark.parametrize("shape, message", [((GROUPS - 1, N), r"\(groups, n\) = \(8, 256\)"), ((ROWS, N), "one for all")])
def test_a_bias_is_per_group_or_for_all(no_gpu, shape, message):
    desc = Size(128, N, K) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grouped()
    arrays = _arrays()
    with pytest.raises(ArgumentError, match=message):
        desc.execute(arrays["a"], arrays["b"], arrays["c"], offsets=arrays["offsets"],
                     bias=_Interface(shape, np.float32, 0x5000000))


def test_offsets_belong_to_grouped_descriptors(no_gpu):
    arrays = _arrays()
    for rows, other in ((ROWS, Grid()), (64, Block())):
        desc = Size(rows, N, K) + Precision("float16", "float16", "float32") + RCR + SM(900) + other
        with pytest.raises(ArgumentError, match=r"use Grouped\(\)"):
            desc.execute(arrays["a"], arrays["b"], arrays["c"], offsets=arrays["offsets"])


# --- Grouped('k'): groups of k, the weights' gradient -------------------------------------------

CRR = Arrangement("col_major", "row_major", "row_major")


def test_grouped_k_walks_each_groups_rows_in_its_k_loop():
    desc = Size(2048, 1536, 128) + BF16 + CRR + SM(900) + Grouped("k")
    plan = desc.plan
    assert plan.ragged_k and repr(desc.operator_map["Execution"]) == "Grouped('k')"
    assert plan.stages == 4  # Size's k is a typical group's rows, not the K loop's length
    assert plan.grouped_blocks(10_000, 8, 132) == min(132, 8 * plan.tiles)
    assert "the last K tile's rows past the group zeroed" in desc.explain(width=0)
    with pytest.raises(UnsupportedError, match=r"A is column-major and B row-major"):
        _ = (Size(2048, 1536, 128) + BF16 + RCR + SM(900) + Grouped("k")).plan


@pytest.mark.parametrize("precision, m, n", [(Precision("bfloat16", "bfloat16", "float32"), 320, 384),
                                             (Precision("float16", "float16", "float16"), 64, 64)])
def test_grouped_k_kernels_compile_without_spills(precision, m, n):
    desc = Size(m, n, 128) + precision + CRR + SM(900) + Grouped("k")
    plan = desc.plan
    for f in (NO_FUSION, fusion(desc, None, "relu", None, None, None, None, True)):
        name = kernel_name(launched_plan(plan), f)
        source = kernel_source(plan, f)
        assert "zero_k_tail(const_cast<unsigned char*>(stage), k_last)" in source and "schedule_groups" not in source
        _, log = nvrtc_compile(source, options_for(900, ("-Xptxas", "-v")), name)
        assert "C75" not in log, log
        assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log


@pytest.mark.parametrize("shapes, message", [
    (((64, 1000), (1000, 96), (1000, 96)), r"C \(groups, m, n\)"),
    (((64, 1000), (999, 96), (GROUPS, 64, 96)), "A has 1000 columns but B has 999 rows"),
    (((64, 1000), (1000, 96), (GROUPS - 1, 64, 96)), r"shape \(8,\) but there are 7 groups"),
])
def test_bad_grouped_k_arguments_are_refused(no_gpu, shapes, message):
    desc = Size(64, 96, 128) + Precision("float16", "float16", "float32") + CRR + SM(900) + Grouped("k")
    (sa, sb, sc) = shapes
    a = _Interface(sa, np.float16, 0x1000000, strides=(2, 2 * sa[0]))  # column-major (X.T)
    b = _Interface(sb, np.float16, 0x2000000)
    c = _Interface(sc, np.float32, 0x3000000)
    with pytest.raises(ArgumentError, match=message):
        desc.execute(a, b, c, offsets=_Interface((GROUPS,), np.int32, 0x4000000))


def test_what_grouped_k_and_unaligned_rows_cannot_run_names_the_cause():
    fp8 = Size(256, 256, 128) + Precision("float8_e4m3", "float8_e4m3", "float32") + CRR + SM(900) + Grouped("k")
    with pytest.raises(UnsupportedError, match="16-bit precisions only"):
        _ = fp8.plan
    with pytest.raises(UnsupportedError, match=r"rows must be whole 16 bytes, but A's are 200"):
        _ = _grouped(512, 1536, 100).plan


def test_grouped_k_takes_a_bias_of_n_values_per_group_or_for_all(no_gpu):
    from blasdx.runtime.arguments import MatrixView
    from blasdx.runtime.groups import group_bias_view

    m, n, groups = 64, 96, 8
    vc = MatrixView("c", 0x3000000, 0, np.dtype(np.float32), (groups, m, n), (m * n, n, 1), 4, None)
    bias = group_bias_view(_Interface((n,), np.float32, 0x5000000), vc, groups)
    assert bias.strides == (0, 0, 1)
    assert group_bias_view(_Interface((groups, n), np.float32, 0x5000000), vc, groups).strides == (n, 0, 1)
    with pytest.raises(ArgumentError, match=r"shape \(96,\)"):
        group_bias_view(_Interface((m,), np.float32, 0x5000000), vc, groups)


def test_given_stages_that_leave_no_room_for_the_schedule_are_refused():
    desc = _grouped() + Tile(64, 160, 128)  # 4 stages of 57344 bytes fit Grid()'s limit, not beside the schedule
    assert desc.plan.stages == 3  # suggested: fewer
    with pytest.raises(UnsupportedError, match=r"the groups' schedule .* use Stages\(3\)"):
        _ = (desc + Stages(4)).plan


def test_scales_are_refused_on_16_bit_groups(no_gpu):
    desc = Size(128, N, K) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grouped()
    arrays = _arrays()
    with pytest.raises(ArgumentError, match="scale FP8 operands"):
        desc.execute(arrays["a"], arrays["b"], arrays["c"], offsets=arrays["offsets"], scale_a=2.0)
