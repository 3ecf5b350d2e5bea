"""A mixture-of-experts layer's down projection and combine in one Numba kernel on a Grouped() descriptor's
scheduler: the rows of every expert (group g: rows offsets[g - 1] .. offsets[g] of the routed activations) times
expert g's weights, each row's product weighted by its router probability and added to its token's output in a
Python epilogue. The offsets stay on the device (schedule_groups reads them); the products never reach memory.

blasdx.numba.device_api(GROUPED) gives the groups' scheduler of its device_source() as Numba functions
(make_schedule, schedule_groups, tile_of_groups, group_mainloop); checked against a float64 NumPy loop over the
experts. Needs an SM 90 GPU (Grouped() tiles are Hopper's wgmma); without one it compiles the device API only."""

from __future__ import annotations

import numpy as np
from _support import GPU, check, skip_run

from blasdx import SM, Arrangement, Grouped, Precision, Size, UnsupportedError

TOKENS, HIDDEN, INTER, EXPERTS, TOP = 1024, 512, 768, 16, 2


def descriptor():
    """The down projection: (rows, INTER) activations times each expert's (INTER, HIDDEN) weights, column-major."""
    return (Size(TOKENS * TOP // EXPERTS, HIDDEN, INTER) + Precision("bfloat16", "bfloat16", "float32")
            + Arrangement("row_major", "col_major", "row_major") + SM(900) + Grouped())


def bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """x rounded toward zero to bfloat16, as the raw uint16 bits Numba passes (blasdx.numba.ARRAY_DTYPES)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def main() -> None:
    try:
        from numba import cuda
        from numba.core import types

        import blasdx.numba
    except (ImportError, UnsupportedError) as exc:
        return print(f"numba grouped gemm: needs numba-cuda (pip install 'blasdx[numba-cu13]'), not installed here, "
                     f"so not run ({exc})")
    hopper = GPU and cuda.get_current_device().compute_capability == (9, 0)
    g = blasdx.numba.device_api(descriptor(), arch=None if hopper else 900)
    print(f"numba grouped gemm: tiles of {g.m}x{g.n}, {g.k_tiles} K tiles of {g.k}, up to {g.max_groups} groups, "
          f"{g.stages} stages ({g.shared_memory_size} bytes of shared memory, {g.schedule_size} of schedule)")
    if not hopper:
        return skip_run("numba grouped gemm (an SM 90 GPU)")

    def down_combine(a, b, offsets, groups, rows, token_of_row, weight_of_row, out):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)  # g.stages stages of A and B
        schedule = g.make_schedule()  # the groups' tile rows, in shared memory
        g.schedule_groups(offsets, groups, rows, schedule)  # every thread of the block
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            at = g.tile_of_groups(w, schedule, groups)
            expert, row0, col0, expert_rows = at
            cols = g.cols_inside(col0)
            acc = g.make_accumulator()
            g.group_mainloop(a, b[expert * g.b_group_size:], at, smem, acc)  # acc = A(rows of at) @ B_expert
            for i in range(g.accumulator_size):  # out[token] += weight * product, for the expert's rows alone
                r = g.row(i)
                col = g.col(i)
                if g.in_bounds(i) and r < expert_rows and col < cols:
                    row = row0 + r
                    cuda.atomic.add(out, token_of_row[row] * g.problem_n + col0 + col, weight_of_row[row] * acc[i])

    kernel = cuda.jit(down_combine)
    kernel.compile((types.uint16[::1], types.uint16[::1], types.int32[::1], types.int64, types.int64,
                    types.int32[::1], types.float32[::1], types.float32[::1]))
    blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)  # over Numba's 48 KiB

    rng = np.random.default_rng(0)
    experts = np.stack([rng.choice(EXPERTS, TOP, replace=False) for _ in range(TOKENS)])  # each token's experts
    weights = rng.random((TOKENS, TOP)).astype(np.float32)
    order = np.argsort(experts.ravel(), kind="stable")  # rows by expert
    token_of_row, weight_of_row = (order // TOP).astype(np.int32), weights.ravel()[order]
    offsets = np.cumsum(np.bincount(experts.ravel(), minlength=EXPERTS)).astype(np.int32)
    rows = TOKENS * TOP
    a = bfloat16_bits(rng.standard_normal((rows, INTER)))  # the activations, already permuted
    b = bfloat16_bits(rng.standard_normal((EXPERTS, HIDDEN, INTER)) / INTER**0.5)  # each B (INTER, HIDDEN) col-major
    out = cuda.to_device(np.zeros(TOKENS * HIDDEN, np.float32))
    blocks = cuda.get_current_device().MULTIPROCESSOR_COUNT
    kernel[blocks, g.block_dim, 0, g.shared_memory_size](
        cuda.to_device(a.ravel()), cuda.to_device(b.ravel()), cuda.to_device(offsets), EXPERTS, rows,
        cuda.to_device(token_of_row), cuda.to_device(weight_of_row), out)

    ref = np.zeros((TOKENS, HIDDEN))
    x, w = from_bits(a), from_bits(b)
    begin = 0
    for e, end in enumerate(offsets):
        ref[token_of_row[begin:end]] += weight_of_row[begin:end, None] * (x[begin:end] @ w[e].T)
        begin = end
    check("numba grouped gemm, MoE down projection weighted and combined", out.copy_to_host().reshape(TOKENS, HIDDEN),
          ref, 1e-5)


if __name__ == "__main__":
    main()
