"""A small MLP per item, one item a warp: Y_i = relu(X_i @ W1_i) @ W2_i for thousands of items, each of
whose 16-row GEMMs one warp runs on its own with Warp() descriptors (each warp of a block its own GEMMs, its
own tiles in shared memory, no block-wide barrier). The hidden layer stays in the warp's shared memory:
the first GEMM's C (relu applied by its c_store hook) is the second GEMM's A, in the same layout.

Two descriptors live in one kernel under two names (layer1, layer2)."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run, target_sm

import blasdx
from blasdx import SM, Arrangement, Precision, Size, Warp

ROWS, IN, HIDDEN, OUT = 16, 64, 32, 16
WARPS = 4  # a block's warps, an item each

KERNEL = r'''
struct relu {
  template <class T> __device__ __forceinline__ T operator()(T x) const { return x > T(0) ? x : T(0); }
};

// Each warp owns `per_warp` bytes of shared memory: layer1's A, B and C (the hidden layer), then layer2's B.
constexpr unsigned per_warp = layer1::shared_memory_size + layer2::shared_memory_size_ab;

extern "C" __global__ void warp_mlp(const layer1::a_t* x, const layer1::b_t* w1, const layer2::b_t* w2,
                                    layer2::c_t* y, long long items) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = layer1::warp_index();
  unsigned char* mine = smem + warp * per_warp;
  const layer1::shared_tiles first = layer1::warp_tiles(mine, 0);  // the first (and only) layer1 GEMM at `mine`
  auto* w2_tile = reinterpret_cast<layer2::b_t*>(mine + layer1::shared_memory_size + layer2::b_offset);
  for (long long item = static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + warp; item < items;
       item += static_cast<long long>(gridDim.x) * (blockDim.x / 32)) {
    layer1::load_a(x + item * layer1::m * layer1::k, first.a);
    layer1::load_b(w1 + item * layer1::k * layer1::n, first.b);
    layer2::load_b(w2 + item * layer2::k * layer2::n, w2_tile);
    layer1::copy_wait();  // this warp's copies, for this warp
    // hidden = relu(X W1), into layer1's C: layer2's A in the same layout
    layer1::execute(1.0f, first.a, first.b, 0.0f, first.c, blasdx::identity{}, blasdx::identity{},
                    blasdx::identity{}, relu{});
    layer2::accumulator acc = layer2::make_accumulator();
    layer2::multiply(first.c, w2_tile, acc);
    layer2::store(acc, y + item * layer2::m * layer2::n, layer2::global_ldc, 1.0f, 0.0f);
    layer1::gemm_sync();  // the warp is done with its tiles before the next item loads them
  }
}
'''


def descriptors(sm: int = 900):
    rr = Arrangement("row_major", "row_major", "row_major")
    layer1 = Size(ROWS, HIDDEN, IN) + Precision("float16") + rr + SM(sm) + Warp()
    layer2 = Size(ROWS, OUT, HIDDEN) + Precision("float16", "float16", "float32") + rr + SM(sm) + Warp()
    assert layer1.leading_dimension.c == layer2.leading_dimension.a  # the hidden layer is read where it lies
    return layer1, layer2


def main() -> None:
    layer1, layer2 = descriptors()
    source = layer1.device_source("layer1") + layer2.device_source("layer2") + KERNEL
    kernel = blasdx.compile_kernel(source, "warp_mlp", sm=target_sm())
    if not GPU:
        return skip_run("MLP per warp")
    import cupy

    rng = np.random.default_rng(0)
    items = 10_000
    x = rng.standard_normal((items, ROWS, IN)).astype(np.float16)
    w1 = (rng.standard_normal((items, IN, HIDDEN)) / 8).astype(np.float16)
    w2 = (rng.standard_normal((items, HIDDEN, OUT)) / 4).astype(np.float16)
    y = cupy.full((items, ROWS, OUT), np.nan, dtype=np.float32)
    per_warp = layer1.shared_memory_size + layer2.shared_memory_size_ab
    kernel(min(-(-items // WARPS), 4096), (32 * WARPS, 1, 1),
           (cupy.asarray(x), cupy.asarray(w1), cupy.asarray(w2), y, np.int64(items)), shared_mem=WARPS * per_warp)
    hidden = np.maximum(np.matmul(x.astype(np.float64), w1), 0).astype(np.float16)  # the hidden layer is float16
    check(f"MLP per warp ({items} items, {WARPS} warps a block)", y.get(), np.matmul(hidden.astype(np.float64), w2),
          2e-3)


if __name__ == "__main__":
    main()
