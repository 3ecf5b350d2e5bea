"""The package's layering (issue 15), checked on the source: imports point down the data
flow, the one upward seam is the Descriptor's call into the pipeline, and tests and
benchmarks use no private blasdx names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "blasdx"

# The data flow, top to bottom: a module may import modules of its own layer or of the
# layers above it (earlier in this list), never of the layers below.
LAYERS = [
    ("blasdx.errors", "blasdx.settings", "blasdx.version"),
    ("blasdx.arch", "blasdx.tuning"),
    ("blasdx.describe",),
    ("blasdx.plan",),
    ("blasdx.codegen",),
    ("blasdx.kinds",),
    ("blasdx.compiler",),
    ("blasdx.runtime",),
    ("blasdx.pipeline", "blasdx.packing"),
    ("blasdx", "blasdx.__main__", "blasdx.pytorch", "blasdx.dask_gemm", "blasdx.numba"),
]
# The one upward import: the Descriptor's doers call the pipeline (imported on first use).
SEAM = ("blasdx.describe.descriptor", "blasdx.pipeline")
MAX_FUNCTION_IMPORTS = 7  # (the seventh: blasdx.numba imports numba.cuda after checking its version)
MAX_TEMPLATE_LINES = 350


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(imported blasdx module, inside a function, line) for each import in ``path``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only
            if isinstance(child, ast.Import):
                found.extend((a.name, in_function, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append((sub if _exists(sub) else base, in_function, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return [(m, f, line) for m, f, line in found if m == "blasdx" or m.startswith("blasdx.")]


def _exists(module: str) -> bool:
    relative = Path(*module.split("."))
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative / "__init__.py").is_file()


def _layer(module: str) -> int:
    best = None
    for rank, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    assert best is not None, f"{module} belongs to no layer; add it to LAYERS"
    return best[0]


MODULES = sorted(PACKAGE.rglob("*.py"))
EDGES = [(_module_name(p), target, in_function, line) for p in MODULES for target, in_function, line in _imports(p)]


def test_every_import_points_down_the_data_flow():
    upward = [f"{source}:{line} imports {target}" for source, target, _, line in EDGES
              if _layer(target) > _layer(source) and (source, target) != SEAM]
    assert not upward, "imports against the data flow:\n" + "\n".join(upward)


def _cycle(edges: set[tuple[str, str]]) -> list[str] | None:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return None


def _between_modules(with_functions: bool) -> set[tuple[str, str]]:
    # A package's __init__ importing its own modules is not a cycle of the data flow.
    return {(s, t) for s, t, in_function, _ in EDGES
            if (with_functions or not in_function) and (s, t) != SEAM and s != t
            and not t.startswith(s + ".") and not s.startswith(t + ".")}


@pytest.mark.parametrize("with_functions", [False, True], ids=["module level", "with function-level imports"])
def test_no_import_cycle_apart_from_the_documented_seam(with_functions):
    cycle = _cycle(_between_modules(with_functions))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_seam_is_one_import_inside_one_function():
    seam = [(s, t, f) for s, t, f, _ in EDGES if (s, t) == SEAM]
    assert seam == [(*SEAM, True)]


def test_few_imports_inside_functions():
    """Every import made inside a function, blasdx's or another package's (CuPy, NVRTC,
    ml_dtypes and cuda-pathfinder load on first use, so that import blasdx needs no GPU)."""
    inside = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{_module_name(path)}:{n.lineno}" for n in ast.walk(node)
                           if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert len(set(inside)) <= MAX_FUNCTION_IMPORTS, inside


def test_no_template_is_over_the_line_limit():
    long = {p.name: n for p in (ROOT / "templates").rglob("*.j2") if (n := len(p.read_text().splitlines())) > MAX_TEMPLATE_LINES}
    assert not long, long


# Other libraries' private names are theirs to change (torch.cuda._sleep in a stream test).
OTHER_LIBRARIES = {"torch", "cupy", "np", "numpy", "sys", "os", "triton"}


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _private_uses(path: Path) -> list[str]:
    """Attributes or imported names with one leading underscore, used from ``path``."""
    uses = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Attribute) and _root(node) not in OTHER_LIBRARIES:
            names = [node.attr]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("blasdx"):
            names = [a.name for a in node.names]
        uses += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                 if n.startswith("_") and not n.startswith("__")]
    return uses


def test_tests_and_benchmarks_use_no_private_blasdx_names():
    files = [p for folder in ("tests", "benchmarks", "examples", "scripts") for p in (ROOT / folder).rglob("*.py")]
    uses = [u for p in files for u in _private_uses(p)]
    assert not uses, "private names used:\n" + "\n".join(uses)


def test_the_planner_reads_measured_choices_from_the_tuning_table_not_sm_literals():
    """No comparison of an SM with a number outside arch (hardware facts) and tuning (measured
    choices): a new SM is given its choices in one table, never inherited by '>= 900'."""
    from blasdx.arch import SUPPORTED_SMS

    sms = "|".join(str(sm) for sm in (700, 720, *SUPPORTED_SMS))
    pattern = re.compile(rf"(?:\b(?:sm|arch)\b|\.value)\s*(?:>=|<=|==|!=|<|>)\s*(?:{sms})\b")
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("arch.py", "tuning.py", "__main__.py"):  # the demo compares a GPU with its descriptor
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code.replace(".sm", " sm")):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_every_supported_sm_has_its_choices_stated_or_takes_the_default_on_purpose():
    from blasdx.arch import SUPPORTED_SMS
    from blasdx.tuning import DEFAULT, TUNING, tuning_of

    for sm in SUPPORTED_SMS:
        assert tuning_of(sm) == TUNING.get(sm, DEFAULT)
    assert all(sm in SUPPORTED_SMS for sm in TUNING)
    assert tuning_of(800) == DEFAULT and tuning_of(900).plain_loads_one_item


def test_the_planner_never_reenters_the_facade():
    """The Descriptor (the facade) calls the pipeline; below it, planning, rendering, compiling and
    running take plans, never descriptors' doers: only the layers above the pipeline import it."""
    users = sorted({s for s, t, _, _ in EDGES if t == "blasdx.describe.descriptor" and not s.startswith("blasdx.describe")})
    assert users == ["blasdx", "blasdx.dask_gemm", "blasdx.numba", "blasdx.pipeline", "blasdx.pytorch"], users
