"""blasdx as a functional, differentiable PyTorch op (import it explicitly; it imports torch):

    import blasdx.pytorch
    out = blasdx.pytorch.gemm(GEMM, a, b, bias=bias, epilogue="relu")  # a new tensor
    out.sum().backward()                                             # a.grad, b.grad, bias.grad

``gemm`` computes ``epilogue(alpha * a @ b + beta * c + bias)`` into a new C tensor in
the descriptor's arrangement, with the batched kernel of ``GEMM.execute()``. It is the
custom op ``torch.ops.blasdx.gemm`` (``torch.library.custom_op``) with a fake
implementation, so ``torch.compile(fullgraph=True)`` traces it without a graph break, and
an autograd formula whose products are blasdx GEMMs too:

    z = alpha * a @ b + beta * c + bias,  out = epilogue(z),  dz = dout * epilogue'(z)
    da = alpha * dz @ b^T,  db = alpha * a^T @ dz,  dc = beta * dz,  dbias = dz summed to bias's shape

Each product is a descriptor of its own (Size(m, k, n) for da, Size(k, n, m) for db) with
the forward's precisions and SM, arranged as the saved tensors lie in memory; ``dz`` is
cast to the operand precision first, as mixed-precision training does (a float16 dz scaled
by a power of two so that small gradients keep their digits), and the product, in the C
precision, is cast to the input's dtype. Epilogues with a derivative: identity,
negate, relu, gelu (erf form; z is recomputed by one more GEMM), sigmoid and tanh; another
epilogue, a complex or integer GEMM, or a precision without a PyTorch float dtype raises
ArgumentError when a gradient is needed (it still runs under torch.no_grad()).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .codegen.hooks import GATED, Hook, gate_is_split
from .describe.descriptor import Descriptor
from .describe.operators import OPERATOR_KINDS, SM, Arrangement, Grouped, LeadingDimension, Precision, Size
from .describe.precision import PRECISIONS
from .errors import ArgumentError, DescriptorError
from .runtime.scales import is_number, number_scale

__all__ = ["gemm", "grouped_gemm", "DIFFERENTIABLE_EPILOGUES", "check_differentiable", "check_grouped_differentiable",
           "descriptor_key", "descriptor_from_key"]

# Epilogues whose derivative the backward applies (from the output y, or for gelu from z).
DIFFERENTIABLE_EPILOGUES = ("identity", "negate", "relu", "gelu", "sigmoid", "tanh")
# Operand precisions the backward handles: each has a PyTorch floating dtype to cast dz to.
_DIFFERENTIABLE_PRECISIONS = ("float16", "bfloat16", "tfloat32", "float32", "float64")

_descriptors: dict[str, Descriptor] = {}  # by repr, the op's descriptor argument
# The names a descriptor's repr uses: the operator classes, and nothing else, for eval.
_OPERATORS = {cls.__name__: cls for cls in OPERATOR_KINDS}


def descriptor_key(desc: Descriptor) -> str:
    """The op's descriptor argument (``torch.ops.blasdx.gemm``'s first): the descriptor's
    canonical repr, remembered for ``descriptor_from_key``."""
    key = repr(desc)
    _descriptors.setdefault(key, desc)
    return key


def descriptor_from_key(key: str) -> Descriptor:
    """The descriptor of a key; one not seen in this process (a graph loaded from a cache)
    is rebuilt from its repr, which names blasdx operators only."""
    desc = _descriptors.get(key)
    if desc is None:
        desc = eval(key, {"__builtins__": {}}, _OPERATORS)  # noqa: S307 - our own repr, operators only
        if not isinstance(desc, Descriptor):
            raise ArgumentError(f"{key!r} is not a blasdx descriptor")
        _descriptors[key] = desc
    return desc


def _torch_dtype(precision: str, is_complex: bool) -> torch.dtype:
    """The PyTorch dtype holding values of ``precision`` (complex64/128 for complex f32/f64)."""
    name = PRECISIONS[precision].numpy_name
    if is_complex:
        name = {"float32": "complex64", "float64": "complex128"}.get(name, "")
    dtype = getattr(torch, name, None) if name else None
    if not isinstance(dtype, torch.dtype):
        raise ArgumentError(
            f"blasdx.pytorch.gemm has no PyTorch dtype for {'complex ' if is_complex else ''}{precision} "
            f"output; use GEMM.execute() with a C you allocate"
        )
    return dtype


def _new_c(desc: Descriptor, a: torch.Tensor, c: torch.Tensor | None) -> torch.Tensor:
    """An uninitialised C for ``a``'s batch and device, in the descriptor's arrangement and
    leading dimension (a column-major C is the transpose of a row-major (n, m) buffer).
    A given ``c`` must have its shape (copying it in would broadcast otherwise)."""
    m, n = desc.size.m, desc.size.n
    row_major = desc.arrangement.c == "row_major"
    outer, inner = (m, n) if row_major else (n, m)
    buffer = torch.empty((*a.shape[:-2], outer, desc.leading_dimension.c),
                         dtype=_torch_dtype(desc.precision.c, desc.is_complex), device=a.device)
    out = buffer[..., :inner] if row_major else buffer[..., :inner].transpose(-1, -2)
    if c is not None and c.shape != out.shape:
        raise ArgumentError(f"c has shape {tuple(c.shape)}, but the output has {tuple(out.shape)}: (m, n) = "
                            f"({m}, {n}) with A's batch dimensions; pass a c of that shape")
    return out


@torch.library.custom_op("blasdx::gemm", mutates_args=())
def _gemm(descriptor: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float,
          beta: float, bias: torch.Tensor | None, epilogue: str, scale_a: torch.Tensor | None = None,
          scale_b: torch.Tensor | None = None) -> torch.Tensor:
    desc = descriptor_from_key(descriptor)
    out = _new_c(desc, a, c)
    if c is not None and beta != 0:
        out.copy_(c)
    desc.execute(a, b, out, alpha, beta if c is not None else 0.0, bias=bias, epilogue=epilogue or None,
                 scale_a=scale_a, scale_b=scale_b)
    return out


@torch.library.register_fake("blasdx::gemm")
def _gemm_fake(descriptor: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float,
               beta: float, bias: torch.Tensor | None, epilogue: str, scale_a: torch.Tensor | None = None,
               scale_b: torch.Tensor | None = None) -> torch.Tensor:
    return _new_c(descriptor_from_key(descriptor), a, c)


def _setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    descriptor, a, b, c, alpha, beta, bias, epilogue, _, _ = inputs  # scaled FP8 has no gradient
    check_differentiable(descriptor_from_key(descriptor), epilogue)  # gemm() checked it already but in torch.compile
    ctx.descriptor, ctx.alpha, ctx.beta, ctx.epilogue = descriptor, alpha, beta, epilogue
    ctx.c_meta = None if c is None else (c.shape, c.dtype)
    ctx.bias_meta = None if bias is None else (bias.shape, bias.dtype)
    needs_output = epilogue in ("relu", "sigmoid", "tanh")
    ctx.save_for_backward(a, b, output if needs_output else None,
                          c if epilogue == "gelu" else None, bias if epilogue == "gelu" else None)


def _dz(ctx: Any, grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor | None,
        c: torch.Tensor | None, bias: torch.Tensor | None) -> torch.Tensor:
    """d loss / d z: the output's gradient through the epilogue's derivative."""
    epilogue = ctx.epilogue or "identity"
    if epilogue == "identity":
        return grad
    if epilogue == "negate":
        return -grad
    if epilogue in ("relu", "sigmoid", "tanh"):  # from the output y, which _setup_context saved
        assert y is not None
        if epilogue == "relu":
            return grad * (y > 0)
        if epilogue == "sigmoid":
            return grad * y * (1 - y)
        return grad * (1 - y * y)
    # gelu(z) = z * Phi(z): gelu'(z) = Phi(z) + z * phi(z); z by the forward without the epilogue
    z = torch.ops.blasdx.gemm(ctx.descriptor, a, b, c, ctx.alpha, ctx.beta, bias, "").to(grad.dtype)
    cdf = 0.5 * (1 + torch.erf(z * (1 / math.sqrt(2))))
    pdf = torch.exp(-0.5 * z * z) * (1 / math.sqrt(2 * math.pi))
    return grad * (cdf + z * pdf)


def _layout_and_ld(x: torch.Tensor) -> tuple[str, int]:
    """How the matrices of ``x`` lie in memory: (arrangement, leading dimension)."""
    rows, cols = x.shape[-2:]
    row_stride, col_stride = x.stride()[-2:]
    if col_stride == 1 or cols == 1:
        return "row_major", max(row_stride, cols) if rows > 1 else cols
    if row_stride == 1 or rows == 1:
        return "col_major", max(col_stride, rows) if cols > 1 else rows
    raise ArgumentError(f"a saved operand has strides {tuple(x.stride())}: neither rows nor columns are "
                        f"contiguous; pass contiguous tensors")


def _as_operand(dz: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``dz`` cast to an operand dtype, and the scale it was multiplied by first (None for
    none). float16 flushes gradients below 6e-5 to subnormals and zero (a mean loss over a
    million outputs gives ~1e-6), so a float16 dz is scaled by the power of two that puts
    its largest magnitude in [1, 2): exact, and undone exactly after the product."""
    if dtype != torch.float16 or dz.dtype == torch.float16 or dz.numel() == 0:  # empty: no largest to scale by
        return dz.to(dtype), None
    largest = dz.detach().abs().amax().float()
    scale = torch.where(largest > 0, torch.exp2(-torch.floor(torch.log2(largest))), 1.0)
    return (dz * scale).to(dtype), scale


def _product(desc: Descriptor, x: torch.Tensor, y: torch.Tensor, alpha: float, dtype: torch.dtype,
             scale: torch.Tensor | None) -> torch.Tensor:
    """alpha * x @ y / scale by a blasdx GEMM with ``desc``'s precisions, SM and execution kind
    (Block() or Grid(): a grid-level forward has grid-level gradients), in ``dtype``; x and y are
    arranged as they lie in memory."""
    (x_layout, x_ld), (y_layout, y_ld) = _layout_and_ld(x), _layout_and_ld(y)
    m, k = x.shape[-2:]
    n = y.shape[-1]
    product = (Size(m, n, k) + Precision(*desc.precision) + Arrangement(x_layout, y_layout, "row_major")
               + LeadingDimension(x_ld, y_ld, n) + SM(desc.sm) + desc.operator_map["Execution"])
    out = torch.ops.blasdx.gemm(descriptor_key(product), x, y, None, alpha, 0.0, None, "")
    return (out if scale is None else out / scale).to(dtype)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple:
    a, b, y, c, bias = ctx.saved_tensors
    desc = descriptor_from_key(ctx.descriptor)
    need_a, need_b, need_c, need_bias = (ctx.needs_input_grad[i] for i in (1, 2, 3, 6))
    dz = _dz(ctx, grad, a, b, y, c, bias)
    da = db = dc = dbias = None
    a_dtype, b_dtype = (_torch_dtype(p, False) for p in desc.precision[:2])
    if need_a:  # alpha * dz @ b^T
        operand, scale = _as_operand(dz, a_dtype)
        da = _product(desc, operand.contiguous(), b.transpose(-1, -2), ctx.alpha, a.dtype, scale)
    if need_b:  # alpha * a^T @ dz
        operand, scale = _as_operand(dz, b_dtype)
        db = _product(desc, a.transpose(-1, -2), operand.contiguous(), ctx.alpha, b.dtype, scale)
    if need_c:
        shape, dtype = ctx.c_meta
        dc = (ctx.beta * dz).to(dtype).sum_to_size(shape)
    if need_bias:
        shape, dtype = ctx.bias_meta
        dbias = dz.sum_to_size(shape).to(dtype)
    return None, da, db, dc, None, None, dbias, None, None, None


torch.library.register_autograd("blasdx::gemm", _backward, setup_context=_setup_context)


def check_differentiable(desc: Descriptor, epilogue: str) -> None:
    """Raise ArgumentError where the backward cannot compute a gradient of ``gemm(desc, ...,
    epilogue=epilogue)``: a complex GEMM, an operand precision without a PyTorch float
    dtype, an epilogue without a derivative."""
    if desc.is_complex:
        raise ArgumentError("blasdx.pytorch.gemm has no gradient for complex GEMMs yet; run it under "
                            "torch.no_grad() or detach the inputs")
    for name, precision in zip("ab", desc.precision[:2]):
        if precision not in _DIFFERENTIABLE_PRECISIONS:
            raise ArgumentError(
                f"blasdx.pytorch.gemm has no gradient for {name.upper()} in {precision}; the differentiable "
                f"precisions are {', '.join(_DIFFERENTIABLE_PRECISIONS)} (or run under torch.no_grad())")
    if (epilogue or "identity") not in DIFFERENTIABLE_EPILOGUES:
        raise ArgumentError(
            f"epilogue={epilogue!r} has no derivative here; with gradients the epilogue must be one of "
            f"{', '.join(DIFFERENTIABLE_EPILOGUES)}. Run under torch.no_grad() or detach the inputs "
            f"to use it, or apply it with PyTorch after the op")


def gemm(desc: Descriptor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, alpha: float = 1.0,
         beta: float = 0.0, bias: torch.Tensor | None = None, epilogue: str | None = None,
         scale_a: torch.Tensor | float | None = None, scale_b: torch.Tensor | float | None = None) -> torch.Tensor:
    """``epilogue(alpha * a @ b + beta * c + bias)`` as a new tensor in ``desc``'s C
    arrangement: (m, n), or (batch, m, n) for 3-D operands. Differentiable in a, b, c and
    bias (see the module's docstring); ``epilogue`` is a built-in name or a C++ expression
    of x. The operands' shapes, dtypes and strides are checked as execute() checks them.
    ``scale_a`` and ``scale_b`` scale FP8 A and B as execute() takes them (numbers fold into
    alpha; float32 tensors per tensor, row, column or block; no gradient)."""
    if not isinstance(desc, Descriptor):
        raise ArgumentError(f"gemm's first argument is a blasdx descriptor, got {type(desc).__name__}")
    if epilogue is not None and not isinstance(epilogue, str):
        raise ArgumentError(f"blasdx.pytorch.gemm takes the epilogue as a string (a built-in name or a C++ "
                            f"expression of x), got {type(epilogue).__name__}")
    if epilogue in GATED:
        raise ArgumentError(f"epilogue={epilogue!r} (a gated epilogue) is taken by grouped_gemm and by execute() of "
                            f"Grid() descriptors, not by gemm; call GEMM.execute(a, b, c, epilogue=...) with C of n / 2 "
                            f"columns")
    if c is None and beta != 0:
        raise ArgumentError(f"beta={beta} scales C, but no c was given; pass c or leave beta at 0")
    scales: list[torch.Tensor | None] = []
    for name, scale in (("scale_a", scale_a), ("scale_b", scale_b)):
        if is_number(scale):
            alpha = alpha * number_scale(scale, name)
            scales.append(None)
        elif scale is None or isinstance(scale, torch.Tensor):
            scales.append(scale)
        else:
            raise ArgumentError(f"{name} is a float32 tensor or a number, got {type(scale).__name__}")
    if torch.compiler.is_compiling():  # torch.compile reads the repr as a constant; the op's autograd checks
        key = repr(desc)
    else:
        key = descriptor_key(desc)
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, c, bias)):
            check_differentiable(desc, epilogue or "")  # before any work
    return torch.ops.blasdx.gemm(key, a, b, c, float(alpha), float(beta), bias, epilogue or "", scales[0], scales[1])


# --- Grouped(): the mixture-of-experts op ----------------------------------------------------
#   out = grouped_gemm(GEMM, a, b, offsets, bias=bias, epilogue="relu")   # out[rows of g] = epilogue(alpha a_g @ b_g + bias_g)
# with gradients by Grouped() GEMMs too: da_g = alpha dz_g b_g^T (Grouped() on b's transpose) and
# db_g = alpha a_g^T dz_g (Grouped('k')); dbias the sum of dz over each group's rows. Rows past the last offset are
# zero in out and in da. The offsets (int32 on the device) are never read on the host: no synchronisation.

# The epilogues whose derivative needs no GEMM, and the gated ones (blasdx.swiglu, blasdx.geglu: out has n / 2
# columns), whose backward computes the product again (one more Grouped() GEMM) rather than keep it.
_GROUPED_EPILOGUES = ("identity", "negate", "relu", "sigmoid", "tanh", *GATED)


def _out_columns(desc: Descriptor, epilogue: str) -> int:
    """Columns of the op's output: the product's n, half of it under a gated epilogue."""
    return desc.size.n // 2 if epilogue in GATED else desc.size.n


def _grouped_out(desc: Descriptor, a: torch.Tensor, epilogue: str) -> torch.Tensor:
    return torch.zeros((a.shape[0], _out_columns(desc, epilogue)), dtype=_torch_dtype(desc.precision.c, False),
                       device=a.device)


@torch.library.custom_op("blasdx::grouped_gemm", mutates_args=())
def _grouped_gemm(descriptor: str, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor, alpha: float,
                  bias: torch.Tensor | None, epilogue: str) -> torch.Tensor:
    desc = descriptor_from_key(descriptor)
    out = _grouped_out(desc, a, epilogue)
    desc.execute(a, b, out, alpha, offsets=offsets, bias=bias, epilogue=epilogue or None)
    return out


@torch.library.register_fake("blasdx::grouped_gemm")
def _grouped_gemm_fake(descriptor: str, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor, alpha: float,
                       bias: torch.Tensor | None, epilogue: str) -> torch.Tensor:
    desc = descriptor_from_key(descriptor)
    return a.new_empty((a.shape[0], _out_columns(desc, epilogue)), dtype=_torch_dtype(desc.precision.c, False))


def _grouped_k_out(desc: Descriptor, groups: int, device: torch.device) -> torch.Tensor:
    """Grouped('k')'s C: (groups, m, n) in the descriptor's C layout."""
    m, n = desc.size.m, desc.size.n
    dtype = _torch_dtype(desc.precision.c, False)
    if desc.arrangement.c == "row_major":
        return torch.empty((groups, m, n), dtype=dtype, device=device)
    return torch.empty((groups, n, m), dtype=dtype, device=device).transpose(1, 2)


@torch.library.custom_op("blasdx::grouped_gemm_k", mutates_args=())
def _grouped_gemm_k(descriptor: str, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor,
                    alpha: float) -> torch.Tensor:
    """Grouped('k')'s product (the weights' gradient) as an op of its own, so that torch.compile traces the backward."""
    desc = descriptor_from_key(descriptor)
    out = _grouped_k_out(desc, offsets.shape[0], a.device)
    desc.execute(a, b, out, alpha, offsets=offsets)
    return out


@torch.library.register_fake("blasdx::grouped_gemm_k")
def _grouped_gemm_k_fake(descriptor: str, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor,
                         alpha: float) -> torch.Tensor:
    desc = descriptor_from_key(descriptor)
    m, n = desc.size.m, desc.size.n
    dtype = _torch_dtype(desc.precision.c, False)
    strides = (m * n, n, 1) if desc.arrangement.c == "row_major" else (m * n, 1, m)
    return a.new_empty_strided((offsets.shape[0], m, n), strides, dtype=dtype)


def _grouped_setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    descriptor, a, b, offsets, alpha, bias, epilogue = inputs
    check_grouped_differentiable(descriptor_from_key(descriptor), epilogue, "")  # grouped_gemm planned the gradients
    ctx.descriptor, ctx.alpha, ctx.epilogue = descriptor, alpha, epilogue
    ctx.bias_meta = None if bias is None else (bias.shape, bias.dtype)
    ctx.save_for_backward(a, b, offsets, output if epilogue in ("relu", "sigmoid", "tanh") else None,
                          bias if epilogue in GATED else None)


def _gated_dz(ctx: Any, grad: torch.Tensor, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor,
              bias: torch.Tensor | None) -> torch.Tensor:
    """d loss / d z of a gated epilogue, out[:, j] = act(z[:, 2j]) * z[:, 2j + 1] (layout="split": act(z[:, j]) *
    z[:, n / 2 + j]): z computed again (one Grouped() GEMM), the derivative in float32, in z's layout. Rows past the
    last offset have z = 0, and so no gradient."""
    z = torch.ops.blasdx.grouped_gemm(ctx.descriptor, a, b, offsets, ctx.alpha, bias, "").float()
    split = gate_is_split(GATED[ctx.epilogue])
    half = z.shape[1] // 2
    gate, up = (z[:, :half], z[:, half:]) if split else (z[:, 0::2], z[:, 1::2])
    dout = grad.float()
    if GATED[ctx.epilogue].gate == "silu":  # silu(g) = g sigmoid(g): silu' = s (1 + g (1 - s))
        s = torch.sigmoid(gate)
        act, slope = gate * s, s * (1 + gate * (1 - s))
    else:  # gelu(g) = g Phi(g): gelu' = Phi(g) + g phi(g)
        cdf = 0.5 * (1 + torch.erf(gate * (1 / math.sqrt(2))))
        act, slope = gate * cdf, cdf + gate * torch.exp(-0.5 * gate * gate) * (1 / math.sqrt(2 * math.pi))
    if split:
        return torch.cat((dout * up * slope, dout * act), dim=1).to(grad.dtype)
    return torch.stack((dout * up * slope, dout * act), dim=-1).reshape(z.shape).to(grad.dtype)


def _grouped_gradients(desc: Descriptor) -> tuple[Descriptor, Descriptor]:
    """The descriptors of a Grouped() forward's gradients: da_g = dz_g b_g^T (Grouped() on b's transpose) and
    db_g = a_g^T dz_g (Grouped('k'), db in b's layout)."""
    p_a, p_b, p_c = desc.precision
    b_layout = desc.arrangement.b
    transposed = "row_major" if b_layout == "col_major" else "col_major"
    m, n, k = desc.size
    da = (Size(m, k, n) + Precision(p_a, p_b, p_c) + Arrangement("row_major", transposed, "row_major") + SM(desc.sm)
          + Grouped())
    db = Size(k, n, m) + Precision(p_a, p_b, p_c) + Arrangement("col_major", "row_major", b_layout) + SM(desc.sm) + Grouped("k")
    return da, db


def _grouped_backward(ctx: Any, grad: torch.Tensor) -> tuple:
    a, b, offsets, y, bias = ctx.saved_tensors
    desc = descriptor_from_key(ctx.descriptor)
    if ctx.epilogue in GATED:
        dz = _gated_dz(ctx, grad, a, b, offsets, bias)
    else:
        dz = _dz(ctx, grad, a, b, y, None, None)  # the epilogues here need only the output
    groups, rows = b.shape[0], a.shape[0]
    da_desc, db_desc = _grouped_gradients(desc)
    da = db = dbias = None
    if ctx.needs_input_grad[1]:  # da_g = alpha dz_g b_g^T
        operand, scale = _as_operand(dz, _torch_dtype(desc.precision.a, False))
        da = torch.ops.blasdx.grouped_gemm(descriptor_key(da_desc), operand.contiguous(), b.transpose(1, 2), offsets,
                                           ctx.alpha, None, "")
        da = (da if scale is None else da / scale).to(a.dtype)
    if ctx.needs_input_grad[2]:  # db_g = alpha a_g^T dz_g
        operand, scale = _as_operand(dz, _torch_dtype(desc.precision.b, False))
        db = torch.ops.blasdx.grouped_gemm_k(descriptor_key(db_desc), a.t(), operand.contiguous(), offsets, ctx.alpha)
        db = (db if scale is None else db / scale).to(b.dtype)
    if ctx.needs_input_grad[5]:  # each group's rows summed (rows past the last offset: group `groups`, dropped)
        shape, dtype = ctx.bias_meta
        group_of_row = torch.searchsorted(offsets, torch.arange(rows, device=a.device, dtype=offsets.dtype), right=True)
        sums = torch.zeros((groups + 1, dz.shape[1]), dtype=torch.float32, device=a.device)
        sums.index_add_(0, group_of_row, dz.float())
        dbias = (sums[:groups] if len(shape) == 2 else sums[:groups].sum(0)).to(dtype)
    return None, da, db, None, None, dbias, None


torch.library.register_autograd("blasdx::grouped_gemm", _grouped_backward, setup_context=_grouped_setup_context)


def check_grouped_differentiable(desc: Descriptor, epilogue: str, gradients: str = "ab") -> None:
    """Raise ArgumentError where grouped_gemm's backward cannot compute the ``gradients`` ("a", "b"):
    check_differentiable's cases, the epilogues whose derivative would need the product again (gelu), and gradients
    whose Grouped() GEMMs cannot run (Grouped('k') takes 16-bit A and B only; rows of whole 16 bytes)."""
    check_differentiable(desc, "" if epilogue in GATED else epilogue)
    if (epilogue or "identity") not in _GROUPED_EPILOGUES:
        raise ArgumentError(f"grouped_gemm's gradient takes the epilogues {', '.join(_GROUPED_EPILOGUES)}, not "
                            f"{epilogue!r}; apply it with PyTorch after the op, or run under torch.no_grad()")
    for name, product in zip(("a", "b"), _grouped_gradients(desc)):
        if name not in gradients:
            continue
        try:
            _ = product.plan
        except DescriptorError as exc:  # UnsupportedError among them
            raise ArgumentError(f"grouped_gemm's gradient of {name} is {product!r}, which cannot run: {exc}; run "
                                f"under torch.no_grad() or detach {name}") from None


def grouped_gemm(desc: Descriptor, a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor, alpha: float = 1.0,
                 bias: torch.Tensor | None = None, epilogue: str | Hook | None = None) -> torch.Tensor:
    """A mixture-of-experts layer's grouped product as a new (rows, n) tensor: rows offsets[g - 1] .. offsets[g]
    are ``epilogue(alpha * a_g @ b[g] + bias[g])`` (torch._grouped_mm's offsets; rows past the last offset are
    zero). ``desc`` is a Grouped() descriptor; ``bias`` is (groups, n) or (n,). A gated epilogue
    (blasdx.swiglu(layout="interleaved" or "split"), blasdx.geglu) gives (rows, n / 2). Differentiable in a, b and bias,
    each gradient a Grouped() GEMM; torch.compile(fullgraph=True) traces it without a graph break."""
    if isinstance(epilogue, Hook) and epilogue.gate:
        epilogue = epilogue.name  # the op's schema takes a string: GATED's name
    if not isinstance(desc, Descriptor) or desc.execution != "Grouped" or desc.operator_map["Execution"].ragged != "m":  # type: ignore[attr-defined]
        raise ArgumentError("grouped_gemm's first argument is a Grouped() descriptor (groups of rows), got "
                            f"{desc!r}")
    if epilogue is not None and not isinstance(epilogue, str):
        raise ArgumentError(f"grouped_gemm takes the epilogue as a string or a gated epilogue (blasdx.swiglu), got "
                            f"{type(epilogue).__name__}")
    if torch.compiler.is_compiling():
        key = repr(desc)
    else:
        key = descriptor_key(desc)
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (a, b, bias)):
            check_grouped_differentiable(desc, epilogue or "", "a" * a.requires_grad + "b" * b.requires_grad)
    return torch.ops.blasdx.grouped_gemm(key, a, b, offsets, float(alpha), bias, epilogue or "")
