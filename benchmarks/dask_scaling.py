"""Throughput of blasdx.dask_gemm on 1 and 2 GPUs (dask_cuda.LocalCUDACluster, one worker
per GPU), for a batch resident on the GPUs: ``--gib`` GiB of A, B and C per GPU, generated
on the workers and persisted before timing. Each timing is ``execute(...).persist()`` and a
wait, best of ``--rounds``. Run on a machine with two GPUs:

    NCCL_NVLS_ENABLE=0 python benchmarks/dask_scaling.py --gib 16
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off

import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402

import blasdx.dask_gemm as dg  # noqa: E402
from blasdx import SM, Arrangement, Block, Precision, Size  # noqa: E402

N = 128  # 128^3 float32 GEMMs (FMA): enough work per byte that the GPUs, not Dask, set the time
GEMM = Size(N, N, N) + Precision("float32") + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block()


def _random_chunk(salt: int = 0, block_info=None):
    import cupy

    where = block_info[None]
    rng = cupy.random.default_rng(2 * where["chunk-location"][0] + salt)
    return rng.standard_normal(where["chunk-shape"], dtype=np.float32)


def _random_beside(x, block_info=None):
    """A random chunk of x's shape, made where x is (a task that takes x runs beside it)."""
    return _random_chunk(1, {None: block_info[None]})


def resident(batch: int, chunk: int):
    """A and B of ``batch`` items, random, made on the workers' GPUs and persisted; each chunk
    of B is made beside the chunk of A of the same items."""
    import cupy

    meta = cupy.empty((0, 0, 0), np.float32)
    chunks = ((chunk,) * (batch // chunk), (N,), (N,))
    a = da.map_blocks(_random_chunk, chunks=chunks, dtype=np.float32, meta=meta).persist()
    b = a.map_blocks(_random_beside, dtype=np.float32, meta=meta).persist()
    return a, b


def measure(gpus: int, gib: float, rounds: int) -> dict:
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait

    item_bytes = 3 * N * N * 4  # A, B and C
    per_gpu = int(gib * 2**30 // item_bytes)
    chunk = max(1, per_gpu // 8)
    batch = per_gpu * gpus // chunk * chunk
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(gpus)), n_workers=gpus) as cluster, Client(cluster):
        a, b = resident(batch, chunk)
        wait([a, b])
        wait(dg.execute(GEMM, a, b).persist())  # compile and warm up on every worker
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            c = dg.execute(GEMM, a, b).persist()
            wait(c)
            best = min(best, time.perf_counter() - start)
            del c
    flops = 2 * N**3 * batch
    return {"gpus": gpus, "batch": batch, "GiB per GPU": batch * item_bytes / gpus / 2**30, "s": best,
            "TFLOP/s": flops / best / 1e12}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=16.0, help="GiB of A, B and C per GPU")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = [measure(g, args.gib, args.rounds) for g in (1, 2)]
    for r in rows:
        print(f"{r['gpus']} GPU(s): {r['batch']} items, {r['GiB per GPU']:.1f} GiB per GPU, {r['s']:.3f} s, "
              f"{r['TFLOP/s']:.1f} TFLOP/s")
    print(f"2 GPUs / 1 GPU throughput: {rows[1]['TFLOP/s'] / rows[0]['TFLOP/s']:.2f}x")


if __name__ == "__main__":
    main()
