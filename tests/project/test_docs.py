"""README.md and docs/: every path they cite is in the repository, and the Use example's
arrays have the shapes and layouts its comments give, for an m, n and k that all differ."""

from __future__ import annotations

import re
import sys
import types

import numpy as np
import pytest

from blasdx import Descriptor

from ..support import DOCS, ROOT, cited_paths, missing_paths


def test_the_citation_finder_flags_outside_and_missing_paths():
    text = ("Speed (../shared/bench/side_by_side.py; benchmarks/RESULTS.md), the flow of DESIGN.md, "
            "`plan/grid.py`, .ci/run, tests/golden and examples/, examples/no_such_example.py.")
    assert cited_paths(text) == {"../shared/bench/side_by_side.py", "benchmarks/RESULTS.md", "DESIGN.md",
                                 "plan/grid.py", ".ci/run", "tests/golden", "examples/",
                                 "examples/no_such_example.py"}
    assert missing_paths(text) == ["../shared/bench/side_by_side.py", "DESIGN.md", "examples/no_such_example.py"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_the_docs_cite_is_in_the_repository(doc):
    text = doc.read_text()
    assert cited_paths(text), f"{doc.name} cites no path: the finder is broken"
    assert missing_paths(text) == [], f"{doc.name} cites paths outside the repository or not in it"


def _python_block_after(heading: str) -> str:
    readme = (ROOT / "README.md").read_text()
    return re.search(re.escape(heading) + r"\n.*?```python\n(.*?)```", readme, re.S).group(1)


def test_the_readme_use_example_builds_arrays_of_the_shapes_it_describes(monkeypatch):
    """Run with NumPy for CuPy and a stand-in for execute() that records its arrays: A is
    (batch, m, k) row-major, B (batch, k, n) column-major, C (batch, m, n), bias (n,)."""
    calls = []
    fake_cupy = types.ModuleType("cupy")
    fake_cupy.random = np.random  # type: ignore[attr-defined]
    fake_cupy.empty = np.empty  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(Descriptor, "execute", lambda self, a, b, c, *args, **kwargs: calls.append((a, b, c, kwargs)))
    namespace: dict = {}
    exec(_python_block_after("## Use") + _python_block_after("### Fusion"), namespace)
    m, n, k = namespace["GEMM"].size
    assert len({m, n, k}) == 3, "the example must tell m, n and k apart"
    assert len(calls) == 3
    for a, b, c, kwargs in calls:
        batch = a.shape[0]
        assert (a.shape, b.shape, c.shape) == ((batch, m, k), (batch, k, n), (batch, m, n))
        assert a.strides[2] == a.itemsize and b.strides[1] == b.itemsize and c.strides[2] == c.itemsize
        assert np.matmul(a[:1], b[:1]).shape == c[:1].shape
        if "bias" in kwargs:
            assert kwargs["bias"].shape == (n,)
