"""Settings read from the environment when used (never frozen at import).

- ``BLASDX_CACHE_DIR``: where compiled kernels are kept on disk
  (default: ``$XDG_CACHE_HOME/blasdx``, else ``~/.cache/blasdx``).
- ``BLASDX_DISABLE_DISK_CACHE=1``: keep compiled kernels in memory only.
- ``BLASDX_TEMPLATES_DIR``: render from another templates directory (default: unset).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("BLASDX_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "blasdx"


def disk_cache_enabled() -> bool:
    return os.environ.get("BLASDX_DISABLE_DISK_CACHE", "").strip().lower() not in ("1", "true", "yes", "on")


def templates_dir() -> Path | None:
    """``BLASDX_TEMPLATES_DIR``: render from these templates instead of the installed ones
    (for comparing template versions in one run; default: unset)."""
    explicit = os.environ.get("BLASDX_TEMPLATES_DIR")
    return Path(explicit) if explicit else None
