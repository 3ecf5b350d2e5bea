"""Helpers that tests of several folders share: descriptors from compact specs (the compile matrix's,
Block() and Grid() ones), NVRTC's PTX of a source and the runs of loads in it, and the paths that
README.md and docs/ cite."""

from __future__ import annotations

import re
from pathlib import Path

from blasdx import SM, Arrangement, Block, Grid, Precision, Size, Type
from blasdx.compiler.nvrtc import options_for

ROOT = Path(__file__).resolve().parent.parent

# --- descriptors from compact specs -----------------------------------------------------------

LAYOUT = {"r": "row_major", "c": "col_major"}

# (precisions, complex, arrangement, size, SM of the algorithm)
MATRIX = [
    (("float16", "float16", "float32"), False, "rcr", (64, 64, 64), 750),
    (("float16", "float16", "float16"), False, "ccc", (30, 31, 33), 750),
    (("bfloat16", "bfloat16", "float32"), False, "rrr", (32, 32, 32), 800),
    (("tfloat32", "tfloat32", "float32"), False, "crc", (13, 5, 7), 800),
    (("float32", "float32", "float32"), False, "rcc", (64, 64, 64), 750),
    (("float64", "float64", "float64"), False, "ccr", (16, 16, 16), 800),
    (("int8", "int8", "int32"), False, "rcr", (64, 32, 64), 800),
    (("uint8", "uint8", "uint32"), False, "ccc", (8, 16, 32), 800),
    (("float8_e4m3", "float8_e5m2", "float32"), False, "rcr", (64, 64, 64), 890),
    (("int16", "int16", "int64"), False, "rrc", (16, 16, 16), 750),
    (("float16", "float16", "float16"), True, "rcr", (16, 16, 16), 750),
    (("float64", "float64", "float64"), True, "crr", (8, 16, 32), 800),
    (("int4", "uint4", "int32"), False, "rcr", (64, 32, 128), 750),
    (("binary", "binary", "int32"), False, "rcc", (32, 64, 256), 800),
    (("float16", "float16", "float32"), False, "rrr", (128, 64, 64), 900),  # wgmma, B read transposed
]


def describe(prec, cx, arr, size, sm):
    """A Block() descriptor from a spec of MATRIX's form; arr is a code such as "rcr"."""
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Block()
    return desc + Type("complex") if cx else desc


def spec_id(spec):
    """A spec's test id, and the name of its golden file."""
    prec, cx, arr, size, sm = spec
    return f"{'c' if cx else ''}{'-'.join(prec)}_{arr}_{'x'.join(map(str, size))}_sm{sm}"


def gemm(size=(128, 128, 64), prec=("float16", "float16", "float32"), arr="rrr", sm=900, *extra):
    """A Block() descriptor from compact arguments: 128x128x64 float16 -> float32, RRR, SM 900 unless told
    (the wgmma tests')."""
    desc = Size(*size) + Precision(*prec) + Arrangement(*(LAYOUT[x] for x in arr)) + SM(sm) + Block()
    for op in extra:
        desc = desc + op
    return desc


RCR = Arrangement("row_major", "col_major", "row_major")
F16F32 = Precision("float16", "float16", "float32")


def arrangement_of(code: str) -> Arrangement:
    """Arrangement from a code such as "rcr" (row-major A, column-major B, row-major C)."""
    return Arrangement(*({"r": "row_major", "c": "col_major"}[x] for x in code))


def grid(*ops, size=(4096, 4096, 4096), sm=900):
    """A Grid() descriptor, 4096^3 float16 -> float32 RCR on SM 900 unless told, with ``ops`` added."""
    desc = Size(*size) + F16F32 + RCR + SM(sm) + Grid()
    for op in ops:
        desc = desc + op
    return desc


# --- NVRTC's PTX ------------------------------------------------------------------------------

def ptx_of(source: str, name: str, arch: int = 900) -> str:
    """NVRTC's PTX of ``source`` (the virtual architecture of the cubin blasdx builds)."""
    from cupy_backends.cuda.libs import nvrtc
    options = [o.replace("-arch=sm_", "-arch=compute_") for o in options_for(arch)]
    program = nvrtc.createProgram(source, name, (), ())
    try:
        nvrtc.compileProgram(program, options)
        return nvrtc.getPTX(program).decode()
    finally:
        nvrtc.destroyProgram(program)


def global_loads_between_stores(ptx: str) -> list[int]:
    """The lengths of the runs of global loads that end at a global store, in PTX order."""
    runs, count = [], 0
    for op in re.findall(r"\b(ld\.global|st\.global)", ptx):
        if op == "ld.global":
            count += 1
        elif count:
            runs.append(count)
            count = 0
    return runs


# --- paths cited by README.md and docs/ (tests/project/test_docs.py) -----------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_DIRS = (".ci", "benchmarks", "blasdx", "docs", "examples", "scripts", "templates", "tests")
_START = r"(?<![\w./-])"  # a path starts after a space, a backtick, a parenthesis...
CITATIONS = [
    re.compile(_START + r"((?:\.\./)+[\w./-]+)"),  # anything outside the repository
    re.compile(_START + r"((?:\.?[\w-]+/)+[\w.-]+\.(?:py|md|sh|j2|toml|json|txt))"),  # dir/file.ext, `plan/grid.py`
    re.compile(_START + r"((?:" + "|".join(map(re.escape, TOP_DIRS)) + r")/[\w./-]*)"),  # .ci/run, tests/golden, examples/
    re.compile(_START + r"([A-Z][A-Z_]+\.md)\b"),  # a bare DESIGN.md
]
# Docs name modules and templates from inside their folders (`describe/traits.py`, `gemm/mma.cuh.j2`).
BASES = (ROOT, ROOT / "blasdx", ROOT / "templates", ROOT / "docs")


def cited_paths(text: str) -> set[str]:
    """The paths ``text`` cites, as tests/project/test_docs.py checks them."""
    return {m.rstrip(".,:;") for pattern in CITATIONS for m in pattern.findall(text)}


def missing_paths(text: str) -> list[str]:
    """The paths ``text`` cites that are outside the repository or not in it."""
    def found(path: str) -> bool:
        if path.startswith("../"):
            return False
        return any((base / path).resolve().is_relative_to(ROOT) and (base / path).exists() for base in BASES)
    return sorted(p for p in cited_paths(text) if not found(p))
