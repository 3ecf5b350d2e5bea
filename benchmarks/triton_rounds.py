"""Batched execute() against Triton without the anchor harness's selection effect: peers_triton.py keeps
the best of 12 noisy readings of its Triton configurations, so here the configuration it would choose
is timed again in fresh rounds alternating with blasdx (per call, and launches back to back).

    python3 benchmarks/triton_rounds.py [--rounds 8] [--anchors .anchors]

One line a case (the harness's batched cases, beta 0.5, then its fused relu(A@B + bias)); the ratio
is Triton's time over the better blasdx call's (above 1: blasdx faster).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile

from ab import ANCHORS, anchor_module, report


def back_to_back(fn, launches: int = 20) -> float:
    """ms a launch over ``launches`` launches back to back, after one more."""
    import cupy as cp

    fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / launches


def measure_case(harness, m: int, n: int, k: int, pa: str, pc: str, fused: bool, rounds: int) -> tuple[list, str]:
    """One case's line and its (case, value, unit) rows: Triton's configuration chosen the harness's
    way, then ``rounds`` rounds."""
    import cupy as cp
    import torch
    import triton

    from blasdx import SM, Arrangement, Block, Precision, Size

    bgemm, timed = harness.bgemm, harness.timed  # the harness's own kernel and per-call timer

    torch_dtype = {"f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
    precision = {"f16": "float16", "f32": "float32", "f64": "float64"}
    size_a = torch.tensor([], dtype=torch_dtype[pa]).element_size()
    size_c = torch.tensor([], dtype=torch_dtype[pc]).element_size()
    batch = 32768 if fused else (1 << 30) // (m * k * size_a + k * n * size_a + 2 * m * n * size_c)
    a = torch.empty(batch, m, k, device="cuda", dtype=torch_dtype[pa]).uniform_(-1, 1)
    b = torch.empty(batch, k, n, device="cuda", dtype=torch_dtype[pa]).uniform_(-1, 1)
    c = torch.empty(batch, m, n, device="cuda", dtype=torch_dtype[pc]).uniform_(-1, 1)
    bias = torch.randn(n, device="cuda", dtype=torch_dtype[pc])
    ca, cb, cc, cbias = cp.asarray(a), cp.asarray(b), cp.asarray(c), cp.asarray(bias)
    gemm = (Size(m, n, k) + Precision(precision[pa], precision[pa], precision[pc])
            + Arrangement("row_major", "row_major", "row_major") + SM(900) + Block())
    if fused:
        calls = {"torch": lambda: gemm.execute(a, b, c, bias=bias, epilogue="relu"),
                 "cupy": lambda: gemm.execute(ca, cb, cc, bias=cbias, epilogue="relu")}
        configurations = itertools.product((1, 2, 4), (4, 8), (1, 2))
    else:
        calls = {"torch": lambda: gemm.execute(a, b, c, alpha=1.0, beta=0.5),
                 "cupy": lambda: gemm.execute(ca, cb, cc, alpha=1.0, beta=0.5)}
        configurations = itertools.product((1, 4), (2, 4, 8), (1, 2))
    chosen = None  # (ms, name, launch): the harness's choice
    for items, warps, stages in configurations:
        def launch(items=items, warps=warps, stages=stages):
            bgemm[(triton.cdiv(batch, items),)](a, b, c, bias if fused else c, 1.0, 0.0 if fused else 0.5, batch, m, n,
                                                k, items, pa != "f16", fused, pa == "f64", num_warps=warps,
                                                num_stages=stages)
        try:
            launch()
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a configuration Triton cannot build is skipped, as the harness does
            continue
        ms = timed(launch, reps=10, warm=2)
        if chosen is None or ms < chosen[0]:
            chosen = (ms, f"G{items} w{warps} s{stages}", launch)
    assert chosen is not None, "Triton built none of the harness's configurations"
    calls["triton"] = chosen[2]
    per_call: dict[str, list[float]] = {name: [] for name in calls}
    kernel: dict[str, list[float]] = {"blasdx": [], "triton": []}
    for _ in range(rounds):
        for name, call in calls.items():
            per_call[name].append(timed(call))
        kernel["blasdx"].append(min(back_to_back(calls["torch"]), back_to_back(calls["cupy"])))
        kernel["triton"].append(back_to_back(calls["triton"]))
    ratios = [t / min(x, y) for t, x, y in zip(per_call["triton"], per_call["torch"], per_call["cupy"])]
    median = {name: statistics.median(values) for name, values in per_call.items()}
    kernel_ratio = statistics.median(t / x for t, x in zip(kernel["triton"], kernel["blasdx"]))
    label = f"{m}x{n}x{k} {pa}->{pc}{' fused' if fused else ''}"
    rows = [(f"{label} blasdx", min(median["torch"], median["cupy"]), "ms"), (f"{label} triton", median["triton"], "ms"),
            (f"{label} blasdx back to back", statistics.median(kernel["blasdx"]), "ms"),
            (f"{label} triton back to back", statistics.median(kernel["triton"]), "ms")]
    return rows, (f"{label:24s} Triton {chosen[1]} (chosen at {chosen[0]:.4f}): blasdx torch {median['torch']:.4f}, CuPy "
            f"{median['cupy']:.4f}, Triton {median['triton']:.4f}; ratio {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}), blasdx ahead in {sum(r >= 1 for r in ratios)}/{rounds}; "
            f"back to back {statistics.median(kernel['blasdx']):.4f} / {statistics.median(kernel['triton']):.4f} "
            f"({kernel_ratio:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--anchors", default=ANCHORS, help="the anchor harness's folder (default .anchors)")
    args = parser.parse_args()
    harness = anchor_module(args.anchors, "peers_triton")
    os.environ.setdefault("BLASDX_CACHE_DIR", tempfile.mkdtemp(prefix="bx"))  # a cache of its own, unless ab.py gave one
    import torch
    import triton

    print(f"{torch.cuda.get_device_name()}, Triton {triton.__version__}, {args.rounds} rounds; ms per call, medians over "
          "the rounds; ratio = Triton's chosen configuration / the better blasdx call", flush=True)
    results = []
    for m, n, k, pa, pc, *fused in harness.CASES + [(64, 64, 64, "f16", "f32", "fused")]:
        rows, line = measure_case(harness, m, n, k, pa, pc, bool(fused), args.rounds)
        results += rows
        print(line, flush=True)
        torch.cuda.empty_cache()
    report(results)


if __name__ == "__main__":
    main()
