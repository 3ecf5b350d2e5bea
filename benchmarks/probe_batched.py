"""Where the batched cases of issue 5 stand against the memory system, in one run.

    python benchmarks/probe_batched.py                  # streaming ceiling per case, then execute()
    python benchmarks/probe_batched.py --profile CASE   # one execute() of CASE (e.g. "32 f16"), for ncu

The streaming ceiling is a plain kernel that moves the same bytes as execute() with
beta != 0 (reads as much as A, B and C, writes as much as C, 16 bytes per access,
grid-stride): what the memory system gives this mix of reads and writes with no GEMM in
the way. execute() is timed on the same batch, and both against the copy bandwidth.
"""

from __future__ import annotations

import argparse

import bench_gpu
import cupy
import numpy as np

from blasdx import SM, Arrangement, Block, Precision, Size

CASES = {  # label: (m, n, k), (a, b, c)
    "32 f16": ((32, 32, 32), ("float16", "float16", "float16")),
    "64 f16": ((64, 64, 64), ("float16", "float16", "float16")),
    "128 f16": ((128, 128, 64), ("float16", "float16", "float16")),
    "64 f32": ((64, 64, 64), ("float32", "float32", "float32")),
    "16 f64": ((16, 16, 16), ("float64", "float64", "float64")),
    "32 f64": ((32, 32, 32), ("float64", "float64", "float64")),
}

STREAM = cupy.RawKernel(r'''
extern "C" __global__ void stream_mix(const uint4* a, const uint4* b, uint4* c,
                                      long long na, long long nb, long long nc) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nc; i += (long long)gridDim.x * blockDim.x) {
    uint4 v = c[i];
    if (i < na) { const uint4 x = a[i]; v.x ^= x.x; v.y ^= x.y; v.z ^= x.z; v.w ^= x.w; }
    if (i < nb) { const uint4 x = b[i]; v.x ^= x.x; v.y ^= x.y; v.z ^= x.z; v.w ^= x.w; }
    c[i] = v;
  }
}
''', "stream_mix")


def operands(size, prec, gib):
    m, n, k = size
    isz = {p: np.dtype(p).itemsize for p in prec}
    per_item = m * k * isz[prec[0]] + k * n * isz[prec[1]] + 2 * m * n * isz[prec[2]]
    batch = int(gib * 2**30) // per_item
    a = cupy.random.standard_normal((batch, m, k), dtype=np.float32).astype(prec[0])
    b = cupy.random.standard_normal((batch, k, n), dtype=np.float32).astype(prec[1])
    c = cupy.random.standard_normal((batch, m, n), dtype=np.float32).astype(prec[2])
    return a, b, c, per_item * batch


def descriptor(size, prec):
    return Size(*size) + Precision(*prec) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()


def stream_gbs(a, b, c, nbytes):
    # The larger operand streams through c: the mix is the same whichever buffer it is.
    x, y, z = sorted((a, b, c), key=lambda t: t.nbytes)
    chunks = [t.nbytes // 16 for t in (x, y, z)]
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    ms = bench_gpu.time_ms(lambda: STREAM((sms * 8,), (256,), (x, y, z, *map(np.int64, chunks))))
    return nbytes / ms / 1e6


def measure(size, prec, gib) -> tuple[float, float]:
    """GB/s of the streaming kernel and of execute() (beta = 0.5) on the same batch."""
    a, b, c, nbytes = operands(size, prec, gib)
    desc = descriptor(size, prec)
    ms = bench_gpu.time_ms(lambda: desc.execute(a, b, c, alpha=1.0, beta=0.5))
    return stream_gbs(a, b, c, nbytes), nbytes / ms / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--profile", choices=sorted(CASES), default=None)
    args = parser.parse_args()
    if args.profile:
        size, prec = CASES[args.profile]
        a, b, c, _ = operands(size, prec, 0.25)
        desc = descriptor(size, prec)
        desc.execute(a, b, c, alpha=1.0, beta=0.5)  # compile and warm up
        desc.execute(a, b, c, alpha=1.0, beta=0.5)
        cupy.cuda.Device().synchronize()
        return
    copy = bench_gpu.copy_bandwidth(int(args.gib * 2**30))
    print(f"copy {copy:.0f} GB/s")
    print(f"{'case':10} {'stream mix GB/s':>15} {'of copy':>7} {'execute GB/s':>12} {'of copy':>7} {'of stream':>9}")
    for label, (size, prec) in CASES.items():
        stream, ours = measure(size, prec, args.gib)
        print(f"{label:10} {stream:15.0f} {stream / copy:7.0%} {ours:12.0f} {ours / copy:7.0%} {ours / stream:9.0%}")


if __name__ == "__main__":
    main()
