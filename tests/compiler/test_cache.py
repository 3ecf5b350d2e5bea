"""The kernel cache: round trip, bad entries, key sensitivity, processes and threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from blasdx import compiler
from blasdx.compiler import nvrtc
from blasdx.compiler.cache import Entry, KernelCache, decode, encode, make_key

pytestmark = pytest.mark.compile

SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'
ROOT = Path(__file__).resolve().parents[2]


def test_encode_decode_round_trip():
    entry = Entry(cubin=b"\x7fELF...", metadata={"key": "abc", "kernel_name": "k"})
    assert decode(encode(entry)) == entry


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_damaged_blobs_do_not_decode(damage):
    blob = bytearray(encode(Entry(cubin=b"x" * 100, metadata={"key": "abc"})))
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "flip":
        blob[-1] ^= 0xFF
    elif damage == "magic":
        blob[0] ^= 0xFF
    else:
        blob = bytearray()
    assert decode(bytes(blob)) is None


def _counting_build(calls):
    def build():
        calls.append(1)
        return Entry(cubin=b"cubin", metadata={"key": KEY})
    return build


KEY = make_key(source="s", arch=900)


def test_memory_then_disk_round_trip(tmp_path):
    calls = []
    cache = KernelCache(tmp_path, use_disk=True)
    first = cache.get_or_create(KEY, _counting_build(calls))
    assert cache.get_or_create(KEY, _counting_build(calls)) is first  # memory hit
    fresh = KernelCache(tmp_path, use_disk=True)
    assert fresh.get_or_create(KEY, _counting_build(calls)) == first  # disk hit
    assert len(calls) == 1
    assert cache.path(KEY).is_file()


def test_builds_counts_misses_not_memory_or_disk_hits(tmp_path):
    """What `python -m blasdx demo` reads to say whether its compile was a cache hit."""
    calls = []
    cache = KernelCache(tmp_path, use_disk=True)
    assert cache.builds == 0
    cache.get_or_create(KEY, _counting_build(calls))
    cache.get_or_create(KEY, _counting_build(calls))  # memory hit
    assert cache.builds == 1
    fresh = KernelCache(tmp_path, use_disk=True)
    fresh.get_or_create(KEY, _counting_build(calls))  # disk hit
    assert fresh.builds == 0
    fresh.get_or_create(make_key(source="other", arch=900), _counting_build(calls))
    assert fresh.builds == 1 and len(calls) == 2


@pytest.mark.parametrize("damage", ["missing", "truncated", "corrupted", "other key"])
def test_bad_disk_entries_are_rebuilt_never_loaded(tmp_path, damage):
    cache = KernelCache(tmp_path, use_disk=True)
    cache.get_or_create(KEY, _counting_build([]))
    path = cache.path(KEY)
    blob = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(blob[:-3])
    elif damage == "corrupted":
        path.write_bytes(blob[:-5] + b"XXXXX")
    else:
        path.write_bytes(encode(Entry(cubin=b"evil", metadata={"key": "another"})))
    calls = []
    entry = KernelCache(tmp_path, use_disk=True).get_or_create(KEY, _counting_build(calls))
    assert calls == [1] and entry.cubin == b"cubin"
    assert decode(path.read_bytes()).cubin == b"cubin"  # rewritten whole


def test_disabled_disk_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BLASDX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("BLASDX_DISABLE_DISK_CACHE", "1")
    KernelCache().get_or_create(KEY, _counting_build([]))
    assert list(tmp_path.iterdir()) == []


def test_settings_are_read_when_used(tmp_path, monkeypatch):
    cache = KernelCache()
    monkeypatch.setenv("BLASDX_CACHE_DIR", str(tmp_path / "x"))
    assert cache.directory == tmp_path / "x"


def test_threads_racing_one_key_build_once(tmp_path):
    calls = []
    cache = KernelCache(tmp_path, use_disk=True)
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        cache.get_or_create(KEY, _counting_build(calls))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1


BASE_KEY = dict(source=SOURCE, options=("-arch=sm_90",), arch=900, nvrtc=(13, 0), headers=("h",), blasdx="0.1.0")


@pytest.mark.parametrize("field,value", [
    ("source", SOURCE + " "), ("options", ("-arch=sm_90", "-G")), ("arch", 890), ("nvrtc", (13, 1)),
    ("headers", ("h2",)), ("blasdx", "0.1.1"),
])
def test_every_key_field_changes_the_key(field, value):
    assert make_key(**{**BASE_KEY, field: value}) != make_key(**BASE_KEY)


def test_compile_source_hits_memory_without_nvrtc(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path, use_disk=True)
    first = compiler.compile_source(SOURCE, 900, name="k", cache=cache)

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("NVRTC must not run on a cache hit")

    monkeypatch.setattr(nvrtc, "nvrtc_compile", no_nvrtc)
    assert compiler.compile_source(SOURCE, 900, name="k", cache=cache) is first
    assert compiler.compile_source(SOURCE, 900, name="k", cache=KernelCache(tmp_path, use_disk=True)) == first


_CHILD = """
import sys, blasdx, blasdx.codegen.render
from blasdx.compiler import nvrtc
if sys.argv[1] == "forbid":  # a hit needs neither NVRTC's compiler, nor a render, nor CuPy
    def no_nvrtc(*a, **k):
        raise SystemExit("NVRTC was called")
    def no_render(*a, **k):
        raise SystemExit("the kernel was rendered")
    nvrtc.nvrtc_compile = no_nvrtc
    blasdx.codegen.render.render_kernel = no_render
d = blasdx.Size(16, 16, 16) + blasdx.Precision("float16", "float16", "float32") + blasdx.SM(900) + blasdx.Block()
print(len(d.compile(arch=900).cubin))
if sys.argv[1] == "forbid" and "cupy" in sys.modules:
    raise SystemExit("CuPy was imported")
"""


def _child(mode, cache_dir):
    env = {**os.environ, "BLASDX_CACHE_DIR": str(cache_dir), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("BLASDX_DISABLE_DISK_CACHE", None)
    return subprocess.Popen([sys.executable, "-c", _CHILD, mode], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_racing_one_key_then_a_third_hits_without_nvrtc(tmp_path):
    racers = [_child("compile", tmp_path), _child("compile", tmp_path)]
    outs = [p.communicate(timeout=120) for p in racers]
    assert all(p.returncode == 0 for p in racers), outs
    assert outs[0][0] == outs[1][0]
    entries = [p for p in tmp_path.iterdir() if p.suffix == ".cubin"]
    assert len(entries) == 1 and not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    third = _child("forbid", tmp_path)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0, err
    assert out == outs[0][0]


def test_kernel_identity_follows_templates_plans_and_hooks(tmp_path, monkeypatch):
    """The cache finds a batched kernel by an identity instead of its source; the identity
    must change with anything that changes the source."""
    import shutil

    import blasdx
    from blasdx.codegen import render
    from blasdx.plan import kernel_plan

    desc = blasdx.Size(16, 16, 16) + blasdx.Precision("float32") + blasdx.SM(900) + blasdx.Block()
    kernel = kernel_plan(desc.plan)
    base = render.kernel_identity(kernel, "k")
    copy = tmp_path / "templates"
    shutil.copytree(render.templates_dir(), copy)
    monkeypatch.setenv("BLASDX_TEMPLATES_DIR", str(copy))
    assert render.kernel_identity(kernel, "k") == base  # the same bytes elsewhere
    changed = tmp_path / "changed"
    shutil.copytree(copy, changed)
    (changed / "gemm.cuh.j2").write_text((changed / "gemm.cuh.j2").read_text() + "// changed\n")
    monkeypatch.setenv("BLASDX_TEMPLATES_DIR", str(changed))
    assert render.kernel_identity(kernel, "k") != base
    monkeypatch.delenv("BLASDX_TEMPLATES_DIR")
    other = kernel_plan((desc + blasdx.BlockDim(64)).plan)
    relu = blasdx.pipeline.fusion(desc, None, "relu", None, None, None, None, False)
    assert len({base, render.kernel_identity(other, "k"), render.kernel_identity(kernel, "k", relu)}) == 3
