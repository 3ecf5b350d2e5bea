"""The benchmarks without a GPU: each parses --help, reports its results in the table that
benchmarks/ab.py compares, cites no path outside the repository, and those that time against the
anchor harness stop with a clear message where it is missing."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support import cited_paths

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


@pytest.mark.parametrize("script", [p.name for p in BENCHMARKS])
def test_a_benchmark_parses_help_without_a_gpu(script):
    done = run(script, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


@pytest.mark.parametrize("script", [p.name for p in BENCHMARKS if p.name != "ab.py"])
def test_a_benchmark_reports_its_results_for_ab(script):
    tree = ast.parse((ROOT / "benchmarks" / script).read_text())
    calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "report" in calls, f"{script} never calls ab.report: ab.py cannot compare it"


@pytest.mark.parametrize("path", [*BENCHMARKS, *sorted((ROOT / "scripts").glob("*"))], ids=lambda p: p.name)
def test_no_benchmark_or_script_cites_a_path_outside_the_repository(path):
    outside = sorted(p for p in cited_paths(path.read_text()) if p.startswith("../"))
    assert not outside, f"{path.name} cites {outside}"


@pytest.mark.parametrize("command", [
    ["triton_rounds.py"], ["anchor_bf16.py", "--compile-only", "cubins"], ["block_sweep.py", "--anchor", "--compile-only"],
], ids=lambda c: c[0])
def test_an_anchor_benchmark_stops_with_a_clear_message_where_the_harness_is_missing(command, tmp_path):
    done = run(*command, "--anchors", str(tmp_path / "nowhere"))
    assert done.returncode == 1
    assert f"--anchors {tmp_path / 'nowhere'}: no " in done.stderr and "pass --anchors DIR" in done.stderr
    assert not (tmp_path / "cubins").exists()
