// blasdx common device code: element types, conversions, complex arithmetic, mma.
// Included once per translation unit, however many block GEMMs it holds.
#ifndef BLASDX_COMMON_CUH
#define BLASDX_COMMON_CUH
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace blasdx {

template <class T>
struct alignas(2 * sizeof(T)) complex {
  using value_type = T;
  T x, y;
};

// Two neighbouring elements, moved as one access.
template <class T>
struct alignas(2 * sizeof(T)) pair {
  T x, y;
};

template <class T> struct is_complex { static constexpr bool value = false; };
template <class T> struct is_complex<complex<T>> { static constexpr bool value = true; };

template <class T> struct is_narrow_float { static constexpr bool value = false; };
template <> struct is_narrow_float<__half> { static constexpr bool value = true; };
template <> struct is_narrow_float<__nv_bfloat16> { static constexpr bool value = true; };
template <> struct is_narrow_float<__nv_fp8_e4m3> { static constexpr bool value = true; };
template <> struct is_narrow_float<__nv_fp8_e5m2> { static constexpr bool value = true; };

// Value conversion between storage, accumulator and scalar types. Narrow floating-point
// types go through float; complex converts part by part.
template <class To, class From>
__device__ __forceinline__ To convert(const From& v) {
  if constexpr (is_complex<To>::value && is_complex<From>::value) {
    using T = typename To::value_type;
    return To{convert<T>(v.x), convert<T>(v.y)};
  } else if constexpr (is_complex<To>::value) {
    using T = typename To::value_type;
    return To{convert<T>(v), convert<T>(0)};
  } else if constexpr (is_narrow_float<From>::value) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_narrow_float<To>::value) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <class T> __device__ __forceinline__ T zero() { return convert<T>(0); }

template <class T> __device__ __forceinline__ bool is_zero(const T& v) { return v == T(0); }
template <class T> __device__ __forceinline__ bool is_zero(const complex<T>& v) {
  return v.x == T(0) && v.y == T(0);
}

template <class T> __device__ __forceinline__ T conj(const T& v) { return v; }
template <class T> __device__ __forceinline__ complex<T> conj(const complex<T>& v) {
  return complex<T>{v.x, -v.y};
}

template <class T>
__device__ __forceinline__ complex<T> operator+(const complex<T>& p, const complex<T>& q) {
  return complex<T>{p.x + q.x, p.y + q.y};
}
template <class T>
__device__ __forceinline__ complex<T> operator-(const complex<T>& p, const complex<T>& q) {
  return complex<T>{p.x - q.x, p.y - q.y};
}
template <class T> __device__ __forceinline__ complex<T> operator-(const complex<T>& p) {
  return complex<T>{-p.x, -p.y};
}
template <class T>
__device__ __forceinline__ complex<T> operator*(const complex<T>& p, const complex<T>& q) {
  return complex<T>{p.x * q.x - p.y * q.y, p.x * q.y + p.y * q.x};
}

// acc + p * q
template <class T> __device__ __forceinline__ T mul_add(const T& p, const T& q, const T& acc) {
  return acc + p * q;
}
template <class T>
__device__ __forceinline__ complex<T> mul_add(const complex<T>& p, const complex<T>& q,
                                              const complex<T>& acc) {
  return complex<T>{acc.x + p.x * q.x - p.y * q.y, acc.y + p.x * q.y + p.y * q.x};
}

// --- Element-wise hooks (cuBLASDx's load and store functors) ---------------------------
template <class P, class Q> struct is_same { static constexpr bool value = false; };
template <class P> struct is_same<P, P> { static constexpr bool value = true; };
template <bool If, class Then, class Else> struct conditional { using type = Then; };
template <class Then, class Else> struct conditional<false, Then, Else> { using type = Else; };
template <class T> __device__ T&& declval();  // for unevaluated contexts only

// The type a hook computes in: float for the narrow floating-point types, else the type.
template <class T> struct compute { using type = T; };
template <> struct compute<__half> { using type = float; };
template <> struct compute<__nv_bfloat16> { using type = float; };
template <> struct compute<__nv_fp8_e4m3> { using type = float; };
template <> struct compute<__nv_fp8_e5m2> { using type = float; };
template <class T> struct compute<complex<T>> { using type = complex<typename compute<T>::type>; };

// The default hook: leaves values untouched and costs nothing.
struct identity {
  template <class T> __device__ __forceinline__ T operator()(const T& x) const { return x; }
};
// An action that does nothing (multiply_tile's default `between`).
struct no_action {
  __device__ __forceinline__ void operator()() const {}
};
// The scale of no partial sums: promoted as they are (wgmma_promoted's default).
struct unit_scale {
  __device__ __forceinline__ float operator()(int /* row */, int /* k0 */) const { return 1.0f; }
  // Its factors, for a K loop that reads them ahead and multiplies them as it promotes: A's of a row, B's.
  __device__ __forceinline__ float a_of(int /* row */) const { return 1.0f; }
  float b = 1.0f;
};
// The factors of one K tile's partial sums of a thread's two rows (r and r + 8 of its warp's 16) in the promoted K
// loop: A's of each row and B's (b before the tile's column b_split, b_next from it, where S::by_columns).
struct row_factors {
  float a_low, a_high, b, b_next;
  int b_split;
};
// unit_scale for every K tile of a K loop (the grid kernel's mainloop_range and consume_range take one
// scale a K tile: scales(kt)).
struct unit_scales {
  __device__ __forceinline__ unit_scale operator()(int /* kt */) const { return {}; }
  // A K loop's cursor over them (Scales::rows_from(kt, r): read() a K tile's factors, step() to the next): all 1.
  struct cursor {
    __device__ __forceinline__ row_factors read() const { return {1.0f, 1.0f, 1.0f, 1.0f, 0}; }
    __device__ __forceinline__ void step() {}
  };
  __device__ __forceinline__ cursor rows_from(int /* kt */, int /* r */) const { return {}; }
};
__host__ __device__ constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
// Whether a scale's B factor varies across the tile's columns (a Grid() tile over two column blocks of B's blockwise
// scales: S::by_columns, with a_of(row) and b_of(col)); else scale(row, k0) scales every column of a row alike.
template <class S, class = void> struct scales_by_columns { static constexpr bool value = false; };
template <class S> struct scales_by_columns<S, decltype(void(S::by_columns))> { static constexpr bool value = S::by_columns; };

// A load hook on one stored element: computed in compute<S>, stored back as S.
template <class S, class Op>
__device__ __forceinline__ S apply_load(const Op& op, const S& v) {
  if constexpr (is_same<Op, identity>::value) {
    return v;
  } else {
    return convert<S>(op(convert<typename compute<S>::type>(v)));
  }
}

// Whether a store hook takes the element's position: op(row, col, x).
template <class Op, class T, class = void> struct takes_position { static constexpr bool value = false; };
template <class Op, class T>
struct takes_position<Op, T, decltype(void(declval<const Op&>()(0, 0, declval<T>())))> {
  static constexpr bool value = true;
};

template <class Op, class T>
__device__ __forceinline__ T apply_store(const Op& op, int row, int col, const T& v) {
  if constexpr (is_same<Op, identity>::value) {
    return v;
  } else if constexpr (takes_position<Op, T>::value) {
    return op(row, col, v);
  } else {
    return op(v);
  }
}

template <class T> __device__ __forceinline__ T scale(const T& x, double re, double) {
  return x * static_cast<T>(re);
}
template <class T> __device__ __forceinline__ complex<T> scale(const complex<T>& x, double re, double im) {
  return x * complex<T>{static_cast<T>(re), static_cast<T>(im)};
}

// GELU, x * Phi(x), Phi the normal distribution (PyTorch's exact, erf form). In float:
// Phi(-|x|) = t 2^(q(t) - x^2 log2(e) / 2) with t = 1 / (1 + 0.4 |x|) and q a degree-8 polynomial
// fitted to it (relative error 9e-8 for |x| <= 14), and Phi(|x|) = 1 - Phi(-|x|). One branch and
// 17 instructions, where 0.5 x (1 + erff(x / sqrt(2))) takes about 30 and cancels for negative x,
// losing every digit below x = -5. Measured in float32: relative error at most 5e-7 for x > 0 and
// 1.4e-6 for x < 0, absolute 2e-12 where GELU is under 1e-6 (benchmarks/RESULTS.md). In double:
// erfc, which does not cancel.
__device__ __forceinline__ float gelu(float x) {
  float t;  // 1 / (1 + 0.4 |x|) >= 1: no denormal to care for
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.4f, fabsf(x), 1.0f)));
  float q = 2.739445567e-01f;
  q = fmaf(q, t, -1.402861476e+00f);
  q = fmaf(q, t, 2.801247358e+00f);
  q = fmaf(q, t, -2.515248060e+00f);
  q = fmaf(q, t, 7.742622495e-01f);
  q = fmaf(q, t, -2.584738135e-01f);
  q = fmaf(q, t, 5.360416770e-01f);
  q = fmaf(q, t, 1.438610315e+00f);
  q = fmaf(q, t, -2.647522688e+00f);
  float power;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(power) : "f"(fmaf(x * x, -0.72134752044448170f, q)));
  const float lower = t * power;  // Phi(-|x|)
  return x * (x < 0.0f ? lower : 1.0f - lower);
}
__device__ __forceinline__ double gelu(double x) { return 0.5 * x * erfc(x * -0.70710678118654752440); }
template <class T> __device__ __forceinline__ T gelu(const T& x) { return static_cast<T>(gelu(static_cast<float>(x))); }
template <class T> __device__ __forceinline__ T sigmoid(const T& x) { return T(1) / (T(1) + exp(-x)); }
template <class T> __device__ __forceinline__ T tanh(const T& x) { return ::tanh(x); }
// The same, called rather than inlined in double (the hooks' blasdx_activations in the kernels and Numba units of
// Grid() and Grouped() tiles): a grid tile's thread holds up to 64 values, whose 64 inlined copies of erfc, exp or
// tanh took ptxas seconds and spilled more. A block GEMM's kernels inline them: the call spilled the 32^3 float64
// batched kernel under NVRTC 12.
namespace called {
static __device__ __noinline__ double gelu(double x) { return blasdx::gelu(x); }
static __device__ __noinline__ double sigmoid(double x) { return blasdx::sigmoid(x); }
static __device__ __noinline__ double tanh(double x) { return blasdx::tanh(x); }
template <class T> __device__ __forceinline__ T gelu(const T& x) { return blasdx::gelu(x); }
template <class T> __device__ __forceinline__ T sigmoid(const T& x) { return blasdx::sigmoid(x); }
template <class T> __device__ __forceinline__ T tanh(const T& x) { return blasdx::tanh(x); }
}  // namespace called

// SiLU, x * sigmoid(x) = x / (1 + e^-x), the SwiGLU gate. In float by the fast exponential and divide (ex2.approx,
// rcp.approx: a few ulp); -x past 126 / log2(e) gives the denominator over 2^126, where __fdividef returns 0 (the
// exact value is under 1e-36). In double: exactly.
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }
__device__ __forceinline__ double silu(double x) { return x / (1.0 + exp(-x)); }
template <class T> __device__ __forceinline__ T silu(const T& x) { return static_cast<T>(silu(static_cast<float>(x))); }

// The largest finite value of a storage type, for satfinite.
template <class S> struct finite_max { static constexpr double value = 0; };
template <> struct finite_max<__half> { static constexpr double value = 65504.0; };
template <> struct finite_max<__nv_bfloat16> { static constexpr double value = 3.3895313892515355e38; };
template <> struct finite_max<__nv_fp8_e4m3> { static constexpr double value = 448.0; };
template <> struct finite_max<__nv_fp8_e5m2> { static constexpr double value = 57344.0; };
template <> struct finite_max<float> { static constexpr double value = 3.4028234663852886e38; };
template <> struct finite_max<double> { static constexpr double value = 1.7976931348623157e308; };
template <class S> struct finite_max<complex<S>> : finite_max<S> {};

// Saturate to the finite range of S, as WMMA's satf: +-inf and beyond to +-max, NaN to +0.
template <class S, class T> __device__ __forceinline__ T satfinite(const T& x) {
  const T hi = static_cast<T>(finite_max<S>::value);
  if (!(x == x)) return T(0);
  return x > hi ? hi : (x < -hi ? -hi : x);
}
template <class S, class T> __device__ __forceinline__ complex<T> satfinite(const complex<T>& x) {
  return complex<T>{satfinite<S>(x.x), satfinite<S>(x.y)};
}

// Raw bits of one mma operand element, zero-extended into the low bits of a word.
__device__ __forceinline__ unsigned operand_bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ unsigned operand_bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ unsigned operand_bits(__nv_fp8_e4m3 v) { return v.__x; }
__device__ __forceinline__ unsigned operand_bits(__nv_fp8_e5m2 v) { return v.__x; }
__device__ __forceinline__ unsigned operand_bits(signed char v) { return static_cast<unsigned char>(v); }
__device__ __forceinline__ unsigned operand_bits(unsigned char v) { return v; }
__device__ __forceinline__ unsigned operand_bits(float v) {  // float as tf32
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Whether shared-memory pointer p is aligned to Bytes. Tested on its shared-window address, not
// the generic one: for an __align__'d shared buffer plus a constant offset the compiler folds the
// test (a generic address adds the window's base, which it learns only at run time, every call).
template <unsigned Bytes>
__device__ __forceinline__ bool shared_aligned(const void* p) {
  return (shared_address(p) & (Bytes - 1)) == 0;
}

// Whether p, in shared or global memory, is aligned to Bytes: a shared p tested as by
// shared_aligned (the compiler folds the test where it knows p is shared).
template <unsigned Bytes>
__device__ __forceinline__ bool address_aligned(const void* p) {
  return __isShared(p) ? shared_aligned<Bytes>(p) : (reinterpret_cast<unsigned long long>(p) & (Bytes - 1)) == 0;
}

template <int Bytes> struct vector_of;
template <> struct vector_of<1> { using type = unsigned char; };
template <> struct vector_of<2> { using type = unsigned short; };
template <> struct vector_of<4> { using type = unsigned; };
template <> struct vector_of<8> { using type = uint2; };
template <> struct vector_of<16> { using type = uint4; };

// Byte offset of byte `inner` of stored row `outer` (of Outer rows) in the layout with
// Swizzle-byte rows that Hopper's wgmma reads: the rows' first Swizzle bytes one after
// another, then their next Swizzle bytes, and so on; within each run of eight rows, the
// 16-byte pieces of a row XOR-permuted by its place in the run (bits 4.. of the offset
// XOR bits 7..). The hardware permutes shared-memory addresses so: the layout must start on
// a multiple of 1024 bytes for the two to agree.
template <int Swizzle, int Outer>
__device__ __forceinline__ int swizzled_offset(int outer, int inner) {
  const int linear = inner / Swizzle * (Outer * Swizzle) + outer * Swizzle + inner % Swizzle;
  return linear ^ (((linear >> 7) & (Swizzle / 16 - 1)) << 4);
}

// Copy `Outer` runs of `InnerBytes` bytes, `src_ld` bytes apart in the source and `dst_ld`
// bytes apart in the destination (multiples of Bytes; constants where the caller's are),
// `Bytes` at a time, by the first `Threads` threads of the block. Async uses cp.async
// (sm_80+); wait with copy_wait.
// Swizzle > 0: the destination is in that swizzled layout (dst_ld unused); Bytes <= 16
// keeps each copy inside one 16-byte piece. 16-byte cp.async leave the data in L2 only (.cg:
// a stream read once) unless ThroughL1 (.ca, as plain loads: blocks of an SM that read the same
// tile find it there).
template <int Outer, int InnerBytes, int Bytes, int Threads, bool Async, int Swizzle = 0, bool ThroughL1 = false,
          class SrcLd, class DstLd>
__device__ __forceinline__ void copy_runs(const void* src, SrcLd src_ld, void* dst, DstLd dst_ld, int rank) {
  using vec = typename vector_of<Bytes>::type;
  constexpr int per_run = InnerBytes / Bytes, total = Outer * per_run;
  constexpr int rounds = (total + Threads - 1) / Threads;
  // Where Threads is a multiple of per_run, a thread keeps its place in a run and moves on
  // Threads / per_run runs each round: past the first round the offsets are constants.
  constexpr bool same_place = Threads % per_run == 0;
  if (rank >= Threads) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
#pragma unroll (rounds <= 16 ? rounds : 4)
  for (int round = 0; round < rounds; ++round) {
    const int i = rank + round * Threads;
    if (total % Threads != 0 && i >= total) break;
    const int run = same_place ? rank / per_run + round * (Threads / per_run) : i / per_run;
    const int within = (same_place ? rank % per_run : i % per_run) * Bytes;
    const char* from = s + run * src_ld + within;
    char* to = d + (Swizzle ? swizzled_offset<(Swizzle ? Swizzle : 16), Outer>(run, within) : run * dst_ld + within);
#if __CUDA_ARCH__ >= 800
    if constexpr (Async && Bytes == 16 && ThroughL1) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(shared_address(to)), "l"(from));
      continue;
    } else if constexpr (Async && Bytes == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(to)), "l"(from));
      continue;
    } else if constexpr (Async && Bytes >= 4) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(shared_address(to)), "l"(from),
                   "n"(Bytes));
      continue;
    }
#endif
    *reinterpret_cast<vec*>(to) = *reinterpret_cast<const vec*>(from);
  }
}

// copy_runs for the first `outer_valid` runs and the first `inner_valid` bytes of each (an edge
// tile of a larger matrix); the rest of the destination becomes zero. With Async, cp.async
// zero-fills past the bytes it reads; otherwise a piece cut by the bound goes byte by byte.
template <int Outer, int InnerBytes, int Bytes, int Threads, bool Async, int Swizzle = 0, bool ThroughL1 = false,
          class SrcLd, class DstLd>
__device__ __forceinline__ void copy_runs_partial(const void* src, SrcLd src_ld, void* dst, DstLd dst_ld, int rank,
                                                  int outer_valid, int inner_valid) {
  using vec = typename vector_of<Bytes>::type;
  constexpr int per_run = InnerBytes / Bytes, total = Outer * per_run;
  if (rank >= Threads) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (int i = rank; i < total; i += Threads) {
    const int run = i / per_run, within = i % per_run * Bytes;
    char* to = d + (Swizzle ? swizzled_offset<(Swizzle ? Swizzle : 16), Outer>(run, within) : run * dst_ld + within);
    const int left = inner_valid - within;
    const int valid = run < outer_valid ? (left < 0 ? 0 : left > Bytes ? Bytes : left) : 0;  // bytes to read
    const char* from = valid ? s + run * src_ld + within : s;  // nothing is read where valid == 0
#if __CUDA_ARCH__ >= 800
    if constexpr (Async && Bytes == 16 && ThroughL1) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(to)), "l"(from), "r"(valid));
      continue;
    } else if constexpr (Async && Bytes == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(to)), "l"(from), "r"(valid));
      continue;
    } else if constexpr (Async && Bytes >= 4) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(shared_address(to)), "l"(from), "n"(Bytes),
                   "r"(valid));
      continue;
    }
#endif
    if (valid == Bytes) {
      *reinterpret_cast<vec*>(to) = *reinterpret_cast<const vec*>(from);
    } else {
#pragma unroll
      for (int b = 0; b < Bytes; ++b) to[b] = b < valid ? from[b] : 0;
    }
  }
}

// Make this thread's writes to shared memory visible to the asynchronous proxy that
// wgmma reads shared memory through (sm_90+).
__device__ __forceinline__ void fence_async_shared() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Wait for this thread's cp.async copies, then for the whole block (with WarpOnly, the warp); with
// ForWgmma, what the block wrote to shared memory is then visible to wgmma too.
template <bool ForWgmma = false, bool WarpOnly = false>
__device__ __forceinline__ void copy_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
  if constexpr (ForWgmma) fence_async_shared();
  if constexpr (WarpOnly) __syncwarp(); else __syncthreads();
}

// Close this thread's group of cp.async copies started since the last commit.
__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Wait until at most `Pending` of this thread's committed copy groups are still running,
// then synchronize the block (with ForWgmma, the copies done visible to wgmma too).
template <int Pending, bool ForWgmma = false>
__device__ __forceinline__ void copy_wait_prior() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
  if constexpr (ForWgmma) fence_async_shared();
  __syncthreads();
}

// v with its bytes from `valid` (0..16) on zero.
__device__ __forceinline__ uint4 first_bytes(uint4 v, int valid) {
  unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int keep = valid - 4 * i;
    w[i] = keep >= 4 ? w[i] : keep <= 0 ? 0u : w[i] & ((1u << (8 * keep)) - 1u);
  }
  return v;
}

// copy_runs (and copy_runs_partial, with outer_valid and inner_valid) 16 bytes at a time from a
// source whose runs need not start on 16-byte boundaries: a run-time leading dimension or pointer
// that wide copies do not divide, where elements of 1 or 2 bytes would otherwise move one by one
// and synchronously. Each 16-byte piece is put together from the five aligned 4-byte words it
// straddles (funnel shifts), reading only words that hold a byte the copy needs, so no read leaves
// the pages the matrix lies in. The loads of up to 8 rounds are in flight at once; the copy is
// synchronous. InnerBytes, and dst_ld without Swizzle, are multiples of 16 bytes; bytes past
// inner_valid become zero.
template <int Outer, int InnerBytes, int Threads, int Swizzle = 0, class SrcLd, class DstLd>
__device__ __forceinline__ void copy_runs_shifted(const void* src, SrcLd src_ld, void* dst, DstLd dst_ld, int rank,
                                                  int outer_valid = Outer, int inner_valid = InnerBytes) {
  static_assert(InnerBytes % 16 == 0, "runs of whole 16-byte pieces");
  constexpr int per_run = InnerBytes / 16, total = Outer * per_run;
  constexpr int rounds = (total + Threads - 1) / Threads, batch = rounds < 8 ? rounds : 8;
  if (rank >= Threads) return;
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
#pragma unroll (rounds <= 16 ? (rounds + batch - 1) / batch : 1)
  for (int first = 0; first < rounds; first += batch) {
    unsigned words[batch][5];
    int shift[batch], valid[batch];
#pragma unroll
    for (int j = 0; j < batch; ++j) {  // every load of the batch first
      const int i = rank + (first + j) * Threads, run = i / per_run, within = i % per_run * 16;
      const int left = inner_valid - within;
      valid[j] = first + j < rounds && i < total && run < outer_valid ? (left < 0 ? 0 : left > 16 ? 16 : left) : 0;
      const char* from = s + run * src_ld + within;
      shift[j] = static_cast<int>(reinterpret_cast<unsigned long long>(from) & 3);
      const unsigned* word = reinterpret_cast<const unsigned*>(from - shift[j]);
#pragma unroll
      for (int w = 0; w < 5; ++w)  // word w holds bytes 4w - shift .. 4w - shift + 3 of the piece
        words[j][w] = 4 * w - shift[j] < valid[j] && (w < 4 || shift[j] != 0) ? word[w] : 0u;
    }
#pragma unroll
    for (int j = 0; j < batch; ++j) {
      const int i = rank + (first + j) * Threads, run = i / per_run, within = i % per_run * 16;
      if (first + j >= rounds || i >= total) break;
      char* to = d + (Swizzle ? swizzled_offset<(Swizzle ? Swizzle : 16), Outer>(run, within) : run * dst_ld + within);
      const int bits = shift[j] * 8;
      const uint4 piece = make_uint4(__funnelshift_r(words[j][0], words[j][1], bits), __funnelshift_r(words[j][1], words[j][2], bits),
                                     __funnelshift_r(words[j][2], words[j][3], bits), __funnelshift_r(words[j][3], words[j][4], bits));
      *reinterpret_cast<uint4*>(to) = first_bytes(piece, valid[j]);
    }
  }
}

// *p = v in global memory as one store instruction of sizeof(T) bytes (16, 8 or 4; others as
// written): NVVM splits some aggregate stores into their elements (a float4 of the FMA epilogue
// went out as four st.global.f32, a pair of doubles as two st.global.f64, a pair of halves as
// two st.global.u16).
template <class T>
__device__ __forceinline__ void store_global(T* p, const T& v) {
  if constexpr (sizeof(T) == 16) {
    uint4 u;
    memcpy(&u, &v, sizeof(u));
    asm volatile("st.global.v4.b32 [%0], { %1, %2, %3, %4 };" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w) : "memory");
  } else if constexpr (sizeof(T) == 8) {
    uint2 u;
    memcpy(&u, &v, sizeof(u));
    asm volatile("st.global.v2.b32 [%0], { %1, %2 };" ::"l"(p), "r"(u.x), "r"(u.y) : "memory");
  } else if constexpr (sizeof(T) == 4) {
    unsigned u;
    memcpy(&u, &v, sizeof(u));
    asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(u) : "memory");
  } else {
    *p = v;
  }
}

// *p through the read-only data path (ld.global.nc), for data nothing writes while the kernel
// runs (a bias): unlike a plain load, the compiler may move it ahead of earlier stores, so an
// epilogue's loads need not each wait for the stores before them.
template <class T>
__device__ __forceinline__ T load_read_only(const T* p) {
  using word = typename vector_of<sizeof(T)>::type;
  const word bits = __ldg(reinterpret_cast<const word*>(p));
  T v;
  memcpy(&v, &bits, sizeof(T));
  return v;
}

__device__ __forceinline__ int thread_rank() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

}  // namespace blasdx
#endif  // BLASDX_COMMON_CUH
