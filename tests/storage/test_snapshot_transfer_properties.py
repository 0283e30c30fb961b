"""Property tests of snapshot files as they travel and as they are cut short
(``FileRawSnapshotWriter`` / ``FileRawSnapshotReader``, ``RecordsSnapshotReader``,
``BootstrapDirectory``).

* A frozen snapshot read in random slices (as FetchSnapshot serves it: any position, any size,
  batch-aligned or not) and appended in that order to a follower's writer freezes into the same
  bytes, which read back as the same records, header, kraft.version and voters.
* Any proper prefix of a snapshot is refused whole when it ends inside a batch, and read as a
  snapshot without its footer when it ends between batches; the header alone is read from any
  prefix holding the first batch, and refused from a shorter one.
* ``bootstrap.checkpoint`` round-trips any feature levels: the metadata.version record first,
  then the other features with a level above 0, by name, never kraft.version.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire.uuid import Uuid
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from storage.batch_scan import iter_batches
from storage.bootstrap import (
    bootstrap_records,
    decode_bootstrap_checkpoint,
    encode_bootstrap_checkpoint,
    read_bootstrap_checkpoint,
    write_bootstrap_checkpoint,
)
from storage.errors import CorruptRecordError
from storage.features import KRAFT_VERSION_FEATURE, METADATA_VERSION_FEATURE, METADATA_VERSIONS
from storage.snapshot_format import (
    SnapshotId,
    build_snapshot_batches,
    read_snapshot_batches,
    read_snapshot_content,
    read_snapshot_header,
)
from storage.snapshots import RawSnapshotReader, RawSnapshotWriter, read_snapshot, write_snapshot
from tests.properties import examples
from tests.storage.test_snapshot_properties import partition_dir

slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

values_st = st.lists(st.integers(1, 200).map(lambda n: bytes([n % 251 + 1]) * n), max_size=20)

voters_st = st.lists(
    st.builds(
        Voter,
        voter_id=st.integers(0, 2**31 - 1),
        voter_directory_id=st.binary(min_size=16, max_size=16).map(Uuid),
        endpoints=st.lists(st.builds(Endpoint, name=st.sampled_from(["CONTROLLER", "C2"]),
                                     host=st.sampled_from(["localhost", "10.0.0.1"]),
                                     port=st.integers(1, 65535)), max_size=2, unique_by=lambda e: e.name),
        kraft_version_feature=st.just(KRaftVersionFeature(min_supported_version=0, max_supported_version=1)),
    ),
    min_size=1, max_size=3, unique_by=lambda v: v.voter_id,
).map(lambda voters: VotersRecord(version_=0, voters=voters))


def snapshot_bytes(records: list[bytes], timestamp: int, voters: VotersRecord | None, max_batch: int) -> bytes:
    return b"".join(build_snapshot_batches(
        SnapshotId(len(records) + 3, 2), last_contained_log_timestamp=timestamp, records=records,
        append_time_ms=11, kraft_version=1 if voters is not None else 0, voters=voters,
        max_batch_bytes=max_batch))


@settings(slow, max_examples=examples(30))
@given(records=values_st, timestamp=st.integers(0, 2**41), voters=st.none() | voters_st,
       max_batch=st.integers(100, 600), data=st.data())
def test_a_snapshot_fetched_in_any_slices_freezes_into_the_same_snapshot(
    records: list[bytes], timestamp: int, voters: VotersRecord | None, max_batch: int, data: st.DataObject
) -> None:
    snapshot_id = SnapshotId(len(records) + 3, 2)
    with partition_dir() as leader, partition_dir() as follower:
        write_snapshot(leader, snapshot_id, last_contained_log_timestamp=timestamp, records=records,
                       append_time_ms=11, kraft_version=1 if voters is not None else 0, voters=voters,
                       max_batch_bytes=max_batch)
        with RawSnapshotReader.open(leader, snapshot_id) as reader, RawSnapshotWriter(follower, snapshot_id) as writer:
            size = reader.size_in_bytes
            position = 0
            while position < size:
                want = data.draw(st.integers(1, 700), label="max bytes")
                piece = reader.read(position, want)
                assert len(piece) == min(want, size - position)
                writer.append(piece)
                position += len(piece)
            assert reader.read(size, 10) == b"" and writer.size_in_bytes == size
            path = writer.freeze()
        assert path.read_bytes() == (leader / path.name).read_bytes()
        content = read_snapshot(follower, snapshot_id)
        assert content.data_records() == records
        assert content.last_contained_log_timestamp == timestamp and content.has_footer
        assert content.kraft_version == (1 if voters is not None else 0)
        assert content.voters == voters
        assert [p.name for p in follower.iterdir()] == [path.name]  # no .part file left


@settings(slow, max_examples=examples(40))
@given(records=values_st, timestamp=st.integers(0, 2**41), max_batch=st.integers(100, 600), data=st.data())
def test_a_snapshot_cut_short_is_refused_inside_a_batch_and_footless_between_batches(
    records: list[bytes], timestamp: int, max_batch: int, data: st.DataObject
) -> None:
    whole = snapshot_bytes(records, timestamp, None, max_batch)
    ends = []
    for batch in iter_batches(whole):
        ends.append((ends[-1] if ends else 0) + batch.size_in_bytes)
    cut = data.draw(st.integers(0, len(whole) - 1) | st.sampled_from(ends[:-1] or [0]), label="cut")
    prefix = whole[:cut]
    if cut in ends:  # whole batches: a snapshot without its footer, holding the records so far
        content = read_snapshot_content(prefix)
        assert not content.has_footer
        kept = content.data_records()
        assert kept == records[:len(kept)]
        assert read_snapshot_batches(prefix).header.last_contained_log_timestamp == timestamp
    else:
        with pytest.raises(CorruptRecordError):
            read_snapshot_batches(prefix)
    # the header is read from the first batch alone
    if cut >= ends[0]:
        assert read_snapshot_header(prefix).last_contained_log_timestamp == timestamp
    else:
        with pytest.raises(CorruptRecordError):
            read_snapshot_header(prefix)


feature_levels = st.dictionaries(
    st.sampled_from(["group.version", "transaction.version", "eligible.leader.replicas.version",
                     "streams.version", "share.version", KRAFT_VERSION_FEATURE, "test.feature.a"]),
    st.integers(0, 5), max_size=6,
)


@settings(slow, max_examples=examples(40))
@given(metadata_version=st.sampled_from(METADATA_VERSIONS), features=feature_levels,
       now=st.integers(0, 2**41))
def test_bootstrap_checkpoint_round_trips_any_feature_levels(
    metadata_version: object, features: dict[str, int], now: int
) -> None:
    records = bootstrap_records(metadata_version, features)  # type: ignore[arg-type]
    names = [m.name for m, _ in records]  # type: ignore[attr-defined]
    assert names[0] == METADATA_VERSION_FEATURE
    assert names[1:] == sorted(n for n, level in features.items() if level > 0 and n != KRAFT_VERSION_FEATURE)
    data = encode_bootstrap_checkpoint(records, now)
    assert {b.max_timestamp for b in iter_batches(data)} == {now}
    decoded = decode_bootstrap_checkpoint(data)
    assert decoded.metadata_version_level == metadata_version.level  # type: ignore[attr-defined]
    assert [(m, v) for m, v in decoded.records] == records
    assert decoded.feature_levels == {METADATA_VERSION_FEATURE: metadata_version.level, **{  # type: ignore[attr-defined]
        n: level for n, level in features.items() if level > 0 and n != KRAFT_VERSION_FEATURE}}
    assert all(isinstance(m, FeatureLevelRecord) for m, _ in decoded.records)
    with partition_dir() as directory:
        write_bootstrap_checkpoint(directory, records, now)
        assert (directory / "bootstrap.checkpoint").read_bytes() == data
        read = read_bootstrap_checkpoint(directory)
        assert read is not None and read.records == decoded.records
        assert read.metadata_version_level == decoded.metadata_version_level
