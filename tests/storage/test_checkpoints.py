"""leader-epoch-checkpoint, the offset checkpoints, partition.metadata and producer snapshot
files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kwire.uuid import METADATA_TOPIC_ID, Uuid
from storage.errors import CorruptRecordError, InconsistentStateError
from storage.leader_epoch import EpochEntry, LeaderEpochCache, decode_checkpoint, encode_checkpoint
from storage.offset_checkpoint import (
    decode_offset_checkpoint,
    encode_offset_checkpoint,
    read_offset_checkpoint,
)
from storage.partition_metadata import decode_partition_metadata, encode_partition_metadata
from storage.producer_snapshot import (
    EMPTY_PRODUCER_SNAPSHOT,
    ProducerSnapshotEntry,
    ProducerSnapshots,
    decode_producer_snapshot,
    encode_producer_snapshot,
)


def test_checkpoint_text_format() -> None:
    entries = [EpochEntry(0, 0), EpochEntry(4, 120)]
    assert encode_checkpoint(entries) == b"0\n2\n0 0\n4 120\n"
    assert decode_checkpoint(b"0\n2\n0 0\n4 120\n") == entries
    assert decode_checkpoint(b"") == [] and decode_checkpoint(b"0\n") == []
    for bad in (b"1\n0\n", b"0\n2\n0 0\n", b"0\nx\n", b"0\n1\n0 0 0\n", b"0\n1\nA B\n"):
        with pytest.raises(InconsistentStateError):
            decode_checkpoint(bad)


def test_offset_checkpoint_text_format(tmp_path: Path) -> None:
    """``OffsetCheckpointFile``: ``<topic> <partition> <offset>`` lines after version and count."""
    offsets = {("orders", 0): 5120, ("__consumer_offsets", 49): 0}
    data = encode_offset_checkpoint(offsets)
    assert data == b"0\n2\norders 0 5120\n__consumer_offsets 49 0\n"
    assert decode_offset_checkpoint(data, "x") == offsets
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") is None
    (tmp_path / "replication-offset-checkpoint").write_bytes(data)
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == offsets
    for bad in (b"0\n1\norders 0\n", b"0\n1\norders x 1\n", b"0\n2\norders 0 1\n", b"2\n0\n"):
        with pytest.raises(InconsistentStateError):
            decode_offset_checkpoint(bad, "x")


@given(st.dictionaries(
    st.tuples(st.text("abcXYZ09._-", min_size=1, max_size=20), st.integers(0, 2**31 - 1)),
    st.integers(0, 2**63 - 1), max_size=20))
def test_offset_checkpoint_round_trip(offsets: dict[tuple[str, int], int]) -> None:
    assert decode_offset_checkpoint(encode_offset_checkpoint(offsets), "x") == offsets


def test_cache_rules(tmp_path: Path, fsyncs: list[int]) -> None:
    cache = LeaderEpochCache.load(tmp_path)
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b""
    assert cache.assign(1, 0) and not cache.assign(1, 5)  # same epoch, later start: no-op
    assert cache.assign(3, 10) and cache.assign(5, 20)
    assert cache.end_offset_for(1, 100) == (1, 10)
    assert cache.end_offset_for(2, 100) == (1, 10)
    assert cache.end_offset_for(5, 100) == (5, 100)
    assert cache.end_offset_for(0, 100) == (0, 0)  # below every known epoch
    assert cache.end_offset_for(9, 100) == (-1, -1)
    assert cache.epoch_for_offset(15) == 3 and cache.epoch_for_offset(-1) is None
    # a new epoch starting earlier removes the conflicting entries
    assert cache.assign(4, 15)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(4, 15)]
    assert cache.truncate_from_end(12)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 10)]
    assert cache.truncate_from_start(11)
    assert cache.entries == [EpochEntry(3, 11)]
    assert LeaderEpochCache.load(tmp_path).entries == [EpochEntry(3, 11)]
    cache.clear()
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_partition_metadata_bytes() -> None:
    raw = encode_partition_metadata(METADATA_TOPIC_ID)
    assert raw == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert decode_partition_metadata(raw) == METADATA_TOPIC_ID
    assert decode_partition_metadata(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n") == METADATA_TOPIC_ID
    for bad in (b"version: 0\n", b"version: x\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
                b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"):
        with pytest.raises(InconsistentStateError):
            decode_partition_metadata(bad)


def test_producer_snapshot_bytes(tmp_path: Path, fsyncs: list[int]) -> None:
    assert EMPTY_PRODUCER_SNAPSHOT.hex() == "000148674bc700000000"
    entry = ProducerSnapshotEntry(5, 1, 9, 100, 2, 1000, -1, -1)
    raw = encode_producer_snapshot([entry])
    assert len(raw) == 10 + 46 and decode_producer_snapshot(raw) == [entry]
    corrupt = bytearray(raw)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        decode_producer_snapshot(bytes(corrupt))
    snapshots = ProducerSnapshots(tmp_path)
    assert snapshots.take_snapshot(10) and not snapshots.take_snapshot(10) and not snapshots.take_snapshot(0)
    assert (tmp_path / "00000000000000000010.snapshot").read_bytes() == EMPTY_PRODUCER_SNAPSHOT
    snapshots.take_snapshot(20)
    snapshots.take_snapshot(25)
    snapshots.remove_stray([0, 10, 20])
    assert snapshots.offsets == {10, 20, 25}
    snapshots.remove_stray([0, 10, 20, 30])
    assert snapshots.offsets == {10, 20}
    snapshots.delete_after(15)
    assert snapshots.offsets == {10}
    assert ProducerSnapshots(tmp_path).offsets == {10}


def test_uuid_other_topic() -> None:
    other = Uuid.from_longs(1, 2)
    assert decode_partition_metadata(encode_partition_metadata(other)) == other
