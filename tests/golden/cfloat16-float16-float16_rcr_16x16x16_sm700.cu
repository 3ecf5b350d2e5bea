// blasdx block GEMM blasdx_gemm_sm700_cf16f16f16_16x16x16_rcr_t32_191ebd7d
//   16x16x16, fma, 32 threads
// C = c_store(alpha * op(a_load(A)) * op(b_load(B)) + beta * c_load(C)) with A, B and C in
// shared memory, computed by the first 32 threads of the block (in thread-rank
// order); every thread of the block must call execute(). beta == 0 ignores C; alpha == 0
// ignores A and B. The hooks are optional functors: a_load/b_load take and return the
// element in blasdx::compute<a_t/b_t>::type (float for 16- and 8-bit floats), c_load and
// c_store a scalar_t; c_store may instead take (row, col, x).
namespace blasdx_block_gemm {

using a_t = blasdx::complex<__half>;
using b_t = blasdx::complex<__half>;
using c_t = blasdx::complex<__half>;
using scalar_t = blasdx::complex<float>;  // alpha and beta
using acc_t = blasdx::complex<float>;  // accumulator

constexpr int m = 16, n = 16, k = 16;
constexpr int lda = 20, ldb = 20, ldc = 16;  // in shared memory
constexpr int global_lda = 16, global_ldb = 16, global_ldc = 16;
constexpr unsigned block_dim_x = 32, block_dim_y = 1, block_dim_z = 1;
constexpr int threads = 32;
// Bytes of shared memory for A, B and C placed one after another at these offsets.
constexpr unsigned shared_memory_size = 2560;
constexpr unsigned a_offset = 0, b_offset = 1280, c_offset = 2560;
constexpr unsigned a_size = 320, b_size = 320, c_size = 256;  // elements

// Element (r, c) of each matrix (row_major A, col_major B, row_major C).
__device__ __forceinline__ int a_index(int r, int c) { return r * lda + c; }
__device__ __forceinline__ int b_index(int r, int c) { return r + c * ldb; }
__device__ __forceinline__ int c_index(int r, int c) { return r * ldc + c; }
// C(r, col) in global memory, for execute_global_c in the batched kernel.
__device__ __forceinline__ long long global_c_index(int r, int col) {
  return static_cast<long long>(r) * global_ldc + col;
}

// Block-cooperative copies between global and shared memory, in the same layout.
// Loads may be asynchronous: call copy_wait() (which also synchronizes the block) before
// using the data. store_c writes only the m x n elements, never leading-dimension padding.
__device__ __forceinline__ void load_a(const a_t* global, a_t* shared) {
  blasdx::copy_runs<16, 64, 64, 80, 4, threads, false>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void load_b(const b_t* global, b_t* shared) {
  blasdx::copy_runs<16, 64, 64, 80, 4, threads, false>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void load_c(const c_t* global, c_t* shared) {
  blasdx::copy_runs<16, 64, 64, 64, 4, threads, false>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global) {
  blasdx::copy_runs<16, 64, 64, 64, 4, threads, false>(shared, global, blasdx::thread_rank());
}
__device__ __forceinline__ void copy_wait() { blasdx::copy_wait(); }

// The epilogue, written once for every path: the value of C(r, col) from its product acc
// and its old value: c_store(alpha * acc + beta * c_load(old)). alpha == 0 ignores acc;
// beta == 0 ignores old (callers read it only where beta != 0).
template <class Acc, class CLoad, class CStore>
__device__ __forceinline__ c_t epilogue(int r, int col, const Acc& acc, const c_t& old, const scalar_t& alpha,
                                        const scalar_t& beta, const CLoad& c_load, const CStore& c_store) {
  scalar_t v = blasdx::is_zero(alpha) ? blasdx::zero<scalar_t>() : alpha * blasdx::convert<scalar_t>(acc);
  if (!blasdx::is_zero(beta)) v = v + beta * c_load(blasdx::convert<scalar_t>(old));
  return blasdx::convert<c_t>(blasdx::apply_store(c_store, r, col, v));
}

// One output element of C in shared memory.
template <class Acc, class CLoad, class CStore>
__device__ __forceinline__ void update_c(c_t* sc, int r, int col, const Acc& acc, const scalar_t& alpha,
                                         const scalar_t& beta, const CLoad& c_load, const CStore& c_store) {
  c_t* p = sc + c_index(r, col);
  c_t old{};
  if (!blasdx::is_zero(beta)) old = *p;
  *p = epilogue(r, col, acc, old, alpha, beta, c_load, c_store);
}

// FMA: each thread accumulates 2x2 outputs in acc_t.
constexpr int tile_m = 2, tile_n = 2, tiles_m = 8, tiles_n = 8;
constexpr int group_m = 2, group_n = 2;
__device__ __forceinline__ int tile_row(int m0, int i) { return m0 + i % group_m + (i / group_m) * (m / (tile_m / group_m)); }
__device__ __forceinline__ int tile_col(int n0, int j) { return n0 + j % group_n + (j / group_n) * (n / (tile_n / group_n)); }
constexpr int tiles = 64;

template <class Op> __device__ __forceinline__ acc_t load_a(const a_t* sa, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sa[a_index(r, c)])));
}
template <class Op> __device__ __forceinline__ acc_t load_b(const b_t* sb, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sb[b_index(r, c)])));
}


constexpr int workers = threads, tile_threads = 1;
using tile_accumulator = acc_t[tile_m][tile_n];
struct tile_position { int m0, n0; };

// The origin (m0, n0) of micro-tile number `tile`: its first row and column.
__device__ __forceinline__ tile_position tile_origin(int tile) {
  int m0, n0;
  // Threads t and t^1 take the same rows, t and t^2 the same columns: shared memory
  // returns a load at twice the rate when such pairs read the same address, and each
  // of A's and B's loads is read by pairs. Groups of four then go along n.
  const int quad = tile >> 2;
  n0 = (2 * (quad % (tiles_n / 2)) + (tile & 1)) * group_n;
  m0 = (2 * (quad / (tiles_n / 2)) + ((tile >> 1) & 1)) * group_m;
  return {m0, n0};
}

// Whether every element of the micro-tile at (m0, n0) lies inside m x n.
__device__ __forceinline__ bool whole_tile(tile_position at) {
  return tile_row(at.m0, tile_m - 1) < m && tile_col(at.n0, tile_n - 1) < n;
}

struct worker {
  bool vector_ok;  // A and B 16-byte aligned for the float loop's 16-byte loads
  __device__ __forceinline__ worker(int, const a_t* sa, const b_t* sb, const c_t*)
      : vector_ok(false) {}
};

// acc = the micro-tile at `at` of op(a_load(A)) * op(b_load(B)).
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_tile(tile_accumulator& acc, const worker& w, tile_position at, const a_t* sa,
                                              const b_t* sb, const ALoad& a_load, const BLoad& b_load) {
  const int m0 = at.m0, n0 = at.n0;
#pragma unroll
  for (int i = 0; i < tile_m; ++i)
#pragma unroll
    for (int j = 0; j < tile_n; ++j) acc[i][j] = blasdx::zero<acc_t>();
  int kk = 0;
  for (; kk < k; ++kk) {
    acc_t av[tile_m], bv[tile_n];
#pragma unroll
    for (int i = 0; i < tile_m; ++i) av[i] = (tile_row(m0, i) < m) ? load_a(sa, tile_row(m0, i), kk, a_load) : blasdx::zero<acc_t>();
#pragma unroll
    for (int j = 0; j < tile_n; ++j) bv[j] = (tile_col(n0, j) < n) ? load_b(sb, kk, tile_col(n0, j), b_load) : blasdx::zero<acc_t>();
#pragma unroll
    for (int i = 0; i < tile_m; ++i)
#pragma unroll
      for (int j = 0; j < tile_n; ++j) acc[i][j] = blasdx::mul_add(av[i], bv[j], acc[i][j]);
  }
}

// Calls f(i, j, r, col) for each element acc[i][j] of the micro-tile at `at` inside m x n:
// the output C(r, col).
template <class F>
__device__ __forceinline__ void for_each_element(tile_position at, const F& f) {
#pragma unroll
  for (int i = 0; i < tile_m; ++i)
#pragma unroll
    for (int j = 0; j < tile_n; ++j)
      if (tile_row(at.m0, i) < m && tile_col(at.n0, j) < n) f(i, j, tile_row(at.m0, i), tile_col(at.n0, j));
}

// C = epilogue(acc, C) on the micro-tile in shared memory.
template <class CLoad, class CStore>
__device__ __forceinline__ void store_tile(const tile_accumulator& acc, const worker&, tile_position at, c_t* sc,
                                           const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                           const CStore& c_store) {
  for_each_element(at, [&](int i, int j, int r, int col) { update_c(sc, r, col, acc[i][j], alpha, beta, c_load, c_store); });
}

// C in global memory, 16 bytes at a time along C's rows where the micro-tile is
// whole (not here: C is not float with 16-byte aligned runs), else element by element.
constexpr bool c_vector = false;
// A 16-byte group of C runs along C's contiguous dimension: (i, j + q) or (i + q, j), q < 4.
constexpr int c_di = 0, c_dj = 1;
using tile_c = c_t[tile_m][tile_n];

// Calls f(i, j, p) for each 16-byte group of a whole micro-tile: cv[i + q * c_di][j + q * c_dj]
// for q < 4 live at p[q] in global memory.
template <class T, class F>
__device__ __forceinline__ void for_each_vector(T* gc, tile_position at, const F& f) {
#pragma unroll
  for (int i = 0; i < tile_m; i += 1 + 3 * c_di)
#pragma unroll
    for (int j = 0; j < tile_n; j += 1 + 3 * c_dj) f(i, j, gc + global_c_index(tile_row(at.m0, i), tile_col(at.n0, j)));
}

__device__ __forceinline__ void load_tile_c(tile_c& cv, const worker&, tile_position at, const c_t* gc) {
  if (c_vector && whole_tile(at)) {
  } else {
#pragma unroll
    for (int i = 0; i < tile_m; ++i)
#pragma unroll
      for (int j = 0; j < tile_n; ++j) cv[i][j] = blasdx::zero<c_t>();
    for_each_element(at, [&](int i, int j, int r, int col) { cv[i][j] = gc[global_c_index(r, col)]; });
  }
}

template <class CLoad, class CStore>
__device__ __forceinline__ void store_tile_c(const tile_accumulator& acc, tile_c& cv, const worker&, tile_position at,
                                             c_t* gc, const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                             const CStore& c_store) {
#pragma unroll
  for (int i = 0; i < tile_m; ++i)
#pragma unroll
    for (int j = 0; j < tile_n; ++j)
      cv[i][j] = epilogue(tile_row(at.m0, i), tile_col(at.n0, j), acc[i][j], cv[i][j], alpha, beta, c_load, c_store);
  if (c_vector && whole_tile(at)) {
  } else {
    for_each_element(at, [&](int i, int j, int r, int col) { gc[global_c_index(r, col)] = cv[i][j]; });
  }
}

// --- Entry points, the same for every path ------------------------------------------------
// The path above defines: workers (the threads that take part) and tile_threads (threads
// per tile: a warp or one thread); tile_accumulator and tile_c (a tile's products and its
// C values in registers); worker (what a thread works out once per call); tile_origin;
// multiply_tile; store_tile (C in shared memory); load_tile_c and store_tile_c (C in
// global memory).

template <class ALoad = blasdx::identity, class BLoad = blasdx::identity, class CLoad = blasdx::identity,
          class CStore = blasdx::identity>
__device__ __forceinline__ void execute(const scalar_t& alpha, const a_t* sa, const b_t* sb, const scalar_t& beta,
                                        c_t* sc, const ALoad& a_load = {}, const BLoad& b_load = {},
                                        const CLoad& c_load = {}, const CStore& c_store = {}) {
  const int rank = blasdx::thread_rank();
  if (rank < workers) {
    const worker w(rank, sa, sb, sc);
    for (int tile = rank / tile_threads; tile < tiles; tile += workers / tile_threads) {
      const tile_position at = tile_origin(tile);
      tile_accumulator acc;
      multiply_tile(acc, w, at, sa, sb, a_load, b_load);
      store_tile(acc, w, at, sc, alpha, beta, c_load, c_store);
    }
  }
  __syncthreads();
}

// For the batched kernel: the same GEMM with C in global memory (leading dimension
// global_ldc). Each thread reads its part of C into registers before its products (the
// loads overlap them) and writes the results straight back. No barrier at the end: the
// caller synchronizes.
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity, class CLoad = blasdx::identity,
          class CStore = blasdx::identity>
__device__ __forceinline__ void execute_global_c(const scalar_t& alpha, const a_t* sa, const b_t* sb, const scalar_t& beta,
                                                 c_t* gc, const ALoad& a_load = {}, const BLoad& b_load = {},
                                                 const CLoad& c_load = {}, const CStore& c_store = {}) {
  const int rank = blasdx::thread_rank();
  if (rank >= workers) return;
  const worker w(rank, sa, sb, gc);
  const bool read_c = !blasdx::is_zero(beta);
  for (int tile = rank / tile_threads; tile < tiles; tile += workers / tile_threads) {
    const tile_position at = tile_origin(tile);
    tile_c cv;
    if (read_c) load_tile_c(cv, w, at, gc);
    tile_accumulator acc;
    multiply_tile(acc, w, at, sa, sb, a_load, b_load);
    store_tile_c(acc, cv, w, at, gc, alpha, beta, c_load, c_store);
  }
}

}  // namespace blasdx_block_gemm

// The batched kernel behind execute(): item i of the batch is A + i*stride_a, ...
// Blocks loop over items (grid-stride), so any batch size runs with 64-bit offsets.
// Parameters: blasdx.plan.kernel.KERNEL_PARAMETERS (and BIAS_PARAMETERS), in that order.
extern "C" __global__ void __launch_bounds__(32) blasdx_gemm_sm700_cf16f16f16_16x16x16_rcr_t32_191ebd7d(
const void* a, const void* b, void* c, blasdx_block_gemm::scalar_t alpha, blasdx_block_gemm::scalar_t beta, long long batch, long long stride_a, long long stride_b, long long stride_c) {
  using namespace blasdx_block_gemm;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool read_c = !blasdx::is_zero(beta);
  // Start the copies of one item into one stage of shared memory.
  auto start_loads = [&](long long item, int stage) {
    unsigned char* base = smem + stage * shared_memory_size;
    load_a(static_cast<const a_t*>(a) + item * stride_a, reinterpret_cast<a_t*>(base + a_offset));
    load_b(static_cast<const b_t*>(b) + item * stride_b, reinterpret_cast<b_t*>(base + b_offset));
    blasdx::copy_commit();
  };
  int stage = 0;
  if (blockIdx.x < batch) start_loads(blockIdx.x, 0);
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    blasdx::copy_wait_prior<0>();
    unsigned char* base = smem + stage * shared_memory_size;
    a_t* sa = reinterpret_cast<a_t*>(base + a_offset);
    b_t* sb = reinterpret_cast<b_t*>(base + b_offset);
    c_t* sc = static_cast<c_t*>(c) + item * stride_c;  // C stays in global memory (execute_global_c)
    execute_global_c(alpha, sa, sb, beta, sc);
    __syncthreads();  // every thread is done with this stage before it is loaded again
    if (item + gridDim.x < batch) start_loads(item + gridDim.x, 0);
  }
}
