"""The in-memory RaftLog fake has its own tests (as Kafka's MockLogTest): epoch lookups, crash
semantics, flush tokens, high-watermark and truncation guards, snapshots."""

from __future__ import annotations

import pytest

from server.raft.control import build_data_batch
from server.raft.log import LogInvariantError, MemoryRaftLog
from server.raft.types import OffsetAndEpoch
from tests.raft.helpers import append_batches


def _log(epochs: list[int]) -> MemoryRaftLog:
    log = MemoryRaftLog()
    append_batches(log, epochs)
    return log


def test_end_offset_for_epoch() -> None:
    log = _log([1, 1, 3, 3, 5])  # epoch 1: [0, 2), 3: [2, 4), 5: [4, 5)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(5, 5)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 3)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(4, 3)  # largest epoch <= 4
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # below every epoch
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(5, 5)  # above every epoch
    assert log.last_fetched_epoch == 5


def test_read_returns_whole_batches_and_at_least_one() -> None:
    log = _log([1, 1, 1])
    one = log.read(0, 1)
    assert len(one) == len(log.batches[0].data)
    assert log.read(1, 1 << 20) == log.batches[1].data + log.batches[2].data
    assert log.read(3, 1 << 20) == b""


def test_crash_loses_only_unflushed_batches() -> None:
    log = _log([1, 1])
    log.append(build_data_batch([b"x"], base_offset=2, epoch=2, timestamp_ms=0))  # not flushed
    assert (log.log_end_offset, log.flushed_offset) == (3, 2)
    log.update_high_watermark(2)
    log.crash()
    assert (log.log_end_offset, log.flushed_offset, log.high_watermark) == (2, 2, 0)
    assert log.last_fetched_epoch == 1


def test_a_flush_overtaken_by_a_truncation_is_void() -> None:
    log = _log([1])
    log.append(build_data_batch([b"a"], base_offset=1, epoch=1, timestamp_ms=0))
    token = log.begin_flush()
    log.truncate_to(1)
    log.append(build_data_batch([b"b"], base_offset=1, epoch=2, timestamp_ms=0))
    log.complete_flush(token)
    assert log.flushed_offset == 1  # offset 1 now holds other, unflushed data
    log.complete_flush(log.begin_flush())
    assert log.flushed_offset == 2


def test_guards() -> None:
    log = _log([1, 1, 2])
    log.update_high_watermark(2)
    with pytest.raises(LogInvariantError):
        log.truncate_to(1)
    with pytest.raises(LogInvariantError):
        log.update_high_watermark(1)
    with pytest.raises(LogInvariantError):
        log.update_high_watermark(4)
    with pytest.raises(LogInvariantError):
        log.append(build_data_batch([b"x"], base_offset=7, epoch=2, timestamp_ms=0))
    with pytest.raises(LogInvariantError):
        log.append(build_data_batch([b"x"], base_offset=3, epoch=1, timestamp_ms=0))
    with pytest.raises(LogInvariantError):
        log.create_snapshot(OffsetAndEpoch(3, 2), b"s")


def test_snapshots_move_the_log_start() -> None:
    log = _log([1, 1, 2, 2])
    log.update_high_watermark(3)
    log.create_snapshot(OffsetAndEpoch(2, 1), b"snap")
    assert log.latest_snapshot_id() == OffsetAndEpoch(2, 1)
    assert log.snapshot_size(OffsetAndEpoch(2, 1)) == 4
    assert log.read_snapshot(OffsetAndEpoch(2, 1), 1, 2) == b"na"
    log.delete_before_snapshot()
    assert log.log_start_offset == 2 and log.log_end_offset == 4
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    log.install_snapshot(OffsetAndEpoch(9, 4), b"other")
    assert (log.log_start_offset, log.log_end_offset, log.last_fetched_epoch) == (9, 9, 4)
    assert log.batches == []
    # the snapshots below the new start are gone (found by simulation seed 12373: a follower
    # at the log start was sent an older snapshot forever)
    assert log.earliest_snapshot_id() == log.latest_snapshot_id() == OffsetAndEpoch(9, 4)
