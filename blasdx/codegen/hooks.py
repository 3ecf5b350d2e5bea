"""Element-wise hooks of execute(): cuBLASDx's a/b/c load and c store functors, from Python.

A hook is a built-in name ("relu", "gelu", ...), ``scale(s)``, or a C++ expression of
``x``. ``Fusion`` collects the hooks of one execute() call (and whether a bias vector is
added) as a frozen value; the renderer prints it as C++ functors and the runtime keys
its compiled kernels on it. Everything here is decided in Python, before any compile.

In a hook, ``x`` has type ``T``: ``float`` for float16, bfloat16 and float8 data, the
element type otherwise (``blasdx::complex<float>`` and so on for complex GEMMs).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ..describe.precision import PRECISIONS
from ..errors import ArgumentError
from .identifiers import is_identifier

_FORBIDDEN = (";", "{", "}", "#", '"', "\\", "\n", "//", "/*")


@dataclass(frozen=True)
class Hook:
    """One element-wise function ``x -> expression``, printed as a C++ functor."""

    name: str  # a built-in name, "scale" or "expression"
    expression: str  # C++ of x (type T; S is the stored element type)
    real_only: bool = False  # meaningless on complex values
    float_only: bool = False  # meaningless on integers
    factor: complex | None = None  # scale()'s factor
    # A gated epilogue's activation of the gate ("silu": SwiGLU, "gelu": GeGLU; GATES), "" for an element-wise hook.
    gate: str = ""
    # A hook written in Python (blasdx.numba's, name "python"): first the function (python_hook), then, once Numba
    # has compiled it for the slot's type, the C declaration of what it compiled to, which the expression calls.
    function: Any = None
    declaration: str = ""

    def __repr__(self) -> str:
        if self.name == "python":  # by the compiled function's symbol, made from what decides its code
            return f"blasdx.numba hook {self.expression or getattr(self.function, '__qualname__', self.function)}"
        if self.gate:
            name, layout = self.name.split("_")
            return f"blasdx.{name}(layout={layout!r})"
        if self.name == "expression":
            return f"blasdx.expression({self.expression!r})"
        if self.factor is not None:
            return f"blasdx.scale({self.factor if self.factor.imag else self.factor.real!r})"
        return repr(self.name)

    @property
    def is_identity(self) -> bool:
        return self.name == "identity"


IDENTITY = Hook("identity", "x")
BUILTINS: dict[str, Hook] = {h.name: h for h in (
    IDENTITY,
    Hook("negate", "-x"),
    Hook("conj", "blasdx::conj(x)"),
    Hook("relu", "(x > T(0) ? x : T(0))", real_only=True),
    Hook("gelu", "blasdx_activations::gelu(x)", real_only=True, float_only=True),  # x * Phi(x), the erf form
    Hook("sigmoid", "blasdx_activations::sigmoid(x)", real_only=True, float_only=True),
    Hook("tanh", "blasdx_activations::tanh(x)", real_only=True, float_only=True),
    # Clamped to the finite range of the stored type; +-inf to +-max, NaN to +0 (WMMA's satf).
    Hook("satfinite", "blasdx::satfinite<S>(x)", float_only=True),
)}


# A gated epilogue (GLU: C's column j = act(gate j) * up j of the product's columns): the activation of the gate, as
# C++ of x (type T, the scalar type). Where gate and up lie (GATE_LAYOUTS): "interleaved", the pair (2j, 2j + 1);
# "split", weights kept as [gate | up] of n / 2 columns each, the pair (j, n / 2 + j).
GATES = {"silu": "blasdx::silu(x)", "gelu": "blasdx_activations::gelu(x)"}
GATE_LAYOUTS = {"interleaved": "gate j at the product's column 2j, up j at 2j + 1",
                "split": "gate j at the product's column j, up j at n / 2 + j"}
GATED: dict[str, Hook] = {h.name: h for h in (
    Hook(f"{name}_{layout}", "x", real_only=True, float_only=True, gate=gate)
    for name, gate in (("swiglu", "silu"), ("geglu", "gelu")) for layout in GATE_LAYOUTS
)}


def gate_is_split(hook: Hook) -> bool:
    """Whether a gated epilogue's gate and up columns are the product's halves (layout="split")."""
    return hook.name.endswith("_split")


def _gated(name: str, layout: str) -> Hook:
    if layout in GATE_LAYOUTS:
        return GATED[f"{name}_{layout}"]
    raise ArgumentError(f"blasdx.{name}() takes layout='interleaved' ({GATE_LAYOUTS['interleaved']}) or "
                        f"layout='split' ({GATE_LAYOUTS['split']}); got layout={layout!r}")


def swiglu(*, layout: str) -> Hook:
    """The gated epilogue ``C[:, j] = silu(Z[:, 2j]) * Z[:, 2j + 1]`` of the product ``Z = alpha A B + bias``
    (C has half of B's columns), for ``execute(..., epilogue=blasdx.swiglu(layout="interleaved"))``; with
    ``layout="split"`` (weights kept as [gate | up]) ``C[:, j] = silu(Z[:, j]) * Z[:, n / 2 + j]``."""
    return _gated("swiglu", layout)


def geglu(*, layout: str) -> Hook:
    """The gated epilogue ``C[:, j] = gelu(Z[:, 2j]) * Z[:, 2j + 1]`` (gelu's erf form; ``layout="split"``:
    ``gelu(Z[:, j]) * Z[:, n / 2 + j]``); see swiglu."""
    return _gated("geglu", layout)


def scale(factor: complex) -> Hook:
    """The hook ``x -> factor * x`` (a complex factor needs a complex GEMM)."""
    if isinstance(factor, bool) or not isinstance(factor, numbers.Complex):
        raise ArgumentError(f"scale() takes a number, got {factor!r}")
    value = complex(factor)
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        raise ArgumentError(f"scale() takes a finite number, got {factor!r}")
    return Hook("scale", f"blasdx::scale(x, {value.real!r}, {value.imag!r})", factor=value)


def expression(text: str) -> Hook:
    """A C++ expression of ``x`` (type ``T``), for example ``"x * x"`` or ``"fminf(x, 6.f)"``."""
    if not isinstance(text, str) or not text.strip():
        raise ArgumentError(f"a hook expression must be a non-empty string, got {text!r}")
    for bad in _FORBIDDEN:
        if bad in text:
            raise ArgumentError(
                f"hook expression {text!r} contains {bad!r}; write one C++ expression of x, such "
                f"as 'x > 0 ? x : T(0)' (no statements, braces, comments or strings)"
            )
    return Hook("expression", text.strip())


def python_hook(function: object) -> Hook:
    """A hook written as a Python function of x, for blasdx.numba.device_api, which has Numba compile it for the
    slot's values before anything renders it (execute() takes no Python functions)."""
    return Hook("python", "", function=function)


def to_hook(value: str | Hook | None, slot: str) -> Hook:
    """A hook from what a user passed: None, a Hook, a built-in name or an expression."""
    if value is None:
        return IDENTITY
    if isinstance(value, Hook):
        return value
    if not isinstance(value, str):
        raise ArgumentError(
            f"{slot} must be a built-in name ({', '.join(BUILTINS)}), blasdx.scale(s), or a C++ "
            f"expression of x; got {value!r} of type {type(value).__name__} (a Python function of x is a hook "
            f"of blasdx.numba.device_api, which compiles it with Numba)"
        )
    name = value.strip()
    if name in BUILTINS:
        return BUILTINS[name]
    if name in GATED:
        return GATED[name]
    if name in ("swiglu", "geglu"):
        raise ArgumentError(f"{slot}={value!r}: say where the gate and up columns are, "
                            f"blasdx.{name}(layout='interleaved') ({GATE_LAYOUTS['interleaved']}) or "
                            f"blasdx.{name}(layout='split') ({GATE_LAYOUTS['split']}), or the strings "
                            f"{name + '_interleaved'!r}, {name + '_split'!r}")
    if is_identifier(name) and name != "x":
        raise ArgumentError(
            f"{slot}={value!r} is not a built-in hook; the built-ins are {', '.join(BUILTINS)} "
            f"(and blasdx.scale(s)); or write a C++ expression of x such as 'x > 0 ? x : T(0)'"
        )
    return expression(name)


def check_hook(hook: Hook, slot: str, precision: str, is_complex: bool) -> None:
    """Reject a built-in that means nothing for the slot's values."""
    info = PRECISIONS[precision]
    what = f"complex {precision}" if is_complex else precision
    if hook.real_only and is_complex:
        raise ArgumentError(f"{slot}={hook.name!r} is defined for real values, but this GEMM's "
                            f"values are {what}; use an expression of x instead")
    if hook.float_only and not info.is_float:
        raise ArgumentError(f"{slot}={hook.name!r} needs floating-point values, but this GEMM's "
                            f"values are {what}")
    if hook.factor is not None:
        if hook.factor.imag and not is_complex:
            raise ArgumentError(f"{slot}: scale({hook.factor}) is complex, but this GEMM's values "
                                f"are {what}; use a real factor")
        if not info.is_float and not (hook.factor.real.is_integer() and hook.factor.imag.is_integer()):
            raise ArgumentError(f"{slot}: scale({hook.factor}) is not integral, but this GEMM's "
                                f"values are {what}; use an integer factor")


SLOTS = ("a_load", "b_load", "c_load", "c_store")


@dataclass(frozen=True)
class Fusion:
    """The element-wise work fused into one execute() kernel."""

    a_load: Hook = IDENTITY
    b_load: Hook = IDENTITY
    c_load: Hook = IDENTITY
    c_store: Hook = IDENTITY
    bias: bool = False  # a bias array broadcast to C is added before c_store
    # The bias is the same on every row of C (a row of n values broadcast down C, the common
    # bias): the kernel then reads it by column alone, so a thread's rows share their loads.
    # execute() sets it from the bias's strides; the bias view's row stride is 0 then.
    bias_rows_alike: bool = False
    # FP8 scales on the device (blasdx.runtime.scales): A's "tensor", "row" or "block", B's "tensor", "col"
    # or "block"; "" where there is none (or a Python number, folded into alpha).
    scale_a: str = ""
    scale_b: str = ""
    # The gated epilogue's activation (GATES; execute()'s epilogue=blasdx.swiglu/geglu), "" for none: C holds half
    # of the product's columns (GridPlan.gated); gate_split: its gate and up are the product's halves (layout="split").
    gate: str = ""
    gate_split: bool = False

    def reading_bias_by_column(self) -> Fusion:
        """This fusion for a bias alike on every row of C (see bias_rows_alike)."""
        return replace(self, bias_rows_alike=True)

    @property
    def is_identity(self) -> bool:
        return self == NO_FUSION

    def with_scales(self, scale_a: str, scale_b: str) -> Fusion:
        """This fusion with the kinds of the scales on the device ("" for none)."""
        return replace(self, scale_a=scale_a, scale_b=scale_b)

    @property
    def scaled(self) -> bool:
        """Whether the kernel reads scales of A and B (SCALE_PARAMETERS)."""
        return bool(self.scale_a or self.scale_b)

    @property
    def has_epilogue(self) -> bool:
        """Whether C's side has work: a c_load or c_store hook, a bias or a gate."""
        return self.bias or bool(self.gate) or not (self.c_load.is_identity and self.c_store.is_identity)

    @cached_property
    def _hash(self) -> int:
        return hash((*(hook for _, hook in self.slots), self.bias, self.bias_rows_alike, self.scale_a, self.scale_b,
                     self.gate, self.gate_split))

    def __hash__(self) -> int:  # computed once: fusions key the per-call launch caches
        return self._hash

    @property
    def digest(self) -> str:
        parts: tuple[object, ...] = (tuple(hook.expression for _, hook in self.slots) + (self.bias,)
                                     + (("rows alike",) if self.bias_rows_alike else ()))
        if self.scaled:  # (kernels without scales keep their names)
            parts += (("scales", self.scale_a, self.scale_b),)
        if self.gate:  # (interleaved kernels keep their names)
            parts += (("gate", self.gate, "split") if self.gate_split else ("gate", self.gate),)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:8]

    @property
    def slots(self) -> tuple[tuple[str, Hook], ...]:
        """(slot name, hook) for a_load, b_load, c_load and c_store, in that order."""
        return tuple((slot, getattr(self, slot)) for slot in SLOTS)

    @property
    def expressions(self) -> list[tuple[str, str]]:
        """(slot, expression) of the user-written expressions, for error messages."""
        return [(slot, hook.expression) for slot, hook in self.slots if hook.name == "expression"]


NO_FUSION = Fusion()


def make_fusion(*, prologue, epilogue, a_load, b_load, c_load, c_store, has_bias: bool,
                precisions: tuple[str, str, str], scalar_precision: str,
                is_complex: bool) -> Fusion:
    """Resolve execute()'s hook arguments: ``prologue`` is a_load and b_load together,
    ``epilogue`` is c_store; giving both a shorthand and its slot is an error."""
    if prologue is not None and (a_load is not None or b_load is not None):
        raise ArgumentError("prologue= applies to both A and B; give either prologue= or "
                            "a_load=/b_load=, not both")
    if epilogue is not None and c_store is not None:
        raise ArgumentError("epilogue= is c_store=; give one of them, not both")
    if prologue is not None:
        a_load = b_load = prologue
    if epilogue is not None:
        c_store = epilogue
    hooks = {"a_load": to_hook(a_load, "a_load"), "b_load": to_hook(b_load, "b_load"),
             "c_load": to_hook(c_load, "c_load"), "c_store": to_hook(c_store, "c_store")}
    value_precision = {"a_load": precisions[0], "b_load": precisions[1],
                       "c_load": scalar_precision, "c_store": scalar_precision}
    for slot, hook in hooks.items():
        if hook.gate and slot != "c_store":
            raise ArgumentError(f"{slot}={hook!r}: a gated epilogue combines two columns of the product into one "
                                f"of C; give it as epilogue= (c_store=)")
        if slot in ("a_load", "b_load") and not hook.is_identity and PRECISIONS[value_precision[slot]].is_packed:
            raise ArgumentError(
                f"{slot}={hook!r}: "
                f"{value_precision[slot]} operands go to the tensor cores packed, so no load hook "
                f"can see their values; transform the data before packing, or hook c_load/c_store"
            )
        check_hook(hook, slot, value_precision[slot], is_complex)
    gate = hooks["c_store"].gate
    return Fusion(a_load=hooks["a_load"], b_load=hooks["b_load"], c_load=hooks["c_load"],
                  c_store=IDENTITY if gate else hooks["c_store"], bias=has_bias, gate=gate,
                  gate_split=bool(gate) and gate_is_split(hooks["c_store"]))
