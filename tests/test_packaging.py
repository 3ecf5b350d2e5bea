"""Packaging: the wheel carries the templates, and the demo runs without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_the_templates(tmp_path):
    pytest.importorskip("build")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(tmp_path.glob("blasdx-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    templates = [p.relative_to(ROOT).as_posix() for p in (ROOT / "templates").rglob("*.j2")]
    assert "templates/gemm/epilogue.cuh.j2" in templates
    for template in templates:
        assert f"blasdx/{template}" in names, names
    modules = [p.relative_to(ROOT).as_posix() for p in (ROOT / "blasdx").rglob("*.py")]
    assert "blasdx/plan/kernel.py" in modules and "blasdx/py.typed" in names
    for module in modules:
        assert module in names, names
    from blasdx import __version__

    assert wheel.name.startswith(f"blasdx-{__version__}-"), wheel.name
    assert any(name.endswith("LICENSE") and ".dist-info/" in name for name in names), names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: numpy>=2.0" in metadata and "Classifier: License :: OSI Approved" in metadata


def test_demo_runs_and_says_what_it_skipped():
    out = subprocess.run([sys.executable, "-m", "blasdx", "demo"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "3. compiled with NVRTC for sm_90" in out.stdout
    assert ("4. skipped running: no usable CUDA GPU" in out.stdout) or ("4. ran 1000 GEMMs" in out.stdout)


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("[!_]*.py")))
def test_example_runs(script):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr


README_EXAMPLE = """
import cupy, numpy as np
from blasdx import SM, Arrangement, Block, Precision, Size

GEMM = (Size(64, 64, 64) + Precision("float16", "float16", "float32")
        + Arrangement("row_major", "col_major", "row_major") + SM(900) + Block())
print(GEMM.explain())
c = cupy.empty((1000, 64, 64), dtype=np.float32)
"""


def test_the_readme_example_type_checks(tmp_path):
    """Operators take positional arguments for type checkers too (blasdx ships py.typed)."""
    api = pytest.importorskip("mypy.api")
    example = tmp_path / "readme_example.py"
    example.write_text(README_EXAMPLE)
    out, err, status = api.run([str(example), "--ignore-missing-imports", "--no-incremental", "--follow-imports=silent"])
    assert status == 0, out + err
