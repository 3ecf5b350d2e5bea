"""PyTorch tensors on a GPU: the bound-launch fast path, PyTorch's current stream, C tensors
that require grad, and execute() captured in CUDA graphs (PyTorch's and CuPy's). Marked
``gpu``; the PyTorch tests skip without PyTorch."""

from __future__ import annotations

import pytest

from blasdx import SM, ArgumentError, Arrangement, Block, Precision, Size

pytestmark = pytest.mark.gpu

ROW = Arrangement("row_major", "row_major", "row_major")
F16 = Size(32, 32, 32) + Precision("float16", "float16", "float32") + ROW + SM(900) + Block()


def _relative_error(out, ref) -> float:
    torch = pytest.importorskip("torch")
    return float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))


def test_later_calls_take_the_fast_path_with_their_own_data(monkeypatch):
    torch = pytest.importorskip("torch")
    import blasdx.pipeline

    c = torch.empty(8, 32, 32, device="cuda")
    bias = torch.randn(32, device="cuda")
    for call in range(3):  # the first call binds; the later ones skip the checks but see new data
        a = torch.randn(8, 32, 32, device="cuda").half()
        b = torch.randn(8, 32, 32, device="cuda").half()
        c.fill_(float("nan"))
        F16.execute(a, b, c, bias=bias, epilogue="relu")
        assert _relative_error(c, torch.relu(a.double() @ b.double() + bias.double())) < 1e-3
        if call == 0:
            monkeypatch.setattr(blasdx.pipeline, "check_operands", lambda *args: pytest.fail("checked again"))


def test_overlap_is_refused_on_the_fast_path():
    torch = pytest.importorskip("torch")
    a = torch.randn(4, 32, 32, device="cuda").half()
    b = torch.randn(4, 32, 32, device="cuda").half()
    c = torch.zeros(4, 32, 32, device="cuda")
    F16.execute(a, b, c)
    flat = torch.zeros(4 * 32 * 32 * 2, device="cuda", dtype=torch.float16)
    aliased = flat.view(torch.float32).view(4, 32, 32)  # C shares its memory with A below
    with pytest.raises(ArgumentError, match="overlaps"):
        F16.execute(flat[: 4 * 32 * 32].view(4, 32, 32), b, aliased)


def test_runs_on_torchs_current_stream():
    """On a non-default PyTorch stream that first sleeps and then writes A, execute() must
    queue behind the write: on any other stream it would read the old A."""
    torch = pytest.importorskip("torch")
    a = torch.zeros(64, 32, 32, device="cuda").half()
    new_a = torch.randn(64, 32, 32, device="cuda").half()
    b = torch.randn(64, 32, 32, device="cuda").half()
    c = torch.full((64, 32, 32), float("nan"), device="cuda")
    F16.execute(a, b, c)  # bind outside the stream
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)
        a.copy_(new_a)
        F16.execute(a, b, c)
        result = c.clone()
    torch.cuda.synchronize()
    assert _relative_error(result, new_a.double() @ b.double()) < 1e-3


def test_c_that_requires_grad_is_refused_unless_grad_is_off():
    torch = pytest.importorskip("torch")
    a = torch.randn(32, 32, device="cuda").half()
    b = torch.randn(32, 32, device="cuda").half()
    leaf = torch.zeros(2, 32, 32, device="cuda", requires_grad=True)
    for c in (leaf, leaf[0]):  # the leaf, and a view of it
        with pytest.raises(ArgumentError, match=r"requires grad.*torch.no_grad\(\)"):
            F16.execute(a, b, c)
    with torch.no_grad():
        F16.execute(a, b, leaf[1])
    assert _relative_error(leaf[1].detach(), a.double() @ b.double()) < 1e-3


def test_torch_dtypes_name_precisions():
    torch = pytest.importorskip("torch")
    assert Precision(torch.float16, torch.bfloat16, torch.float32) == Precision("float16", "bfloat16", "float32")
    assert Precision(torch.float8_e4m3fn).a == "float8_e4m3"


def test_execute_is_captured_by_a_torch_cuda_graph_and_replays():
    """After one call (compile, load and bind happen outside capture), execute() inside
    torch.cuda.graph records its launch; each replay recomputes C from the current A."""
    torch = pytest.importorskip("torch")
    a = torch.randn(16, 32, 32, device="cuda").half()
    b = torch.randn(16, 32, 32, device="cuda").half()
    c = torch.zeros(16, 32, 32, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        F16.execute(a, b, c)  # warm up on the capturing stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        F16.execute(a, b, c)
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _relative_error(c, a.double() @ b.double()) < 1e-3


def test_execute_is_captured_by_a_cupy_stream_graph_and_replays():
    import cupy
    import numpy as np

    a = cupy.random.standard_normal((16, 32, 32), dtype=np.float32).astype(np.float16)
    b = cupy.random.standard_normal((16, 32, 32), dtype=np.float32).astype(np.float16)
    c = cupy.zeros((16, 32, 32), dtype=np.float32)
    F16.execute(a, b, c)  # compile, load and bind outside capture
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        F16.execute(a, b, c)
        graph = stream.end_capture()
    for _ in range(2):
        a[...] = cupy.random.standard_normal(a.shape, dtype=np.float32).astype(np.float16)
        c.fill(np.nan)
        cupy.cuda.Device().synchronize()  # the fills (on CuPy's default stream) are done before the replay
        graph.launch(stream)
        stream.synchronize()
        ref = a.astype(np.float64) @ b.astype(np.float64)
        assert float(cupy.linalg.norm(c - ref) / cupy.linalg.norm(ref)) < 1e-3
