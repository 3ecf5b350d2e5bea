"""blasdx on one GPU against the copy bandwidth and CuPy: batched execute(), fused kernels, the
block GEMM alone, packed precisions and execute()'s host cost. Every result is checked against
float64 before it is timed (CUDA events, median of repeats); "GB/s ratio" counts the bytes each moves.

    python benchmarks/bench_gpu.py [--gib 1.0] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cupy
import numpy as np
from ab import report

import blasdx
from blasdx import SM, Arrangement, Block, Precision, Size

CASES = [  # (m, n, k), (a, b, c)
    ((32, 32, 32), ("float16", "float16", "float16")),
    ((64, 64, 64), ("float16", "float16", "float16")),
    ((128, 128, 64), ("float16", "float16", "float16")),
    ((64, 64, 64), ("float16", "float16", "float32")),
    ((32, 32, 32), ("float32", "float32", "float32")),
    ((64, 64, 64), ("float32", "float32", "float32")),
    ((16, 16, 16), ("float64", "float64", "float64")),
    ((32, 32, 32), ("float64", "float64", "float64")),
]


# Where execute() trails cupy.matmul by time with beta = 0.5 (it also reads C): the same
# GEMMs with beta = 0, moving the same bytes as cupy.matmul.
BETA_ZERO_CASES = [
    ((32, 32, 32), ("float32", "float32", "float32")),
    ((64, 64, 64), ("float32", "float32", "float32")),
    ((32, 32, 32), ("float64", "float64", "float64")),
]


def time_ms(fn, repeats=20, warmup=3) -> float:
    for _ in range(warmup):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def copy_bandwidth(nbytes: int) -> float:
    src = cupy.random.random(nbytes // 8)
    dst = cupy.empty_like(src)
    ms = time_ms(lambda: dst.__setitem__(Ellipsis, src))
    return 2 * src.nbytes / ms / 1e6  # GB/s, read + write


def batched_case(size, prec, gib: float, beta: float = 0.5) -> dict:
    """execute() on a batch of ``gib`` GiB against cupy.matmul alone and against what a CuPy
    user writes for the same result (matmul, then c *= beta; c += product). With beta = 0
    execute() does not read C and moves the same bytes as cupy.matmul."""
    m, n, k = size
    a_p, b_p, c_p = prec
    desc = Size(m, n, k) + Precision(a_p, b_p, c_p) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    isz = {"float16": 2, "float32": 4, "float64": 8}
    per_item = m * k * isz[a_p] + k * n * isz[b_p] + (2 if beta else 1) * m * n * isz[c_p]
    batch = max(1, int(gib * 2**30) // per_item)
    a = cupy.random.standard_normal((batch, m, k), dtype=np.float32).astype(a_p)
    b = cupy.random.standard_normal((batch, k, n), dtype=np.float32).astype(b_p)
    c = cupy.random.standard_normal((batch, m, n), dtype=np.float32).astype(c_p)
    c0 = c.copy()
    def run(out):
        desc.execute(a, b, out, alpha=1.0, beta=beta)

    run(c)
    ref = cupy.matmul(a[:256].astype(np.float64), b[:256].astype(np.float64)) + beta * c0[:256].astype(np.float64)
    err = float(cupy.linalg.norm(c[:256].astype(np.float64) - ref) / cupy.linalg.norm(ref))
    bound = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[c_p if c_p != "float32" or a_p == "float32" else "float16"]
    assert err < bound, (size, prec, err)
    ms = time_ms(lambda: run(c))
    gbs = per_item * batch / ms / 1e6
    mm = mm_ms = same_ms = None
    if a_p == b_p == c_p:
        out = cupy.empty_like(c)
        mm_ms = time_ms(lambda: cupy.matmul(a, b, out=out))
        mm = (m * k * isz[a_p] + k * n * isz[b_p] + m * n * isz[c_p]) * batch / mm_ms / 1e6

        def cupy_same():
            cupy.matmul(a, b, out=out)
            if beta:
                c.__imul__(beta)
                c.__iadd__(out)
        same_ms = time_ms(cupy_same) if beta else mm_ms
    return {"case": f"{m}x{n}x{k} {a_p[:1]}{isz[a_p]*8}->{c_p[:1]}{isz[c_p]*8}" + ("" if beta else " b=0"),
            "batch": batch, "ms": ms, "beta": beta,
            "GB/s": gbs, "matmul GB/s": mm, "matmul ms": mm_ms, "cupy same ms": same_ms, "rel err": err,
            "kernel": desc.plan.kernel_name}


def fusion_cases(gib: float) -> list[dict]:
    """Issue 6: fused kernels against the unfused cupy.matmul chains they replace, on
    batched 64x64x64 float16; each checked against float64 before timing."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import chained_gemm

    gemm1, gemm2, chained = chained_gemm.build()
    batch = int(gib * 2**30) // (4 * 64 * 64 * 2)
    a, b, e = (cupy.random.standard_normal((batch, 64, 64), dtype=np.float32).astype(np.float16) * 0.125
               for _ in range(3))
    bias = cupy.random.standard_normal(64, dtype=np.float32).astype(np.float16)
    c, d = cupy.empty_like(a), cupy.empty_like(a)
    rows = []

    def bias_relu_ours():
        gemm1.execute(a, b, c, bias=bias, epilogue="relu")

    def bias_relu_cupy():
        cupy.matmul(a, b, out=d)
        d.__iadd__(bias)
        cupy.maximum(d, 0, out=d)

    bias_relu_ours()
    ref = cupy.maximum(cupy.matmul(a[:256].astype(np.float64), b[:256].astype(np.float64)) + bias, 0)
    err = float(cupy.linalg.norm(c[:256] - ref) / cupy.linalg.norm(ref))
    assert err < 2e-3, ("GEMM + bias + ReLU", err)
    rows.append({"case": "GEMM + bias + ReLU", "batch": batch, "ms": time_ms(bias_relu_ours),
                 "cupy ms": time_ms(bias_relu_cupy), "rel err": err})

    smem = chained_gemm.shared_memory(gemm1, gemm2)
    grid = min(batch, cupy.cuda.Device().attributes["MultiProcessorCount"] * 32)

    def chained_ours():
        chained(grid, gemm1.block_dim, (a, b, e, c, np.int64(batch)), shared_mem=smem)

    tmp = cupy.empty_like(a)

    def chained_cupy():
        cupy.matmul(a, b, out=tmp)
        cupy.matmul(tmp, e, out=d)

    chained_ours()
    first = cupy.matmul(a[:256].astype(np.float64), b[:256].astype(np.float64)).astype(np.float16)
    ref = cupy.matmul(first.astype(np.float64), e[:256].astype(np.float64))
    err = float(cupy.linalg.norm(c[:256] - ref) / cupy.linalg.norm(ref))
    assert err < 2e-3, ("chained GEMM", err)
    rows.append({"case": "chained GEMM (A B) E", "batch": batch, "ms": time_ms(chained_ours),
                 "cupy ms": time_ms(chained_cupy), "rel err": err})
    return rows


BLOCK_CASES = [  # (m, n, k), (a, b, c), threads or None (suggested); cuBLASDx is the anchor harness's to time
    ((128, 128, 64), ("float16", "float16", "float16"), 128),
    ((64, 64, 64), ("float16", "float16", "float16"), None),
    ((64, 64, 64), ("float16", "float16", "float32"), None),
    ((32, 32, 32), ("float16", "float16", "float16"), None),
    ((64, 64, 64), ("float32", "float32", "float32"), None),
    ((32, 32, 32), ("float64", "float64", "float64"), None),
]
REPEAT_KERNEL = r'''
// The block GEMM alone: A, B, C loaded into shared memory once, then C = A B + C repeated.
extern "C" __global__ void repeat_gemm(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int repeats) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  auto* sc = reinterpret_cast<gemm::c_t*>(smem + gemm::c_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::load_c(c, sc);
  gemm::copy_wait();
  for (int r = 0; r < repeats; ++r) gemm::execute(gemm::scalar_t(1), sa, sb, gemm::scalar_t(1), sc);
  if (blockIdx.x == 0) gemm::store_c(sc, c);
}
'''


def block_gemm_case(size, prec, threads, repeats=200) -> dict:
    """TFLOP/s of the block GEMM on data already in shared memory (suggested leading
    dimensions, up to 8 blocks per SM)."""
    m, n, k = size
    base = Size(m, n, k) + Precision(*prec) + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    if threads:
        base = base + blasdx.BlockDim(threads)
    desc = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + REPEAT_KERNEL, "repeat_gemm")
    lda, ldb, ldc = desc.leading_dimension
    a = cupy.random.standard_normal(m * lda, dtype=np.float32).astype(prec[0])
    b = cupy.random.standard_normal(k * ldb, dtype=np.float32).astype(prec[1])
    c = cupy.zeros(m * ldc, dtype=prec[2])
    dev = cupy.cuda.Device()
    per_sm = max(1, min(8, dev.attributes["MaxSharedMemoryPerMultiprocessor"] // (desc.shared_memory_size + 1024),
                        2048 // desc.max_threads_per_block))
    grid = dev.attributes["MultiProcessorCount"] * per_sm
    kernel(1, desc.block_dim, (a, b, c, np.int32(1)), shared_mem=desc.shared_memory_size)  # one GEMM: check it
    a_h = a.get().astype(np.float64)[: m * lda].reshape(m, lda)[:, :k]
    b_h = b.get().astype(np.float64)[: k * ldb].reshape(k, ldb)[:, :n]
    got = c.get().astype(np.float64).reshape(m, ldc)[:, :n]
    ref = a_h @ b_h
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    assert err < {"float16": 2e-3, "float32": 1e-5, "float64": 1e-12}[prec[2]], (size, prec, err)
    ms = time_ms(lambda: kernel(grid, desc.block_dim, (a, b, c, np.int32(repeats)),
                                shared_mem=desc.shared_memory_size), repeats=10)
    tflops = 2 * m * n * k * repeats * grid / ms / 1e9
    return {"case": f"{m}x{n}x{k} {prec[0][:1]}{prec[0][-2:]}->{prec[2][:1]}{prec[2][-2:]}",
            "threads": desc.max_threads_per_block, "blocks/SM": per_sm, "TFLOP/s": tflops, "rel err": err}


PACKED_SIZE = (64, 64, 256)  # the same logical GEMM in int8, int4 and binary (xor)
PACKED_RANGE = {"int8": (-128, 127), "int4": (-8, 7), "binary": (0, 1)}


def _packed_desc(prec, size):
    return (Size(*size) + Precision(prec, prec, "int32") + Arrangement("row_major", "col_major", "row_major")
            + SM(900) + Block())


def _packed_operands(prec, batch, size):
    """Values (int8) and the arrays execute() takes: B is (batch, k, n) with k contiguous."""
    m, n, k = size
    lo, hi = PACKED_RANGE[prec]
    a = cupy.random.randint(lo, hi + 1, size=(batch, m, k)).astype(np.int8)
    bt = cupy.random.randint(lo, hi + 1, size=(batch, n, k)).astype(np.int8)
    if prec == "int8":
        return a, bt.transpose(0, 2, 1), a, bt.transpose(0, 2, 1)
    return a, bt.transpose(0, 2, 1), blasdx.pack(a, prec), blasdx.pack(bt, prec).transpose(0, 2, 1)


def _packed_reference(prec, a, b):
    a, b = a.astype(np.int64), b.astype(np.int64)
    if prec == "binary":  # xor: popcount(a ^ b) = a + b - 2ab for bits
        return a.sum(-1)[..., None] + b.sum(-2)[..., None, :] - 2 * (a @ b)
    return a @ b


def packed_cases(gib: float) -> list[dict]:
    """int4 and binary against int8 on the same logical sizes: batched execute (one batch
    count for all three) and the block GEMM alone (repeat harness)."""
    m, n, k = PACKED_SIZE
    batch = int(gib * 2**30) // (m * k + k * n + 2 * m * n * 4)
    rows = []
    for prec in ("int8", "int4", "binary"):
        desc = _packed_desc(prec, PACKED_SIZE)
        a, b, a_dev, b_dev = _packed_operands(prec, batch, PACKED_SIZE)
        c = cupy.zeros((batch, m, n), dtype=np.int32)
        desc.execute(a_dev, b_dev, c)
        assert bool((c[:64] == _packed_reference(prec, a[:64], b[:64])).all()), prec
        ms = time_ms(lambda d=desc, x=a_dev, y=b_dev, z=c: d.execute(x, y, z))
        row = {"case": f"{m}x{n}x{k} {prec}", "batch": batch, "ms": ms,
               "TOPS": 2 * m * n * k * batch / ms / 1e9,
               "GB/s": (a_dev.nbytes + b_dev.nbytes + c.nbytes) / ms / 1e6}
        row.update(_packed_block(prec))
        rows.append(row)
    for row in rows:
        row["batched vs int8"] = rows[0]["ms"] / row["ms"]
        row["block vs int8"] = row["block TOPS"] / rows[0]["block TOPS"]
    return rows


def _packed_block(prec, repeats=200) -> dict:
    """The block GEMM alone on data in shared memory (suggested leading dimensions)."""
    m, n, k = PACKED_SIZE
    base = _packed_desc(prec, PACKED_SIZE)
    desc = base + blasdx.LeadingDimension(*base.suggested_leading_dimension)
    kernel = blasdx.compile_kernel(desc.device_source("gemm") + REPEAT_KERNEL, "repeat_gemm")
    lda, ldb, ldc = desc.leading_dimension
    # One item whose runs are ld values long; the GEMM reads the first k of each.
    a, _, a_dev, _ = _packed_operands(prec, 1, (m, n, lda))
    _, b, _, b_dev = _packed_operands(prec, 1, (m, n, ldb))
    c = cupy.zeros(m * ldc, dtype=np.int32)
    dev = cupy.cuda.Device()
    per_sm = max(1, min(8, dev.attributes["MaxSharedMemoryPerMultiprocessor"] // (desc.shared_memory_size + 1024),
                        2048 // desc.max_threads_per_block))
    grid = dev.attributes["MultiProcessorCount"] * per_sm
    a_flat, b_flat = a_dev[0], b_dev[0].T  # both contiguous: A by rows, B by columns
    kernel(1, desc.block_dim, (a_flat, b_flat, c, np.int32(1)), shared_mem=desc.shared_memory_size)
    ref = _packed_reference(prec, a[0][:, :k], b[0][:k, :])
    assert bool((c.reshape(m, ldc)[:, :n] == ref).all()), f"block GEMM {prec}"
    ms = time_ms(lambda: kernel(grid, desc.block_dim, (a_flat, b_flat, c, np.int32(repeats)),
                                shared_mem=desc.shared_memory_size), repeats=10)
    return {"block TOPS": 2 * m * n * k * repeats * grid / ms / 1e9, "threads": desc.max_threads_per_block}


def per_call(fn, n=3000) -> float:
    """Host microseconds per call of ``fn`` (after warm-up, with the device drained)."""
    for _ in range(200):
        fn()
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t) / n * 1e6


def tiny_case():
    """A 2-item batch of 16^3 f32 GEMMs, executed once (compiled and bound): host cost only."""
    desc = Size(16, 16, 16) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()
    a = cupy.random.standard_normal((2, 16, 16), dtype=np.float32)
    b = cupy.random.standard_normal((2, 16, 16), dtype=np.float32)
    c = cupy.zeros((2, 16, 16), dtype=np.float32)
    desc.execute(a, b, c)
    return desc, a, b, c


def host_overhead() -> dict:
    desc, a, b, c = tiny_case()
    kernel = desc.compile()
    args = (np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.uint64(c.data.ptr), np.float32(1), np.float32(0),
            np.int64(2), np.int64(256), np.int64(256), np.int64(256))
    stream = cupy.cuda.get_current_stream()

    bare = per_call(lambda: kernel.function((2, 1, 1), kernel.compiled.block_dim, args,
                                            shared_mem=kernel.compiled.shared_memory_size, stream=stream))
    ours = per_call(lambda: desc.execute(a, b, c))
    return {"execute us": ours, "bare launch us": bare, "ratio": ours / bare}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    props = cupy.cuda.runtime.getDeviceProperties(0)
    device = props["name"].decode()
    copy = copy_bandwidth(int(args.gib * 2**30))
    rows = [batched_case(size, prec, args.gib) for size, prec in CASES]
    rows += [batched_case(size, prec, args.gib, beta=0.0) for size, prec in BETA_ZERO_CASES]
    fused = fusion_cases(args.gib)
    blocks = [block_gemm_case(*case) for case in BLOCK_CASES]
    packed = packed_cases(args.gib)
    overhead = host_overhead()
    result = {"device": device, "date": time.strftime("%Y-%m-%d"), "blasdx": blasdx.__version__,
              "cupy": cupy.__version__, "copy GB/s": copy, "batched": rows, "fusion": fused, "block": blocks,
              "packed": packed,
              "host": overhead}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\n{device}, {result['date']}, blasdx {blasdx.__version__}, cupy {cupy.__version__}")
    print(f"device-to-device copy: {copy:.0f} GB/s (read + write)")
    print(f"{'case':26} {'batch':>7} {'GB/s':>6} {'of copy':>7} {'matmul':>7} {'GB/s ratio':>10} "
          f"{'vs matmul':>9} {'vs cupy same':>12}")
    for r in rows:
        mm = r["matmul GB/s"]
        ratio = f"{r['GB/s'] / mm:9.2f}x" if mm else "        -"
        vs = f"{r['matmul ms'] / r['ms']:8.2f}x" if mm else "      -"
        same = f"{r['cupy same ms'] / r['ms']:11.2f}x" if mm else "          -"
        print(f"{r['case']:26} {r['batch']:7d} {r['GB/s']:6.0f} {r['GB/s'] / copy:7.0%} "
              f"{(f'{mm:7.0f}' if mm else '      -')} {ratio:>10} {vs:>9} {same:>12}")
    for r in fused:
        print(f"fused {r['case']:24} batch {r['batch']:7d}: {r['ms']:.3f} ms, cupy chain {r['cupy ms']:.3f} ms, "
              f"{r['cupy ms'] / r['ms']:.2f}x")
    print(f"{'block GEMM (repeat x200)':26} {'threads':>7} {'blk/SM':>6} {'TFLOP/s':>8}")
    for r in blocks:
        print(f"{r['case']:26} {r['threads']:7d} {r['blocks/SM']:6d} {r['TFLOP/s']:8.1f}")
    print(f"{'same GEMM, 3 precisions':24} {'batch':>7} {'ms':>7} {'TOPS':>7} {'vs int8':>7} "
          f"{'block TOPS':>10} {'vs int8':>7}")
    for r in packed:
        print(f"{r['case']:24} {r['batch']:7d} {r['ms']:7.3f} {r['TOPS']:7.1f} {r['batched vs int8']:6.2f}x "
              f"{r['block TOPS']:10.1f} {r['block vs int8']:6.2f}x")
    print(f"host overhead: execute {overhead['execute us']:.1f} us/call, bare launch "
          f"{overhead['bare launch us']:.1f} us/call, ratio {overhead['ratio']:.2f}x")
    report(results_of(result))


def results_of(result: dict) -> list[tuple[str, float, str]]:
    """The rows ab.py compares: (case, value, unit)."""
    rows = [("copy", result["copy GB/s"], "GB/s")]
    for r in result["batched"]:
        rows.append((f"batched {r['case']}", r["GB/s"], "GB/s"))
        if r["matmul GB/s"]:
            rows.append((f"batched {r['case']} cupy.matmul", r["matmul GB/s"], "GB/s"))
    for r in result["fusion"]:
        rows += [(f"fused {r['case']}", r["ms"], "ms"), (f"fused {r['case']} cupy chain", r["cupy ms"], "ms")]
    rows += [(f"block {r['case']}", r["TFLOP/s"], "TFLOP/s") for r in result["block"]]
    for r in result["packed"]:
        rows += [(f"packed {r['case']} batched", r["TOPS"], "TOPS"), (f"packed {r['case']} block", r["block TOPS"], "TOPS")]
    host = result["host"]
    return rows + [("host execute()", host["execute us"], "us"), ("host bare launch", host["bare launch us"], "us")]


if __name__ == "__main__":
    main()
