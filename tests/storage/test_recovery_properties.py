"""Property tests of metadata-log recovery after a crash (``LogLoader.recoverLog`` /
``LogSegment.recover``), over random logs and random damage.

A log of random batches (several leader epochs, rolled into segments by a random
``segment.bytes``) is closed; then one segment's ``.log`` is cut at a random byte and given a
random tail (nothing, zeros as a preallocated file leaves them, or random bytes), and random index
files are deleted, cut short or overwritten. After reopening:

* the log holds exactly the valid CRC prefix: every batch wholly before the cut, nothing after
  it, and every later segment is deleted;
* offsets are contiguous from 0: each batch starts at its predecessor's next offset, each segment
  at its predecessor's next offset, and the log end offset is the last kept batch's next offset;
* ``open_report`` counts the bytes cut off, names the deleted segments and reports damage exactly
  when there was some;
* both indexes of every segment are rebuilt from the bytes alone, as the interval rule builds them
  from the kept batches, whatever was in the old index files; every offset reads back its batch;
* the leader-epoch cache starts each epoch at its first kept batch and forgets epochs cut away;
* the log takes appends again at its end, and a second reopen finds nothing to repair.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storage.control import build_data_batch
from storage.index import NO_TIMESTAMP
from storage.log import MetadataLog
from storage.records import RecordBatch
from storage.segment import LogConfig
from tests.properties import examples
from tests.storage.test_segment_properties import check_reads, log_dir

PARTITION = "__cluster_metadata-0"

slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# index.interval.bytes 0 puts an entry at every batch after the first
configs = st.builds(LogConfig, segment_bytes=st.integers(300, 1500),
                    index_interval_bytes=st.just(0) | st.integers(0, 500))

# (records, value size, timestamp, epoch step) of each append; epochs only go up
plans = st.lists(
    st.tuples(st.integers(1, 4), st.integers(1, 150), st.integers(0, 10**6), st.sampled_from([0, 0, 0, 1, 2])),
    min_size=1, max_size=25,
)

tails = st.one_of(
    st.just(b""),
    st.integers(1, 200).map(bytes),  # zeros, as a preallocated or half-written file leaves them
    st.binary(min_size=1, max_size=200),
)

index_damage = st.sampled_from(["keep", "delete", "cut", "garbage"])


def write_log(root: Path, config: LogConfig, plan: list[tuple[int, int, int, int]]) -> list[RecordBatch]:
    log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
    epoch = 1
    written = []
    for records, size, ts, step in plan:
        epoch += step
        raw = build_data_batch([bytes([65 + records]) * size] * records, base_offset=log.log_end_offset,
                               partition_leader_epoch=epoch, append_time_ms=ts)
        log.append_as_leader(raw, epoch=epoch)
        written.append(RecordBatch(raw))
    log.close()
    return written


def expected_indexes(batches: list[RecordBatch], interval: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The offset and time index entries of one segment holding ``batches``, by the interval
    rule (an entry for the batch at a position more than ``interval`` bytes past the last entry)
    and the time index's closing entry for the largest timestamp."""
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []

    def time_entry(ts: int, offset: int) -> None:
        if ts > (times[-1][0] if times else NO_TIMESTAMP):
            times.append((ts, offset))

    position = last_entry = 0
    max_ts, offset_of_max = NO_TIMESTAMP, batches[0].base_offset if batches else 0
    for batch in batches:
        if batch.max_timestamp > max_ts:
            max_ts, offset_of_max = batch.max_timestamp, batch.last_offset
        if position - last_entry > interval:
            offsets.append((batch.last_offset, position))
            time_entry(max_ts, offset_of_max)
            last_entry = position
        position += batch.size_in_bytes
    time_entry(max_ts, offset_of_max)
    return offsets, times


def damage_index(path: Path, how: str, data: st.DataObject) -> None:
    if how == "delete":
        path.unlink(missing_ok=True)
    elif how == "cut" and path.exists():
        with open(path, "r+b") as f:
            f.truncate(data.draw(st.integers(0, max(0, path.stat().st_size - 1)), label="index cut"))
    elif how == "garbage":
        path.write_bytes(data.draw(st.binary(min_size=1, max_size=64), label="index garbage"))


@settings(slow, max_examples=examples(30))
@given(config=configs, plan=plans, tail=tails, data=st.data())
def test_recovery_keeps_exactly_the_valid_prefix_with_contiguous_offsets_and_rebuilt_indexes(
    config: LogConfig, plan: list[tuple[int, int, int, int]], tail: bytes, data: st.DataObject
) -> None:
    with log_dir() as root:
        written = write_log(root, config, plan)
        part = root / PARTITION
        bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
        victim = data.draw(st.integers(0, len(bases) - 1), label="damaged segment")
        base = bases[victim]
        in_victim = [b for b in written if base <= b.base_offset and (
            victim + 1 == len(bases) or b.base_offset < bases[victim + 1])]
        size = sum(b.size_in_bytes for b in in_victim)
        cut = data.draw(st.integers(0, size), label="cut")
        segment_file = part / f"{base:020d}.log"
        with open(segment_file, "r+b") as f:
            f.truncate(cut)
            f.seek(cut)
            f.write(tail)
        for b in bases:
            for suffix in (".index", ".timeindex"):
                damage_index(part / f"{b:020d}{suffix}", data.draw(index_damage, label=f"{b}{suffix}"), data)

        # the segment now holds its bytes up to the cut, then the tail; a tail may put back the
        # very bytes the cut took (a record's last byte is often 0): then nothing was damaged
        original = b"".join(b.to_bytes() for b in in_victim)
        now = original[:cut] + tail
        kept_in_victim, end = [], 0
        for batch in in_victim:
            if now[end:end + batch.size_in_bytes] != batch.to_bytes():
                break
            kept_in_victim.append(batch)
            end += batch.size_in_bytes
        damaged = now != original
        kept = [b for b in written if b.base_offset < base] + kept_in_victim
        if not damaged:  # the segments after the victim stay too
            kept += [b for b in written if b.base_offset >= base and b not in in_victim]
        later = bases[victim + 1:] if damaged else []

        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        # exactly the valid prefix, offsets contiguous from 0
        got = list(log.iter_batches())
        assert [b.to_bytes() for b in got] == [b.to_bytes() for b in kept]
        assert all(b.base_offset == a.next_offset for a, b in zip(got, got[1:], strict=False))
        assert log.log_end_offset == (kept[-1].next_offset if kept else 0)
        segments = log.segments
        assert [s.base_offset for s in segments] == bases[:victim + 1] + (bases[victim + 1:] if not damaged else [])
        assert all(s.next_offset == t.base_offset for s, t in zip(segments, segments[1:], strict=False))
        assert segments[-1].next_offset == log.log_end_offset
        assert all(not (part / f"{b:020d}.log").exists() for b in later)
        # what the report says
        report = log.open_report
        assert report.deleted_segments == later
        assert report.truncated_bytes == len(now) - end
        assert (report.error is not None) == (damaged and (report.truncated_bytes > 0 or victim + 1 < len(bases)))
        assert report.batches == len(kept)
        assert segment_file.stat().st_size == end
        # indexes rebuilt from the bytes, whatever the files held
        for segment in segments:
            mine = [b for b in kept if segment.base_offset <= b.base_offset < segment.next_offset]
            offsets, times = expected_indexes(mine, config.index_interval_bytes)
            assert segment.offset_index.entry_list() == offsets
            assert segment.time_index.entry_list() == times
            assert segment.size == sum(b.size_in_bytes for b in mine)
        if kept:
            probes = data.draw(st.lists(st.integers(0, log.log_end_offset - 1), max_size=6), label="probes")
            check_reads(log, kept, probes)
        # the epoch cache starts each kept epoch at its first batch
        firsts: dict[int, int] = {}
        for b in kept:
            firsts.setdefault(b.partition_leader_epoch, b.base_offset)
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == sorted(firsts.items())

        # appends go on at the end, and the next open finds nothing to repair
        epoch = max(firsts, default=1) + 1
        extra = build_data_batch([b"after"], base_offset=log.log_end_offset, partition_leader_epoch=epoch,
                                 append_time_ms=5)
        log.append_as_leader(extra, epoch=epoch)
        log.close()
        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert log.open_report.error is None and log.open_report.truncated_bytes == 0
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in kept] + [extra]
        log.close()


def test_a_tail_that_puts_back_the_cut_bytes_leaves_the_log_whole() -> None:
    """A cut one byte short of the end, then a tail of that same byte (a record ends with its
    header count, 0): the file is as written, and recovery keeps every batch and reports nothing.
    Found by the property above, whose expectation once called any cut plus tail damage."""
    config = LogConfig(segment_bytes=300, index_interval_bytes=0)
    with log_dir() as root:
        written = write_log(root, config, [(2, 25, 0, 0), (4, 6, 0, 0)])
        segment_file = root / PARTITION / f"{0:020d}.log"
        original = segment_file.read_bytes()
        assert len(original) == sum(b.size_in_bytes for b in written) and original[-1:] == b"\x00"
        with open(segment_file, "r+b") as f:
            f.truncate(len(original) - 1)
            f.seek(len(original) - 1)
            f.write(b"\x00")
        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in written]
        assert log.open_report.error is None and log.open_report.truncated_bytes == 0
        log.close()


@settings(slow, max_examples=examples(20))
@given(config=configs, plan=plans, data=st.data())
def test_a_segment_file_lost_after_the_first_keeps_the_segments_before_it(
    config: LogConfig, plan: list[tuple[int, int, int, int]], data: st.DataObject
) -> None:
    # a lost file leaves a gap in the offsets (or a shorter log): recovery keeps the contiguous
    # prefix and deletes the segments after the gap
    with log_dir() as root:
        written = write_log(root, config, plan)
        part = root / PARTITION
        bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
        assume(len(bases) >= 2)
        gone = data.draw(st.integers(1, len(bases) - 1), label="lost segment")
        os.unlink(part / f"{bases[gone]:020d}.log")
        log = MetadataLog.open(root, config=config, clock_ms=lambda: 0)
        assert [s.base_offset for s in log.segments] == bases[:gone]
        kept = [b for b in written if b.base_offset < bases[gone]]
        assert [b.to_bytes() for b in log.iter_batches()] == [b.to_bytes() for b in kept]
        assert log.log_end_offset == bases[gone] == kept[-1].next_offset
        assert log.open_report.deleted_segments == bases[gone + 1:]
        assert (log.open_report.error is not None) == (gone + 1 < len(bases))
        assert sorted(int(p.name[:20]) for p in part.glob("*.log")) == bases[:gone]
        # and their index files with them
        assert sorted(int(p.name[:20]) for p in part.glob("*.index")) == bases[:gone]
        log.close()
