"""``server.node.heap``: an aged heap is out of the cyclic collector's walks, and cycles that
were already garbage are collected, not frozen."""

from __future__ import annotations

import gc
import weakref

from server.node.heap import age_heap


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
