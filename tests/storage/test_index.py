"""Offset and time index files: sizes, entry rules, truncation, trimming."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.errors import StorageError
from storage.index import (
    InvalidOffsetError,
    OffsetIndex,
    TimeIndex,
    read_offset_index,
    read_time_index,
)


def test_offset_index_presize_append_lookup_trim(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    index.open_empty()
    assert os.path.getsize(index.path) == 10485760  # roundDown(10 MiB, 8), sparse
    index.append(105, 0)
    index.append(120, 4200)
    index.append(150, 9000)
    with pytest.raises(InvalidOffsetError):
        index.append(150, 9999)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(119) == (105, 0)
    assert index.lookup(120) == (120, 4200)
    assert index.lookup(10**9) == (150, 9000)
    raw = index.path.read_bytes()[:24]
    assert raw.hex() == "00000005" "00000000" "00000014" "00001068" "00000032" "00002328"
    index.truncate_to(120)
    assert index.entry_list() == [(105, 0)]
    assert index.path.read_bytes()[8:24] == bytes(16)  # removed slots read as zeros again
    index.close()
    assert index.path.read_bytes().hex() == "0000000500000000"
    assert read_offset_index(index.path.read_bytes(), 100) == [(105, 0)]


def test_offset_index_relative_offset_overflow(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0)
    index.open_empty()
    assert not index.can_append_offset(2**31)
    with pytest.raises(InvalidOffsetError):
        index.append(2**31, 0)
    index.close()


def test_time_index_rules(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0)
    index.open_empty()
    assert os.path.getsize(index.path) == 10485756  # roundDown(10 MiB, 12)
    assert index.last_entry == (-1, 0)
    index.maybe_append(1000, 5)
    index.maybe_append(1000, 5)  # the same entry again: skipped
    index.maybe_append(1000, 9)  # not a larger timestamp: skipped
    assert index.entry_list() == [(1000, 5)]
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(2000, 4)
    with pytest.raises(StorageError):
        index.maybe_append(999, 10)
    index.maybe_append(2000, 12)
    assert index.lookup(1500) == (1000, 5) and index.lookup(5) == (-1, 0)
    index.truncate_to(12)
    assert index.entry_list() == [(1000, 5)]
    index.close()
    assert index.path.read_bytes().hex() == "00000000000003e8" "00000005"
    assert read_time_index(index.path.read_bytes(), 0) == [(1000, 5)]


def test_time_index_keeps_last_slot_for_roll(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t.timeindex", 0, max_index_size=36)  # three slots
    index.open_empty()
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full()
    with pytest.raises(StorageError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()
    assert os.path.getsize(index.path) == 36


def test_readers_stop_at_unwritten_slots() -> None:
    # A crash leaves the pre-sized tail of zeros; DumpLogSegments stops at the first slot after
    # the first that holds relative offset 0.
    data = bytes.fromhex("00000003" "00000000" "00000009" "00001000") + bytes(64)
    assert read_offset_index(data, 10) == [(13, 0), (19, 4096)]
    tdata = bytes.fromhex("0000000000000064" "00000000") + bytes(36)
    assert read_time_index(tdata, 10) == [(100, 10)]
