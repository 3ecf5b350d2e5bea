"""C++ identifiers: the one test of a name that generated code or a user's kernel declares."""

from __future__ import annotations

import re
from typing import TypeGuard

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# C++20's keywords and alternative tokens, and CUDA's own words a name cannot take.
CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while xor xor_eq __global__ __device__ __host__ __shared__ __constant__ __managed__ __restrict__
""".split())


def is_identifier(name: object) -> TypeGuard[str]:
    """Whether ``name`` is spelled as a C++ identifier (it may still be a keyword)."""
    return isinstance(name, str) and IDENTIFIER.fullmatch(name) is not None


def is_declarable(name: object) -> bool:
    """Whether code may declare ``name``: an identifier, not a keyword, not reserved to the
    implementation (``__`` anywhere, or ``_`` and a capital first)."""
    return (is_identifier(name) and name not in CPP_KEYWORDS and "__" not in name
            and not re.match(r"_[A-Z]", name))
