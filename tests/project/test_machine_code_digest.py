"""scripts/machine_code_digest.py reads the machine code of a cubin: one digest per kernel, the same for the
same code whatever the kernel is named, different for different code (NVRTC, no GPU)."""

from __future__ import annotations

import importlib.util

import pytest

from blasdx import SM, Arrangement, Block, Precision, Size, compile_kernel

from ..support import ROOT

pytestmark = pytest.mark.compile

SOURCE = r"""
extern "C" __global__ void NAME(float* x, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = OP; }
"""


def _script():
    spec = importlib.util.spec_from_file_location("machine_code_digest", ROOT / "scripts" / "machine_code_digest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digests_follow_the_code_not_the_names():
    digests = _script().text_digests

    def of(name, op):
        return digests(compile_kernel(SOURCE.replace("NAME", name).replace("OP", op), name, sm=900).cubin)

    assert of("first", "x[i] * 2.0f") == of("second", "x[i] * 2.0f") != of("first", "x[i] + 3.0f")
    desc = Size(32, 32, 32) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900)
    assert len(digests((desc + Block()).compile(arch=900).cubin)) == 1  # the batched kernel
