"""Where execute()'s host time goes, piece by piece, on a tiny batch (run on a GPU), with
CuPy arrays and with PyTorch tensors on the same memory:

    cd benchmarks && python profile_host.py
"""

from __future__ import annotations

import cupy
import numpy as np
from bench_gpu import per_call, tiny_case

from blasdx import pipeline
from blasdx.codegen.hooks import NO_FUSION
from blasdx.runtime.device import stream_handle, torch_stream_handle
from blasdx.runtime.launch import launch_signature


def main() -> None:
    import torch

    desc, a, b, c = tiny_case()
    plan = desc.plan
    fusion = NO_FUSION
    launches = pipeline.BOUND_LAUNCHES
    bound = launches.get(launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None).key)
    kernel = bound.kernel
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    desc.execute(ta, tb, tc)
    scalars = bound.scalar_bytes(1.0, 0.0, plan)
    handle = cupy.cuda.get_current_stream().ptr
    stream = cupy.cuda.get_current_stream()
    args = (np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.uint64(c.data.ptr), np.float32(1), np.float32(0),
            np.int64(2), np.int64(256), np.int64(256), np.int64(256))
    rows = {
        "descriptor.execute, cupy": lambda: desc.execute(a, b, c),
        "descriptor.execute, torch": lambda: desc.execute(ta, tb, tc),
        "pipeline.execute, cupy": lambda: pipeline.execute(plan, a, b, c, 1, 0),
        "pipeline.execute, torch": lambda: pipeline.execute(plan, ta, tb, tc, 1, 0),
        "BoundLaunch.launch": lambda: bound.launch(a.data.ptr, b.data.ptr, c.data.ptr, scalars, handle),
        "cupy Function call": lambda: kernel.function((2, 1, 1), kernel.compiled.block_dim, args,
                                                      shared_mem=kernel.compiled.shared_memory_size, stream=stream),
        "launch signature, cupy": lambda: launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None),
        "launch signature, torch": lambda: launch_signature(cupy.ndarray, torch.Tensor, plan, fusion, ta, tb, tc,
                                                            None),
        "scalar_bytes": lambda: bound.scalar_bytes(1.0, 0.0, plan),
        "getDevice": lambda: cupy.cuda.runtime.getDevice(),
        "stream handle, cupy": lambda: stream_handle(None),
        "stream handle, torch": lambda: torch_stream_handle(tc),
        "torch.cuda.current_stream": lambda: torch.cuda.current_stream(tc.device).cuda_stream,
    }
    best = dict.fromkeys(rows, float("inf"))
    for _ in range(5):  # rounds over every row, so that a slow moment of the machine hits each row once at most
        for name, fn in rows.items():
            best[name] = min(best[name], per_call(fn))
    for name, us in best.items():
        print(f"{name:30} {us:7.2f} us (best of 5)")


if __name__ == "__main__":
    main()
