"""README.md's Python snippets type-check under mypy and pyright, and blasdx's own types in them
are exact: every descriptor they compose is a Descriptor, compile(arch) a CompiledKernel,
compile() a Kernel, and none of these is Any (as each was while Operator.__add__ had no return
annotation).

The snippets are read from README.md at test time, joined in order into one module (later
snippets use the names earlier ones define), with an ``assert_type`` and a ``reveal_type`` after
each composed descriptor and after the expressions of EXPECTED, which a type checker then checks.
Third-party modules without types (CuPy, dask-cuda) are Any there, as a user's checker sees them.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
MODULE = "readme_snippets.py"

# Expressions of README's names and their exact types (the checkers' assert_type), checked after
# the last snippet. GEMM is the descriptor README builds last.
EXPECTED = [
    ("GEMM", "Descriptor"),
    ("GEMM.compile(arch=900)", "CompiledKernel"),
    ("GEMM.compile(arch=900).resources", "KernelResources | None"),
    ("GEMM.compile()", "Kernel"),
    ("GEMM.explain()", "str"),
    ("GEMM.replace(SM(800))", "Descriptor"),
    ('Size(64, 64, 64) + Precision("float16")', "Descriptor"),
    ('Precision("float16") + (Size(64, 64, 64) + SM(900))', "Descriptor"),
]
# What the checks import: before the snippets (the checks among them use it), and again before
# EXPECTED's (in case a snippet rebinds a name).
CHECK_IMPORTS = [
    "from typing_extensions import assert_type",
    "from blasdx import SM, Descriptor, Precision, Size",
    "from blasdx.compiler import CompiledKernel, KernelResources",
    "from blasdx.runtime import Kernel",
]


@dataclass(frozen=True)
class Line:
    text: str
    readme_line: int | None  # where the line comes from in README.md (None: a check)


@dataclass(frozen=True)
class Diagnostic:
    line: int  # 1-based, in the module
    severity: str  # "error", "warning", "note" (mypy) / "information" (pyright)
    message: str


def python_snippets(text: str) -> list[tuple[int, str]]:
    """README's ```python blocks, each with the README line its first line is on."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def _composes_descriptor(value: ast.expr, operators: set[str], descriptors: set[str]) -> bool:
    """Whether ``value`` is a sum whose terms include a blasdx operator call or a descriptor."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return False
    terms: list[ast.expr] = []
    stack: list[ast.expr] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            stack += [node.left, node.right]
        else:
            terms.append(node)
    return any(isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id in operators
               or isinstance(t, ast.Name) and t.id in descriptors for t in terms)


def checked_module(snippets: list[tuple[int, str]]) -> tuple[list[Line], list[str]]:
    """The snippets as one module, a check after each descriptor they compose and EXPECTED's at
    the end; and the names of those descriptors."""
    lines: list[Line] = []
    operators: set[str] = set()  # names imported from blasdx
    descriptors: list[str] = []
    for first, code in snippets:
        source = code.splitlines()
        checks_after: dict[int, list[str]] = {}
        for statement in ast.parse(code).body:
            if isinstance(statement, ast.ImportFrom) and statement.module == "blasdx":
                operators |= {alias.asname or alias.name for alias in statement.names}
            elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                  and isinstance(statement.targets[0], ast.Name)
                  and _composes_descriptor(statement.value, operators, set(descriptors))):
                name = statement.targets[0].id
                descriptors.append(name)
                end = statement.end_lineno or statement.lineno
                checks_after.setdefault(end, []).extend(
                    [f"reveal_type({name})", f"assert_type({name}, Descriptor)"])
        for number, text in enumerate(source, start=1):
            lines.append(Line(text, first + number - 1))
            lines += [Line(check, None) for check in checks_after.get(number, [])]
    imports = [Line(text, None) for text in CHECK_IMPORTS]
    tail = [Line(check, None) for expr, expected in EXPECTED
            for check in (f"reveal_type({expr})", f"assert_type({expr}, {expected})")]
    return imports + lines + imports + tail, descriptors


def _mypy(directory: Path) -> tuple[int, list[Diagnostic], str]:
    config = directory / "mypy.ini"
    config.write_text("[mypy]\n"
                      "ignore_missing_imports = True\n"  # CuPy and dask-cuda have no types (or are absent)
                      "[mypy-blasdx.*]\n"
                      "ignore_missing_imports = False\n")  # blasdx must be found, typed (py.typed)
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir",
                          str(directory / ".mypy_cache"), "--no-error-summary", "--no-pretty", "--no-color-output",
                          MODULE], cwd=directory, capture_output=True, text=True, timeout=600)
    found = [Diagnostic(int(m["line"]), m["severity"], m["message"])
             for m in re.finditer(rf"^{re.escape(MODULE)}:(?P<line>\d+): (?P<severity>\w+): (?P<message>.*)$",
                                  run.stdout, re.M)]
    return run.returncode, found, run.stdout + run.stderr


def _pyright(directory: Path) -> tuple[int, list[Diagnostic], str]:
    (directory / "pyrightconfig.json").write_text(json.dumps({
        "include": [MODULE],
        "typeCheckingMode": "standard",
        "useLibraryCodeForTypes": False,  # untyped packages (CuPy) are Unknown, as mypy's Any
        "reportMissingModuleSource": "none",
        "reportMissingImports": "warning",  # dask-cuda may be absent; blasdx is checked below
    }))
    run = subprocess.run([sys.executable, "-m", "pyright", "--outputjson", "-p", str(directory), "--pythonpath",
                          sys.executable], cwd=directory, capture_output=True, text=True, timeout=600)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        return run.returncode, [], run.stdout + run.stderr
    found = [Diagnostic(d["range"]["start"]["line"] + 1, d["severity"], d["message"])
             for d in report.get("generalDiagnostics", [])]
    return run.returncode, found, run.stdout + run.stderr


CHECKERS = {"mypy": _mypy, "pyright": _pyright}


@pytest.mark.slow
@pytest.mark.parametrize("checker", sorted(CHECKERS))
def test_readme_snippets_type_check_with_exact_blasdx_types(checker, tmp_path):
    try:
        __import__(checker)
    except ImportError:
        pytest.skip(f"{checker} is not installed (pip install '.[test]' installs it)")
    snippets = python_snippets(README.read_text())
    assert snippets, "README.md has no ```python snippets to type-check"
    lines, descriptors = checked_module(snippets)
    assert "GEMM" in descriptors, f"README's snippets compose no GEMM (they compose {descriptors}); EXPECTED uses it"
    (tmp_path / MODULE).write_text("\n".join(line.text for line in lines) + "\n")

    returncode, diagnostics, output = CHECKERS[checker](tmp_path)

    def where(number: int) -> str:
        if not 0 < number <= len(lines):
            return f"line {number} of the checked module"
        line = lines[number - 1]
        if line.readme_line is not None:
            return f"README.md:{line.readme_line} {line.text.strip()!r}"
        after = next((f" after README.md:{before.readme_line}" for before in reversed(lines[:number - 1])
                      if before.readme_line is not None), "")
        return f"check {line.text!r}{after}"

    problems = [f"{where(d.line)}: {d.severity}: {d.message}" for d in diagnostics
                if d.severity == "error" or "blasdx" in d.message and "import" in d.message.lower()]
    revealed = {d.line: d.message for d in diagnostics if d.severity in ("note", "information")
                and ("Revealed type is" in d.message or d.message.startswith("Type of"))}
    checks = [number for number, line in enumerate(lines, start=1) if line.text.startswith("reveal_type(")]
    for number in checks:
        if number not in revealed:
            problems.append(f"{where(number)}: {checker} revealed no type (the line was not checked)")
        elif re.search(r"\b(Any|Unknown)\b", revealed[number].split(" is ", 1)[-1]):
            problems.append(f"{where(number)}: {revealed[number]}")
    assert not problems and returncode == 0, (
        f"{checker} on README.md's snippets (exit {returncode}):\n" + "\n".join(problems or [output[-3000:]]))
