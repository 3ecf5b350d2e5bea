"""Element-wise hooks without a GPU: validation, rendering, NVRTC."""

from __future__ import annotations

import pytest

import blasdx
from blasdx import SM, ArgumentError, Block, CompileError, Precision, Size, Type
from blasdx.codegen.hooks import BUILTINS, NO_FUSION, make_fusion
from blasdx.codegen.naming import kernel_name
from blasdx.describe.precision import PRECISIONS
from blasdx.pipeline import compile_for_arch, kernel_source
from blasdx.plan import kernel_plan

F16 = Size(32, 32, 32) + Precision("float16", "float16", "float32") + SM(900) + Block()
F32 = Size(16, 16, 16) + Precision("float32") + SM(900) + Block()
I8 = Size(32, 32, 32) + Precision("int8", "int8", "int32") + SM(900) + Block()
C32 = Size(16, 16, 16) + Precision("float32") + Type("complex") + SM(900) + Block()


def fusion_for(desc, has_bias=False, **hooks):
    args = dict(prologue=None, epilogue=None, a_load=None, b_load=None, c_load=None, c_store=None)
    args.update(hooks)
    return make_fusion(**args, has_bias=has_bias, precisions=tuple(desc.precision),
                       scalar_precision=desc.plan.scalar_precision, is_complex=desc.is_complex)


def test_no_hooks_is_the_plain_kernel():
    assert fusion_for(F16) == NO_FUSION
    assert kernel_source(F16.plan, NO_FUSION) == F16.source
    assert kernel_name(kernel_plan(F16.plan), NO_FUSION) == kernel_plan(F16.plan).kernel_name


def test_shorthands_set_their_slots():
    f = fusion_for(F16, prologue="negate", epilogue="relu")
    assert (f.a_load.name, f.b_load.name, f.c_load.name, f.c_store.name) == ("negate", "negate", "identity", "relu")


def test_hooks_change_the_kernel_name_and_source():
    relu, gelu = fusion_for(F16, epilogue="relu"), fusion_for(F16, epilogue="gelu")
    names = {kernel_name(kernel_plan(F16.plan), f) for f in (NO_FUSION, relu, gelu, fusion_for(F16, epilogue="relu", has_bias=True))}
    assert len(names) == 4
    assert "(x > T(0) ? x : T(0))" in kernel_source(F16.plan, relu)


def test_a_bias_alike_on_every_row_is_read_by_column():
    """A bias of one row broadcast down C (row stride 0: shapes (n,), (1, n), (batch, 1, n), a
    single value) makes a kernel of its own that reads it by column alone; any other bias keeps
    the general read. Both compile, for the batched and the grid kernel, and compile(bias=...)
    names either."""
    from dataclasses import replace

    from blasdx.pipeline import fusion_for_bias
    from blasdx.runtime.arguments import BiasView

    general = fusion_for(F16, epilogue="gelu", has_bias=True)
    for strides, alike in (((0, 0, 1), True), ((32, 0, 1), True), ((0, 0, 0), True), ((0, 1, 0), False),
                           ((1024, 32, 1), False)):
        fusion = fusion_for_bias(general, BiasView(ptr=0, strides=strides, span_bytes=0, keepalive=None))
        assert fusion.bias_rows_alike is alike and (fusion is general) is not alike, strides
    assert fusion_for_bias(general, None) is general
    rows_alike = replace(general, bias_rows_alike=True)
    assert rows_alike.digest != general.digest and hash(rows_alike) != hash(general)
    grid = Size(300, 260, 200) + Precision("float16", "float16", "float32") + SM(900) + blasdx.Grid()
    for plan in (F16.plan, grid.plan):
        source = kernel_source(plan, rows_alike)
        assert "load_read_only(bias + col * col_stride)" in source and "row * row_stride" not in source
        assert "row * row_stride + col * col_stride" in kernel_source(plan, general)
        assert compile_for_arch(plan, 900, rows_alike).kernel_name.endswith(rows_alike.digest)
    # compile(bias=...) selects either kernel ahead of execute()
    assert F16.compile(arch=900, epilogue="gelu", bias="row").kernel_name.endswith(rows_alike.digest)
    assert F16.compile(arch=900, epilogue="gelu", bias=True).kernel_name.endswith(general.digest)


def test_execute_resolves_its_hooks_once_per_plan():
    """execute()'s hook arguments are resolved to a Fusion once (each call's resolving cost more
    host time than the rest of a fused call): the same arguments give the same Fusion, equal to
    make_fusion's; bad ones are refused every time."""
    from blasdx.pipeline import fusion

    for desc in (F16, C32):
        first = fusion(desc, None, "negate", None, None, None, None, True)
        assert fusion(desc, None, "negate", None, None, None, None, True) is first
        assert first == fusion_for(desc, has_bias=True, epilogue="negate")
        assert fusion(desc, None, blasdx.scale(2.0), None, None, None, None, False) == fusion_for(desc, epilogue=blasdx.scale(2.0))
    assert fusion(F16, None, None, None, None, None, None, False) is NO_FUSION
    for _ in range(2):
        with pytest.raises(ArgumentError, match="got 3 of type int"):
            fusion(F16, None, 3, None, None, None, None, False)
        with pytest.raises(ArgumentError, match="complex"):
            fusion(C32, None, "relu", None, None, None, None, False)


@pytest.mark.parametrize("desc", [F16, F32, I8, C32], ids=["f16", "f32", "s8", "c32"])
def test_every_valid_builtin_compiles(desc):
    for name, hook in BUILTINS.items():
        try:
            fusion = fusion_for(desc, a_load=name, c_load=name, c_store=name, has_bias=True)
        except ArgumentError:
            # Only the built-ins that mean nothing here may be refused.
            info = PRECISIONS[desc.precision.c]
            assert (hook.real_only and desc.is_complex) or (hook.float_only and not info.is_float), name
            continue
        compiled = compile_for_arch(desc.plan, 900, fusion)
        assert compiled.kernel_name.endswith(fusion.digest)


def test_scale_and_expressions_compile():
    fusion = fusion_for(F16, a_load=blasdx.scale(0.5), b_load="x * x", c_store="fminf(x, T(6))")
    assert len(compile_for_arch(F16.plan, 900, fusion).cubin) > 1000
    complex_scale = fusion_for(C32, a_load=blasdx.scale(1 - 2j), epilogue="conj")
    assert len(compile_for_arch(C32.plan, 900, complex_scale).cubin) > 1000


@pytest.mark.parametrize("kwargs, match", [
    (dict(epilogue="rleu"), "not a built-in hook.*relu"),
    (dict(epilogue=3), "must be a built-in name"),
    (dict(epilogue=""), "non-empty"),
    (dict(epilogue="x; asm(\"trap;\")"), "contains"),
    (dict(epilogue="{ return x; }"), "contains"),
    (dict(prologue="relu", a_load="negate"), "either prologue= or a_load="),
    (dict(epilogue="relu", c_store="gelu"), "epilogue= is c_store="),
])
def test_bad_hooks_are_argument_errors(kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        fusion_for(F16, **kwargs)


@pytest.mark.parametrize("desc, kwargs, match", [
    (I8, dict(epilogue="gelu"), "needs floating-point values"),
    (I8, dict(epilogue="satfinite"), "needs floating-point values"),
    (I8, dict(a_load=blasdx.scale(0.5)), "not integral"),
    (C32, dict(epilogue="relu"), "defined for real values"),
    (F32, dict(a_load=blasdx.scale(1j)), "is complex"),
])
def test_builtins_that_mean_nothing_for_the_values_are_refused(desc, kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        fusion_for(desc, **kwargs)


def test_scale_rejects_non_numbers():
    with pytest.raises(ArgumentError, match="takes a number"):
        blasdx.scale("2")
    with pytest.raises(ArgumentError, match="finite"):
        blasdx.scale(float("inf"))


def test_an_expression_that_does_not_compile_names_the_expression():
    with pytest.raises(CompileError, match=r"c_store='x \*\* 2' did not compile"):
        compile_for_arch(F16.plan, 900, fusion_for(F16, epilogue="x ** 2"))


def test_a_one_token_typo_reads_in_a_few_lines():
    """The user's hook and NVRTC's error with its source line first; no template chains, no
    warnings; the whole log stays on the exception."""
    with pytest.raises(CompileError) as info:
        F16.compile(arch=900, epilogue="x > 0 ? x : T(0.01) * y")
    text = str(info.value)
    assert len(text.splitlines()) <= 10, text
    first = text.splitlines()[0]
    assert "c_store='x > 0 ? x : T(0.01) * y' did not compile" in first and 'identifier "y" is undefined' in first
    assert "T(0.01) * y);" in text and "instantiation of" not in text and "warning" not in text
    assert "instantiation of" in info.value.log


def test_hook_repr_reads_back():
    assert repr(blasdx.scale(2)) == "blasdx.scale(2.0)"
    assert repr(blasdx.expression("x * 2")) == "blasdx.expression('x * 2')"
    assert eval(repr(blasdx.scale(1 + 2j)), {"blasdx": blasdx}) == blasdx.scale(1 + 2j)
