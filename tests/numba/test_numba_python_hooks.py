"""Hooks written in Python (blasdx.numba.device_api's prologue=, epilogue= and the slots as Python functions) without a
GPU: Numba compiles each for its slot's type, the kernel links with the hook inlined, its symbol stands for what
decides its code (the same in every process, another for other constants), and the errors a user meets."""

from __future__ import annotations

import struct
import types as pytypes

import numpy as np
import pytest

from blasdx import SM, Arrangement, Block, Grid, Precision, Size, Type

from .numba_support import cuda, k_loop, k_loop_signature, link, types

pytestmark = pytest.mark.compile

import blasdx.numba  # noqa: E402
from blasdx.errors import ArgumentError  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")


def gemm(size, a, b, c, sm, kind="real"):
    return Size(*size) + Precision(a, b, c) + Type(kind) + RCR + SM(sm) + Block()


def holds(ptx: str, value: float) -> bool:
    """Whether PTX has the constant ``value``, as a float32 or a float64 (Numba computes x * 0.25 in float64)."""
    return "0f" + struct.pack(">f", value).hex().upper() in ptx or "0d" + struct.pack(">d", value).hex().upper() in ptx


def scaled_by_three_and_a_half(x):
    return x * 3.5


def leaky(x):
    return x if x > 0 else x * 0.25


CASES = [  # (id, descriptor, A, B and C dtypes, the Numba type of its load hooks' x, of its C hooks')
    ("f16-f32-sm900", gemm((64, 64, 64), "float16", "float16", "float32", 900),
     (types.float16, types.float16, types.float32), "float32", "float32"),
    ("bf16-sm900", gemm((64, 64, 32), "bfloat16", "bfloat16", "float32", 900),
     (types.uint16, types.uint16, types.float32), "float32", "float32"),
    ("fp8-sm900", gemm((64, 64, 64), "float8_e4m3", "float8_e4m3", "float32", 900),
     (types.uint8, types.uint8, types.float32), "float32", "float32"),
    ("f16-sm800", gemm((64, 64, 32), "float16", "float16", "float16", 800),
     (types.float16, types.float16, types.float16), "float32", "float32"),
    ("f64-sm800", gemm((32, 32, 16), "float64", "float64", "float64", 800),
     (types.float64, types.float64, types.float64), "float64", "float64"),
    ("int8-sm800", gemm((32, 32, 32), "int8", "int8", "int32", 800),
     (types.int8, types.int8, types.int32), "int8", "int32"),
    ("uint8-sm800", gemm((32, 32, 32), "uint8", "uint8", "int32", 800),
     (types.uint8, types.uint8, types.int32), "uint8", "int32"),
    ("int16-sm800", gemm((32, 32, 32), "int16", "int16", "int32", 800),
     (types.int16, types.int16, types.int32), "int16", "int32"),
]


@pytest.mark.parametrize("desc, dtypes, load_type, c_type", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_slot_links_inlined_for_its_values_type(desc, dtypes, load_type, c_type):
    def add_one(x):
        return x + 1

    g = blasdx.numba.device_api(desc, arch=desc.sm, a_load=add_one, b_load=add_one, c_load=add_one,
                                epilogue=add_one)
    linked = link(k_loop(g), k_loop_signature(g, *dtypes), desc.sm)
    assert linked.calls == 0, "the hook was not inlined"
    assert linked.count("ld.local") == 0 and linked.stack_frame == 0
    assert g.hook_types == {"a_load": load_type, "b_load": load_type, "c_load": c_type, "c_store": c_type}


def test_the_hook_is_in_the_kernel():
    desc = CASES[0][1]
    g = blasdx.numba.device_api(desc, arch=900, epilogue=scaled_by_three_and_a_half)
    linked = link(k_loop(g), k_loop_signature(g, types.float16, types.float16, types.float32), 900)
    assert holds(linked.ptx, 3.5) and linked.calls == 0 and linked.count("wgmma.mma_async") > 0


def test_a_grid_descriptor_s_store_block_tile_takes_a_python_epilogue_and_a_bias():
    desc = Size(256, 256, 128) + Precision("float16", "float16", "float32") + RCR + SM(900) + Grid()
    g = blasdx.numba.device_api(desc, arch=900, epilogue=leaky, bias=True)

    def kernel(a, b, c, bias):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):
            row0, col0 = g.block_tile_origin(t)
            acc = g.make_accumulator()
            g.mainloop(a, b, row0, col0, smem, acc)
            g.store_block_tile(acc, c, row0, col0, 1.0, 0.0, bias, 0, 1)

    linked = link(kernel, (types.float16[::1], types.float16[::1], types.float32[::1], types.float32[::1]), 900)
    assert holds(linked.ptx, 0.25) and linked.calls == 0 and linked.count("ld.local") == 0


def test_a_numba_device_function_is_a_hook_too():
    dispatcher = cuda.jit(device=True)(scaled_by_three_and_a_half)
    desc = CASES[0][1]
    assert (blasdx.numba.device_api(desc, arch=900, epilogue=dispatcher).namespace
            == blasdx.numba.device_api(desc, arch=900, epilogue=scaled_by_three_and_a_half).namespace)


def _closure(slope):
    def hook(x):
        return x if x > 0 else x * slope
    return hook


def test_the_unit_is_named_by_what_decides_the_hook_s_code():
    desc = CASES[0][1]

    def named(**hooks):
        return blasdx.numba.device_api(desc, arch=900, **hooks).namespace

    assert named(epilogue=_closure(0.25)) == named(epilogue=_closure(0.25)), "the same code and constants"
    assert named(epilogue=_closure(0.25)) != named(epilogue=_closure(0.5)), "another constant"
    assert named(epilogue=leaky) != named(epilogue=scaled_by_three_and_a_half)
    assert named(epilogue=leaky) != named(c_load=leaky), "another slot"
    assert named(epilogue=leaky) != named(epilogue="relu")


def test_the_symbol_is_the_same_in_another_process(tmp_path):
    import subprocess
    import sys

    script = (
        "import blasdx.numba\n"
        "from tests.numba.test_numba_python_hooks import CASES, _closure\n"
        "print(blasdx.numba.device_api(CASES[0][1], arch=900, epilogue=_closure(0.25)).namespace)\n")
    env = {**__import__("os").environ, "BLASDX_CACHE_DIR": str(tmp_path)}
    names = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env=env).stdout.strip() for _ in range(2)}
    assert names == {blasdx.numba.device_api(CASES[0][1], arch=900, epilogue=_closure(0.25)).namespace}


def test_two_gemms_with_hooks_of_their_own_link_into_one_kernel():
    first = blasdx.numba.device_api(CASES[0][1], arch=900, epilogue=leaky)
    second = blasdx.numba.device_api(CASES[0][1], arch=900, epilogue=scaled_by_three_and_a_half, prologue=leaky)

    def kernel(a, b, c, d):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = first.make_accumulator()
        first.load_a(a, 64, 0, 0, smem)
        first.load_b(b, 64, 0, 0, smem)
        first.copy_wait()
        first.multiply(smem, acc)
        first.store(acc, c, 64, 1.0, 0.0)
        cuda.syncthreads()
        other = second.make_accumulator()
        second.load_a(a, 64, 0, 0, smem)
        second.load_b(b, 64, 0, 0, smem)
        second.copy_wait()
        second.multiply(smem, other)
        second.store(other, d, 64, 1.0, 0.0)

    linked = link(kernel, (types.float16[::1], types.float16[::1], types.float32[::1], types.float32[::1]), 900)
    assert linked.calls == 0 and holds(linked.ptx, 3.5) and holds(linked.ptx, 0.25)


def _two_arguments(x, y):
    return x + y


def _a_default(x, k=2.0):
    return x * k


CONFIG = pytypes.ModuleType("hook_config")  # a module whose attribute a hook reads (Numba takes it as a constant)
CONFIG.K = 2.0


def scaled_by_config(x):
    return x * CONFIG.K


def test_a_module_attribute_or_fastmath_the_hook_reads_names_its_code():
    desc = CASES[0][1]

    def named(hook):
        return blasdx.numba.device_api(desc, arch=900, epilogue=hook).namespace

    before = named(scaled_by_config)
    try:
        CONFIG.K = 5.0
        assert named(scaled_by_config) != before
    finally:
        CONFIG.K = 2.0
    assert named(scaled_by_config) == before
    contract = cuda.jit(device=True, fastmath={"contract"})(scaled_by_three_and_a_half)
    every = cuda.jit(device=True, fastmath=True)(scaled_by_three_and_a_half)
    assert len({named(contract), named(every), named(scaled_by_three_and_a_half)}) == 3


def _untyped(x):
    return x.not_an_attribute


ERRORS = [  # (id, what the user did, message)
    ("two-arguments", dict(epilogue=_two_arguments), r"c_store=_two_arguments: a hook is a function of one value x "
                                                       r"\(of float\), but it takes \(x, y\)"),
    ("a-default", dict(epilogue=_a_default), r"c_store=_a_default: a hook is a function of one value x .* closure"),
    ("does-not-type", dict(prologue=_untyped), r"a_load=_untyped: Numba could not compile it as a function of one "
                                               r"float32 returning float32 \(TypingError"),
    ("packed-load", dict(desc=gemm((32, 32, 64), "int4", "int4", "int32", 800), a_load=leaky),
     r"a_load=blasdx.numba hook leaky: int4 operands go to the tensor cores packed"),
    ("complex", dict(desc=gemm((16, 16, 16), "float32", "float32", "float32", 800, "complex"), epilogue=leaky),
     r"c_store: hooks written in Python take real values, and this GEMM's are complex"),
    ("both-shorthand-and-slot", dict(prologue=leaky, a_load=leaky), r"give either prologue= or a_load=/b_load="),
]


@pytest.mark.parametrize("given, match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(given, match):
    given = dict(given)
    desc = given.pop("desc", CASES[0][1])
    with pytest.raises(ArgumentError, match=match):
        blasdx.numba.device_api(desc, arch=desc.sm, **given)


def test_execute_takes_no_python_function_and_says_where_one_goes():
    import blasdx.codegen.hooks as hooks

    with pytest.raises(ArgumentError, match=r"a Python function of x is a hook of blasdx.numba.device_api"):
        hooks.to_hook(leaky, "epilogue")
    with pytest.raises(ArgumentError, match=r"c_store: a Python function is a hook of blasdx.numba.device_api"):
        blasdx.codegen.render.fusion_context("ns", hooks.Fusion(c_store=hooks.python_hook(leaky)))
