"""Compile-time benchmark (CPU, no GPU): cold NVRTC compile per kernel, warm disk hit in a
fresh process, and in-memory hit, for a dozen descriptors. Prints one table.

    python benchmarks/bench_compile.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_compile import MATRIX, describe  # noqa: E402  (the same dozen specs as the golden renders)

WARM = """
import sys, time
sys.path.insert(0, {root!r})
from tests.test_compile import MATRIX, describe
descs = [describe(*s) for s in MATRIX]
for d in descs:
    d.plan  # plan outside the timing; finding a cached kernel needs no render
t = time.perf_counter()
descs[0].compile(arch=900)
first = time.perf_counter() - t
for d in descs[1:]:
    d.compile(arch=900)
print(first, (time.perf_counter() - t - first) / (len(descs) - 1), "cupy" in sys.modules)
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["BLASDX_CACHE_DIR"] = cache
        import blasdx.compiler

        cold = []
        for spec in MATRIX:
            desc = describe(*spec)
            arch = max(900, desc.sm)
            start = time.perf_counter()
            desc.compile(arch=arch)
            cold.append(time.perf_counter() - start)
        desc = describe(*MATRIX[0])
        desc.compile(arch=900)
        n = 2000
        start = time.perf_counter()
        for _ in range(n):
            desc.compile(arch=900)
        memory = (time.perf_counter() - start) / n
        out = subprocess.run([sys.executable, "-c", WARM.format(root=str(ROOT))], capture_output=True, text=True,
                             check=True, env={**os.environ})
        first, warm, cupy_imported = out.stdout.split()
        print(f"NVRTC {'.'.join(map(str, blasdx.compiler.nvrtc_version()))}, {os.cpu_count()} cores, "
              f"{len(MATRIX)} descriptors, sm_90")
        print(f"cold compile: median {statistics.median(cold):.2f} s, max {max(cold):.2f} s")
        print(f"first disk hit in a fresh process: {float(first) * 1e3:.1f} ms (CuPy imported: {cupy_imported}); "
              f"later hits {float(warm) * 1e3:.1f} ms each")
        print(f"in-memory hit (compile(arch=900) again): {memory * 1e6:.1f} us")


if __name__ == "__main__":
    main()
