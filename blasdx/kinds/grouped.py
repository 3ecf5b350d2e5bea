"""Grouped(): one GEMM per group of rows of A (a mixture-of-experts layer's experts) on one persistent grid of
Grid()'s TMA kernel (templates/grid.cu.j2 with templates/grouped.cuh.j2): C_g = A_g B_g for rows
offsets[g - 1] .. offsets[g] of A (rows, k) and C (rows, n), B (groups, k, n) one matrix a group. The
offsets stay on the device: one compiled kernel serves every routing, and no call waits for the GPU."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, ClassVar

from ..arch import BLOCK_RESERVED_SHARED, shared_memory_limit
from ..codegen.render import render_grid_kernel, render_grouped_device_source
from ..errors import ArgumentError, UnsupportedError
from ..plan import GridPlan, PlanOverrides, grid_with_alignment, make_grid_plan
from ..plan.block import name_stem
from ..plan.explain import explain_grid
from ..plan.grid import MAX_SUGGESTED_STAGES, suggested_stages, tma_registers_refusal, tma_runs
from ..plan.kernel import KernelParameter, kernel_parameters
from . import ExecutionKind

if TYPE_CHECKING:
    from ..describe.descriptor import Descriptor

# The most groups a call takes (each block keeps their schedule in shared memory: GroupedPlan.static_shared_memory_size).
MAX_GROUPS = 1024
# Bytes of that schedule (templates/grouped.cuh.j2's group_schedule: before[MAX_GROUPS + 1], end[MAX_GROUPS], 32 sums).
SCHEDULE_SIZE = 4 * (2 * MAX_GROUPS + 1 + 32)


@dataclass(frozen=True)
class GroupedPlan(GridPlan):
    """A Grouped() descriptor's plan: Grid()'s TMA kernel over the tiles of every group, no split-K, no clusters.
    Its ``m`` is Size's (a typical group's rows, which chose the tile); each call's rows come from A."""

    execution: ClassVar[str] = "grouped"  # blasdx.kinds.grouped
    grouped: ClassVar[bool] = True
    max_groups: ClassVar[int] = MAX_GROUPS
    schedule_size: ClassVar[int] = SCHEDULE_SIZE
    # Grouped('k'): the groups cut k (A's columns, B's rows; C one matrix a group): each tile's K loop walks its
    # group's rows, the last K tile's rows past the group zeroed in shared memory. Else they cut A's and C's rows.
    ragged_k: bool = False

    @property
    def cluster(self) -> bool:
        return False  # a cluster's pair of tiles would straddle groups

    @property
    def tma_store_fits(self) -> bool:
        return False  # a group's last tile ends where a box of C may not: the register epilogue writes its rows

    @property
    def static_shared_memory_size(self) -> int:
        """The mbarriers and the groups' schedule (templates/grouped.cuh.j2's group_schedule)."""
        return super().static_shared_memory_size + SCHEDULE_SIZE

    def kernel_parameters(self, has_bias: bool, scaled: bool = False) -> tuple[KernelParameter, ...]:
        return kernel_parameters(has_bias, grid=True, tma=True, scaled=scaled, grouped=True)

    def gate_refusal(self, split: bool = False) -> str:
        if self.ragged_k:
            return ("a gated epilogue (SwiGLU, GeGLU) gates the forward product's columns; Grouped('k') computes the "
                    "weights' gradient: use it on a Grouped() descriptor")
        return super().gate_refusal(split)

    def tile_rows_bound(self, rows: int, groups: int) -> int:
        """The most tile rows ``rows`` rows in ``groups`` groups make (each group's last tile may be part full)."""
        return rows // self.tile.m + min(groups, rows)

    def grouped_blocks(self, rows: int, groups: int, resident_blocks: int) -> int:
        """Blocks of a launch: persistent, at most one per tile of the most the groups can have (Grouped('k'): the
        tiles of every group's C)."""
        tiles = groups * self.tiles if self.ragged_k else self.tile_rows_bound(rows, groups) * self.tiles_n
        return max(1, min(tiles, resident_blocks))

    @property
    def kernel_name(self) -> str:
        t = self.tile
        return f"{name_stem('grouped', self)}_tile{t.m}x{t.n}x{t.k}_s{self.stages}_t{self.threads}_{self.digest}"


def make_grouped_plan(desc: Descriptor) -> GroupedPlan:
    """The plan of an executable Grouped() descriptor: Grid()'s plan of its tile, copied by TMA."""
    grid = make_grid_plan(desc)
    values = {f.name: getattr(grid, f.name) for f in fields(grid)}
    ragged_k = desc.operator_map["Execution"].ragged == "k"  # type: ignore[attr-defined]
    plan = GroupedPlan(**{**values, "split_k": False, "item_block": None, "batch_grids": (), "tma": True, "ragged_k": ragged_k})
    if not plan.tile.instruction.is_wgmma:
        which = (" (Grouped('k') reads A column-major and B row-major, which wgmma takes for 16-bit precisions only: "
                 "float16, bfloat16)" if ragged_k else "")
        raise UnsupportedError(
            f"Grouped() runs Grid()'s TMA kernel on wgmma tiles (SM 900, the precisions and layouts explain() lists "
            f"for wgmma){which}, but its tile runs {plan.tile.instruction.name}; change the descriptor to meet them, "
            f"or use Grid() per group")
    refusal = tma_registers_refusal(plan)
    if refusal:
        raise UnsupportedError(f"Grouped() runs Grid()'s TMA kernel, but {refusal}")
    if not tma_runs(plan, 16, 16):
        rows = {x: getattr(plan, x).ld * getattr(plan, x).element_size for x in "ab"}
        raise UnsupportedError(
            f"Grouped() copies A and B by TMA, whose rows must be whole 16 bytes, but A's are {rows['a']} and B's "
            f"{rows['b']} bytes apart; pad them with LeadingDimension (multiples of 16 bytes)")
    if ragged_k and (plan.a.layout != "col_major" or plan.b.layout != "row_major"):
        raise UnsupportedError(f"Grouped('k') cuts A's columns and B's rows into groups, so A is column-major and B "
                               f"row-major (their k the slowest: A = X.T of row-major activations X, B = dC); this "
                               f"descriptor's A is {plan.a.layout} and B {plan.b.layout}: use "
                               f"Arrangement('col_major', 'row_major', <C's>)")
    if not ragged_k and (plan.a.layout != "row_major" or plan.c.layout != "row_major"):
        raise UnsupportedError(f"Grouped() cuts the rows of A and C into groups, so both are row-major (rows of "
                               f"contiguous k and n); this descriptor's A is {plan.a.layout} and C {plan.c.layout}: "
                               f"use Arrangement('row_major', <B's>, 'row_major'), or Grouped('k') for groups of k")
    if ragged_k and "Stages" not in desc.operator_map:  # Size's k only suggests a group's rows: as many as fit
        plan = replace(plan, stages=suggested_stages(plan.tile.shared_memory_size, MAX_SUGGESTED_STAGES, plan.sm))
    limit = shared_memory_limit(plan.sm) + BLOCK_RESERVED_SHARED
    def fits(p: GroupedPlan) -> bool:
        return p.kernel_shared_memory_size + p.static_shared_memory_size + BLOCK_RESERVED_SHARED <= limit

    if "Stages" in desc.operator_map and not fits(plan):
        raise UnsupportedError(f"{plan.stages} stages of {plan.tile.shared_memory_size} bytes and the groups' schedule "
                               f"({plan.static_shared_memory_size} bytes) exceed SM {plan.sm}'s shared memory; use "
                               f"Stages({plan.stages - 1}) or a smaller Tile")
    while plan.stages > 2 and not fits(plan):  # the suggestion, fewer where the schedule needs the room
        plan = replace(plan, stages=plan.stages - 1)
    return plan


def grouped_with_alignment(plan: GroupedPlan, alignment: tuple[int, int, int]) -> GroupedPlan:
    """Grid()'s aligned plan (the kernel explain() names), where A and B start and step on 16 bytes, as TMA needs;
    ArgumentError elsewhere."""
    if alignment[0] < 16 or alignment[1] < 16:
        which = " and ".join(x for x, al in zip("AB", alignment) if al < 16)
        raise ArgumentError(f"{which} must start (and step between rows and groups) on multiples of 16 bytes for "
                            f"Grouped()'s TMA copies; pass a copy (x.clone() in PyTorch, x.copy() in CuPy), whose "
                            f"allocation starts aligned")
    return grid_with_alignment(plan, alignment)  # type: ignore[return-value]


def _plan(desc: Descriptor, overrides: PlanOverrides) -> GroupedPlan:
    if not overrides.is_default:
        raise UnsupportedError("PlanOverrides fix choices of Block() descriptors; a Grouped() descriptor takes its "
                               "choices as operators (Tile, Stages, BlockDim)")
    return make_grouped_plan(desc)


def _launched(plan: GroupedPlan) -> GroupedPlan:
    return plan


def explain_grouped(desc: Descriptor, plan: GroupedPlan) -> list[str]:
    """explain() of a Grouped() descriptor: how the groups are scheduled, then Grid()'s words for the tiles."""
    lines = [line for line in explain_grid(desc, plan) if not line.startswith(("split-K:", "batches:"))]  # none here
    t = plan.tile
    for i, line in enumerate(lines):
        if line.startswith("tiles:"):
            lines[i] = (f"tiles: each group's C in tiles of {t.m}x{t.n} (Tile({t.m}, {t.n}, {t.k}), "
                        f"{'given' if 'Tile' in desc.operator_map else 'suggested'}); the edge tiles read zeros past "
                        f"the operands and write only inside their group")
        elif line.startswith("copies:"):  # TMA always: a call's arrays must allow it (grouped_with_alignment)
            lines[i] = line.split(". Elsewhere")[0].replace(
                "TMA where A and B start, and step between rows and batch items, on multiples of 16 bytes",
                "TMA (A and B must start, and step between rows and groups, on multiples of 16 bytes)")
        elif line.startswith("K loop:") and plan.ragged_k:
            lines[i] = f"K loop: each group's rows in steps of {t.k}" + line[line.index(" per tile,"):]
        elif line.startswith("kernels:"):
            lines[i] = line.replace("; grid-level: Size is the whole problem", "")
        elif line.startswith("blocks:"):
            lines[i] = line.replace("walks the (batch item, tile) pairs", "walks the groups' tiles, group by group")
    if plan.ragged_k:
        groups = (f"groups: each call's offsets (int32 on the device, at most {MAX_GROUPS} groups) cut A's columns and "
                  f"B's rows (k) into groups, each group's product its own C; each tile's K loop walks its group's "
                  f"rows, the last K tile's rows past the group zeroed before its multiply (an empty group's C is "
                  f"beta * C); Size's k ({plan.k}) only chose the tile")
    else:
        groups = (f"groups: each call's offsets (int32 on the device, at most {MAX_GROUPS} groups) cut A's and C's "
                  f"rows into groups, each times its B; every tile of every group runs on one persistent grid (group by "
                  f"group), its rows past the group's end never written; Size's m ({plan.m}) only chose the tile")
    return lines[:1] + [groups] + lines[1:]


KIND = ExecutionKind(execution="grouped", plan=_plan, launched=_launched, aligned=grouped_with_alignment,
                     render_kernel=render_grid_kernel, render_device_source=render_grouped_device_source,
                     explain=explain_grouped, caches=(grid_with_alignment,))
