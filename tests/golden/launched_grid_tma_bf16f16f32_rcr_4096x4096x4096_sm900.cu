// blasdx block GEMM blasdx_gemm_sm900_bf16bf16f32_256x128x64_rcr_t512_c04ff45c
//   256x128x64, wgmma_bf16, 512 threads
// C = c_store(alpha * op(a_load(A)) * op(b_load(B)) + beta * c_load(C)) with A, B and C in
// shared memory, computed by the first 512 threads of the block (in thread-rank
// order); every thread of the block must call execute(). beta == 0 ignores C; alpha == 0
// ignores A and B. The hooks are optional functors: a_load/b_load take and return the
// element in blasdx::compute<a_t/b_t>::type (float for 16- and 8-bit floats), c_load and
// c_store a scalar_t; c_store may instead take (row, col, x).
namespace blasdx_block_gemm {

using a_t = __nv_bfloat16;
using b_t = __nv_bfloat16;
using c_t = float;
using scalar_t = float;  // alpha and beta
using acc_t = float;  // accumulator

constexpr int m = 256, n = 128, k = 64;
// A and B lie in shared memory in the swizzled layouts wgmma reads (rows of 128 and
// 128 bytes), which have no leading dimension: load_a/load_b write them; element (r, c)
// is sa[a_index(r, c)] / sb[b_index(r, c)]. After writing them with your own stores, call
// copy_wait() (it makes them visible to wgmma), not a bare gemm_sync(). wgmma runs where
// sa and sb start on multiples of 1024 bytes (extern __shared__ __align__(1024), a_offset,
// b_offset); elsewhere mma.sync computes the same.
constexpr int ldc = 128;  // in shared memory
constexpr int global_lda = 64, global_ldb = 64, global_ldc = 128;
constexpr unsigned block_dim_x = 512, block_dim_y = 1, block_dim_z = 1;
constexpr int threads = 512;
// The block's first `threads` threads run the GEMM: gemm_rank() is the thread's rank,
// gemm_sync() the block's barrier.
__device__ __forceinline__ int gemm_rank() { return blasdx::thread_rank(); }
__device__ __forceinline__ void gemm_sync() { __syncthreads(); }
// Bytes of shared memory for A, B and C placed one after another at these offsets; for A and B
// alone (a kernel whose C stays in the register accumulators), shared_memory_size_ab.
constexpr unsigned shared_memory_size = 49152;
constexpr unsigned a_offset = 0, b_offset = 32768, c_offset = 49152;
constexpr unsigned shared_memory_size_ab = c_offset;
constexpr unsigned a_size = 16384, b_size = 8192, c_size = 32768;  // elements

// Element (r, c) of each matrix (row_major A, col_major B, row_major C).
__device__ __forceinline__ int a_index(int r, int c) { return blasdx::swizzled_offset<128, 256>(r, c * 2) / 2; }
__device__ __forceinline__ int b_index(int r, int c) { return blasdx::swizzled_offset<128, 128>(c, r * 2) / 2; }
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
// the widest vectors that it and the pointer allow, else one element at a time (16-byte pieces
// cut from aligned loads where elements of 1 or 2 bytes would move one by one: *_shifted_copies).
__device__ __forceinline__ void load_a(const a_t* global, a_t* shared) {
  blasdx::copy_runs<256, 128, 16, threads, true, 128>(global, 128, shared, 128, gemm_rank());
}
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared) {
  const long long ld_bytes = ld / 1 * 2;
  if (ld_bytes % 16 == 0)
    blasdx::copy_runs<256, 128, 16, threads, true, 128>(global, ld_bytes, shared, 128, gemm_rank());
  else
    blasdx::copy_runs_shifted<256, 128, threads, 128>(global, ld_bytes, shared, 128, gemm_rank());
}
// An edge tile: the first rows x cols of the 256x64 A lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_a(const a_t* global, long long ld, a_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 2;
  const int outer_valid = rows, inner_valid = cols * 2;
  if (ld_bytes % 16 == 0)
    blasdx::copy_runs_partial<256, 128, 16, threads, true, 128>(global, ld_bytes, shared, 128, gemm_rank(), outer_valid, inner_valid);
  else
    blasdx::copy_runs_shifted<256, 128, threads, 128>(global, ld_bytes, shared, 128, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_b(const b_t* global, b_t* shared) {
  blasdx::copy_runs<128, 128, 16, threads, true, 128>(global, 128, shared, 128, gemm_rank());
}
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared) {
  const long long ld_bytes = ld / 1 * 2;
  if (ld_bytes % 16 == 0)
    blasdx::copy_runs<128, 128, 16, threads, true, 128>(global, ld_bytes, shared, 128, gemm_rank());
  else
    blasdx::copy_runs_shifted<128, 128, threads, 128>(global, ld_bytes, shared, 128, gemm_rank());
}
// An edge tile: the first rows x cols of the 64x128 B lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_b(const b_t* global, long long ld, b_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 2;
  const int outer_valid = cols, inner_valid = rows * 2;
  if (ld_bytes % 16 == 0)
    blasdx::copy_runs_partial<128, 128, 16, threads, true, 128>(global, ld_bytes, shared, 128, gemm_rank(), outer_valid, inner_valid);
  else
    blasdx::copy_runs_shifted<128, 128, threads, 128>(global, ld_bytes, shared, 128, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void load_c(const c_t* global, c_t* shared) {
  blasdx::copy_runs<256, 512, 4, threads, true>(global, 512, shared, 512, gemm_rank());
}
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared) {
  const long long ld_bytes = ld / 1 * 4;
  blasdx::copy_runs<256, 512, 4, threads, true>(global, ld_bytes, shared, 512, gemm_rank());
}
// An edge tile: the first rows x cols of the 256x128 C lie in the matrix (the rest
// of the tile becomes zero in shared memory; nothing outside is read).
__device__ __forceinline__ void load_c(const c_t* global, long long ld, c_t* shared, int rows, int cols) {
  const long long ld_bytes = ld * 4;
  const int outer_valid = rows, inner_valid = cols * 4;
  blasdx::copy_runs_partial<256, 512, 4, threads, true>(global, ld_bytes, shared, 512, gemm_rank(), outer_valid, inner_valid);
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global) {
  blasdx::copy_runs<256, 512, 4, threads, false>(shared, 512, global, 512, gemm_rank());
}
__device__ __forceinline__ void store_c(const c_t* shared, c_t* global, long long ld) {
  const long long ld_bytes = ld * 4;
  if (ld_bytes % 4 == 0 && reinterpret_cast<unsigned long long>(global) % 4 == 0)
    blasdx::copy_runs<256, 512, 4, threads, false>(shared, 512, global, ld_bytes, gemm_rank());
  else
    blasdx::copy_runs<256, 512, 4, threads, false>(shared, 512, global, ld_bytes, gemm_rank());
}
// Whether load_a and load_b move 16-byte pieces cut from aligned loads even where the leading dimension
// and pointer allow vectors of 16 and 16 bytes (their copies then check the bounds of each piece anyway).
constexpr bool a_shifted_copies = false, b_shifted_copies = false;
__device__ __forceinline__ void copy_wait() { blasdx::copy_wait<true>(); }

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

// Tensor cores: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// Each of 4 warpgroup(s) computes 64x128 tiles of C, one instruction per 16 of k,
// reading A and B from shared memory through matrix descriptors; warp w of a group holds rows
// 16 (w % 4) .. 16 (w % 4) + 15 of a tile in the fragments of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32,
// which computes them instead where wgmma cannot run (not sm_90a, A or B not 1024-byte aligned,
// load hooks).
constexpr int warps = 16;
constexpr int im = 16, in_ = 8, ik = 16;
constexpr int pm = 1, pn = 16;
constexpr int tile_m = 64, tile_n = 128, tiles_n = 1, tiles = 4;
using frag_t = unsigned;
// The warp tiles cover m x n exactly, and the instruction steps k: no element of a tile needs a
// bounds check (a tile that a thread multiplies or stores always exists).
constexpr bool whole_tiles = m % tile_m == 0 && n % tile_n == 0;
constexpr bool whole_k = k % ik == 0;
using mma_acc_t = float;
constexpr int a_regs = 4, b_regs = 2, c_vals = 4;

// m16n8k16 fragments: 2 element(s) per 32-bit register.
constexpr int epr = 2;
template <class Op>
__device__ __forceinline__ void load_fragment_a(frag_t (&f)[a_regs], const a_t* sa, int r0, int k0, int g, int t,
                                                const Op& op) {
#pragma unroll
  for (int j = 0; j < a_regs; ++j) {
    const int r = r0 + g + 8 * (j & 1);
    unsigned word = 0;
#pragma unroll
    for (int e = 0; e < epr; ++e) {
      const int c = k0 + epr * t + e + (ik / 2) * (j >> 1);
      if ((whole_tiles || r < m) && (whole_k || c < k)) word |= blasdx::operand_bits(blasdx::apply_load(op, sa[a_index(r, c)])) << (e * (32 / epr));
    }
    f[j] = word;
  }
}
template <class Op>
__device__ __forceinline__ void load_fragment_b(frag_t (&f)[b_regs], const b_t* sb, int k0, int n0, int g, int t,
                                                const Op& op) {
  const int c = n0 + g;
#pragma unroll
  for (int j = 0; j < b_regs; ++j) {
    unsigned word = 0;
#pragma unroll
    for (int e = 0; e < epr; ++e) {
      const int r = k0 + epr * t + e + (ik / 2) * j;
      if ((whole_k || r < k) && (whole_tiles || c < n)) word |= blasdx::operand_bits(blasdx::apply_load(op, sb[b_index(r, c)])) << (e * (32 / epr));
    }
    f[j] = word;
  }
}
__device__ __forceinline__ int c_row(int i, int g, int t) { return g + 8 * (i >> 1); }

// ldmatrix (SM 75+): one instruction loads four (x4) or two (x2) 8x8 blocks of 16-bit
// values (rows of 16 bytes), a whole A fragment or two B fragments. Used for pieces that lie
// wholly inside m, n, k, from a 16-byte aligned matrix, without a load hook; 8- and 32-bit
// operands only where k is contiguous: a thread's 32 bits of a block are then the 4 (or 1)
// neighbours along k its fragment holds. 8 elements make 16 bytes.
constexpr int ldmatrix_elements = 8;
// tfloat32 operands are rounded to tf32 as the element-wise loads round them.
__device__ __forceinline__ void ldmatrix_round(unsigned& r) {
}
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
#if __CUDA_ARCH__ >= 750
  if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 { %0, %1, %2, %3 }, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(blasdx::shared_address(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 { %0, %1, %2, %3 }, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(blasdx::shared_address(p)));
  }
#endif
}
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, const void* p) {
#if __CUDA_ARCH__ >= 750
  if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 { %0, %1 }, [%2];"
                 : "=r"(r0), "=r"(r1) : "r"(blasdx::shared_address(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 { %0, %1 }, [%2];"
                 : "=r"(r0), "=r"(r1) : "r"(blasdx::shared_address(p)));
  }
#endif
}

// Lane l addresses row (l % 8) of block (l / 8): blocks are (rows 0-7 | 8-15) x (the first and the
// second ldmatrix_elements of k).
__device__ __forceinline__ void ldmatrix_a(frag_t (&f)[a_regs], const a_t* sa, int r0, int k0, int lane) {
  const int r = r0 + (lane & 7) + ((lane >> 3) & 1) * 8, c = k0 + (lane >> 4) * ldmatrix_elements;  // rows of A
  ldmatrix_x4<false>(f[0], f[1], f[2], f[3], sa + a_index(r, c));
#pragma unroll
  for (int j = 0; j < 4; ++j) ldmatrix_round(f[j]);
}
// Two B fragments (columns n0..n0+7 and n0+8..n0+15), or one with the x2 form.
__device__ __forceinline__ void ldmatrix_b2(frag_t (&f0)[b_regs], frag_t (&f1)[b_regs], const b_t* sb, int k0, int n0,
                                            int lane) {
  const int r = k0 + ((lane >> 3) & 1) * ldmatrix_elements, c = n0 + (lane & 7) + (lane >> 4) * 8;
  ldmatrix_x4<false>(f0[0], f0[1], f1[0], f1[1], sb + b_index(r, c));
  ldmatrix_round(f0[0]);
  ldmatrix_round(f0[1]);
  ldmatrix_round(f1[0]);
  ldmatrix_round(f1[1]);
}
__device__ __forceinline__ void ldmatrix_b1(frag_t (&f)[b_regs], const b_t* sb, int k0, int n0, int lane) {
  const int l = lane & 15;
  const int r = k0 + (l >> 3) * ldmatrix_elements, c = n0 + (l & 7);
  ldmatrix_x2<false>(f[0], f[1], sb + b_index(r, c));
  ldmatrix_round(f[0]);
  ldmatrix_round(f[1]);
}
__device__ __forceinline__ int c_col(int i, int g, int t) { return 2 * t + (i & 1); }

__device__ __forceinline__ void mma(mma_acc_t (&d)[c_vals], const frag_t (&a)[a_regs], const frag_t (&b)[b_regs]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 { %0, %1, %2, %3 }, { %4, %5, %6, %7 }, { %8, %9 }, { %0, %1, %2, %3 };"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[0 + 1]), "r"(a[0 + 2]), "r"(a[0 + 3]), "r"(b[0]), "r"(b[0 + 1]));

}

// A warpgroup owns a tile; lane l holds accumulator values in rows g = l / 4 (+ 8) and columns
// 2 * (l % 4) (+ 1) of each instruction tile (c_row, c_col), below its warp's first row row0.
constexpr int workers = warps * 32, tile_threads = 128;
using acc_value_t = mma_acc_t;
using tile_accumulator = mma_acc_t[pm][pn][c_vals];
constexpr int tile_values = pm * pn * c_vals;  // per thread, in the order (i, j, v)
struct tile_position { int m0, n0; };
__device__ __forceinline__ tile_position tile_origin(int tile) { return {(tile / tiles_n) * tile_m, (tile % tiles_n) * tile_n}; }

struct worker {
  int lane, g, t, row0;  // row0: the first row of the tile that the thread's warp holds
  __device__ __forceinline__ explicit worker(int rank)
      : lane(rank & 31), g((rank & 31) >> 2), t(rank & 3), row0(16 * ((rank >> 5) & 3)) {}
};

__device__ __forceinline__ void zero_tile(tile_accumulator& acc) {
#pragma unroll
  for (int i = 0; i < pm; ++i)
#pragma unroll
    for (int j = 0; j < pn; ++j)
#pragma unroll
      for (int v = 0; v < c_vals; ++v) acc[i][j][v] = 0;
}
// Value e of a thread's tile: acc[i][j][v] with e = (i * pn + j) * c_vals + v, and its place in C.
template <class Tile> __device__ __forceinline__ auto& value_of(Tile& acc, int e) { return acc[e / (pn * c_vals)][e / c_vals % pn][e % c_vals]; }
__device__ __forceinline__ int value_row(const worker& w, tile_position at, int e) { return at.m0 + w.row0 + e / (pn * c_vals) * im + c_row(e % c_vals, w.g, w.t); }
__device__ __forceinline__ int value_col(const worker& w, tile_position at, int e) { return at.n0 + e / c_vals % pn * in_ + c_col(e % c_vals, w.g, w.t); }

// Fragment values v and v + 1 are neighbouring columns of one row: in row-major C with an even leading dimension they are read and written as one (C aligned to two elements: checked at run time).
constexpr bool c_pairs = true;
using c_pair_t = blasdx::pair<c_t>;

// The outputs C(r, col) and C(r, col + 1) from their products and their old values.
template <class Acc, class CLoad, class CStore>
__device__ __forceinline__ c_pair_t updated_pair(int r, int col, const Acc& acc0, const Acc& acc1, const c_pair_t& old,
                                                 const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                                 const CStore& c_store) {
  return c_pair_t{epilogue(r, col, acc0, old.x, alpha, beta, c_load, c_store),
                  epilogue(r, col + 1, acc1, old.y, alpha, beta, c_load, c_store)};
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
      for (int v = 0; v < c_vals; v += 2) f(i, j, v, at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), at.n0 + j * in_ + c_col(v, w.g, w.t));
}

// 16-bit row-major C: a pair (4 bytes) fills half of a 32-byte sector. Lanes t and t ^ 1 (one
// row) can trade a pair so that each holds four neighbours (8 bytes) and each store instruction of
// the warp fills whole sectors: the even lane instruction tile j's columns 2t .. 2t + 3, the odd
// one tile j + 1's 2t - 2 .. 2t + 1.
constexpr bool c_quads = c_pairs && sizeof(c_t) == 2 && in_ == 8 && pn % 2 == 0;
using c_quad_t = blasdx::pair<c_pair_t>;

// The pair lane t ^ 1 sends (its `here` where this lane is odd, else its `there`), for the one
// this lane sends, as one 32- or 64-bit word: selected as bits in registers (a choice between
// the two pairs' addresses put them in local memory). Templates: compiled only where C's pairs
// are one word (quads of 16- and 32-bit C).
template <class Word, class Pair>
__device__ __forceinline__ Pair traded_pair(const Pair& here, const Pair& there, bool odd) {
  static_assert(sizeof(Word) == sizeof(Pair), "a pair moves as one word");
  Word here_bits, there_bits;
  memcpy(&here_bits, &here, sizeof(Word));
  memcpy(&there_bits, &there, sizeof(Word));
  const Word got_bits = __shfl_xor_sync(0xffffffffu, odd ? here_bits : there_bits, 1);
  Pair got;
  memcpy(&got, &got_bits, sizeof(Word));
  return got;
}

// The four neighbours a lane writes, from its pairs of instruction tiles j (here) and j + 1
// (there), every lane of the warp at once; they start at here's column (even lane) or in_ - 2
// past it (odd lane).
template <class Pair>
__device__ __forceinline__ blasdx::pair<Pair> neighbour_quad(const Pair& here, const Pair& there, bool odd) {
  using word = typename blasdx::conditional<sizeof(Pair) == 8, unsigned long long, unsigned>::type;
  const Pair got = traded_pair<word>(here, there, odd);
  return odd ? blasdx::pair<Pair>{got, there} : blasdx::pair<Pair>{here, got};
}

// Read ahead: store() and the Grid() epilogue read C a group of c_read_group instruction tiles
// (along n, 32 bytes a lane) at a time, all of a group's reads issued before any of its writes,
// which each read would otherwise wait for (they may alias it, for all the compiler knows): one
// round trip to memory a group rather than a pair. A group, not a whole tile, keeps the reads'
// registers few (a pass's 64 of the 256x128 float32 grid tile spilled 692 bytes).
constexpr int c_read_group = c_vals * sizeof(c_t) <= 8 && pn % 4 == 0 ? 4 : c_vals * sizeof(c_t) <= 16 && pn % 2 == 0 ? 2 : 1;

// f(j, v, row, col) for each pair of instruction tiles j0 <= j < j0 + c_read_group of row i.
template <class F>
__device__ __forceinline__ void for_each_pair_of_group(const worker& w, tile_position at, int i, int j0, const F& f) {
#pragma unroll
  for (int j = j0; j < j0 + c_read_group; ++j)
#pragma unroll
    for (int v = 0; v < c_vals; v += 2) f(j, v, at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), at.n0 + j * in_ + c_col(v, w.g, w.t));
}

// C = epilogue(acc, C) on a warp's tile, C at leading dimension ld, values (v, v + 1) as one
// pair where Pairs (both inside n), else one by one; C read a group ahead (c_read_group).
template <bool Pairs, class Index, class CLoad, class CStore>
__device__ __forceinline__ void store_tile_in(const tile_accumulator& acc, const worker& w, tile_position at, c_t* c,
                                              Index ld, const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                              const CStore& c_store) {
  const bool reads_c = !blasdx::is_zero(beta);
#pragma unroll
  for (int i = 0; i < pm; ++i)
#pragma unroll
    for (int j0 = 0; j0 < pn; j0 += c_read_group) {
      c_pair_t olds[c_read_group][c_vals / 2] = {};  // C of the group's pairs
      if (reads_c)
        for_each_pair_of_group(w, at, i, j0, [&](int j, int v, int r, int col) {
          if (!whole_tiles && (r >= m || col >= n)) return;
          c_pair_t& old = olds[j - j0][v / 2];
          if (Pairs && (whole_tiles || col + 1 < n)) {
            old = *reinterpret_cast<const c_pair_t*>(c + c_element(r, col, ld));
          } else {
            old.x = c[c_element(r, col, ld)];
            if (whole_tiles || col + 1 < n) old.y = c[c_element(r, col + 1, ld)];
          }
        });
      for_each_pair_of_group(w, at, i, j0, [&](int j, int v, int r, int col) {
        if (!whole_tiles && (r >= m || col >= n)) return;
        const c_pair_t& old = olds[j - j0][v / 2];
        if (Pairs && (whole_tiles || col + 1 < n)) {
          c_pair_t* to = reinterpret_cast<c_pair_t*>(c + c_element(r, col, ld));
          const c_pair_t pair = updated_pair(r, col, acc[i][j][v], acc[i][j][v + 1], old, alpha, beta, c_load, c_store);
          if (__isGlobal(to)) blasdx::store_global(to, pair);  // as one store (NVVM split a group's first pair)
          else *to = pair;
        } else {
          c[c_element(r, col, ld)] = epilogue(r, col, acc[i][j][v], old.x, alpha, beta, c_load, c_store);
          if (whole_tiles || col + 1 < n)
            c[c_element(r, col + 1, ld)] = epilogue(r, col + 1, acc[i][j][v + 1], old.y, alpha, beta, c_load, c_store);
        }
      });
    }
}

template <class Index, class CLoad, class CStore>
__device__ __forceinline__ void store_tile(const tile_accumulator& acc, const worker& w, tile_position at, c_t* c,
                                           Index ld, const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                           const CStore& c_store) {
  const bool pairs = c_pairs && ld % 2 == 0 && blasdx::address_aligned<2 * sizeof(c_t)>(c);
  // A second copy with beta == 0 as a constant, which reads no C and tests beta for no value: the
  // compiler made none of the grouped code on its own (float64 user kernels with beta == 0 then
  // ran 7% slower; it had made one of the earlier per-pair code).
  const scalar_t zero = blasdx::zero<scalar_t>();
  if (pairs && blasdx::is_zero(beta)) store_tile_in<true>(acc, w, at, c, ld, alpha, zero, c_load, c_store);
  else if (pairs) store_tile_in<true>(acc, w, at, c, ld, alpha, beta, c_load, c_store);
  else if (blasdx::is_zero(beta)) store_tile_in<false>(acc, w, at, c, ld, alpha, zero, c_load, c_store);
  else store_tile_in<false>(acc, w, at, c, ld, alpha, beta, c_load, c_store);
}

// A 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") of the operand
// at base: the start address, the leading and the stride byte offsets (in 16-byte units) and the
// swizzle mode. A piece `bytes` further on has advanced(this one, bytes / 16): A and B lie in the
// block's shared memory, under 256 KB, so the 14-bit start address never carries out of the low word
// (and one encoding serves every wgmma of a multiply). The low word goes through an identity
// __byte_perm: NVVM folds the descriptor of a shared symbol plus a constant (a Numba kernel's A and
// B) into a constant expression, made again at every multiply of the caller's loop; an instruction's
// value it hoists out of the loop.
__device__ __forceinline__ unsigned long long matrix_descriptor(const void* base, int leading_bytes, int stride_bytes,
                                                                int swizzle) {
  const unsigned mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
  const unsigned low = ((blasdx::shared_address(base) & 0x3FFFF) >> 4) | (static_cast<unsigned>(leading_bytes >> 4) << 16);
  const unsigned high = static_cast<unsigned>(stride_bytes >> 4) | (mode << 30);
  return static_cast<unsigned long long>(__byte_perm(low, 0, 0x3210)) | (static_cast<unsigned long long>(high) << 32);
}

// An operand stored in the Swizzle-byte layout of blasdx::swizzled_offset with Outer stored rows:
// its descriptor, and where the 16 values of k from k0 of rows (or columns) mn0.. start, in
// bytes from its first element. K-major (k contiguous): eight-row groups 8 * Swizzle bytes apart,
// k0 inside a row by the start address (the leading byte offset, 16, is unused there). MN-major
// (m or n contiguous, read transposed): Swizzle-byte blocks of m or n Outer * Swizzle bytes apart,
// eight-k groups 8 * Swizzle bytes apart.
template <int Swizzle, int Outer, bool MNMajor>
__device__ __forceinline__ unsigned long long operand_descriptor(const void* base) {
  return matrix_descriptor(base, MNMajor ? Outer * Swizzle : 16, 8 * Swizzle, Swizzle);
}
// desc of the piece bytes / 16 = units further on: added to the low word (the start address never carries).
__device__ __forceinline__ unsigned long long advanced(unsigned long long desc, int units) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(desc) + static_cast<unsigned>(units));
}
template <int Swizzle, int Outer, bool MNMajor, int ElementSize>
__device__ __forceinline__ int operand_offset(int mn0, int k0) {
  if constexpr (MNMajor)
    return mn0 * ElementSize / Swizzle * (Outer * Swizzle) + k0 * Swizzle;
  else
    return k0 * ElementSize / Swizzle * (Outer * Swizzle) + mn0 * Swizzle + k0 * ElementSize % Swizzle;
}

// Keeps the compiler from moving accesses to the accumulators across the asynchronous
// instructions that write them.
__device__ __forceinline__ void pin_accumulators(tile_accumulator& acc) {
#pragma unroll
  for (int j = 0; j < pn; ++j)
#pragma unroll
    for (int v = 0; v < c_vals; ++v) asm volatile("" : "+f"(acc[0][j][v])::"memory");
}

// acc += A(64 x 16) * B(16 x 128) of the descriptors: one wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16;
// acc = the product where `accumulate` is 0.
__device__ __forceinline__ void wgmma(tile_accumulator& acc, unsigned long long a_desc, unsigned long long b_desc,
                                      int accumulate = 1) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, "
      "%1, "
      "%2, "
      "%3, "
      "%4, "
      "%5, "
      "%6, "
      "%7, "
      "%8, "
      "%9, "
      "%10, "
      "%11, "
      "%12, "
      "%13, "
      "%14, "
      "%15, "
      "%16, "
      "%17, "
      "%18, "
      "%19, "
      "%20, "
      "%21, "
      "%22, "
      "%23, "
      "%24, "
      "%25, "
      "%26, "
      "%27, "
      "%28, "
      "%29, "
      "%30, "
      "%31, "
      "%32, "
      "%33, "
      "%34, "
      "%35, "
      "%36, "
      "%37, "
      "%38, "
      "%39, "
      "%40, "
      "%41, "
      "%42, "
      "%43, "
      "%44, "
      "%45, "
      "%46, "
      "%47, "
      "%48, "
      "%49, "
      "%50, "
      "%51, "
      "%52, "
      "%53, "
      "%54, "
      "%55, "
      "%56, "
      "%57, "
      "%58, "
      "%59, "
      "%60, "
      "%61, "
      "%62, "
      "%63"
      "}, %64, %65, accumulate, 1, 1, 0, 0;\n}\n"
      : "+f"(acc[0][0][0]), "+f"(acc[0][0][1]), "+f"(acc[0][0][2]), "+f"(acc[0][0][3]), "+f"(acc[0][1][0]), "+f"(acc[0][1][1]), "+f"(acc[0][1][2]), "+f"(acc[0][1][3]), "+f"(acc[0][2][0]), "+f"(acc[0][2][1]), "+f"(acc[0][2][2]), "+f"(acc[0][2][3]), "+f"(acc[0][3][0]), "+f"(acc[0][3][1]), "+f"(acc[0][3][2]), "+f"(acc[0][3][3]), "+f"(acc[0][4][0]), "+f"(acc[0][4][1]), "+f"(acc[0][4][2]), "+f"(acc[0][4][3]), "+f"(acc[0][5][0]), "+f"(acc[0][5][1]), "+f"(acc[0][5][2]), "+f"(acc[0][5][3]), "+f"(acc[0][6][0]), "+f"(acc[0][6][1]), "+f"(acc[0][6][2]), "+f"(acc[0][6][3]), "+f"(acc[0][7][0]), "+f"(acc[0][7][1]), "+f"(acc[0][7][2]), "+f"(acc[0][7][3]), "+f"(acc[0][8][0]), "+f"(acc[0][8][1]), "+f"(acc[0][8][2]), "+f"(acc[0][8][3]), "+f"(acc[0][9][0]), "+f"(acc[0][9][1]), "+f"(acc[0][9][2]), "+f"(acc[0][9][3]), "+f"(acc[0][10][0]), "+f"(acc[0][10][1]), "+f"(acc[0][10][2]), "+f"(acc[0][10][3]), "+f"(acc[0][11][0]), "+f"(acc[0][11][1]), "+f"(acc[0][11][2]), "+f"(acc[0][11][3]), "+f"(acc[0][12][0]), "+f"(acc[0][12][1]), "+f"(acc[0][12][2]), "+f"(acc[0][12][3]), "+f"(acc[0][13][0]), "+f"(acc[0][13][1]), "+f"(acc[0][13][2]), "+f"(acc[0][13][3]), "+f"(acc[0][14][0]), "+f"(acc[0][14][1]), "+f"(acc[0][14][2]), "+f"(acc[0][14][3]), "+f"(acc[0][15][0]), "+f"(acc[0][15][1]), "+f"(acc[0][15][2]), "+f"(acc[0][15][3])
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#endif
}

// Whether wgmma runs: compiled for sm_90a, no load hooks, A and B starting on multiples of
// 1024 bytes (where the hardware's swizzle and the layout's agree). The same for every
// thread of a warpgroup, as wgmma needs. The writers of A and B made them visible to wgmma
// (copy_wait, store_at) before the barrier that precedes a multiply.
template <class ALoad, class BLoad>
__device__ __forceinline__ bool wgmma_runs(const a_t* sa, const b_t* sb) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  return blasdx::is_same<ALoad, blasdx::identity>::value && blasdx::is_same<BLoad, blasdx::identity>::value &&
         ((blasdx::shared_address(sa) | blasdx::shared_address(sb)) & 1023) == 0;
#else
  return false;
#endif
}

// The wgmma of every 16 of k from k_begin to k_end (all of k by default) for the tile at `at`,
// issued without waiting (between wgmma_begin and wgmma_commit, which several tiles may share);
// the first one overwrites acc where `overwrite`.
__device__ __forceinline__ void wgmma_issue(tile_accumulator& acc, tile_position at, const a_t* sa, const b_t* sb,
                                            int k_begin = 0, int k_end = k, bool overwrite = false) {
  const unsigned long long a_desc = operand_descriptor<128, 256, false>(sa);
  const unsigned long long b_desc = operand_descriptor<128, 128, false>(sb);
#pragma unroll
  for (int k0 = k_begin; k0 < k_end; k0 += 16)
    wgmma(acc, advanced(a_desc, operand_offset<128, 256, false, 2>(at.m0, k0) / 16),
          advanced(b_desc, operand_offset<128, 128, false, 2>(at.n0, k0) / 16),
          overwrite && k0 == k_begin ? 0 : 1);
}
__device__ __forceinline__ void wgmma_begin() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
// Close the group of every wgmma issued since wgmma_begin.
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Wait until at most Pending of this warpgroup's latest wgmma groups run: the others' products
// are in the accumulators, and the A and B they read in shared memory may be overwritten.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#endif
}

// acc += A(64 x 16 in registers: this lane's mma fragment, rows g (+ 8) of its warp's 16 and
// columns 2 (lane % 4) (+ 1) (+ 8)) * B(16 x 128 of the descriptor): the form of wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// that reads A from registers.
__device__ __forceinline__ void wgmma_a_in_registers(tile_accumulator& acc, const frag_t (&a)[a_regs],
                                                     unsigned long long b_desc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, "
      "%1, "
      "%2, "
      "%3, "
      "%4, "
      "%5, "
      "%6, "
      "%7, "
      "%8, "
      "%9, "
      "%10, "
      "%11, "
      "%12, "
      "%13, "
      "%14, "
      "%15, "
      "%16, "
      "%17, "
      "%18, "
      "%19, "
      "%20, "
      "%21, "
      "%22, "
      "%23, "
      "%24, "
      "%25, "
      "%26, "
      "%27, "
      "%28, "
      "%29, "
      "%30, "
      "%31, "
      "%32, "
      "%33, "
      "%34, "
      "%35, "
      "%36, "
      "%37, "
      "%38, "
      "%39, "
      "%40, "
      "%41, "
      "%42, "
      "%43, "
      "%44, "
      "%45, "
      "%46, "
      "%47, "
      "%48, "
      "%49, "
      "%50, "
      "%51, "
      "%52, "
      "%53, "
      "%54, "
      "%55, "
      "%56, "
      "%57, "
      "%58, "
      "%59, "
      "%60, "
      "%61, "
      "%62, "
      "%63"
      "}, {%64, %65, %66, %67}, %68, accumulate, 1, 1, 0;\n}\n"
      : "+f"(acc[0][0][0]), "+f"(acc[0][0][1]), "+f"(acc[0][0][2]), "+f"(acc[0][0][3]), "+f"(acc[0][1][0]), "+f"(acc[0][1][1]), "+f"(acc[0][1][2]), "+f"(acc[0][1][3]), "+f"(acc[0][2][0]), "+f"(acc[0][2][1]), "+f"(acc[0][2][2]), "+f"(acc[0][2][3]), "+f"(acc[0][3][0]), "+f"(acc[0][3][1]), "+f"(acc[0][3][2]), "+f"(acc[0][3][3]), "+f"(acc[0][4][0]), "+f"(acc[0][4][1]), "+f"(acc[0][4][2]), "+f"(acc[0][4][3]), "+f"(acc[0][5][0]), "+f"(acc[0][5][1]), "+f"(acc[0][5][2]), "+f"(acc[0][5][3]), "+f"(acc[0][6][0]), "+f"(acc[0][6][1]), "+f"(acc[0][6][2]), "+f"(acc[0][6][3]), "+f"(acc[0][7][0]), "+f"(acc[0][7][1]), "+f"(acc[0][7][2]), "+f"(acc[0][7][3]), "+f"(acc[0][8][0]), "+f"(acc[0][8][1]), "+f"(acc[0][8][2]), "+f"(acc[0][8][3]), "+f"(acc[0][9][0]), "+f"(acc[0][9][1]), "+f"(acc[0][9][2]), "+f"(acc[0][9][3]), "+f"(acc[0][10][0]), "+f"(acc[0][10][1]), "+f"(acc[0][10][2]), "+f"(acc[0][10][3]), "+f"(acc[0][11][0]), "+f"(acc[0][11][1]), "+f"(acc[0][11][2]), "+f"(acc[0][11][3]), "+f"(acc[0][12][0]), "+f"(acc[0][12][1]), "+f"(acc[0][12][2]), "+f"(acc[0][12][3]), "+f"(acc[0][13][0]), "+f"(acc[0][13][1]), "+f"(acc[0][13][2]), "+f"(acc[0][13][3]), "+f"(acc[0][14][0]), "+f"(acc[0][14][1]), "+f"(acc[0][14][2]), "+f"(acc[0][14][3]), "+f"(acc[0][15][0]), "+f"(acc[0][15][1]), "+f"(acc[0][15][2]), "+f"(acc[0][15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));
#endif
}

// The A fragment of k step s (columns 16 s .. 16 s + 15) from a tile of another GEMM's float
// accumulators that holds these rows and columns: lane l's values of its instruction tiles 2 s
// and 2 s + 1, the layout the fragment wants.
template <class SourceTile>
__device__ __forceinline__ void a_fragment_of(const SourceTile& source, int s, frag_t (&a)[a_regs]) {
#pragma unroll
  for (int j = 0; j < a_regs; ++j) {
    const float* pair = &source[0][2 * s + (j >> 1)][2 * (j & 1)];  // row g + 8 (j & 1), columns 2t, 2t + 1
    a[j] = blasdx::operand_bits(blasdx::convert<a_t>(pair[0])) | blasdx::operand_bits(blasdx::convert<a_t>(pair[1])) << 16;
  }
}

// acc += A * B for the warpgroup tile at `at`, A the rows of that tile in another GEMM's
// accumulator tile `source` (its 64 x k), B in shared memory: wgmma with A from registers where
// B starts on a multiple of 1024 bytes (sm_90a), else mma.sync on the same fragments.
template <class SourceTile>
__device__ __forceinline__ void multiply_tile_a_in_registers(tile_accumulator& acc, const worker& w, tile_position at,
                                                             const SourceTile& source, const b_t* sb) {
  frag_t fa[k / ik][a_regs];
#pragma unroll
  for (int s = 0; s < k / ik; ++s) a_fragment_of(source, s, fa[s]);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if ((blasdx::shared_address(sb) & 1023) == 0) {
    const unsigned long long b_desc = operand_descriptor<128, 128, false>(sb);
    pin_accumulators(acc);
    wgmma_begin();  // after the fragments' writes: wgmma reads them asynchronously
#pragma unroll
    for (int s = 0; s < k / ik; ++s)
      wgmma_a_in_registers(acc, fa[s], advanced(b_desc, operand_offset<128, 128, false, 2>(at.n0, s * ik) / 16));
    wgmma_commit();
    wgmma_wait<0>();
    pin_accumulators(acc);
    return;
  }
#endif
#pragma unroll
  for (int s = 0; s < k / ik; ++s)
#pragma unroll
    for (int j = 0; j < pn; ++j) {
      frag_t fb[b_regs];
      load_fragment_b(fb, sb, s * ik, at.n0 + j * in_, w.g, w.t, blasdx::identity{});
      mma(acc[0][j], fa[s], fb);
    }
}

// acc += the warpgroup tile at `at` of op(a_load(A)) * op(b_load(B)): wgmma where it runs;
// otherwise warp w.row0 / 16 of the group computes its 16 rows with mma.sync, from the same
// layout. Returns with the products in acc and A and B read.
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_tile(tile_accumulator& acc, const worker& w, tile_position at, const a_t* sa,
                                              const b_t* sb, const ALoad& a_load, const BLoad& b_load) {
  if (wgmma_runs<ALoad, BLoad>(sa, sb)) {
    pin_accumulators(acc);
    wgmma_begin();
    wgmma_issue(acc, at, sa, sb);
    wgmma_commit();
    wgmma_wait<0>();
    pin_accumulators(acc);
    return;
  }
  constexpr bool no_hooks = blasdx::is_same<ALoad, blasdx::identity>::value && blasdx::is_same<BLoad, blasdx::identity>::value;
  const int m0 = at.m0 + w.row0;
  const bool by_ldmatrix = no_hooks && blasdx::shared_aligned<16>(sa) && blasdx::shared_aligned<16>(sb);
  const bool a_by_ldmatrix = true && by_ldmatrix;
  const bool b_by_ldmatrix = true && by_ldmatrix;
#pragma unroll 1
  for (int k0 = 0; k0 < k; k0 += ik) {
    frag_t fa[a_regs];
    if (a_by_ldmatrix) ldmatrix_a(fa, sa, m0, k0, w.lane);
    else load_fragment_a(fa, sa, m0, k0, w.g, w.t, a_load);
#pragma unroll
    for (int j = 0; j < pn; j += 2) {
      const int n1 = at.n0 + j * in_;
      frag_t fb0[b_regs], fb1[b_regs];
      if (b_by_ldmatrix && j + 1 < pn) {
        ldmatrix_b2(fb0, fb1, sb, k0, n1, w.lane);
      } else {
        if (b_by_ldmatrix) ldmatrix_b1(fb0, sb, k0, n1, w.lane);
        else load_fragment_b(fb0, sb, k0, n1, w.g, w.t, b_load);
        if (j + 1 < pn) load_fragment_b(fb1, sb, k0, n1 + in_, w.g, w.t, b_load);
      }
      mma(acc[0][j], fa, fb0);
      if (j + 1 < pn) mma(acc[0][j + 1], fa, fb1);
    }
  }
}

// C = epilogue(acc, C) on a warpgroup's tile wholly inside m x n, in 16- or 32-bit row-major
// global memory at leading dimension ld (a multiple of four, C aligned to four elements): each
// lane writes neighbour_quads, so that every 16-bit store instruction fills whole 32-byte sectors
// and 32-bit C goes out in half the instructions, 16 bytes a lane. store() takes it for such C;
// pairs are kept for shared memory and for mma.sync tiles, where quads measured slower. C is read a
// group ahead (c_read_group).
constexpr bool c_quads_to_global = c_pairs && (sizeof(c_t) == 2 || sizeof(c_t) == 4) && in_ == 8 && pn % 2 == 0;
template <class Index, class CLoad, class CStore>
__device__ __forceinline__ void store_tile_quads_to_global(const tile_accumulator& acc, const worker& w, tile_position at,
                                                           c_t* c, Index ld, const scalar_t& alpha, const scalar_t& beta,
                                                           const CLoad& c_load, const CStore& c_store) {
  static_assert(c_read_group % 2 == 0, "a read group holds whole quads");
  const bool odd = w.t & 1;
  const bool reads_c = !blasdx::is_zero(beta);
#pragma unroll
  for (int i = 0; i < pm; ++i)
#pragma unroll
    for (int j0 = 0; j0 < pn; j0 += c_read_group) {
      c_pair_t olds[c_read_group][c_vals / 2] = {};  // C of the group's pairs, read ahead (c_read_group)
      if (reads_c)
        for_each_pair_of_group(w, at, i, j0, [&](int j, int v, int r, int col) {
          olds[j - j0][v / 2] = *reinterpret_cast<const c_pair_t*>(c + c_element(r, col, ld));
        });
#pragma unroll
      for (int j = j0; j < j0 + c_read_group; j += 2)
#pragma unroll
        for (int v = 0; v < c_vals; v += 2) {
          const int r = at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), col = at.n0 + j * in_ + c_col(v, w.g, w.t);
          const c_pair_t here = updated_pair(r, col, acc[i][j][v], acc[i][j][v + 1], olds[j - j0][v / 2], alpha, beta,
                                             c_load, c_store);
          const c_pair_t there = updated_pair(r, col + in_, acc[i][j + 1][v], acc[i][j + 1][v + 1], olds[j + 1 - j0][v / 2],
                                              alpha, beta, c_load, c_store);
          *reinterpret_cast<c_quad_t*>(c + c_element(r, odd ? col + in_ - 2 : col, ld)) = neighbour_quad(here, there, odd);
        }
    }
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
// warpgroup q (threads 128 q ..) of the first 4 takes tiles q, q + 4, ... of
// 64x128 outputs (4 in all); warp w of the block holds rows 16 (w % 4) .. 16 (w % 4) + 15 of
// its group's tile, and each lane 64 values of it, the mma fragment layout: rows g = lane / 4
// (+ 8) and columns 2 * (lane % 4) (+ 1) of each 16x8 piece.
// A thread holds `passes` tiles; acc.row(i) and acc.col(i) say where value i
// goes in C. Values outside m x n, and all values of threads past the first 16 warps, are not
// part of C: acc.in_bounds(i) is false for them, load leaves them zero, store skips them.
// multiply, load and store do not synchronize: call gemm_sync() before other threads read
// what store wrote to shared memory, or before A and B in shared memory are overwritten.
constexpr int passes = (tiles + tile_step - 1) / tile_step;  // tiles per thread

struct accumulator {
  using value_type = acc_value_t;  // the mma instruction's accumulator
  static constexpr int size = passes * tile_values;
  tile_accumulator tile[passes];
  int rank;  // the thread's rank among the GEMM's threads (gemm_rank())
  // Where the values lie, for a GEMM that takes them as its A (multiply_chained, a_from_registers).
  static constexpr int rows = m, cols = n, tile_rows = tile_m, tile_cols = tile_n, tile_count = tiles, tile_columns = tiles_n,
                       tile_stride = tile_step;
  static constexpr bool warpgroup_tiles = true;

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

// Every tile's wgmma of this thread's warpgroup in flight as one group.
__device__ __forceinline__ void issue_wgmma(accumulator& acc, const a_t* sa, const b_t* sb) {
#pragma unroll
  for (int p = 0; p < passes; ++p) pin_accumulators(acc.tile[p]);
  wgmma_begin();
#pragma unroll
  for (int p = 0; p < passes; ++p)
    if (has_tile(acc, p)) wgmma_issue(acc.tile[p], tile_origin(first_tile(acc.rank) + p * tile_step), sa, sb);
  wgmma_commit();
#pragma unroll
  for (int p = 0; p < passes; ++p) pin_accumulators(acc.tile[p]);
}

// acc += op(a_load(A)) * op(b_load(B)) with the mma.sync fragments (where wgmma does not run), synchronously.
template <class ALoad, class BLoad>
__device__ __forceinline__ void multiply_each_tile(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load,
                                                   const BLoad& b_load) {
  const int rank = multiplying_rank(acc);
  const worker w(rank);
#pragma unroll
  for (int p = 0; p < passes; ++p)
    if (has_tile(rank, p)) multiply_tile(acc.tile[p], w, tile_origin(first_tile(rank) + p * tile_step), sa, sb, a_load, b_load);
}

// acc += op(a_load(A)) * op(b_load(B)), started: where wgmma runs, its instructions are issued and
// this returns at once, and until multiply_wait says they are done, neither acc nor A and B in shared
// memory may be touched (a K loop multiplies the next tile meanwhile: wgmma chains on the same
// accumulators); elsewhere it is multiply(). ptxas keeps a group in flight past multiply_wait<1> only
// where it sees that no thread past `threads` reaches it (return those first: if (gemm_rank()
// >= threads) return;) and that no path joins multiply_wait<0> without a group (enter the K loop
// only if it runs at least once); otherwise it waits after every wgmma (ptxas -v: C7515, C7518).
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity>
__device__ __forceinline__ void multiply_async(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load = {},
                                               const BLoad& b_load = {}) {
  if (multiply_skips_idle_threads && acc.rank >= workers) return;
  if (wgmma_runs<ALoad, BLoad>(sa, sb)) {
    issue_wgmma(acc, sa, sb);
    return;
  }
  multiply_each_tile(sa, sb, acc, a_load, b_load);
}

// Not part of the device API: multiply_async for A and B that start on 1024-byte boundaries by
// construction (the grid kernel's stages). Without multiply_async's run-time test ptxas leaves out
// the mma.sync fallback, whose registers cost the grid kernel of 256x128 float16 tiles 52-240
// bytes of spills and an injected warpgroup.wait. Load hooks, or a build for sm_90 without the
// "a", still take multiply_async.
// `scale` scales the promoted partial sums (issue_wgmma), where wgmma promotes them.
template <class ALoad, class BLoad, class Scale = blasdx::unit_scale>
__device__ __forceinline__ void multiply_async_aligned(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load,
                                                       const BLoad& b_load, const Scale& scale = {}) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool by_wgmma = blasdx::is_same<ALoad, blasdx::identity>::value && blasdx::is_same<BLoad, blasdx::identity>::value;
#else
  constexpr bool by_wgmma = false;
#endif
  static_assert(a_offset % 1024 == 0 && b_offset % 1024 == 0 && shared_memory_size % 1024 == 0,
                "a stage's A and B start on 1024-byte boundaries");
  constexpr bool scaled = !blasdx::is_same<Scale, blasdx::unit_scale>::value;
  static_assert(!scaled || (blasdx::is_same<ALoad, blasdx::identity>::value && blasdx::is_same<BLoad, blasdx::identity>::value),
                "blasdx: scaled partial sums take no load hooks (GridPlan.scales_refusal)");
  if constexpr (by_wgmma) {
    static_assert(!scaled, "blasdx: scaled partial sums need Accumulation('accurate')");
    if (acc.rank < workers) issue_wgmma(acc, sa, sb);
  } else if constexpr (scaled) {
    multiply_scaled(sa, sb, acc, scale);  // no sm_90a (an SM 900 GEMM on a later GPU): mma.sync, a K tile scaled once
  } else {
    multiply_async(sa, sb, acc, a_load, b_load);
  }
}

// Wait until at most Pending of this thread's latest multiply_async calls still run: the
// products of the others are in acc, and their A and B may be overwritten (after a barrier, for
// other threads' writes). Synchronizes nothing else.
template <int Pending = 0>
__device__ __forceinline__ void multiply_wait(accumulator& acc) {
  if (acc.rank >= workers) return;
  wgmma_wait<Pending>();
#pragma unroll
  for (int p = 0; p < passes; ++p) pin_accumulators(acc.tile[p]);
}

// acc += op(a_load(A)) * op(b_load(B)), A and B in shared memory (lda, ldb); returns with the
// products in acc.
// The wgmma and their wait lie in one branch: where a run-time choice of path separates them
// (multiply_async, then multiply_wait), ptxas waits after every instruction (C7515, C7518).
template <class ALoad = blasdx::identity, class BLoad = blasdx::identity>
__device__ __forceinline__ void multiply(const a_t* sa, const b_t* sb, accumulator& acc, const ALoad& a_load = {},
                                         const BLoad& b_load = {}) {
  if (multiply_skips_idle_threads && acc.rank >= workers) return;
  if (wgmma_runs<ALoad, BLoad>(sa, sb)) {
    issue_wgmma(acc, sa, sb);
    multiply_wait<0>(acc);
    return;
  }
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
    Source::warpgroup_tiles && blasdx::is_same<typename Source::value_type, float>::value && Source::rows == m &&
    Source::cols == k && Source::tile_rows == tile_m && Source::tile_cols == k && Source::tile_columns == 1 &&
    Source::tile_count == tiles && Source::tile_stride == tile_step && tiles_n == 1 && k % ik == 0 && k >= 128;

// acc += op(A) * op(B), A this GEMM's m x k given as `a`, the accumulator of another GEMM whose C
// has these rows and columns (converted to a_t), B in shared memory: a chain of GEMMs whose
// intermediate need not leave the registers. Where a_from_registers<Source>, it does not; elsewhere
// `a` is written to sa (this GEMM's A in shared memory, a_size elements) and the block synchronizes
// before multiply(sa, sb, acc): every thread of the block calls it, and sa is not being read then.
template <class Source>
__device__ __forceinline__ void multiply_chained(const Source& a, a_t* sa, const b_t* sb, accumulator& acc) {
  static_assert(Source::rows == m && Source::cols == k, "blasdx: multiply_chained needs the other GEMM's C to be this m x k A");
  if constexpr (a_from_registers<Source>) {
    if (acc.rank >= workers) return;
    const worker w(acc.rank);
#pragma unroll
    for (int p = 0; p < passes; ++p)
      if (has_tile(acc, p))
        multiply_tile_a_in_registers(acc.tile[p], w, tile_origin(first_tile(acc.rank) + p * tile_step), a.tile[p], sb);
    return;
  }
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
  if constexpr (c_quads_to_global && whole_tiles) {  // tested alike in the warpgroup: every lane reaches the shuffles
    if (ldc % 4 == 0 && blasdx::address_aligned<4 * sizeof(c_t)>(c) && __isGlobal(c)) {
      const scalar_t zero = blasdx::zero<scalar_t>();  // a second copy with beta == 0 as a constant (see store_tile)
#pragma unroll
      for (int p = 0; p < passes; ++p) {
        if (!has_tile(acc, p)) continue;
        const tile_position at = tile_origin(first_tile(acc.rank) + p * tile_step);
        if (blasdx::is_zero(beta)) store_tile_quads_to_global(acc.tile[p], w, at, c, ldc, alpha, zero, c_load, c_store);
        else store_tile_quads_to_global(acc.tile[p], w, at, c, ldc, alpha, beta, c_load, c_store);
      }
      return;
    }
  }
#pragma unroll
  for (int p = 0; p < passes; ++p)
    if (has_tile(acc, p))
      store_tile(acc.tile[p], w, tile_origin(first_tile(acc.rank) + p * tile_step), c, ldc, alpha, beta, c_load, c_store);
}

}  // namespace blasdx_block_gemm

// blasdx grid-level GEMM blasdx_grid_sm900_bf16bf16f32_4096x4096x4096_rcr_tile256x128x64_s4_t640_7aee44a6: 4096x4096x4096 in tiles of 256x128x64
// Added to namespace blasdx_block_gemm, whose block GEMM (above) is one tile: a block computes a tile of C
// with mainloop() into an accumulator, then writes it (store_block_tile), or does more with it first.
//   for (int t = blockIdx.x; t < block_tiles; t += gridDim.x) {         // any order of tiles
//     int row0, col0;  block_tile_origin(t, row0, col0);
//     accumulator acc = make_accumulator();
//     mainloop(a, b, row0, col0, smem, acc);                            // acc = A(row0.., :) * B(:, col0..)
//     store_block_tile(acc, c, row0, col0, alpha, beta);                // or acc.row(i) + row0, acc.col(i) + col0 ...
//   }
// smem: stages * stage_size bytes of dynamic shared memory, aligned to 1024 bytes (extern __shared__ __align__(1024)).
namespace blasdx_block_gemm {

constexpr int problem_m = 4096, problem_n = 4096, problem_k = 4096;
// The whole matrices' leading dimensions in global memory (row_major A, col_major B, row_major C).
constexpr long long problem_lda = 4096, problem_ldb = 4096, problem_ldc = 4096;
constexpr int stages = 4;  // K tiles in flight: while one is multiplied, the next stages - 1 are copied
constexpr unsigned stage_size = shared_memory_size;  // bytes of one stage (A and B of one K tile)
constexpr int block_tiles_m = 16, block_tiles_n = 32, block_tiles = block_tiles_m * block_tiles_n;
constexpr int k_tiles = 64;  // steps of each tile's K loop (the last one 64 deep)
constexpr int block_group_m = 8;  // tile rows per group of block_tile_origin's order

// Element (r, col) of the whole A, B and C.
__device__ __forceinline__ long long a_global(int r, int col) { return static_cast<long long>(r) * problem_lda + col; }
__device__ __forceinline__ long long b_global(int r, int col) { return r + static_cast<long long>(col) * problem_ldb; }
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
  // The stages start on 1024-byte boundaries, as wgmma reads them (multiply_async_aligned): where smem
  // does not, the kernel stops here rather than compute garbage.
  if (blasdx::shared_address(smem) % 1024 != 0) __trap();
  // wgmma: the multiply of K tile kt runs while the copies of K tiles kt + 1 .. kt + stages - 2 do, and
  // while the multiply of K tile kt - 1 ends; a stage is refilled once its multiply is done everywhere.
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_begin + stages - 2; ++kt) {
    if (kt < kt_end) start_copies(kt);
    blasdx::copy_commit();  // a group per K tile, empty or not: the wait below counts them
  }
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    // K tile kt has landed, and every thread is past multiply_wait<1> of K tile kt - 1: the
    // multiply of K tile kt - 2 is done, so its stage takes the copies of K tile kt + stages - 2.
    blasdx::copy_wait_prior<stages - 3, true>();
    const unsigned char* stage = smem + (kt - kt_begin) % stages * stage_size;
    multiply_async_aligned(reinterpret_cast<const a_t*>(stage + a_offset), reinterpret_cast<const b_t*>(stage + b_offset),
                           acc, a_load, b_load, scales(kt));
    if (kt + stages - 2 < kt_end) start_copies(kt + stages - 2);
    blasdx::copy_commit();
    multiply_wait<1>(acc);
  }
  multiply_wait<0>(acc);
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


// Whether the quads' epilogue reads C a group ahead (GridPlan.quads_c_read_ahead), else each quad just before it is written.
constexpr bool quads_read_ahead = true;
// Whether plain whole tiles take the short epilogue below (GridPlan.short_quads_epilogue).
constexpr bool short_quads_epilogue = true;

// A lane's quad's columns (col, col + 1 of instruction tile j and of j + 1), each the nearest inside C.
__device__ __forceinline__ void nearest_quad_columns(int col, int cols, int (&cc)[4]) {
  const int quad[4] = {col, col + 1, col + in_, col + in_ + 1};
#pragma unroll
  for (int q = 0; q < 4; ++q) cc[q] = quad[q] < cols ? quad[q] : cols - 1;
}

// The plain epilogue of a tile wholly inside C, aligned to four elements: C = alpha * acc (no hooks, no bias, beta 0,
// alpha not 0), each lane's four neighbours (neighbour_quad) a store, at constant offsets from one address a row. The
// general epilogue below computed every value's nearest column and row, its address and beta's term: ~10 instructions
// a value, which at shallow K outweighed the K loop (ncu, 8192x8192x256 bf16: 39M instructions against cuBLAS's 9M).
// (A template, compiled only where called: the quads' C is 16-bit.)
template <int PairBytes = sizeof(c_pair_t)>
__device__ __forceinline__ void store_whole_tile_quads(const accumulator& acc, const worker& w, c_t* c_tile,
                                                       const scalar_t& alpha) {
  static_assert(PairBytes == 4, "16-bit C: a pair is a word");
  const bool odd = w.t & 1;
#pragma unroll
  for (int p = 0; p < passes; ++p) {
    if (!has_tile(acc, p)) continue;
    const tile_accumulator& values = acc.tile[p];
    const tile_position at = tile_origin(first_tile(acc.rank) + p * tile_step);
#pragma unroll
    for (int i = 0; i < pm; ++i)
#pragma unroll
      for (int v = 0; v < c_vals; v += 2) {
        const int r = at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), col = at.n0 + c_col(v, w.g, w.t);
        c_t* row = c_tile + c_global(r, odd ? col + in_ - 2 : col);
#pragma unroll
        for (int j = 0; j < pn; j += 2) {
          const auto bits = [&](int jj) {  // the lane's pair of instruction tile jj as one word
            const c_pair_t pair{blasdx::convert<c_t>(alpha * blasdx::convert<scalar_t>(values[i][jj][v])),
                                blasdx::convert<c_t>(alpha * blasdx::convert<scalar_t>(values[i][jj][v + 1]))};
            unsigned word;
            memcpy(&word, &pair, sizeof(word));
            return word;
          };
          const unsigned here = bits(j), there = bits(j + 1);  // (neighbour_quad, on words)
          const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? here : there, 1);
          asm volatile("st.global.v2.b32 [%0], { %1, %2 };" ::"l"(row + c_global(0, j * in_)), "r"(odd ? got : here),
                       "r"(odd ? there : got) : "memory");
        }
      }
  }
}

// 16-bit row-major C (its tiles, hooks or not, all come here, but the plain whole tiles above): where a tile lies
// wholly inside C and C is aligned to four elements, each lane writes four neighbours (neighbour_quad); other
// tiles write pairs as before. Every value is computed, those outside the problem at the nearest
// element inside it (so that hooks and the bias read only C's own), and only the stores test the
// bounds: one copy of the epilogue for all tiles, as compile time wants; four neighbours a store
// ran faster than pairs, plain and fused (benchmarks/RESULTS.md).
template <class CLoad, class CStore>
__device__ __forceinline__ void store_tile_quads(const accumulator& acc, const worker& w, c_t* c_tile, int rows, int cols,
                                                 bool pairs, const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                                 const CStore& c_store) {
  const bool whole = rows == m && cols == n && problem_ldc % 4 == 0 &&
                     (reinterpret_cast<unsigned long long>(c_tile) & (4 * sizeof(c_t) - 1)) == 0;
  const bool odd = w.t & 1;
  const bool reads_c = !blasdx::is_zero(beta);
  // A second copy of the epilogue where it is short (no hooks) and measured (short_quads_epilogue).
  if constexpr (blasdx::is_same<CStore, blasdx::identity>::value && short_quads_epilogue) {
    if (whole && !reads_c && !blasdx::is_zero(alpha)) return store_whole_tile_quads(acc, w, c_tile, alpha);
  }
#pragma unroll
  for (int p = 0; p < passes; ++p) {
    if (!has_tile(acc, p)) continue;
    const tile_accumulator& values = acc.tile[p];
    const tile_position at = tile_origin(first_tile(acc.rank) + p * tile_step);
#pragma unroll
    for (int i = 0; i < pm; ++i)
#pragma unroll
      for (int j0 = 0; j0 < pn; j0 += c_read_group) {
        c_t olds[c_read_group / 2][c_vals / 2][4] = {};  // C of the group's quads
        const auto read_quad = [&](int j, int v, c_t(&old)[4]) {  // C at the quad's nearest elements inside the problem
          const int r = at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), col = at.n0 + j * in_ + c_col(v, w.g, w.t);
          int cc[4];
          nearest_quad_columns(col, cols, cc);
#pragma unroll
          for (int q = 0; q < 4; ++q) old[q] = c_tile[c_global(r < rows ? r : rows - 1, cc[q])];
        };
        if (reads_c && quads_read_ahead) {
#pragma unroll
          for (int j = j0; j < j0 + c_read_group; j += 2)
#pragma unroll
            for (int v = 0; v < c_vals; v += 2) read_quad(j, v, olds[(j - j0) / 2][v / 2]);
        }
#pragma unroll
        for (int j = j0; j < j0 + c_read_group; j += 2)
#pragma unroll
          for (int v = 0; v < c_vals; v += 2) {
            c_t just_read[4] = {};
            if (reads_c && !quads_read_ahead) read_quad(j, v, just_read);
            const int r = at.m0 + w.row0 + i * im + c_row(v, w.g, w.t), col = at.n0 + j * in_ + c_col(v, w.g, w.t);
            const int rc = r < rows ? r : rows - 1;  // the nearest element inside the problem
            int cc[4];
            nearest_quad_columns(col, cols, cc);
            const c_t* old = quads_read_ahead ? olds[(j - j0) / 2][v / 2] : just_read;
            const c_pair_t here{epilogue(rc, cc[0], values[i][j][v], old[0], alpha, beta, c_load, c_store),
                                epilogue(rc, cc[1], values[i][j][v + 1], old[1], alpha, beta, c_load, c_store)};
            const c_pair_t there{epilogue(rc, cc[2], values[i][j + 1][v], old[2], alpha, beta, c_load, c_store),
                                 epilogue(rc, cc[3], values[i][j + 1][v + 1], old[3], alpha, beta, c_load, c_store)};
            if (whole) {  // the same in the block: every lane of a warp swaps
              const c_quad_t quad = neighbour_quad(here, there, odd);
              unsigned lo, hi;  // one 8-byte store: written in C++, it is merged with the pair stores below
              memcpy(&lo, &quad.x, sizeof(lo));
              memcpy(&hi, &quad.y, sizeof(hi));
              asm volatile("st.global.v2.b32 [%0], { %1, %2 };" ::"l"(c_tile + c_global(r, odd ? col + in_ - 2 : col)),
                           "r"(lo), "r"(hi) : "memory");
            } else if (r < rows) {
#pragma unroll
              for (int s = 0; s < 2; ++s) {
                const int at_col = col + s * in_;
                const c_pair_t pair = s ? there : here;
                c_t* to = c_tile + c_global(r, at_col);
                if (pairs && at_col + 1 < cols) {
                  blasdx::store_global(reinterpret_cast<c_pair_t*>(to), pair);
                } else {
                  if (at_col < cols) to[0] = pair.x;
                  if (at_col + 1 < cols) to[1] = pair.y;
                }
              }
            }
          }
      }
  }
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
  // One copy of the epilogue for whole and edge tiles alike (each copy of a fused epilogue costs
  // compile time): a lane's values (v, v + 1) are the neighbours C(r, col) and C(r, col + 1),
  // written as one pair where C is row-major and aligned to two elements.
  if (acc.rank >= workers) return;
  const worker w(acc.rank);
  const bool pairs = c_pairs && problem_ldc % 2 == 0 && (reinterpret_cast<unsigned long long>(c_tile) & (2 * sizeof(c_t) - 1)) == 0;
  const long long next = c_global(0, 1);  // C(r, col + 1) - C(r, col)
  if constexpr (c_quads) {
    store_tile_quads(acc, w, c_tile, rows, cols, pairs, alpha, beta, c_load, c_store);
    return;
  }
#pragma unroll
  for (int p = 0; p < passes; ++p) {
    if (!has_tile(acc, p)) continue;
    const tile_accumulator& values = acc.tile[p];
    const tile_position at = tile_origin(first_tile(acc.rank) + p * tile_step);
#pragma unroll
    for (int i = 0; i < pm; ++i)
#pragma unroll
      for (int j0 = 0; j0 < pn; j0 += c_read_group) {
        c_pair_t olds[c_read_group][c_vals / 2] = {};  // C of the group's pairs, read ahead (c_read_group)
        if (!blasdx::is_zero(beta))
          for_each_pair_of_group(w, at, i, j0, [&](int j, int v, int r, int col) {
            if (r >= rows || col >= cols) return;
            const c_t* from = c_tile + c_global(r, col);
            c_pair_t& old = olds[j - j0][v / 2];
            if (pairs && col + 1 < cols) {
              old = *reinterpret_cast<const c_pair_t*>(from);
            } else {
              old.x = from[0];
              if (col + 1 < cols) old.y = from[next];
            }
          });
        for_each_pair_of_group(w, at, i, j0, [&](int j, int v, int r, int col) {
          if (r >= rows || col >= cols) return;
          c_t* to = c_tile + c_global(r, col);
          const bool both = col + 1 < cols;
          const c_pair_t old = olds[j - j0][v / 2];
          const c_t v0 = epilogue(r, col, values[i][j][v], old.x, alpha, beta, c_load, c_store);
          const c_t v1 = epilogue(r, col + 1, values[i][j][v + 1], old.y, alpha, beta, c_load, c_store);
          if (pairs && both && sizeof(c_pair_t) == 16) {  // one store (store_global): NVVM wrote float64 pairs as two
            blasdx::store_global(reinterpret_cast<c_pair_t*>(to), c_pair_t{v0, v1});
          } else if (pairs && both) {  // 8-byte pairs as written: store_global ran slower on float32 RRR (less aligned arrays)
            *reinterpret_cast<c_pair_t*>(to) = c_pair_t{v0, v1};
          } else {
            to[0] = v0;
            if (both) to[next] = v1;
          }
        });
      }
  }
}

}  // namespace blasdx_block_gemm

namespace blasdx {

// A CUtensorMap, written on the host by the driver's cuTensorMapEncodeTiled
// (blasdx.runtime.tensor_map) and passed by value as a __grid_constant__ parameter.
struct alignas(64) tensor_map {
  unsigned long long opaque[16];
};

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}
// Make the initialized mbarriers visible to the other threads and to the copy engine.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrive, and expect `bytes` more from the copies that complete on this barrier.
__device__ __forceinline__ void mbarrier_arrive_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}
// Wait until the barrier's phase of parity `parity` (0, 1, 0, ...: its uses so far, mod 2) completed.
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// Copy the box of `map` at coordinates (x, y, z) (innermost first) to shared memory at `to`,
// completing `bytes` (the whole box, zeros past the bounds included) on `bar`.
__device__ __forceinline__ void tensor_copy(void* to, const tensor_map& map, int x, int y, int z,
                                            unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, { %2, %3, %4 }], [%5];"
      ::"r"(shared_address(to)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(z),
      "r"(shared_address(bar))
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const tensor_map& map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
}

// Hand registers back to (Decrease) or take them from (!Decrease) the SM's pool, for the whole
// warpgroup: the producer needs few, the tile's warpgroups many (sm_90a).
template <int Registers, bool Decrease>
__device__ __forceinline__ void set_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (Decrease) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
#endif
}

// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of every block of the cluster gets here before any goes on.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrive on the mbarrier at `bar`'s place in the shared memory of block `rank` of the cluster, with
// the default (release at CTA scope) semantics: .release.cluster fences every arrival (a MEMBAR
// that slowed the kernel down), and the stage it frees has only been read, its reads done.
__device__ __forceinline__ void mbarrier_arrive_in(unsigned long long* bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               ::"r"(shared_address(bar)), "r"(rank)
               : "memory");
}
// tensor_copy into the same place of the shared memory of each block of `blocks` (a bit mask of
// cluster ranks), completing on the mbarrier at `bar`'s place in each.
__device__ __forceinline__ void tensor_copy_multicast(void* to, const tensor_map& map, int x, int y, int z,
                                                      unsigned long long* bar, unsigned short blocks) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, { %2, %3, %4 }], [%5], %6;"
      ::"r"(shared_address(to)), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(z),
      "r"(shared_address(bar)), "h"(blocks)
      : "memory");
}

}  // namespace blasdx

namespace blasdx_block_gemm {

// Bytes one stage's copies bring (A and B of one K tile, edges' zeros included).
constexpr unsigned stage_copy_bytes = 49152;
// Clusters of two blocks on vertically neighbouring tiles (block r of a pair at row0 + r * m), which
// share B: each block copies half of each K tile's B (rows of its slabs, or its slabs) into both.
// A stage is free once the warps of both blocks are done with it.
constexpr int consumer_warps = 2 * (threads / 32);
constexpr int pair_tiles_m = (block_tiles_m + 1) / 2, pair_tiles = pair_tiles_m * block_tiles_n;

// Where pair tile t (0 <= t < pair_tiles) puts block `rank` of the cluster (a row0 past problem_m
// reads zeros and writes nothing, where the tile rows are odd).
__device__ __forceinline__ void pair_tile_origin(int t, unsigned rank, int& row0, int& col0) {
  grouped_tile_origin(t, pair_tiles_m, 2 * m, row0, col0);
  row0 += static_cast<int>(rank) * m;
}

// The producer (one thread): the copies of K tiles kt_begin .. kt_end of the tile at (row0, col0)
// of batch item `item`, into the stages after the `step` K tiles before them (counted over all of
// the block's tiles), each once the multiply of the K tile `stages` before it is done.
__device__ __forceinline__ void produce_range(const blasdx::tensor_map& a_map, const blasdx::tensor_map& b_map,
                                              int item, int row0, int col0, int kt_begin, int kt_end, unsigned& step,
                                              unsigned long long* landed, unsigned long long* freed,
                                              unsigned char* smem, unsigned rank) {
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_end; ++kt, ++step) {
    const unsigned s = step % stages;
    if (step >= stages) blasdx::mbarrier_wait(freed + s, (step / stages - 1) & 1);
    blasdx::mbarrier_arrive_expect(landed + s, stage_copy_bytes);
    unsigned char* stage = smem + s * stage_size;
    const int k0 = kt * k;
#pragma unroll
    for (int j = 0; j < 1; ++j)
      blasdx::tensor_copy(stage + a_offset + j * 32768, a_map,
                          k0 + j * 64, row0, item, landed + s);
    // this block's half of each slab's rows, into both blocks
    constexpr int half = 64;
#pragma unroll
    for (int j = 0; j < 1; ++j)
      blasdx::tensor_copy_multicast(stage + b_offset + j * 16384 + rank * half * 128, b_map,
                                    k0 + j * 64, col0 + static_cast<int>(rank) * half,
                                    item, landed + s, 3);
  }
}

// The producer's last wait: until every stage's last use is done in both blocks, so that no
// arrival of the other block's warps comes to this block's barriers after it ends.
__device__ __forceinline__ void produce_tail(unsigned step, unsigned long long* freed) {
  for (unsigned last = step > stages ? step - stages : 0; last < step; ++last)
    blasdx::mbarrier_wait(freed + last % stages, last / stages & 1);
}

// A warp is done with a stage: say so to both blocks of the cluster (both copy into it).
__device__ __forceinline__ void free_stage(unsigned long long* freed) {
  blasdx::mbarrier_arrive_in(freed, 0);
  blasdx::mbarrier_arrive_in(freed, 1);
}

// The tile's warpgroups: acc += the products of K tiles kt_begin .. kt_end, each as its stage
// lands; a warp frees a stage once the multiply that read it is done. smem: the kernel's stages, on
// 1024-byte boundaries (extern __shared__ __align__(1024); TMA's swizzled copies need them there too).
// `scales` (partial sums promoted, no load hooks): scales(kt)(r, k0) scales the partial sums of row r (of the
// tile) of K tile kt (blockwise-scaled FP8).
template <class ALoad, class BLoad, class Scales = blasdx::unit_scales>
__device__ __forceinline__ void consume_range(int kt_begin, int kt_end, unsigned& step, unsigned long long* landed,
                                              unsigned long long* freed, const unsigned char* smem,
                                              accumulator& acc, const ALoad& a_load, const BLoad& b_load,
                                              const Scales& scales = {}) {
  const bool elected = blasdx::thread_rank() % 32 == 0;
#pragma unroll 1
  for (int kt = kt_begin; kt < kt_end; ++kt, ++step) {
    const unsigned s = step % stages;
    blasdx::mbarrier_wait(landed + s, step / stages & 1);
    const unsigned char* stage = smem + s * stage_size;
    multiply_async_aligned(reinterpret_cast<const a_t*>(stage + a_offset), reinterpret_cast<const b_t*>(stage + b_offset),
                           acc, a_load, b_load, scales(kt));
    multiply_wait<1>(acc);  // the multiply of K tile kt - 1 is done: free its stage
    __syncwarp();
    if (kt > kt_begin && elected) free_stage(freed + (step - 1) % stages);
  }
  multiply_wait<0>(acc);
  __syncwarp();
  if (kt_end > kt_begin && elected) free_stage(freed + (step - 1) % stages);
}

}  // namespace blasdx_block_gemm
namespace blasdx {

// Store the box of `map` at coordinates (x, y, z) (innermost first) from shared memory at `from`, in a bulk group.
__device__ __forceinline__ void tensor_store(const tensor_map& map, const void* from, int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, { %1, %2, %3 }], [%4];"
               ::"l"(reinterpret_cast<unsigned long long>(&map)), "r"(x), "r"(y), "r"(z), "r"(shared_address(from))
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most `Pending` of this thread's bulk groups still read their shared memory.
template <int Pending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(Pending) : "memory");
}

}  // namespace blasdx

namespace blasdx_block_gemm {

// A box of C: the rows of a warpgroup's wgmma tile, c_box_swizzle bytes of each (c_box_cols values), swizzled as
// the tensor map says; c_buffers of them a warpgroup (two: a box is written while the store of the one before reads).
constexpr int c_buffers = 1;  // GridPlan.c_staging_buffers
constexpr int c_box_swizzle = 128, c_box_cols = c_box_swizzle / static_cast<int>(sizeof(c_t));
constexpr int c_box_rows = tile_m, c_box_bytes = c_box_rows * c_box_swizzle, c_boxes = tile_n / c_box_cols;
constexpr unsigned c_staging_offset = 196608;  // GridPlan.c_staging_offset
// Instruction tiles j of a box, and of them those whose C (beta != 0) a thread reads before it writes any: all of a
// box's reads at once spilled a kernel with hooks and a bias (float32 C, 96 registers a thread).
constexpr int c_box_tiles = c_box_cols / in_, c_read_tiles = c_box_tiles < 2 ? c_box_tiles : 2;
static_assert(pm == 1 && in_ % 2 == 0 && c_box_cols % in_ == 0 && tile_n % c_box_cols == 0 && c_box_rows == 64 &&
                  c_box_tiles % c_read_tiles == 0,
              "a warpgroup's tile is whole boxes of whole instruction tiles (blasdx.plan.grid.stores_c_by_tma)");

// The warpgroup's threads only (barriers 2 .., one a warpgroup; 1 is the tile's).
__device__ __forceinline__ void warpgroup_sync(int group) { asm volatile("bar.sync %0, 128;" ::"r"(2 + group) : "memory"); }

// store_block_tile by TMA: C(row0 .., col0 ..) = c_store(alpha * acc + beta * c_load(C)) of batch item `item`, whose
// C is `c` (read where beta != 0, c_read_tiles instruction tiles of a box at a time, the first before the box waits
// for its buffer).
// `boxes` counts the boxes this thread's warpgroup stored so far (over the block's tiles): box b goes through buffer
// b % c_buffers, once the store of box b - c_buffers has read it. Values past the problem's edges are not computed (the hooks read
// nothing there); TMA writes nothing of them.
template <class CLoad, class CStore>
__device__ __forceinline__ void store_block_tile_tma(const accumulator& acc, const blasdx::tensor_map& c_map, const c_t* c,
                                                     int item, int row0, int col0, unsigned char* smem, unsigned& boxes,
                                                     const scalar_t& alpha, const scalar_t& beta, const CLoad& c_load,
                                                     const CStore& c_store) {
  const int rows = rows_inside(row0), cols = cols_inside(col0);
  const c_t* c_tile = c + c_global(row0, col0);
  const bool reads_c = !blasdx::is_zero(beta);
  const worker w(acc.rank);
  const int group = acc.rank / 128;
  const bool elected = blasdx::thread_rank() % 128 == 0;  // (store_tail's)
  unsigned char* staging = smem + c_staging_offset + group * c_buffers * c_box_bytes;
#pragma unroll
  for (int p = 0; p < passes; ++p) {
    if (!has_tile(acc, p)) continue;  // (the same for the whole warpgroup)
    const tile_accumulator& values = acc.tile[p];
    const tile_position at = tile_origin(first_tile(acc.rank) + p * tile_step);
#pragma unroll
    for (int box = 0; box < c_boxes; ++box, ++boxes) {
      unsigned char* buffer = staging + boxes % c_buffers * c_box_bytes;
#pragma unroll
      for (int jj0 = 0; jj0 < c_box_tiles; jj0 += c_read_tiles) {
        c_pair_t olds[c_read_tiles][c_vals / 2] = {};  // C where beta != 0, c_read_tiles instruction tiles in flight
        if (reads_c)
#pragma unroll
          for (int jj = 0; jj < c_read_tiles; ++jj)
#pragma unroll
            for (int v = 0; v < c_vals; v += 2) {
              const int r = at.m0 + w.row0 + c_row(v, w.g, w.t);
              const int col = at.n0 + (box * c_box_tiles + jj0 + jj) * in_ + c_col(v, w.g, w.t);
              if (r < rows && col + 1 < cols) olds[jj][v / 2] = *reinterpret_cast<const c_pair_t*>(c_tile + c_global(r, col));
              else if (r < rows && col < cols) olds[jj][v / 2].x = c_tile[c_global(r, col)];
            }
        if (jj0 == 0) {  // (the first reads in flight meanwhile)
          if (elected) blasdx::bulk_wait_read<c_buffers - 1>();  // the store c_buffers boxes ago has read this buffer
          warpgroup_sync(group);
        }
#pragma unroll
        for (int jj = 0; jj < c_read_tiles; ++jj)
#pragma unroll
          for (int v = 0; v < c_vals; v += 2) {
            const int j = box * c_box_tiles + jj0 + jj;
            const int r = at.m0 + w.row0 + c_row(v, w.g, w.t), col = at.n0 + j * in_ + c_col(v, w.g, w.t);
            const c_pair_t& old = olds[jj][v / 2];
            c_pair_t out{};
            if (r < rows && col < cols) out.x = epilogue(r, col, values[0][j][v], old.x, alpha, beta, c_load, c_store);
            if (r < rows && col + 1 < cols) out.y = epilogue(r, col + 1, values[0][j][v + 1], old.y, alpha, beta, c_load, c_store);
            const int byte = (col - at.n0 - box * c_box_cols) * static_cast<int>(sizeof(c_t));
            *reinterpret_cast<c_pair_t*>(buffer + blasdx::swizzled_offset<c_box_swizzle, c_box_rows>(r - at.m0, byte)) = out;
          }
      }
      blasdx::fence_async_shared();  // the writes, seen by the TMA store
      warpgroup_sync(group);
      if (elected) {
        blasdx::tensor_store(c_map, buffer, col0 + at.n0 + box * c_box_cols, row0 + at.m0, item);
        blasdx::bulk_commit();
      }
    }
  }
}

// A consumer thread is done with its tiles: the stores it issued have read the shared memory, which ends with the block.
__device__ __forceinline__ void store_tail() {
  if (blasdx::thread_rank() % 128 == 0) blasdx::bulk_wait_read<0>();
}

}  // namespace blasdx_block_gemm
// The grid kernel behind execute() of a Grid() descriptor: a persistent grid whose blocks walk
// the (batch item, tile, split) triples, item i being A + i*stride_a, ...; each tile's K loop is
// blasdx_block_gemm::consume_range (TMA), its epilogue blasdx_block_gemm::store_block_tile with the hooks.
// splits is 1: this problem has tiles enough for the GPU (blasdx.plan.GridPlan.split_k).
// A and B come by TMA (blasdx_block_gemm::produce_range, from the tensor maps a_map and b_map): the last
// warpgroup of the block (threads 512 ..) is the producer, the tile's 512 threads consume.
// Parameters: blasdx.plan.kernel.KERNEL_PARAMETERS (BIAS_PARAMETERS, SCALE_PARAMETERS, GRID_PARAMETERS, TMA_PARAMETERS), in that order.
static_assert(sizeof(blasdx_block_gemm::acc_value_t) == 4 && blasdx_block_gemm::accumulator::size == 64,
              "split-K's workspace is sized for this accumulator (blasdx.plan.GridPlan.workspace_bytes)");
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(640, 1) blasdx_grid_sm900_bf16bf16f32_4096x4096x4096_rcr_tile256x128x64_s4_t640_7aee44a6(
const void* a, const void* b, void* c, blasdx_block_gemm::scalar_t alpha, blasdx_block_gemm::scalar_t beta, long long batch, long long stride_a, long long stride_b, long long stride_c, long long splits, long long split_units, void* workspace, const __grid_constant__ blasdx::tensor_map a_map, const __grid_constant__ blasdx::tensor_map b_map, const __grid_constant__ blasdx::tensor_map c_map) {
  using namespace blasdx_block_gemm;
  extern __shared__ __align__(1024) unsigned char smem[];
  const long long tiles = batch * block_tiles;
  const int parts = static_cast<int>(splits);
  __shared__ unsigned long long landed[stages], freed[stages];  // per stage: its copies landed; its multiply is done
  if (blasdx::thread_rank() == 0) {
    for (int s = 0; s < stages; ++s) {
      blasdx::mbarrier_init(landed + s, 1);
      blasdx::mbarrier_init(freed + s, consumer_warps);
    }
    blasdx::mbarrier_init_fence();
  }
  __syncthreads();
  blasdx::cluster_sync();  // the other block's barriers are ready too, before any copy or arrival reaches them
  const unsigned rank = blasdx::cluster_rank();
  unsigned step = 0;  // K tiles through the stages so far
  unsigned boxes_stored = 0;  // boxes of C this thread's warpgroup stored so far (store_block_tile_tma)
  if (blasdx::thread_rank() >= threads) {  // the producer warpgroup: one thread copies
    blasdx::set_registers<24, true>();
    if (blasdx::thread_rank() != threads) return;
    blasdx::prefetch_tensor_map(a_map);
    blasdx::prefetch_tensor_map(b_map);
  for (long long w = blockIdx.x / 2; w < batch * pair_tiles; w += gridDim.x / 2) {  // this cluster's pairs of tiles
    const long long item = w / pair_tiles;
    const int split = 0, tile_parts = parts;
    int row0, col0;
    pair_tile_origin(static_cast<int>(w - item * pair_tiles), rank, row0, col0);

      produce_range(a_map, b_map, static_cast<int>(item), row0, col0, split * k_tiles / tile_parts,
                    (split + 1) * k_tiles / tile_parts, step, landed, freed, smem, rank);
    }
    produce_tail(step, freed);
    return;
  }
  blasdx::set_registers<112, false>();
  for (long long w = blockIdx.x / 2; w < batch * pair_tiles; w += gridDim.x / 2) {  // this cluster's pairs of tiles
    const long long item = w / pair_tiles;
    const int split = 0, tile_parts = parts;
    int row0, col0;
    pair_tile_origin(static_cast<int>(w - item * pair_tiles), rank, row0, col0);

    accumulator acc = make_accumulator();
    consume_range(split * k_tiles / tile_parts, (split + 1) * k_tiles / tile_parts, step, landed, freed, smem, acc,
blasdx::identity{}, blasdx::identity{});
    store_block_tile_tma(acc, c_map, static_cast<const c_t*>(c) + item * stride_c, static_cast<int>(item), row0, col0, smem, boxes_stored, alpha, beta, blasdx::identity{}, blasdx::identity{});
  }
  store_tail();
}
