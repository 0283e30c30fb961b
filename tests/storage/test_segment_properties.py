"""Property tests of segment rolling, the indexes a log builds, truncation and recovery.

Against a model of ``LogSegment.append`` / ``shouldRoll`` / ``onBecomeInactiveSegment``:

* a new segment is rolled exactly when the next append would take the active one past
  ``segment.bytes`` (an empty segment never rolls, so one oversized batch gets a segment alone);
* the offset index gets ``(last offset of the append, its position)`` whenever more than
  ``index.interval.bytes`` were appended since the last entry, the time index the largest
  timestamp so far and its offset at the same points and once more when the segment is rolled;
* recovery (a reopen) rebuilds the same indexes from the bytes alone;
* every offset reads back the one batch that holds it, also after truncating to any offset and
  appending again;
* a bit flipped anywhere in any segment (outside PartitionLeaderEpoch, which the CRC does not
  cover) keeps exactly the batches before the damaged one and deletes every later segment.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage.fileio
from storage.control import build_data_batch
from storage.log import MetadataLog
from storage.records import RecordBatch
from storage.segment import LogConfig
from tests.properties import examples

NO_TIMESTAMP = -1


@contextmanager
def log_dir() -> Iterator[Path]:
    saved = storage.fileio._fsync
    storage.fileio._fsync = lambda fd: None  # layout and recovery logic, not durability, are tested
    root = Path(tempfile.mkdtemp(prefix="kwire-segment-props-"))
    try:
        yield root
    finally:
        storage.fileio._fsync = saved
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class ModelSegment:
    base: int
    size: int = 0
    batches: list[tuple[int, RecordBatch]] = field(default_factory=list)  # (position, batch)
    offset_entries: list[tuple[int, int]] = field(default_factory=list)
    time_entries: list[tuple[int, int]] = field(default_factory=list)
    since_entry: int = 0
    max_ts: int = NO_TIMESTAMP
    offset_of_max_ts: int = 0

    def time_append(self, ts: int, offset: int) -> None:
        last = self.time_entries[-1][0] if self.time_entries else NO_TIMESTAMP
        if ts > last:
            self.time_entries.append((ts, offset))


class LogModel:
    """LogSegment.append and Log.maybeRoll for one batch per append."""

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.segments = [ModelSegment(0, offset_of_max_ts=0)]

    def append(self, batch: RecordBatch) -> None:
        n = batch.size_in_bytes
        active = self.segments[-1]
        if active.size > 0 and active.size > self.config.segment_bytes - n:
            active.time_append(active.max_ts, active.offset_of_max_ts)  # onBecomeInactiveSegment
            active = ModelSegment(batch.base_offset, offset_of_max_ts=batch.base_offset)
            self.segments.append(active)
        if batch.max_timestamp > active.max_ts:
            active.max_ts, active.offset_of_max_ts = batch.max_timestamp, batch.last_offset
        if active.since_entry > self.config.index_interval_bytes:
            active.offset_entries.append((batch.last_offset, active.size))
            active.time_append(active.max_ts, active.offset_of_max_ts)
            active.since_entry = 0
        active.since_entry += n
        active.batches.append((active.size, batch))
        active.size += n


@st.composite
def appends(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """(records, value size, timestamp) of each append; a few batches larger than a segment."""
    return draw(st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 120) | st.just(700), st.integers(0, 10**6)),
        min_size=1, max_size=30,
    ))


configs = st.builds(
    LogConfig,
    segment_bytes=st.integers(200, 1500),
    index_interval_bytes=st.integers(0, 600),
)


def build_log(root: Path, config: LogConfig, plan: list[tuple[int, int, int]], epoch: int = 1,
              log: MetadataLog | None = None) -> tuple[MetadataLog, list[RecordBatch]]:
    log = log or MetadataLog.open(root, config=config, clock_ms=lambda: 0)
    written = []
    for records, size, ts in plan:
        raw = build_data_batch([bytes([records]) * size] * records, base_offset=log.log_end_offset,
                               partition_leader_epoch=epoch, append_time_ms=ts)
        log.append_as_leader(raw, epoch=epoch)
        written.append(RecordBatch(raw))
    return log, written


def batch_holding(batches: list[RecordBatch], offset: int) -> RecordBatch:
    return next(b for b in batches if b.base_offset <= offset <= b.last_offset)


def check_reads(log: MetadataLog, batches: list[RecordBatch], probes: list[int]) -> None:
    for offset in probes:
        want = batch_holding(batches, offset)
        got = log.read(offset, max_bytes=1)  # at least one whole batch, no more
        assert bytes(got.records) == want.to_bytes()
        segment = next(s for s in reversed(log.segments) if s.base_offset <= offset)
        position, size = segment.translate_offset(offset)  # type: ignore[misc]
        assert size == want.size_in_bytes
        assert segment.read_at(position, size) == want.to_bytes()


slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(slow, max_examples=examples(25))
@given(config=configs, plan=appends(), data=st.data())
def test_rolls_and_indexes_follow_the_model_and_survive_recovery(
    config: LogConfig, plan: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    model = LogModel(config)
    with log_dir() as root:
        log, written = build_log(root, config, plan)
        for batch in written:
            model.append(batch)
        segments = log.segments
        assert [s.base_offset for s in segments] == [m.base for m in model.segments]
        assert [s.size for s in segments] == [m.size for m in model.segments]
        for s, m in zip(segments, model.segments, strict=True):
            assert s.offset_index.entry_list() == m.offset_entries
            assert s.time_index.entry_list() == m.time_entries
            # the roll rule: more than one batch only within segment.bytes
            assert len(m.batches) == 1 or m.size <= config.segment_bytes
        for m, following in zip(model.segments, model.segments[1:], strict=False):
            assert m.size + following.batches[0][1].size_in_bytes > config.segment_bytes
        probes = data.draw(st.lists(st.integers(0, log.log_end_offset - 1), max_size=8))
        check_reads(log, written, probes)

        before = [(s.offset_index.entry_list(), s.time_index.entry_list()) for s in segments]
        log.close()
        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert log.open_report.error is None and log.open_report.truncated_bytes == 0
        after = [(s.offset_index.entry_list(), s.time_index.entry_list()) for s in log.segments]
        assert [a[0] for a in after] == [b[0] for b in before]
        # recovery also writes the active segment's final time entry, as a roll would
        active_model = model.segments[-1]
        active_model.time_append(active_model.max_ts, active_model.offset_of_max_ts)
        assert [a[1] for a in after] == [m.time_entries for m in model.segments]
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in written]
        log.close()


@settings(slow, max_examples=examples(40))
@given(plan=appends(), data=st.data())
def test_a_segment_filled_exactly_to_segment_bytes_does_not_roll(
    plan: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    # batch sizes do not depend on offsets or timestamps: measure them first
    sizes = [len(build_data_batch([bytes([r]) * n] * r, base_offset=0, partition_leader_epoch=1,
                                  append_time_ms=0)) for r, n, _ in plan]
    fit = data.draw(st.integers(1, len(plan)))
    short = data.draw(st.sampled_from([0, 1])) if fit > 1 else 0  # a byte short of the fit
    config = LogConfig(segment_bytes=sum(sizes[:fit]) - short, index_interval_bytes=4096)
    with log_dir() as root:
        log, written = build_log(root, config, plan)
        first = log.segments[0]
        kept = fit - short  # the batches that fit
        assert first.size == sum(sizes[:kept])
        assert first.next_offset == written[kept - 1].next_offset
        if kept < len(plan):
            assert len(log.segments) >= 2  # and the next batch rolled
        log.close()


@settings(slow, max_examples=examples(25))
@given(config=configs, plan=appends(), more=appends(), data=st.data())
def test_truncate_to_any_offset_then_append(
    config: LogConfig, plan: list[tuple[int, int, int]], more: list[tuple[int, int, int]],
    data: st.DataObject,
) -> None:
    with log_dir() as root:
        log, written = build_log(root, config, plan)
        # anywhere, and often exactly at a batch's first or last offset (where an index entry is)
        edges = [b.base_offset for b in written] + [b.last_offset for b in written]
        indexed = [o for s in log.segments for o, _ in s.offset_index.entry_list()]
        cut = data.draw(st.integers(0, log.log_end_offset) | st.sampled_from(edges) | (
            st.sampled_from(indexed) if indexed else st.nothing()))
        log.truncate_to(cut)
        # a batch holding the cut offset goes whole
        kept = [b for b in written if b.last_offset < cut]
        assert log.log_end_offset == (kept[-1].next_offset if kept else 0)
        assert all(b.base_offset < cut for b in kept)
        for s in log.segments:
            assert all(offset < cut for offset, _ in s.offset_index.entry_list())
            assert all(offset < cut for _, offset in s.time_index.entry_list())
        log, appended = build_log(root, config, more, epoch=2, log=log)
        batches = kept + appended
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in batches]
        for s in log.segments[:-1]:
            assert s.next_offset == log.segments[log.segments.index(s) + 1].base_offset
        for s in log.segments:
            entries = s.offset_index.entry_list()
            # every offset-index entry points at a batch start in its segment, ascending
            starts = {}
            position = 0
            for b in (b for b in batches if s.base_offset <= b.base_offset < s.next_offset):
                starts[position] = b
                position += b.size_in_bytes
            assert all(p in starts and o >= starts[p].base_offset for o, p in entries)
            assert entries == sorted(set(entries))
        probes = data.draw(st.lists(st.integers(0, log.log_end_offset - 1), max_size=8))
        check_reads(log, batches, probes)
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == (
            ([(1, 0)] if kept else []) + [(2, kept[-1].next_offset if kept else 0)])
        log.close()
        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in batches]
        log.close()


@settings(slow, max_examples=examples(30))
@given(config=configs, plan=appends(), data=st.data())
def test_a_flipped_bit_anywhere_keeps_exactly_the_batches_before_it(
    config: LogConfig, plan: list[tuple[int, int, int]], data: st.DataObject
) -> None:
    with log_dir() as root:
        log, written = build_log(root, config, plan)
        layout = [(s.log_path, s.base_offset) for s in log.segments]
        log.close()
        # pick a batch, then a bit in it outside PartitionLeaderEpoch (bytes 12..15); and outside
        # the BaseOffset of the log's first batch, which only has to be at or after the segment's
        # base offset (neither is covered by the CRC, as in Kafka)
        victim = data.draw(st.integers(0, len(written) - 1))
        batch = written[victim]
        lowest = 64 if victim == 0 else 0
        bit = data.draw(st.integers(lowest, batch.size_in_bytes * 8 - 1).filter(lambda b: not 96 <= b < 128))
        path, base = next((p, b) for p, b in reversed(layout) if b <= batch.base_offset)
        position = sum(w.size_in_bytes for w in written if base <= w.base_offset < batch.base_offset)
        raw = bytearray(path.read_bytes())
        raw[position + bit // 8] ^= 0x80 >> (bit % 8)
        path.write_bytes(raw)

        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert [b.to_bytes() for b in log.iter_batches()] == [w.to_bytes() for w in written[:victim]]
        assert log.log_end_offset == batch.base_offset
        later = [b for p, b in layout if b > batch.base_offset]
        assert log.open_report.deleted_segments == later
        assert all(not p.exists() for p, b in layout if b > batch.base_offset)
        # the log takes appends again from the end of the valid prefix
        build_log(root, config, [(1, 10, 5)], epoch=3, log=log)
        assert log.log_end_offset == batch.base_offset + 1
        log.close()
