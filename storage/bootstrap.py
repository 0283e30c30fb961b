"""``bootstrap.checkpoint``: the bootstrap metadata a formatted directory holds (the feature
tables it refers to are in ``storage.features``).

Mirrors ``org.apache.kafka.metadata.bootstrap.BootstrapDirectory`` / ``BootstrapMetadata`` and
``metadata.util.BatchFileWriter``. ``kafka-storage format`` writes the file into every
formatted directory; the first active controller copies its records into the log. It is laid
out exactly like a snapshot with epoch 0, offsets from 0 and no kraft.version records::

    offset 0     control batch   SnapshotHeader{version 0, lastContainedLogTimestamp 0}
    offset 1..n  data batch      FeatureLevelRecord(metadata.version) v0 first, then one
                                 FeatureLevelRecord v0 per other feature with level > 0,
                                 sorted by name (never kraft.version) [+ SCRAM records]
    offset n+1   control batch   SnapshotFooter{version 0}

Each batch's timestamps are the time of writing. Written as ``bootstrap.checkpoint.tmp``, then
renamed (kwire also fsyncs the file and the directory).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kwire.wire import DecodeError
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.metadata import decode_record, encode_record
from messages.runtime import Message
from storage.errors import FormatError
from storage.features import (
    DEFAULT_RELEASE_VERSION,
    FEATURES,
    KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    MetadataVersion,
    default_feature_level,
)
from storage.fileio import atomic_write, io_errors
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, build_snapshot_batches, read_snapshot_content

BOOTSTRAP_FILE = "bootstrap.checkpoint"

def bootstrap_records(
    metadata_version: MetadataVersion, features: Mapping[str, int] | None = None
) -> list[tuple[Message, int]]:
    """``BootstrapMetadata.fromVersions``: ``(record, version)`` pairs, FeatureLevelRecord v0 for
    metadata.version first, then one per other feature of ``features`` (name -> level) with a
    level > 0, by name; kraft.version is never written here (it lives in the snapshot's control
    records). Levels are not validated (see :func:`validate_feature_levels`)."""
    records: list[tuple[Message, int]] = [
        (FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=metadata_version.level), 0)
    ]
    for name in sorted(features or {}):
        if name in (METADATA_VERSION_FEATURE, KRAFT_VERSION_FEATURE):
            continue
        level = (features or {})[name]
        if level > 0:
            records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
    return records


def encode_bootstrap_checkpoint(records: Sequence[tuple[Message, int]], now_ms: int) -> bytes:
    """The whole ``bootstrap.checkpoint`` file: ``records`` (``(metadata record, version)``
    pairs, framed by ``messages.metadata.encode_record``) between a SnapshotHeader
    (LastContainedLogTimestamp 0) and a SnapshotFooter, epoch 0, offsets from 0, every batch
    timestamped ``now_ms`` (``BatchFileWriter``). Raises EncodeError for a record that is not
    a metadata record or lacks that version."""
    values = [encode_record(message, version) for message, version in records]
    return b"".join(
        build_snapshot_batches(
            BOOTSTRAP_SNAPSHOT_ID,
            last_contained_log_timestamp=0,
            records=values,
            append_time_ms=now_ms,
        )
    )


def write_bootstrap_checkpoint(
    directory: str | os.PathLike[str], records: Sequence[tuple[Message, int]], now_ms: int
) -> Path:
    """Write ``<directory>/bootstrap.checkpoint`` (``BootstrapDirectory.writeBinaryFile``).
    Raises KafkaStorageError."""
    path = Path(directory) / BOOTSTRAP_FILE
    atomic_write(path, encode_bootstrap_checkpoint(records, now_ms))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path.with_name(BOOTSTRAP_FILE + ".tmp"))
    return path


@dataclass(frozen=True, slots=True)
class BootstrapMetadata:
    """The records of a bootstrap file and the metadata.version among them
    (``org.apache.kafka.metadata.bootstrap.BootstrapMetadata``): ``records`` are ``(metadata
    record, version)`` pairs in file order, ``metadata_version_level`` the feature level of the
    metadata.version record, ``source`` a description of where they came from, for messages."""

    records: list[tuple[Message, int]]
    metadata_version_level: int
    source: str

    @property
    def feature_levels(self) -> dict[str, int]:
        """Feature name -> level of every FeatureLevelRecord, metadata.version included (the
        last record wins for a name listed twice)."""
        return {
            m.name: m.feature_level for m, _ in self.records if isinstance(m, FeatureLevelRecord)
        }

    @classmethod
    def from_records(cls, records: list[tuple[Message, int]], source: str) -> BootstrapMetadata:
        """Wrap ``records`` (``BootstrapMetadata.fromRecords``), taking the level of the last
        metadata.version FeatureLevelRecord. Raises FormatError when there is none."""
        level: int | None = None
        for message, _ in records:
            if isinstance(message, FeatureLevelRecord) and message.name == METADATA_VERSION_FEATURE:
                level = message.feature_level
        if level is None:
            raise FormatError(
                f"No FeatureLevelRecord for {METADATA_VERSION_FEATURE} was found in the bootstrap "
                f"metadata from {source}"
            )
        return cls(records, level, source)


def decode_bootstrap_checkpoint(data: bytes, source: str = BOOTSTRAP_FILE) -> BootstrapMetadata:
    """The records of a ``bootstrap.checkpoint`` file's bytes
    (``BootstrapDirectory.readFromBinaryFile``); ``source`` names the file in messages.

    Raises CorruptRecordError / InvalidRecordError for bad batches, FormatError for records
    that do not decode or lack metadata.version."""
    records = _decode_records(read_snapshot_content(data).data_records(), source)
    return BootstrapMetadata.from_records(records, f"the binary bootstrap metadata file: {source}")


def _decode_records(values: Iterable[bytes | None], source: str) -> list[tuple[Message, int]]:
    """``(record, version)`` of each non-null value; FormatError naming ``source`` for one that
    does not decode."""
    records: list[tuple[Message, int]] = []
    for value in values:
        if value is None:
            continue
        try:
            records.append(decode_record(value))
        except DecodeError as exc:
            raise FormatError(f"undecodable record in {source}: {exc}") from exc
    return records


def read_bootstrap_checkpoint(directory: str | os.PathLike[str]) -> BootstrapMetadata | None:
    """The bootstrap metadata in ``<directory>/bootstrap.checkpoint``, None when the directory
    has no such file. Raises KafkaStorageError when it cannot be read, and as
    :func:`decode_bootstrap_checkpoint` when it is invalid."""
    path = Path(directory) / BOOTSTRAP_FILE
    with io_errors(f"reading {path}"):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
    return decode_bootstrap_checkpoint(data, str(path))


def bootstrap_from_checkpoint_records(
    values: Iterable[bytes | None], source: str
) -> BootstrapMetadata | None:
    """The bootstrap metadata kept in the 0-0 checkpoint's data records (Kafka 4.2+'s layout),
    None when they hold no metadata.version FeatureLevelRecord (3.9's layout keeps them in
    ``bootstrap.checkpoint``). Raises FormatError for a record that does not decode."""
    records = _decode_records(values, source)
    if not any(
        isinstance(m, FeatureLevelRecord) and m.name == METADATA_VERSION_FEATURE for m, _ in records
    ):
        return None
    return BootstrapMetadata.from_records(records, source)


def default_bootstrap_metadata() -> BootstrapMetadata:
    """What a node formatted without bootstrap records starts a log with: kwire's default
    release version (:data:`DEFAULT_RELEASE_VERSION`) and its default feature levels."""
    levels = {name: default_feature_level(name, DEFAULT_RELEASE_VERSION) for name in FEATURES}
    return BootstrapMetadata(
        bootstrap_records(DEFAULT_RELEASE_VERSION, levels),
        DEFAULT_RELEASE_VERSION.level,
        "the default bootstrap",
    )
