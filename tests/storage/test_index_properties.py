"""Model-based tests of the offset and time indexes (``OffsetIndex`` / ``TimeIndex``).

A sorted list is the model of each index. After every append, truncation, reset and close,
the index must agree with it: lookups are floor lookups (the entry with the largest key <= the
target, else ``(base_offset, 0)`` / ``(-1, base_offset)``), appends out of order are refused,
``is_full`` follows the file's whole entries (one early for the time index, whose last slot is
kept for the roll), and the file itself holds exactly the model's entries, relative to the base
offset, followed by zeros.
"""

from __future__ import annotations

import shutil
import tempfile
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from storage.errors import StorageError
from storage.index import (
    NO_TIMESTAMP,
    OFFSET_ENTRY,
    TIME_ENTRY,
    InvalidOffsetError,
    OffsetIndex,
    TimeIndex,
    read_offset_index,
    read_time_index,
)
from tests.properties import examples


def floor(entries: list[tuple[int, int]], key: int) -> tuple[int, int] | None:
    keys = [k for k, _ in entries]
    slot = bisect_right(keys, key) - 1
    return entries[slot] if slot >= 0 else None


class IndexMachine(RuleBasedStateMachine):
    """One offset index and one time index of a segment, driven as LogSegment drives them."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="kwire-index-model-"))
        self.base = 0
        self.max_size = 0
        self.offsets: list[tuple[int, int]] = []  # (offset, position)
        self.times: list[tuple[int, int]] = []  # (timestamp, offset)
        self.oi: OffsetIndex | None = None
        self.ti: TimeIndex | None = None

    def teardown(self) -> None:
        for index in (self.oi, self.ti):
            if index is not None:
                index.close_handler()
        shutil.rmtree(self.root, ignore_errors=True)

    @initialize(base=st.integers(0, 2**40), entries=st.integers(1, 8), spare=st.integers(0, 11))
    def open(self, base: int, entries: int, spare: int) -> None:
        self.base = base
        # a few whole entries of either kind (8 and 12 bytes), plus bytes rounded away
        self.max_size = entries * 12 + spare
        self.oi = OffsetIndex(self.root / "x.index", base, self.max_size)
        self.ti = TimeIndex(self.root / "x.timeindex", base, self.max_size)
        self.oi.open_empty()
        self.ti.open_empty()

    # -- offset index

    @rule(step=st.integers(1, 2**20), gap=st.integers(0, 5000))
    def append_offset(self, step: int, gap: int) -> None:
        assert self.oi is not None
        last_off, last_pos = self.offsets[-1] if self.offsets else (self.base - 1, -1)
        offset = max(self.base, last_off + step)
        position = last_pos + 1 + gap
        if not self.oi.can_append_offset(offset):
            with pytest.raises(InvalidOffsetError):
                self.oi.append(offset, position)
        elif self.oi.is_full():
            assert len(self.offsets) == self.max_size // OFFSET_ENTRY.size
            with pytest.raises(StorageError):
                self.oi.append(offset, position)
        else:
            self.oi.append(offset, position)
            self.offsets.append((offset, position))

    @precondition(lambda self: self.offsets and not self.oi.is_full())
    @rule(back=st.integers(0, 3))
    def append_offset_not_larger_is_refused(self, back: int) -> None:
        assert self.oi is not None
        last_off, last_pos = self.offsets[-1]
        with pytest.raises(InvalidOffsetError):
            self.oi.append(last_off - back, last_pos + 100)

    # -- time index

    @rule(dt=st.integers(0, 3), doff=st.integers(0, 2**20))
    def maybe_append_time(self, dt: int, doff: int) -> None:
        assert self.ti is not None
        last_ts, last_off = self.times[-1] if self.times else (NO_TIMESTAMP, self.base)
        ts = max(0, last_ts + dt)
        offset = last_off + doff
        if not self.ti.can_append_offset(offset):
            return
        if self.ti.is_full():
            assert len(self.times) >= self.max_size // TIME_ENTRY.size - 1
            with pytest.raises(StorageError):
                self.ti.maybe_append(ts, offset)
            return
        self.ti.maybe_append(ts, offset)
        if ts > last_ts:  # an entry only for a larger timestamp
            self.times.append((ts, offset))

    @precondition(lambda self: len(self.times) > 0 and not self.ti.is_full())
    @rule(back=st.integers(1, 5))
    def smaller_timestamp_or_offset_is_refused(self, back: int) -> None:
        assert self.ti is not None
        ts, offset = self.times[-1]
        with pytest.raises(StorageError):
            self.ti.maybe_append(ts - back, offset + 1)
        with pytest.raises(InvalidOffsetError):
            self.ti.maybe_append(ts + 1, offset - back)

    @precondition(lambda self: self.ti.is_full())
    @rule()
    def roll_entry_uses_the_reserved_slot(self) -> None:
        # LogSegment.onBecomeInactiveSegment writes the last entry with skipFullCheck
        assert self.ti is not None
        ts, offset = self.times[-1] if self.times else (NO_TIMESTAMP, self.base)
        self.ti.maybe_append(ts + 1, offset, skip_full_check=True)
        self.times.append((ts + 1, offset))

    # -- both

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        assert self.oi is not None and self.ti is not None
        known = [o for o, _ in self.offsets] + [o for _, o in self.times]
        candidates = st.integers(self.base, self.base + 2**21)
        if known:
            candidates = candidates | st.sampled_from(known) | st.sampled_from(known).map(lambda o: o + 1)
        offset = data.draw(candidates)
        self.oi.truncate_to(offset)
        self.ti.truncate_to(offset)
        self.offsets = [e for e in self.offsets if e[0] < offset]
        self.times = [e for e in self.times if e[1] < offset]

    @rule()
    def reset(self) -> None:
        assert self.oi is not None and self.ti is not None
        self.oi.reset()
        self.ti.reset()
        self.offsets.clear()
        self.times.clear()

    @rule(base=st.integers(0, 2**40), entries=st.integers(1, 8), spare=st.integers(0, 11))
    def close_reread_and_open_another(self, base: int, entries: int, spare: int) -> None:
        assert self.oi is not None and self.ti is not None
        self.oi.close()
        self.ti.close()
        # closing trims each file to exactly its entries
        assert self.oi.path.stat().st_size == OFFSET_ENTRY.size * len(self.offsets)
        assert self.ti.path.stat().st_size == TIME_ENTRY.size * len(self.times)
        assert read_offset_index(self.oi.path.read_bytes(), self.base) == self.offsets
        # a time entry at the base offset after slot 0 reads as the end of the entries (the
        # rule DumpLogSegments uses for pre-sized files); every other entry is read back
        cut = next((i for i, e in enumerate(self.times) if i > 0 and e[1] == self.base), len(self.times))
        assert read_time_index(self.ti.path.read_bytes(), self.base) == self.times[:cut]
        self.offsets.clear()
        self.times.clear()
        self.open(base, entries, spare)

    # -- invariants

    @invariant()
    def offset_lookups_are_floor_lookups(self) -> None:
        if self.oi is None:
            return
        assert self.oi.entry_list() == self.offsets
        assert self.oi.last_offset == (self.offsets[-1][0] if self.offsets else self.base)
        probes = {self.base - 1, self.base, self.base + 2**22}
        for offset, _ in self.offsets:
            probes |= {offset - 1, offset, offset + 1}
        for probe in probes:
            assert self.oi.lookup(probe) == (floor(self.offsets, probe) or (self.base, 0))
        for _, position in self.offsets:
            for p in (position - 1, position, position + 1):
                want = floor(sorted((pos, pos) for _, pos in self.offsets), p)
                assert self.oi.floor_position(p) == (want[0] if want else 0)

    @invariant()
    def time_lookups_are_floor_lookups(self) -> None:
        if self.ti is None:
            return
        assert self.ti.entry_list() == self.times
        assert self.ti.last_entry == (self.times[-1] if self.times else (NO_TIMESTAMP, self.base))
        probes = {-1, 0, 2**40}
        for ts, _ in self.times:
            probes |= {ts - 1, ts, ts + 1}
        for probe in probes:
            assert self.ti.lookup(probe) == (floor(self.times, probe) or (NO_TIMESTAMP, self.base))

    @invariant()
    def full_means_no_whole_slot_left(self) -> None:
        if self.oi is None or self.ti is None:
            return
        assert self.oi.file_length in (self.max_size // 8 * 8, 8 * len(self.offsets))
        assert self.oi.is_full() == (len(self.offsets) >= self.oi.file_length // 8)
        # the time index keeps its last slot for the entry written at the roll
        assert self.ti.is_full() == (len(self.times) >= self.ti.file_length // 12 - 1)

    @invariant()
    def files_hold_the_entries(self) -> None:
        if self.oi is None or self.ti is None:
            return
        raw = self.oi.path.read_bytes()
        assert len(raw) == self.oi.file_length
        n = len(self.offsets)
        assert raw[: 8 * n] == b"".join(OFFSET_ENTRY.pack(o - self.base, p) for o, p in self.offsets)
        assert raw[8 * n :] == bytes(len(raw) - 8 * n)  # unwritten slots read as zeros
        raw = self.ti.path.read_bytes()
        n = len(self.times)
        assert raw[: 12 * n] == b"".join(TIME_ENTRY.pack(t, o - self.base) for t, o in self.times)
        assert raw[12 * n :] == bytes(len(raw) - 12 * n)


TestIndexModel = IndexMachine.TestCase
TestIndexModel.settings = settings(
    max_examples=examples(80), stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@settings(deadline=None, max_examples=examples(60))
@given(
    base=st.integers(0, 2**40),
    entries=st.lists(st.tuples(st.integers(1, 1000), st.integers(0, 2**31 - 1)), max_size=20),
    trailing=st.integers(0, 5),
)
def test_reading_index_bytes_stops_at_the_first_unwritten_slot(
    base: int, entries: list[tuple[int, int]], trailing: int
) -> None:
    # relative offsets strictly increase, so only slot 0 may hold relative offset 0
    rel, pairs = 0, []
    for step, position in entries:
        rel += step
        pairs.append((base + rel, position))
    raw = b"".join(OFFSET_ENTRY.pack(o - base, p) for o, p in pairs) + bytes(8 * trailing)
    assert read_offset_index(raw, base) == pairs + ([(base, 0)] if not pairs and trailing else [])
    timed = b"".join(TIME_ENTRY.pack(p, o - base) for o, p in pairs) + bytes(12 * trailing)
    assert read_time_index(timed, base) == [(p, o) for o, p in pairs] + (
        [(0, base)] if not pairs and trailing else [])
