"""wgmma against mma.sync on one sm_90 GPU, per shape: the block GEMM alone (multiply() 200 times into
register accumulators, 16 blocks an SM) and batched execute() on 1 GiB, as planned (wgmma), with
InstructionFamily('mma') on padded leading dimensions, and on each other warpgroup count.

    python benchmarks/wgmma_sweep.py [--only PRECISION] [--out results.json]
"""

from __future__ import annotations

import argparse
import json

import cupy as cp
import numpy as np
from ab import report
from bench_gpu import time_ms

import blasdx
from blasdx import SM, Arrangement, Block, BlockDim, InstructionFamily, LeadingDimension, Precision, Size

REPS = 200
LAYOUT = {"r": "row_major", "c": "col_major"}
SHAPES = [  # m, n, k, A/B precision, C precision, arrangement
    (64, 64, 64, "float16", "float32", "rrr"), (128, 128, 64, "float16", "float16", "rrr"),
    (128, 128, 64, "bfloat16", "float32", "rrr"), (128, 256, 64, "float16", "float16", "rrr"),
    (256, 128, 64, "float16", "float16", "rrr"), (64, 128, 64, "float16", "float32", "rcr"),
    (64, 256, 32, "bfloat16", "bfloat16", "rcr"), (192, 96, 48, "float16", "float32", "crc"),
    (128, 64, 128, "bfloat16", "float32", "rcr"), (64, 8, 64, "float16", "float32", "rcr"),
    (64, 48, 32, "float16", "float16", "ccc"), (320, 64, 32, "float16", "float32", "rrr"),
    (128, 128, 128, "float16", "float32", "rcr"), (64, 64, 256, "bfloat16", "float32", "rrr"),
    # The K-major forms (row-major A, column-major B), demanded so that other arrangements fail loudly:
    (64, 64, 64, "tfloat32", "float32", "rcr"), (128, 128, 64, "tfloat32", "float32", "rcr"),
    (128, 128, 128, "float8_e4m3", "float32", "rcr"), (128, 256, 128, "float8_e4m3", "float32", "rcr"),
    (128, 128, 128, "int8", "int32", "rcr"), (64, 64, 128, "int8", "int32", "rcr"),
]
ON_DEMAND = ("tfloat32", "float8_e4m3", "float8_e5m2", "int8")

REPEAT = r"""
extern "C" __global__ void __launch_bounds__(gemm::threads) repeat_reg(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int reps) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::load_a(a, sa); gemm::load_b(b, sb); gemm::copy_wait();
  auto acc = gemm::make_accumulator();
  for (int r = 0; r < reps; ++r) gemm::multiply(sa, sb, acc);
  gemm::store(acc, c, gemm::global_ldc, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""


def random(shape, precision: str):
    """Values in [-1, 1) stored as ``precision`` (bfloat16 as its raw 16 bits, float8 as small
    values' raw bytes, int8 in [-8, 8), tfloat32 as float32)."""
    if precision == "int8":
        return cp.random.randint(-8, 8, shape).astype(cp.int8)
    if precision.startswith("float8"):
        return cp.random.randint(0x20, 0x40, shape).astype(cp.uint8)  # |x| < 1, never NaN
    x = cp.random.uniform(-1, 1, shape, dtype=cp.float32)
    if precision == "bfloat16":
        return (x.view(cp.uint32) >> 16).astype(cp.uint16)
    return x if precision == "tfloat32" else x.astype(precision)


def block_tflops(desc, grid: int) -> float:
    m, n, k = desc.size
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + REPEAT, "repeat_reg")
    a, b = random(m * k, desc.precision.a), random(k * n, desc.precision.b)
    c = cp.zeros(m * n, dtype={"float32": cp.float32, "int32": cp.int32}.get(desc.precision.c, cp.uint16))
    ms = time_ms(lambda: kernel((grid,), tuple(desc.block_dim), (a, b, c, np.int32(REPS)),
                              shared_mem=desc.shared_memory_size))
    return 2 * m * n * k * REPS * grid / ms / 1e9, kernel.registers


def batched_gbps(desc) -> float:
    if desc.precision.a not in ("float16", "float32"):
        return float("nan")  # the block GEMM is measured (bfloat16, float8, int8: raw arrays would need views)
    m, n, k = desc.size
    sizes = {x: 2 if getattr(desc.precision, x) != "float32" else 4 for x in "abc"}
    per = m * k * sizes["a"] + k * n * sizes["b"] + 2 * m * n * sizes["c"]
    batch = (1 << 30) // per
    shape = {"a": (m, k), "b": (k, n), "c": (m, n)}
    arrays = []
    for x in "abc":
        rows, cols = shape[x]
        layout = getattr(desc.arrangement, x)
        stored = random((batch, rows, cols) if layout == "row_major" else (batch, cols, rows), getattr(desc.precision, x))
        arrays.append(stored if layout == "row_major" else stored.transpose(0, 2, 1))
    a, b, c = arrays
    ms = time_ms(lambda: desc.execute(a, b, c, alpha=1.0, beta=0.5))
    return per * batch / ms / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default=None, help="the shapes whose A/B precision is this")
    args = parser.parse_args()
    props = cp.cuda.runtime.getDeviceProperties(0)
    grid = props["multiProcessorCount"] * 16
    rows = []
    for m, n, k, ab, c, arr in SHAPES:
        if args.only and ab != args.only:
            continue
        base = Size(m, n, k) + Precision(ab, ab, c) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(900)
        if ab in ON_DEMAND:
            base = base + InstructionFamily("wgmma")
        chosen = base + Block()
        row = {"case": f"{m}x{n}x{k} {ab}->{c} {arr}", "instruction": chosen.instruction.name,
               "threads": chosen.block_dim[0]}
        row["reg_TFLOPs"], row["regs"] = block_tflops(chosen, grid)
        row["batched_GBps"] = batched_gbps(chosen)
        mma = base.replace(InstructionFamily("mma")) + Block()
        mma = mma + LeadingDimension(*mma.suggested_leading_dimension)  # padded against bank conflicts
        row["mma_threads"] = mma.block_dim[0]
        row["mma_reg_TFLOPs"], row["mma_regs"] = block_tflops(mma, grid)
        row["mma_batched_GBps"] = batched_gbps(mma)
        if chosen.instruction.is_wgmma:
            for threads in (128, 256, 512):
                other = base + Block() + BlockDim(threads)
                if threads != row["threads"] and other.instruction.is_wgmma:
                    row[f"reg_TFLOPs_t{threads}"] = block_tflops(other, grid)[0]
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"SUMMARY {props['name'].decode()}: block GEMM TFLOP/s (register accumulators) and batched GB/s")
    print(f"{'case':34s} {'instr':11s} {'thr':>4s} {'regs':>4s} {'reg':>7s} {'mma':>7s} {'ratio':>6s} {'batched':>8s} {'mma':>8s} other warpgroups")
    for r in rows:
        others = ", ".join(f"{key[12:]} {value:.0f}" for key, value in r.items() if key.startswith("reg_TFLOPs_t"))
        print(f"{r['case']:34s} {r['instruction']:11s} {r['threads']:4d} {r['regs']:4d} {r['reg_TFLOPs']:7.1f} {r['mma_reg_TFLOPs']:7.1f} "
              f"{r['reg_TFLOPs'] / r['mma_reg_TFLOPs']:5.2f}x {r['batched_GBps']:8.0f} {r['mma_batched_GBps']:8.0f} {others}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    results = []
    for r in rows:
        results += [(f"{r['case']} reg", r["reg_TFLOPs"], "TFLOP/s"), (f"{r['case']} mma reg", r["mma_reg_TFLOPs"], "TFLOP/s"),
                    (f"{r['case']} batched", r["batched_GBps"], "GB/s"), (f"{r['case']} mma batched", r["mma_batched_GBps"], "GB/s")]
        results += [(f"{r['case']} reg t{key[12:]}", value, "TFLOP/s") for key, value in r.items() if key.startswith("reg_TFLOPs_t")]
    report(results)


if __name__ == "__main__":
    main()
