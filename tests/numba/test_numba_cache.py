"""blasdx.numba's LTO-IR comes from the disk cache: a second device_api() in a fresh process builds nothing, for a
Block() and a Grid() descriptor."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'blasdx[numba-cu13]')")

pytestmark = pytest.mark.compile

SCRIPT = """
import json, sys, time
import numba.cuda  # Numba's own import is not blasdx's time
import blasdx.numba
from blasdx import SM, Arrangement, Block, Grid, Precision, Size
from blasdx.compiler import DEFAULT_CACHE
GEMM = Size(*SIZE) + Precision("float16", "float16", "float32") + Arrangement("row_major", "col_major", "row_major")
start = time.perf_counter()
g = blasdx.numba.device_api(GEMM + SM(900) + EXECUTION(), arch=900)
print(json.dumps({"seconds": time.perf_counter() - start, "builds": DEFAULT_CACHE.builds, "namespace": g.namespace}))
"""


def _device_api_in_a_fresh_process(cache_dir, script) -> dict:
    env = {**os.environ, "BLASDX_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("execution, size", [("Block", (64, 64, 64)), ("Grid", (300, 200, 250))])
def test_a_second_process_reads_the_ltoir_from_disk(tmp_path, execution, size):
    script = SCRIPT.replace("EXECUTION", execution).replace("SIZE", repr(size))
    first = _device_api_in_a_fresh_process(tmp_path, script)
    second = _device_api_in_a_fresh_process(tmp_path, script)
    assert first["builds"] == 1 and second["builds"] == 0
    assert first["namespace"] == second["namespace"]
    assert second["seconds"] < 1.0, second  # a disk hit renders nothing: about 0.03 s alone, more beside other tests
