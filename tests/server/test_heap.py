"""``server.node.heap``: an aged heap is out of the cyclic collector's walks, and cycles that
were already garbage are collected, not frozen; a tuned allocator reuses large buffers' pages."""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from server.node.heap import ALLOCATOR_ENV, age_heap

REPO = Path(__file__).resolve().parents[2]


class _Cell:
    pass


def test_aging_freezes_what_is_tracked_and_collects_young_cycles_first() -> None:
    gc.unfreeze()
    try:
        kept = [[n] for n in range(1000)]  # lists are tracked by the collector
        garbage = _Cell()
        garbage.self = garbage  # type: ignore[attr-defined]  # a cycle, unreachable once deleted
        gone = weakref.ref(garbage)
        del garbage
        age_heap()
        assert gone() is None
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()


_FAULTS = """
import importlib.util, resource, sys
spec = importlib.util.spec_from_file_location("heap", "server/node/heap.py")  # not the package's imports
heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(heap)
tuned = heap.tune_allocator() if sys.argv[1] == "tune" else None
source = bytes(8 * 1024 * 1024)
held = bytes(bytearray(source))  # one round first: the heap grows once
del held
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):  # a Fetch response's round: received, framed, cut
    buffer = bytearray(source)
    frame = bytes(memoryview(buffer)[4:])
    del buffer
    cut = frame[:-100]
    del frame, cut
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k not in (*ALLOCATOR_ENV, "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", _FAULTS, mode], cwd=REPO, env={**clean, **env},
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_tuned_allocator_reuses_the_pages_of_large_buffers() -> None:
    """Twenty rounds of three 8 MiB buffers: untuned, glibc maps fresh pages for each (2,048
    faults per buffer); tuned, the heap's pages serve them all. An operator's MALLOC_*
    variable or glibc.malloc tunable leaves the allocator alone."""
    untouched, untuned = _faults("plain")
    took, tuned = _faults("tune")
    assert untouched == "None" and took == "True"
    assert untuned > 20 * 2048, untuned
    assert tuned < 2048, tuned
    refused, _ = _faults("tune", MALLOC_TRIM_THRESHOLD_="131072")
    assert refused == "False"
    refused, faults = _faults("tune", GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")
    assert refused == "False" and faults > 20 * 2048
