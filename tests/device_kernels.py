"""CUDA kernels on the device API that tests of several folders share: codegen/ compiles them with NVRTC
(no GPU) and gpu/ runs them. Each is appended to a descriptor's device_source("gemm"), or to two
descriptors' device_source("g1") and device_source("g2") where they chain."""

from __future__ import annotations

from blasdx import SM, Arrangement, Block, BlockDim, Precision, Size

# A K loop over `tiles` (m x k, k x n) pieces of A and B held one after another in big
# matrices, each read with a run-time leading dimension; every value of the accumulator is
# counted in `visits` once; then load/store in place. tests/gpu/test_gpu_accumulator.py runs them.
KERNELS = r"""
extern "C" __global__ void k_loop(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long lda, long long ldb,
                                  long long ldc, int tiles, long long a_step, long long b_step, int* visits,
                                  gemm::scalar_t alpha, gemm::scalar_t beta) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::accumulator acc = gemm::make_accumulator();
  for (int t = 0; t < tiles; ++t) {
    gemm::load_a(a + t * a_step, lda, sa);
    gemm::load_b(b + t * b_step, ldb, sb);
    gemm::copy_wait();
    gemm::multiply(sa, sb, acc);
    __syncthreads();
  }
  for (int i = 0; i < gemm::accumulator::size; ++i)
    if (acc.in_bounds(i)) atomicAdd(visits + acc.row(i) * gemm::n + acc.col(i), 1);
  gemm::store(acc, c, ldc, alpha, beta);
}

extern "C" __global__ void load_then_store(gemm::c_t* c, long long ldc, gemm::scalar_t alpha, gemm::scalar_t beta) {
  gemm::accumulator acc = gemm::make_accumulator();
  gemm::load(c, ldc, acc);
  gemm::store(acc, c, ldc, alpha, beta);
}
"""

# C (M x N) = alpha A (M x K) B (K x N) + beta C at any sizes, by one block walking the
# descriptor's tiles: edge tiles load partly (zeros past the matrix) and store partly. Element
# (r, c) of X is x[r * x_row + c * x_col] (the strides say the layout).
OVERLAPPED = r"""
// The K loop of KERNELS with multiply_async: step t multiplies while step t + 1's tiles load
// into the other of two stages (each c_offset bytes: A and B). ptxas keeps the wgmma in
// flight only as the device API says: threads past gemm::threads return first, and the loop
// is entered only where it runs.
extern "C" __global__ void k_loop_overlapped(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long lda,
                                             long long ldb, long long ldc, int tiles, long long a_step,
                                             long long b_step, int* visits, gemm::scalar_t alpha, gemm::scalar_t beta) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (blasdx::thread_rank() >= gemm::threads) return;
  auto stage_a = [&](int s) { return reinterpret_cast<gemm::a_t*>(smem + s * gemm::c_offset + gemm::a_offset); };
  auto stage_b = [&](int s) { return reinterpret_cast<gemm::b_t*>(smem + s * gemm::c_offset + gemm::b_offset); };
  gemm::accumulator acc = gemm::make_accumulator();
  if (tiles > 0) {
    gemm::load_a(a, lda, stage_a(0));
    gemm::load_b(b, ldb, stage_b(0));
    gemm::copy_wait();
    for (int t = 0; t < tiles; ++t) {
      gemm::multiply_async(stage_a(t & 1), stage_b(t & 1), acc);
      gemm::multiply_wait<1>(acc);  // step t - 1 is done: its stage takes step t + 1's tiles
      __syncthreads();
      if (t + 1 < tiles) {
        gemm::load_a(a + (t + 1) * a_step, lda, stage_a((t + 1) & 1));
        gemm::load_b(b + (t + 1) * b_step, ldb, stage_b((t + 1) & 1));
      }
      gemm::copy_wait();
    }
    gemm::multiply_wait<0>(acc);
  }
  for (int i = 0; i < gemm::accumulator::size; ++i)
    if (acc.in_bounds(i)) atomicAdd(visits + acc.row(i) * gemm::n + acc.col(i), 1);
  gemm::store(acc, c, ldc, alpha, beta);
}
"""

EDGES = r"""
extern "C" __global__ void edges(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int M, int N, int K,
                                 long long lda, long long ldb, long long ldc, long long a_row, long long a_col,
                                 long long b_row, long long b_col, long long c_row, long long c_col,
                                 gemm::scalar_t alpha, gemm::scalar_t beta) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  for (int m0 = 0; m0 < M; m0 += gemm::m)
    for (int n0 = 0; n0 < N; n0 += gemm::n) {
      const int rows = min(gemm::m, M - m0), cols = min(gemm::n, N - n0);
      gemm::accumulator acc = gemm::make_accumulator();
      for (int k0 = 0; k0 < K; k0 += gemm::k) {
        const int depth = min(gemm::k, K - k0);
        gemm::load_a(a + m0 * a_row + k0 * a_col, lda, sa, rows, depth);
        gemm::load_b(b + k0 * b_row + n0 * b_col, ldb, sb, depth, cols);
        gemm::copy_wait();
        gemm::multiply(sa, sb, acc);
        __syncthreads();
      }
      gemm::store_partial(acc, c + m0 * c_row + n0 * c_col, ldc, rows, cols, alpha, beta);
    }
}
"""

# (A B) E with the first GEMM's accumulator stored to shared memory as the second's A.
CHAINED = r"""
extern "C" __global__ void chained(const g1::a_t* a, const g1::b_t* b, const g2::b_t* e, g2::c_t* out) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<g1::a_t*>(smem + g1::a_offset);
  auto* sb = reinterpret_cast<g1::b_t*>(smem + g1::b_offset);
  auto* sab = reinterpret_cast<g2::a_t*>(smem + g1::c_offset);
  auto* se = reinterpret_cast<g2::b_t*>(smem + g1::shared_memory_size);
  g1::load_a(a, sa); g1::load_b(b, sb); g2::load_b(e, se); g1::copy_wait();
  g1::accumulator ab = g1::make_accumulator();
  g1::multiply(sa, sb, ab);
  g1::store_at(ab, sab, g2::a_index, 1.f, 0.f);  // in g2's layout of A (wgmma's swizzled one on SM 900)
  __syncthreads();
  g2::accumulator abe = g2::make_accumulator();
  g2::multiply(sab, se, abe);
  g2::store(abe, out, g2::global_ldc, 1.f, 0.f);
}
"""


def chained_descriptors():
    first = (Size(64, 64, 64) + Precision("float16") + Arrangement("row_major", "col_major", "row_major") + SM(900)
             + Block())
    return first, first.replace(Size(64, 32, 64))


# (A B) E by multiply_chained: g1's accumulator is g2's A, from registers where a_from_registers
# (checked against EXPECT), else through shared memory at sab. E starts b_shift bytes past g2's
# 1024-byte-aligned place (16: wgmma cannot read it, mma.sync multiplies the same registers).
MULTIPLY_CHAINED = r"""
static_assert(g2::a_from_registers<g1::accumulator> == EXPECT, "a_from_registers");
extern "C" __global__ void chain(const g1::a_t* a, const g1::b_t* b, const g2::b_t* e, g2::c_t* out, int b_shift) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* sa = reinterpret_cast<g1::a_t*>(smem + g1::a_offset);
  auto* sb = reinterpret_cast<g1::b_t*>(smem + g1::b_offset);
  unsigned char* second = smem + (g1::shared_memory_size_ab + 1023) / 1024 * 1024;
  auto* sab = reinterpret_cast<g2::a_t*>(second + g2::a_offset);
  auto* se = reinterpret_cast<g2::b_t*>(second + g2::b_offset + b_shift);
  g1::load_a(a, sa); g1::load_b(b, sb); g2::load_b(e, se); g1::copy_wait();
  g1::accumulator ab = g1::make_accumulator();
  g1::multiply(sa, sb, ab);
  g2::accumulator abe = g2::make_accumulator();
  g2::multiply_chained(ab, sab, se, abe);
  g2::store(abe, out, g2::global_ldc, 1.f, 0.f);
}
"""

# (SM, M, N1, N2, K, threads, g1's precisions, g2's, arrangements g1 g2, A from registers): g1 is
# M x N1 x K, g2 M x N2 x N1.
CHAIN_CASES = [
    (900, 64, 128, 64, 64, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", True),
    (900, 64, 128, 32, 64, 128, ("float16",) * 3, ("float16",) * 3, "rcr rcr", True),  # B read K-major
    (900, 128, 128, 32, 64, 256, ("bfloat16", "bfloat16", "float32"), ("bfloat16",) * 3, "crc rrr", True),
    (900, 128, 128, 64, 32, 128, ("float16", "float16", "float32"), ("float16",) * 3, "rrr rrr", True),  # 2 passes
    (900, 64, 256, 64, 32, 256, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rcr", True),
    (900, 64, 64, 64, 64, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", False),  # k 64
    (900, 64, 48, 64, 64, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", False),
    (900, 64, 512, 64, 32, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", False),
    (900, 64, 128, 320, 64, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", False),
    (900, 64, 128, 64, 64, 128, ("float16", "float16", "float32"), ("tfloat32", "tfloat32", "float32"), "rcr rcr", False),
    (900, 64, 32, 32, 32, 128, ("float32",) * 3, ("float32",) * 3, "rrr crc", False),  # FMA
    (800, 64, 64, 64, 64, 128, ("float16", "float16", "float32"), ("float16", "float16", "float32"), "rcr rrr", False),
    (800, 32, 32, 32, 32, 64, ("float64",) * 3, ("float64",) * 3, "rcr ccc", False),
]


def chain_descriptors(case):
    sm, m, n1, n2, k, threads, p1, p2, arrangements, _ = case
    arr1, arr2 = ([{"r": "row_major", "c": "col_major"}[x] for x in a] for a in arrangements.split())
    first = Size(m, n1, k) + Precision(*p1) + Arrangement(*arr1) + SM(sm) + Block() + BlockDim(threads)
    return first, Size(m, n2, n1) + Precision(*p2) + Arrangement(*arr2) + SM(sm) + Block() + BlockDim(threads)


def chain_source(case) -> str:
    first, second = chain_descriptors(case)
    return (first.device_source("g1") + second.device_source("g2")
            + MULTIPLY_CHAINED.replace("EXPECT", "true" if case[-1] else "false"))


def chain_id(case) -> str:
    sm, m, n1, n2, k, threads, p1, p2, arrangements, registers = case
    return f"sm{sm}-{m}x{n1}x{k}-{n2}-t{threads}-{p1[0]}-{p2[0]}-{arrangements.replace(' ', '-')}-{'regs' if registers else 'smem'}"


REPEATED_MULTIPLY = r"""
extern "C" __global__ void repeated(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, int repeats) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  auto* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::copy_wait();
  auto acc = gemm::make_accumulator();
  for (int r = 0; r < repeats; ++r) gemm::multiply(sa, sb, acc);
  gemm::store(acc, c, gemm::ldc, gemm::scalar_t(1), gemm::scalar_t(0));
}
"""

DEVICE_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(gemm::threads) hamming(
    const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c) {
  extern __shared__ __align__(16) unsigned char smem[];
  gemm::a_t* sa = reinterpret_cast<gemm::a_t*>(smem + gemm::a_offset);
  gemm::b_t* sb = reinterpret_cast<gemm::b_t*>(smem + gemm::b_offset);
  gemm::c_t* sc = reinterpret_cast<gemm::c_t*>(smem + gemm::c_offset);
  gemm::load_a(a, sa);
  gemm::load_b(b, sb);
  gemm::copy_wait();
  // similarity in [-k, k]: k - 2 * hamming, written by the c_store hook
  gemm::execute(1, sa, sb, 0, sc, blasdx::identity{}, blasdx::identity{}, blasdx::identity{},
                [](int x) { return gemm::k - 2 * x; });
  gemm::store_c(sc, c);
}
"""

# Warp(): each warp of the block runs its own K loop, of its own length (1 + warp % 3 steps: a block-wide
# barrier would hang), on its own tiles (warp_tiles). Item w (= block * warps + warp) multiplies the pieces
# w * max_steps + t of A and B (a_step, b_step elements apart) and stores C_w (c_step apart) with alpha, beta.
WARP_KERNELS = r"""
extern "C" __global__ void warp_k_loops(const gemm::a_t* a, const gemm::b_t* b, gemm::c_t* c, long long a_step,
                                        long long b_step, long long c_step, int max_steps, gemm::scalar_t alpha,
                                        gemm::scalar_t beta) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = gemm::warp_index();
  const long long item = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + warp;
  const gemm::shared_tiles own = gemm::warp_tiles(smem, warp);
  gemm::accumulator acc = gemm::make_accumulator();
  const int steps = 1 + warp % 3;
  for (int t = 0; t < steps; ++t) {
    gemm::load_a(a + (item * max_steps + t) * a_step, own.a);
    gemm::load_b(b + (item * max_steps + t) * b_step, own.b);
    gemm::copy_wait();  // this warp's copies, for this warp
    gemm::multiply(own.a, own.b, acc);
    gemm::gemm_sync();  // the warp is done with its tiles before it loads the next
  }
  gemm::store(acc, c + item * c_step, gemm::global_ldc, alpha, beta);
}
"""
