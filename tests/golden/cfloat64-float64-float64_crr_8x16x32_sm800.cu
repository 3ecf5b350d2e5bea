// blasdx block GEMM blasdx_gemm_sm800_cf64f64f64_8x16x32_crr_t32_6576a167
//   8x16x32, fma, 32 threads
// C = c_store(alpha * op(a_load(A)) * op(b_load(B)) + beta * c_load(C)) with A, B and C in
// shared memory, computed by the first 32 threads of the block (in thread-rank
// order); every thread of the block must call execute(). beta == 0 ignores C; alpha == 0
// ignores A and B. The hooks are optional functors: a_load/b_load take and return the
// element in blasdx::compute<a_t/b_t>::type (float for 16- and 8-bit floats), c_load and
// c_store a scalar_t; c_store may instead take (row, col, x).
namespace blasdx_block_gemm {

using a_t = blasdx::complex<double>;
using b_t = blasdx::complex<double>;
using c_t = blasdx::complex<double>;
using scalar_t = blasdx::complex<double>;  // alpha and beta
using acc_t = blasdx::complex<double>;  // accumulator

constexpr int m = 8, n = 16, k = 32;
constexpr int lda = 9, ldb = 17, ldc = 17;  // in shared memory
constexpr int global_lda = 8, global_ldb = 16, global_ldc = 16;
constexpr unsigned block_dim_x = 32, block_dim_y = 1, block_dim_z = 1;
constexpr int threads = 32;
// The block's first `threads` threads run the GEMM: gemm_rank() is the thread's rank,
// gemm_sync() the block's barrier.
__device__ __forceinline__ int gemm_rank() { return blasdx::thread_rank(); }
__device__ __forceinline__ void gemm_sync() { __syncthreads(); }
// Bytes of shared memory for A, B and C placed one after another at these offsets; for A and B
// alone (a kernel whose C stays in the register accumulators), shared_memory_size_ab.
constexpr unsigned shared_memory_size = 15488;
constexpr unsigned a_offset = 0, b_offset = 4608, c_offset = 13312;
constexpr unsigned shared_memory_size_ab = c_offset;
constexpr unsigned a_size = 288, b_size = 544, c_size = 136;  // elements

// Element (r, c) of each matrix (col_major A, row_major B, row_major C).
__device__ __forceinline__ int a_index(int r, int c) { return r + c * lda; }
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
  blasdx::copy_runs<32, 128, 16, threads, true>(global, 128, shared, 144, gemm_rank());
}
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared) {
  const long long ld_bytes = ld / 1 * 16;
  blasdx::copy_runs<32, 128, 16, threads, true>(global, ld_bytes, shared, 144, gemm_rank());
}
// An edge tile: the first rows x cols of the 8x32 A lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 16;
  const int outer_valid = cols, inner_valid = rows * 16;
  blasdx::copy_runs_partial<32, 128, 16, threads, true>(global, ld_bytes, shared, 144, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_b(const b_t* global, b_t* shared) {
  blasdx::copy_runs<32, 256, 16, threads, true>(global, 256, shared, 272, gemm_rank());
}
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared) {
  const long long ld_bytes = ld / 1 * 16;
  blasdx::copy_runs<32, 256, 16, threads, true>(global, ld_bytes, shared, 272, gemm_rank());
}
// An edge tile: the first rows x cols of the 32x16 B lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 16;
  const int outer_valid = rows, inner_valid = cols * 16;
  blasdx::copy_runs_partial<32, 256, 16, threads, true>(global, ld_bytes, shared, 272, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_c(const c_t* global, c_t* shared) {
  blasdx::copy_runs<8, 256, 16, threads, true>(global, 256, shared, 272, gemm_rank());
}
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared) {
  const long long ld_bytes = ld / 1 * 16;
  blasdx::copy_runs<8, 256, 16, threads, true>(global, ld_bytes, shared, 272, gemm_rank());
}
// An edge tile: the first rows x cols of the 8x16 C lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 16;
  const int outer_valid = rows, inner_valid = cols * 16;
  blasdx::copy_runs_partial<8, 256, 16, threads, true>(global, ld_bytes, shared, 272, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global) {
  blasdx::copy_runs<8, 256, 16, threads, false>(shared, 272, global, 256, gemm_rank());
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global, long long ld) {
  const long long ld_bytes = ld * 16;
  if (ld_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(global) % 16 == 0)
    blasdx::copy_runs<8, 256, 16, threads, false>(shared, 272, global, ld_bytes, gemm_rank());
  else
    blasdx::copy_runs<8, 256, 16, threads, false>(shared, 272, global, ld_bytes, gemm_rank());
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

// FMA: each thread accumulates 2x2 outputs in acc_t.
constexpr int tile_m = 2, tile_n = 2, tiles_m = 4, tiles_n = 8;
constexpr int group_m = 2, group_n = 2;
__device__ __forceinline__ int tile_row(int m0, int i) { return m0 + i % group_m + (i / group_m) * (m / (tile_m / group_m)); }
__device__ __forceinline__ int tile_col(int n0, int j) { return n0 + j % group_n + (j / group_n) * (n / (tile_n / group_n)); }
constexpr int tiles = 32;

template <class Op> __device__ __forceinline__ acc_t load_a(const a_t* sa, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sa[a_index(r, c)])));
}
template <class Op> __device__ __forceinline__ acc_t load_b(const b_t* sb, int r, int c, const Op& op) {
  return (blasdx::convert<acc_t>(blasdx::apply_load(op, sb[b_index(r, c)])));
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
  // of A's and B's loads is read by pairs. Groups of four then go along m.
  const int quad = tile >> 2;
  m0 = (2 * (quad % (tiles_m / 2)) + ((tile >> 1) & 1)) * group_m;
  n0 = (2 * (quad / (tiles_m / 2)) + (tile & 1)) * group_n;
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
// thread t of the first 32 takes micro-tiles t, t + 32, ... of 2x2 outputs
// (32 in all). A thread holds `passes` tiles; acc.row(i) and acc.col(i) say where value i
// goes in C. Values outside m x n, and all values of threads past the first 32 threads, are not
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

// The batched kernel behind execute(): item i of the batch is A + i*stride_a, ...
// Blocks loop over items (grid-stride), so any batch size runs with 64-bit offsets.
// Parameters: blasdx.plan.kernel.KERNEL_PARAMETERS (and BIAS_PARAMETERS), in that order.
extern "C" __global__ void __launch_bounds__(32) blasdx_gemm_sm800_cf64f64f64_8x16x32_crr_t32_6576a167(
const void* a, const void* b, void* c, blasdx_block_gemm::scalar_t alpha, blasdx_block_gemm::scalar_t beta, long long batch, long long stride_a, long long stride_b, long long stride_c) {
  using namespace blasdx_block_gemm;
  extern __shared__ __align__(16) unsigned char smem[];
  const bool read_c = !blasdx::is_zero(beta);
  a_t* sa = reinterpret_cast<a_t*>(smem + a_offset);
  b_t* sb = reinterpret_cast<b_t*>(smem + b_offset);
  // Every thread of the block calls it: on return, item's A and B (and a staged C) are in
  // shared memory.
  auto copy_in = [&](long long item) {
    load_a(static_cast<const a_t*>(a) + item * stride_a, sa);
    load_b(static_cast<const b_t*>(b) + item * stride_b, sb);
    if (read_c) load_c(static_cast<const c_t*>(c) + item * stride_c, reinterpret_cast<c_t*>(smem + c_offset));
    blasdx::copy_commit();
    blasdx::copy_wait_prior<0>();
  };
  for (long long item = blockIdx.x; item < batch; item += gridDim.x) {
    copy_in(item);
    c_t* sc = reinterpret_cast<c_t*>(smem + c_offset);
    execute(alpha, sa, sb, beta, sc);
    store_c(sc, static_cast<c_t*>(c) + item * stride_c);
    __syncthreads();  // every thread is done with A, B and C in shared memory before they are loaded again
  }
}
