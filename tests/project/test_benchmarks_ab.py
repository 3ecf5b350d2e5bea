"""benchmarks/ab.py without a GPU: the results it reads from a benchmark's output (its table, or an
anchor harness's JSON lines), the medians over rounds, this/base and the +-3% flag, and the trees it
runs: a directory holding blasdx/, a templates/ directory, and a git revision it exports."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AB = ROOT / "benchmarks" / "ab.py"


def load(path: Path):
    """The module at ``path`` (benchmarks/ is no package), under a name of its own."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


ab = load(AB)

# A benchmark that prints fixed numbers a round, by tree: "this" where this repository is first on
# PYTHONPATH and no other templates are set, else "base". Its rounds are counted in argv[2].
FAKE_BENCHMARK = """
import os, sys
from pathlib import Path
first = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])
tree = "base" if first != Path(sys.argv[1]) or "BLASDX_TEMPLATES_DIR" in os.environ else "this"
count = Path(sys.argv[2]) / tree
done = int(count.read_text()) if count.exists() else 0
count.write_text(str(done + 1))
VALUES = {  # case: unit, base's value a round, this's
    "steady": ("GB/s", [100, 100, 100], [102, 102, 102]),
    "faster": ("GB/s", [100, 101, 99], [110, 111, 109]),
    "slower": ("ms", [1.0, 1.0, 1.0], [1.1, 1.2, 1.1]),
    "median": ("TFLOP/s", [100, 200, 110], [120, 90, 121]),
}
print("a human table, which the harness skips")
print(MARKER)
for case, (unit, base, this) in VALUES.items():
    print(f"{case}\\t{(base if tree == 'base' else this)[done % 3]}\\t{unit}")
print("after the table")
""".replace("MARKER", repr(ab.MARKER))


def run_ab(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("BLASDX_TEMPLATES_DIR", None)
    return subprocess.run([sys.executable, str(AB), *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.fixture
def fake_benchmark(tmp_path):
    script = tmp_path / "fake_benchmark.py"
    script.write_text(FAKE_BENCHMARK)
    (tmp_path / "rounds").mkdir()
    return [str(script), str(ROOT), str(tmp_path / "rounds")]


def table_row(output: str, case: str) -> list[str]:
    """The words of the harness's row for ``case``."""
    return next(line.split() for line in output.splitlines() if line.split()[:1] == [case])


# --- the contract --------------------------------------------------------------------------------


def test_report_prints_the_table_parse_reads_and_leaves_out_values_that_are_not_numbers():
    out = io.StringIO()
    ab.report([("32x32x32 f16", 2901.5, "GB/s"), ("host execute()", 8.25, "us"), ("no figure", math.nan, "ms")], out)
    text = "a human table first\n" + out.getvalue() + "\nthen more words\tand\ttabs\n"
    assert ab.parse(text) == {"32x32x32 f16": (2901.5, "GB/s"), "host execute()": (8.25, "us")}


def test_parse_reads_every_table_and_stops_each_at_its_first_other_line():
    text = "\n".join([ab.MARKER, "a\t1\tms", "b\t2\tms", "not a row", "c\t3\tms", ab.MARKER, "d\t4\tGB/s"])
    assert ab.parse(text) == {"a": (1.0, "ms"), "b": (2.0, "ms"), "d": (4.0, "GB/s")}


@pytest.mark.parametrize("text, error, match", [
    (f"{ab.MARKER}\na\t1\tms\na\t2\tms", ValueError, "reported 'a' twice"),
], ids=["a case reported twice"])
def test_parse_refuses_output_it_cannot_read_one_way(text, error, match):
    with pytest.raises(error, match=match):
        ab.parse(text)


def test_report_refuses_a_case_with_a_tab():
    with pytest.raises(ValueError, match="holds a tab or a newline"):
        ab.report([("a\tb", 1.0, "ms")], io.StringIO())


def test_parse_reads_an_anchor_harness_from_its_json_lines_without_its_errors():
    text = "\n".join([
        "cuBLASDx compile wall 61.0s",
        json.dumps({"gpu": "GPU", "date": "today", "rows": [], "copy_GBps": 2950.0}),
        json.dumps({"case": "32x32x32 f16->f16", "bx_err": 1e-4, "bx_GBps": 2900.5, "bx_ms": 0.37,
                    "bx_reg_TFLOPs": 439.0, "dx_block_dim": {"1": [128, 1, 1]}, "cublas_ms_vs_bx": 0.4, "ok": True}),
        json.dumps({"execute": 8.7, "raw_launch": 4.1}),
        "SUMMARY GPU copy 2950 GB/s",
    ])
    assert ab.parse(text) == {
        "copy_GBps": (2950.0, "GB/s"), "32x32x32 f16->f16 bx_GBps": (2900.5, "GB/s"),
        "32x32x32 f16->f16 bx_ms": (0.37, "ms"), "32x32x32 f16->f16 bx_reg_TFLOPs": (439.0, "TFLOP/s"),
        "32x32x32 f16->f16 cublas_ms_vs_bx": (0.4, ""), "execute": (8.7, ""), "raw_launch": (4.1, "")}


def test_parse_takes_the_table_alone_where_a_benchmark_prints_json_lines_too():
    text = json.dumps({"case": "x", "blasdx_TFLOPs": 1.0}) + f"\n{ab.MARKER}\nx\t1.5\tTFLOP/s"
    assert ab.parse(text) == {"x": (1.5, "TFLOP/s")}


# --- medians, ratio, flag ------------------------------------------------------------------------


@pytest.mark.parametrize("unit, base, this, flag", [
    ("GB/s", 100.0, 102.9, ""), ("GB/s", 100.0, 97.1, ""), ("GB/s", 100.0, 103.1, "faster"),
    ("GB/s", 100.0, 96.9, "slower"), ("TFLOP/s", 100.0, 103.0, ""), ("ms", 1.0, 1.031, "slower"),
    ("ms", 1.0, 0.969, "faster"), ("us", 8.0, 8.2, ""), ("", 1.0, 1.05, "differs"),
], ids=lambda x: str(x) if x != "" else "none")
def test_a_case_is_flagged_only_outside_three_percent_and_by_the_way_its_unit_improves(unit, base, this, flag):
    [result] = ab.compare({"base": {"c": [base]}, "this": {"c": [this]}}, {"c": unit}, 0.03)
    assert result.flag == flag
    assert result.ratio == pytest.approx(this / base)


def test_compare_takes_each_trees_median_over_the_rounds_and_their_larger_spread():
    [result] = ab.compare({"base": {"c": [100.0, 200.0, 110.0]}, "this": {"c": [120.0, 90.0, 121.0]}}, {"c": "GB/s"}, 0.03)
    assert (result.base, result.this) == (110.0, 120.0)
    assert result.ratio == pytest.approx(120 / 110)
    assert result.spread == pytest.approx(100 / 110)
    assert result.flag == "faster"


def test_compare_names_a_case_only_one_tree_reported():
    results = ab.compare({"base": {"old": [1.0]}, "this": {"new": [1.0]}}, {"old": "ms", "new": "ms"}, 0.03)
    assert [(r.case, r.flag, r.ratio) for r in results] == [("old", "only base", None), ("new", "only this", None)]


def test_the_commands_after_each_double_dash_are_the_benchmarks():
    assert ab.split_commands(["--base", "HEAD", "--", "a.py", "--quick", "--", "b.py"]) == (
        ["--base", "HEAD"], [["a.py", "--quick"], ["b.py"]])
    assert ab.split_commands(["--report", "x.json"]) == (["--report", "x.json"], [])


# --- whole runs -------------------------------------------------------------------------------------


def test_a_run_against_a_tree_alternates_processes_and_flags_the_cases_outside_three_percent(tmp_path, fake_benchmark):
    base = tmp_path / "base"
    (base / "blasdx").mkdir(parents=True)
    (base / "blasdx" / "__init__.py").write_text("")
    out = tmp_path / "ab.json"
    done = run_ab("--base", str(base), "--rounds", "3", "--out", str(out), "--", *fake_benchmark)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"base: {base}: its blasdx and templates" in done.stdout
    progress = re.findall(r"^round (\d)/3 (base|this)", done.stdout, re.M)
    assert progress == [("1", "base"), ("1", "this"), ("2", "this"), ("2", "base"), ("3", "base"), ("3", "this")]
    assert table_row(done.stdout, "steady")[1:] == ["GB/s", "100", "102", "1.020", "0.0%"]
    assert table_row(done.stdout, "faster")[-1] == "faster"
    assert table_row(done.stdout, "slower")[1:5] == ["ms", "1", "1.1", "1.100"] and table_row(done.stdout, "slower")[-1] == "slower"
    assert table_row(done.stdout, "median")[1:5] == ["TFLOP/s", "110", "120", "1.091"]
    assert "3 of 4 case(s) outside +-3%" in done.stdout
    record = json.loads(out.read_text())
    assert record["values"]["base"]["median"] == [100, 200, 110] and record["rounds"] == 3
    again = run_ab("--report", str(out))
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == done.stdout.splitlines()[-1]


def test_resume_adds_rounds_to_an_earlier_runs_values_of_the_same_base(tmp_path, fake_benchmark):
    base = tmp_path / "base"
    (base / "blasdx").mkdir(parents=True)
    (base / "blasdx" / "__init__.py").write_text("")
    out = tmp_path / "ab.json"
    first = run_ab("--base", str(base), "--rounds", "1", "--out", str(out), "--", *fake_benchmark)
    assert first.returncode == 0, first.stdout + first.stderr
    more = run_ab("--base", str(base), "--rounds", "2", "--out", str(out), "--resume", "--", *fake_benchmark)
    assert more.returncode == 0, more.stdout + more.stderr
    assert re.findall(r"^round (\d)/3 (base|this)", more.stdout, re.M) == [("2", "this"), ("2", "base"), ("3", "base"),
                                                                          ("3", "this")]
    assert json.loads(out.read_text())["values"]["base"]["median"] == [100, 200, 110]
    assert table_row(more.stdout, "median")[1:5] == ["TFLOP/s", "110", "120", "1.091"]
    other = tmp_path / "other"
    (other / "blasdx").mkdir(parents=True)
    (other / "blasdx" / "__init__.py").write_text("")
    refused = run_ab("--base", str(other), "--out", str(out), "--resume", "--", *fake_benchmark)
    assert refused.returncode != 0 and f"compares '{base}: its blasdx and templates'" in refused.stderr


def test_a_templates_directory_runs_this_trees_blasdx_with_those_templates(tmp_path, fake_benchmark):
    templates = tmp_path / "old" / "templates"
    templates.mkdir(parents=True)
    (templates / "gemm.cuh.j2").write_text("")
    done = run_ab("--base", str(tmp_path / "old"), "--rounds", "1", "--only", "steady", "--", *fake_benchmark)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"base: {tmp_path / 'old'}: this tree's blasdx with its templates" in done.stdout
    assert table_row(done.stdout, "steady")[1:4] == ["GB/s", "100", "102"]
    assert "0 of 1 case(s) outside +-3%" in done.stdout  # --only left the other cases out


def test_several_benchmarks_in_one_call_have_their_cases_named_after_them(tmp_path):
    base = tmp_path / "base"
    (base / "blasdx").mkdir(parents=True)
    (base / "blasdx" / "__init__.py").write_text("")
    commands = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / f"{name}.py").write_text(FAKE_BENCHMARK)
        commands += ["--", str(tmp_path / f"{name}.py"), str(ROOT), str(tmp_path / name)]
    done = run_ab("--base", str(base), "--rounds", "1", *commands)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("one", "two"):
        assert re.search(rf"^{name}\.py {ROOT} {tmp_path / name}: steady +GB/s +100 +102 ", done.stdout, re.M)
    assert "of 8 case(s) outside" in done.stdout


def _git_checkout() -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _git_checkout(), reason="not a git checkout (an unpacked sdist)")
def test_a_revision_is_exported_with_git_archive(tmp_path):
    commit = ab.export_revision("HEAD", tmp_path / "tree")
    expected = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:blasdx/version.py"], capture_output=True,
                              text=True, check=True).stdout
    assert (tmp_path / "tree" / "blasdx" / "version.py").read_text() == expected
    assert (tmp_path / "tree" / "templates" / "gemm.cuh.j2").is_file()
    assert (tmp_path / "tree" / "benchmarks").is_dir() and not (tmp_path / "tree" / "tests").exists()
    assert re.fullmatch(r"[0-9a-f]{40}", commit)


@pytest.mark.skipif(not _git_checkout(), reason="not a git checkout (an unpacked sdist)")
def test_a_run_against_a_revision_imports_blasdx_from_its_export(tmp_path):
    script = tmp_path / "which_tree.py"
    script.write_text(f"import blasdx, sys\nfrom pathlib import Path\nprint({ab.MARKER!r})\n"
                      "print(f'exported\\t{int(Path(blasdx.__file__).resolve().parents[1] != Path(sys.argv[1]))}\\tx')\n")
    done = run_ab("--base", "HEAD", "--rounds", "1", "--", str(script), str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^base: HEAD \([0-9a-f]{12}\): its blasdx and templates$", done.stdout, re.M)
    assert table_row(done.stdout, "exported")[1:5] == ["x", "1", "0", "0.000"]


@pytest.mark.parametrize("body, match", [
    ("import sys\nprint('partial output')\nsys.exit(3)", r"base tree's run of .* failed \(exit 3\):\npartial output"),
    ("print('words, no results')", "printed no results"),
], ids=["a failing benchmark", "a benchmark without results"])
def test_a_run_stops_with_the_benchmarks_own_words(tmp_path, body, match):
    script = tmp_path / "bad.py"
    script.write_text(body)
    (tmp_path / "base" / "templates").mkdir(parents=True)
    (tmp_path / "base" / "templates" / "gemm.cuh.j2").write_text("")
    done = run_ab("--base", str(tmp_path / "base"), "--", str(script))
    assert done.returncode != 0
    assert re.search(match, done.stderr), done.stderr


@pytest.mark.parametrize("name, match", [
    ("empty", "neither a git revision nor a directory holding blasdx/ or blasdx templates"),
    ("missing", "no such directory, and not a commit of"),
], ids=["an empty directory", "neither a directory nor a commit"])
def test_a_base_that_is_neither_a_tree_nor_a_revision_is_refused(tmp_path, name, match):
    (tmp_path / "empty").mkdir()
    done = run_ab("--base", str(tmp_path / name), "--", str(AB))
    assert done.returncode != 0 and match in done.stderr, done.stderr
