"""The one error hierarchy of blasdx.

Every mistake a user can make raises one of these, with a message that names the
operator or argument, the value received, the rule, and a fix.
"""

from __future__ import annotations

import re

# How to get CuPy, NVRTC and the CUDA headers: the install extras (pyproject.toml).
INSTALL_HINT = "pip install 'blasdx[cu13]' (CUDA 13, driver 580+) or 'blasdx[cu12]' (CUDA 12, driver 525+)"


class BlasdxError(Exception):
    """Base class of every error blasdx raises on purpose."""


class DescriptorError(BlasdxError, ValueError):
    """An operator or a combination of operators is invalid."""


class IncompleteDescriptorError(DescriptorError):
    """A trait or an action needs an operator the descriptor does not have."""


class CompositionError(DescriptorError, TypeError):
    """Something that is not an operator or a descriptor was added to one (``GEMM + 5``)."""


class UnsupportedError(DescriptorError):
    """A valid description that cannot run here (shared memory, NVRTC arch)."""


class ArgumentError(BlasdxError, ValueError):
    """An argument of ``execute`` does not match the descriptor."""


class DeviceError(BlasdxError, RuntimeError):
    """No usable GPU, or a GPU too old for the descriptor."""


class CompileError(BlasdxError, RuntimeError):
    """NVRTC rejected a source; keeps the log, the options and the numbered source."""

    def __init__(self, message: str, *, log: str = "", source: str = "",
                 options: tuple[str, ...] = (), kernel_name: str = "") -> None:
        super().__init__(message)
        self.log = log
        self.source = source
        self.options = tuple(options)
        self.kernel_name = kernel_name

    def numbered_source(self) -> str:
        """The source with line numbers, as NVRTC's log refers to them."""
        lines = self.source.splitlines()
        width = len(str(len(lines)))
        return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))

    def __str__(self) -> str:
        text = super().__str__()
        if self.log:
            errors = condensed_log(self.log)
            text += (f"\nDetails: kernel {self.kernel_name!r}; NVRTC's errors (all of its log is in .log, the "
                     f"numbered source in .numbered_source()):\n" + "\n".join(errors))
        return text


def condensed_log(log: str, limit: int = 8) -> list[str]:
    """NVRTC's error lines (and ptxas's, "ptxas fatal : ..."), each followed by the source line
    and caret NVRTC prints, at most ``limit`` lines: no warnings and no template instantiation
    chains."""
    lines = log.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if len(out) >= limit:
            break
        if line[:1].isspace() or not re.search(r"\berror:|^ptxas (fatal|error)", line):
            continue
        out.append(line.strip())
        for follow in lines[i + 1:i + 3]:  # NVRTC indents the source line and the caret under it
            if follow[:1].isspace() and follow.strip() and not follow.strip().startswith("detected during"):
                out.append(follow.rstrip())
    return out[:limit]
