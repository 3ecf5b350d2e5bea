"""Shared fixtures: a private cache directory per test session, and GPU detection."""

from __future__ import annotations

import functools

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Keep compiled kernels of the test run away from the user's cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BLASDX_CACHE_DIR", str(tmp_path_factory.mktemp("blasdx-cache")))
    yield
    mp.undo()


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure means: no usable GPU
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine (gpu tests run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
