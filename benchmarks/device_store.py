"""The device API's store() in a user kernel: C (M x N) = A @ B + beta C with one tile of C a block
and a short K loop, so that store()'s reads and writes of C are most of the kernel's time. Times
(CUDA events, launches back to back, median of 5 runs of 20) with beta 0.5 and 0, this checkout's
templates against an earlier templates/ directory, one process per version, alternating rounds.

    git archive REV templates | tar -x -C .old
    python3 benchmarks/device_store.py --old .old/templates [--rounds 4]

A case is MxNxK, the precisions of A/B and C, the descriptor's SM and the K tiles of the loop
(C is 8192 x 8192, 4096 x 4096 for float64; every matrix row-major).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile

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
    """{case and beta: (ms, relative error)} in this process (its templates)."""
    import cupy as cp
    import numpy as np

    import blasdx
    from blasdx import SM, Arrangement, Block, LeadingDimension, MaxAlignment, Precision, Size

    out = {}
    for spec in CASES:
        size, ab, c_precision, sm, k_tiles = spec.split()
        m, n, k = map(int, size.split("x"))
        tile = (Size(m, n, k) + Precision(ab, ab, c_precision) + Arrangement("row_major", "row_major", "row_major")
                + MaxAlignment + SM(int(sm)) + Block())
        if int(sm) < 900:  # mma.sync reads the padded layout without bank conflicts
            tile = tile + LeadingDimension(*tile.suggested_leading_dimension)
        kernel = blasdx.compile_kernel(tile.device_source("gemm") + KERNEL, "tiles", sm=900)
        big = 4096 if c_precision == "float64" else 8192
        depth = k * int(k_tiles)
        rng = np.random.default_rng(0)
        a = cp.asarray(rng.uniform(-1, 1, (big, depth)).astype(ab))
        b = cp.asarray(rng.uniform(-1, 1, (depth, big)).astype(ab))
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="an earlier templates/ directory to compare with")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(measure()), flush=True)
        return
    versions = {"this": None} if args.old is None else {"old": os.path.abspath(args.old), "this": None}
    runs: dict[str, list[dict]] = {tag: [] for tag in versions}
    for _ in range(args.rounds):
        for tag, templates in versions.items():
            env = dict(os.environ, BLASDX_CACHE_DIR=tempfile.mkdtemp(prefix="bx"))
            if templates:
                env["BLASDX_TEMPLATES_DIR"] = templates
            done = subprocess.run([sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"the {tag} version's process failed:\n{done.stderr[-3000:]}")
            line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
            runs[tag].append(json.loads(line[len("RESULT "):]))
    print(f"{'case':46s}" + "".join(f"{tag + ' ms':>12s}" for tag in versions) + ("   old / this" if args.old else "")
          + "   max error")
    for case in runs["this"][0]:
        medians = [statistics.median(r[case][0] for r in runs[tag]) for tag in versions]
        error = max(r[case][1] for tag in versions for r in runs[tag])
        ratio = f"   {medians[0] / medians[-1]:10.3f}x" if args.old else ""
        print(f"{case:46s}" + "".join(f"{ms:12.4f}" for ms in medians) + ratio + f"   {error:.0e}")


if __name__ == "__main__":
    main()
