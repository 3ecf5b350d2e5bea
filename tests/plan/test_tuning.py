"""The planner's measured choices come from blasdx.tuning's table: each field of ``Tuning`` turns its one choice
on and off (the rows patched here), and an SM without a row plans as ``DEFAULT`` says, whatever SM 900 measured."""

from __future__ import annotations

import dataclasses

import pytest

import blasdx.pipeline
from blasdx import SM, Arrangement, Block, Grid, InstructionFamily, Precision, Size
from blasdx.plan import kernel_plan, with_alignment
from blasdx.tuning import DEFAULT, TUNING, Tuning, tuning_of

RCR = Arrangement("row_major", "col_major", "row_major")
RRR = Arrangement("row_major", "row_major", "row_major")


def _kernel(desc):
    return kernel_plan(with_alignment(desc.plan, (16, 16, 16)))


# Each field, a descriptor (on the SM of the row) and the choice it makes, read from a fresh plan.
CHOICES = {
    "plain_loads_one_item": (Size(64, 64, 64) + Precision("float16", "float16", "float32") + RCR + Block()
                             + InstructionFamily("mma"), lambda d: not _kernel(d).use_cp_async),
    "c_through_stmatrix": (Size(32, 32, 32) + Precision("float16") + RRR + Block(),
                           lambda d: _kernel(d).c_staged_16_bytes),
    "pipelined_float64_fragments": (Size(2048, 2048, 2048) + Precision("float64") + RCR + Grid(),
                                    lambda d: d.plan.tile.pipelined_fragments),
    "deep_float64_tiles_any_major": (Size(2048, 2048, 2048) + Precision("float64") + RRR + Grid(),
                                     lambda d: d.tile.k > 16),
    "fma_grid_two_blocks": (Size(4096, 4096, 1024) + Precision("float32") + RRR + Grid(),
                            lambda d: d.plan.blocks_per_sm == 2),
    "float64_tiles_fitted_to_waves": (Size(1536, 1536, 1536) + Precision("float64") + RRR + Grid(),
                                      lambda d: d.tile.n == 64),
}


def test_every_field_of_the_table_has_its_choice_here():
    assert set(CHOICES) == {f.name for f in dataclasses.fields(Tuning)}


@pytest.mark.parametrize("field", sorted(CHOICES))
def test_each_measured_choice_follows_its_field(field, monkeypatch):
    desc, chosen = CHOICES[field]
    for value in (True, False):
        monkeypatch.setitem(TUNING, 900, dataclasses.replace(tuning_of(900), **{field: value}))
        blasdx.pipeline.clear_caches()
        assert chosen(desc + SM(900)) == value, (field, value)
    blasdx.pipeline.clear_caches()


@pytest.mark.parametrize("field", sorted(CHOICES))
def test_an_sm_without_a_row_plans_as_the_default_says(field):
    desc, chosen = CHOICES[field]
    assert 890 not in TUNING and tuning_of(890) == DEFAULT
    assert chosen(desc + SM(890)) == getattr(DEFAULT, field)
