"""BatchInvariant() (issue 49): with Grid() or Grouped(), one tile and one K order for every number of rows, no
split-K, no batched kernel in the grid's place, float32 never tfloat32; refused, with the fix, elsewhere; explain()
says what it fixes. The kernels of every M differ only in M (the GPU test checks the rows bitwise)."""

from __future__ import annotations

import dataclasses
import difflib
import pickle

import pytest

from blasdx import (
    SM,
    Arrangement,
    BatchInvariant,
    Block,
    DescriptorError,
    Grid,
    Grouped,
    Precision,
    Size,
    Stages,
    Tile,
    Warp,
)
from blasdx.pipeline import kernel_source
from blasdx.plan import grid_with_alignment

RCR = Arrangement("row_major", "col_major", "row_major")
BF16 = Precision("bfloat16", "bfloat16", "bfloat16")
ROWS = (1, 2, 7, 63, 64, 65, 100, 128, 255, 256, 257, 500, 512, 1000, 1024, 3001, 4096, 8192, 16383, 16384)
PRECISIONS = [BF16, Precision("float16", "float16", "float32"), Precision("float32"), Precision("float64"),
              Precision("float8_e4m3", "float8_e4m3", "bfloat16"), Precision("tfloat32", "tfloat32", "float32"),
              Precision("int8", "int8", "int32")]


def grid(m, n=4096, k=4096, prec=BF16, *more, execution=None):
    desc = Size(m, n, k) + prec + RCR + SM(900) + (execution or Grid()) + BatchInvariant()
    for op in more:
        desc = desc + op
    return desc


def launched(desc):
    return grid_with_alignment(desc.plan, (16, 16, 16))


def test_operator_is_a_value_that_reads_back():
    assert BatchInvariant() == BatchInvariant() and hash(BatchInvariant()) == hash(BatchInvariant())
    assert repr(BatchInvariant()) == "BatchInvariant()"
    desc = grid(100)
    assert eval(repr(desc), {**globals()}) == desc
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert BatchInvariant() + Grid() + Size(100, 4096, 4096) + SM(900) + RCR + BF16 == desc  # any order


@pytest.mark.parametrize("execution", [Block(), Warp()])
def test_refused_where_rows_are_fixed(execution):
    for compose in (lambda: Size(64, 64, 64) + SM(900) + execution + BatchInvariant(),
                    lambda: BatchInvariant() + Size(64, 64, 64) + execution + SM(900)):
        with pytest.raises(DescriptorError, match=r"applies to Grid\(\) and Grouped\(\).*use Grid\(\), or remove"):
            compose()


def test_refused_on_groups_of_k():
    with pytest.raises(DescriptorError, match=r"Grouped\('k'\) sums over its groups' rows.*remove BatchInvariant"):
        Size(512, 512, 256) + BF16 + RCR + SM(900) + Grouped("k") + BatchInvariant()


def arithmetic(p):
    """What a row of C meets: the instruction (and wgmma's width), the K step, the promotion of partial sums."""
    t = p.tile
    return t.instruction.name, t.n, t.k, t.tile_n if t.instruction.is_wgmma else 0, t.promote_k


@pytest.mark.parametrize("prec", PRECISIONS, ids=lambda p: "-".join(dict.fromkeys((p.a, p.b, p.c))))
@pytest.mark.parametrize("nk", [(1536, 2048), (4096, 14336), (1000, 1000), (96, 4096)], ids=str)
def test_one_arithmetic_and_no_split_for_every_m(prec, nk):
    plans = {m: launched(grid(m, *nk, prec)) for m in ROWS}
    reference = launched(grid(16384, *nk, prec))
    for m, p in plans.items():
        assert arithmetic(p) == arithmetic(reference), m
        assert p.tile.m % 64 == 0 and p.tile.m <= max(64, -(-m // 64) * 64), (m, p.tile.m)  # never taller than m
        assert not p.split_k and p.item_block is None and p.splits(1, 10_000) == 1
    assert plans[1].tile.m == 64 and plans[16384].tile.m == reference.tile.m
    # without it, small problems split K (another K order) or take narrower tiles: what the operator removes
    plain = {m: launched(Size(m, *nk) + prec + RCR + SM(900) + Grid()) for m in ROWS}
    assert len({arithmetic(p) for p in plain.values()}) > 1 or any(p.split_k for p in plain.values())


def test_a_height_that_would_change_the_arithmetic_takes_the_reference_tile(monkeypatch):
    """plan.grid checks the fitted tile's instruction against the reference's and keeps the reference's where they
    differ (no plan differs today: forced here by a reference tile of another K step)."""
    import blasdx.plan.grid as plan_grid

    real = plan_grid.make_tile_plan

    def other_k_for_the_reference(tile_desc):
        t = real(tile_desc)
        return t if tile_desc.size.m != 256 else dataclasses.replace(t, k=32)

    monkeypatch.setattr(plan_grid, "make_tile_plan", other_k_for_the_reference)
    p = plan_grid.make_grid_plan(grid(1, 4096, 4096))
    assert (p.tile.m, p.tile.k) == (256, 32)


@pytest.mark.parametrize("rows", [(1, 63), (4096, 16384)], ids=["64-rows", "256-rows-in-clusters"])
def test_kernels_of_every_m_differ_only_in_m(rows):
    """The whole source of the kernel execute() launches at two Ms of one tile height: every changed line is one of
    M's (the problem's rows, its tile rows, the name). Across heights and clusters (two blocks sharing B's copies)
    the instructions and K order stay (test_one_arithmetic...); the GPU test compares the rows across them."""
    plans = [launched(grid(m, 1000, 1000)) for m in rows]
    assert plans[0].tile == plans[1].tile and plans[0].cluster == plans[1].cluster
    small, large = (kernel_source(p) for p in plans)
    changed = [line for line in difflib.unified_diff(small.splitlines(), large.splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed
    names = tuple(f"_{m}x1000x1000_" for m in rows)
    for line in changed:
        assert any(word in line for word in ("problem_m", "block_tiles_m", *names)), line


def test_a_given_tile_is_kept_and_split_k_still_off():
    p = launched(grid(64, 4096, 4096, BF16, Tile(128, 128, 64), Stages(3)))
    assert (p.tile.m, p.tile.n, p.tile.k, p.stages, p.split_k) == (128, 128, 64, 3, False)
    assert (Size(64, 4096, 4096) + BF16 + RCR + SM(900) + Grid() + Tile(128, 128, 64)).plan.split_k


def test_float32_stays_float32():
    for m in (1, 16384):
        assert launched(grid(m, 1024, 1024, Precision("float32"))).tile.instruction.name == "fma"


def test_grouped_tile_ignores_sizes_m():
    tiles = {launched(grid(m, 1536, 2048, execution=Grouped())).tile for m in (8, 64, 128, 4096)}
    assert len(tiles) == 1
    plain = {launched(Size(m, 1536, 2048) + BF16 + RCR + SM(900) + Grouped()).tile for m in (8, 4096)}
    assert len(plain) == 2  # without it, a small typical group takes a shorter tile


def test_explain_says_what_it_fixes():
    text = " ".join(grid(64, 4096, 4096).explain().split())
    assert "split-K: never (BatchInvariant()" in text
    assert "batch invariance (BatchInvariant()): every row of C is bitwise the same whatever Size's m" in text
    assert "batches: this grid kernel, whatever the batch (BatchInvariant()" in text
    f32 = " ".join(grid(64, 1024, 1024, Precision("float32")).explain().split())
    assert "float32 runs float32 (never tfloat32" in f32
    grouped = " ".join(grid(64, 1536, 2048, execution=Grouped()).explain().split())
    assert "whatever a group's rows or how many groups" in grouped


def test_compiles_for_sm900():
    compiled = grid(1, 1000, 1000).compile(arch=900)
    assert compiled.cubin
