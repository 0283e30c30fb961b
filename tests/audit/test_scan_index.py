"""``tools.audit.scan.index_entry_position``: the binary search over a segment's ``.index`` slots
finds the entry the decoded list does (``storage.index.read_offset_index``, then the last entry
at or below the offset), on indexes in offset order with their pre-sized zero tail."""

from __future__ import annotations

from bisect import bisect_right

from hypothesis import given
from hypothesis import strategies as st

from storage.index import OFFSET_ENTRY, read_offset_index
from tools.audit.scan import index_entry_position

BASE = 1_000


def _model(data: bytes, offset: int) -> int | None:
    entries = read_offset_index(data, BASE)
    i = bisect_right([o for o, _ in entries], offset) - 1
    return entries[i][1] if i >= 0 else None


@st.composite
def _indexes(draw: st.DrawFn) -> bytes:
    """Entries with increasing relative offsets (the first may be 0) and positions, then zero
    slots as a pre-sized index has."""
    steps = draw(st.lists(st.integers(1, 50), max_size=40))
    first = draw(st.integers(0, 5))
    relatives = [first]
    for step in steps:
        relatives.append(relatives[-1] + step)
    positions = sorted(draw(st.lists(st.integers(0, 1 << 30), min_size=len(relatives), max_size=len(relatives))))
    if draw(st.booleans()):
        relatives, positions = [], []  # an index with nothing written
    tail = draw(st.integers(0, 20))
    slots = [*zip(relatives, positions, strict=True), *[(0, 0)] * tail]
    return b"".join(OFFSET_ENTRY.pack(r, p) for r, p in slots)


@given(_indexes(), st.integers(BASE - 5, BASE + 2_100))
def test_binary_search_finds_the_entry_the_decoded_index_gives(data: bytes, offset: int) -> None:
    assert index_entry_position(data, BASE, offset) == _model(data, offset)


def test_an_index_of_partial_slots_gives_nothing() -> None:
    data = OFFSET_ENTRY.pack(0, 0) + OFFSET_ENTRY.pack(5, 4096) + b"\x00"
    assert index_entry_position(data, BASE, BASE + 10) is None
    assert index_entry_position(data[:-1], BASE, BASE + 10) == 4096
    assert index_entry_position(data[:-1], BASE, BASE + 4) == 0
    assert index_entry_position(data[:-1], BASE, BASE - 1) is None
