"""Property tests of the small files of a log directory and the names of its files.

* Producer snapshots (``ProducerStateManager.writeSnapshot`` / ``readSnapshot``): any entries
  round-trip; the CRC-32C covers the count and the entries, so any flipped bit there (or in the
  CRC) is refused, as is any length that is not header + count x 46 bytes.
* ``meta.properties`` (``MetaProperties`` in ``java.util.Properties`` syntax): any cluster id,
  node id and directory id round-trip, whatever characters the cluster id holds.
* ``partition.metadata`` (``PartitionMetadataFile``): any non-zero topic id round-trips.
* File names (``LogFileUtils``, ``Snapshots``): offsets and snapshot ids round-trip through their
  zero-padded names, and names of other shapes are not taken for them.
"""

from __future__ import annotations

import datetime
import string
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.uuid import ZERO_UUID, Uuid
from storage.errors import CorruptRecordError, FormatError, InconsistentStateError
from storage.meta_properties import MetaProperties, decode_meta_properties, encode_meta_properties
from storage.partition_metadata import decode_partition_metadata, encode_partition_metadata
from storage.producer_snapshot import (
    ProducerSnapshotEntry,
    decode_producer_snapshot,
    encode_producer_snapshot,
    offset_from_snapshot_name,
    producer_snapshot_path,
)
from storage.segment import filename_prefix, offset_from_file_name
from storage.snapshot_format import SnapshotId
from storage.snapshots import parse_snapshot_path, snapshot_path
from tests.properties import examples

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.binary(min_size=16, max_size=16).map(Uuid)

producer_entries = st.lists(
    st.builds(ProducerSnapshotEntry, int64, int16, int32, int64, int32, int64, int32, int64),
    max_size=6,
)

# ---------------------------------------------------------------------------------------------
# producer snapshots


@settings(deadline=None, max_examples=examples(80))
@given(entries=producer_entries)
def test_producer_snapshot_round_trip_and_size(entries: list[ProducerSnapshotEntry]) -> None:
    raw = encode_producer_snapshot(entries)
    assert len(raw) == 10 + 46 * len(entries)
    assert struct.unpack_from(">hIi", raw)[0::2] == (1, len(entries))
    assert decode_producer_snapshot(raw) == entries


@settings(deadline=None, max_examples=examples(80))
@given(entries=producer_entries, data=st.data())
def test_producer_snapshot_with_a_flipped_bit_is_refused(
    entries: list[ProducerSnapshotEntry], data: st.DataObject
) -> None:
    raw = bytearray(encode_producer_snapshot(entries))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))  # the version too: it must be 1
    raw[bit // 8] ^= 0x80 >> (bit % 8)
    with pytest.raises(CorruptRecordError):
        decode_producer_snapshot(bytes(raw))


@settings(deadline=None, max_examples=examples(60))
@given(entries=producer_entries, extra=st.binary(min_size=1, max_size=50), data=st.data())
def test_producer_snapshot_of_the_wrong_length_is_refused(
    entries: list[ProducerSnapshotEntry], extra: bytes, data: st.DataObject
) -> None:
    raw = encode_producer_snapshot(entries)
    if data.draw(st.booleans()) and len(raw) > 10:
        body = raw[6 : data.draw(st.integers(6, len(raw) - 1))]  # cut inside the entries
    else:
        body = raw[6:] + extra
    # a CRC that matches the changed body: only the length check can refuse it
    resealed = raw[:2] + struct.pack(">I", crc32c.crc32c(body)) + body
    with pytest.raises(CorruptRecordError):
        decode_producer_snapshot(resealed)


# ---------------------------------------------------------------------------------------------
# meta.properties and partition.metadata

cluster_ids = st.text(
    alphabet=st.characters(codec="utf-8"), min_size=1, max_size=30
) | st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=22, max_size=22)


@settings(deadline=None, max_examples=examples(80))
@given(
    version=st.sampled_from([0, 1]),
    cluster_id=st.none() | cluster_ids,
    node_id=st.none() | int32,
    directory_id=st.none() | uuids,
)
def test_meta_properties_round_trip(
    version: int, cluster_id: str | None, node_id: int | None, directory_id: Uuid | None
) -> None:
    if version == 1 and node_id is None:
        node_id = 0
    meta = MetaProperties(version, cluster_id, node_id, directory_id)
    raw = encode_meta_properties(meta, now=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC))
    assert raw.startswith(b"#\n#")  # the empty comment, then the date line
    assert decode_meta_properties(raw) == meta


@settings(deadline=None)
@given(node_id=int32, cluster_id=cluster_ids)
def test_meta_properties_version_1_needs_a_node_id(node_id: int, cluster_id: str) -> None:
    with pytest.raises(ValueError):
        encode_meta_properties(MetaProperties(1, cluster_id, None, None))
    raw = encode_meta_properties(MetaProperties(1, cluster_id, node_id, None))
    without = b"\n".join(line for line in raw.split(b"\n") if not line.startswith(b"node.id="))
    with pytest.raises(FormatError):
        decode_meta_properties(without)


@settings(deadline=None)
@given(topic_id=uuids.filter(lambda u: u != ZERO_UUID))
def test_partition_metadata_round_trip(topic_id: Uuid) -> None:
    raw = encode_partition_metadata(topic_id)
    assert raw == b"version: 0\ntopic_id: " + str(topic_id).encode()
    assert decode_partition_metadata(raw) == topic_id
    # Kafka's reader splits on ":" and any whitespace after it
    assert decode_partition_metadata(raw.replace(b": ", b":  \t")) == topic_id


def test_partition_metadata_of_the_zero_uuid_is_refused() -> None:
    with pytest.raises(InconsistentStateError):
        decode_partition_metadata(encode_partition_metadata(ZERO_UUID))


# ---------------------------------------------------------------------------------------------
# file names

offsets = st.integers(0, 2**63 - 1)


@settings(deadline=None)
@given(offset=offsets, suffix=st.sampled_from([".log", ".index", ".timeindex", ".log.deleted", ".log.swap"]))
def test_segment_file_names_round_trip(offset: int, suffix: str) -> None:
    name = filename_prefix(offset) + suffix
    assert len(filename_prefix(offset)) == 20
    assert offset_from_file_name(name) == offset


@settings(deadline=None)
@given(stem=st.text(alphabet="0123456789ab", max_size=22).filter(lambda s: not (len(s) == 20 and s.isdigit())))
def test_other_segment_names_are_not_segments(stem: str) -> None:
    assert offset_from_file_name(stem + ".log") is None


@settings(deadline=None)
@given(offset=offsets)
def test_producer_snapshot_names_round_trip(offset: int) -> None:
    path = producer_snapshot_path(Path("/d"), offset)
    assert path.name == f"{offset:020d}.snapshot"
    assert offset_from_snapshot_name(path.name) == offset
    assert offset_from_snapshot_name(path.name + ".deleted") is None
    assert offset_from_snapshot_name(f"{offset:020d}.log") is None


@settings(deadline=None, max_examples=examples(80))
@given(end=offsets, epoch=st.integers(0, 2**31 - 1),
       suffix=st.sampled_from(["", ".part", ".deleted"]))
def test_snapshot_names_round_trip(end: int, epoch: int, suffix: str) -> None:
    snapshot_id = SnapshotId(end, epoch)
    path = Path(str(snapshot_path(Path("/d"), snapshot_id)) + suffix)
    assert path.name == f"{end:020d}-{epoch:010d}.checkpoint{suffix}"
    parsed = parse_snapshot_path(path)
    assert parsed is not None
    assert (parsed.snapshot_id, parsed.partial, parsed.deleted) == (snapshot_id, suffix == ".part",
                                                                      suffix == ".deleted")


@settings(deadline=None, max_examples=examples(120))
@given(end=offsets, epoch=st.integers(0, 2**31 - 1), suffix=st.sampled_from(["", ".part", ".deleted"]),
       data=st.data())
def test_a_snapshot_name_with_one_character_changed_is_refused(
    end: int, epoch: int, suffix: str, data: st.DataObject
) -> None:
    # Snapshots.parse reads the digits at fixed places and the suffix at the end: a changed
    # digit gives another id, anything else that changes makes the name not a snapshot's
    name = f"{end:020d}-{epoch:010d}.checkpoint{suffix}"
    at = data.draw(st.integers(0, len(name) - 1))
    is_digit_place = at < 20 or 21 <= at < 31
    pool = "0123456789" if is_digit_place and data.draw(st.booleans()) else "-._xyzCK"
    char = data.draw(st.sampled_from(pool).filter(lambda c: c != name[at]))
    changed = name[:at] + char + name[at + 1 :]
    parsed = parse_snapshot_path(Path("/d") / changed)
    if is_digit_place and char.isdigit():
        assert parsed is not None
        assert parsed.snapshot_id == SnapshotId(int(changed[:20]), int(changed[21:31]))
    else:
        assert parsed is None, changed
