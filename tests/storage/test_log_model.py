"""A model-based test of the metadata log: random appends, rolls, flushes, truncations, log
start moves, reopens and torn tails, checked after every step against a plain list of
batches."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import storage.fileio
from storage.control import build_data_batch
from storage.log import MetadataLog
from storage.records import RecordBatch
from storage.segment import LogConfig
from storage.snapshots import SnapshotId, build_snapshot_batches
from tests.properties import examples

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=512)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._saved_fsync = storage.fileio._fsync
        storage.fileio._fsync = lambda fd: None  # recovery logic, not durability, is under test
        self.root = Path(tempfile.mkdtemp(prefix="kwire-log-model-"))
        self.log = MetadataLog.open(self.root, config=CONFIG)
        self.model: list[RecordBatch] = []
        self.epoch = 1

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            storage.fileio._fsync = self._saved_fsync
            shutil.rmtree(self.root, ignore_errors=True)

    # -- operations

    @rule(records=st.integers(1, 5), size=st.integers(1, 300), new_epoch=st.booleans())
    def append(self, records: int, size: int, new_epoch: bool) -> None:
        if new_epoch:
            self.epoch += 1
        raw = build_data_batch(
            [bytes([records]) * size] * records, base_offset=self.log.log_end_offset,
            partition_leader_epoch=self.epoch, append_time_ms=1000 + self.log.log_end_offset,
        )
        self.log.append_as_leader(raw, epoch=self.epoch)
        self.model.append(RecordBatch(raw))

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        assert self.log.flush() == self.log.log_end_offset

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        # KRaft never truncates below the high watermark, which is never below the log start.
        offset = data.draw(st.integers(self.log.log_start_offset, self.log.log_end_offset + 2))
        self.log.truncate_to(offset)
        self.model = [b for b in self.model if b.last_offset < offset]

    @precondition(lambda self: self.model and self.model[-1].next_offset > self.log.log_start_offset)
    @rule(data=st.data())
    def snapshot_and_delete_before(self, data: st.DataObject) -> None:
        # KafkaMetadataLog.deleteBeforeSnapshot: a snapshot at a batch boundary moves the log
        # start up to it and drops the segments wholly below it.
        ends = [b.next_offset for b in self.model if b.next_offset > self.log.log_start_offset]
        end = data.draw(st.sampled_from(ends))
        epoch = next(b.partition_leader_epoch for b in self.model if b.next_offset == end)
        snapshot_id = SnapshotId(end, epoch)
        writer = self.log.create_snapshot_writer(snapshot_id)
        if writer is not None:
            for raw in build_snapshot_batches(snapshot_id, last_contained_log_timestamp=0, records=[], append_time_ms=0):
                writer.append(raw)
            writer.freeze()
            self.log.on_snapshot_frozen(snapshot_id)
        self.log.delete_before_snapshot(snapshot_id)
        assert self.log.log_start_offset == end
        assert self.log.snapshots[0] == snapshot_id

    @precondition(lambda self: self.log.log_start_offset == self.log.segments[0].base_offset)
    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = MetadataLog.open(self.root, config=CONFIG)
        assert self.log.open_report.error is None

    @precondition(lambda self: self.log.log_start_offset == self.log.segments[0].base_offset)
    @rule(fraction=st.floats(0, 1))
    def crash_with_torn_tail(self, fraction: float) -> None:
        # The process dies; an arbitrary prefix of the active segment survives.
        active = self.log.segments[-1]
        path, base = active.log_path, active.base_offset
        self.log.close()
        size = path.stat().st_size
        cut = int(size * fraction)
        with open(path, "r+b") as f:
            f.truncate(cut)
        kept, position = [], 0
        for batch in (b for b in self.model if b.base_offset >= base):
            if position + batch.size_in_bytes > cut:
                break
            kept.append(batch)
            position += batch.size_in_bytes
        self.model = [b for b in self.model if b.base_offset < base] + kept
        self.log = MetadataLog.open(self.root, config=CONFIG)
        assert self.log.open_report.truncated_bytes == cut - position

    # -- invariants

    @invariant()
    def matches_model(self) -> None:
        end = self.model[-1].next_offset if self.model else None
        if end is not None:
            assert self.log.log_end_offset == end
        start = self.log.log_start_offset
        expected = [b.to_bytes() for b in self.model if b.last_offset >= start]
        assert [b.to_bytes() for b in self.log.iter_batches()] == expected
        assert self.log.flushed_offset <= self.log.log_end_offset

    @invariant()
    def epochs_are_consistent(self) -> None:
        entries = self.log.leader_epoch_cache.entries
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in zip(entries, entries[1:], strict=False))
        assert all(e.start_offset <= self.log.log_end_offset for e in entries)
        if self.model and self.model[-1].next_offset == self.log.log_end_offset:
            assert self.log.last_fetched_epoch() == self.model[-1].partition_leader_epoch

    @invariant()
    def segments_are_contiguous(self) -> None:
        segments = self.log.segments
        assert all(a.next_offset == b.base_offset for a, b in zip(segments, segments[1:], strict=False))


TestLogModel = LogMachine.TestCase
TestLogModel.settings = settings(
    max_examples=examples(30), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
