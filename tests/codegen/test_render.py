"""Rendering without a GPU (compile tier): golden renders of batched and launched kernels and of the common
header (tests/golden; BLASDX_REGEN_GOLDEN=1 rewrites them on purpose), the same source in two processes,
readable kernel names, and the names device_source() defines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from blasdx import SM, Arrangement, Block, BlockDim, Grid, Precision, Size
from blasdx.codegen.render import render_common
from blasdx.plan import grid_with_alignment, with_alignment

from ..support import MATRIX, describe, spec_id

pytestmark = pytest.mark.compile


GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"  # tests/golden


def _check_golden(text: str, path: Path) -> None:
    """``text`` must equal the golden file; BLASDX_REGEN_GOLDEN=1 rewrites it on purpose."""
    if os.environ.get("BLASDX_REGEN_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}; run with BLASDX_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} changed; review the diff and regenerate on purpose"


@pytest.mark.parametrize("spec", MATRIX, ids=spec_id)
def test_golden_render(spec):
    """The generated part of each batched kernel (its block GEMM namespace, hooks and entry
    point) is pinned; the shared helpers before it are pinned once, below."""
    source, common = describe(*spec).source, render_common()
    assert source.startswith(common + "\n")
    _check_golden(source[len(common) + 1:], GOLDEN_DIR / f"{spec_id(spec)}.cu")


def test_golden_common_header():
    _check_golden(render_common(), GOLDEN_DIR / "common.cuh")


def test_source_is_identical_in_two_processes():
    code = ("import blasdx as b; d = b.Size(30, 31, 33) + b.Precision('float16', 'float16', 'float32') + "
            "b.SM(900) + b.Block(); import hashlib; print(hashlib.sha256(d.source.encode()).hexdigest(), "
            "d.plan.kernel_name)")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(outs) == 1


def test_kernel_name_is_readable_and_deterministic():
    desc = describe(*MATRIX[0])
    assert desc.plan.kernel_name.startswith("blasdx_gemm_sm750_f16f16f32_64x64x64_rcr_t64_")
    assert desc.plan.kernel_name == describe(*MATRIX[0]).plan.kernel_name
    assert desc.replace(BlockDim(128)).plan.kernel_name != desc.plan.kernel_name


def test_device_source_defines_the_documented_names():
    desc = describe(*MATRIX[0])
    text = desc.device_source("gemm1")
    for name in ("namespace gemm1", "using a_t", "using c_t", "constexpr int m = 64", "lda =",
                 "block_dim_x", "shared_memory_size", "void load_a", "void store_c", "void execute("):
        assert name in text, name


# The kernels execute() launches on 16-byte aligned arrays (CuPy's and PyTorch's): a batched
# kernel with a fused epilogue, a cp.async grid kernel and a TMA grid kernel.
LAUNCHED_GOLDENS = {
    "launched_batched_f16f16f32_rcr_64x64x64_sm900_bias_relu": (
        Size(64, 64, 64) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
        + SM(900) + Block(), "relu"),
    "launched_grid_cp_async_f32_rrr_1000x1000x1000_sm800": (
        Size(1000, 1000, 1000) + Precision("float32") + Arrangement("row_major", "row_major", "row_major")
        + SM(800) + Grid(), None),
    "launched_grid_tma_bf16f16f32_rcr_4096x4096x4096_sm900": (
        Size(4096, 4096, 4096) + Precision("bfloat16", "bfloat16", "float32")
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grid(), None),
}


@pytest.mark.parametrize("name", sorted(LAUNCHED_GOLDENS))
def test_golden_launched_kernels(name):
    from blasdx.pipeline import fusion, kernel_source

    desc, epilogue = LAUNCHED_GOLDENS[name]
    plan = (grid_with_alignment if desc.is_grid else with_alignment)(desc.plan, (16, 16, 16))
    assert ("tma" in name) == (desc.is_grid and plan.tma)
    fused = fusion(desc, None, epilogue, None, None, None, None, epilogue is not None)
    source, common = kernel_source(plan, fused), render_common()
    assert source.startswith(common + "\n")
    _check_golden(source[len(common) + 1:], GOLDEN_DIR / f"{name}.cu")
