"""Chained block GEMMs, D = (A B) E per batch item, the first accumulator handed to the second GEMM
through shared memory (smem: written into its A, a barrier, multiply) or by multiply_chained (chained:
from registers where a_from_registers holds); float16 in, float32 out, ms per batch, smem / chained.

    python benchmarks/chained.py [--batch 32768] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import block_sweep
import numpy as np
from ab import report

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import chained_gemm  # noqa: E402

KERNEL = r"""
extern "C" __global__ void chained(const g1::a_t* a, const g1::b_t* b, const g2::b_t* e, g2::c_t* d, long long batch) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<g1::a_t*>(smem + g1::a_offset);
  auto* sb = reinterpret_cast<g1::b_t*>(smem + g1::b_offset);
  unsigned char* second = smem + (g1::shared_memory_size_ab + 1023) / 1024 * 1024;
  auto* sab = reinterpret_cast<g2::a_t*>(second + g2::a_offset);
  auto* se = reinterpret_cast<g2::b_t*>(second + g2::b_offset);
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    g1::load_a(a + item * g1::m * g1::k, sa);
    g1::load_b(b + item * g1::k * g1::n, sb);
    g2::load_b(e + item * g2::k * g2::n, se);
    g1::copy_wait();
    g1::accumulator ab = g1::make_accumulator();
    g1::multiply(sa, sb, ab);
    g2::accumulator abe = g2::make_accumulator();
#if CHAINED
    g2::multiply_chained(ab, sab, se, abe);
#else
    for (int i = 0; i < ab.size; ++i)  // what multiply_chained does where A cannot stay in registers
      if (ab.in_bounds(i)) sab[g2::a_index(ab.row(i), ab.col(i))] = __float2half(ab[i]);
    blasdx::copy_wait<true>();
    g2::multiply(sab, se, abe);
#endif
    g2::store(abe, d + item * g2::m * g2::n, g2::global_ldc, 1.f, 0.f);
    __syncthreads();
  }
}
"""

# (M, N1, N2, K, threads): A is M x K, B K x N1, E N1 x N2.
CASES = [(64, 64, 64, 64, 128), (64, 128, 64, 64, 128), (64, 64, 128, 64, 128), (128, 64, 64, 64, 256),
         (128, 128, 128, 64, 256), (64, 32, 64, 32, 128)]


def descriptors(m, n1, n2, k, threads, sm=900):
    common = Precision("float16", "float16", "float32") + SM(sm) + Block() + BlockDim(threads)
    first = Size(m, n1, k) + common + Arrangement("row_major", "row_major", "row_major")
    second = Size(m, n2, n1) + common + Arrangement("row_major", "row_major", "row_major")
    return first, second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32768)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import cupy

    rng = np.random.default_rng(0)
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    print(f"{'case':24s} {'smem ms':>8s} {'chained ms':>10s} {'ratio':>6s}  registers  max err")
    rows = []
    for m, n1, n2, k, threads in CASES:
        first, second = descriptors(m, n1, n2, k, threads)
        source = first.device_source("g1") + second.device_source("g2") + KERNEL
        kernels = {way: blasdx.compile_kernel(f"#define CHAINED {int(way == 'chained')}\n" + source, "chained")
                   for way in ("smem", "chained")}
        batch = args.batch
        a, b, e = (cupy.asarray((rng.standard_normal((batch, *shape)) / 4).astype(np.float16))
                   for shape in ((m, k), (k, n1), (n1, n2)))
        shared = chained_gemm.shared_memory(first, second)  # the same layout as the example's kernel
        times: dict[str, list[float]] = {way: [] for way in kernels}
        errors = {}
        ab = cupy.matmul(a.astype(cupy.float32), b.astype(cupy.float32)).astype(cupy.float16)
        ref = cupy.matmul(ab.astype(cupy.float32), e.astype(cupy.float32))
        d = cupy.empty((batch, m, n2), dtype=np.float32)
        grid = (min(batch, sms * 8),)
        for _ in range(args.rounds):
            for way, kernel in kernels.items():
                d.fill(np.nan)
                launch = functools.partial(kernel, grid, second.block_dim, (a, b, e, d, np.int64(batch)), shared_mem=shared)
                launch()
                errors[way] = float(cupy.abs(d - ref).max() / cupy.abs(ref).max())
                times[way].append(block_sweep.timings(cupy, launch)[1])  # median of 5 single launches
        smem, chained = (statistics.median(times[w]) for w in ("smem", "chained"))
        try:  # whether multiply_chained takes A from registers here, as the device source decides
            blasdx.compile_kernel(source + "static_assert(g2::a_from_registers<g1::accumulator>);", "chained")
            registers = "yes"
        except blasdx.CompileError:
            registers = "no"
        label = f"{m}x{n1}x{k} -> x{n2} t{threads}"
        rows += [(f"{label} smem", smem, "ms"), (f"{label} chained", chained, "ms")]
        print(f"{label:24s} {smem:8.3f} {chained:10.3f} {smem / chained:6.2f}  {registers:9s}  "
              f"{max(errors.values()):.1e}", flush=True)
    report(rows)


if __name__ == "__main__":
    main()
