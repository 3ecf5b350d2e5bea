"""blasdx.dask_gemm on GPUs: results equal GEMM.execute on the whole batch bit for bit (each
item runs the same kernel), with CuPy and NumPy chunks, column-major operands, c, bias and
hooks; on a dask_cuda.LocalCUDACluster; and a worker killed mid-run (Dask recomputes its
chunks: the result is still exact). Marked ``gpu``; skipped without dask, distributed and
dask-cuda; the cluster tests want two GPUs."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import blasdx
from blasdx import SM, Arrangement, Block, Precision, Size

pytestmark = pytest.mark.gpu
da = pytest.importorskip("dask.array")
dg = pytest.importorskip("blasdx.dask_gemm")
cupy = pytest.importorskip("cupy")

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off in multi-GPU runs

GEMM = Size(32, 48, 64) + Precision("float16", "float16", "float32") + Arrangement(
    "row_major", "col_major", "row_major") + SM(900) + Block()


def host_operands(batch, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, 32, 64)).astype(np.float16)
    b = rng.standard_normal((batch, 48, 64)).astype(np.float16).transpose(0, 2, 1)  # column-major items
    c = rng.standard_normal((batch, 32, 48)).astype(np.float32)
    return a, b, c


def reference(a, b, c=None, **kwargs):
    """GEMM.execute on the whole batch, on the current GPU."""
    ca, cb = cupy.asarray(a), cupy.asarray(b.transpose(0, 2, 1)).transpose(0, 2, 1)
    out = cupy.asarray(c).copy() if c is not None else cupy.empty((a.shape[0], 32, 48), np.float32)
    GEMM.execute(ca, cb, out, **kwargs)
    return out.get()


def test_cupy_and_numpy_chunks_match_execute_bit_for_bit():
    import dask

    a, b, c = host_operands(40)
    bias = np.linspace(-1, 1, 48).astype(np.float32)
    want = reference(a, b, c, alpha=0.5, beta=2.0, bias=cupy.asarray(bias), epilogue="relu")
    with dask.config.set(scheduler="synchronous"):
        for to_chunks in (lambda x: da.from_array(x, chunks=(7, -1, -1)),  # NumPy chunks, copied to the GPU
                          lambda x: da.from_array(cupy.asarray(x), chunks=(7, -1, -1), asarray=False)):
            got = dg.execute(GEMM, to_chunks(a), to_chunks(b), to_chunks(c), 0.5, 2.0, bias=bias, epilogue="relu")
            result = got.compute()
            assert isinstance(result, cupy.ndarray)
            np.testing.assert_array_equal(result.get(), want)


def test_a_column_major_c_is_kept_column_major():
    import dask

    desc = Size(24, 40, 16) + Precision("float32") + Arrangement("col_major", "row_major", "col_major") + SM(900) \
        + Block()
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 24, 16)).astype(np.float32)
    b = rng.standard_normal((6, 16, 40)).astype(np.float32)
    c = rng.standard_normal((6, 24, 40)).astype(np.float32)
    with dask.config.set(scheduler="synchronous"):
        got = dg.execute(desc, *(da.from_array(x, chunks=(2, -1, -1)) for x in (a, b, c)), 1.0, -1.0).compute()
    want = a.astype(np.float64) @ b - c
    assert float(np.linalg.norm(got.get() - want) / np.linalg.norm(want)) < 1e-5


def _cluster(n_workers):
    dask_cuda = pytest.importorskip("dask_cuda")
    if cupy.cuda.runtime.getDeviceCount() < n_workers:
        pytest.skip(f"needs {n_workers} GPUs")
    from distributed import Client

    cluster = dask_cuda.LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_workers)), n_workers=n_workers)
    return cluster, Client(cluster)


def test_a_local_cuda_cluster_spreads_the_batch_and_matches():
    cluster, client = _cluster(2)
    with cluster, client:
        a, b, c = host_operands(64, seed=1)
        got = dg.execute(GEMM, da.from_array(a, chunks=(8, -1, -1)), da.from_array(b, chunks=(8, -1, -1)),
                         epilogue="gelu").persist()
        from distributed import futures_of, wait

        wait(got)  # who_has lists results once they exist
        placed = client.who_has(futures_of(got))
        assert len({w for ws in placed.values() for w in ws}) == 2  # both GPUs ran chunks
        np.testing.assert_array_equal(got.compute().get(), reference(a, b, epilogue="gelu"))


def _slow_chunk(x, block_info=None):
    time.sleep(0.2)  # keeps tasks in flight long enough to lose a worker among them
    return x


def test_a_worker_lost_mid_run_is_replaced_and_the_result_is_exact():
    cluster, client = _cluster(2)
    with cluster, client:
        a, b, c = host_operands(96, seed=2)
        slow_a = da.from_array(a, chunks=(4, -1, -1)).map_blocks(_slow_chunk, dtype=a.dtype)
        future = client.compute(dg.execute(GEMM, slow_a, da.from_array(b, chunks=(4, -1, -1))))
        time.sleep(1.0)
        victim = sorted(client.scheduler_info()["workers"])[0]
        try:
            client.run(os._exit, 1, workers=[victim])  # the process dies: its nanny starts a new one
        except Exception:  # noqa: BLE001 - the worker cannot answer, having exited
            pass
        result = future.result(timeout=300)
        np.testing.assert_array_equal(result.get(), reference(a, b))
        assert victim not in client.scheduler_info()["workers"]  # it did die (its replacement has a new address)


def test_hooks_and_descriptors_reach_workers():
    cluster, client = _cluster(2)
    with cluster, client:
        a, b, c = host_operands(16, seed=3)
        got = dg.execute(GEMM, da.from_array(a, chunks=(4, -1, -1)), da.from_array(b, chunks=(4, -1, -1)),
                         epilogue=blasdx.expression("x > T(0) ? x : T(0.1) * x"), prologue="negate")
        want = reference(a, b, epilogue=blasdx.expression("x > T(0) ? x : T(0.1) * x"), prologue="negate")
        np.testing.assert_array_equal(got.compute().get(), want)
