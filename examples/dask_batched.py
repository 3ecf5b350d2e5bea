"""A batch of GEMMs spread over every GPU with Dask: NumPy chunks on the host, one dask-cuda
worker per GPU, GEMM.execute on each chunk of 512 items where it lands (blasdx.dask_gemm),
the result a Dask array of CuPy chunks. Checked against NumPy. Without dask-cuda it runs on
the current GPU through Dask's local scheduler. Needs dask (pip install "blasdx[cu13,dask]");
without it, or without a GPU, it compiles the kernel, says what it skipped and exits with status 0."""

from __future__ import annotations

import os

import numpy as np
from _support import GPU, check, skip_run, target_sm

from blasdx import SM, Arrangement, Block, Precision, Size

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off

GEMM = (Size(64, 64, 64) + Precision("float16", "float16", "float32")
        + Arrangement("row_major", "col_major", "row_major") + SM(800) + Block())


def main() -> None:
    try:
        import dask
        import dask.array as da

        import blasdx.dask_gemm
    except ImportError:
        GEMM.compile(arch=target_sm() or 900)
        return print("dask batched: compiled; needs dask (pip install 'blasdx[dask]'), not installed here, so not run")
    if not GPU:
        GEMM.compile(arch=target_sm() or 900)
        return skip_run("dask batched")

    rng = np.random.default_rng(0)
    batch = 8192
    a = rng.standard_normal((batch, 64, 64)).astype(np.float16)
    b = rng.standard_normal((batch, 64, 64)).astype(np.float16).transpose(0, 2, 1)  # column-major items
    bias = rng.standard_normal(64).astype(np.float32)
    da_a, da_b = (da.from_array(x, chunks=(512, -1, -1)) for x in (a, b))
    c = blasdx.dask_gemm.execute(GEMM, da_a, da_b, bias=bias, epilogue="relu")
    try:
        from dask_cuda import LocalCUDACluster
        from distributed import Client
    except ImportError:
        with dask.config.set(scheduler="synchronous"):
            result = c.compute().get()
        where = "the current GPU (no dask-cuda)"
    else:
        with LocalCUDACluster() as cluster, Client(cluster) as client:
            result = c.compute().get()
            where = f"{len(client.scheduler_info()['workers'])} dask-cuda worker(s)"
    ref = np.maximum(np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias, 0)
    check(f"dask batched ({batch} items in {len(da_a.chunks[0])} chunks on {where})", result, ref, 1e-3)


if __name__ == "__main__":
    main()
