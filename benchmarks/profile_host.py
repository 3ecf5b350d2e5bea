"""Where execute()'s host time goes, piece by piece, on a tiny batch (run on a GPU):

    cd benchmarks && python profile_host.py
"""

from __future__ import annotations

import cupy
import numpy as np
from bench_gpu import per_call, tiny_case

from blasdx import pipeline
from blasdx.codegen.hooks import NO_FUSION
from blasdx.runtime.launch import launch_signature


def main() -> None:
    desc, a, b, c = tiny_case()
    plan = desc.plan
    kernel = desc.compile()
    fusion = NO_FUSION
    launches = pipeline.BOUND_LAUNCHES
    key = launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None).key
    bound = launches.get(key)
    stream = cupy.cuda.get_current_stream()
    args = (np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.uint64(c.data.ptr), np.float32(1), np.float32(0),
            *bound.batch_args)
    rows = {
        "descriptor.execute": lambda: desc.execute(a, b, c),
        "pipeline.execute": lambda: pipeline.execute(plan, a, b, c, 1, 0),
        "bare launch": lambda: kernel.function((2, 1, 1), kernel.compiled.block_dim, args,
                                               shared_mem=kernel.compiled.shared_memory_size, stream=stream),
        "bare launch, int pointers": lambda: kernel.function(
            (2, 1, 1), kernel.compiled.block_dim, (a.data.ptr, b.data.ptr, c.data.ptr, np.float32(1), np.float32(0),
                                                   *bound.batch_args),
            shared_mem=kernel.compiled.shared_memory_size, stream=stream),
        "bare launch, arrays": lambda: kernel.function(
            (2, 1, 1), kernel.compiled.block_dim, (a, b, c, np.float32(1), np.float32(0), *bound.batch_args),
            shared_mem=kernel.compiled.shared_memory_size, stream=stream),
        "launch signature": lambda: launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None),
        "signature + lookup": lambda: launches.get(launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None).key),
        "getDevice": lambda: cupy.cuda.runtime.getDevice(),
        "get_current_stream": lambda: cupy.cuda.get_current_stream(),
        "3 uint64 + 2 float32": lambda: (np.uint64(1), np.uint64(2), np.uint64(3), np.float32(1.0), np.float32(0.0)),
        "a.shape a.strides a.dtype": lambda: (a.shape, a.strides, a.dtype),
        "a.data.ptr": lambda: a.data.ptr,
        "import in function": lambda: __import__("blasdx.pipeline"),
    }
    for name, fn in rows.items():
        print(f"{name:30} {per_call(fn):7.2f} us")


if __name__ == "__main__":
    main()
