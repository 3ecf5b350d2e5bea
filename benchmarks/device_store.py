"""The device API's store() in a user kernel: C (M x N) = A @ B + beta C with one tile of C a block and
a short K loop, so that store()'s reads and writes of C are most of the kernel's time. Times (CUDA
events, launches back to back, median of 5 runs of 20) with beta 0.5 and 0; compare two trees with ab.py.

    python3 benchmarks/device_store.py

A case is MxNxK, the precisions of A/B and C, the descriptor's SM and the K tiles of the loop
(C is 8192 x 8192, 4096 x 4096 for float64; every matrix row-major).
"""

from __future__ import annotations

import argparse
import functools
import statistics

from ab import report

CASES = ["64x64x64 float16 float32 900 1", "128x128x64 float16 float16 900 1", "128x128x64 float16 float32 900 1",
         "64x128x64 float16 float32 900 2", "32x32x32 float16 float16 900 1", "64x64x32 float16 float32 800 1",
         "32x32x32 float64 float64 900 1", "64x64x16 float64 float64 900 1"]
BETAS = (0.5, 0.0)

KERNEL = r"""
extern "C" __global__ void __launch_bounds__(gemm::threads)
tiles(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long n_total, long long k_total, gemm::scalar_t beta) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  const long long row0 = blockIdx.y * gemm::m, col0 = blockIdx.x * gemm::n;
  gemm::accumulator acc = gemm::make_accumulator();
  for (long long k0 = 0; k0 < k_total; k0 += gemm::k) {
    gemm::load_a(a + row0 * k_total + k0, k_total, sa);
    gemm::load_b(b + k0 * n_total + col0, n_total, sb);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  gemm::store(acc, c + row0 * n_total + col0, n_total, gemm::scalar_t(1), beta);
}
"""


def measure() -> dict[str, tuple[float, float]]:
    """{case and beta: (ms, relative error)} measured in this process."""
    import cupy as cp
    import numpy as np

    import blasdx
    from blasdx import SM, Arrangement, Block, LeadingDimension, MaxAlignment, Precision, Size

    out = {}
    for spec in CASES:
        size, ab_precision, c_precision, sm, k_tiles = spec.split()
        m, n, k = map(int, size.split("x"))
        tile = (Size(m, n, k) + Precision(ab_precision, ab_precision, c_precision) + Arrangement("row_major", "row_major", "row_major")
                + MaxAlignment + SM(int(sm)) + Block())
        if int(sm) < 900:  # mma.sync reads the padded layout without bank conflicts
            tile = tile + LeadingDimension(*tile.suggested_leading_dimension)
        kernel = blasdx.compile_kernel(tile.device_source("gemm") + KERNEL, "tiles", sm=900)
        big = 4096 if c_precision == "float64" else 8192
        depth = k * int(k_tiles)
        rng = np.random.default_rng(0)
        a = cp.asarray(rng.uniform(-1, 1, (big, depth)).astype(ab_precision))
        b = cp.asarray(rng.uniform(-1, 1, (depth, big)).astype(ab_precision))
        c_before = cp.asarray(rng.uniform(-1, 1, (big, big)).astype(c_precision))
        for beta in BETAS:
            c = c_before.copy()
            scalar = np.float64(beta) if c_precision == "float64" else np.float32(beta)

            run = functools.partial(kernel, (big // n, big // m), tile.block_dim,
                                    (a, b, c, np.int64(big), np.int64(depth), scalar), shared_mem=tile.shared_memory_size_ab)
            run()
            ref = a.astype(np.float64) @ b.astype(np.float64) + beta * c_before.astype(np.float64)
            error = float(cp.linalg.norm(c.astype(np.float64) - ref) / cp.linalg.norm(ref))
            times = []
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            for _ in range(5):
                start.record()
                for _ in range(20):
                    run()
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop) / 20)
            out[f"{spec} beta {beta}"] = (statistics.median(times), error)
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    results = measure()
    print(f"{'case':46s} {'ms':>10s}   error")
    for case, (ms, error) in results.items():
        print(f"{case:46s} {ms:10.4f}   {error:.0e}")
    report([(case, ms, "ms") for case, (ms, _) in results.items()])


if __name__ == "__main__":
    main()
