"""Measured choices, per SM: one table keyed by exact SM, with an explicit default.

Hardware facts (what an SM can do: TMA, stmatrix, wgmma) live in :mod:`blasdx.arch`; this table
holds what measurements chose among the things an SM can do. An SM without a row of its own
takes ``DEFAULT`` (the choices that make no assumption); a row copied from another SM's says so.
The measurements behind each field are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Tuning:
    """The planner's measured choices on one SM (each field: what it turns on, and where measured)."""

    # The batched kernel moves one item at a time per block with plain loads stored to shared
    # memory (ld.global, st.shared) instead of cp.async (H100: the same bytes faster).
    plain_loads_one_item: bool = False
    # The batched kernel's 16-bit row-major C passes through a padded tile, 16 bytes a lane by
    # ldmatrix/stmatrix, where the warp's tile is all of C (H100: faster than 4-byte pairs).
    c_through_stmatrix: bool = False
    # float64 Grid() tiles with A and B K-major keep 64 x 32 a warp and load the next step's
    # fragments while multiplying (H100).
    pipelined_float64_fragments: bool = False
    # float64 Grid() tiles where A or B is not K-major may be 32 deep (H100's 128 x 128 tiles; H200's 128 x 64).
    deep_float64_tiles_any_major: bool = False
    # float32 FMA Grid() tiles with row-major B or complex values run two blocks an SM (H100).
    fma_grid_two_blocks: bool = False
    # float64 Grid() tiles take 128 x 64 where their waves of WAVE_BLOCKS (132 SMs) end sooner (H200).
    float64_tiles_fitted_to_waves: bool = False


DEFAULT = Tuning()

# Measured on H100 (SM 900).
_HOPPER = Tuning(plain_loads_one_item=True, c_through_stmatrix=True, pipelined_float64_fragments=True,
                 deep_float64_tiles_any_major=True, fma_grid_two_blocks=True, float64_tiles_fitted_to_waves=True)

# SM 1000-1210 take SM 900's choices, unmeasured on them (no GPU of theirs has run blasdx's
# benchmarks); a measurement there replaces its row. Not the waves of 132 SMs, which are Hopper's.
_LATER = replace(_HOPPER, float64_tiles_fitted_to_waves=False)
TUNING: dict[int, Tuning] = {900: _HOPPER, 1000: _LATER, 1030: _LATER, 1100: _LATER, 1200: _LATER, 1210: _LATER,
                             1010: _LATER}


def tuning_of(sm: int) -> Tuning:
    """The measured choices for ``sm``: its row, or ``DEFAULT``."""
    return TUNING.get(sm, DEFAULT)
