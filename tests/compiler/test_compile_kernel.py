"""compile_kernel without a GPU: a user's kernel compiled to a cubin, the kernel cache, and the errors of
bad arguments and options."""

from __future__ import annotations

import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, Block, CompileError, Precision, Size

GEMM = Size(32, 32, 32) + Precision("float16", "float16", "float32") \
    + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block()
KERNEL = GEMM.device_source("gemm") + r'''
extern "C" __global__ void one_gemm(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c) {
  extern __shared__ __align__(16) unsigned char smem[];
  gemm::a_t* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  gemm::b_t* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::c_t* sc = reinterpret_cast<gemm::c_t*>(smem + gemm::c_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::copy_wait();
  gemm::execute(1.0f, sa, sb, 0.0f, sc, blasdx::identity{}, blasdx::identity{}, blasdx::identity{}, RELU{});
  gemm::store_c(sc, c);
}
'''
RELU = "-DRELU=blasdx::identity"


def test_compile_kernel_without_a_gpu_gives_a_cubin():
    kernel = blasdx.compile_kernel(KERNEL, "one_gemm", sm=900, options=(RELU,))
    assert kernel.sm == 900 and kernel.name == "one_gemm" and kernel.cubin[:4] == b"\x7fELF"
    assert "one_gemm" in repr(kernel)


def test_compile_kernel_uses_the_cache(monkeypatch):
    first = blasdx.compile_kernel(KERNEL, "one_gemm", sm=900, options=(RELU,))

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("NVRTC ran again for a cached kernel")

    monkeypatch.setattr(blasdx.compiler.nvrtc, "nvrtc_compile", no_nvrtc)
    second = blasdx.compile_kernel(KERNEL, "one_gemm", sm=900, options=(RELU,))
    assert first.cubin == second.cubin


@pytest.mark.parametrize("args, match, error", [
    (("", "k"), "non-empty", ArgumentError),
    ((KERNEL, "one gemm"), "C identifier", ArgumentError),
    ((KERNEL, "missing"), "no kernel named 'missing'", CompileError),
    ((KERNEL + "\n#error broken\n", "one_gemm"), "NVRTC failed", CompileError),
])
def test_compile_kernel_errors(args, match, error):
    with pytest.raises(error, match=match):
        blasdx.compile_kernel(*args, sm=900, options=(RELU,))


def test_compile_kernel_option_errors():
    with pytest.raises(ArgumentError, match="sequence of flags"):
        blasdx.compile_kernel(KERNEL, "one_gemm", sm=900, options="-DX=1")
    with pytest.raises(ArgumentError, match="comes from sm="):
        blasdx.compile_kernel(KERNEL, "one_gemm", sm=900, options=("-arch=sm_80",))
    with pytest.raises(blasdx.UnsupportedError, match="SM number"):
        blasdx.compile_kernel(KERNEL, "one_gemm", sm="900")
    with pytest.raises(blasdx.UnsupportedError, match="cannot compile for SM 123"):
        blasdx.compile_kernel(KERNEL, "one_gemm", sm=1230)
