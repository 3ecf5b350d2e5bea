// blasdx block GEMM blasdx_gemm_sm800_f32f32f32_64x128x32_rrr_t256_b73f8f36
//   64x128x32, fma, 256 threads
// C = c_store(alpha * op(a_load(A)) * op(b_load(B)) + beta * c_load(C)) with A, B and C in
// shared memory, computed by the first 256 threads of the block (in thread-rank
// order); every thread of the block must call execute(). beta == 0 ignores C; alpha == 0
// ignores A and B. The hooks are optional functors: a_load/b_load take and return the
// element in blasdx::compute<a_t/b_t>::type (float for 16- and 8-bit floats), c_load and
// c_store a scalar_t; c_store may instead take (row, col, x).
namespace blasdx_block_gemm {

using a_t = float;
using b_t = float;
using c_t = float;
using scalar_t = float;  // alpha and beta
using acc_t = float;  // accumulator

constexpr int m = 64, n = 128, k = 32;
constexpr int lda = 36, ldb = 132, ldc = 128;  // in shared memory
constexpr int global_lda = 32, global_ldb = 128, global_ldc = 128;
constexpr unsigned block_dim_x = 256, block_dim_y = 1, block_dim_z = 1;
constexpr int threads = 256;
// The block's first `threads` threads run the GEMM: gemm_rank() is the thread's rank,
// gemm_sync() the block's barrier.
__device__ __forceinline__ int gemm_rank() { return blasdx::thread_rank(); }
__device__ __forceinline__ void gemm_sync() { __syncthreads(); }
// Bytes of shared memory for A, B and C placed one after another at these offsets; for A and B
// alone (a kernel whose C stays in the register accumulators), shared_memory_size_ab.
constexpr unsigned shared_memory_size = 26112;
constexpr unsigned a_offset = 0, b_offset = 9216, c_offset = 26112;
constexpr unsigned shared_memory_size_ab = c_offset;
constexpr unsigned a_size = 2304, b_size = 4224, c_size = 8192;  // elements

// Element (r, c) of each matrix (row_major A, row_major B, row_major C).
__device__ __forceinline__ int a_index(int r, int c) { return r * lda + c; }
__device__ __forceinline__ int b_index(int r, int c) { return r * ldb + c; }
// C(r, c) of a row_major C with leading dimension ld: an int in shared memory, a long long
// where C may be a view of a large matrix in global memory.
template <class Index>
__device__ __forceinline__ Index c_element(int r, int c, Index ld) { return r * ld + c; }
__device__ __forceinline__ int c_index(int r, int c) { return c_element(r, c, ldc); }

// Block-cooperative copies between global memory (global_ld*, or a leading dimension given
// at run time in elements)
// and shared memory (ld*); with rows and cols, of an edge tile that only partly lies in a
// larger matrix. Loads may be asynchronous: call copy_wait() (which also
// synchronizes the block) before using the data. store_c writes only the m x n elements,
// never leading-dimension padding. With a run-time leading dimension, the copies move
// the widest vectors that it and the pointer allow, else one element at a time.
__device__ __forceinline__ void load_a(const a_t* global, a_t* shared) {
  blasdx::copy_runs<64, 128, 16, threads, true>(global, 128, shared, 144, gemm_rank());
}
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared) {
  const long long ld_bytes = ld / 1 * 4;
  if (ld_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(global) % 16 == 0)
    blasdx::copy_runs<64, 128, 16, threads, true>(global, ld_bytes, shared, 144, gemm_rank());
  else
    blasdx::copy_runs<64, 128, 4, threads, true>(global, ld_bytes, shared, 144, gemm_rank());
}
// An edge tile: the first rows x cols of the 64x32 A lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 4;
  const int outer_valid = rows, inner_valid = cols * 4;
  if (ld_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(global) % 16 == 0)
    blasdx::copy_runs_partial<64, 128, 16, threads, true>(global, ld_bytes, shared, 144, gemm_rank(), outer_valid, inner_valid);
  else
    blasdx::copy_runs_partial<64, 128, 4, threads, true>(global, ld_bytes, shared, 144, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_b(const b_t* global, b_t* shared) {
  blasdx::copy_runs<32, 512, 16, threads, true>(global, 512, shared, 528, gemm_rank());
}
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared) {
  const long long ld_bytes = ld / 1 * 4;
  if (ld_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(global) % 16 == 0)
    blasdx::copy_runs<32, 512, 16, threads, true>(global, ld_bytes, shared, 528, gemm_rank());
  else
    blasdx::copy_runs<32, 512, 4, threads, true>(global, ld_bytes, shared, 528, gemm_rank());
}
// An edge tile: the first rows x cols of the 32x128 B lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 4;
  const int outer_valid = rows, inner_valid = cols * 4;
  if (ld_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(global) % 16 == 0)
    blasdx::copy_runs_partial<32, 512, 16, threads, true>(global, ld_bytes, shared, 528, gemm_rank(), outer_valid, inner_valid);
  else
    blasdx::copy_runs_partial<32, 512, 4, threads, true>(global, ld_bytes, shared, 528, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_c(const c_t* global, c_t* shared) {
  blasdx::copy_runs<64, 512, 4, threads, true>(global, 512, shared, 512, gemm_rank());
}
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared) {
  const long long ld_bytes = ld / 1 * 4;
  blasdx::copy_runs<64, 512, 4, threads, true>(global, ld_bytes, shared, 512, gemm_rank());
}
// An edge tile: the first rows x cols of the 64x128 C lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 4;
  const int outer_valid = rows, inner_valid = cols * 4;
  blasdx::copy_runs_partial<64, 512, 4, threads, true>(global, ld_bytes, shared, 512, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global) {
  blasdx::copy_runs<64, 512, 4, threads, false>(shared, 512, global, 512, gemm_rank());
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global, long long ld) {
  const long long ld_bytes = ld * 4;
  if (ld_bytes % 4 == 0 && reinterpret_cast<unsigned long long>(global) % 4 == 0)
    blasdx::copy_runs<64, 512, 4, threads, false>(shared, 512, global, ld_bytes, gemm_rank());
  else
    blasdx::copy_runs<64, 512, 4, threads, false>(shared, 512, global, ld_bytes, gemm_rank());
}
// Whether load_a and load_b move 16-byte pieces cut from aligned loads even where the leading dimension
// and pointer allow vectors of 16 and 16 bytes (their copies then check the bounds of each piece anyway).
constexpr bool a_shifted_copies = false, b_shifted_copies = false;
__device__ __forceinline__ void copy_wait() { blasdx::copy_wait<false>(); }

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

// One output element of C (leading dimension ld), read only where beta != 0.
template <class Index, class Acc, class CLoad, class CStore>
__device__ __forceinline__ void update_c(c_t* c, Index ld, int r, int col, const Acc& acc, const scalar_t& alpha,
                                         const scalar_t& beta, const CLoad& c_load, const CStore& c_store) {
  c_t* p = c + c_element(r, col, ld);
  c_t old{};
  if (!blasdx::is_zero(beta)) old = *p;
  *p = epilogue(r, col, acc, old, alpha, beta, c_load, c_store);
}

// FMA: each thread accumulates 8x4 outputs in acc_t.
constexpr int tile_m = 8, tile_n = 4, tiles_m = 8, tiles_n = 32;
// A micro-tile's rows come in groups of group_m that lie m / (tile_m / group_m) apart, and
// its columns in groups of group_n n / (tile_n / group_n) apart: a warp's loads of one
// group then fall in different banks, which whole 8x4 blocks would not.
constexpr int group_m = 4, group_n = 4;
__device__ __forceinline__ int tile_row(int m0, int i) { return m0 + i % group_m + (i / group_m) * (m / (tile_m / group_m)); }
__device__ __forceinline__ int tile_col(int n0, int j) { return n0 + j % group_n + (j / group_n) * (n / (tile_n / group_n)); }
constexpr int tiles = 256;

template <class Op> __device__ __forceinline__ acc_t load_a(const a_t* sa, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sa[a_index(r, c)])));
}
template <class Op> __device__ __forceinline__ acc_t load_b(const b_t* sb, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sb[b_index(r, c)])));
}

// float micro-tiles whole inside m and n take four steps of k at a time with 16-byte
// shared-memory loads along whichever of the tile's dimensions (or k) is contiguous:
// 8 loads per 64 FMA instead of 32. Needs lda, ldb multiples of 4 (checked here) and
// 16-byte aligned A and B (checked at run time); the rest takes the scalar loop below.
constexpr int kv = 4;
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
template <class Op>
__device__ __forceinline__ void load_a4(float (&av)[kv][tile_m], const a_t* sa, int m0, int kk, const Op& op) {
#pragma unroll
  for (int i = 0; i < tile_m; ++i) {  // row i of the tile, k .. k + 3
    const float4 v = load4(sa + a_index(tile_row(m0, i), kk));
    av[0][i] = v.x; av[1][i] = v.y; av[2][i] = v.z; av[3][i] = v.w;
  }
#pragma unroll
  for (int q = 0; q < kv; ++q)
#pragma unroll
    for (int i = 0; i < tile_m; ++i) av[q][i] = blasdx::apply_load(op, av[q][i]);
}
template <class Op>
__device__ __forceinline__ void load_b4(float (&bv)[kv][tile_n], const b_t* sb, int kk, int n0, const Op& op) {
#pragma unroll
  for (int q = 0; q < kv; ++q)  // row kk + q, columns j .. j + 3 of the tile
#pragma unroll
    for (int j = 0; j < tile_n; j += 4) {
      const float4 v = load4(sb + b_index(kk + q, tile_col(n0, j)));
      bv[q][j] = v.x; bv[q][j + 1] = v.y; bv[q][j + 2] = v.z; bv[q][j + 3] = v.w;
    }
#pragma unroll
  for (int q = 0; q < kv; ++q)
#pragma unroll
    for (int j = 0; j < tile_n; ++j) bv[q][j] = blasdx::apply_load(op, bv[q][j]);
}
// acc += the four steps of k in av and bv.
__device__ __forceinline__ void fma_step(float (&acc)[tile_m][tile_n], const float (&av)[kv][tile_m], const float (&bv)[kv][tile_n]) {
#pragma unroll
  for (int q = 0; q < kv; ++q)
#pragma unroll
    for (int i = 0; i < tile_m; ++i)
#pragma unroll
      for (int j = 0; j < tile_n; ++j) acc[i][j] = blasdx::mul_add(av[q][i], bv[q][j], acc[i][j]);
}

constexpr int workers = threads, tile_threads = 1;
using acc_value_t = acc_t;
using tile_accumulator = acc_t[tile_m][tile_n];
constexpr int tile_values = tile_m * tile_n;  // per thread, in the order (i, j)
struct tile_position { int m0, n0; };
struct worker {
  __device__ __forceinline__ explicit worker(int) {}
};

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

// Whether every element of the micro-tile at (m0, n0) lies inside m x n: always where the
// micro-tiles cover m x n exactly (known at compile time: the scalar loop can go).
constexpr bool micro_tiles_cover = tiles_m * tile_m == m && tiles_n * tile_n == n;
__device__ __forceinline__ bool whole_tile(tile_position at) {
  return micro_tiles_cover || (tile_row(at.m0, tile_m - 1) < m && tile_col(at.n0, tile_n - 1) < n);
}

__device__ __forceinline__ void zero_tile(tile_accumulator& acc) {
#pragma unroll
  for (int i = 0; i < tile_m; ++i)
#pragma unroll
    for (int j = 0; j < tile_n; ++j) acc[i][j] = blasdx::zero<acc_t>();
}
// Value e of a thread's micro-tile: acc[i][j] with e = i * tile_n + j, and its place in C.
template <class Tile> __device__ __forceinline__ auto& value_of(Tile& acc, int e) { return acc[e / tile_n][e % tile_n]; }
__device__ __forceinline__ int value_row(const worker&, tile_position at, int e) { return tile_row(at.m0, e / tile_n); }
__device__ __forceinline__ int value_col(const worker&, tile_position at, int e) { return tile_col(at.n0, e % tile_n); }

// acc += the micro-tile at `at` of op(a_load(A)) * op(b_load(B)).
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_tile(tile_accumulator& acc, const worker&, tile_position at, const a_t* sa,
                                              const b_t* sb, const ALoad& a_load, const BLoad& b_load) {
  const int m0 = at.m0, n0 = at.n0;
  int kk = 0;
  // 16-byte loads need A and B 16-byte aligned.
  const bool vector_ok = blasdx::shared_aligned<16>(sa) && blasdx::shared_aligned<16>(sb);
  if (vector_ok && whole_tile(at)) {
    // Software pipelined (a Grid() tile with a thread's registers to spare): the next four steps'
    // values load while this step's FMAs run; the loop unrolls, so the buffer indices are constants.
    float av[2][kv][tile_m], bv[2][kv][tile_n];
    load_a4(av[0], sa, m0, 0, a_load);
    load_b4(bv[0], sb, 0, n0, b_load);
#pragma unroll
    for (kk = 0; kk + kv <= k; kk += kv) {
      const int now = (kk / kv) & 1;
      if (kk + 2 * kv <= k) {
        load_a4(av[now ^ 1], sa, m0, kk + kv, a_load);
        load_b4(bv[now ^ 1], sb, kk + kv, n0, b_load);
      }
      fma_step(acc, av[now], bv[now]);
    }
  }
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

// C = epilogue(acc, C) on the micro-tile, C at leading dimension ld.
template <class Index, class CLoad, class CStore>
__device__ __forceinline__ void store_tile(const tile_accumulator& acc, const worker&, tile_position at, c_t* c,
                                           Index ld, const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                           const CStore& c_store) {
  for_each_element(at, [&](int i, int j, int r, int col) { update_c(c, ld, r, col, acc[i][j], alpha, beta, c_load, c_store); });
}

// --- Entry points, the same for every path ------------------------------------------------
// The path above defines: workers (the threads that take part) and tile_threads (threads
// per tile: a warp or one thread); tile_accumulator (a tile's products in acc_value_t,
// tile_values of them per thread: value_of, value_row, value_col, zero_tile); worker (a
// thread's place in its tile); tile_origin; multiply_tile (acc += products); store_tile
// (C = epilogue(acc, C) at any leading dimension); with C in registers in the batched kernel,
// tile_c, load_tile_c and store_tile_c.
constexpr int tile_step = workers / tile_threads;  // tiles taken at once: a thread's next tile is this many on
__device__ __forceinline__ int first_tile(int rank) { return rank / tile_threads; }

template <class ALoad = blasdx::identity, class BLoad = blasdx::identity, class CLoad = blasdx::identity,
          class CStore = blasdx::identity>
__device__ __forceinline__ void execute(const scalar_t& alpha, const a_t* sa, const b_t* sb, const scalar_t& beta,
                                        c_t* sc, const ALoad& a_load = {}, const BLoad& b_load = {},
                                        const CLoad& c_load = {}, const CStore& c_store = {}) {
  const int rank = gemm_rank();
  if (rank < workers) {
    const worker w(rank);
    for (int tile = first_tile(rank); tile < tiles; tile += tile_step) {
      const tile_position at = tile_origin(tile);
      tile_accumulator acc;
      zero_tile(acc);
      multiply_tile(acc, w, at, sa, sb, a_load, b_load);
      store_tile(acc, w, at, sc, ldc, alpha, beta, c_load, c_store);  // ldc: C in shared memory
    }
  }
  gemm_sync();
}

// --- Accumulators in registers: the device API ---------------------------------------------
//   accumulator acc = make_accumulator();  // zero, per thread
//   multiply(sa, sb, acc);                 // acc += op(A) * op(B) from shared memory; again over a K loop
//   multiply_async(sa, sb, acc); ... multiply_wait<N>(acc);  // the same, overlapped (wgmma; elsewhere synchronous)
//   multiply_chained(other_acc, sa, sb, acc);  // A = another GEMM's accumulator: in registers where
//                                              // a_from_registers<other::accumulator>, else via sa (syncs the block)
//   acc.size, acc[i], acc.row(i), acc.col(i), acc.in_bounds(i)
//   load(c, ldc, acc);                     // acc = c_load(C)
//   store(acc, c, ldc, alpha, beta);       // C = c_store(alpha * acc + beta * c_load(C)); beta == 0 never reads C
//   store_at(acc, c, index, alpha, beta);  // the same with C(r, col) at c[index(r, col)], e.g. other::a_index
//   store_partial(acc, c, ldc, rows, cols, alpha, beta);  // the same inside rows x cols only (an edge tile)
//   load_a(a, lda, sa, rows, cols);        // (and load_b) an edge tile: rows x cols read, the rest zero
// C may be in shared or global memory (row_major, leading dimension ldc). Who owns what:
// thread t of the first 256 takes micro-tiles t, t + 256, ... of 8x4 outputs
// (256 in all). A thread holds `passes` tiles; acc.row(i) and acc.col(i) say where value i
// goes in C. Values outside m x n, and all values of threads past the first 256 threads, are not
// part of C: acc.in_bounds(i) is false for them, load leaves them zero, store skips them.
// multiply, load and store do not synchronize: call gemm_sync() before other threads read
// what store wrote to shared memory, or before A and B in shared memory are overwritten.
constexpr int passes = (tiles + tile_step - 1) / tile_step;  // tiles per thread

struct accumulator {
  using value_type = acc_value_t;  // acc_t
  static constexpr int size = passes * tile_values;
  tile_accumulator tile[passes];
  int rank;  // the thread's rank among the GEMM's threads (gemm_rank())
  // Where the values lie, for a GEMM that takes them as its A (multiply_chained, a_from_registers).
  static constexpr int rows = m, cols = n, tile_rows = tile_m, tile_cols = tile_n, tile_count = tiles, tile_columns = tiles_n,
                       tile_stride = tile_step;
  static constexpr bool warpgroup_tiles = false;

  __device__ __forceinline__ value_type& operator[](int i) { return value_of(tile[i / tile_values], i % tile_values); }
  __device__ __forceinline__ const value_type& operator[](int i) const { return value_of(tile[i / tile_values], i % tile_values); }
  __device__ __forceinline__ int tile_of(int i) const { return first_tile(rank) + i / tile_values * tile_step; }
  __device__ __forceinline__ int row(int i) const { return value_row(worker(rank), tile_origin(tile_of(i)), i % tile_values); }
  __device__ __forceinline__ int col(int i) const { return value_col(worker(rank), tile_origin(tile_of(i)), i % tile_values); }
  __device__ __forceinline__ bool in_bounds(int i) const {
    return rank < workers && tile_of(i) < tiles && row(i) < m && col(i) < n;
  }
};

// Whether multiply() branches around the threads past `workers`: on FMA tiles, where wgmma may
// run (all four warps of a warpgroup issue it), and where some of block_dim's threads do not
// work. Elsewhere (mma.sync) a thread launched past block_dim multiplies a worker's tiles into its
// own values, which are not part of C: with no branch in multiply, ptxas can hoist loads of A and
// B out of a caller's loop that repeats them unchanged.
constexpr bool multiply_skips_idle_threads = true;

__device__ __forceinline__ accumulator make_accumulator() {
  accumulator acc;
  acc.rank = gemm_rank();
#pragma unroll
  for (int p = 0; p < passes; ++p) zero_tile(acc.tile[p]);
  return acc;
}

// Whether pass p of a thread has a tile (every thread's last pass may not, where tile_step
// does not divide tiles).
__device__ __forceinline__ bool has_tile(int rank, int p) {
  return tiles % tile_step == 0 || first_tile(rank) + p * tile_step < tiles;
}
__device__ __forceinline__ bool has_tile(const accumulator& acc, int p) { return has_tile(acc.rank, p); }

// The rank whose tiles the thread multiplies: its own, or a worker's for a thread launched past
// block_dim where multiply does not skip those (multiply_skips_idle_threads).
__device__ __forceinline__ int multiplying_rank(const accumulator& acc) {
  return multiply_skips_idle_threads ? acc.rank : static_cast<int>(static_cast<unsigned>(acc.rank) % workers);
}

// acc += op(a_load(A)) * op(b_load(B)) with the path's instructions, synchronously.
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_each_tile(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load,
                                                   const BLoad& b_load) {
  const int rank = multiplying_rank(acc);
  const worker w(rank);
#pragma unroll
  for (int p = 0; p < passes; ++p)
    if (has_tile(rank, p)) multiply_tile(acc.tile[p], w, tile_origin(first_tile(rank) + p * tile_step), sa, sb, a_load, b_load);
}

// acc += op(a_load(A)) * op(b_load(B)), started: on this path the same as multiply().
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity>
__device__ __forceinline__ void multiply_async(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load = {},
                                               const BLoad& b_load = {}) {
  if (multiply_skips_idle_threads && acc.rank >= workers) return;
  multiply_each_tile(sa, sb, acc, a_load, b_load);
}

// Wait until at most Pending of this thread's latest multiply_async calls still run: the
// products of the others are in acc, and their A and B may be overwritten (after a barrier, for
// other threads' writes). Synchronizes nothing else; on this path there is nothing to wait for.
template <int Pending = 0>
__device__ __forceinline__ void multiply_wait(accumulator& acc) {
}

// acc += op(a_load(A)) * op(b_load(B)), A and B in shared memory (lda, ldb); returns with the
// products in acc.
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity>
__device__ __forceinline__ void multiply(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load = {},
                                         const BLoad& b_load = {}) {
  if (multiply_skips_idle_threads && acc.rank >= workers) return;
  multiply_each_tile(sa, sb, acc, a_load, b_load);
}

// acc += the products op(A) * op(B) of each 128 of k times scale(r, k0) for their row r of C (k0: where those
// 128 start in this GEMM's k): blockwise-scaled FP8 in a user's K loop, scale(r, k0) returning A's scale of
// row r times B's of the K block (a float). The products are a temporary accumulator's, added
// once: this GEMM's k is at most 128, one K block. Synchronous, as multiply().
template <class Scale>
__device__ __forceinline__ void multiply_scaled(const a_t* sa, const b_t* sb, accumulator& acc, const Scale& scale) {
  // (Conditions on Scale too, so that they are checked only where multiply_scaled is called.)
  static_assert(blasdx::is_same<acc_value_t, float>::value && sizeof(Scale) > 0,
                "blasdx: multiply_scaled scales float accumulators");
  static_assert((k <= 128 || false) && sizeof(Scale) > 0,
                "blasdx: multiply_scaled scales the products of each 128 of k: give this GEMM a k of at most "
                "128 (a K block a call), or FP8 wgmma's promotion (SM 900)");
  if (multiply_skips_idle_threads && acc.rank >= workers) return;
  if (k > 128) __trap();  // promoted wgmma whose wgmma did not run (A or B not 1024-byte aligned): no scale a K block
  accumulator products = acc;
#pragma unroll
  for (int p = 0; p < passes; ++p) zero_tile(products.tile[p]);
  multiply(sa, sb, products);
#pragma unroll
  for (int i = 0; i < accumulator::size; ++i)
    if (acc.in_bounds(i)) {
      float s;
      if constexpr (blasdx::scales_by_columns<Scale>::value) s = scale.a_of(acc.row(i)) * scale.b_of(acc.col(i));
      else s = scale(acc.row(i), 0);
      acc[i] = fmaf(products[i], s, acc[i]);
    }
}

// Whether multiply_chained takes A from the registers of `Source`, another GEMM's accumulator:
// where both GEMMs run on warpgroup tiles (SM 900), this one with 16-bit float A and that one with
// float accumulators, each warpgroup holds whole rows of that C, the same rows as of this A, and
// k is at least 128. (An H100, benchmarks/chained.py: registers 1.57-2.8x the shared-memory hop
// where k is 128, 0.89-0.95x where it is 32 or 64.)
template <class Source>
constexpr bool a_from_registers =
    false;  // no warpgroup tiles here

// acc += op(A) * op(B), A this GEMM's m x k given as `a`, the accumulator of another GEMM whose C
// has these rows and columns (converted to a_t), B in shared memory: a chain of GEMMs whose
// intermediate need not leave the registers. Where a_from_registers<Source>, it does not; elsewhere
// `a` is written to sa (this GEMM's A in shared memory, a_size elements) and the block synchronizes
// before multiply(sa, sb, acc): every thread of the block calls it, and sa is not being read then.
template <class Source>
__device__ __forceinline__ void multiply_chained(const Source& a, a_t* sa, const b_t* sb, accumulator& acc) {
  static_assert(Source::rows == m && Source::cols == k, "blasdx: multiply_chained needs the other GEMM's C to be this m x k A");
#pragma unroll
  for (int i = 0; i < Source::size; ++i)
    if (a.in_bounds(i)) sa[a_index(a.row(i), a.col(i))] = blasdx::convert<a_t>(a[i]);
  copy_wait();
  multiply(sa, sb, acc);
}

// acc = c_load(C) for the values inside m x n (zero for the rest).
template <class CLoad = blasdx::identity>
__device__ __forceinline__ void load(const c_t* c, long long ldc, accumulator& acc, const CLoad& c_load = {}) {
#pragma unroll
  for (int i = 0; i < accumulator::size; ++i)
    acc[i] = acc.in_bounds(i) ? blasdx::convert<acc_value_t>(c_load(blasdx::convert<scalar_t>(c[c_element(acc.row(i), acc.col(i), ldc)])))
                              : blasdx::zero<acc_value_t>();
}

// The same for an edge tile: only C(r, col) with r < rows and col < cols are read and written
// (a tile of a larger C whose edge cuts it). ReadAhead values of C are read before any of them is
// written: one round trip to memory a group rather than a value (each read otherwise waits for
// the write before it, which may alias it for all the compiler knows), for as many registers.
template <int ReadAhead = 1, class CLoad = blasdx::identity, class CStore = blasdx::identity>
__device__ __forceinline__ void store_partial(const accumulator& acc, c_t* c, long long ldc, int rows, int cols,
                                              const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load = {},
                                              const CStore& c_store = {}) {
  if constexpr (ReadAhead == 1) {  // the code as it was before ReadAhead, which ptxas allocates a little better
#pragma unroll
    for (int i = 0; i < accumulator::size; ++i)
      if (acc.in_bounds(i) && acc.row(i) < rows && acc.col(i) < cols)
        update_c(c, ldc, acc.row(i), acc.col(i), acc[i], alpha, beta, c_load, c_store);
  } else {
    const auto inside = [&](int i) { return i < accumulator::size && acc.in_bounds(i) && acc.row(i) < rows && acc.col(i) < cols; };
#pragma unroll
    for (int i0 = 0; i0 < accumulator::size; i0 += ReadAhead) {
      c_t old[ReadAhead] = {};
      if (!blasdx::is_zero(beta)) {
#pragma unroll
        for (int g = 0; g < ReadAhead; ++g)
          if (inside(i0 + g)) old[g] = c[c_element(acc.row(i0 + g), acc.col(i0 + g), ldc)];
      }
#pragma unroll
      for (int g = 0; g < ReadAhead; ++g)
        if (inside(i0 + g))
          c[c_element(acc.row(i0 + g), acc.col(i0 + g), ldc)] =
              epilogue(acc.row(i0 + g), acc.col(i0 + g), acc[i0 + g], old[g], alpha, beta, c_load, c_store);
    }
  }
}

// The same, with C(r, col) at c[index(r, col)] in any layout: another GEMM's A or B in
// shared memory, for instance (index = other::a_index), whose wgmma then reads it (the
// writes are made visible to it; call gemm_sync() before the other multiply).
template <class Index, class CLoad = blasdx::identity, class CStore = blasdx::identity>
__device__ __forceinline__ void store_at(const accumulator& acc, c_t* c, const Index& index, const scalar_t& alpha,
                                         const scalar_t& beta, const CLoad& c_load = {}, const CStore& c_store = {}) {
#pragma unroll
  for (int i = 0; i < accumulator::size; ++i) {
    if (!acc.in_bounds(i)) continue;
    c_t* p = c + index(acc.row(i), acc.col(i));
    c_t old{};
    if (!blasdx::is_zero(beta)) old = *p;
    *p = epilogue(acc.row(i), acc.col(i), acc[i], old, alpha, beta, c_load, c_store);
  }
  blasdx::fence_async_shared();
}

// C = c_store(alpha * acc + beta * c_load(C)) for the values inside m x n: the epilogue of
// execute(), with its paired accesses where C allows.
template <class CLoad = blasdx::identity, class CStore = blasdx::identity>
__device__ __forceinline__ void store(const accumulator& acc, c_t* c, long long ldc, const scalar_t& alpha,
                                      const scalar_t& beta, const CLoad& c_load = {}, const CStore& c_store = {}) {
  if (acc.rank >= workers) return;
  const worker w(acc.rank);
#pragma unroll
  for (int p = 0; p < passes; ++p)
    if (has_tile(acc, p))
      store_tile(acc.tile[p], w, tile_origin(first_tile(acc.rank) + p * tile_step), c, ldc, alpha, beta, c_load, c_store);
}

}  // namespace blasdx_block_gemm

// blasdx grid-level GEMM blasdx_grid_sm800_f32f32f32_1000x1000x1000_rrr_tile64x128x32_s4_t256_021800cd: 1000x1000x1000 in tiles of 64x128x32
// Added to namespace blasdx_block_gemm, whose block GEMM (above) is one tile: a block computes a tile of C
// with mainloop() into an accumulator, then writes it (store_block_tile), or does more with it first.
//   for (int t = blockIdx.x; t < block_tiles; t += gridDim.x) {         // any order of tiles
//     int row0, col0;  block_tile_origin(t, row0, col0);
//     accumulator acc = make_accumulator();
//     mainloop(a, b, row0, col0, smem, acc);                            // acc = A(row0.., :) * B(:, col0..)
//     store_block_tile(acc, c, row0, col0, alpha, beta);                // or acc.row(i) + row0, acc.col(i) + col0 ...
//   }
// smem: stages * stage_size bytes of dynamic shared memory, aligned to 16 bytes.
namespace blasdx_block_gemm {

constexpr int problem_m = 1000, problem_n = 1000, problem_k = 1000;
// The whole matrices' leading dimensions in global memory (row_major A, row_major B, row_major C).
constexpr long long problem_lda = 1000, problem_ldb = 1000, problem_ldc = 1000;
constexpr int stages = 4;  // K tiles in flight: while one is multiplied, the next stages - 1 are copied
constexpr unsigned stage_size = shared_memory_size;  // bytes of one stage (A and B of one K tile)
constexpr int block_tiles_m = 16, block_tiles_n = 8, block_tiles = block_tiles_m * block_tiles_n;
constexpr int k_tiles = 32;  // steps of each tile's K loop (the last one 8 deep)
constexpr int block_group_m = 8;  // tile rows per group of block_tile_origin's order

// Element (r, col) of the whole A, B and C.
__device__ __forceinline__ long long a_global(int r, int col) { return static_cast<long long>(r) * problem_lda + col; }
__device__ __forceinline__ long long b_global(int r, int col) { return static_cast<long long>(r) * problem_ldb + col; }
__device__ __forceinline__ long long c_global(int r, int col) { return static_cast<long long>(r) * problem_ldc + col; }

// Where tile t starts in C cut into tile_rows x block_tiles_n tiles of height x n. Tiles come in
// groups of block_group_m tile rows, each group column by column, so that the blocks running at
// once share rows of A and columns of B in L2.
__device__ __forceinline__ void grouped_tile_origin(int t, int tile_rows, int height, int& row0, int& col0) {
  const int group = t / (block_group_m * block_tiles_n), first = group * block_group_m;
  const int rows = tile_rows - first < block_group_m ? tile_rows - first : block_group_m;
  const int within = t - group * (block_group_m * block_tiles_n);
  row0 = (first + within % rows) * height;
  col0 = within / rows * n;
}

// The rows and columns of the tile at (row0, col0) inside the problem (fewer at its edges).
__device__ __forceinline__ int rows_inside(int row0) { return problem_m - row0 < m ? problem_m - row0 : m; }
__device__ __forceinline__ int cols_inside(int col0) { return problem_n - col0 < n ? problem_n - col0 : n; }

// Where tile t (0 <= t < block_tiles) starts in C, in grouped_tile_origin's order.
__device__ __forceinline__ void block_tile_origin(int t, int& row0, int& col0) {
  grouped_tile_origin(t, block_tiles_m, m, row0, col0);
}

// acc += op(a_load(A))(row0 .. row0 + m, K tiles kt_begin .. kt_end) * op(b_load(B))(the same K tiles, col0 .. col0 + n):
// the K loop of one tile (or of a part of its K tiles, for split-K), with A and B the whole matrices (of one
// batch item) and smem stages * stage_size bytes. Edges are read as zeros. All threads of the block call
// it; it returns with shared memory free again.
// `scales` (wgmma with its partial sums promoted, no load hooks): scales(kt)(r, k0) scales the partial sums of
// row r (of the tile) of K tile kt (blockwise-scaled FP8). `rows`: the tile's rows of A to read where they end
// before the problem's (a group's, Grouped()); -1: rows_inside(row0).
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity, class Scales = blasdx::unit_scales>
__device__ __forceinline__ void mainloop_range(const a_t* a, const b_t* b, int row0, int col0, int kt_begin, int kt_end,
                                               unsigned char* smem, accumulator& acc, const ALoad& a_load = {},
                                               const BLoad& b_load = {}, const Scales& scales = {}, int rows = -1) {
  if (rows < 0) rows = rows_inside(row0);
  const int cols = cols_inside(col0);
  const a_t* a_tile = a + a_global(row0, 0);
  const b_t* b_tile = b + b_global(0, col0);
  // Start the copies of K tile kt into its stage (the edges' partial copies zero the rest).
  auto start_copies = [&](int kt) {
    unsigned char* stage = smem + (kt - kt_begin) % stages * stage_size;
    const int k0 = kt * k, depth = problem_k - k0 < k ? problem_k - k0 : k;
    a_t* sa = reinterpret_cast<a_t*>(stage + a_offset);
    b_t* sb = reinterpret_cast<b_t*>(stage + b_offset);
    // Shifted copies check every piece's bounds anyway: one copy of their code for all tiles.
    if (rows == m && depth == k && !a_shifted_copies) load_a(a_tile + a_global(0, k0), problem_lda, sa);
    else load_a(a_tile + a_global(0, k0), problem_lda, sa, rows, depth);
    if (depth == k && cols == n && !b_shifted_copies) load_b(b_tile + b_global(k0, 0), problem_ldb, sb);
    else load_b(b_tile + b_global(k0, 0), problem_ldb, sb, depth, cols);
  };
  // The stages start on 16-byte boundaries, as the multiplies below assume: where smem does not,
  // the kernel stops here rather than fault at a misaligned vector load.
  static_assert(a_offset % 16 == 0 && b_offset % 16 == 0 && stage_size % 16 == 0, "stages keep 16-byte alignment");
  if (blasdx::shared_address(smem) % 16 != 0) __trap();
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_begin + stages - 1; ++kt) {
    if (kt < kt_end) start_copies(kt);
    blasdx::copy_commit();  // a group per K tile, empty or not: the wait below counts them
  }
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    // K tile kt has landed (the groups of the next stages - 2 may still run), and every thread is
    // done with K tile kt - 1, whose stage the copies of K tile kt + stages - 1 take below.
    blasdx::copy_wait_prior<stages - 2>();
    // Told that the stages are 16-byte aligned (tested above), the compiler drops the block GEMM's
    // run-time alignment tests and the element-wise loads behind them.
    const unsigned char* stage = smem + (kt - kt_begin) % stages * stage_size;
    const a_t* sa = static_cast<const a_t*>(__builtin_assume_aligned(stage + a_offset, 16));
    const b_t* sb = static_cast<const b_t*>(__builtin_assume_aligned(stage + b_offset, 16));
    // The copies of K tile kt + stages - 1 go after the multiply:
    // issued before it, they held every warp at the start of each K tile, all at once, while the
    // math pipe waited.
    if constexpr (blasdx::is_same<Scales, blasdx::unit_scales>::value) multiply(sa, sb, acc, a_load, b_load);
    else multiply_scaled(sa, sb, acc, scales(kt));  // no load hooks here (GridPlan.scales_refusal)
    if (kt + stages - 1 < kt_end) start_copies(kt + stages - 1);
    blasdx::copy_commit();
  }
  __syncthreads();  // the last multiply is done everywhere: the next mainloop may copy into any stage
}

// The whole K loop of the tile at (row0, col0).
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity>
__device__ __forceinline__ void mainloop(const a_t* a, const b_t* b, int row0, int col0, unsigned char* smem,
                                         accumulator& acc, const ALoad& a_load = {}, const BLoad& b_load = {}) {
  mainloop_range(a, b, row0, col0, 0, k_tiles, smem, acc, a_load, b_load);
}

// A value of another block's, read from L2 (past this SM's L1, which does not see other SMs' writes).
template <class T>
__device__ __forceinline__ T load_from_l2(const T* p) {
  static_assert(sizeof(T) % 4 == 0, "accumulator values are whole 32-bit words");
  T v;
#pragma unroll
  for (int w = 0; w < static_cast<int>(sizeof(T) / 4); ++w)
    reinterpret_cast<unsigned*>(&v)[w] = __ldcg(reinterpret_cast<const unsigned*>(p) + w);
  return v;
}



// C(row0 .., col0 ..) = c_store(alpha * acc + beta * c_load(C)) inside the problem (the edge tiles'
// outputs past m or n are not written); C is the whole matrix of one batch item. `rows`: the tile's rows
// to write where they end before the problem's (a group's, Grouped()); -1: rows_inside(row0).
template <class CLoad = blasdx::identity, class CStore = blasdx::identity>
__device__ __forceinline__ void store_block_tile(const accumulator& acc, c_t* c, int row0, int col0, const scalar_t& alpha,
                                           const scalar_t& beta, const CLoad& c_load = {}, const CStore& c_store = {},
                                           int rows = -1) {
  c_t* c_tile = c + c_global(row0, col0);
  if (rows < 0) rows = rows_inside(row0);
  const int cols = cols_inside(col0);
  // FMA tiles store element by element, whole or not: the edge tiles' code serves all (a second
  // copy of the epilogue for whole tiles cost a float32 kernel a third of its compile time).
  store_partial<1>(acc, c_tile, problem_ldc, rows, cols, alpha, beta, c_load, c_store);
}

}  // namespace blasdx_block_gemm

// The grid kernel behind execute() of a Grid() descriptor: a persistent grid whose blocks walk
// the (batch item, tile, split) triples, item i being A + i*stride_a, ...; each tile's K loop is
// blasdx_block_gemm::mainloop_range, its epilogue blasdx_block_gemm::store_block_tile with the hooks.
// splits is 1: this problem has tiles enough for the GPU (blasdx.plan.GridPlan.split_k).
// Parameters: blasdx.plan.kernel.KERNEL_PARAMETERS (BIAS_PARAMETERS, SCALE_PARAMETERS, GRID_PARAMETERS), in that order.
static_assert(sizeof(blasdx_block_gemm::acc_value_t) == 4 && blasdx_block_gemm::accumulator::size == 32,
              "split-K's workspace is sized for this accumulator (blasdx.plan.GridPlan.workspace_bytes)");
extern "C" __global__ void __launch_bounds__(256, 1) blasdx_grid_sm800_f32f32f32_1000x1000x1000_rrr_tile64x128x32_s4_t256_021800cd(
const void* a, const void* b, void* c, blasdx_block_gemm::scalar_t alpha, blasdx_block_gemm::scalar_t beta, long long batch, long long stride_a, long long stride_b, long long stride_c, long long splits, long long split_units, void* workspace) {
  using namespace blasdx_block_gemm;
  extern __shared__ __align__(16) unsigned char smem[];
  const long long tiles = batch * block_tiles;
  const int parts = static_cast<int>(splits);
  for (long long w = blockIdx.x; w < tiles * parts; w += gridDim.x) {  // (parts: 1, splits without split-K's code)
    const long long tile = w / parts, item = tile / block_tiles;
    const int split = static_cast<int>(w - tile * parts), tile_parts = parts;
    int row0, col0;
    block_tile_origin(static_cast<int>(tile - item * block_tiles), row0, col0);

    accumulator acc = make_accumulator();
    mainloop_range(static_cast<const a_t*>(a) + item * stride_a, static_cast<const b_t*>(b) + item * stride_b, row0,
                   col0, split * k_tiles / tile_parts, (split + 1) * k_tiles / tile_parts, smem, acc);
    store_block_tile(acc, static_cast<c_t*>(c) + item * stride_c, row0, col0, alpha, beta);
  }
}
