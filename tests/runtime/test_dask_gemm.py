"""blasdx.dask_gemm without a GPU: the task graph builds and pickles (descriptors and hooks
travel to workers), the result's chunks and dtype, and the refusals raised before any task.
Skipped where Dask is not installed; tests/gpu/test_gpu_dask.py runs it on GPUs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import blasdx
from blasdx import SM, ArgumentError, Arrangement, Block, Precision, Size, Type

da = pytest.importorskip("dask.array")
dg = pytest.importorskip("blasdx.dask_gemm")

F16 = Size(32, 16, 8) + Precision("float16", "float16", "float32") + Arrangement(
    "row_major", "col_major", "row_major") + SM(900) + Block()


def operands(batch=12, chunk=4, m=32, n=16, k=8, dtype=np.float16):
    a = da.zeros((batch, m, k), chunks=(chunk, -1, -1), dtype=dtype)
    b = da.zeros((batch, k, n), chunks=(chunk, -1, -1), dtype=dtype)
    return a, b


def test_the_graph_has_one_task_per_batch_chunk_and_pickles():
    a, b = operands()
    c = dg.execute(F16, a, b, alpha=2.0, bias=np.zeros(16, np.float32), epilogue=blasdx.scale(0.5), prologue="negate")
    assert c.shape == (12, 32, 16) and c.chunks == ((4, 4, 4), (32,), (16,)) and c.dtype == np.float32
    import cloudpickle

    graph = dict(c.__dask_graph__())
    assert cloudpickle.loads(cloudpickle.dumps(graph)).keys() == graph.keys()


def test_descriptors_and_hooks_pickle():
    for value in (F16, F16 + Type("complex"), blasdx.scale(2.5), blasdx.expression("x > 0 ? x : T(0)"),
                  blasdx.BUILTIN_HOOKS["gelu"]):
        assert pickle.loads(pickle.dumps(value)) == value
    assert pickle.loads(pickle.dumps(F16)).plan == F16.plan


@pytest.mark.parametrize(("precision", "dtype"), [
    (("float16", "float16", "float16"), np.float16),
    (("bfloat16", "bfloat16", "bfloat16"), np.uint16),  # raw bits, as execute() takes them
    (("int8", "int8", "int32"), np.int32),
])
def test_c_chunks_take_cs_precision(precision, dtype):
    desc = Size(16, 16, 16) + Precision(*precision) + Arrangement("row_major", "col_major", "row_major") + SM(900) \
        + Block()
    a, b = operands(m=16, n=16, k=16)
    assert dg.execute(desc, a, b).dtype == dtype


def test_complex_c_is_complex64():
    desc = Size(8, 8, 8) + Precision("float32") + Type("complex") + SM(900) + Block()
    a, b = operands(m=8, n=8, k=8, dtype=np.complex64)
    assert dg.execute(desc, a, b).dtype == np.complex64


def test_refusals_before_any_task():
    a, b = operands()
    with pytest.raises(ArgumentError, match=r"batch chunks of b \(6, 6\) differ from a's \(4, 4, 4\).*rechunk"):
        dg.execute(F16, a, b.rechunk({0: 6}))
    with pytest.raises(ArgumentError, match=r"chunk along the batch axis only: a.rechunk"):
        dg.execute(F16, a.rechunk({1: 16}), b)
    with pytest.raises(ArgumentError, match=r"the descriptor's A items are \(32, 8\)"):
        dg.execute(F16, *operands(m=16))
    with pytest.raises(ArgumentError, match="takes dask arrays"):
        dg.execute(F16, np.zeros((12, 32, 8), np.float16), b)
    with pytest.raises(ArgumentError, match=r"expected \(batch, rows, cols\)"):
        dg.execute(F16, a[0], b[0])
    with pytest.raises(ArgumentError, match="no c was given"):
        dg.execute(F16, a, b, beta=1.0)
    with pytest.raises(ArgumentError, match="per-item bias"):
        dg.execute(F16, a, b, bias=da.zeros((12, 1, 16), chunks=4))
    with pytest.raises(blasdx.IncompleteDescriptorError):
        dg.execute(Size(32, 16, 8) + SM(900), a, b)


def test_chunks_reach_execute_in_the_descriptors_layout(monkeypatch):
    """The chunk function on the CPU, NumPy standing in for CuPy and a NumPy GEMM for
    execute(): every operand arrives laid out as the descriptor's arrangement (items
    row- or column-major, the batch outermost), a given c in its own layout too."""
    import dask

    seen = []

    def numpy_execute(self, a, b, c, alpha=1, beta=0, **hooks):
        for x, layout in zip((a, b, c), self.arrangement):
            item_strides = x.strides[1:]
            contiguous = item_strides[1] == x.itemsize if layout == "row_major" else item_strides[0] == x.itemsize
            seen.append(contiguous and x.strides[0] >= x.shape[1] * x.shape[2] * x.itemsize)
        c[...] = alpha * (a.astype(np.float64) @ b) + (beta * c if beta else 0)  # C unread at beta 0, as blasdx
        return c

    monkeypatch.setattr(dg, "cupy_module", lambda: np)
    monkeypatch.setattr(blasdx.Descriptor, "execute", numpy_execute)
    desc = Size(24, 40, 16) + Precision("float32") + Arrangement("col_major", "row_major", "col_major") + SM(900) \
        + Block()
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(shape).astype(np.float32) for shape in ((6, 24, 16), (6, 16, 40), (6, 24, 40)))
    with dask.config.set(scheduler="synchronous"):
        for with_c in (False, True):
            chunked = [da.from_array(x, chunks=(2, -1, -1)) for x in (a, b, c)]
            got = dg.execute(desc, chunked[0], chunked[1], chunked[2] if with_c else None, alpha=2.0,
                             beta=-1.0 if with_c else 0.0).compute()
            want = 2.0 * (a.astype(np.float64) @ b) - (c if with_c else 0)
            np.testing.assert_allclose(got, want, rtol=1e-5)
    assert seen and all(seen)
