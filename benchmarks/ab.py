"""The A/B harness: benchmarks run under an earlier tree (base) and this one, in alternating rounds.

Each run is a fresh process with its tree first on PYTHONPATH and a kernel cache of its own, so that
nothing of one tree serves the other; the rounds alternate which tree runs first (base, this, this,
base, ...), so that a drift of the GPU's speed weighs on both alike.

    python benchmarks/ab.py --base REV|DIR [--rounds 3] [--only REGEX] [--out FILE] \\
        -- benchmarks/bench_gpu.py [ARGS] [-- .anchors/side_by_side.py] [-- benchmarks/grid_gemm.py --quick]
    python benchmarks/ab.py --base REV --export DIR    # REV's tree into DIR, for a machine without git
    python benchmarks/ab.py --report FILE              # the table again, from --out's FILE
    python benchmarks/ab.py --base DIR --out FILE --resume -- ...   # more rounds, added to FILE's
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

THIS_ROOT = Path(__file__).resolve().parent.parent
ANCHORS = THIS_ROOT / ".anchors"  # the anchor harness's default place in the checkout (--anchors)
EXPORTED = ("blasdx", "templates", "benchmarks", "examples")  # what a revision's tree needs to run
MARKER = "RESULTS\tcase\tvalue\tunit"
LOWER_IS_BETTER = {"ns", "us", "ms", "s", "relative"}  # relative: an error
JSON_UNITS = {"_GBps": "GB/s", "_TFLOPs": "TFLOP/s", "_TOPS": "TOPS", "_ms": "ms", "_us": "us"}


# --- the contract: what a benchmark prints, and how it is read -----------------------------------
# (benchmarks import report, and anchor_module where they time against the anchor harness)


def report(rows: Iterable[tuple[str, float, str]], file=None) -> None:
    """Print ``rows`` of (case, value, unit) as the table ``parse`` reads: the MARKER line, then one
    tab-separated row a case. Rows whose value is not a finite number are left out."""
    out = file or sys.stdout
    print(MARKER, file=out)
    for case, value, unit in rows:
        if any(c in case + unit for c in "\t\n"):
            raise ValueError(f"a case or unit holds a tab or a newline: {case!r} {unit!r}")
        if isinstance(value, (int, float)) and math.isfinite(value):
            print(f"{case}\t{value:.6g}\t{unit}", file=out)
    out.flush()


def anchor_module(directory: str | Path, name: str):
    """Import the anchor harness's module ``name`` (side_by_side, peers_triton) from ``directory``,
    or stop with a message that says where it was looked for."""
    path = Path(directory).resolve()
    if not (path / f"{name}.py").is_file():
        raise SystemExit(f"--anchors {directory}: no {name}.py there; copy the anchor harness into the checkout "
                         f"(.anchors/, as its README says) or pass --anchors DIR")
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    return importlib.import_module(name)


def parse(text: str) -> dict[str, tuple[float, str]]:
    """{case: (value, unit)} from a benchmark's output: the rows after each MARKER line (up to the
    first line that is not a row), or, where there is none (an anchor harness), its JSON lines: each
    number of an object with a "case" becomes "case key", of one without it "key" (errors left out),
    its unit read from the key's ending (_GBps, _TFLOPs, _TOPS, _ms, _us)."""
    rows: dict[str, tuple[float, str]] = {}

    def add(case: str, value: float, unit: str) -> None:
        if case in rows:
            raise ValueError(f"the benchmark reported {case!r} twice; give each case its own name")
        if math.isfinite(value):
            rows[case] = (value, unit)

    lines = text.splitlines()
    in_table = False
    for line in lines:
        if line == MARKER:
            in_table = True
        elif in_table:
            row = table_row(line)
            if row is None:
                in_table = False
            else:
                add(*row)
    if MARKER in lines:
        return rows
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        prefix = f"{record['case']} " if "case" in record else ""
        for key, value in record.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or key.endswith(("err", "error")):
                continue
            unit = next((u for suffix, u in JSON_UNITS.items() if key.endswith(suffix)), "")
            add(prefix + key, float(value), unit)
    return rows


def table_row(line: str) -> tuple[str, float, str] | None:
    """(case, value, unit) of a row of the table, or None where ``line`` is not one."""
    fields = line.split("\t")
    if len(fields) != 3:
        return None
    try:
        return fields[0], float(fields[1]), fields[2]
    except ValueError:
        return None


# --- comparing the rounds --------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    case: str
    unit: str
    base: float | None  # median over the rounds
    this: float | None
    spread: float  # the larger of the two trees' (max - min) / median over the rounds
    flag: str  # "" within the tolerance; faster, slower, differs (no known unit), only base, only this

    @property
    def ratio(self) -> float | None:
        return None if self.base is None or self.this is None or self.base == 0 else self.this / self.base


def flag_of(ratio: float, unit: str, tolerance: float) -> str:
    """"" where ``ratio`` (this / base) lies within 1 +- ``tolerance``; else which way this tree went."""
    if abs(ratio - 1) <= tolerance + 1e-12:
        return ""
    if unit in LOWER_IS_BETTER:
        return "faster" if ratio < 1 else "slower"
    if unit:
        return "faster" if ratio > 1 else "slower"
    return "differs"


def compare(values: dict[str, dict[str, list[float]]], units: dict[str, str], tolerance: float) -> list[Comparison]:
    """One Comparison a case, in the order the cases were first reported; ``values`` is
    {"base": {case: [value a round]}, "this": {...}}."""
    out = []
    for case, unit in units.items():
        medians, spread = {}, 0.0
        for tree in ("base", "this"):
            got = values.get(tree, {}).get(case)
            medians[tree] = statistics.median(got) if got else None
            if got and medians[tree]:
                spread = max(spread, (max(got) - min(got)) / abs(medians[tree]))
        base, this = medians["base"], medians["this"]
        if base is None or this is None:
            flag = "only base" if this is None else "only this"
        else:
            flag = flag_of(this / base, unit, tolerance) if base else ("" if this == base else "differs")
        out.append(Comparison(case, unit, base, this, spread, flag))
    return out


def table(comparisons: list[Comparison], tolerance: float, rounds: int) -> str:
    width = max([len(c.case) for c in comparisons] + [4])
    lines = [f"{'case':{width}s} {'unit':8s} {'base':>10s} {'this':>10s} {'this/base':>9s} {'spread':>6s}  "
             f"flag (outside +-{tolerance:.0%}); medians of {rounds} round(s)"]
    for c in comparisons:
        def number(x: float | None) -> str:
            return f"{x:10.4g}" if x is not None else f"{'-':>10s}"
        ratio = f"{c.ratio:9.3f}" if c.ratio is not None else f"{'-':>9s}"
        lines.append(f"{c.case:{width}s} {c.unit:8s} {number(c.base)} {number(c.this)} {ratio} {c.spread:6.1%}  {c.flag}")
    flagged = [c for c in comparisons if c.flag]
    lines.append(f"{len(flagged)} of {len(comparisons)} case(s) outside +-{tolerance:.0%}"
                 + (": " + ", ".join(f"{c.case} ({c.flag})" for c in flagged) if flagged else ""))
    return "\n".join(lines)


# --- the trees ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    label: str  # "base" or "this"
    root: Path  # first on PYTHONPATH: the tree whose blasdx runs
    templates: Path | None  # BLASDX_TEMPLATES_DIR (a templates-only base), else the tree's own
    description: str

    def environment(self, cache: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("BLASDX_TEMPLATES_DIR", "OUT")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.root), os.environ.get("PYTHONPATH")]))
        env["BLASDX_CACHE_DIR"] = str(cache)
        if self.templates is not None:
            env["BLASDX_TEMPLATES_DIR"] = str(self.templates)
        return env


def git(*args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(THIS_ROOT), *args], capture_output=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.decode().strip()}")
    return done.stdout


def export_revision(revision: str, destination: Path, templates_only: bool = False) -> str:
    """Write ``revision``'s blasdx, templates, benchmarks and examples (those it has; templates
    alone with ``templates_only``) into ``destination`` with git archive; returns the commit."""
    found = subprocess.run(["git", "-C", str(THIS_ROOT), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode:
        raise SystemExit(f"--base {revision}: no such directory, and not a commit of {THIS_ROOT}")
    commit = found.stdout.strip()
    present = set(git("ls-tree", "--name-only", commit).decode().split())
    wanted = ["templates"] if templates_only else [p for p in EXPORTED if p in present]
    archive = git("archive", "--format=tar", commit, *wanted)
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return commit


def base_tree(spec: str, templates_only: bool, scratch: Path) -> Tree:
    """The base of ``--base``: a directory holding blasdx/ (an earlier tree), a templates/
    directory (or a directory holding one), or a git revision, exported into ``scratch``."""
    path = Path(spec)
    if not path.is_dir():
        commit = export_revision(spec, scratch / "base", templates_only)
        path = scratch / "base"
        spec = f"{spec} ({commit[:12]})"
    if (path / "blasdx" / "__init__.py").is_file() and not templates_only:
        return Tree("base", path.resolve(), None, f"{spec}: its blasdx and templates")
    for templates in (path, path / "templates"):
        if (templates / "gemm.cuh.j2").is_file():
            return Tree("base", THIS_ROOT, templates.resolve(), f"{spec}: this tree's blasdx with its templates")
    raise SystemExit(f"--base {spec}: neither a git revision nor a directory holding blasdx/ or blasdx templates "
                     f"(gemm.cuh.j2); give a commit, a tree exported with --export, or a templates/ directory")


def check_imports(tree: Tree, cache: Path, scratch: Path) -> None:
    """Fail unless a script run with ``tree``'s environment imports blasdx from ``tree.root`` (a script,
    as the benchmarks are: ``python -c`` would put the working directory first on sys.path)."""
    probe = scratch / "which_blasdx.py"
    probe.write_text("import blasdx\nprint(blasdx.__file__)\n")
    done = subprocess.run([sys.executable, str(probe)], env=tree.environment(cache), capture_output=True, text=True)
    found = Path(done.stdout.strip()).resolve() if done.returncode == 0 else None
    if found is None or not found.is_relative_to(tree.root):
        raise SystemExit(f"the {tree.label} tree's processes import blasdx from {found or done.stderr.strip()[-500:]}, "
                         f"not from {tree.root}; is another blasdx first on PYTHONPATH?")


# --- running --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Script:
    path: Path  # this tree's copy (or an anchor harness's path)
    args: tuple[str, ...]
    label: str  # a prefix of its cases where ab.py runs several scripts

    def path_in(self, tree: Tree, own_scripts: bool) -> Path:
        """The copy ``tree`` runs: this tree's, or with ``own_scripts`` the tree's own where it has one."""
        if own_scripts and tree.templates is None:
            try:
                own = tree.root / self.path.resolve().relative_to(THIS_ROOT)
            except ValueError:  # not in this tree (an anchor harness): the same for both
                return self.path
            if not own.is_file():
                raise SystemExit(f"--own-scripts: the {tree.label} tree has no {own.relative_to(tree.root)}")
            return own
        return self.path


def scripts_of(commands: list[list[str]]) -> list[Script]:
    out: list[Script] = []
    for number, command in enumerate(commands, 1):
        path = Path(command[0])
        if not path.is_file():
            raise SystemExit(f"no benchmark script at {path}")
        label = " ".join([path.name, *command[1:]]) if len(commands) > 1 else ""
        if any(script.label == label for script in out):
            label += f" #{number}"  # the same command again
        out.append(Script(path, tuple(command[1:]), label))
    return out


def run(tree: Tree, script: Script, cache: Path, own_scripts: bool, verbose: bool) -> dict[str, tuple[float, str]]:
    command = [sys.executable, str(script.path_in(tree, own_scripts)), *script.args]
    done = subprocess.run(command, env=tree.environment(cache), capture_output=True, text=True)
    if verbose:
        print(done.stdout + done.stderr, flush=True)
    if done.returncode:
        raise SystemExit(f"the {tree.label} tree's run of {' '.join(command[1:])} failed (exit {done.returncode}):\n"
                         f"{(done.stdout + done.stderr)[-3000:]}")
    try:
        rows = parse(done.stdout)
    except ValueError as error:
        raise SystemExit(f"{' '.join(command[1:])}: {error}") from None
    if not rows:
        raise SystemExit(f"{' '.join(command[1:])} printed no results: neither a {MARKER!r} table nor JSON lines "
                         f"(see ab.report)")
    return {f"{script.label}: {case}" if script.label else case: row for case, row in rows.items()}


def save(path: str | None, record: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(record, indent=1))


def split_commands(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """ab.py's own options, and the benchmark commands after each "--"."""
    if "--" not in argv:
        return argv, []
    first = argv.index("--")
    commands: list[list[str]] = [[]]
    for word in argv[first + 1:]:
        if word == "--":
            commands.append([])
        else:
            commands[-1].append(word)
    return argv[:first], [c for c in commands if c]


def main(argv: list[str] | None = None) -> None:
    options, commands = split_commands(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     usage="%(prog)s --base REV|DIR [options] -- SCRIPT [ARGS] [-- SCRIPT [ARGS]]...")
    parser.add_argument("--base", help="a git revision, a tree holding blasdx/ (from --export), or a templates/ directory")
    parser.add_argument("--templates-only", action="store_true",
                        help="take only the base's templates (this tree's planner renders them)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree, alternating (default 3)")
    parser.add_argument("--tolerance", type=float, default=0.03, help="flag a this/base outside 1 +- this (default 0.03)")
    parser.add_argument("--only", help="a regular expression: the cases it finds")
    parser.add_argument("--own-scripts", action="store_true",
                        help="run each tree's own copy of a benchmark in this repository (default: this tree's for both)")
    parser.add_argument("--out", help="every round's values as JSON, rewritten after each run")
    parser.add_argument("--resume", action="store_true", help="start from --out's values (the same base) and add rounds")
    parser.add_argument("--verbose", action="store_true", help="echo each run's output")
    parser.add_argument("--export", metavar="DIR", help="export --base (a revision) into DIR and stop")
    parser.add_argument("--report", metavar="FILE", help="print the table of an earlier --out FILE and stop")
    args = parser.parse_args(options)
    only = re.compile(args.only) if args.only else None
    if args.report:
        record = json.loads(Path(args.report).read_text())
        units = {c: u for c, u in record["units"].items() if not only or only.search(c)}
        print(table(compare(record["values"], units, args.tolerance), args.tolerance, record["rounds"]))
        return
    if not args.base:
        parser.error("--base is required (or --report)")
    if args.export:
        commit = export_revision(args.base, Path(args.export), args.templates_only)
        print(f"exported {args.base} ({commit[:12]}) to {args.export}")
        return
    if not commands:
        parser.error("name a benchmark after --, e.g. -- benchmarks/bench_gpu.py")
    scripts = scripts_of(commands)
    with tempfile.TemporaryDirectory(prefix="blasdx-ab-") as scratch_name:
        scratch = Path(scratch_name)
        trees = [base_tree(args.base, args.templates_only, scratch), Tree("this", THIS_ROOT, None, f"{THIS_ROOT}")]
        caches = {tree.label: scratch / f"cache-{tree.label}" for tree in trees}
        for tree in trees:
            check_imports(tree, caches[tree.label], scratch)
        print(f"base: {trees[0].description}\nthis: {trees[1].description}", flush=True)
        values: dict[str, dict[str, list[float]]] = {"base": {}, "this": {}}
        units: dict[str, str] = {}
        done_rounds = 0
        if args.resume:
            if not (args.out and Path(args.out).is_file()):
                parser.error("--resume adds to the values of an --out FILE that exists")
            record = json.loads(Path(args.out).read_text())
            if record["base"] != trees[0].description:
                raise SystemExit(f"--resume: {args.out} compares {record['base']!r}, not {trees[0].description!r}")
            values, units, done_rounds = record["values"], record["units"], record["rounds"]
        rounds = done_rounds + args.rounds
        for round_ in range(done_rounds + 1, rounds + 1):
            for script in scripts:
                for tree in trees if round_ % 2 else trees[::-1]:
                    began = time.perf_counter()
                    rows = run(tree, script, caches[tree.label], args.own_scripts, args.verbose)
                    for case, (value, unit) in rows.items():
                        if only and not only.search(case):
                            continue
                        if units.setdefault(case, unit) != unit:
                            raise SystemExit(f"{case}: unit {unit!r} in the {tree.label} tree, {units[case]!r} before")
                        values[tree.label].setdefault(case, []).append(value)
                    print(f"round {round_}/{rounds} {tree.label:4s} {script.path.name}: {len(rows)} results, "
                          f"{time.perf_counter() - began:.0f} s", flush=True)
                    save(args.out, {"base": trees[0].description, "this": trees[1].description, "rounds": round_,
                                    "units": units, "values": values})
    print(table(compare(values, units, args.tolerance), args.tolerance, rounds))


if __name__ == "__main__":
    main()
