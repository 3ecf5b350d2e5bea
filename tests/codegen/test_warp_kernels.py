"""Warp()'s kernels compile (NVRTC, no GPU) for every SM a descriptor accepts and every precision family: the warp
kernel behind execute() and a user's kernel on the warp device API, whose copies and barriers are the warp's."""

from __future__ import annotations

import re

import pytest

from blasdx import SM, Arrangement, Precision, Size, Type, Warp, compile_kernel
from blasdx.arch import accepted_sms

from ..device_kernels import WARP_KERNELS
from ..support import ptx_of

pytestmark = pytest.mark.compile

# (precisions, complex, size): every family a warp takes, tensor-core and FMA, packed and complex.
FAMILIES = [
    (("float16", "float16", "float32"), False, (32, 32, 32)),
    (("float16", "float16", "float16"), False, (16, 24, 16)),
    (("bfloat16", "bfloat16", "float32"), False, (16, 16, 32)),
    (("tfloat32", "tfloat32", "float32"), False, (16, 16, 16)),
    (("float32", "float32", "float32"), False, (32, 32, 16)),
    (("float64", "float64", "float64"), False, (16, 16, 8)),
    (("float8_e4m3", "float8_e5m2", "float32"), False, (16, 16, 32)),
    (("int8", "int8", "int32"), False, (16, 16, 32)),
    (("int4", "int4", "int32"), False, (16, 8, 64)),
    (("binary", "binary", "int32"), False, (16, 8, 128)),
    (("float16", "float16", "float16"), True, (16, 16, 16)),
]
IDS = [f"{'c' if cx else ''}{'-'.join(p)}" for p, cx, _ in FAMILIES]
RCR = Arrangement("row_major", "col_major", "row_major")


def warp(precisions, is_complex, size, sm):
    return Size(*size) + Precision(*precisions) + Type("complex" if is_complex else "real") + RCR + SM(sm) + Warp()


@pytest.mark.parametrize("sm", accepted_sms())
@pytest.mark.parametrize("spec", FAMILIES, ids=IDS)
def test_the_warp_kernel_compiles_for_every_sm(spec, sm):
    compiled = warp(*spec, sm).compile(arch=sm)
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.kernel_name.startswith(f"blasdx_warp_gemm_sm{sm}_")


@pytest.mark.parametrize("sm", accepted_sms())
def test_a_users_kernel_on_the_warp_device_api_compiles_for_every_sm(sm):
    desc = warp(*FAMILIES[0], sm)
    assert compile_kernel(desc.device_source("gemm") + WARP_KERNELS, "warp_k_loops", sm=sm).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("spec", FAMILIES, ids=IDS)
def test_a_users_kernel_on_the_warp_device_api_compiles_for_every_family(spec):
    desc = warp(*spec, 900)
    assert compile_kernel(desc.device_source("gemm") + WARP_KERNELS, "warp_k_loops", sm=900).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("spec", FAMILIES, ids=IDS)
def test_the_warp_gemm_synchronizes_only_its_warp(spec):
    """No block-wide barrier (bar.sync / barrier.sync; __syncwarp is bar.warp.sync) in the PTX of the warp kernel or
    of a user's kernel on the warp device API, whatever the path."""
    desc = warp(*spec, 900)
    gemm = desc.device_source("gemm")
    assert "gemm_sync() { __syncwarp(); }" in gemm and "gemm_rank() { return blasdx::thread_rank() % 32; }" in gemm
    kernel = desc.plan.kernel_name.replace("blasdx_warp_gemm", "k")
    for ptx in (ptx_of(desc.source, kernel), ptx_of(gemm + WARP_KERNELS, "warp_k_loops")):
        assert "bar.warp.sync" in ptx and not re.search(r"\bbar(rier)?(\.cta)?\.sync\b", ptx), desc
