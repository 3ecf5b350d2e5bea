// blasdx block GEMM blasdx_gemm_sm800_f64f64f64_16x16x16_ccr_t32_e5cce5b9
//   16x16x16, mma_f64, 32 threads
// C = c_store(alpha * op(a_load(A)) * op(b_load(B)) + beta * c_load(C)) with A, B and C in
// shared memory, computed by the first 32 threads of the block (in thread-rank
// order); every thread of the block must call execute(). beta == 0 ignores C; alpha == 0
// ignores A and B. The hooks are optional functors: a_load/b_load take and return the
// element in blasdx::compute<a_t/b_t>::type (float for 16- and 8-bit floats), c_load and
// c_store a scalar_t; c_store may instead take (row, col, x).
namespace blasdx_block_gemm {

using a_t = double;
using b_t = double;
using c_t = double;
using scalar_t = double;  // alpha and beta
using acc_t = double;  // accumulator

constexpr int m = 16, n = 16, k = 16;
constexpr int lda = 20, ldb = 20, ldc = 20;  // in shared memory
constexpr int global_lda = 16, global_ldb = 16, global_ldc = 16;
constexpr unsigned block_dim_x = 32, block_dim_y = 1, block_dim_z = 1;
constexpr int threads = 32;
// Bytes of shared memory for A, B and C placed one after another at these offsets.
constexpr unsigned shared_memory_size = 7680;
constexpr unsigned a_offset = 0, b_offset = 2560, c_offset = 5120;
constexpr unsigned a_size = 320, b_size = 320, c_size = 320;  // elements

// Element (r, c) of each matrix (col_major A, col_major B, row_major C).
__device__ __forceinline__ int a_index(int r, int c) { return r + c * lda; }
__device__ __forceinline__ int b_index(int r, int c) { return r + c * ldb; }
__device__ __forceinline__ int c_index(int r, int c) { return r * ldc + c; }

// Block-cooperative copies between global and shared memory, in the same layout.
// Loads may be asynchronous: call copy_wait() (which also synchronizes the block) before
// using the data. store_c writes only the m x n elements, never leading-dimension padding.
__device__ __forceinline__ void load_a(const a_t* global, a_t* shared) {
  blasdx::copy_runs<16, 128, 128, 160, 8, threads, true>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void load_b(const b_t* global, b_t* shared) {
  blasdx::copy_runs<16, 128, 128, 160, 8, threads, true>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void load_c(const c_t* global, c_t* shared) {
  blasdx::copy_runs<16, 128, 128, 160, 8, threads, true>(global, shared, blasdx::thread_rank());
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global) {
  blasdx::copy_runs<16, 128, 160, 128, 8, threads, false>(shared, global, blasdx::thread_rank());
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

// Tensor cores: mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64
// Each warp computes 16x16 tiles of C (2x2 instructions of 8x8x4),
// loading A and B fragments from shared memory (zero outside m, n, k) and reusing them.
constexpr int warps = 1;
constexpr int im = 8, in_ = 8, ik = 4;
constexpr int pm = 2, pn = 2;
constexpr int tile_m = 16, tile_n = 16, tiles_n = 1, tiles = 1;
using frag_t = double;
using mma_acc_t = double;

// m8n8k4 double fragments: one double of A and of B per lane, two accumulator values.
constexpr int a_regs = 1, b_regs = 1, c_vals = 2;
template <class Op>
__device__ __forceinline__ void load_fragment_a(frag_t (&f)[a_regs], const a_t* sa, int r0, int k0, int g, int t,
                                                const Op& op) {
  const int r = r0 + g, c = k0 + t;
  f[0] = (r < m && c < k) ? blasdx::apply_load(op, sa[a_index(r, c)]) : 0.0;
}
template <class Op>
__device__ __forceinline__ void load_fragment_b(frag_t (&f)[b_regs], const b_t* sb, int k0, int n0, int g, int t,
                                                const Op& op) {
  const int r = k0 + t, c = n0 + g;
  f[0] = (r < k && c < n) ? blasdx::apply_load(op, sb[b_index(r, c)]) : 0.0;
}
__device__ __forceinline__ int c_row(int i, int g, int t) { return g; }
__device__ __forceinline__ int c_col(int i, int g, int t) { return 2 * t + i; }

__device__ __forceinline__ void mma(mma_acc_t (&d)[c_vals], const frag_t (&a)[a_regs], const frag_t (&b)[b_regs]) {
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 { %0, %1 }, { %2 }, { %3 }, { %0, %1 };"
               : "+d"(d[0]), "+d"(d[1]) : "d"(a[0]), "d"(b[0]));
}

// A warp owns a tile; lane l holds accumulator values in rows g = l / 4 (+ 8) and columns
// 2 * (l % 4) (+ 1) of each instruction tile (c_row, c_col).
constexpr int workers = warps * 32, tile_threads = 32;
using tile_accumulator = mma_acc_t[pm][pn][c_vals];
struct tile_position { int m0, n0; };
__device__ __forceinline__ tile_position tile_origin(int tile) { return {(tile / tiles_n) * tile_m, (tile % tiles_n) * tile_n}; }

// The warp tiles cover m x n exactly: no element of a tile needs a bounds check.
constexpr bool whole_tiles = m % tile_m == 0 && n % tile_n == 0;
// Fragment values v and v + 1 are neighbouring columns of one row: in row-major C with an even ldc they are read and written as one (C aligned to two elements, checked at run time).
constexpr bool c_pairs = ldc % 2 == 0;
using c_pair_t = blasdx::pair<c_t>;

struct worker {
  int lane, g, t;
  bool c_pairs_ok;  // C in shared memory takes pairs of outputs as one access
  __device__ __forceinline__ worker(int rank, const a_t*, const b_t*, const c_t* c)
      : lane(rank & 31), g((rank & 31) >> 2), t(rank & 3),
        c_pairs_ok(c_pairs && (reinterpret_cast<unsigned long long>(c) & (2 * sizeof(c_t) - 1)) == 0) {}
};

// The outputs C(r, col) and C(r, col + 1) from their products and their old values.
template <class Acc, class CLoad, class CStore>
__device__ __forceinline__ c_pair_t updated_pair(int r, int col, const Acc& acc0, const Acc& acc1, const c_pair_t& old,
                                                 const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                                 const CStore& c_store) {
  return c_pair_t{epilogue(r, col, acc0, old.x, alpha, beta, c_load, c_store),
                  epilogue(r, col + 1, acc1, old.y, alpha, beta, c_load, c_store)};
}

// Two neighbouring outputs C(r, col) and C(r, col + 1) in shared memory, with one load and one store.
template <class Acc, class CLoad, class CStore>
__device__ __forceinline__ void update_c_pair(c_t* sc, int r, int col, const Acc& acc0, const Acc& acc1,
                                              const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                              const CStore& c_store) {
  c_pair_t* p = reinterpret_cast<c_pair_t*>(sc + c_index(r, col));
  c_pair_t old{};
  if (!blasdx::is_zero(beta)) old = *p;
  *p = updated_pair(r, col, acc0, acc1, old, alpha, beta, c_load, c_store);
}

// Calls f(i, j, v, r, col) for each pair of this lane's accumulator values acc[i][j][v] and
// acc[i][j][v + 1] of the warp tile at `at`: the outputs C(r, col) and C(r, col + 1).
template <class F>
__device__ __forceinline__ void for_each_pair(const worker& w, tile_position at, const F& f) {
#pragma unroll
  for (int i = 0; i < pm; ++i)
#pragma unroll
    for (int j = 0; j < pn; ++j)
#pragma unroll
      for (int v = 0; v < c_vals; v += 2) f(i, j, v, at.m0 + i * im + c_row(v, w.g, w.t), at.n0 + j * in_ + c_col(v, w.g, w.t));
}

// C = epilogue(acc, C) on a warp's tile in shared memory, values (v, v + 1) as one pair
// where Pairs (both inside n), else one by one.
template <bool Pairs, class CLoad, class CStore>
__device__ __forceinline__ void store_tile_in(const tile_accumulator& acc, const worker& w, tile_position at, c_t* sc,
                                              const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                              const CStore& c_store) {
  for_each_pair(w, at, [&](int i, int j, int v, int r, int col) {
    if (Pairs && (whole_tiles || (r < m && col + 1 < n))) {
      update_c_pair(sc, r, col, acc[i][j][v], acc[i][j][v + 1], alpha, beta, c_load, c_store);
    } else if (whole_tiles || r < m) {
      if (whole_tiles || col < n) update_c(sc, r, col, acc[i][j][v], alpha, beta, c_load, c_store);
      if (whole_tiles || col + 1 < n) update_c(sc, r, col + 1, acc[i][j][v + 1], alpha, beta, c_load, c_store);
    }
  });
}

template <class CLoad, class CStore>
__device__ __forceinline__ void store_tile(const tile_accumulator& acc, const worker& w, tile_position at, c_t* sc,
                                           const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                           const CStore& c_store) {
  if (w.c_pairs_ok) store_tile_in<true>(acc, w, at, sc, alpha, beta, c_load, c_store);
  else store_tile_in<false>(acc, w, at, sc, alpha, beta, c_load, c_store);
}

// acc = the warp tile at `at` of op(a_load(A)) * op(b_load(B)), for lane w.lane.
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_tile(tile_accumulator& acc, const worker& w, tile_position at, const a_t* sa,
                                              const b_t* sb, const ALoad& a_load, const BLoad& b_load) {
  const int m0 = at.m0, n0 = at.n0, lane = w.lane, g = w.g, t = w.t;

#pragma unroll
  for (int i = 0; i < pm; ++i)
#pragma unroll
    for (int j = 0; j < pn; ++j)
#pragma unroll
      for (int v = 0; v < c_vals; ++v) acc[i][j][v] = 0;
  for (int k0 = 0; k0 < k; k0 += ik) {
    frag_t fa[pm][a_regs];
    frag_t fb[pn][b_regs];
#pragma unroll
    for (int i = 0; i < pm; ++i) load_fragment_a(fa[i], sa, m0 + i * im, k0, g, t, a_load);
#pragma unroll
    for (int j = 0; j < pn; ++j) load_fragment_b(fb[j], sb, k0, n0 + j * in_, g, t, b_load);

#pragma unroll
    for (int i = 0; i < pm; ++i)
#pragma unroll
      for (int j = 0; j < pn; ++j) mma(acc[i][j], fa[i], fb[j]);
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

}  // namespace blasdx_block_gemm

// The batched kernel behind execute(): item i of the batch is A + i*stride_a, ...
// Blocks loop over items (grid-stride), so any batch size runs with 64-bit offsets.
// Parameters: blasdx.plan.kernel.KERNEL_PARAMETERS (and BIAS_PARAMETERS), in that order.
extern "C" __global__ void __launch_bounds__(32) blasdx_gemm_sm800_f64f64f64_16x16x16_ccr_t32_e5cce5b9(
const void* a, const void* b, void* c, blasdx_block_gemm::scalar_t alpha, blasdx_block_gemm::scalar_t beta, long long batch, long long stride_a, long long stride_b, long long stride_c) {
  using namespace blasdx_block_gemm;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool read_c = !blasdx::is_zero(beta);
  // Start the copies of one item into one stage of shared memory.
  auto start_loads = [&](long long item, int stage) {
    unsigned char* base = smem + stage * shared_memory_size;
    load_a(static_cast<const a_t*>(a) + item * stride_a, reinterpret_cast<a_t*>(base + a_offset));
    load_b(static_cast<const b_t*>(b) + item * stride_b, reinterpret_cast<b_t*>(base + b_offset));
    if (read_c) load_c(static_cast<const c_t*>(c) + item * stride_c, reinterpret_cast<c_t*>(base + c_offset));
    blasdx::copy_commit();
  };
  int stage = 0;
  if (blockIdx.x < batch) start_loads(blockIdx.x, 0);
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    blasdx::copy_wait_prior<0>();
    unsigned char* base = smem + stage * shared_memory_size;
    a_t* sa = reinterpret_cast<a_t*>(base + a_offset);
    b_t* sb = reinterpret_cast<b_t*>(base + b_offset);
    c_t* sc = reinterpret_cast<c_t*>(base + c_offset);
    execute(alpha, sa, sb, beta, sc);
    store_c(sc, static_cast<c_t*>(c) + item * stride_c);
    __syncthreads();  // every thread is done with this stage before it is loaded again
    if (item + gridDim.x < batch) start_loads(item + gridDim.x, 0);
  }
}
