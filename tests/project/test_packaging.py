"""Packaging: the wheel carries the templates, the sdist what the docs cite, and the examples
run (or say what they skipped) without a GPU."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from ..support import DOCS, cited_paths

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
def test_sdist_carries_every_path_the_docs_cite(tmp_path):
    """README.md and docs/ cite benchmarks/, docs/, scripts/ and .ci/run (tests/project/test_docs.py
    checks that each is in the repository): an unpacked sdist must hold them too."""
    pytest.importorskip("build")

    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    sdist = next(tmp_path.glob("blasdx-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"docs/ARCHITECTURE.md", "benchmarks/RESULTS.md", "benchmarks/grid_gemm.py", "README.md"} <= names
    for doc in DOCS:
        for path in cited_paths(doc.read_text()):
            if (ROOT / path).exists():  # paths from the repository root (`plan/grid.py` is blasdx/plan/grid.py)
                assert path in names or any(n.startswith(path.rstrip("/") + "/") for n in names), (doc.name, path)


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("[!_]*.py")))
def test_example_runs(script):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr


TORCH_TRAINING_WITHOUT_TORCH = """
import runpy, sys
sys.modules["torch"] = None  # as where PyTorch is not installed
sys.path.insert(0, "examples")
runpy.run_path("examples/torch_training.py", run_name="__main__")
"""


def test_torch_training_without_torch_compiles_and_says_it_needs_torch():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", TORCH_TRAINING_WITHOUT_TORCH], capture_output=True, text=True,
                         cwd=ROOT, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "torch training: compiled; needs PyTorch (pip install torch), not installed here, so not run" in out.stdout


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
