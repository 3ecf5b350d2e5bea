"""The command line (``blasdx`` and ``python -m blasdx``): version, help, refusals, and a demo
that says what it skipped and whether its compile was a cache hit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from blasdx import __version__
from blasdx.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run_main(argv, capsys):
    """(exit status, stdout, stderr) of main(argv), argparse's exits included."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    return status, out.out, out.err


def test_version(capsys):
    assert _run_main(["--version"], capsys)[:2] == (0, f"blasdx {__version__}\n")


@pytest.mark.parametrize("argv, words", [
    (["--help"], ["usage: blasdx [-h] [--version] {demo,config}", "demo", "config"]),
    (["demo", "--help"], ["usage: blasdx demo [-h]", "compile it with NVRTC", "cache hit", "skipped"]),
    (["config", "--help"], ["usage: blasdx config [-h]", "NVRTC and the SMs it targets"]),
], ids=["top", "demo", "config"])
def test_help_is_each_commands_own_in_plain_text(argv, words, capsys):
    status, out, _ = _run_main(argv, capsys)
    assert status == 0
    flowing = " ".join(out.split())  # argparse wraps to the terminal's width
    for word in words:
        assert word in flowing, out
    assert "`" not in out and "__main__" not in out, out


@pytest.mark.parametrize("argv, match", [
    ([], r"blasdx: error: the following arguments are required: \{demo,config\}"),
    (["bogus"], r"blasdx: error: argument \{demo,config\}: invalid choice: 'bogus'"),
    (["demo", "--fast"], r"blasdx: error: unrecognized arguments: --fast"),
], ids=["no command", "unknown command", "unknown option"])
def test_bad_command_lines_exit_2_with_argparses_message(argv, match, capsys):
    status, _, err = _run_main(argv, capsys)
    assert status == 2
    assert re.search(match, err), err


@pytest.mark.parametrize("launcher, usage", [
    ("script", "usage: blasdx [-h]"),
    ("module", "usage: python -m blasdx [-h]"),
])
def test_usage_names_the_command_as_it_was_typed(launcher, usage):
    if launcher == "script":
        script = shutil.which("blasdx", path=str(Path(sys.executable).parent))
        if script is None:
            pytest.skip("the blasdx console script is not installed (pip install -e .)")
        command = [script, "--help"]
    else:
        command = [sys.executable, "-m", "blasdx", "--help"]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=ENV)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(usage), out.stdout


DEMO_WITHOUT_EXTRAS = """
import os, sys
sys.modules["cupy"] = None              # as after `pip install blasdx` without cu13/cu12: no CuPy ...
sys.modules["cuda.pathfinder"] = None   # ... and no NVRTC wheel for cuda-pathfinder to find
os.environ.pop("CUDA_PATH", None)
from blasdx.__main__ import main
sys.exit(main(["demo"]))
"""


def test_demo_without_the_cuda_extras_says_what_it_skipped_and_what_to_install():
    out = subprocess.run([sys.executable, "-c", DEMO_WITHOUT_EXTRAS], capture_output=True, text=True, cwd=ROOT,
                         env=ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "1. described and validated" in out.stdout and "2. explained" in out.stdout
    assert re.search(r"^3\. skipped compiling: NVRTC is not available .*pip install ['\"]blasdx\[cu13\]['\"]",
                     out.stdout, re.M), out.stdout
    assert re.search(r"^4\. skipped running: there is no compiled kernel", out.stdout, re.M), out.stdout


@pytest.mark.compile
def test_demo_compiles_then_says_the_second_run_was_a_cache_hit(tmp_path):
    env = {**ENV, "BLASDX_CACHE_DIR": str(tmp_path)}
    env.pop("BLASDX_DISABLE_DISK_CACHE", None)
    runs = [subprocess.run([sys.executable, "-m", "blasdx", "demo"], capture_output=True, text=True, cwd=ROOT, env=env)
            for _ in range(2)]
    for out in runs:
        assert out.returncode == 0, out.stdout + out.stderr
        assert ("4. skipped running: no usable CUDA GPU" in out.stdout) or ("4. ran 1000 GEMMs" in out.stdout)
    first, second = (out.stdout for out in runs)
    assert re.search(r"^3\. compiled with NVRTC for sm_90 in \d+\.\d\d s \(cached for the next run\)", first, re.M), first
    assert "cache hit" not in first
    assert re.search(r"^3\. loaded for sm_90 from the cache \(\d+\.\d\d s; a cache hit, NVRTC did not run\)",
                     second, re.M), second
