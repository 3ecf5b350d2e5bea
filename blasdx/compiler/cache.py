"""The kernel cache: in memory (per process, thread-safe), then on disk.

An entry is a compiled cubin plus its metadata (kernel name, launch data). On disk each
entry is one file ``<key>.cubin`` holding a magic and format version, the SHA-256 of
the payload, and the payload (metadata JSON + cubin). Files are written to a temporary
name and renamed, so a reader sees a whole entry or none; an entry whose magic, checksum
or metadata does not verify is treated as missing and rewritten, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import settings

logger = logging.getLogger("blasdx.cache")

MAGIC = b"BLASDXC\x00"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sI32sI")  # magic, format, sha256(payload), metadata length


@dataclass(frozen=True)
class Entry:
    cubin: bytes
    metadata: dict


def make_key(**fields: object) -> str:
    """SHA-256 over every field (sorted by name), as hex."""
    blob = json.dumps(fields, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def encode(entry: Entry) -> bytes:
    meta = json.dumps(entry.metadata, sort_keys=True).encode()
    payload = meta + entry.cubin
    return _HEADER.pack(MAGIC, FORMAT_VERSION, hashlib.sha256(payload).digest(), len(meta)) + payload


def decode(blob: bytes) -> Entry | None:
    """The entry in ``blob``, or None if it is truncated, corrupt or of another format."""
    if len(blob) < _HEADER.size:
        return None
    magic, version, digest, meta_len = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or version != FORMAT_VERSION or meta_len > len(payload):
        return None
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        metadata = json.loads(payload[:meta_len])
    except ValueError:
        return None
    return Entry(cubin=payload[meta_len:], metadata=metadata)


class KernelCache:
    """Memory, then disk. ``get_or_create(key, build)`` runs ``build`` once per key."""

    def __init__(self, directory: Path | None = None, use_disk: bool | None = None) -> None:
        self._directory = directory
        self._use_disk = use_disk
        self._memory: dict[str, Entry] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._builds = 0

    @property
    def builds(self) -> int:
        """Entries this cache has built (neither in memory nor on disk): a compile that leaves
        the count unchanged was a cache hit (read-only; ``python -m blasdx demo`` says which)."""
        return self._builds

    @property
    def directory(self) -> Path:
        return self._directory if self._directory is not None else settings.cache_dir()

    @property
    def use_disk(self) -> bool:
        return self._use_disk if self._use_disk is not None else settings.disk_cache_enabled()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.cubin"

    @property
    def memory_entries(self) -> int:
        return len(self._memory)

    def clear_memory(self) -> None:
        with self._guard:
            self._memory.clear()

    def get_or_create(self, key: str, build: Callable[[], Entry]) -> Entry:
        entry = self._memory.get(key)
        if entry is not None:
            return entry
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            entry = self._memory.get(key)
            if entry is not None:
                return entry
            start = time.perf_counter()
            entry = self._load(key) if self.use_disk else None
            if entry is not None:
                logger.debug("disk hit %s in %.1f ms", key[:16], 1e3 * (time.perf_counter() - start))
            else:
                entry = build()
                with self._guard:
                    self._builds += 1
                logger.debug("miss %s: built in %.1f ms", key[:16], 1e3 * (time.perf_counter() - start))
                if self.use_disk:
                    self._store(key, entry)
            self._memory[key] = entry
            return entry

    def _load(self, key: str) -> Entry | None:
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        entry = decode(blob)
        if entry is None or entry.metadata.get("key") != key:
            logger.warning("ignoring corrupt cache entry %s; it will be rebuilt", path)
            return None
        return entry

    def _store(self, key: str, entry: Entry) -> None:
        directory = self.directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=directory)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode(entry))
                os.replace(tmp, self.path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:  # a read-only or full disk must not break compiling
            logger.warning("could not write cache entry in %s: %s", directory, exc)


DEFAULT_CACHE = KernelCache()
