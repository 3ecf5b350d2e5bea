"""Numba kernels around blasdx.numba's device API, compiled and linked without a GPU (compile_all and
cuda.core's nvJitLink Linker), and what the linked code holds."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'blasdx[numba-cu13]')")
core = pytest.importorskip("cuda.core")
from numba.core import types  # noqa: E402

# Numba's targets: "a" (arch-specific) from SM 90 on.
CC = {800: (8, 0), 890: (8, 9), 900: (9, 0, "a"), 1000: (10, 0, "a")}


def link_arch(arch: int) -> str:
    return f"sm_{arch // 10}" + ("a" if arch >= 900 else "")


@dataclass(frozen=True)
class Linked:
    ptx: str  # after LTO
    log: str  # ptxas -v

    @property
    def registers(self) -> int:
        return int(re.findall(r"Used (\d+) registers", self.log)[-1])

    def count(self, text: str) -> int:
        return self.ptx.count(text)

    @property
    def calls(self) -> int:
        return len(re.findall(r"\bcall(\.uni)?\s", self.ptx))

    @property
    def stack_frame(self) -> int:
        return max(int(x) for x in re.findall(r"(\d+) bytes stack frame", self.log))


def link(kernel, signature: tuple, arch: int) -> Linked:
    """``kernel`` (a Python function) compiled by Numba for ``arch`` and linked with what it links, with LTO."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Numba's performance warnings on a CPU compile
        codes, _ = cuda.compile_all(kernel, signature, device=False, cc=CC[arch], output="ltoir", abi="numba")
    objects = [c if isinstance(c, core.ObjectCode) else core.ObjectCode.from_ltoir(getattr(c, "data", c)) for c in codes]
    options = dict(arch=link_arch(arch), link_time_optimization=True)
    linker = core.Linker(*objects, options=core.LinkerOptions(**options, verbose=True))
    linker.link("cubin")
    ptx = core.Linker(*objects, options=core.LinkerOptions(**options, ptx=True)).link("ptx").code.decode()
    return Linked(ptx=ptx, log=linker.get_info_log())


def k_loop(g):
    """A K-loop kernel: C (m x n) = alpha A (m x k steps) B + beta C."""

    def kernel(a, b, c, lda, ldb, ldc, steps, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        for t in range(steps):
            g.load_a(a, lda, 0, t * g.k, smem)
            g.load_b(b, ldb, t * g.k, 0, smem)
            g.copy_wait()
            g.multiply(smem, acc)
            cuda.syncthreads()
        g.store(acc, c, ldc, alpha, beta)

    return kernel


def k_loop_signature(g, a, b, c, scalar=types.float64):
    return (a[::1], b[::1], c[::1], types.int64, types.int64, types.int64, types.int32, scalar, scalar)


def grid_loop_signature(a, b, c, scalar=types.float64):
    return (a[::1], b[::1], c[::1], scalar, scalar)
