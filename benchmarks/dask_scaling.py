"""Throughput of blasdx.dask_gemm on 1 and 2 GPUs (one dask_cuda worker per GPU), on a batch made on
the GPUs beforehand. A pass takes a GPU less time than Dask takes to schedule it, so each timing runs
--repeats passes in one graph built before the clock starts, each C chunk reduced where it is made.

    NCCL_NVLS_ENABLE=0 python benchmarks/dask_scaling.py [--gib 16]   # on a machine with two GPUs
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from ab import report  # noqa: E402

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


def finished(x) -> None:
    """Wait for a persisted dask array; raise the first task's error if one failed."""
    from distributed import futures_of, wait

    futures = futures_of(x)
    wait(futures)
    for future in futures:
        if future.status != "finished":
            future.result()


def _synchronize() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _checksum(c):
    return c.sum(axis=(1, 2))


def passes(a, b, repeats: int, round_: int) -> list:
    """``repeats`` executes over the whole batch, each C chunk reduced where it is made.
    Each has its own alpha, so that no graph shares a key with another round's (Dask would
    reuse a result it still holds instead of running the GEMM again)."""
    return [dg.execute(GEMM, a, b, alpha=1.0 + r + repeats * round_)
            .map_blocks(_checksum, drop_axis=(1, 2), dtype=np.float32) for r in range(repeats)]


def measure(gpus: int, gib: float, rounds: int, repeats: int, chunks_per_gpu: int) -> dict:
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    item_bytes = 3 * N * N * 4  # A, B and C
    per_gpu = int(gib * 2**30 // item_bytes)
    chunk = max(1, per_gpu // chunks_per_gpu)  # few big tasks: the GPU, not Dask, sets the time
    batch = per_gpu * gpus // chunk * chunk
    with LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(gpus)), n_workers=gpus) as cluster, Client(cluster) as client:
        a, b = resident(batch, chunk)
        finished(a)
        finished(b)
        from distributed import futures_of

        placed = client.who_has(futures_of(a))
        per_worker = sorted(sum(1 for ws in placed.values() if w in ws) for w in {w for ws in placed.values() for w in ws})
        for sums in dask.persist(*passes(a, b, 1, -1)):  # compile and warm up on every worker
            finished(sums)
        client.run(_synchronize)
        best = float("inf")
        for round_ in range(rounds):
            graphs = passes(a, b, repeats, round_)  # built before the clock starts: only running them is timed
            start = time.perf_counter()
            for sums in dask.persist(*graphs):
                finished(sums)
            client.run(_synchronize)  # a task ends once its kernels are queued: wait for the GPUs too
            best = min(best, time.perf_counter() - start)
    flops = 2 * N**3 * batch * repeats
    return {"gpus": gpus, "batch": batch, "chunks of A per worker": per_worker, "GiB per GPU": batch * item_bytes / gpus / 2**30, "s": best,
            "TFLOP/s": flops / best / 1e12}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=16.0, help="GiB of A, B and C per GPU")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=60, help="executes over the whole batch per timing")
    parser.add_argument("--chunks-per-gpu", type=int, default=2)
    args = parser.parse_args()
    rows = [measure(g, args.gib, args.rounds, args.repeats, args.chunks_per_gpu) for g in (1, 2)]
    for r in rows:
        print(f"{r['gpus']} GPU(s): {r['batch']} items, {r['GiB per GPU']:.1f} GiB per GPU "
              f"(chunks of A per worker {r['chunks of A per worker']}), {r['s']:.3f} s, {r['TFLOP/s']:.1f} TFLOP/s")
    print(f"2 GPUs / 1 GPU throughput: {rows[1]['TFLOP/s'] / rows[0]['TFLOP/s']:.2f}x")
    report([(f"{r['gpus']} GPU(s)", r["TFLOP/s"], "TFLOP/s") for r in rows])


if __name__ == "__main__":
    main()
