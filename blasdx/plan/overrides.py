"""PlanOverrides: the planner's choices, fixed by hand (for benchmarks and ablations).

Every field left at None is decided by the planner. A plan carries its overrides, so
they are part of its identity: its kernel name, the caches and the launches key on them.
Pass them as ``blasdx.pipeline.plan(descriptor, PlanOverrides(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import DescriptorError


@dataclass(frozen=True)
class PlanOverrides:
    """Choices the planner would otherwise make (None: the planner decides)."""

    # Batched kernel: C between global memory and registers (True) or staged in shared memory.
    c_in_registers: bool | None = None
    # FMA path: (tile_m, tile_n, group_m, group_n), a thread's micro-tile and its row and
    # column groups (group = tile: one block of rows or columns).
    fma_micro_tile: tuple[int, int, int, int] | None = None
    # FMA path: threads t and t^1 share rows, t and t^2 columns (needs even tile counts).
    fma_thread_pairs: bool | None = None
    # Batched kernel: the blocks per SM that __launch_bounds__ asks the register allocator for.
    min_blocks_per_sm: int | None = None

    def __new__(cls, *args: object, **kwargs: object) -> PlanOverrides:
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(names))
        if unknown or len(args) > len(names):
            raise DescriptorError(f"PlanOverrides takes the keyword arguments {', '.join(names)}; got "
                                  + (f"{', '.join(unknown)}" if unknown else f"{len(args)} positional arguments"))
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if self.min_blocks_per_sm is not None and not (isinstance(self.min_blocks_per_sm, int)
                                                       and self.min_blocks_per_sm >= 1):
            raise DescriptorError(f"PlanOverrides.min_blocks_per_sm must be an int >= 1, got {self.min_blocks_per_sm!r}")
        tile = self.fma_micro_tile
        if tile is not None and (len(tile) != 4 or any(not isinstance(v, int) or v < 1 for v in tile)
                                 or tile[0] % tile[2] or tile[1] % tile[3]):
            raise DescriptorError(
                f"PlanOverrides.fma_micro_tile must be (tile_m, tile_n, group_m, group_n) with positive "
                f"ints and groups dividing the tile, got {tile!r}")

    @property
    def is_default(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))


NO_OVERRIDES = PlanOverrides()
