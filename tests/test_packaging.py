"""Packaging: the wheel carries the templates, and the demo runs without a GPU."""

from __future__ import annotations

import os
import re
import shutil
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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def _readme_python() -> str:
    """The README's Python examples, in order, as one module."""
    return "\n".join(re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S))


def test_the_readme_examples_type_check_with_mypy(tmp_path):
    """Operators take positional arguments for type checkers too (blasdx ships py.typed)."""
    api = pytest.importorskip("mypy.api")
    example = tmp_path / "readme_examples.py"
    example.write_text(_readme_python())
    out, err, status = api.run([str(example), "--ignore-missing-imports", "--no-incremental", "--follow-imports=silent"])
    assert status == 0, out + err


def test_the_readme_examples_type_check_with_pyright(tmp_path):
    pyright = shutil.which("pyright") or shutil.which("pyright", path=str(Path(sys.executable).parent))
    if pyright is None:
        pytest.skip("pyright is not installed (pip install '.[test]' installs it)")
    example = tmp_path / "readme_examples.py"
    example.write_text(_readme_python())
    # Optional packages the README shows (PyTorch, dask-cuda) may be missing here, as for mypy above.
    (tmp_path / "pyrightconfig.json").write_text('{"reportMissingImports": "warning"}')
    out = subprocess.run([pyright, "--pythonpath", sys.executable, str(example)], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


WITHOUT_EXTRAS = """
import sys
sys.modules["cupy"] = None              # as without the cu12/cu13 extras: no CuPy ...
sys.modules["cuda.pathfinder"] = None   # ... and no NVRTC wheel for cuda-pathfinder to find
import os
os.environ.pop("CUDA_PATH", None)
import blasdx
from blasdx import SM, Block, Precision, Size
desc = Size(32, 32, 32) + Precision("float16", "float16", "float32") + SM(900) + Block()
assert "mma" in desc.explain()
try:
    desc.compile(arch=900)
except blasdx.DeviceError as exc:
    print(exc)
else:
    raise SystemExit("compiled without NVRTC")
"""


def test_without_the_cuda_extras_blasdx_describes_and_names_the_extras():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pip install 'blasdx[cu13]'" in out.stdout and "'blasdx[cu12]'" in out.stdout, out.stdout
