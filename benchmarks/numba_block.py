"""blasdx's block GEMM called from a Numba kernel (blasdx.numba, issue 50) against the same kernel written in C++
and compiled by compile_kernel (a CuPy RawKernel), and against nvmath-python's device Matmul (cuBLASDx through
libmathdx) where it is importable: the block GEMM alone, A and B in shared memory, register accumulators, multiply
repeated REPEATS times, grid = SMs x 16, CUDA events, medians. TFLOP/s; the Numba/C++ ratio is the goal (>= 0.95).
bf16 and FP8 rows have no nvmath column (its Matmul takes neither). blasdx's kernels run blasdx's own block and nvmath's
its suggested one, as the anchor harness runs them; --block nvmath runs all three on nvmath's block.

The repeat loop multiplies four times an iteration, in all three kernels: ptxas unrolls a C++ loop on an int counter
but not Numba's range loop (its count steps by a select), and on one multiply of a few instructions that decided the
speed, not the GEMM: 64^3 f16 on 64 threads ran 80 TFLOP/s with either loop left rolled (Numba's, or C++'s under
#pragma unroll 1) and 310 unrolled (C++'s own, or four multiplies an iteration in either language); H200,
.anchors-style probe of 2026-11-28.

The events time the kernel alone: each launch is queued behind a spin kernel, so that the host's work of launching
happens while the GPU is busy, not between the events; and the Numba kernel takes Numba device arrays made once
(cuda.as_cuda_array), since with CuPy arrays each launch imports every array through the CUDA array interface and
synchronizes its stream (CAI v3), which would wait out the spin and put the rest of the launch back in the timed span.
Timed the old way (CuPy arrays, events around a launch on an idle GPU: the "with launch" column) the Numba kernel
read 0.21-0.30 ms slower than its twin in every case (RESULTS.md: Numba/C++ 0.49-0.88), a near-constant time
whatever the kernel's (0.21 to 2.1 ms), with machine code the same as the twin's (the same wgmma or FMA loop, 92
instructions a two-multiply iteration of 64^3 f16 -> f32 against the twin's 105). The host's time a launch (us) is
printed too. Needs numba-cuda and a GPU:

    python3 benchmarks/numba_block.py [--only REGEX] [--repeats 200] [--block own|nvmath] [--lock FILE]

nvmath takes 60-100 s of compiling a case: processes with --only one case each and the same --lock compile side by
side and time one at a time (the lock is held from each case's first timed launch to its last).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import re
import statistics
import time
from functools import partial

import numpy as np
from ab import report

from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size, compile_kernel
from blasdx.errors import DescriptorError

CASES = [  # name, (m, n, k), A/B precision, C precision
    ("64x64x64 f16->f32", (64, 64, 64), "float16", "float32"),
    ("128x128x64 f16", (128, 128, 64), "float16", "float16"),
    ("32x32x32 f32", (32, 32, 32), "float32", "float32"),
    ("32x32x32 f64", (32, 32, 32), "float64", "float64"),
    ("64x64x64 bf16->f32", (64, 64, 64), "bfloat16", "float32"),
    ("64x64x64 fp8->f32", (64, 64, 64), "float8_e4m3", "float32"),
    # the rest of the nvmath anchor harness's cases
    ("32x32x32 f16", (32, 32, 32), "float16", "float16"),
    ("64x64x64 f16", (64, 64, 64), "float16", "float16"),
    ("64x64x64 f32", (64, 64, 64), "float32", "float32"),
    ("16x16x16 f64", (16, 16, 16), "float64", "float64"),
]
ARRANGEMENT = ("row_major", "col_major", "row_major")
NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "bfloat16": np.uint16,
         "float8_e4m3": np.uint8}

CPP = r"""
extern "C" __global__ void repeat(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int reps) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  auto acc = gemm::make_accumulator();
  gemm::load_a(a, gemm::k, sa);
  gemm::load_b(b, gemm::k, sb);
  gemm::copy_wait();
  for (int r = 0; r < reps; r += 4) {  // four multiplies an iteration, as the Numba kernels (module docstring)
    gemm::multiply(sa, sb, acc); gemm::multiply(sa, sb, acc); gemm::multiply(sa, sb, acc); gemm::multiply(sa, sb, acc);
  }
  gemm::store(acc, c, gemm::n, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""

# --k-loop: a batched K loop, each block its own item's C (m x n) = A (m x depth, row-major) B (depth x n,
# column-major), the tiles loaded from global memory a K step at a time (load_a, load_b, copy_wait, multiply).
K_LOOP_CPP = r"""
extern "C" __global__ void k_loop(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int depth) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  const long long item = blockIdx.x;
  a += item * gemm::m * depth;
  b += item * gemm::n * depth;
  auto acc = gemm::make_accumulator();
  for (int k0 = 0; k0 < depth; k0 += gemm::k) {
    gemm::load_a(a + k0, depth, sa);  // A's tile at (0, k0)
    gemm::load_b(b + k0, depth, sb);  // column-major B's at (k0, 0)
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();  // every warp is done with A and B before the next step loads them
  }
  gemm::store(acc, c + item * gemm::m * gemm::n, gemm::n, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""
ROUNDS = 5  # of timing each kernel in turn
SPIN_CYCLES = 4_000_000  # ~2 ms at H100/H200 clocks: longer than any launch's host time here


def numba_kernel(cuda, g):
    @cuda.jit(launch_bounds=int(np.prod(g.block_dim)))  # without them the 64-thread f64 kernel kept 109 registers (22 TFLOP/s)
    def repeat(a, b, c, reps):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        acc = g.make_accumulator()
        g.load_a(a, g.k, 0, 0, smem)
        g.load_b(b, g.k, 0, 0, smem)
        g.copy_wait()
        for _ in range(reps // 4):  # four multiplies an iteration (module docstring)
            g.multiply(smem, acc)
            g.multiply(smem, acc)
            g.multiply(smem, acc)
            g.multiply(smem, acc)
        g.store(acc, c, g.n, 1.0, 0.0)
    return repeat


def numba_k_loop_kernel(cuda, g):
    """K_LOOP_CPP's kernel in Numba."""
    @cuda.jit(launch_bounds=int(np.prod(g.block_dim)))
    def k_loop(a, b, c, depth):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        item = cuda.blockIdx.x
        a_item, b_item = a[item * g.m * depth:], b[item * g.n * depth:]
        acc = g.make_accumulator()
        for k0 in range(0, depth, g.k):
            g.load_a(a_item, depth, 0, k0, smem)
            g.load_b(b_item, depth, k0, 0, smem)
            g.copy_wait()
            g.multiply(smem, acc)
            cuda.syncthreads()
        g.store(acc, c[item * g.m * g.n:], g.n, 1.0, 0.0)
    return k_loop


def nvmath_kernel(cuda, size, pa, pc):
    """nvmath-python's Matmul of the same case and its launch, or None where it is not importable."""
    try:
        from nvmath.device import Matmul
        from nvmath.device.common import clear, copy, copy_fragment, copy_wait, make_tensor
    except ImportError:
        return None
    mm = Matmul(size=size, precision=(NUMPY[pa], NUMPY[pa], NUMPY[pc]), data_type="real", arrangement=ARRANGEMENT,
                execution="Block")
    smem_a, smem_b, rmem_c = mm.suggest_layout_smem_a(), mm.suggest_layout_smem_b(), mm.suggest_layout_rmem_c()
    a_elements = smem_a.cosize
    dtype, acc_type = NUMPY[pa], mm.c_value_type

    @cuda.jit(launch_bounds=int(np.prod(tuple(mm.block_dim))))  # as blasdx's kernel has them
    def repeat(a, b, c, reps):
        buffer = cuda.shared.array(shape=(0,), dtype=dtype, alignment=16)
        sa = make_tensor(buffer[:a_elements], smem_a)
        sb = make_tensor(buffer[a_elements:], smem_b)
        acc = make_tensor(cuda.local.array(shape=(rmem_c.cosize,), dtype=acc_type), rmem_c)
        copy(make_tensor(a, mm.get_layout_gmem_a()), sa)
        copy(make_tensor(b, mm.get_layout_gmem_b()), sb)
        copy_wait()
        clear(acc)
        for _ in range(reps // 4):  # as blasdx's kernels
            mm.execute(sa, sb, acc)
            mm.execute(sa, sb, acc)
            mm.execute(sa, sb, acc)
            mm.execute(sa, sb, acc)
        cuda.syncthreads()
        copy_fragment(acc, make_tensor(c, mm.get_layout_gmem_c()))
    return repeat, mm.block_dim, mm.get_shared_storage_size_ab(smem_a, smem_b)


def timed(cp, launch, spin=None, repeats: int = 7) -> tuple[float, float, float]:
    """(the kernel's time, ms; the host's time in launch(), us; the spin's time, ms) as medians of ``repeats``.
    With ``spin`` (a launch of the spin kernel) the GPU runs it while the host launches, so the events bracket
    the kernel alone; without it they bracket the launch's host work as well (the GPU idles through it)."""
    launch()
    cp.cuda.runtime.deviceSynchronize()
    times, hosts, spins = [], [], []
    for _ in range(repeats):
        before, start, end = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
        if spin is not None:
            before.record()
            spin()
        start.record()
        t0 = time.perf_counter()
        launch()
        hosts.append((time.perf_counter() - t0) * 1e6)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
        if spin is not None:
            spins.append(cp.cuda.get_elapsed_time(before, start))
    return statistics.median(times), statistics.median(hosts), statistics.median(spins) if spins else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--block", choices=("own", "nvmath"), default="own",
                        help="blasdx's kernels on blasdx's own block (as the anchor harness) or on nvmath's")
    parser.add_argument("--lock", default="", help="a file: time under its lock (processes side by side)")
    parser.add_argument("--k-loop", type=int, default=0, metavar="DEPTH",
                        help="time a batched K loop of this depth (a multiple of each case's k) in place of the "
                             "repeated multiply, Numba against C++ (no nvmath)")
    args = parser.parse_args()
    if args.repeats % 4:
        parser.error("--repeats must be a multiple of 4 (four multiplies a loop iteration)")
    import cupy as cp
    from numba import cuda

    import blasdx.numba

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    grid, reps = sms * 16, args.repeats
    sm = 900 if cuda.get_current_device().compute_capability >= (9, 0) else 800
    spinner = compile_kernel(SPIN, "spin")
    spin = partial(spinner, (1,), (1,), (np.int64(SPIN_CYCLES),))
    rows, table = [], []
    for name, size, pa, pc in CASES:
        if args.only and not re.search(args.only, name):
            continue
        desc = Size(*size) + Precision(pa, pa, pc) + Arrangement(*ARRANGEMENT) + SM(sm) + Block()
        made = None
        depth = args.k_loop
        if depth and depth % size[2]:
            parser.error(f"--k-loop {depth} is not a multiple of {name}'s k")
        try:  # nvmath's kernel first: with --block nvmath its suggested block is blasdx's too
            made = None if pa in ("bfloat16", "float8_e4m3") or depth else nvmath_kernel(cuda, size, pa, pc)
        except Exception as exc:  # noqa: BLE001 - a peer that fails on a case leaves its column empty
            print(f"# nvmath {name}: {type(exc).__name__}: {str(exc)[:200]}")
        if made is not None and args.block == "nvmath":
            try:
                desc = desc + BlockDim(*(int(d) for d in tuple(made[1])))
            except DescriptorError as exc:
                print(f"# {name}: blasdx keeps its own block ({exc})")
        m, n, k = size
        # the repeated multiply, or (--k-loop) each block's item through the K loop; `count` the kernels' int
        count, items = (depth, grid) if depth else (reps, 1)
        flops = 2.0 * m * n * (depth if depth else k * reps) * grid
        rng = np.random.default_rng(0)
        a = cp.asarray(rng.integers(0, 2, items * m * (depth or k)).astype(NUMPY[pa]))
        b = cp.asarray(rng.integers(0, 2, items * (depth or k) * n).astype(NUMPY[pa]))
        c_numba, c_cpp, c_nvmath = (cp.zeros(items * m * n, NUMPY[pc]) for _ in range(3))
        g = blasdx.numba.device_api(desc)
        kernel = numba_k_loop_kernel(cuda, g) if depth else numba_kernel(cuda, g)
        # the count as an int32, as the twin's int: a 32-bit loop counter in both (a Python int is an int64 to Numba)
        configured = kernel[grid, g.block_dim, 0, g.shared_memory_size_ab]
        devices = [cuda.as_cuda_array(x) for x in (a, b, c_numba)]  # Numba's own arrays: no import a launch
        twin = compile_kernel(desc.device_source("gemm") + (K_LOOP_CPP if depth else CPP), "k_loop" if depth else "repeat")
        cpp_launch = partial(twin, (grid,), g.block_dim, (a, b, c_cpp, np.int32(count)),
                             shared_mem=g.shared_memory_size_ab)
        if made is not None:
            nv_kernel, block_dim, shared = made
            nv_configured = nv_kernel[grid, block_dim, 0, shared]
            nv_args = [cuda.as_cuda_array(x) for x in (a, b, c_nvmath)]
        configured(*devices, np.int32(0))  # compiled before the lock
        if made is not None:
            nv_configured(*nv_args, np.int32(0))
        cp.cuda.runtime.deviceSynchronize()
        with open(args.lock, "w") if args.lock else contextlib.nullcontext() as held:
            if held is not None:
                fcntl.flock(held, fcntl.LOCK_EX)
            # ROUNDS rounds alternating the kernels, medians of the rounds' medians: a round's clocks (the card's
            # power limit under FP8) apply to all kernels alike
            launches = {"numba": partial(configured, *devices, np.int32(count)), "cupy": cpp_launch}
            if made is not None:
                launches["nvmath"] = partial(nv_configured, *nv_args, np.int32(reps))
            measured: dict[str, list[tuple[float, float, float]]] = {kernel_name: [] for kernel_name in launches}
            for _ in range(ROUNDS):
                for kernel_name, launch in launches.items():
                    measured[kernel_name].append(timed(cp, launch, spin))
            numba_ms, numba_us, spin_ms = (statistics.median(x[j] for x in measured["numba"]) for j in range(3))
            cpp_ms, cpp_us = (statistics.median(x[j] for x in measured["cupy"]) for j in range(2))
            if made is not None:
                nv_ms = statistics.median(x[0] for x in measured["nvmath"])
            numba_idle_ms, numba_cai_us, _ = timed(cp, partial(configured, a, b, c_numba, np.int32(count)))
            cpp_idle_ms = timed(cp, cpp_launch)[0]
        same = bool(cp.array_equal(c_numba.view(cp.uint8), c_cpp.view(cp.uint8)))
        numba_tf, cpp_tf = flops / numba_ms / 1e9, flops / cpp_ms / 1e9
        rows += [(f"{name} numba", numba_tf, "TFLOP/s"), (f"{name} cupy", cpp_tf, "TFLOP/s")]
        nvmath_tf = float("nan")
        if made is not None:
            nvmath_tf = flops / nv_ms / 1e9
            rows.append((f"{name} nvmath", nvmath_tf, "TFLOP/s"))
        if max(numba_us, cpp_us) > 1e3 * spin_ms:
            print(f"# {name}: a launch's host time ({max(numba_us, cpp_us):.0f} us) outlasted the spin ({spin_ms:.2f} "
                  f"ms): raise SPIN_CYCLES")
        nv_threads = f"/{int(np.prod(tuple(made[1])))}" if made is not None else ""
        table.append((f"{name} t{g.threads}{nv_threads}", numba_tf, cpp_tf, nvmath_tf, numba_tf / cpp_tf, same,
                      next(iter(kernel.overloads.values())).regs_per_thread, twin.registers,
                      cpp_idle_ms / numba_idle_ms, numba_us, numba_cai_us, cpp_us))
    report(rows)
    what = f"a K loop {args.k_loop} deep, an item a block" if args.k_loop else f"block GEMM alone, {reps} multiplies"
    print(f"\n{what}, grid {grid}, SM {sm} descriptors (TFLOP/s; - where nvmath has none); "
          f"the kernel's time (behind a spin); 'with launch': numba/cupy as events around a launch on an idle GPU time it, "
          f"CuPy arrays to Numba; host us a launch: Numba with its own arrays, with CuPy's, the twin")
    print(f"{'case, threads blasdx/nvmath':30s} {'numba':>8s} {'cupy':>8s} {'nvmath':>8s} {'numba/cupy':>10s} "
          f"{'numba/nvmath':>12s}  same C  regs numba/cupy  {'with launch':>11s}  host us numba/numba(CuPy arrays)/cupy")
    for name, nb, cc, nv, ratio, same, rn, rc, idle, nus, caius, cus in table:
        nv_text = f"{nv:8.1f} {nb / nv:12.2f}" if nv == nv else f"{'-':>8s} {'-':>12s}"
        print(f"{name:30s} {nb:8.1f} {cc:8.1f} {nv_text} {ratio:10.3f}  {'yes' if same else 'NO':6s}  "
              f"{f'{rn}/{rc}':>16s}  {idle:11.3f}  {nus:.0f}/{caius:.0f}/{cus:.0f}")


if __name__ == "__main__":
    main()
