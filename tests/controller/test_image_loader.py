"""The image loader (``server.controller.image_loader``): slices within a budget, the committed
log after the snapshot, held batches handed back instead of replayed inside the loader, and the
revert's reading of the committed log."""

from __future__ import annotations

import pytest

from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from server.controller.image_loader import ImageLoad, Revert, SnapshotLoad
from server.controller.snapshots import image_snapshot
from server.raft.events import CommittedBatch
from server.raft.log import MemoryRaftLog
from server.raft.types import OffsetAndEpoch, VoterSet
from storage.batch_builder import build_batch
from storage.record_codec import SimpleRecord

FENCE = encode_record(FenceBrokerRecord(id=1, epoch=2), 0)


def _batch(base_offset: int, count: int, epoch: int = 1) -> CommittedBatch:
    data = build_batch([SimpleRecord(FENCE) for _ in range(count)], base_offset=base_offset,
                       partition_leader_epoch=epoch)
    return CommittedBatch(base_offset, base_offset + count - 1, epoch, False, bytes(data))


class Replayed:
    def __init__(self) -> None:
        self.snapshot: list[tuple[bytes | None, int]] = []
        self.log: list[int] = []

    def slice(self, load: ImageLoad, budget: int) -> int | None:
        return load.replay_slice(budget, lambda v, o: self.snapshot.append((v, o)),
                                 lambda v, o: self.log.append(o))


def test_a_snapshot_is_replayed_a_budget_at_a_time_at_the_offset_before_it() -> None:
    load = SnapshotLoad(OffsetAndEpoch(50, 2), [b"a", b"b", b"c", b"d", b"e"], started_ms=7)
    replayed = Replayed()
    assert replayed.slice(load, 2) is None and load.replayed_offset == 0
    assert replayed.slice(load, 2) is None, "a full slice may have more behind it"
    assert replayed.slice(load, 2) == 1, "the last record, one of the budget left"
    assert [v for v, _ in replayed.snapshot] == [b"a", b"b", b"c", b"d", b"e"]
    assert {o for _, o in replayed.snapshot} == {49}
    assert load.replayed == 5 and load.replayed_offset == 50


def test_the_committed_log_follows_the_snapshot_and_moves_the_replayed_offset() -> None:
    load = ImageLoad(OffsetAndEpoch(10, 1), [b"x"], 0, log=[_batch(10, 3), _batch(13, 2)])
    replayed = Replayed()
    assert replayed.slice(load, 3) is None, "one snapshot record, then the first batch"
    assert load.replayed_offset == 13 and replayed.log == [10, 11, 12]
    assert replayed.slice(load, 10) == 8
    assert load.replayed_offset == 15 and replayed.log == [10, 11, 12, 13, 14] and load.replayed == 6


def test_held_batches_come_back_within_the_budget_in_order() -> None:
    load = SnapshotLoad(OffsetAndEpoch(10, 1), [], 0)
    load.committed.extend([_batch(10, 4), _batch(14, 4), _batch(18, 1)])
    first = load.take_held(5)
    assert [b.base_offset for b in first] == [10, 14], "the last one taken may go beyond the budget"
    assert [b.base_offset for b in load.take_held(5)] == [18]
    assert load.take_held(5) == [] and not load.committed


def test_a_later_snapshot_load_keeps_the_requests_held_by_the_one_it_replaces() -> None:
    first = SnapshotLoad(OffsetAndEpoch(10, 1), [], 0)
    first.requests.append("describe")
    first.committed.append(_batch(10, 1))
    second = SnapshotLoad(OffsetAndEpoch(20, 1), [], 5, requests=first.requests)
    assert list(second.requests) == ["describe"] and not second.committed


def _log_with_batches(*counts: int) -> MemoryRaftLog:
    log, offset = MemoryRaftLog(), 0
    for count in counts:
        records = [SimpleRecord(FENCE) for _ in range(count - 1)] + [SimpleRecord(encode_record(NoOpRecord(), 0))]
        log.append(bytes(build_batch(records, base_offset=offset, partition_leader_epoch=1)))
        offset += count
    log.flush()
    log.update_high_watermark(offset)
    return log


def test_a_revert_without_a_snapshot_reads_the_log_from_its_start_up_to_the_end() -> None:
    log = _log_with_batches(2, 3, 4)
    revert = Revert.from_log(log, 5, now_ms=9, reactivate=True)
    assert revert.snapshot_id == OffsetAndEpoch(0, 0) and revert.reactivate and revert.started_ms == 9
    assert [(b.base_offset, b.last_offset) for b in revert.log] == [(0, 1), (2, 4)], "only what committed"
    replayed = Replayed()
    assert replayed.slice(revert, 100) == 95 and revert.replayed_offset == 5
    assert replayed.log == [0, 1, 2, 3, 4] and replayed.snapshot == []


def test_a_revert_starts_from_the_latest_snapshot_at_or_below_the_end() -> None:
    log = _log_with_batches(2, 3, 4)
    snapshot_id = OffsetAndEpoch(2, 1)
    log.create_snapshot(snapshot_id, image_snapshot(snapshot_id, [(FenceBrokerRecord(id=1, epoch=2), 0)],
                                                    last_contained_log_timestamp=0, append_time_ms=0,
                                                    kraft_version=0, voters=VoterSet(())))
    revert = Revert.from_log(log, 9, now_ms=0, reactivate=False)
    assert revert.snapshot_id == snapshot_id
    assert [b.base_offset for b in revert.log] == [2, 5]
    replayed = Replayed()
    assert replayed.slice(revert, 100) is not None
    assert replayed.snapshot == [(FENCE, 1)] and replayed.log == [2, 3, 4, 5, 6, 7, 8]
    assert revert.replayed_offset == 9


def test_a_revert_fails_loudly_when_the_log_cannot_be_read_back() -> None:
    log = _log_with_batches(2, 3)
    with pytest.raises(RuntimeError, match="cannot be read back"):
        Revert.from_log(log, 9, now_ms=0, reactivate=False)
