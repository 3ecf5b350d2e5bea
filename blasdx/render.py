"""Render a GemmPlan into CUDA source with the Jinja templates.

Python has decided everything in the plan; this module turns the plan into a plain
context of strings and numbers, and the templates print it. Rendering needs no GPU.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import jinja2

from .errors import DescriptorError
from .hooks import NO_FUSION, Fusion
from .plan import GemmPlan, MatrixPlan, kernel_plan

_PTX_TYPE = {"int8": "s8", "uint8": "u8", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2",
             "int4": "s4", "uint4": "u4", "binary": "b1"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def templates_dir() -> Path:
    """templates/ inside the installed package, else beside it in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "gemm.cuh.j2").is_file():
            return candidate
    raise FileNotFoundError(f"blasdx templates not found next to {here}; reinstall blasdx")


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def _matrix_context(x: MatrixPlan, use_cp_async: bool) -> dict:
    ctx = asdict(x)
    ctx["row_major"] = x.layout == "row_major"
    ctx["async"] = "true" if use_cp_async and x.vector_bytes >= 4 else "false"
    return ctx


def _context(plan: GemmPlan, name: str) -> dict:
    instr = plan.instruction
    ctx = {
        "name": name,
        "kernel_name": plan.kernel_name,
        "description": f"{plan.m}x{plan.n}x{plan.k}, {instr.name}, {plan.threads} threads",
        "a": _matrix_context(plan.a, plan.use_cp_async),
        "b": _matrix_context(plan.b, plan.use_cp_async),
        "c": _matrix_context(plan.c, plan.use_cp_async),
        "m": plan.m, "n": plan.n, "k": plan.k,
        "scalar_type": plan.scalar_type,
        "acc_type": f"blasdx::complex<{plan.acc_type}>" if plan.is_complex else plan.acc_type,
        "block_dim": plan.block_dim,
        "threads": plan.threads,
        "warps": plan.warps,
        "shared_memory_size": plan.shared_memory_size,
        "mma": instr.is_mma,
        "instr": instr.name,
        "tile_m": plan.tile_m, "tile_n": plan.tile_n,
        "tiles_m": plan.tiles_m, "tiles_n": plan.tiles_n, "tiles": plan.tiles,
        "group_m": plan.group_m, "group_n": plan.group_n,
        # 16-bit tensor-core operands (not complex: complex runs on FMA) load with ldmatrix.
        "ldmatrix": instr.name in ("mma_f16", "mma_bf16"),
        # int4/uint4/binary: fragments are 32-bit words of k, loaded whole.
        "packed": plan.a.pack > 1,
        # float FMA: micro-tiles with sides of 4 or 8 read 16 bytes at a time where the layout allows.
        "fma_vector": (not instr.is_mma and not plan.is_complex and plan.acc_type == "float"
                       and plan.a.cpp_type == plan.b.cpp_type == "float"
                       and plan.tile_m % 4 == 0 and plan.tile_n % 4 == 0
                       and plan.a.smem_ld % 4 == 0 and plan.b.smem_ld % 4 == 0),
    }
    # FMA micro-tiles in pairs of threads sharing rows and columns (see the template).
    ctx["fma_pairs"] = not instr.is_mma and plan.tiles_m % 2 == 0 and plan.tiles_n % 2 == 0
    ctx["c_in_registers"] = plan.c_in_registers
    # C's micro-tiles go to and from global memory 16 bytes at a time.
    ctx["c_vector"] = ctx["fma_vector"] and plan.c.cpp_type == "float" and plan.c.vector_bytes == 16
    if instr.is_mma:
        f64 = instr.name == "mma_f64"
        bits = 32 if instr.name == "mma_tf32" else {"mma_f16": 16, "mma_bf16": 16}.get(instr.name, 8)
        ctx.update(
            instruction_ptx=instr.ptx.format(a=_PTX_TYPE.get(plan.a.precision, ""),
                                             b=_PTX_TYPE.get(plan.b.precision, ""), op=plan.bit_op),
            im=instr.m, in_=instr.n, ik=instr.k,
            pm=plan.tile_m // instr.m, pn=plan.tile_n // instr.n,
            frag_type="double" if f64 else "unsigned",
            mma_acc_type=plan.mma_acc_type,
            a_regs=1 if f64 else 4, b_regs=1 if f64 else 2, c_vals=2 if f64 else 4,
            epr=32 // bits,
            ptx_a=_PTX_TYPE.get(plan.a.precision, ""), ptx_b=_PTX_TYPE.get(plan.b.precision, ""),
            bit_op=plan.bit_op,
        )
        if ctx["packed"]:
            # Bytes of k per row of A (and column of B); each instruction takes 32 of them.
            value_bits = plan.a.element_size * 8 // plan.a.pack  # 4 or 1
            ctx.update(k_bytes=plan.k * value_bits // 8, ik=32, values_per_word=32 // value_bits)
    return ctx


def check_namespace(name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or name == "blasdx":
        raise DescriptorError(
            f"device_source name must be a C++ identifier other than 'blasdx', got {name!r}; "
            f"use for example 'gemm' or 'gemm1'"
        )


def render_common() -> str:
    """The shared device helpers (types, conversions, mma operands, copies)."""
    return _environment().get_template("common.cuh.j2").render()


def render_device_source(plan: GemmPlan, name: str = "gemm") -> str:
    """Common helpers plus the block GEMM in namespace ``name``, ready to #include."""
    check_namespace(name)
    device = _environment().get_template("gemm.cuh.j2").render(**_context(plan, name))
    return render_common() + "\n" + device


def kernel_name(plan: GemmPlan, fusion: Fusion = NO_FUSION) -> str:
    """The batched kernel's name: its plan's, plus a digest of the fused hooks if any."""
    plan = kernel_plan(plan)
    return plan.kernel_name if fusion.is_identity else f"{plan.kernel_name}_f{fusion.digest}"


def render_kernel(plan: GemmPlan, fusion: Fusion = NO_FUSION) -> str:
    """The complete source of the batched kernel behind ``execute()``."""
    plan = kernel_plan(plan)
    ns = "blasdx_block_gemm"
    env = _environment()
    device = env.get_template("gemm.cuh.j2").render(**_context(plan, ns))
    storage = {"a_load": f"{ns}::a_t", "b_load": f"{ns}::b_t", "c_load": f"{ns}::c_t",
               "c_store": f"{ns}::c_t"}
    hooks = [(slot, storage[slot], None if hook.is_identity else hook.expression)
             for slot, hook in fusion.slots]
    return env.get_template("kernel.cu.j2").render(
        common=render_common(), device=device, ns=ns,
        threads=plan.threads, kernel_name=kernel_name(plan, fusion),
        fusion_identity=fusion.is_identity, hooks=hooks, bias=fusion.bias,
        stages=plan.pipeline_stages, c_in_registers=plan.c_in_registers,
    )
