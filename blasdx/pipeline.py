"""The one module that chains the data flow: plan -> render -> compile -> load -> launch.

    Descriptor --plan--> its kind's plan --launched_plan--> kernel plan --render--> CUDA source
        --compile (NVRTC, cached)--> cubin --load--> Kernel --bind/launch--> result

Each step that depends on the execution kind asks the kind (blasdx.kinds); none tests which it is.

The Descriptor's doers (``plan``, ``source``, ``device_source()``, ``explain()``,
``compile()``, ``execute()``) are one-line calls into this module. Benchmarks and
ablations use it too, with ``PlanOverrides`` in place of the planner's choices:

    plan = blasdx.pipeline.plan(GEMM, PlanOverrides(c_in_registers=False))
    blasdx.pipeline.execute(plan, a, b, c, 1.0, 0.0)

Each stage's memo is listed in ``cache_info()`` and emptied by ``clear_caches()``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from . import settings
from .arch import accepted_sms
from .codegen import render
from .codegen.hooks import NO_FUSION, Fusion, Hook, make_fusion
from .codegen.naming import c_abi_namespace, kernel_name
from .compiler import (
    DEFAULT_CACHE,
    CompiledKernel,
    check_arch,
    compile_source,
    entry_resources,
    header_identity,
    nvrtc_version,
    options_for,
    supported_archs,
)
from .describe.descriptor import Descriptor
from .errors import ArgumentError, CompileError, DeviceError, UnsupportedError
from .kinds import aligned_plan, every_kind, launched_plan, of_descriptor, render_device_source, render_launched
from .plan import NO_OVERRIDES, DescriptorPlan, PlanOverrides
from .plan import explain as explaining
from .runtime.arguments import (
    BiasView,
    bias_view,
    check_operands,
    check_torch_output,
    data_alignment,
    scalar,
    torch_tensor_type,
)
from .runtime.device import (
    CU_FUNC_ATTRIBUTE_NUM_REGS,
    compile_arch_for,
    cupy_module,
    current_device,
    device_arch,
    load_function,
    max_active_clusters,
    stream_handle,
)
from .runtime.groups import check_grouped_operands, group_bias_view, one_row_stand_ins
from .runtime.launch import BoundLaunches, Kernel, bind, launch_signature, offsets_signature, scales_signature
from .runtime.scales import fold_number_scales, scale_view
from .version import __version__

# --- describe -> plan ---------------------------------------------------------------------


def plan(desc: Descriptor, overrides: PlanOverrides | None = None) -> DescriptorPlan:
    """The plan of an executable descriptor, with ``overrides`` in place of the planner's choices
    (UnsupportedError where its kind has none to override). Without overrides it is ``desc.plan``,
    planned once per descriptor."""
    if overrides is None:
        return desc.plan
    desc.plan  # noqa: B018 - raises IncompleteDescriptorError for a descriptor that cannot run
    return of_descriptor(desc).plan(desc, overrides)  # type: ignore[no-any-return]


def plan_of(desc: Descriptor) -> DescriptorPlan:
    """The plan of an executable descriptor (its ``plan``, which calls this once)."""
    return of_descriptor(desc).plan(desc, NO_OVERRIDES)  # type: ignore[no-any-return]


def explain(desc: Descriptor, width: int = explaining.WIDTH) -> str:
    """explain()'s text: its kind's account of the descriptor's plan (the block GEMM's where it has no
    execution operator)."""
    lines = (of_descriptor(desc).explain(desc, desc.plan) if desc.is_executable
             else explaining.explain_block(desc, None))
    return explaining.text(lines, width)


# Fusions of hooks given as names, expressions or Hook values (and None), by (hooks, has_bias,
# plan): resolving them each call cost more host time than the rest of a fused call. Once it
# holds _RESOLVED_FUSIONS_LIMIT of them, other combinations are resolved on every call (nothing
# is evicted: a process rarely uses more than a few).
_RESOLVED_FUSIONS: dict[tuple, Fusion] = {}
_RESOLVED_FUSIONS_LIMIT = 256


def fusion(desc: Descriptor, prologue: Any, epilogue: Any, a_load: Any, b_load: Any, c_load: Any,
           c_store: Any, has_bias: bool) -> Fusion:
    """execute()'s element-wise hooks as a Fusion value (NO_FUSION where there are none),
    resolved once per plan for hooks given as names, expressions or Hook values: a later call
    with the same ones pays one dictionary lookup."""
    plan = desc.plan
    key = (prologue, epilogue, a_load, b_load, c_load, c_store, has_bias, plan)
    try:
        resolved = _RESOLVED_FUSIONS.get(key)
    except TypeError:  # an unhashable hook: make_fusion below names it in its error
        resolved = None
    if resolved is not None:
        return resolved
    hooks = key[:6]
    if not has_bias and all(h is None for h in hooks):
        return NO_FUSION
    resolved = make_fusion(prologue=prologue, epilogue=epilogue, a_load=a_load, b_load=b_load, c_load=c_load,
                           c_store=c_store, has_bias=has_bias,
                           precisions=(plan.a.precision, plan.b.precision, plan.c.precision),
                           scalar_precision=plan.scalar_precision, is_complex=plan.is_complex)
    if all(h is None or isinstance(h, (str, Hook)) for h in hooks) and len(_RESOLVED_FUSIONS) < _RESOLVED_FUSIONS_LIMIT:
        _RESOLVED_FUSIONS[key] = resolved
    return resolved


# --- plan -> CUDA source -----------------------------------------------------------------


def device_source(plan: DescriptorPlan, name: str = "gemm") -> str:
    """The block GEMM as device code in namespace ``name`` (the descriptor's layout); for a
    Grid() descriptor, its tile's block GEMM and the pieces of its tile loop."""
    return render_device_source(plan, name)


def kernel_source(plan: DescriptorPlan, fusion: Fusion = NO_FUSION) -> str:
    """The complete source of the kernel behind ``execute()``."""
    kernel = launched_plan(plan)
    return render_launched(kernel, kernel_name(kernel, fusion), fusion)


# --- source -> cubin ---------------------------------------------------------------------

_compiled: dict[tuple[DescriptorPlan, int, Fusion], CompiledKernel] = {}


def compile_for_arch(plan: DescriptorPlan, arch: int, fusion: Fusion | None = None, *,
                     cache: Any = None) -> CompiledKernel:
    """Render and compile the kernel execute() launches for ``plan`` (with the hooks of ``fusion``) for
    ``arch`` (as 900). With the default cache, a kernel compiled before in this process is
    returned without rendering or hashing its source again."""
    check_arch(arch)
    fusion = fusion or NO_FUSION  # None and NO_FUSION are the same kernel
    memo_key = (plan, arch, fusion)
    if cache is None and memo_key in _compiled:
        return _compiled[memo_key]
    if arch < plan.sm:
        raise UnsupportedError(
            f"arch {arch} is older than the descriptor's SM({plan.sm}); compile for SM {plan.sm} "
            f"or newer, or use .replace(SM({arch}))"
        )
    kernel = launched_plan(plan)
    name = kernel_name(kernel, fusion)
    try:
        entry = compile_source(lambda: render_launched(kernel, name, fusion), arch, name=name, cache=cache,
                               metadata={"kernel_name": name}, identity=render.kernel_identity(kernel, name, fusion))
    except CompileError as exc:
        if not fusion.expressions:
            raise
        written = "; ".join(f"{slot}={text!r}" for slot, text in fusion.expressions)
        raise CompileError(
            f"the hook expression(s) {written} did not compile; x has type T (float for 16- and "
            f"8-bit floats). NVRTC said: {_first_error(exc.log)}",
            log=exc.log, source=exc.source, options=exc.options, kernel_name=name) from None
    compiled = CompiledKernel(cubin=entry.cubin, kernel_name=name, arch=arch,
                              shared_memory_size=kernel.kernel_shared_memory_size,
                              block_dim=kernel.block_dim, options=options_for(arch),
                              resources=entry_resources(entry, name))
    if cache is None:
        _compiled[memo_key] = compiled
    return compiled


def _first_error(log: str) -> str:
    lines = [line for line in (log or "").splitlines() if "error" in line]
    return lines[0].split("error:", 1)[-1].strip() if lines else (log or "").strip()[:200]


# --- plan -> LTO-IR for a Numba kernel (blasdx.numba) ---------------------------------------


@dataclass(frozen=True)
class NumbaUnit:
    """A block GEMM's (or Grid() descriptor's) device API as C-ABI functions ``<namespace>_<function>`` in LTO-IR for ``arch``
    (templates/numba.cu.j2), which blasdx.numba links into Numba kernels."""

    ltoir: bytes
    namespace: str
    arch: int


_numba_units: dict[tuple[render.NumbaPlan, Fusion, int], NumbaUnit] = {}


def numba_unit(plan: render.NumbaPlan, fusion: Fusion, arch: int) -> NumbaUnit:
    """The LTO-IR of ``plan``'s device API (a Block() or Grid() descriptor's) with ``fusion``'s hooks for ``arch``
    (as 900): memoized, and from the disk cache by its identity (a hit renders nothing)."""
    key = (plan, fusion, arch)
    unit = _numba_units.get(key)
    if unit is not None:
        return unit
    check_arch(arch)
    if arch < plan.sm:
        raise UnsupportedError(f"arch {arch} is older than the descriptor's SM({plan.sm}); link for SM {plan.sm} "
                               f"or newer, or use .replace(SM({arch}))")
    identity = render.numba_unit_identity(plan, fusion)
    ns = c_abi_namespace(identity)
    entry = compile_source(lambda: render.render_numba_unit(plan, ns, fusion), arch, name=ns, identity=identity,
                           output="ltoir", metadata={"namespace": ns})
    unit = NumbaUnit(ltoir=entry.cubin, namespace=ns, arch=arch)
    _numba_units[key] = unit
    return unit


def numba_unit_source(plan: render.NumbaPlan, fusion: Fusion) -> tuple[str, str]:
    """(namespace, source) of numba_unit's unit, for Numba to compile itself (blasdx.numba's link="source")."""
    ns = c_abi_namespace(render.numba_unit_identity(plan, fusion))
    return ns, render.render_numba_unit(plan, ns, fusion)


# --- cubin -> loaded kernel --------------------------------------------------------------

_loaded: dict[tuple[DescriptorPlan, Fusion, int], Kernel] = {}
_load_lock = threading.Lock()


def kernel(plan: DescriptorPlan, fusion: Fusion | None = None, device_id: int | None = None,
           action: str = "execute()") -> Kernel:
    """The kernel execute() launches for ``plan``, loaded on a device (default: the current one),
    compiled for that device's architecture (the plan's SM picked the algorithm); ``action``
    names the call that needs the device in the error where there is none."""
    if device_id is None:
        device_id = current_device(action)
    fusion = fusion or NO_FUSION
    key = (plan, fusion, int(device_id))
    loaded = _loaded.get(key)
    if loaded is not None:
        return loaded
    sm = device_arch(device_id)
    if sm < plan.sm:
        raise DeviceError(
            f"device {device_id} is SM {sm}, older than the descriptor's SM({plan.sm}); use "
            f".replace(SM({sm})) or run on a newer GPU"
        )
    compiled = compile_for_arch(plan, compile_arch_for(sm), fusion)
    with _load_lock:
        loaded = _loaded.get(key)
        if loaded is None:
            module, function = load_function(compiled.cubin, compiled.kernel_name, device_id,
                                             compiled.shared_memory_size)
            cupy = cupy_module()
            launched = launched_plan(plan)
            registers = cupy.cuda.driver.funcGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS, function.ptr)
            if not launched.registers_balance(registers):  # a TMA kernel's setmaxnreg.inc would wait forever
                raise CompileError(f"{compiled.kernel_name} starts with {registers} registers a thread, fewer than "
                                   f"its register hand-over between warpgroups assumes; report this to blasdx")
            sms = cupy.cuda.Device(device_id).attributes["MultiProcessorCount"]
            per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                function.ptr, launched.threads, compiled.shared_memory_size)
            resident = sms * max(1, per_sm)
            if launched.cluster:  # clusters fill GPCs, not always every SM
                resident = 2 * max(1, max_active_clusters(function, launched.threads, compiled.shared_memory_size, 2))
            loaded = Kernel(compiled, int(device_id), function, module, resident, launched)
            _loaded[key] = loaded
    return loaded


# --- launch --------------------------------------------------------------------------------

BOUND_LAUNCHES = BoundLaunches()


def fusion_for_bias(fusion: Fusion, bias: BiasView | None) -> Fusion:
    """``fusion`` for the bias at hand: where the bias is the same on every row of C (its row
    stride is 0: one row of n values broadcast down C, the common bias), the kernel reads it by
    column alone (``Fusion.bias_rows_alike``), which ran faster than reading it by row and column."""
    if bias is None or bias.strides[1] != 0:
        return fusion
    return fusion.reading_bias_by_column()


_GATED_PLANS: dict[tuple[DescriptorPlan, bool], DescriptorPlan] = {}


def for_gate(plan: DescriptorPlan, fusion: Fusion) -> DescriptorPlan:
    """``plan`` as ``fusion``'s gated epilogue needs it (DescriptorPlan.gated: C half the product's width, its gate
    and up where the fusion's layout puts them; once, a plan so made has C narrower than n already), or as it is
    without a gate."""
    if not fusion.gate or plan.c.cols != plan.n:
        return plan
    key = (plan, fusion.gate_split)
    gated = _GATED_PLANS.get(key)
    if gated is None:
        gated = _GATED_PLANS[key] = plan.gated(fusion.gate_split)  # ArgumentError, with the fix, where it cannot
    return gated


def bias_cols(plan: DescriptorPlan, fusion: Fusion) -> int | None:
    """The columns a bias is added to where they are not C's: a gated epilogue's product's."""
    return plan.n if fusion.gate else None


def execute(plan: DescriptorPlan, a: Any, b: Any, c: Any, alpha: Any, beta: Any, *, stream: Any = None,
            fusion: Fusion = NO_FUSION, bias: Any = None, scale_a: Any = None, scale_b: Any = None,
            offsets: Any = None) -> Any:
    """c = alpha * a @ b + beta * c (with ``fusion``'s hooks and ``bias``) in place; returns c.
    CuPy arrays or PyTorch tensors (and bias) seen before with the same signature skip the
    checks but for overlap. PyTorch tensors run on PyTorch's current stream where ``stream``
    is None; everything else on CuPy's. FP8 scales (``scale_a``, ``scale_b``): execute_scaled;
    a Grouped() plan and its ``offsets``: execute_grouped; a gated epilogue (``fusion.gate``): for_gate's plan."""
    plan = for_gate(plan, fusion)
    if offsets is not None or plan.execution == "grouped":
        return execute_grouped(plan, a, b, c, alpha, beta, stream=stream, fusion=fusion, bias=bias, scale_a=scale_a,
                               scale_b=scale_b, offsets=offsets)
    if scale_a is not None or scale_b is not None:
        return execute_scaled(plan, a, b, c, alpha, beta, stream=stream, fusion=fusion, bias=bias, scale_a=scale_a,
                              scale_b=scale_b)
    cupy = cupy_module()
    tensor = torch_tensor_type()
    on_torch = tensor is not None and isinstance(c, tensor)  # then PyTorch's stream where none is given
    if on_torch and c.requires_grad:
        check_torch_output(c)
    signature = launch_signature(cupy.ndarray, tensor if on_torch else None, plan, fusion, a, b, c, bias)
    if signature is not None and BOUND_LAUNCHES.relaunch(cupy, signature[0], signature[1], alpha, beta, plan, stream,
                                                         c if on_torch else None):
        return c
    va, vb, vc = check_operands(plan, a, b, c)  # raises an overlap relaunch saw (a bias's: bias_view below)
    scalar(alpha, plan, "alpha")  # ArgumentError before any compile
    scalar(beta, plan, "beta")
    bv = None if bias is None else bias_view(bias, vc, bias_cols(plan, fusion))
    fusion = fusion_for_bias(fusion, bv)
    handle = stream_handle(stream, c if on_torch else None)
    with cupy.cuda.Device(vc.device_id):
        alignment = (data_alignment(va), data_alignment(vb), data_alignment(vc))
        loaded = launched_kernel(plan, alignment, fusion, vc.device_id, va.batch)  # DeviceError, CompileError
        if vc.batch == 0:  # an empty batch, checked: nothing to compute (and every bound launch has a plan)
            return c
        bound = bind(loaded, va, vb, vc, bv)
        if signature is not None:
            BOUND_LAUNCHES.put(signature[0], bound)
        bound.launch(va.ptr, vb.ptr, vc.ptr, bound.scalar_bytes(alpha, beta, plan), handle,
                     0 if bv is None else bv.ptr)
    return c


def execute_scaled(plan: DescriptorPlan, a: Any, b: Any, c: Any, alpha: Any, beta: Any, *, stream: Any, fusion: Fusion,
                   bias: Any, scale_a: Any, scale_b: Any) -> Any:
    """execute() of scaled FP8 (blasdx.runtime.scales): c = alpha * (scale_a A) @ (scale_b B) + beta * c. Scales
    given as numbers fold into alpha; scales on the device are read by the kernel (the grid kernel, or the block
    GEMM's batched kernel: plan.scales_refusal says what each takes), and key its bound launch beside the operands
    (scales_signature)."""
    alpha, on_device = fold_number_scales(plan, alpha, scale_a, scale_b)
    if not on_device:  # numbers alone: alpha says it all
        return execute(plan, a, b, c, alpha, beta, stream=stream, fusion=fusion, bias=bias)
    cupy = cupy_module()
    tensor = torch_tensor_type()
    on_torch = tensor is not None and isinstance(c, tensor)
    if on_torch and c.requires_grad:
        check_torch_output(c)
    signature = launch_signature(cupy.ndarray, tensor if on_torch else None, plan, fusion, a, b, c, bias)
    scaled = scales_signature(cupy.ndarray, tensor if on_torch else None, on_device.get("scale_a"),
                              on_device.get("scale_b"))
    key = None
    if signature is not None and scaled is not None:
        key = (*signature[0], *scaled[0])
        if BOUND_LAUNCHES.relaunch(cupy, key, signature[1], alpha, beta, plan, stream, c if on_torch else None,
                                   scaled[1]):
            return c
    va, vb, vc = check_operands(plan, a, b, c)
    sa, sb = (None if name not in on_device else scale_view(on_device[name], name, plan.m, plan.n, plan.k, vc)
              for name in ("scale_a", "scale_b"))
    scalar(alpha, plan, "alpha")  # ArgumentError before any compile
    scalar(beta, plan, "beta")
    refusal = plan.scales_refusal(sa.kind if sa else "", sb.kind if sb else "",
                                  not (fusion.a_load.is_identity and fusion.b_load.is_identity))
    if refusal:
        raise ArgumentError(refusal)
    bv = None if bias is None else bias_view(bias, vc, bias_cols(plan, fusion))
    fusion = fusion_for_bias(fusion, bv).with_scales(sa.kind if sa else "", sb.kind if sb else "")
    handle = stream_handle(stream, c if on_torch else None)
    with cupy.cuda.Device(vc.device_id):
        alignment = (data_alignment(va), data_alignment(vb), data_alignment(vc))
        loaded = kernel(aligned_plan(plan, alignment), fusion, vc.device_id)  # not a Grid()'s item_block: it takes none
        if vc.batch == 0:
            return c
        bound = bind(loaded, va, vb, vc, bv, (sa, sb))
        if key is not None:
            BOUND_LAUNCHES.put(key, bound)
        bound.launch(va.ptr, vb.ptr, vc.ptr, bound.scalar_bytes(alpha, beta, plan), handle,
                     0 if bv is None else bv.ptr, (sa.ptr if sa else 0, sb.ptr if sb else 0))
    return c


def execute_grouped(plan: DescriptorPlan, a: Any, b: Any, c: Any, alpha: Any, beta: Any, *, stream: Any,
                    fusion: Fusion, bias: Any, scale_a: Any, scale_b: Any, offsets: Any) -> Any:
    """execute() of a Grouped() descriptor (blasdx.kinds.grouped): C_g = alpha A_g B_g + beta C_g for the groups
    of rows ``offsets`` cut A and C into (blasdx.runtime.groups), FP8 scales as Grid() takes them (B's one set for
    all or a set a group: blasdx.runtime.scales). A call whose operands, offsets and scales look as an earlier one's
    (launch_signature, offsets_signature, scales_signature) takes that one's bound launch with its own pointers."""
    if plan.execution != "grouped":
        raise ArgumentError(f"offsets= cut the rows of a Grouped() descriptor's A into groups; this descriptor is "
                            f"{plan.execution.capitalize()}(): use Grouped() (descriptor.replace(Grouped())), or "
                            f"drop offsets")
    cupy = cupy_module()
    tensor = torch_tensor_type()
    on_torch = tensor is not None and isinstance(c, tensor)
    if on_torch and c.requires_grad:
        check_torch_output(c)
    on_device: dict[str, Any] = {}  # the scales the kernel reads
    if scale_a is not None or scale_b is not None:
        alpha, on_device = fold_number_scales(plan, alpha, scale_a, scale_b)
    signature = launch_signature(cupy.ndarray, tensor if on_torch else None, plan, fusion, a, b, c, bias)
    grouped = offsets_signature(cupy.ndarray, tensor if on_torch else None, offsets)
    scaled = scales_signature(cupy.ndarray, tensor if on_torch else None, on_device.get("scale_a"),
                              on_device.get("scale_b")) if on_device else ((), (0, 0))
    key = None
    if signature is not None and grouped is not None and scaled is not None:
        key = (*signature[0], *grouped[0], *scaled[0])
        if BOUND_LAUNCHES.relaunch(cupy, key, signature[1], alpha, beta, plan, stream, c if on_torch else None,
                                   scaled[1], grouped[1]):
            return c
    ragged_k = plan.ragged_k  # type: ignore[attr-defined]
    va, vb, vc, groups = check_grouped_operands(plan, a, b, c, offsets, plan.max_groups, ragged_k)  # type: ignore[attr-defined]
    if ragged_k and groups.rows == 0 and vc.span_bytes:  # no rows: each C is beta * C, by the kernel on one-row stand-ins
        key = None  # (their pointers are this call's)
        with cupy.cuda.Device(vc.device_id):
            a, b = one_row_stand_ins(plan)
        va, vb, vc, groups = check_grouped_operands(plan, a, b, c, offsets, plan.max_groups, ragged_k)  # type: ignore[attr-defined]
    scalar(alpha, plan, "alpha")  # ArgumentError before any compile
    scalar(beta, plan, "beta")
    views = tuple(None if name not in on_device else
                  scale_view(on_device[name], name, groups.rows, plan.n, plan.k, vc, groups.groups)
                  for name in ("scale_a", "scale_b"))
    sa, sb = views
    if on_device:
        refusal = plan.scales_refusal(sa.kind if sa else "", sb.kind if sb else "",
                                      not (fusion.a_load.is_identity and fusion.b_load.is_identity))
        if refusal:
            raise ArgumentError(refusal)
    bv = None if bias is None else group_bias_view(bias, vc, groups.groups, bias_cols(plan, fusion))
    fusion = fusion_for_bias(fusion, bv).with_scales(sa.kind if sa else "", sb.kind if sb else "")
    handle = stream_handle(stream, c if on_torch else None)
    with cupy.cuda.Device(vc.device_id):
        alignment = (data_alignment(va), data_alignment(vb), data_alignment(vc))
        loaded = kernel(aligned_plan(plan, alignment), fusion, vc.device_id)
        if groups.rows == 0 or vc.span_bytes == 0:  # nothing to read or write
            return c
        bound = bind(loaded, va, vb, vc, bv, views if on_device else None, groups=groups)  # type: ignore[arg-type]
        if key is not None:
            BOUND_LAUNCHES.put(key, bound)
        bound.launch(va.ptr, vb.ptr, vc.ptr, bound.scalar_bytes(alpha, beta, plan), handle,
                     0 if bv is None else bv.ptr, (sa.ptr if sa else 0, sb.ptr if sb else 0), poffsets=groups.ptr)
    return c


def launched_kernel(plan: DescriptorPlan, alignment: tuple[int, int, int], fusion: Fusion, device_id: int,
                    batch: int | None) -> Kernel:
    """The kernel a call on arrays of ``alignment`` runs: the descriptor plan's (the block GEMM's batched
    kernel, a Grid() descriptor's grid kernel), but where the plan has a batched alternative (GridPlan.item_block)
    and the batch has at least as many items as the GPU runs blocks of it at once, that one (loaded, once, to
    learn that count); else the grid kernel of the tile the batch's waves take least time with (GridPlan.for_batch)."""
    if plan.item_block is not None and batch is not None:
        item_kernel = kernel(aligned_plan(plan.item_block, alignment), fusion, device_id)
        if batch >= item_kernel.resident_blocks:
            return item_kernel
    return kernel(aligned_plan(plan.for_batch(batch), alignment), fusion, device_id)


# --- the caches ---------------------------------------------------------------------------


def cache_info() -> dict[str, int]:
    """Entries of each in-process cache: the kinds' plans of kernels, compiled kernels, loaded
    kernels, bound launches, and the kernel cache's memory."""
    plans = {id(memo): memo.cache_info().currsize for kind in every_kind() for memo in kind.caches}
    return {"kernel_plans": sum(plans.values()), "compiled": len(_compiled),
            "loaded": len(_loaded), "bound_launches": len(BOUND_LAUNCHES),
            "kernel_cache_memory": DEFAULT_CACHE.memory_entries}


def clear_caches() -> None:
    """Forget every planned, compiled, loaded and bound kernel of this process (the disk
    cache stays): the next execute() plans, renders and loads again."""
    for kind in every_kind():
        for memo in kind.caches:
            memo.cache_clear()
    _RESOLVED_FUSIONS.clear()
    _GATED_PLANS.clear()
    _compiled.clear()
    _numba_units.clear()
    with _load_lock:
        _loaded.clear()
    BOUND_LAUNCHES.clear()
    DEFAULT_CACHE.clear_memory()


def show_config() -> str:
    """What blasdx found: NVRTC version and archs, header directories and versions, cache."""
    lines = [f"blasdx {__version__}"]
    try:
        others = [sm for sm in supported_archs() if sm not in accepted_sms()]
        lines.append(f"NVRTC {'.'.join(map(str, nvrtc_version()))}; SM() accepts {list(accepted_sms())}"
                     + (f" (NVRTC also targets {others}, which blasdx does not support)" if others else ""))
        lines.append("headers: " + ", ".join(f"{a} {b}" for a, b in header_identity()))
    except Exception as exc:  # noqa: BLE001 - report, never raise, from a diagnostic
        lines.append(f"NVRTC/headers: not usable ({exc})")
    lines.append(f"cache: {settings.cache_dir()} "
                 f"({'on' if settings.disk_cache_enabled() else 'off: BLASDX_DISABLE_DISK_CACHE'})")
    try:
        cupy = cupy_module()
        lines.append(f"cupy {cupy.__version__}; GPUs: {cupy.cuda.runtime.getDeviceCount()}")
    except Exception as exc:  # noqa: BLE001
        lines.append(f"GPU: none usable ({type(exc).__name__}: {str(exc).splitlines()[0]})")
    text = "\n".join(lines)
    print(text)
    return text
