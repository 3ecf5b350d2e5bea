"""Hooks written in Python in Numba kernels on the GPU: every slot, per precision family, bitwise the kernel whose hooks
are the same C++ expressions and within the precision's bound of NumPy; Grid()'s store_block_tile with a bias; a hook
that calls a Numba device function."""

from __future__ import annotations

import math

import numpy as np
import pytest

from .gpu_support import bound, relative_error, storage_dtype
from .test_gpu_numba import (
    BLOCKS,
    CASES,
    GRID_CASES,
    cuda,
    device,
    flat,
    grid_kernel,
    kernels,
    operands,
    values,
)

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
import blasdx.numba  # noqa: E402
from blasdx import expression  # noqa: E402

from ..numba.shared_kernels import persistent_with_bias  # noqa: E402


def halve(x):
    return x * 0.5


def negate(x):
    return -x


def twice(x):
    return x * 2.0


def leaky(x):
    return x if x > 0 else x * 0.125


def minus_one(x):
    return x - 1


def absolute(x):
    return x if x > 0 else -x


# (Python hook, the same as a C++ expression, the same in NumPy)
FLOAT_HOOKS = {"a_load": (halve, "x * 0.5f", lambda x: x * 0.5), "b_load": (negate, "-x", lambda x: -x),
               "c_load": (twice, "x * 2", lambda x: x * 2), "epilogue": (leaky, "x > 0 ? x : x * T(0.125)",
                                                                      lambda x: np.where(x > 0, x, x * 0.125))}
INT_HOOKS = {"a_load": (minus_one, "x - 1", lambda x: x - 1), "b_load": (negate, "-x", lambda x: -x),
             "c_load": (twice, "x * 2", lambda x: x * 2), "epilogue": (absolute, "x > 0 ? x : -x", np.abs)}
HOOKED = [c for c in CASES if c[0] in ("f16-f32-wgmma", "bf16-wgmma", "fp8-e4m3", "tf32", "f32-fma", "f64", "int8")]


def _launch(desc, g, problem, arrays, alpha, beta):
    M, N, K = problem
    da, db, dc = arrays
    out = dc.copy()
    grid = (math.ceil(M / desc.size.m), math.ceil(N / desc.size.n))
    kernels(g, True)[grid, g.block_dim, 0, g.shared_memory_size_ab](da, db, out, M, N, K, alpha, beta)
    return out


@pytest.mark.parametrize("desc, problem", [c[1:] for c in HOOKED], ids=[c[0] for c in HOOKED])
def test_python_hooks_in_every_slot_are_their_cpp_expressions_bitwise(desc, problem):
    p = desc.precision
    is_float = p.a != "int8"
    hooks = FLOAT_HOOKS if is_float else INT_HOOKS
    M, N, K = problem
    rng = np.random.default_rng(17)
    a, bt, c = values(p.a, (M, K), rng, False), values(p.b, (N, K), rng, False), values(p.c, (M, N), rng, False)
    arrays = (device(a, p.a, False), device(bt, p.b, False), device(c, p.c, False))
    alpha, beta = (1.5, 0.5) if is_float else (2, 1)
    python = blasdx.numba.device_api(desc, **{slot: hook for slot, (hook, _, _) in hooks.items()})
    cpp = blasdx.numba.device_api(desc, **{slot: expression(text) for slot, (_, text, _) in hooks.items()})
    got = _launch(desc, python, problem, arrays, alpha, beta)
    assert cp.array_equal(got.view(cp.uint8), _launch(desc, cpp, problem, arrays, alpha, beta).view(cp.uint8))
    on = {slot: numpy for slot, (_, _, numpy) in hooks.items()}
    stored = storage_dtype(p.a) if is_float else np.float64  # a load hook's value goes back to A's type
    hooked_a, hooked_b = (on[slot](x).astype(stored).astype(np.float64) for slot, x in (("a_load", a), ("b_load", bt)))
    ref = on["epilogue"](alpha * hooked_a @ hooked_b.T + beta * on["c_load"](c))
    result = got.get().reshape(M, N).astype(np.float64)
    limit = bound(desc)
    err = relative_error(result, ref) if limit > 0 else float(np.max(np.abs(result - ref)))
    assert err <= limit, f"{desc!r}: error {err:.3g} > {limit:.3g}"


def test_a_python_epilogue_with_a_bias_in_store_block_tile_and_a_numba_device_function():
    from numba.core import types

    @cuda.jit(device=True)
    def clamp(x):
        return min(max(x, 0.0), 6.0)

    def relu6(x):
        return clamp(x)

    desc = GRID_CASES[0][1]  # row-major float32 C
    m, n, _ = desc.size
    bias = cp.asarray(np.random.default_rng(29).standard_normal(n).astype(np.float32) * 4)
    results = []
    for hook in (relu6, expression("fminf(fmaxf(x, 0.f), 6.f)")):
        a, b, c = operands(desc, 31)
        g = blasdx.numba.device_api(desc, epilogue=hook, bias="row")
        kernel = grid_kernel(g, desc, persistent_with_bias(g, 0), (types.float32[::1],))
        kernel[BLOCKS, g.block_dim, 0, g.shared_memory_size](flat(a), flat(b), flat(c), bias, 1.5, 0.5)
        results.append(c.result()[0])
    ref = np.clip(1.5 * a.values[0] @ b.values[0] + 0.5 * c.values[0] + bias.get()[None, :], 0, 6)
    assert np.array_equal(results[0], results[1])
    assert relative_error(results[0], ref) <= bound(desc)
