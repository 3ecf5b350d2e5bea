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
    bound = launches.get(launch_signature(cupy.ndarray, None, plan, fusion, a, b, c, None)[0])
    kernel = bound.kernel
    ta, tb, tc = (torch.as_tensor(x, device="cuda") for x in (a, b, c))
    desc.execute(ta, tb, tc)
    scalars = bound.scalar_bytes(1.0, 0.0, plan)
    handle = cupy.cuda.get_current_stream().ptr
    stream = cupy.cuda.get_current_stream()
    args = (np.uint64(a.data.ptr), np.uint64(b.data.ptr), np.uint64(c.data.ptr), np.float32(1), np.float32(0),
            np.int64(2), np.int64(256), np.int64(256), np.int64(256))
    one_item = [x[:1] for x in (a, b, c)]  # peers_check.py's case: one item, alpha 1.0, beta 0.5
    t_one = [x[:1] for x in (ta, tb, tc)]
    desc.execute(*one_item, alpha=1.0, beta=0.5)
    desc.execute(*t_one, alpha=1.0, beta=0.5)
    raw = cupy.RawKernel(r'extern "C" __global__ void k(const float* a, const float* b, float* c, float x, float y) '
                         r'{ if (threadIdx.x == 0 && x == 12345.f) c[0] = a[0] + b[0] + y; }', "k")
    one, half = np.float32(1), np.float32(0.5)
    rows = {
        "execute 1 item, cupy": lambda: desc.execute(*one_item, alpha=1.0, beta=0.5),
        "execute 1 item, torch": lambda: desc.execute(*t_one, alpha=1.0, beta=0.5),
        "torch.bmm 1 item": lambda: torch.bmm(t_one[0], t_one[1], out=t_one[2]),
        "bare RawKernel": lambda: raw((1,), (32,), (one_item[0], one_item[1], one_item[2], one, half)),
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
    best = {name: (float("inf"), 0.0) for name in rows}
    for _ in range(5):  # rounds over every row, so that a slow moment of the machine hits each row once at most
        for name, fn in rows.items():
            best[name] = min(best[name], host_and_gpu(fn))
    print(f"{'':30} {'host us':>8} {'GPU us':>8}   per call, best of 5; GPU time near host time: the GPU bounds the rate")
    for name, (host, gpu) in best.items():
        print(f"{name:30} {host:8.2f} {gpu:8.2f}")


def host_and_gpu(fn, n: int = 3000) -> tuple[float, float]:
    """Host microseconds per call of ``fn`` (per_call: a loop of calls, then the device
    drained), and the GPU's microseconds per call when calls run back to back: 500 calls
    queued behind a 25 ms sleep kernel, timed by events. Where the second nears the first,
    the GPU and not the host bounds the loop."""
    import torch

    host = per_call(fn, n=n)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    cupy.cuda.Device().synchronize()
    torch.cuda._sleep(50_000_000)  # on the legacy default stream, which CuPy's events use too
    start.record()
    for _ in range(500):
        fn()
    end.record()
    end.synchronize()
    return host, cupy.cuda.get_elapsed_time(start, end) * 1e3 / 500


if __name__ == "__main__":
    main()
