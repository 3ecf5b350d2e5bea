"""Loaded kernels and their launches: the only code that puts a kernel on a GPU.

``Kernel`` is a compiled batched kernel loaded on one device. ``bind`` turns fully
checked operands into a ``BoundLaunch`` (grid, batch strides, overlap spans, and the
kernel's argument block with everything but the per-call values filled in), and
``BoundLaunches`` keeps them by array signature: a later call with CuPy arrays or PyTorch
tensors (and bias) of the same shapes, strides, dtypes, devices and pointer alignment only
checks for overlap, writes its pointers and scalars into the block and launches with
``cuLaunchKernel``. The argument list follows blasdx.plan.kernel.KERNEL_PARAMETERS (and
BIAS_PARAMETERS).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..compiler import CompiledKernel
from ..plan import DescriptorPlan, GridPlan, KernelPlan
from ..plan.grid import TMA_STORE_ROWS
from ..plan.kernel import BATCH_PARAMETERS, BIAS_PARAMETERS, KERNEL_PARAMETERS, TENSOR_MAP_PARAMETERS
from .arguments import BiasView, MatrixView, scalar
from .device import cupy_module, stream_handle, stream_of
from .scales import is_number
from .tensor_map import TENSOR_MAP_ALIGNMENT, TENSOR_MAP_BYTES, OperandLayout, TensorMap

if TYPE_CHECKING:
    from ..codegen.hooks import Fusion
    from .groups import GroupsView
    from .scales import ScaleView


@dataclass
class Kernel:
    """A loaded kernel on one device, ready to launch."""

    compiled: CompiledKernel
    device_id: int
    function: Any  # cupy.cuda.function.Function; its ``ptr`` is the CUfunction
    module: Any
    resident_blocks: int  # blocks the whole device runs at once (the largest useful grid)
    plan: KernelPlan  # the plan of the kernel (any execution kind's)

    @property
    def kernel_name(self) -> str:
        return self.compiled.kernel_name


# The argument block: one slot per kernel parameter, wide enough for the widest (a
# complex<double> alpha or beta), each value little-endian at the start of its slot.
_SLOT = 16
# The per-call values fill the first slots (PER_CALL_PARAMETERS: a, b, c, alpha, beta); the
# bias pointer, where there is one, the slot after KERNEL_PARAMETERS.
_PER_CALL = struct.Struct("<Q8xQ8xQ8x32s")  # alpha's and beta's slots as one field
_BIAS_POINTER = struct.Struct("<Q")
_BIAS_OFFSET = len(KERNEL_PARAMETERS) * _SLOT
# A grid kernel's split count, split units and workspace pointer, in neighbouring slots (BoundLaunch.splits_offset).
_SPLITS_AND_WORKSPACE = struct.Struct("<q8xq8xQ")
_INT64 = struct.Struct("<q")
_MAX_SCALARS = 64


# The per-thread default stream's handle (CUDA's cudaStreamPerThread, CuPy's Stream.ptds).
PER_THREAD_STREAM = 2


class SplitWorkspaces:
    """split-K's workspaces, one a (device, stream), kept from call to call: a new one from CuPy's pool and its counters
    zeroed each call cost 5-10 us of host time, the split GEMMs of few tiles 1.23-1.43x their time between CUDA events
    (benchmarks/RESULTS.md, Grid against cuBLAS). A workspace's first ``region`` bytes hold the counters, zeroed once
    when it is made: every launch leaves the counters it used zero again (combine_splits), and its parts, which it
    writes before it reads, start at ``region`` whatever its counters, so no launch's parts fall on another's counters.
    A launch's workspace pointer is ``region - counter_bytes`` into it (its counters end where the parts start). The
    per-thread default stream's one handle is each host thread's own stream: a workspace a thread there. At most
    ``limit`` workspaces: the first made goes back to its stream's pool, whose next use follows its last launch."""

    def __init__(self, limit: int = 16, least_region: int = 8192) -> None:
        self._kept: dict[tuple[int, int, int], tuple[Any, int]] = {}  # (device, stream, thread): (array, region)
        self._limit = limit
        self._least_region = least_region
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Workspaces kept (streams')."""
        return len(self._kept)

    def get(self, device_id: int, stream: int, counter_bytes: int, parts_bytes: int) -> tuple[Any, int]:
        """The workspace array (hold it until the launch is queued) and the pointer of a launch on ``stream`` whose
        counters take ``counter_bytes`` and its parts ``parts_bytes``; made (grown) on the stream where it is
        missing (smaller)."""
        key = (device_id, stream, threading.get_ident() if stream == PER_THREAD_STREAM else 0)
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[1] < counter_bytes or kept[0].nbytes - kept[1] < parts_bytes:
                region = max(counter_bytes, self._least_region, kept[1] if kept else 0)
                parts = max(parts_bytes, kept[0].nbytes - kept[1] if kept else 0)
                cupy = cupy_module()
                with stream_of(stream):
                    array = cupy.empty(region + parts, dtype=cupy.uint8)
                cupy.cuda.runtime.memsetAsync(array.data.ptr, 0, region, stream)
                if kept is None and len(self._kept) >= self._limit:
                    del self._kept[next(iter(self._kept))]
                kept = self._kept[key] = (array, region)
        array, region = kept
        return array, array.data.ptr + region - counter_bytes


SPLIT_WORKSPACES = SplitWorkspaces()


def _slot_bytes(value: Any) -> bytes:
    """A NumPy scalar (from ``scalar``) as the bytes of one argument slot."""
    return np.asarray(value).tobytes().ljust(_SLOT, b"\0")


class ArgumentBlock:
    """A launch's arguments as cuLaunchKernel's ``kernelParams`` takes them: ``count``
    slots of _SLOT bytes, then ``tensor_maps`` slots of TENSOR_MAP_BYTES (aligned to
    TENSOR_MAP_ALIGNMENT), and an array of their addresses (at ``address``)."""

    def __init__(self, count: int, tensor_maps: int = 0) -> None:
        plain = count * _SLOT
        self.values = ctypes.create_string_buffer(plain + tensor_maps * TENSOR_MAP_BYTES + TENSOR_MAP_ALIGNMENT)
        base = ctypes.addressof(self.values)
        first_map = -(-(base + plain) // TENSOR_MAP_ALIGNMENT) * TENSOR_MAP_ALIGNMENT
        self.map_addresses = tuple(first_map + i * TENSOR_MAP_BYTES for i in range(tensor_maps))
        addresses = [base + i * _SLOT for i in range(count)] + list(self.map_addresses)
        self._slots = (ctypes.c_void_p * len(addresses))(*addresses)
        self.address = ctypes.addressof(self._slots)

    def put_int64(self, index: int, value: int) -> None:
        _INT64.pack_into(self.values, index * _SLOT, int(value))


@dataclass(frozen=True)
class BoundLaunch:
    """A launch whose operands were fully checked once: the kernel, grid and strides that
    every later call with the same launch signature reuses (see ``launch_signature``)."""

    kernel: Kernel
    grid: int
    has_bias: bool
    spans: tuple[int, int, int, int]  # bytes A, B, C and the bias cover, for the per-call overlap check
    arguments: ArgumentBlock = field(compare=False, hash=False)
    # cuLaunchKernel's arguments before the stream: function, grid, block, shared memory
    dimensions: tuple[int, ...] = field(compare=False, hash=False)
    launch_kernel: Any = field(compare=False, hash=False)  # CuPy's binding of cuLaunchKernel
    # (alpha, beta) given as Python numbers, already as the bytes of their two slots
    # (converting costs ~1 us), at most _MAX_SCALARS pairs.
    scalars: dict = field(default_factory=dict, compare=False, hash=False)
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False, hash=False)
    # A grid kernel's K-loop parts per split unit (GridPlan.split_units), its split units and the bytes of their
    # workspace (0: no split-K).
    splits: int = 1
    split_units: int = 0
    workspace_bytes: int = 0
    workspace_counter_bytes: int = 0  # its start, the counters (SplitWorkspaces)
    splits_offset: int = 0  # where the splits' and workspace's slots start in the block (a grid kernel's)
    # The TMA grid kernel's tensor maps of A and B (and of C where it stores C by TMA), written into their slots per call.
    tensor_maps: tuple[TensorMap, ...] | None = field(default=None, compare=False, hash=False)
    # Where the pointers of FP8 scales go (SCALE_PARAMETERS' scale_a and scale_b slots, in bytes); 0: none.
    scale_offsets: tuple[int, int] = (0, 0)
    scale_spans: tuple[int, int] = (0, 0)  # bytes the scales cover, for the per-call overlap check
    # Where a grouped kernel's offsets pointer goes (GROUP_PARAMETERS' offsets slot, in bytes); 0: none.
    offsets_offset: int = 0
    offsets_span: int = 0  # bytes the offsets cover, for the per-call overlap check

    def launch(self, pa: int, pb: int, pc: int, scalars: bytes, stream: int, pbias: int = 0,
               pscales: tuple[int, int] = (0, 0), poffsets: int = 0) -> None:
        """Launch on data pointers, alpha and beta as their slots' bytes (``scalar_bytes``),
        on the raw stream handle ``stream``. Raises CuPy's CUDADriverError where the driver
        refuses (for one, no current context in this thread)."""
        arguments = self.arguments
        workspace = self._workspace(stream) if self.workspace_bytes else None  # (held until the launch is queued)
        with self.lock:  # the block is shared; cuLaunchKernel copies it before returning
            _PER_CALL.pack_into(arguments.values, 0, pa, pb, pc, scalars)
            if self.has_bias:
                _BIAS_POINTER.pack_into(arguments.values, _BIAS_OFFSET, pbias)
            if self.scale_offsets[0]:
                _BIAS_POINTER.pack_into(arguments.values, self.scale_offsets[0], pscales[0])
                _BIAS_POINTER.pack_into(arguments.values, self.scale_offsets[1], pscales[1])
            if self.offsets_offset:
                _BIAS_POINTER.pack_into(arguments.values, self.offsets_offset, poffsets)
            if self.workspace_bytes:
                _SPLITS_AND_WORKSPACE.pack_into(arguments.values, self.splits_offset,
                                                1 if workspace is None else self.splits,
                                                0 if workspace is None else self.split_units,
                                                0 if workspace is None else workspace[1])
            if self.tensor_maps is not None:
                for tensor_map, pointer in zip(self.tensor_maps, (pa, pb, pc)):
                    tensor_map.write(pointer)
            self.launch_kernel(*self.dimensions, stream, arguments.address, 0)

    def _workspace(self, stream: int) -> tuple[Any, int] | None:
        """split-K's workspace for one launch (SPLIT_WORKSPACES': the array and the launch's pointer), its counters
        zero, or None under stream capture (a graph would keep a pointer that a later launch on another stream may use
        at once: no split-K there)."""
        cupy = cupy_module()
        if cupy.cuda.runtime.streamIsCapturing(stream):
            return None
        counters = self.workspace_counter_bytes
        return SPLIT_WORKSPACES.get(self.kernel.device_id, stream, counters, self.workspace_bytes - counters)

    def overlaps(self, pa: int, pb: int, pc: int, pbias: int = 0, pscales: tuple[int, int] = (0, 0),
                 poffsets: int = 0) -> bool:
        """Whether C shares memory with A, B, the bias, the scales or the offsets at these pointers."""
        sa, sb, sc, sbias = self.spans
        (ps_a, ps_b), (ss_a, ss_b), so = pscales, self.scale_spans, self.offsets_span
        return bool(sc) and bool((sa and pc < pa + sa and pa < pc + sc) or
                                 (sb and pc < pb + sb and pb < pc + sc) or
                                 (sbias and pc < pbias + sbias and pbias < pc + sc) or
                                 (ss_a and pc < ps_a + ss_a and ps_a < pc + sc) or
                                 (ss_b and pc < ps_b + ss_b and ps_b < pc + sc) or
                                 (so and pc < poffsets + so and poffsets < pc + sc))

    def scalar_bytes(self, alpha: Any, beta: Any, plan: DescriptorPlan) -> bytes:
        """alpha and beta for this launch as the bytes of their two slots; Python numbers
        converted once and remembered. Raises ArgumentError as ``scalar`` does."""
        # Python numbers key the memo (equal values convert alike, 1 and 1.0); others convert each time.
        key = (alpha, beta) if ((type(alpha) is float or type(alpha) is int)
                                and (type(beta) is float or type(beta) is int)) else None
        converted = self.scalars.get(key) if key is not None else None
        if converted is None:
            converted = _slot_bytes(scalar(alpha, plan, "alpha")) + _slot_bytes(scalar(beta, plan, "beta"))
            if key is not None and len(self.scalars) < _MAX_SCALARS:
                self.scalars[key] = converted
        return converted


def bind(kernel: Kernel, va: MatrixView, vb: MatrixView, vc: MatrixView,
         bias: BiasView | None = None, scales: tuple[ScaleView | None, ScaleView | None] | None = None,
         groups: GroupsView | None = None) -> BoundLaunch:
    """The launch of ``kernel`` on checked operands. The batched kernel gets one block per item
    (up to MAX_GRID): the GPU's block scheduler then starts an item's copies the moment a block
    ends, where a persistent grid (as many blocks as the device runs at once, each looping over
    items) moved less (benchmarks/RESULTS.md, Batched execute). A grid GEMM's kernel is
    persistent: at most as many blocks as the device runs at once walk the tiles (and the
    splits of their K loops: ``GridPlan.splits``). The argument block holds every value that
    stays from call to call: the batch, the strides between items, the bias's strides and the
    splits. A grouped kernel's (``groups``: its offsets) batch is its groups, B's items; A and C are one
    matrix each, and its blocks as many as the groups' tiles can be, at most those the GPU runs at once."""
    batch = 1 if va.batch is None else va.batch
    plan = kernel.plan
    work = plan.work(batch)  # blocks' worth of work without split-K
    splits = plan.splits(work, kernel.resident_blocks)
    split_units = plan.split_units(work, kernel.resident_blocks, splits)
    strides = (v.strides[0] if v.batch is not None else 0 for v in (va, vb, vc))
    fixed = dict(zip((p.name for p in BATCH_PARAMETERS), (batch, *strides)))  # batch, stride_a, _b, _c
    if groups is not None:
        fixed.update(batch=groups.groups, offsets=groups.ptr, total_rows=groups.rows)
    if bias is not None:  # BIAS_PARAMETERS: the pointer (per call), then its strides
        fixed.update(zip((p.name for p in BIAS_PARAMETERS[1:]), bias.strides))
    if scales is not None:  # SCALE_PARAMETERS: the pointers (per call), the strides (one set for all items; B's a group's)
        sa, sb = scales
        fixed.update(scale_a_batch_stride=0, scale_a_row_stride=sa.strides[0] if sa else 0,
                     scale_a_k_stride=sa.strides[1] if sa else 0, scale_b_batch_stride=sb.batch_stride if sb else 0,
                     scale_b_k_stride=sb.strides[0] if sb else 0, scale_b_col_stride=sb.strides[1] if sb else 0)
    fixed.update(splits=splits, split_units=split_units)  # where the kernel has them; the workspace pointer comes per call
    parameters = plan.kernel_parameters(bias is not None, scales is not None)
    plain = [p for p in parameters if p not in TENSOR_MAP_PARAMETERS]
    arguments = ArgumentBlock(len(plain), len(parameters) - len(plain))
    for index, parameter in enumerate(plain):
        if parameter.name in fixed:
            arguments.put_int64(index, fixed[parameter.name])
    if groups is not None:
        grid = plan.grouped_blocks(groups.rows, groups.groups, kernel.resident_blocks)  # type: ignore[attr-defined]
    else:
        grid = plan.blocks(batch, kernel.resident_blocks, splits)
    at_once = kernel.resident_blocks
    workspace_bytes = 0 if splits == 1 else plan.workspace_bytes(work, at_once, splits)
    counter_bytes = 0 if splits == 1 else plan.workspace_counter_bytes(work, at_once, splits)
    tensor_maps = None
    if plan.tma:
        assert isinstance(plan, GridPlan)  # the kinds whose kernels take tensor maps
        tensor_maps = tuple(TensorMap(operand_layout(plan, x, v, batch, groups is not None), address)
                            for x, v, address in zip("abc", (va, vb, vc), arguments.map_addresses))
    return BoundLaunch(kernel=kernel, grid=grid, has_bias=bias is not None, splits=splits, split_units=split_units,
                       workspace_bytes=workspace_bytes, workspace_counter_bytes=counter_bytes, tensor_maps=tensor_maps,
                       splits_offset=_SLOT * next((i for i, p in enumerate(plain) if p.name == "splits"), 0),
                       scale_offsets=(_SLOT * next((i for i, p in enumerate(plain) if p.name == "scale_a"), 0),
                                      _SLOT * next((i for i, p in enumerate(plain) if p.name == "scale_b"), 0)),
                       scale_spans=(0, 0) if scales is None else tuple(0 if v is None else v.span_bytes  # type: ignore[arg-type]
                                                                      for v in scales),
                       offsets_offset=_SLOT * next((i for i, p in enumerate(plain) if p.name == "offsets"), 0),
                       offsets_span=0 if groups is None else groups.span_bytes,
                       spans=(va.span_bytes, vb.span_bytes, vc.span_bytes, 0 if bias is None else bias.span_bytes),
                       arguments=arguments,
                       dimensions=(kernel.function.ptr, grid, 1, 1, *kernel.compiled.block_dim,
                                   kernel.compiled.shared_memory_size),
                       launch_kernel=cupy_module().cuda.driver.launchKernel)


def operand_layout(plan: GridPlan, name: str, view: MatrixView, batch: int, grouped: bool = False) -> OperandLayout:
    """Operand ``name`` of a TMA grid launch as its tensor map sees it: the whole matrix (its
    contiguous dimension first) of each of ``batch`` items, the box one slab of a stage. A grouped
    launch's operands are the views' own: their outer extent the call's (the rows the groups cut), their
    items the view's (B's groups, or one)."""
    if name == "c":  # stored by TMA (GridPlan.tma_store): boxes of a wgmma tile's rows, c_box_swizzle bytes wide
        c = plan.c
        return OperandLayout(element_size=c.element_size, inner=c.inner, outer=c.outer, batch=batch, ld=c.ld,
                             batch_stride=view.strides[0] if view.batch is not None else 0,
                             box_inner=plan.c_box_swizzle // c.element_size, box_outer=TMA_STORE_ROWS,
                             swizzle=plan.c_box_swizzle)
    whole, part = getattr(plan, name), plan.tma_operand(name)
    # B's slabs in halves of their rows where k is its contiguous dimension: each block of a cluster copies one, and
    # a gated split epilogue (gate_split) copies the gate's and the up's from their two places
    halved = (plan.cluster or plan.gate_split) and name == "b" and part.k_inner
    outer = (view.shape[-2] if whole.layout == "row_major" else view.shape[-1]) if grouped else whole.outer
    batch = (view.batch or 1) if grouped else batch
    return OperandLayout(element_size=whole.element_size, inner=whole.inner, outer=outer, batch=batch,
                         ld=whole.ld, batch_stride=view.strides[0] if view.batch is not None else 0,
                         box_inner=part.slab_elements, box_outer=part.slab_rows // 2 if halved else part.slab_rows,
                         swizzle=part.swizzle)


def launch_signature(ndarray: Any, tensor: Any, plan: DescriptorPlan, fusion: Fusion, a: Any, b: Any, c: Any,
                     bias: Any) -> tuple[tuple, tuple[int, int, int, int]] | None:
    """What a call's operands look like to the bound launches: CuPy operands, or PyTorch
    ones where ``tensor`` is torch.Tensor (C being one); None for other kinds or a mix.

    Returns (key, pointers): ``key`` holds everything the checks depend on, down to each
    pointer's alignment (equal keys pass or fail the checks alike); ``pointers`` are the
    data pointers of A, B, C and the bias (0 for none). Built without generators or named
    tuples: this runs on every call (each costs ~0.3 us)."""
    if tensor is None:
        if type(a) is not ndarray or type(b) is not ndarray or type(c) is not ndarray:
            return None
        da, db, dc = a.data, b.data, c.data
        pa, pb, pc = da.ptr, db.ptr, dc.ptr
        key = (plan, fusion, a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,
               c.shape, c.strides, c.dtype, da.device_id, db.device_id, dc.device_id, pa & 15, pb & 15, pc & 15)
        if bias is None:
            return key, (pa, pb, pc, 0)
        if type(bias) is not ndarray:
            return None
        pbias = bias.data.ptr
        return (*key, bias.shape, bias.strides, bias.dtype, bias.data.device_id, pbias & 15), (pa, pb, pc, pbias)
    if not (isinstance(a, tensor) and isinstance(b, tensor)):
        return None
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    # get_device(): the CUDA device's index, -1 off the GPU (never bound: the checks refuse it)
    key = (plan, fusion, a.shape, a.stride(), a.dtype, a.get_device(), b.shape, b.stride(), b.dtype,
           b.get_device(), c.shape, c.stride(), c.dtype, c.get_device(), pa & 15, pb & 15, pc & 15)
    if bias is None:
        return key, (pa, pb, pc, 0)
    if not isinstance(bias, tensor):
        return None
    pbias = bias.data_ptr()
    return (*key, bias.shape, bias.stride(), bias.dtype, bias.get_device(), pbias & 15), (pa, pb, pc, pbias)


class BoundLaunches:
    """Bound launches by launch signature (CuPy arrays, or PyTorch tensors), at most
    ``limit`` of them."""

    def __init__(self, limit: int = 4096) -> None:
        self._launches: dict[tuple, BoundLaunch] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, key: tuple) -> BoundLaunch | None:
        return self._launches.get(key)

    def relaunch(self, cupy: Any, key: tuple, pointers: tuple[int, int, int, int], alpha: Any, beta: Any,
                 plan: DescriptorPlan, stream: Any, tensor: Any, pscales: tuple[int, int] = (0, 0),
                 poffsets: int = 0) -> bool:
        """Launch ``key``'s bound launch (a call's launch signature, with its scales' and offsets' where it has them)
        on this call's pointers (A, B, C, bias), scales, offsets, alpha, beta and stream (``tensor``: C where a PyTorch
        tensor); False, launching nothing, where none is bound, it is another device's, C overlaps an input or the
        driver refuses (no current context): the checked path then binds, makes the context current or names the fault.
        Every later call runs this (benchmarks/RESULTS.md, Host cost of a call): no allocation, no call of its own."""
        bound = self._launches.get(key)
        if bound is None or cupy.cuda.runtime.getDevice() != bound.kernel.device_id:
            return False
        pa, pb, pc, pbias = pointers
        if bound.overlaps(pa, pb, pc, pbias, pscales, poffsets):
            return False
        try:
            bound.launch(pa, pb, pc, bound.scalar_bytes(alpha, beta, plan), stream_handle(stream, tensor), pbias,
                         pscales, poffsets)
        except cupy.cuda.driver.CUDADriverError:
            return False
        return True

    def put(self, key: tuple, bound: BoundLaunch) -> None:
        if len(self._launches) < self._limit:
            with self._lock:
                self._launches[key] = bound

    def values(self) -> list[BoundLaunch]:
        """Every bound launch (for diagnostics and tests)."""
        with self._lock:
            return list(self._launches.values())

    def clear(self) -> None:
        with self._lock:
            self._launches.clear()

    def __len__(self) -> int:
        return len(self._launches)


def offsets_signature(ndarray: Any, tensor: Any, offsets: Any) -> tuple[tuple, int] | None:
    """What a grouped call's offsets look like to the bound launches (the part of its key beside
    ``launch_signature``'s), and their pointer; None where they are neither a CuPy array nor (with ``tensor``) a
    PyTorch tensor."""
    if type(offsets) is ndarray:
        ptr = offsets.data.ptr
        return ("offsets", offsets.shape, offsets.strides, offsets.dtype, offsets.data.device_id, ptr & 3), ptr
    if tensor is not None and isinstance(offsets, tensor):
        ptr = offsets.data_ptr()
        return ("offsets", offsets.shape, offsets.stride(), offsets.dtype, offsets.get_device(), ptr & 3), ptr
    return None


def scales_signature(ndarray: Any, tensor: Any, scale_a: Any, scale_b: Any) -> tuple[tuple, tuple[int, int]] | None:
    """What FP8 scales on the device look like to the bound launches (the part of a scaled call's key beside
    ``launch_signature``'s), and their pointers; a number (folded into alpha per call) or None counts as none.
    None where a scale is neither a CuPy array nor (with ``tensor``) a PyTorch tensor."""
    keys: list[tuple] = []
    pointers = [0, 0]
    for i, x in enumerate((scale_a, scale_b)):
        if x is None or is_number(x):
            keys.append(("none" if x is None else "number",))
        elif type(x) is ndarray:
            pointers[i] = x.data.ptr
            keys.append((x.shape, x.strides, x.dtype, x.data.device_id, pointers[i] & 3))
        elif tensor is not None and isinstance(x, tensor):
            pointers[i] = x.data_ptr()
            keys.append((x.shape, x.stride(), x.dtype, x.get_device(), pointers[i] & 3))
        else:
            return None
    return ("scales", *keys), (pointers[0], pointers[1])
