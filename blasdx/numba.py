"""The device API of Block(), Grid() and Grouped() descriptors in Numba kernels (numba-cuda): ``device_api(GEMM)``
(import it explicitly).

    import blasdx.numba
    g = blasdx.numba.device_api(GEMM)             # any Block() descriptor; arch=, hooks and bias= as execute()'s,
                                                  # or hooks as Python functions of x (epilogue=leaky)
    @cuda.jit
    def kernel(a, b, c, lda, ldb, ldc, steps, alpha, beta):
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)  # A at g.a_offset, B at g.b_offset
        acc = g.make_accumulator()                # the thread's values in a local array, zeroed
        for t in range(steps):
            g.load_a(a, lda, 0, t * g.k, smem)    # the tile of A at (row 0, column t k), in values (packed too)
            g.load_b(b, ldb, t * g.k, 0, smem)
            g.copy_wait()
            g.multiply(smem, acc)
            cuda.syncthreads()
        g.store(acc, c, ldc, alpha, beta)
    kernel[blocks, g.block_dim, 0, g.shared_memory_size_ab](a, b, c, ...)

A Grid() descriptor (Size the whole problem) gives its tile's block GEMM as above (g.m, g.n, g.k the tile's), with
its tile loop on the whole matrices (the C++ names of its device_source(); the K loop copies by cp.async):

    g = blasdx.numba.device_api(GRID, arch=900, epilogue="relu")
    @cuda.jit
    def kernel(a, b, c, alpha, beta):             # the whole A, B and C, in the descriptor's layouts
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)  # g.stages stages of g.stage_size bytes
        for t in range(cuda.blockIdx.x, g.block_tiles, cuda.gridDim.x):
            row0, col0 = g.block_tile_origin(t)   # where tile t starts in C
            acc = g.make_accumulator()
            g.mainloop(a, b, row0, col0, smem, acc)   # or mainloop_range(..., kt_begin, kt_end, smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta)  # inside the problem (rows_inside, cols_inside)
    kernel.compile(signature); blasdx.numba.allow_shared_memory(kernel, g.shared_memory_size)
    kernel[sms, g.block_dim, 0, g.shared_memory_size](a, b, c, 1.0, 0.0)

A Grouped() descriptor (n, k fixed; each call's rows cut into groups by int32 offsets on the device, the ends of
the groups in A's rows) gives Grid()'s pieces with the groups' scheduler of its device_source() instead of the
tile order of a fixed m (no problem_m, block_tiles, block_tile_origin):

    g = blasdx.numba.device_api(GROUPED, arch=900)
    @cuda.jit
    def kernel(a, b, c, offsets, groups, rows, alpha, beta):  # A (rows, k), B (groups, k, n), C (rows, n)
        smem = cuda.shared.array(0, dtype=np.uint8, alignment=1024)
        schedule = g.make_schedule()              # the block's schedule in shared memory (g.schedule_size bytes)
        g.schedule_groups(offsets, groups, rows, schedule)   # all threads; at most g.max_groups groups
        for w in range(cuda.blockIdx.x, g.scheduled_tiles(schedule, groups), cuda.gridDim.x):
            at = g.tile_of_groups(w, schedule, groups)      # (group, row0, col0, rows inside the group)
            group, row0, col0, group_rows = at
            acc = g.make_accumulator()
            g.group_mainloop(a, b[group * g.b_group_size:], at, smem, acc)
            g.store_block_tile(acc, c, row0, col0, alpha, beta, group_rows)  # the group's rows alone

blasdx compiles the device API, wrapped in ``extern "C"`` functions (templates/numba.cu.j2), to LTO-IR with its
NVRTC and disk cache (blasdx.pipeline.numba_unit); each function of ``g`` is a Numba intrinsic that calls one of
them and adds the LTO-IR to the kernel's link, where nvJitLink inlines it (LTO is required: without it every call
is a real call and the accumulator lives in local memory). Arrays are passed by their data pointer, in the
precision's Numba dtype (``ARRAY_DTYPES``). Numba cannot cache a kernel that links files (``cache=True``): its
compile and link happen in every process; blasdx's part comes from the disk cache. The linked loop is the machine
code of the same kernel in C++; Numba's launch costs more host time than a C++ one (its dispatch runs in Python and
imports each CuPy or PyTorch array through the CUDA array interface, synchronizing its stream): pass Numba's own
arrays (``cuda.as_cuda_array(x)``, once) where short kernels are launched often.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import re
import types as pytypes
from dataclasses import replace
from importlib import metadata as importlib_metadata
from typing import Any, cast

from . import pipeline
from .codegen.hooks import NO_FUSION, Fusion, Hook, python_hook
from .compiler import check_arch, nvrtc_version
from .describe.descriptor import Descriptor
from .describe.precision import PRECISIONS
from .errors import ArgumentError, DeviceError, UnsupportedError
from .plan import GridPlan

__all__ = ["device_api", "allow_shared_memory", "ARRAY_DTYPES", "MIN_NUMBA_CUDA"]

MIN_NUMBA_CUDA = (0, 24)  # the first to link SM 90 as sm_90a (wgmma's target); abi="c" and compile_all are older
NUMBA_EXTRA = "pip install 'blasdx[numba-cu13]' (or 'blasdx[numba-cu12]' for CUDA 12)"

# The Numba array dtype of each precision's elements (complex ones below): the raw bits where Numba has no type.
ARRAY_DTYPES = {
    "float16": "float16", "bfloat16": "uint16 (bfloat16 bits)", "tfloat32": "float32", "float32": "float32",
    "float64": "float64", "float8_e4m3": "uint8 (FP8 bits)", "float8_e5m2": "uint8 (FP8 bits)", "int8": "int8",
    "uint8": "uint8", "int4": "uint8 (two values a byte)", "uint4": "uint8 (two values a byte)",
    "binary": "uint32 (32 values a word)", "complex float32": "complex64", "complex float64": "complex128",
    "complex float16": "uint32 (a pair of float16)",
}
_ALLOWED = "; ".join(f"{p}: {d}" for p, d in ARRAY_DTYPES.items())
_ACCUMULATOR = {"float": "float32", "double": "float64", "int": "int32"}
_COMPLEX = {"float": "complex64", "double": "complex128"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _numba() -> Any:
    """numba.cuda, checked: numba-cuda at least MIN_NUMBA_CUDA, importable with this NumPy."""
    try:
        found = importlib_metadata.version("numba-cuda")
    except importlib_metadata.PackageNotFoundError:
        raise UnsupportedError(f"blasdx.numba needs numba-cuda >= {'.'.join(map(str, MIN_NUMBA_CUDA))}, which is "
                               f"not installed; {NUMBA_EXTRA}") from None
    if _version(found) < MIN_NUMBA_CUDA:
        raise UnsupportedError(f"blasdx.numba needs numba-cuda >= {'.'.join(map(str, MIN_NUMBA_CUDA))} (it targets "
                               f"SM 90 as sm_90a, which wgmma needs), found {found}; {NUMBA_EXTRA}")
    try:
        import numba.cuda
    except ImportError as exc:
        numpy = importlib_metadata.version("numpy")
        raise UnsupportedError(
            f"numba-cuda {found} did not import with NumPy {numpy} ({exc}); numba supports the NumPy releases "
            f"before its own (numba 0.68 with numba-cuda 0.30: NumPy up to 2.4): install one, such as "
            f"pip install 'numpy<2.4', or a newer numba-cuda") from None
    return numba.cuda


cuda = _numba()  # at import: UnsupportedError, with the fix, where numba-cuda is missing, too old or broken

from cuda.bindings import driver, nvjitlink  # pyright: ignore[reportAttributeAccessIssue]  # noqa: E402 - numba-cuda's dependencies
from llvmlite import ir  # noqa: E402
from numba.core import types  # noqa: E402
from numba.cuda import LTOIR, CUSource  # type: ignore[attr-defined]  # noqa: E402 - (numba's stubs lag its exports)

try:
    from numba.cuda import cgutils  # type: ignore[attr-defined]
    from numba.cuda.core.errors import TypingError
    from numba.cuda.extending import intrinsic
except ImportError:  # numba-cuda before it had its own copies
    from numba.core import cgutils  # type: ignore[no-redef]
    from numba.core.errors import TypingError  # type: ignore[no-redef]
    from numba.core.extending import intrinsic  # type: ignore[no-redef,assignment]


def _check_nvjitlink() -> None:
    """LTO-IR from blasdx's NVRTC links only into an nvJitLink of the same major version, no older."""
    try:
        linker = tuple(nvjitlink.version())
    except Exception as exc:  # noqa: BLE001 - missing module or library: the same fix
        raise UnsupportedError(f"blasdx.numba links with nvJitLink, which is not usable here ({exc}); "
                               f"{NUMBA_EXTRA}") from None
    nvrtc = nvrtc_version()
    if linker[0] != nvrtc[0] or linker[:2] < nvrtc:
        raise UnsupportedError(
            f"nvJitLink {linker[0]}.{linker[1]} cannot link LTO-IR from blasdx's NVRTC {nvrtc[0]}.{nvrtc[1]}: it "
            f"must be the same major version and no older; install nvidia-nvjitlink {nvrtc[0]}.{nvrtc[1]} or newer "
            f"(pip install -U 'nvidia-nvjitlink{'-cu12' if nvrtc[0] == 12 else ''}>={nvrtc[0]}.{nvrtc[1]}'), or pass "
            f"link='source' (Numba compiles the source)")


def _default_arch() -> int:
    """The SM (as 900) Numba links kernels for: the current device's."""
    if not cuda.is_available():
        raise DeviceError("blasdx.numba.device_api() without arch= links for the current GPU, and Numba sees none; "
                          "pass arch= (as 900) to compile without a GPU")
    major, minor = cuda.get_current_device().compute_capability
    return 100 * major + 10 * minor


def _numba_dtype(precision: str, is_complex: bool) -> Any:
    """The Numba type of one element of a ``precision`` matrix (ARRAY_DTYPES)."""
    info = PRECISIONS[precision]
    if is_complex:
        if precision in ("float32", "tfloat32", "float64"):
            return types.complex64 if info.bits == 32 else types.complex128
        return getattr(types, f"uint{2 * info.bits}")
    return getattr(types, info.raw_name or info.numpy_name)


# --- Hooks written in Python -------------------------------------------------------------------------------------

# The C type a hook's x has, and its Numba type: a load hook's compute<a_t> (float for 16- and 8-bit floats), a C hook's
# scalar_t (templates/common.cuh.j2's apply_load and apply_store).
_HOOK_TYPES: dict[str, Any] = {"float": types.float32, "double": types.float64, "signed char": types.int8,
                               "unsigned char": types.uint8, "short": types.int16, "unsigned short": types.uint16,
                               "int": types.int32, "unsigned int": types.uint32, "long long": types.int64,
                               "unsigned long long": types.uint64}
# Numba's compiled hooks, by (symbol, arch): their LTO-IR, and what their symbol's key named by identity (kept alive,
# so that no other object takes its id while the entry stands).
_PYTHON_HOOKS: dict[tuple[str, int], tuple[Any, list]] = {}


def _is_python_function(value: Any) -> bool:
    """A Python function, or a Numba device function (its ``py_func``), as a hook of device_api."""
    return isinstance(value, pytypes.FunctionType) or isinstance(getattr(value, "py_func", None), pytypes.FunctionType)


def _python_function(value: Any) -> pytypes.FunctionType:
    """The Python function of a hook (_is_python_function): itself, or a Numba device function's ``py_func``."""
    return value if isinstance(value, pytypes.FunctionType) else value.py_func


def _hook_ctype(plan: Any, slot: str) -> str:
    """The C type of x in ``slot``'s hook (_HOOK_TYPES)."""
    if slot in ("c_load", "c_store"):
        return plan.scalar_type
    info = PRECISIONS[(plan.a if slot == "a_load" else plan.b).precision]
    if info.is_float:
        return "double" if info.bits == 64 else "float"
    return info.cpp_type  # an integer's compute<S> is S (packed operands take no load hooks)


def _code_key(code: pytypes.CodeType) -> tuple:
    """What Numba compiles of a code object: its bytecode, constants (nested functions' code too) and names."""
    consts = tuple(_code_key(c) if isinstance(c, pytypes.CodeType) else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return code.co_code, consts, code.co_names


def _names(code: pytypes.CodeType) -> set[str]:
    """The global names a code object and its nested functions read."""
    found = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            found |= _names(c)
    return found


def _behaviour(function: pytypes.FunctionType, kept: list, seen: set[int]) -> tuple:
    """A key of what Numba compiles of ``function``: its code, and the values it reads from its closure and globals,
    which Numba freezes as constants (numbers and strings by value, functions by their own key, modules by name,
    arrays by their bytes); any other object by its identity, kept in ``kept`` (never the same key as another's)."""
    if id(function) in seen:
        return ("recursive", function.__qualname__)
    seen.add(id(function))

    def value(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            return (type(v).__name__, repr(v))
        if isinstance(v, tuple):
            return tuple(value(x) for x in v)
        if isinstance(v, pytypes.ModuleType):  # Numba freezes module.NAME too: the names the code reads, by value
            if id(v) in seen:
                return ("module", v.__name__)
            seen.add(id(v))
            return ("module", v.__name__, tuple((name, value(getattr(v, name))) for name in sorted(read)
                                              if name in vars(v)))
        if _is_python_function(v):
            options = repr(sorted(getattr(v, "targetoptions", {}).items()))  # a Numba device function's (fastmath...)
            return ("function", options, _behaviour(_python_function(v), kept, seen))
        if type(v).__module__ == "numpy" and hasattr(v, "tobytes") and hasattr(v, "dtype"):  # an array or a scalar
            return ("numpy", str(v.dtype), getattr(v, "shape", ()), hashlib.sha256(v.tobytes()).hexdigest())
        kept.append(v)
        return ("object", type(v).__qualname__, id(v))

    read = _names(function.__code__)
    cells = tuple(value(cell.cell_contents) for cell in function.__closure__ or ())
    reads = tuple((name, value(function.__globals__[name])) for name in sorted(read) if name in function.__globals__)
    return function.__module__, function.__qualname__, _code_key(function.__code__), cells, reads


def _compiled_hook(hook: Hook, slot: str, ctype: str, arch: int) -> tuple[Hook, Any]:
    """``hook`` (a python_hook) compiled by Numba for ``arch`` as the C function ``ctype f(ctype x)``, and its LTO-IR.
    Its symbol is a digest of what decides its code (_behaviour), so that the unit calling it is the same, and comes
    from blasdx's disk cache, in every process."""
    target = _python_function(hook.function)
    fastmath = getattr(hook.function, "targetoptions", {}).get("fastmath", False) or False  # a device function's own
    kept: list = []
    key = (_behaviour(target, kept, set()), repr(fastmath), ctype)
    symbol = f"blasdx_py_{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}"
    entry = _PYTHON_HOOKS.get((symbol, arch))
    if entry is None:
        parameters = inspect.signature(target).parameters.values()
        if len(parameters) != 1 or next(iter(parameters)).kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                                       inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise ArgumentError(f"{slot}={target.__qualname__}: a hook is a function of one value x (of {ctype}), "
                                f"but it takes ({', '.join(map(str, parameters))}); give other values through a "
                                f"closure or globals, which Numba takes as constants")
        numba_type = _HOOK_TYPES[ctype]
        try:
            ltoir, _ = cuda.compile(target, numba_type(numba_type), device=True, abi="c", abi_info={"abi_name": symbol},
                                    output="ltoir", cc=divmod(arch // 10, 10), fastmath=fastmath, forceinline=True)
        except Exception as exc:  # noqa: BLE001 - Numba's typing, lowering and NVVM errors alike: say which hook
            lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
            raise ArgumentError(f"{slot}={target.__qualname__}: Numba could not compile it as a function of one "
                                f"{numba_type} returning {numba_type} ({type(exc).__name__}: {' '.join(lines[:3])}; "
                                f"the functions a hook calls must be cuda.jit(device=True) ones)") from exc
        entry = _PYTHON_HOOKS.setdefault((symbol, arch), (LTOIR(ltoir, name=f"{symbol}.ltoir"), [target, *kept]))
    declaration = f'extern "C" __device__ {ctype} {symbol}({ctype});'
    return Hook("python", f"{symbol}(x)", declaration=declaration), entry[0]


def _python_hooks(plan: Any, fusion: Fusion, arch: int | None) -> tuple[Fusion, tuple[Any, ...]]:
    """``fusion`` with its hooks written in Python compiled by Numba for ``arch`` (default: the current GPU's) into
    C functions that its own hooks call, and their LTO-IR for the kernel's link."""
    written = [(slot, hook) for slot, hook in fusion.slots if hook.function is not None]
    if not written:
        return fusion, ()
    if plan.is_complex:
        raise ArgumentError(f"{written[0][0]}: hooks written in Python take real values, and this GEMM's are complex; "
                            f"give a C++ expression of x (a blasdx::complex<T>), or transform the accumulator's values "
                            f"in the kernel")
    arch = _default_arch() if arch is None else arch
    check_arch(arch)
    resolved, codes = {}, []
    for slot, hook in written:
        resolved[slot], code = _compiled_hook(hook, slot, _hook_ctype(plan, slot), arch)
        codes.append(code)
    return replace(fusion, **cast("dict[str, Any]", resolved)), tuple(dict.fromkeys(codes))


def device_api(gemm: Descriptor, *, arch: int | None = None, prologue: Any = None, epilogue: Any = None,
               a_load: Any = None, b_load: Any = None, c_load: Any = None, c_store: Any = None,
               bias: bool | str = False, link: str = "ltoir") -> pytypes.ModuleType:
    """The device API of Block(), Grid() or Grouped() descriptor ``gemm`` for Numba kernels: a namespace of intrinsics and
    facts (module docstring). ``arch`` (as 900): the SM Numba links for (and compiles Python hooks for), by default the
    current GPU's; the hooks as execute() takes them, or Python functions of x (g.hook_types); ``bias=True`` adds the
    stores' arguments (bias, row stride, column stride), the tile's bias for store, the whole problem's for
    store_block_tile (as its C); ``bias="row"`` one row of n values read by
    column alone (row stride ignored). ``link="source"``: Numba compiles blasdx's source itself
    for each kernel (no disk cache; where nvJitLink is older than blasdx's NVRTC)."""
    _numba()  # (again: a patched environment in tests)
    if not isinstance(gemm, Descriptor):
        raise ArgumentError(f"device_api() takes a blasdx descriptor, got {type(gemm).__name__}")
    plan = gemm.plan
    if getattr(plan, "ragged_k", False):
        raise UnsupportedError("blasdx.numba offers Grouped()'s device API (groups of A's and C's rows), and Grouped('k') "
                               "has no groups' schedule (its groups cut k); run it with execute(), or walk each group's "
                               "K rows with the Block() device API of its tile, device_api(descriptor.tile_descriptor), "
                               "whose load_a_partial and load_b_partial take a group's last K tile")
    if plan.execution not in ("block", "grid", "grouped"):
        raise UnsupportedError(f"blasdx.numba offers the device APIs of Block(), Grid() and Grouped() descriptors; "
                               f"this descriptor is {plan.execution.capitalize()}(): use descriptor.replace(Block())")
    if bias not in (False, True, "row"):
        raise ArgumentError(f"bias must be False, True or 'row', got {bias!r}")
    if link not in ("ltoir", "source"):
        raise ArgumentError(f"link must be 'ltoir' (blasdx compiles, cached) or 'source' (Numba compiles), got {link!r}")
    prologue, epilogue, a_load, b_load, c_load, c_store = (
        python_hook(h) if _is_python_function(h) else h for h in (prologue, epilogue, a_load, b_load, c_load, c_store))
    fusion = pipeline.fusion(gemm, prologue, epilogue, a_load, b_load, c_load, c_store, bool(bias))
    if fusion.gate:
        raise ArgumentError(f"epilogue={epilogue!r} (a gated epilogue) pairs the product's columns in Grid()'s and "
                            f"Grouped()'s execute(); in a Numba kernel gate the accumulator's values yourself "
                            f"(g.col(i) says which column each is)")
    if bias == "row":
        fusion = fusion.reading_bias_by_column()
    fusion, hook_codes = _python_hooks(plan, fusion, arch)
    if link == "source":
        namespace, source = pipeline.numba_unit_source(plan, fusion or NO_FUSION)
        code = _LINKED.setdefault((namespace, 0), CUSource(source, name=f"{namespace}.cu"))
        return _namespace(gemm, plan, namespace, (code, *hook_codes), "the arch Numba links for", fusion.bias)
    _check_nvjitlink()
    if arch is None:
        arch = _default_arch()
    unit = pipeline.numba_unit(plan, fusion or NO_FUSION, arch)
    code = _LINKED.setdefault((unit.namespace, unit.arch), LTOIR(unit.ltoir, name=f"{unit.namespace}.ltoir"))
    return _namespace(gemm, plan, unit.namespace, (code, *hook_codes), f"SM {unit.arch}", fusion.bias)


# The device API's functions: (name, C symbol's suffix, parameters, result). A parameter is an operand array
# ("a", "b", "c", "bias": checked against the precision's dtype), "acc" (make_accumulator's array), "smem" (any
# array: the shared buffer), "ld" (an int64), "int" (an int32) or "scalar" (alpha, beta: scalar_t, complex ones split).
_FUNCTIONS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("zero", "zero", ("acc",), "void"),
    ("load_a", "load_a", ("a", "ld", "int", "int", "smem"), "void"),
    ("load_b", "load_b", ("b", "ld", "int", "int", "smem"), "void"),
    ("load_a_partial", "load_a_partial", ("a", "ld", "int", "int", "smem", "int", "int"), "void"),
    ("load_b_partial", "load_b_partial", ("b", "ld", "int", "int", "smem", "int", "int"), "void"),
    ("copy_wait", "copy_wait", (), "void"),
    ("multiply", "multiply", ("smem", "acc"), "void"),
    ("multiply_async", "multiply_async", ("smem", "acc"), "void"),
    ("multiply_wait", "multiply_wait0", ("acc",), "void"),
    ("multiply_wait1", "multiply_wait1", ("acc",), "void"),
    ("load", "load", ("c", "ld", "acc"), "void"),
    ("store", "store", ("acc", "c", "ld", "scalar", "scalar"), "void"),
    ("store_partial", "store_partial", ("acc", "c", "ld", "int", "int", "scalar", "scalar"), "void"),
    ("row", "row", ("int",), "int"),
    ("col", "col", ("int",), "int"),
    ("in_bounds", "in_bounds", ("int",), "bool"),
)
# A Grid() descriptor's tile loop (templates/numba_grid.cuh.j2), A, B and C the whole matrices; beside them
# block_tile_origin(t), the pair (row0, col0) of two C functions (_namespace's origin).
_GRID_FUNCTIONS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("mainloop", "mainloop", ("a", "b", "int", "int", "smem", "acc"), "void"),
    ("mainloop_range", "mainloop_range", ("a", "b", "int", "int", "int", "int", "smem", "acc"), "void"),
    ("store_block_tile", "store_block_tile", ("acc", "c", "int", "int", "scalar", "scalar"), "void"),
    ("rows_inside", "rows_inside", ("int",), "int"),
    ("cols_inside", "cols_inside", ("int",), "int"),
)
# A Grouped() descriptor's tile loop (templates/numba_grouped.cuh.j2): "offsets" (int32 group ends), "schedule"
# (make_schedule's int32 array), "groups" (an int32), "long" (an int64), "at" (tile_of_groups's 4 int32); beside them
# make_schedule() and tile_of_groups(w, schedule, groups), the tuple (group, row0, col0, rows) (_namespace's).
_GROUPED_FUNCTIONS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("schedule_groups", "schedule_groups", ("offsets", "groups", "long", "schedule"), "void"),
    ("scheduled_tiles", "scheduled_tiles", ("schedule", "groups"), "long"),
    ("group_mainloop", "group_mainloop", ("a", "b", "at", "smem", "acc"), "void"),
    ("cols_inside", "cols_inside", ("int",), "int"),
    ("store_block_tile", "store_block_tile", ("acc", "c", "int", "int", "scalar", "scalar", "int"), "void"),
)
_BIAS = ("bias", "int", "int")  # after the arguments of every store: bias, its row and column strides


def _fixed_arity(typer: Any, name: str, arity: int) -> Any:
    """``typer`` (typingctx, *args) as Numba reads an intrinsic of ``arity`` arguments: by its signature (a *args
    typer would take them as one tuple). It still takes any count, so that ``typed`` says what a wrong one needs."""
    parameter = inspect.Parameter.POSITIONAL_OR_KEYWORD
    typer.__signature__ = inspect.Signature([inspect.Parameter(p, parameter) for p in
                                             ("typingctx", *(f"x{i}" for i in range(arity)))])
    typer.__name__ = name
    return typer


# One linked object a unit (and arch; 0: source): Numba links a kernel's files once each (a set of objects), so two
# namespaces of one unit in a kernel (device_api called twice) add it once, not twice (duplicate symbols).
_LINKED: dict[tuple[str, int], Any] = {}
# Numbers the schedules' shared arrays: unique names in every module (NVVM cannot keep shared memory internal, as
# numba-cuda's own shared arrays say, so a name must not repeat across the modules of a kernel).
_SCHEDULES = itertools.count()


def _namespace(gemm: Descriptor, plan: Any, prefix: str, codes: tuple, target: str, bias: bool) -> pytypes.ModuleType:
    """The ModuleType ``device_api`` returns: an intrinsic per _FUNCTIONS entry (and _GRID_FUNCTIONS entry for a
    Grid() descriptor's plan, _GROUPED_FUNCTIONS entry for a Grouped() descriptor's) calling ``<prefix>_<function>``
    of ``codes`` (LTOIR or CUSource, for ``target``, and the LTO-IR of hooks written in Python), make_accumulator (and block_tile_origin; make_schedule and
    tile_of_groups), the facts."""
    grid = isinstance(plan, GridPlan)
    grouped = grid and plan.grouped
    tile = plan.tile if grid else plan  # the block GEMM: a Grid() descriptor's tile
    value = tile.mma_acc_type or tile.acc_type
    acc_dtype = getattr(types, (_COMPLEX if plan.is_complex else _ACCUMULATOR)[value])
    scalar_base = plan.scalar_type.removeprefix("blasdx::complex<").removesuffix(">")
    scalar = getattr(types, (_COMPLEX if plan.is_complex else _ACCUMULATOR)[scalar_base])
    operands = {"a": (plan.a.precision, "A"), "b": (plan.b.precision, "B"), "c": (plan.c.precision, "C"),
                "bias": (plan.c.precision, "C")}
    accumulator_size = tile.accumulator_size
    align = acc_dtype.bitwidth // 8  # alignof(acc_value_t): blasdx::complex<T> is alignas(2 * sizeof(T))

    def typed(function: str, kinds: tuple[str, ...], args: tuple) -> list:
        if len(args) != len(kinds):
            raise TypingError(f"blasdx: {function}() takes {len(kinds)} arguments, got {len(args)}")
        declared: list[Any] = []
        for i, (kind, arg) in enumerate(zip(kinds, args)):
            if kind in operands:
                precision, matrix = operands[kind]
                want = _numba_dtype(precision, plan.is_complex)
                if not isinstance(arg, types.Array) or arg.dtype != want:
                    what = f"complex {precision}" if plan.is_complex else precision
                    raise TypingError(
                        f"blasdx: {function}() argument {i + 1} is this GEMM's {matrix} ({what}): an array of {want}, "
                        f"got {arg}. Array dtypes by precision: {_ALLOWED}")
                declared.append(arg)
            elif kind in ("offsets", "schedule"):
                if not (isinstance(arg, types.Array) and arg.dtype == types.int32 and arg.ndim == 1):
                    need = ("the groups' ends in A's rows (offsets): a 1-D array of int32" if kind == "offsets" else
                            "the groups' schedule: the int32 array of make_schedule()")
                    raise TypingError(f"blasdx: {function}() argument {i + 1} must be {need}, got {arg}")
                declared.append(arg)
            elif kind == "at":
                members: tuple[Any, ...] = tuple(getattr(arg, "types", ()))  # a UniTuple's or Tuple's member types
                if not (isinstance(arg, types.BaseTuple) and len(members) == 4
                        and all(isinstance(x, types.Integer) for x in members)):
                    raise TypingError(f"blasdx: {function}() argument {i + 1} must be a tile of tile_of_groups() "
                                      f"(group, row0, col0, rows), got {arg}")
                declared.append(types.UniTuple(types.int32, 4))
            elif kind in ("acc", "smem"):
                if not isinstance(arg, types.Array) or (kind == "acc" and arg.dtype != acc_dtype):
                    need = "the array of make_accumulator()" if kind == "acc" else "the shared-memory array"
                    raise TypingError(f"blasdx: {function}() argument {i + 1} must be {need}, got {arg}")
                declared.append(arg)
            elif kind == "scalar":
                if not isinstance(arg, types.Number):
                    raise TypingError(f"blasdx: {function}() argument {i + 1} (alpha or beta) must be a number, "
                                      f"got {arg}")
                declared.append(scalar)
            else:
                if not isinstance(arg, types.Integer):
                    raise TypingError(f"blasdx: {function}() argument {i + 1} must be an integer, got {arg}")
                declared.append(types.int64 if kind in ("ld", "long") else types.int32)
        return declared

    def lowering(symbol: str, result: str) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, llargs: Any) -> Any:
            library = context.active_code_library
            # (cuda.jit's lto= sets _lto; compile_all(output="ltoir") asks NVVM for LTO-IR alone)
            if not (getattr(library, "_lto", True) or "gen-lto" in getattr(library, "_nvvm_options", {})):
                raise ArgumentError("blasdx's device functions need link-time optimization (without it each is a "
                                    "real call and the accumulator lives in local memory): remove lto=False or "
                                    "debug=True from cuda.jit")
            for code in codes:
                library.add_linking_file(code)
            values = []
            for ty, v in zip(sig.args, llargs):
                if isinstance(ty, types.Array):
                    values.append(cgutils.create_struct_proxy(ty)(context, builder, value=v).data)
                elif isinstance(ty, types.Complex):
                    values += [builder.extract_value(v, 0), builder.extract_value(v, 1)]
                elif isinstance(ty, types.BaseTuple):  # a group's tile: its four int32 fields
                    values += [builder.extract_value(v, j) for j in range(len(ty))]
                else:
                    values.append(v)
            returns = ir.VoidType() if result == "void" else ir.IntType(64 if result == "long" else 32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(returns, [v.type for v in values]),
                                                symbol)
            out = builder.call(fn, values)
            if result == "bool":
                return builder.icmp_signed("!=", out, ir.Constant(ir.IntType(32), 0))
            return None if result == "void" else out
        return codegen

    def external(name: str, suffix: str, kinds: tuple[str, ...], result: str) -> Any:
        returns = {"void": types.void, "int": types.int32, "long": types.int64, "bool": types.boolean}[result]
        codegen = lowering(f"{prefix}_{suffix}", result)

        def typer(typingctx: Any, *args: Any) -> Any:
            return returns(*typed(name, kinds, args)), codegen
        return intrinsic(_fixed_arity(typer, name, len(kinds)))

    def make(typingctx: Any) -> Any:
        array = types.Array(acc_dtype, 1, "C")
        zero = lowering(f"{prefix}_zero", "void")

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            element = context.get_data_type(acc_dtype)
            data = cgutils.alloca_once(builder, element, size=context.get_constant(types.intp, accumulator_size),
                                       name="blasdx_acc")
            data.align = align
            ary = context.make_array(array)(context, builder)
            itemsize = context.get_constant(types.intp, context.get_abi_sizeof(element))
            context.populate_array(ary, data=data, shape=cgutils.pack_array(
                builder, [context.get_constant(types.intp, accumulator_size)]),
                strides=cgutils.pack_array(builder, [itemsize]), itemsize=itemsize, meminfo=None)
            value = ary._getvalue()
            zero(context, builder, types.void(array), [value])
            return value
        return array(), codegen
    make.__name__ = "make_accumulator"

    def origin(typingctx: Any, t: Any) -> Any:
        if not isinstance(t, types.Integer):
            raise TypingError(f"blasdx: block_tile_origin() takes a tile's index (an integer), got {t}")
        pair = types.UniTuple(types.int32, 2)
        row0, col0 = (lowering(f"{prefix}_block_tile_{x}", "int") for x in ("row0", "col0"))

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            one = types.int32(types.int32)
            return context.make_tuple(builder, pair, [row0(context, builder, one, args),
                                                      col0(context, builder, one, args)])
        return pair(types.int32), codegen
    origin.__name__ = "block_tile_origin"

    schedule_array = types.Array(types.int32, 1, "C")

    def make_schedule(typingctx: Any) -> Any:
        words = plan.schedule_size // 4

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            # A block's shared int32 array, as cuda.shared.array(words, np.int32) declares one (address space 3).
            shape = ir.ArrayType(ir.IntType(32), words)
            storage: Any = cgutils.add_global_variable(builder.module, shape, f"{prefix}_schedule_{next(_SCHEDULES)}",
                                                       addrspace=3)  # (llvmlite's stubs lack its attributes)
            storage.initializer = ir.Constant(shape, ir.Undefined)
            storage.align = 16
            data = builder.addrspacecast(storage, ir.PointerType(ir.IntType(32)), "generic")
            ary = context.make_array(schedule_array)(context, builder)
            four = context.get_constant(types.intp, 4)
            context.populate_array(ary, data=data, shape=cgutils.pack_array(
                builder, [context.get_constant(types.intp, words)]), strides=cgutils.pack_array(builder, [four]),
                itemsize=four, meminfo=None)
            return ary._getvalue()
        return schedule_array(), codegen
    make_schedule.__name__ = "make_schedule"

    def tile_of_groups(typingctx: Any, w: Any, schedule: Any, groups: Any) -> Any:
        tile = types.UniTuple(types.int32, 4)
        declared = typed("tile_of_groups", ("long", "schedule", "groups"), (w, schedule, groups))
        call = lowering(f"{prefix}_tile_of_groups", "void")

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            fields = cgutils.alloca_once(builder, ir.IntType(32), size=4, name="blasdx_group_tile")
            out = types.Array(types.int32, 1, "C")
            ary = context.make_array(out)(context, builder)
            four = context.get_constant(types.intp, 4)
            context.populate_array(ary, data=fields, shape=cgutils.pack_array(builder, [four]),
                                   strides=cgutils.pack_array(builder, [four]), itemsize=four, meminfo=None)
            call(context, builder, types.void(*sig.args, out), [*args, ary._getvalue()])
            values = [builder.load(builder.gep(fields, [ir.Constant(ir.IntType(32), j)])) for j in range(4)]
            return context.make_tuple(builder, tile, values)
        return tile(*declared), codegen
    tile_of_groups.__name__ = "tile_of_groups"

    g = pytypes.ModuleType(f"blasdx.numba.{prefix}", f"The device API of {gemm!r} for Numba kernels, for {target}.")
    tile_loop = _GROUPED_FUNCTIONS if grouped else _GRID_FUNCTIONS if grid else ()
    for name, suffix, kinds, result in _FUNCTIONS + tile_loop:
        if bias and name.startswith("store"):
            kinds = (*kinds, *_BIAS)
        if name.endswith("_partial") and name.startswith("load") and plan.a.pack > 1:
            continue  # packed operands have no edge-tile loads
        setattr(g, name, external(name, suffix, kinds, result))
    setattr(g, "make_accumulator", intrinsic(make))  # noqa: B010 - a module's attributes, set as any other
    dim = gemm.block_dim
    facts = {"m": tile.m, "n": tile.n, "k": tile.k, "k_elements": tile.k // tile.a.pack,
             "block_dim": (dim.x, dim.y, dim.z), "threads": tile.threads, "accumulator_size": accumulator_size,
             "shared_memory_size": gemm.shared_memory_size, "shared_memory_size_ab": gemm.shared_memory_size_ab,
             "a_offset": tile.a.smem_offset, "b_offset": tile.b.smem_offset, "namespace": prefix,
             "accumulator_dtype": acc_dtype,
             "hook_types": {} if plan.is_complex else {slot: str(_HOOK_TYPES[_hook_ctype(plan, slot)])
                                                       for slot in ("a_load", "b_load", "c_load", "c_store")}}
    if grid:  # the names of the C++ device API (templates/grid.cuh.j2); a stage's A and B at a_offset, b_offset
        facts.update(problem_n=plan.n, problem_k=plan.k, problem_lda=plan.a.ld, problem_ldb=plan.b.ld,
                     problem_ldc=plan.c.ld, stages=plan.stages, stage_size=tile.shared_memory_size,
                     block_tiles_n=plan.tiles_n, k_tiles=plan.k_tiles)
    if grouped:  # and of templates/grouped.cuh.j2; each call's rows come from the offsets, so no problem_m
        setattr(g, "make_schedule", intrinsic(make_schedule))  # noqa: B010
        setattr(g, "tile_of_groups", intrinsic(tile_of_groups))  # noqa: B010
        facts.update(max_groups=plan.max_groups, schedule_size=plan.schedule_size,
                     b_group_size=plan.b.ld * plan.b.outer)
    elif grid:
        setattr(g, "block_tile_origin", intrinsic(origin))  # noqa: B010
        facts.update(problem_m=plan.m, block_tiles_m=plan.tiles_m, block_tiles=plan.tiles)
    else:
        facts["c_offset"] = tile.c.smem_offset  # a Grid() tile's C stays in registers: its stages hold A and B
    for name, fact in facts.items():
        setattr(g, name, fact)
    setattr(g, "allow_shared_memory", allow_shared_memory)  # noqa: B010
    return g


def allow_shared_memory(kernel: Any, nbytes: int) -> None:
    """Let every compiled specialization of Numba kernel ``kernel`` launch with ``nbytes`` of dynamic shared
    memory on the current device (Numba never raises the 48 KiB default). Compile it first
    (``kernel.compile(signature)``)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ArgumentError(f"nbytes must be a byte count >= 0, got {nbytes!r}")
    overloads = list(getattr(kernel, "overloads", {}).values())
    if not overloads:
        raise ArgumentError("allow_shared_memory() sets the limit of compiled kernels, and this one has none yet; "
                            "call kernel.compile('void(...)') with its signature first")
    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    for overload in overloads:
        function = overload.library.get_cufunc()
        if isinstance(function.handle, driver.CUfunction):
            (status,) = driver.cuFuncSetAttribute(function.handle, attribute, nbytes)
        else:
            (status,) = driver.cuKernelSetAttribute(attribute, nbytes, function.handle, function.device.id)
        if status != driver.CUresult.CUDA_SUCCESS:
            raise ArgumentError(f"the driver refused {nbytes} bytes of dynamic shared memory ({status.name}); "
                                f"this GPU's limit is lower: use smaller tiles")
