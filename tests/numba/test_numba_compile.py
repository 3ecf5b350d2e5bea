"""blasdx.numba without a GPU: Numba kernels around the device API compile and link with LTO (the functions
inlined, the accumulator in registers, wgmma kept), per precision family; and the errors a user meets."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from blasdx import SM, Arrangement, Block, Precision, Size, Type, Warp

from .numba_support import cuda, k_loop, k_loop_signature, link, types

pytestmark = pytest.mark.compile

import blasdx.numba  # noqa: E402
from blasdx.errors import ArgumentError, DeviceError, UnsupportedError  # noqa: E402

RCR = Arrangement("row_major", "col_major", "row_major")


def gemm(size, a, b, c, sm, kind="real"):
    return Size(*size) + Precision(a, b, c) + Type(kind) + RCR + SM(sm) + Block()


u8, u16, u32 = types.uint8, types.uint16, types.uint32
CASES = [  # (id, descriptor, A, B and C dtypes, tensor-core instruction expected in the PTX)
    ("f16-f32-sm900-wgmma", gemm((64, 64, 64), "float16", "float16", "float32", 900),
     (types.float16, types.float16, types.float32), "wgmma.mma_async"),
    ("f16-sm800", gemm((64, 64, 32), "float16", "float16", "float16", 800),
     (types.float16, types.float16, types.float16), "mma.sync.aligned.m16n8k16"),
    ("bf16-sm900", gemm((64, 64, 32), "bfloat16", "bfloat16", "float32", 900), (u16, u16, types.float32), "wgmma"),
    ("fp8-sm890", gemm((32, 32, 64), "float8_e4m3", "float8_e5m2", "float32", 890), (u8, u8, types.float32),
     "e4m3.e5m2"),
    ("tf32-sm800", gemm((32, 32, 32), "tfloat32", "tfloat32", "float32", 800),
     (types.float32, types.float32, types.float32), "tf32"),
    ("f32-fma-sm800", gemm((32, 32, 32), "float32", "float32", "float32", 800),
     (types.float32, types.float32, types.float32), "fma.rn.f32"),
    ("f64-sm800", gemm((32, 32, 16), "float64", "float64", "float64", 800),
     (types.float64, types.float64, types.float64), "mma.sync.aligned.m8n8k4.row.col.f64"),
    ("int8-sm800", gemm((32, 32, 32), "int8", "int8", "int32", 800), (types.int8, types.int8, types.int32), ".s8.s8"),
    ("int4-sm800", gemm((32, 32, 64), "int4", "int4", "int32", 800), (u8, u8, types.int32), ".s4.s4"),
    ("binary-sm800", gemm((32, 32, 256), "binary", "binary", "int32", 800), (u32, u32, types.int32), ".b1"),
    ("complex64-sm800", gemm((16, 16, 16), "float32", "float32", "float32", 800, "complex"),
     (types.complex64, types.complex64, types.complex64), "fma.rn.f32"),
]


@pytest.mark.parametrize("desc, dtypes, instruction", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_k_loop_kernel_links_with_everything_inlined(desc, dtypes, instruction):
    arch = desc.sm
    g = blasdx.numba.device_api(desc, arch=arch)
    scalar = types.complex128 if desc.is_complex else types.float64
    linked = link(k_loop(g), k_loop_signature(g, *dtypes, scalar), arch)
    assert linked.calls == 0, "a device function was not inlined"
    assert linked.count("ld.local") == linked.count("st.local") == 0, "the accumulator left the registers"
    assert linked.stack_frame == 0
    assert instruction in linked.ptx
    if arch == 900 and "wgmma" in instruction:
        assert linked.count("mma.sync") == 0, "wgmma's mma.sync fallback was compiled in"


@pytest.mark.parametrize("prec", [("float8_e4m3", "float8_e4m3", "float32"), ("float16", "float16", "float32")],
                         ids=["fp8", "f16"])
def test_a_numba_loop_of_multiplies_encodes_the_descriptors_once(prec):
    """A's and B's wgmma descriptors (matrix_descriptor's start-address mask, 0x3FFF0 = 262128 in the PTX) are made
    once, outside the kernel's loop: NVVM had folded B's into a constant expression, made again at every multiply
    (64^3 FP8 in Numba 0.87 of its C++ twin, H200)."""
    g = blasdx.numba.device_api(gemm((64, 64, 64), *prec, 900), arch=900)

    def kernel(c, repeats):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        for _ in range(repeats):
            g.multiply(smem, acc)
            g.multiply(smem, acc)
        g.store(acc, c, g.n, 1.0, 0.0)

    linked = link(kernel, (types.float32[::1], types.int32), 900)
    assert linked.calls == 0
    assert linked.count("wgmma.mma_async") >= 4
    assert linked.count("262128") == 2


def test_an_sm_100a_link_takes_blasdx_sm_100_ltoir():
    from blasdx.compiler import supported_archs

    if 1000 not in supported_archs():
        pytest.skip("this NVRTC does not target SM 100")
    desc = gemm((64, 64, 32), "float16", "float16", "float32", 900)
    g = blasdx.numba.device_api(desc, arch=1000)  # blasdx compiles sm_100; Numba links sm_100a
    linked = link(k_loop(g), k_loop_signature(g, types.float16, types.float16, types.float32), 1000)
    assert linked.calls == 0 and linked.count("mma.sync") > 0


def test_two_gemms_link_into_one_kernel():
    first = blasdx.numba.device_api(gemm((64, 64, 64), "float16", "float16", "float32", 900), arch=900)
    second = blasdx.numba.device_api(gemm((64, 64, 64), "float32", "float32", "float32", 900), arch=900)
    assert first.namespace != second.namespace

    def kernel(a, b, c1, c2):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc1 = first.make_accumulator()
        acc2 = second.make_accumulator()
        first.load_a(a, 64, 0, 0, smem)
        first.load_b(b, 64, 0, 0, smem)
        first.copy_wait()
        first.multiply(smem, acc1)
        cuda.syncthreads()
        second.load(c2, 64, acc2)
        first.store(acc1, c1, 64, 1.0, 0.0)
        second.store(acc2, c2, 64, 2.0, 0.0)

    signature = (types.float16[::1], types.float16[::1], types.float32[::1], types.float32[::1])
    linked = link(kernel, signature, 900)
    assert linked.calls == 0 and linked.count("wgmma.mma_async") > 0


def test_link_source_has_numba_compile_blasdx_source():
    g = blasdx.numba.device_api(gemm((32, 32, 32), "float32", "float32", "float32", 800), link="source")
    linked = link(k_loop(g), k_loop_signature(g, types.float32, types.float32, types.float32), 800)
    assert linked.calls == 0 and linked.count("ld.local") == 0


def test_one_gemm_asked_for_twice_links_its_functions_once():
    first = blasdx.numba.device_api(gemm((32, 32, 32), "float32", "float32", "float32", 800), arch=800)
    again = blasdx.numba.device_api(gemm((32, 32, 32), "float32", "float32", "float32", 800), arch=800)

    def kernel(c):
        acc = first.make_accumulator()
        again.zero(acc)
        again.store(acc, c, 32, 1.0, 0.0)

    assert link(kernel, (types.float32[::1],), 800).calls == 0


HOOKED = gemm((64, 64, 32), "float16", "float16", "float32", 800)


def test_hooks_bias_and_edge_tiles():
    g = blasdx.numba.device_api(HOOKED, arch=800, epilogue="relu", prologue="negate", bias=True)

    def kernel(a, b, c, bias, rows, cols):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.load_a_partial(a, 32, 0, 0, smem, rows, 32)
        g.load_b_partial(b, 32, 0, 0, smem, 32, cols)
        g.copy_wait()
        g.multiply_async(smem, acc)
        g.multiply_wait(acc)
        g.store_partial(acc, c, 64, rows, cols, 1.0, 0.5, bias, 0, 1)

    signature = (types.float16[::1], types.float16[::1], types.float32[::1], types.float32[::1], types.int32,
                 types.int32)
    linked = link(kernel, signature, 800)
    assert linked.calls == 0 and linked.count("ld.local") == 0 and linked.stack_frame == 0
    assert "max.f32" in linked.ptx or "setp" in linked.ptx  # relu


def test_a_python_epilogue_reads_the_accumulator_by_row_and_column():
    # (A loop over acc[i] that NVVM leaves rolled reads the accumulator from local memory: linked, not fast.)
    g = blasdx.numba.device_api(HOOKED, arch=800)

    def kernel(a, b, d):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.load_a(a, 32, 0, 0, smem)
        g.load_b(b, 32, 0, 0, smem)
        g.copy_wait()
        g.multiply(smem, acc)
        for i in range(g.accumulator_size):
            if g.in_bounds(i):
                d[g.row(i) * 64 + g.col(i)] = acc[i] * acc[i]

    linked = link(kernel, (types.float16[::1], types.float16[::1], types.float32[::1]), 800)
    assert linked.calls == 0


def test_sm900_links_async_multiply_with_wgmma():
    g = blasdx.numba.device_api(gemm((128, 128, 64), "float16", "float16", "float32", 900), arch=900)

    def kernel(a, b, c, steps):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        for t in range(steps):
            g.load_a(a, 64 * steps, 0, t * 64, smem)
            g.load_b(b, 64 * steps, t * 64, 0, smem)
            g.copy_wait()
            g.multiply_async(smem, acc)
            g.multiply_wait(acc)
            cuda.syncthreads()
        g.store(acc, c, 128, 1.0, 0.0)

    linked = link(kernel, (types.float16[::1], types.float16[::1], types.float32[::1], types.int32), 900)
    assert linked.count("wgmma.mma_async") > 0 and linked.count("mma.sync") == 0 and linked.calls == 0


F16 = gemm((64, 64, 64), "float16", "float16", "float32", 900)


def _wrong_dtype():
    g = blasdx.numba.device_api(F16, arch=900)
    link(k_loop(g), k_loop_signature(g, types.float32, types.float16, types.float32), 900)


def _without_lto():
    g = blasdx.numba.device_api(F16, arch=900)
    cuda.compile_all(k_loop(g), k_loop_signature(g, types.float16, types.float16, types.float32), device=False,
                     cc=(9, 0, "a"), output="ptx", abi="numba")


def _numba_cuda_version(version):
    def patched(monkeypatch):
        real = blasdx.numba.importlib_metadata.version

        def fake(name):
            if name != "numba-cuda":
                return real(name)
            if version is None:
                raise blasdx.numba.importlib_metadata.PackageNotFoundError(name)
            return version
        monkeypatch.setattr(blasdx.numba.importlib_metadata, "version", fake)
        blasdx.numba.device_api(F16, arch=900)
    return patched


def _numba_import_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    blasdx.numba.device_api(F16, arch=900)


def _old_nvjitlink(monkeypatch):
    monkeypatch.setattr(blasdx.numba, "nvrtc_version", lambda: (13, 99))
    blasdx.numba.device_api(F16, arch=900)


ERRORS = [  # (id, what the user did, error class, message)
    ("numba-cuda-missing", _numba_cuda_version(None), UnsupportedError, r"needs numba-cuda >= 0\.24.*numba-cu13"),
    ("numba-cuda-too-old", _numba_cuda_version("0.23.1"), UnsupportedError, r"sm_90a.*found 0\.23\.1"),
    ("numba-import-fails", _numba_import_fails, UnsupportedError, r"did not import with NumPy .*numpy<2\.4"),
    ("nvjitlink-older-than-nvrtc", _old_nvjitlink, UnsupportedError, r"nvJitLink 13\.\d+ cannot link .* NVRTC 13\.99"),
    ("arch-older-than-sm", lambda mp: blasdx.numba.device_api(F16, arch=800), UnsupportedError,
     r"arch 800 is older than the descriptor's SM\(900\)"),
    ("arch-not-an-sm", lambda mp: blasdx.numba.device_api(F16, arch=90), UnsupportedError, r"did you mean arch=900"),
    ("warp-descriptor", lambda mp: blasdx.numba.device_api(F16.replace(Warp()), arch=900), UnsupportedError,
     r"device APIs of Block\(\), Grid\(\) and Grouped\(\) descriptors; this descriptor is Warp\(\): use "
     r"descriptor\.replace\(Block\(\)\)"),
    ("bias-value", lambda mp: blasdx.numba.device_api(F16, arch=900, bias="col"), ArgumentError,
     r"bias must be False, True or 'row'"),
    ("gated-epilogue", lambda mp: blasdx.numba.device_api(F16, arch=900, epilogue="swiglu_interleaved"),
     ArgumentError, r"a gated epilogue\) pairs the product's columns in Grid\(\)'s and Grouped\(\)'s execute\(\)"),
    ("hook-name", lambda mp: blasdx.numba.device_api(F16, arch=900, epilogue="rleu"), ArgumentError,
     r"not a built-in hook"),
    ("link-value", lambda mp: blasdx.numba.device_api(F16, arch=900, link="ptx"), ArgumentError,
     r"link must be 'ltoir' .* or 'source'"),
    ("not-a-descriptor", lambda mp: blasdx.numba.device_api("gemm", arch=900), ArgumentError,
     r"takes a blasdx descriptor"),
]


@pytest.mark.parametrize("action, error, match", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(monkeypatch, action, error, match):
    with pytest.raises(error, match=match):
        action(monkeypatch)


def test_a_wrong_array_dtype_is_a_typing_error_listing_the_allowed_ones():
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match=r"(?s)this GEMM's A \(float16\): an array of float16, got array\(float32.*"
                                          r"bfloat16: uint16"):
        _wrong_dtype()


def test_a_link_without_lto_is_refused():
    with pytest.raises(Exception, match=r"need link-time optimization.*remove lto=False or debug=True") as caught:
        _without_lto()
    assert isinstance(caught.value, ArgumentError) or "ArgumentError" in str(caught.value)


def test_without_a_gpu_arch_is_required():
    if cuda.is_available():
        pytest.skip("a GPU is present: the default arch is its own")
    with pytest.raises(DeviceError, match=r"pass arch= \(as 900\)"):
        blasdx.numba.device_api(F16)


REPEAT = r"""
extern "C" __global__ void repeat(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int reps) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  auto acc = gemm::make_accumulator();
  gemm::load_a(a, gemm::k, sa);
  gemm::load_b(b, gemm::k, sb);
  gemm::copy_wait();
  for (int r = 0; r < reps; ++r) gemm::multiply(sa, sb, acc);
  gemm::store(acc, c, gemm::n, 1.0f, 0.0f);
}
"""


def test_registers_stay_near_the_cpp_twin():
    from blasdx import compile_kernel

    g = blasdx.numba.device_api(F16, arch=900)

    def kernel(a, b, c, reps):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.load_a(a, g.k, 0, 0, smem)
        g.load_b(b, g.k, 0, 0, smem)
        g.copy_wait()
        for _ in range(reps):
            g.multiply(smem, acc)
        g.store(acc, c, g.n, 1.0, 0.0)

    linked = link(kernel, (types.float16[::1], types.float16[::1], types.float32[::1], types.int32), 900)
    twin = compile_kernel(F16.device_source("gemm") + REPEAT, "repeat", sm=900)
    assert twin.resources is not None
    assert linked.registers <= twin.resources.registers + 32, (linked.registers, twin.resources.registers)
    assert linked.count("mma.sync") == 0 and linked.count("wgmma.mma_async") >= 4
