"""split-K's workspaces kept a (device, stream) without a GPU (CuPy's allocation and memset faked): made and zeroed
once, grown where a launch needs more, each launch's counters ending where every launch's parts start."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest

import blasdx.runtime.launch as launch


@pytest.fixture
def fake(monkeypatch):
    """``made`` holds each allocation's (pointer, bytes), ``zeroed`` each memset's (pointer, bytes, stream)."""
    state = SimpleNamespace(made=[], zeroed=[])

    def empty(nbytes, dtype):
        ptr = 0x10000 * (len(state.made) + 1)
        state.made.append((ptr, nbytes))
        return SimpleNamespace(nbytes=nbytes, data=SimpleNamespace(ptr=ptr))

    cupy = SimpleNamespace(uint8="uint8", empty=empty, cuda=SimpleNamespace(runtime=SimpleNamespace(
        memsetAsync=lambda ptr, value, nbytes, stream: state.zeroed.append((ptr, nbytes, stream)))))
    monkeypatch.setattr(launch, "cupy_module", lambda: cupy)
    monkeypatch.setattr(launch, "stream_of", lambda stream: nullcontext())
    return state


def test_a_workspace_is_made_and_zeroed_once_a_stream_and_reused(fake):
    kept = launch.SplitWorkspaces(least_region=1024)
    array, pointer = kept.get(0, 7, 256, 4000)
    assert fake.made == [(0x10000, 1024 + 4000)] and fake.zeroed == [(0x10000, 1024, 7)]
    assert pointer == 0x10000 + 1024 - 256  # the launch's counters end where the parts start
    again, pointer = kept.get(0, 7, 512, 3000)  # another launch: fewer parts, more counters, the same region
    assert again is array and pointer == 0x10000 + 1024 - 512 and len(fake.made) == len(fake.zeroed) == 1
    kept.get(0, 8, 256, 4000)  # another stream
    kept.get(1, 7, 256, 4000)  # another device
    assert len(fake.made) == 3 and [z[2] for z in fake.zeroed] == [7, 8, 7]


def test_a_workspace_grows_where_a_launch_needs_more_and_keeps_what_it_had(fake):
    kept = launch.SplitWorkspaces(least_region=1024)
    kept.get(0, 7, 256, 4000)
    _, pointer = kept.get(0, 7, 256, 9000)  # more parts
    assert fake.made[-1] == (0x20000, 1024 + 9000) and fake.zeroed[-1] == (0x20000, 1024, 7)
    assert pointer == 0x20000 + 1024 - 256
    _, pointer = kept.get(0, 7, 2048, 100)  # more counters than the region: a larger region, the parts kept as large
    assert fake.made[-1] == (0x30000, 2048 + 9000) and fake.zeroed[-1] == (0x30000, 2048, 7) and pointer == 0x30000
    kept.get(0, 7, 1024, 9000)
    assert len(fake.made) == 3


def test_at_most_limit_streams_keep_a_workspace(fake):
    kept = launch.SplitWorkspaces(limit=2, least_region=1024)
    for stream in (1, 2, 3):
        kept.get(0, stream, 256, 100)
    kept.get(0, 3, 256, 100)
    kept.get(0, 2, 256, 100)
    assert len(fake.made) == 3 and len(kept) == 2  # stream 1's went back to its pool
    kept.get(0, 1, 256, 100)
    assert len(fake.made) == 4


def test_the_per_thread_default_stream_keeps_a_workspace_a_thread(fake):
    """Its one handle is each host thread's own stream, whose kernels may run at once: they must not share one."""
    import threading

    kept = launch.SplitWorkspaces(least_region=1024)
    seen = {}
    both = threading.Barrier(2)  # both threads alive at once (a finished thread's identity may be reused)

    def call(name):
        seen[name] = (kept.get(0, launch.PER_THREAD_STREAM, 256, 100)[0], kept.get(0, 7, 256, 100)[0])
        both.wait()

    threads = [threading.Thread(target=call, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen["one"][0] is not seen["two"][0]  # per-thread streams: a workspace each
    assert seen["one"][1] is seen["two"][1]  # an ordinary stream: one, its launches in order
