"""Crash consistency of the metadata log: torn tails at every byte, flipped bytes, lost index
files, zero-filled tails, damaged middle segments, leftover temporary files.

Every case checks the same property: after reopening, the log holds exactly the longest valid
prefix of what was written -- never a batch past damage, never less than what was flushed
before the damage point."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from storage.batch_scan import iter_batches
from storage.log import MetadataLog
from tests.storage.helpers import SMALL, all_batches, fill

PARTITION = "__cluster_metadata-0"


def _build(tmp_path: Path, batches: int, *, config=SMALL) -> tuple[Path, list[bytes], int]:
    source = tmp_path / "source"
    log = MetadataLog.open(source, config=config)
    written = fill(log, batches - 3, epoch=1)
    flushed = log.flush()
    written += fill(log, 3, epoch=2)  # the unflushed tail
    log.close()
    return source, written, flushed


_copies = iter(range(1 << 30))


def _reopen_copy(source: Path, target: Path, mutate) -> MetadataLog:
    # A fresh directory per case: removing directory trees costs more than the test itself.
    target = target.with_name(f"{target.name}-{next(_copies)}")
    shutil.copytree(source, target)
    mutate(target / PARTITION)
    return MetadataLog.open(target, config=SMALL)


def _expected_prefix(written: list[bytes], cut_offset_bytes: int) -> list[bytes]:
    kept, total = [], 0
    for raw in written:
        if total + len(raw) > cut_offset_bytes:
            break
        kept.append(raw)
        total += len(raw)
    return kept


def test_torn_tail_at_every_byte_of_the_last_batches(tmp_path: Path, fsyncs: list[int]) -> None:
    source, written, flushed = _build(tmp_path, 12)
    segment_file = source / PARTITION / "00000000000000000000.log"
    full = segment_file.read_bytes()
    assert full == b"".join(written)  # one segment
    tail_start = sum(len(b) for b in written[:-3])
    flushed_bytes = tail_start  # everything before the last three batches was flushed
    assert flushed == 27
    for cut in range(tail_start - 1, len(full) + 1):
        def mutate(part: Path, cut: int = cut) -> None:
            with open(part / "00000000000000000000.log", "r+b") as f:
                f.truncate(cut)

        log = _reopen_copy(source, tmp_path / "copy", mutate)
        expected = _expected_prefix(written, cut)
        assert all_batches(log) == expected, cut
        assert log.log_end_offset == 3 * len(expected)
        if cut >= flushed_bytes:
            assert log.log_end_offset >= flushed  # nothing flushed before the cut is lost
        assert log.flushed_offset == log.log_end_offset
        assert (log.open_report.truncated_bytes > 0) == (cut != sum(len(b) for b in expected))
        # the epoch cache forgets epochs whose batches were cut away
        assert log.latest_epoch == (2 if len(expected) > 9 else 1)
        log.close()
        with open(log.dir / "00000000000000000000.log", "rb") as f:
            assert f.read() == b"".join(expected)


def test_flipped_bytes_keep_exactly_the_valid_prefix(tmp_path: Path, fsyncs: list[int]) -> None:
    source, written, _ = _build(tmp_path, 12)
    starts = [sum(len(b) for b in written[:i]) for i in range(len(written))]
    total = sum(len(b) for b in written)
    rng = random.Random(20241120)
    for _ in range(60):
        position = rng.randrange(total)
        flip = rng.randrange(1, 256)
        batch_index = max(i for i, s in enumerate(starts) if s <= position)
        within = position - starts[batch_index]

        def mutate(part: Path, position: int = position, flip: int = flip) -> None:
            with open(part / "00000000000000000000.log", "r+b") as f:
                f.seek(position)
                byte = f.read(1)[0]
                f.seek(position)
                f.write(bytes([byte ^ flip]))

        log = _reopen_copy(source, tmp_path / "copy", mutate)
        got = all_batches(log)
        if 12 <= within < 16:
            # PartitionLeaderEpoch is outside the CRC (as in Kafka): the batch survives with
            # another epoch, nothing else changes
            assert len(got) == len(written)
            assert [g[16:] for g in got] == [w[16:] for w in written]
        else:
            assert got == written[:batch_index], (position, within)
        log.close()


def test_damage_in_a_middle_segment_drops_every_later_segment(tmp_path: Path, fsyncs: list[int]) -> None:
    source = tmp_path / "source"
    log = MetadataLog.open(source, config=SMALL)
    written = fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert len(bases) == 3

    def mutate(part: Path) -> None:
        path = part / f"{bases[1]:020d}.log"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x55
        path.write_bytes(data)

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert [s.base_offset for s in log.segments] == bases[:2]
    got = all_batches(log)
    assert got == written[: len(got)] and bases[1] < log.log_end_offset < bases[2]
    assert log.open_report.deleted_segments == [bases[2]]
    assert not (log.dir / f"{bases[2]:020d}.log").exists()
    log.close()


def test_missing_or_garbage_index_files_are_rebuilt(tmp_path: Path, fsyncs: list[int]) -> None:
    source = tmp_path / "source"
    log = MetadataLog.open(source, config=SMALL)
    written = fill(log, 100)
    log.close()
    part = source / PARTITION
    originals = {n: (part / n).read_bytes() for n in os.listdir(part) if n.endswith(("index", "timeindex"))}

    def mutate(part: Path) -> None:
        names = sorted(originals)
        os.unlink(part / names[0])
        os.unlink(part / names[1])
        (part / names[2]).write_bytes(os.urandom(100))

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert all_batches(log) == written
    log.close()
    assert {n: (log.dir / n).read_bytes() for n in originals} == originals


def test_zero_filled_tail_is_cut(tmp_path: Path, fsyncs: list[int]) -> None:
    source, written, _ = _build(tmp_path, 6)

    def mutate(part: Path) -> None:
        with open(part / "00000000000000000000.log", "ab") as f:
            f.write(bytes(4096))

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert all_batches(log) == written
    assert log.open_report.truncated_bytes == 4096
    log.close()


def test_garbage_files_and_orphans_are_cleaned(tmp_path: Path, fsyncs: list[int]) -> None:
    source, written, _ = _build(tmp_path, 6)

    def mutate(part: Path) -> None:
        for name in (
            "00000000000000000003.log.deleted",
            "00000000000000000003.index.deleted",
            "00000000000000000009.log.cleaned",
            "00000000000000000077.index",
            "00000000000000000077.timeindex",
            "leader-epoch-checkpoint.tmp",
            "00000000000000000005-0000000001-123.checkpoint.part",
        ):
            (part / name).write_bytes(b"junk")

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert all_batches(log) == written
    log.close()
    assert sorted(os.listdir(log.dir)) == sorted(os.listdir(source / PARTITION))


def test_segment_whose_first_batch_is_out_of_place(tmp_path: Path, fsyncs: list[int]) -> None:
    source = tmp_path / "source"
    log = MetadataLog.open(source, config=SMALL)
    fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    log.close()

    def mutate(part: Path) -> None:
        # a segment file that claims to start elsewhere than where the previous one ends
        os.rename(part / f"{bases[2]:020d}.log", part / f"{bases[2] + 3:020d}.log")

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[2]
    log.close()


@pytest.mark.parametrize("cut_batches", [1, 2])
def test_unflushed_follower_tail_is_refetchable(tmp_path: Path, fsyncs: list[int], cut_batches: int) -> None:
    # After losing an unflushed tail the log end offset is a batch boundary, so a follower
    # fetches from it and appends the same batches again.
    source, written, _ = _build(tmp_path, 6)

    def mutate(part: Path) -> None:
        path = part / "00000000000000000000.log"
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - sum(len(b) for b in written[-cut_batches:]) + 5])

    log = _reopen_copy(source, tmp_path / "copy", mutate)
    assert log.log_end_offset == 3 * (6 - cut_batches)
    for raw in written[-cut_batches:]:
        log.append_as_follower(raw)
    assert all_batches(log) == written
    assert [b.base_offset for b in iter_batches(log.read(0, 1 << 20).records)] == list(range(0, 18, 3))
    log.close()
