"""A mixture-of-experts layer's last step in one kernel of your own, on a Grouped() descriptor's device API: the
down projection of every expert's rows (group g: rows offsets[g - 1] .. offsets[g] of the routed activations times
expert g's weights), each row's product weighted by its router probability and added to its token's output. The
products never reach memory and no un-permute pass follows (torch: torch._grouped_mm, then index_add of the weighted
rows). The scheduler is the one execute() runs (schedule_groups, tile_of_groups; the offsets stay on the device);
the K loop is group_mainloop. Checked against a float64 loop over the experts.

Needs an SM 90 GPU (Grouped() tiles are Hopper's wgmma); without one it compiles the kernel and exits with status 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from _support import GPU, check, skip_run

import blasdx
from blasdx import SM, Arrangement, Grouped, Precision, Size

TOKENS, HIDDEN, INTER, EXPERTS, TOP = 1024, 512, 768, 16, 2

KERNEL = r'''
// out[token_of_row[r]] += weight_of_row[r] * (A_g B_g)[r], for the rows r of every group g.
extern "C" __global__ void __launch_bounds__(g::threads)
moe_down_combine(const g::a_t* a, const g::b_t* b, const int* offsets, int groups, long long rows,
                 const int* token_of_row, const float* weight_of_row, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ g::group_schedule schedule;
  g::schedule_groups(offsets, groups, rows, schedule);
  const long long tiles = static_cast<long long>(g::block_tiles_n) * schedule.before[groups];
  for (long long w = blockIdx.x; w < tiles; w += gridDim.x) {
    const g::group_tile at = g::tile_of_groups(w, schedule, groups);
    g::accumulator acc = g::make_accumulator();
    g::group_mainloop(a, b + at.group * static_cast<long long>(g::problem_k) * g::problem_n, at, smem, acc);
    for (int i = 0; i < g::accumulator::size; ++i) {
      const int r = acc.row(i), col = at.col0 + acc.col(i);
      if (!acc.in_bounds(i) || r >= at.rows || col >= g::problem_n) continue;
      const int row = at.row0 + r;
      atomicAdd(out + static_cast<long long>(token_of_row[row]) * g::problem_n + col, weight_of_row[row] * acc[i]);
    }
  }
}
'''


def descriptor():
    """The down projection: (rows, INTER) activations times each expert's (INTER, HIDDEN) weights, column-major."""
    return (Size(TOKENS * TOP // EXPERTS, HIDDEN, INTER) + Precision("bfloat16", "bfloat16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grouped())


def main() -> None:
    down = descriptor()
    source = down.device_source("g") + KERNEL
    if not GPU:
        blasdx.compile_kernel(source, "moe_down_combine", sm=900)
        return skip_run("MoE down projection and combine (an SM 90 GPU)")
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        blasdx.compile_kernel(source, "moe_down_combine", sm=900)
        return skip_run("MoE down projection and combine (an SM 90 GPU)")
    rng = np.random.default_rng(0)
    experts = np.stack([rng.choice(EXPERTS, TOP, replace=False) for _ in range(TOKENS)])  # each token's experts
    weights = rng.random((TOKENS, TOP)).astype(np.float32)
    order = np.argsort(experts.ravel(), kind="stable")  # rows by expert
    token_of_row, weight_of_row = (order // TOP).astype(np.int32), weights.ravel()[order]
    offsets = np.cumsum(np.bincount(experts.ravel(), minlength=EXPERTS)).astype(np.int32)
    rows = TOKENS * TOP
    hidden = rng.standard_normal((rows, INTER)).astype(np.float32)  # the activations, already permuted
    w_down = (rng.standard_normal((EXPERTS, HIDDEN, INTER)) / INTER**0.5).astype(np.float32)  # (out, in) per expert

    bf16 = ml_dtypes.bfloat16
    a = cupy.asarray(hidden.astype(bf16).view(np.uint16))  # bfloat16 bits: the kernel reads g::a_t
    b = cupy.asarray(w_down.astype(bf16).view(np.uint16))  # (E, HIDDEN, INTER): each expert's B (INTER, HIDDEN) column-major
    out = cupy.zeros((TOKENS, HIDDEN), dtype=np.float32)
    kernel = blasdx.compile_kernel(source, "moe_down_combine")
    blocks = cupy.cuda.Device().attributes["MultiProcessorCount"]
    kernel((blocks,), down.block_dim, (a, b, cupy.asarray(offsets), np.int32(EXPERTS), np.int64(rows),
                                       cupy.asarray(token_of_row), cupy.asarray(weight_of_row), out),
           shared_mem=down.shared_memory_size)

    ref = np.zeros((TOKENS, HIDDEN))
    x, w = hidden.astype(bf16).astype(np.float64), w_down.astype(bf16).astype(np.float64)
    begin = 0
    for e, end in enumerate(offsets):
        ref[token_of_row[begin:end]] += weight_of_row[begin:end, None] * (x[begin:end] @ w[e].T)
        begin = end
    check("grouped down projection, weighted and combined in one kernel", out.get(), ref, 1e-5)


if __name__ == "__main__":
    main()
