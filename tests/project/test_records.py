"""Records a maintainer can trust (STYLE.md): the package, benchmarks, templates and docs cite no file
outside the repository and no diary session, docstrings copy no GPU figures (they cite a section of
benchmarks/RESULTS.md instead), and every section they cite by name exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def _sources() -> list[Path]:
    python = [p for folder in ("blasdx", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))]
    templates = sorted(p for p in (ROOT / "templates").rglob("*") if p.is_file())
    return [*python, *templates, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


SOURCES = _sources()
PACKAGE = sorted((ROOT / "blasdx").rglob("*.py"))

_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
_ORDINALS = [*_UNITS, "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
             "seventeenth", "eighteenth", "nineteenth", "twentieth", *(f"twenty[-\\s]?{u}" for u in _UNITS),
             "thirtieth"]
FORBIDDEN = {
    "a file of the shared folder outside the repository": re.compile(r"\.\./shared"),
    "DESIGN.md, which is not in the repository": re.compile(r"DESIGN\.md"),
    "a one-off script under .probe/, which is not in the repository": re.compile(r"\.probe/"),
    "a session ordinal (a diary, not a record)": re.compile(
        r"\b(?:" + "|".join(_ORDINALS) + r"|\d+(?:st|nd|rd|th))\s+session\b", re.IGNORECASE),
}
# A GPU named beside a figure: 0.79x, 45%, 395 TFLOP/s, 2940 GB/s.
GPU = re.compile(r"\bH[12]00\b")
FIGURE = re.compile(r"\d(?:\.\d+)?(?:\s*(?:TFLOP/s|GB/s)|x\b|\s?%)")
CITED_SECTION = re.compile(r"RESULTS\.md, ")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each module, class and function docstring of a Python file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                found.append((node.body[0].lineno, text))
    return found


def _headings() -> list[str]:
    return [line[3:].strip() for line in RESULTS.read_text().splitlines() if line.startswith("## ")]


def test_the_record_checks_flag_what_they_should():
    diary = "figures of the twenty-second\n    session; the 17th session; ../shared/bench/x.py; .probe/stm2.py; DESIGN.md"
    assert {why for why, pattern in FORBIDDEN.items() if pattern.search(diary)} == set(FORBIDDEN)
    assert not any(p.search("a second stage; the first of the session's arrays") for p in FORBIDDEN.values())
    assert FIGURE.search("ran at 0.79x torch.matmul") and FIGURE.search("395-429 TFLOP/s")
    assert FIGURE.search("94.1% of copy") and FIGURE.search("2940 GB/s")
    assert not FIGURE.search("a warp per 64 x 32, 8x8 micro-tiles, 4096^3")
    assert "Grid against cuBLAS" in _headings()


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_no_source_cites_a_file_outside_the_repository_or_a_session(path):
    text = path.read_text()
    found = [f"line {_line(text, m.start())}: {m.group()!r} ({why})"
             for why, pattern in FORBIDDEN.items() for m in pattern.finditer(text)]
    assert found == [], f"{_name(path)} cites what a reader cannot open; cite a RESULTS.md section instead"


@pytest.mark.parametrize("path", PACKAGE, ids=_name)
def test_no_docstring_copies_a_gpu_measurement(path):
    found = [f"line {line}: {figure.group()!r}"
             for line, text in _docstrings(path) if GPU.search(text) and (figure := FIGURE.search(text))]
    assert found == [], (f"{_name(path)}: a docstring copies GPU figures, which drift; state the rule and "
                         f"its reason and cite the benchmarks/RESULTS.md section that holds them")


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".py" or p.parent.name == "docs"], ids=_name)
def test_every_results_section_cited_by_name_exists(path):
    # Comment markers and line breaks joined away, so that a citation may wrap.
    text = re.sub(r"\s*\n\s*(?:#\s*)?", " ", path.read_text())
    headings = _headings()
    unknown = [text[m.end():m.end() + 40] for m in CITED_SECTION.finditer(text)
               if not any(text.startswith(h, m.end()) for h in headings)]
    assert unknown == [], f"{_name(path)} cites sections benchmarks/RESULTS.md lacks (its ## headings: {headings})"
