"""The batched kernel behind execute(), planned from the block GEMM's plan.

``kernel_plan`` pads the shared-memory copies against bank conflicts and decides where C
lives (shared memory or registers) and how A and B are copied (a block per item, one at a time);
``BatchedPlan`` is the kernel's plan as the pipeline and the launcher see it; ``launch_min_blocks`` gives the kernel's launch bounds.
``KERNEL_PARAMETERS`` is the kernel's parameter list: the template prints it and the
runtime packs its arguments in its order, so it is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import ClassVar

from ..arch import BLOCK_RESERVED_SHARED, STMATRIX_MIN_SM, SWIZZLE_ALIGNMENT, shared_memory_limit
from ..describe.traits import padded_leading_dimension
from ..errors import UnsupportedError
from ..tuning import tuning_of
from .block import GemmPlan, MatrixPlan, plan_as


@dataclass(frozen=True)
class KernelParameter:
    """One parameter of the batched kernel: its name and C++ type (``scalar_t`` is the
    block GEMM's scalar type)."""

    name: str
    cpp_type: str


# A, B and C (item 0), alpha and beta: what changes from one execute() call to the next.
PER_CALL_PARAMETERS = (KernelParameter("a", "const void*"), KernelParameter("b", "const void*"),
                       KernelParameter("c", "void*"), KernelParameter("alpha", "scalar_t"),
                       KernelParameter("beta", "scalar_t"))
# The batch and each operand's distance between items, in elements.
BATCH_PARAMETERS = tuple(KernelParameter(name, "long long")
                         for name in ("batch", "stride_a", "stride_b", "stride_c"))
# With a bias: its item 0 and its strides along (batch, row, col), 0 where it broadcasts.
BIAS_PARAMETERS = (KernelParameter("bias", "const void*"),) + tuple(
    KernelParameter(name, "long long") for name in ("bias_batch_stride", "bias_row_stride", "bias_col_stride"))
KERNEL_PARAMETERS = PER_CALL_PARAMETERS + BATCH_PARAMETERS
# With FP8 scales on the device (blasdx.runtime.scales): A's (item 0) and its strides along (batch, row, k
# block), B's and its strides along (batch, k block, column or column block); 0 where a scale broadcasts.
SCALE_PARAMETERS = (KernelParameter("scale_a", "const float*"),) + tuple(
    KernelParameter(name, "long long") for name in ("scale_a_batch_stride", "scale_a_row_stride", "scale_a_k_stride")) + (
    KernelParameter("scale_b", "const float*"),) + tuple(
    KernelParameter(name, "long long") for name in ("scale_b_batch_stride", "scale_b_k_stride", "scale_b_col_stride"))
# Grouped()'s (its batch is the groups): the groups' ends in A's rows (int32 on the device) and A's rows.
GROUP_PARAMETERS = (KernelParameter("offsets", "const void*"), KernelParameter("total_rows", "long long"))
# The grid kernel's, last: the parts of a split tile's K loop (1: none), the tiles split (the call's last ones) and
# split-K's workspace (GridPlan.splits, GridPlan.split_units).
GRID_PARAMETERS = (KernelParameter("splits", "long long"), KernelParameter("split_units", "long long"),
                   KernelParameter("workspace", "void*"))
# The TMA grid kernel's, after those: the tensor maps of A and B (blasdx.runtime.tensor_map).
TMA_PARAMETERS = (KernelParameter("a_map", "const __grid_constant__ blasdx::tensor_map"),
                  KernelParameter("b_map", "const __grid_constant__ blasdx::tensor_map"))
# ... and where it stores C by TMA (GridPlan.tma_store), C's after them.
TMA_STORE_PARAMETERS = (KernelParameter("c_map", "const __grid_constant__ blasdx::tensor_map"),)
TENSOR_MAP_PARAMETERS = TMA_PARAMETERS + TMA_STORE_PARAMETERS


def kernel_parameters(has_bias: bool, grid: bool = False, tma: bool = False, scaled: bool = False,
                      grouped: bool = False, tma_store: bool = False) -> tuple[KernelParameter, ...]:
    """The batched (or grid, or grouped) kernel's parameters, in order."""
    return (KERNEL_PARAMETERS + (BIAS_PARAMETERS if has_bias else ()) + (SCALE_PARAMETERS if scaled else ())
            + (GROUP_PARAMETERS if grouped else ()) + (GRID_PARAMETERS if grid else ()) + (TMA_PARAMETERS if tma else ())
            + (TMA_STORE_PARAMETERS if tma_store else ()))


def keeps_c_in_registers(plan: GemmPlan) -> bool:
    """Whether the batched kernel holds C in registers, not in shared memory (see kernel_plan): mma.sync with
    row-major C in aligned pairs of 8-byte values, or of 16-bit ones where one warp's tile is all of C in rows of at
    most 64 bytes (benchmarks/RESULTS.md, Batched execute); FMA where A is laid out as C (accesses coalesce)."""
    c = plan.c
    pairs = c.layout == "row_major" and c.vector_bytes >= 2 * c.element_size
    if plan.overrides.c_in_registers is not None:
        if plan.overrides.c_in_registers and plan.instruction.is_mma and not pairs:
            raise UnsupportedError(
                f"PlanOverrides(c_in_registers=True): the tensor-core path keeps C in registers in pairs of "
                f"neighbouring outputs, which needs row-major C aligned to two elements (C is {c.layout}, "
                f"moved {c.vector_bytes} bytes at a time); leave c_in_registers to the planner")
        return plan.overrides.c_in_registers
    if plan.instruction.is_wgmma:
        # A warpgroup's tile stages C: in registers it ran slower (benchmarks/RESULTS.md, Batched execute).
        return False
    if plan.instruction.is_mma:
        if not pairs:
            return False
        return c.element_size == 8 or (c.element_size == 2 and plan.tiles == 1 and c.ld * c.element_size <= 64)
    return plan.a.layout == c.layout


def stages_c_in_16_byte_pieces(plan: GemmPlan) -> bool:
    """Whether the batched kernel's 16-bit C in registers (one warp's tile is all of C) moves 16 bytes a lane through
    a padded tile in shared memory (ldmatrix / stmatrix), not in 4-byte pairs that fill half a 32-byte sector: SM 900
    (tuning), C row-major in 16-byte aligned rows, the tile a multiple of 32 pieces and two instruction tiles wide."""
    c = plan.c
    return (plan.instruction.is_mma and not plan.instruction.is_wgmma and plan.sm >= STMATRIX_MIN_SM
            and tuning_of(plan.sm).c_through_stmatrix
            and c.element_size == 2 and c.layout == "row_major"
            and plan.tiles == 1 and plan.m == plan.tile_m and plan.n == plan.tile_n and plan.tile_n % 16 == 0
            and c.vector_bytes >= 16 and c.ld * c.element_size % 16 == 0
            and plan.tile_m * plan.tile_n * c.element_size // 16 % 32 == 0)


def shared_layout(plan: GemmPlan, pad: bool, without_c: bool) -> tuple[dict[str, MatrixPlan], int]:
    """A, B and C of a kernel's block GEMM one after another in shared memory (C left out
    where ``without_c``), each leading dimension padded against bank conflicts where
    ``pad`` (a swizzled layout has none to pad), and the bytes of one stage: a multiple of
    SWIZZLE_ALIGNMENT where A and B are swizzled, so that each stage starts where a swizzle
    pattern does."""
    offset, mats = 0, {}
    for x in (plan.a, plan.b, plan.c):
        smem_ld = padded_leading_dimension(x.ld, x.element_size, plan.instruction.padding_unit) if pad else x.ld
        size = -(-smem_ld * x.outer * x.element_size // 16) * 16
        if x.swizzle:
            smem_ld, size = x.ld, x.smem_bytes
        if x.name == "c" and without_c:
            smem_ld, size = x.ld, 0
        mats[x.name] = replace(x, smem_ld=smem_ld, smem_offset=offset, smem_bytes=size)
        offset += size
    if plan.a.swizzle:
        offset = -(-offset // SWIZZLE_ALIGNMENT) * SWIZZLE_ALIGNMENT
    return mats, offset


@dataclass(frozen=True)
class BatchedGemmPlan(GemmPlan):
    """A block GEMM laid out for the batched kernel (``kernel_plan``): shared memory padded, one stage of A, B
    (and C) its ``shared_memory_size``; C in registers or in shared memory."""

    def __hash__(self) -> int:  # GemmPlan's, computed once (a frozen dataclass would make its own each call)
        return self._hash

    # C stays in registers between global memory and the products, not in shared memory.
    c_in_registers: bool = False  # type: ignore[misc]  # the base's property, a field here
    # With C in registers: 16-bit C of one warp's whole tile moves between global memory and the registers 16 bytes
    # a lane, through a padded tile in shared memory (ldmatrix / stmatrix; stages_c_in_16_byte_pieces).
    c_staged_16_bytes: bool = False  # type: ignore[misc]


@lru_cache(maxsize=1024)
def kernel_plan(plan: GemmPlan) -> BatchedGemmPlan:
    """The plan of the batched kernel behind execute(). Its shared-memory copies of A, B
    and C have padded leading dimensions (global memory keeps the descriptor's), unless the
    padding would not fit the SM's shared-memory limit. C skips shared memory where
    ``keeps_c_in_registers`` says (16-bit C then still passes through its padded tile,
    ``stages_c_in_16_byte_pieces``); the copies use cp.async where ``copies_asynchronously``
    says. The device function of ``device_source()`` keeps the descriptor's layout in shared
    memory and cp.async."""
    limit = shared_memory_limit(plan.sm)

    def fitting_layout(c_in_registers: bool) -> tuple[dict[str, MatrixPlan], int]:
        mats, size = shared_layout(plan, True, c_in_registers)
        return (mats, size) if size <= limit else shared_layout(plan, False, c_in_registers)

    mats, size = fitting_layout(False)
    c_in_registers = keeps_c_in_registers(plan)
    staged_16_bytes = c_in_registers and stages_c_in_16_byte_pieces(plan)
    if c_in_registers and not staged_16_bytes:  # C leaves shared memory; staged, it keeps its padded tile
        mats, size = fitting_layout(True)
    return plan_as(BatchedGemmPlan, plan, a=mats["a"], b=mats["b"], c=mats["c"], shared_memory_size=size,
                   c_in_registers=c_in_registers, c_staged_16_bytes=staged_16_bytes,
                   use_cp_async=copies_asynchronously(plan))


# The largest grid a launch takes (CUDA's limit of gridDim.x); the batched kernel's blocks loop
# over the items past it.
MAX_GRID = 2**31 - 1


class ItemKernelPlan:
    """What a kernel that holds each batch item's whole K loop answers the launcher alike: its A and B copied by
    cp.async or plain loads (no TMA, no clusters), no split-K and so no workspace, no register hand-over, the
    batched kernel's parameters, one item of work each. Its subclasses say how items map to blocks."""

    @property
    def tma(self) -> bool:
        return False

    @property
    def cluster(self) -> bool:
        return False

    def kernel_parameters(self, has_bias: bool, scaled: bool = False) -> tuple[KernelParameter, ...]:
        return kernel_parameters(has_bias, scaled=scaled)

    def work(self, batch: int) -> int:
        return batch

    def splits(self, work: int, resident_blocks: int) -> int:
        return 1

    def split_units(self, work: int, resident_blocks: int, splits: int) -> int:
        return 0

    def workspace_bytes(self, work: int, resident_blocks: int, splits: int) -> int:
        return 0

    def workspace_counter_bytes(self, work: int, resident_blocks: int, splits: int) -> int:
        return 0

    def registers_balance(self, launch_registers: int) -> bool:
        return True


@dataclass(frozen=True)
class BatchedPlan(ItemKernelPlan):
    """The plan of the batched kernel behind a Block() descriptor's execute(): a block per batch item, each the
    block GEMM laid out for the kernel (``kernel``, kernel_plan's). A KernelPlan (blasdx.plan.kinds)."""

    kernel: BatchedGemmPlan

    execution: ClassVar[str] = "block"  # the batched kernel of Block() descriptors (blasdx.kinds.block)

    @property
    def sm(self) -> int:
        return self.kernel.sm

    @property
    def kernel_name(self) -> str:
        return self.kernel.kernel_name

    @property
    def threads(self) -> int:
        return self.kernel.threads

    @property
    def block_dim(self) -> tuple[int, int, int]:
        return self.kernel.block_dim

    @property
    def kernel_shared_memory_size(self) -> int:
        return self.kernel.kernel_shared_memory_size

    def blocks(self, batch: int, resident_blocks: int, splits: int) -> int:
        """A block an item: the GPU's scheduler starts the next item's copies as a block ends."""
        return min(batch, MAX_GRID)


def batched_plan(plan: GemmPlan) -> BatchedPlan:
    """The batched kernel's plan of a block GEMM's plan."""
    return BatchedPlan(kernel_plan(plan))


def launch_min_blocks(kernel: GemmPlan, bias: bool) -> int:
    """Blocks an SM the launch bounds of the batched kernel ``kernel`` ask ptxas for (0: none): PlanOverrides'
    min_blocks_per_sm, else two for 256-thread wgmma tiles with a bias whose shared memory fits twice (the bias had
    left one block an SM); elsewhere caps spill or gain no block (benchmarks/RESULTS.md, Batched execute)."""
    if kernel.overrides.min_blocks_per_sm is not None:
        return kernel.overrides.min_blocks_per_sm
    per_block = kernel.kernel_shared_memory_size + BLOCK_RESERVED_SHARED
    fits_twice = 2 * per_block <= shared_memory_limit(kernel.sm) + BLOCK_RESERVED_SHARED
    return 2 if bias and kernel.instruction.is_wgmma and kernel.threads == 256 and fits_twice else 0


def copies_asynchronously(plan: GemmPlan) -> bool:
    """Whether the batched kernel copies A, B (and a staged C) to shared memory by cp.async: for complex and wgmma
    tiles, and on SMs whose tuning keeps it (on SM 900 plain loads stored to shared memory are faster for a block's
    one item: benchmarks/RESULTS.md, Batched execute)."""
    return plan.use_cp_async and (not tuning_of(plan.sm).plain_loads_one_item or plan.is_complex
                                   or plan.instruction.is_wgmma)
