"""``bootstrap.checkpoint`` and the metadata.version table it refers to.

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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kwire.wire import DecodeError
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.metadata import decode_record, encode_record
from messages.runtime import Message
from storage.errors import FormatError
from storage.fileio import atomic_write, io_errors
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, build_snapshot_batches, read_snapshot_content

BOOTSTRAP_FILE = "bootstrap.checkpoint"
METADATA_VERSION_FEATURE = "metadata.version"
KRAFT_VERSION_FEATURE = "kraft.version"


@dataclass(frozen=True, slots=True)
class MetadataVersion:
    """One ``MetadataVersion``: its feature level, its ``<release>-IV<n>`` name, and whether it
    is production-ready (at or below ``LATEST_PRODUCTION``)."""

    level: int
    release: str
    iv: int
    production: bool

    @property
    def name(self) -> str:
        """The ``<release>-IV<n>`` form, e.g. ``3.9-IV0`` (``MetadataVersion.version()``)."""
        return f"{self.release}-IV{self.iv}"

    def __str__(self) -> str:
        return self.name


# (level, release, IV) of every ``MetadataVersion`` with a feature level: 3.0-IV1 .. 3.3-IV2 as
# Kafka 3.9 has them (4.x starts at MINIMUM_VERSION 3.3-IV3, level 7), the rest as Kafka 4.4.0's
# enum has them. Production is 4.4.0's verdict: LATEST_PRODUCTION = 4.4-IV2 (level 33), 4.5-IV0
# unstable (Kafka 3.9.2 stops at 4.0-IV1 and its LATEST_PRODUCTION is 3.9-IV0, level 21).
# compat/test_storage_interop.py compares this table with every pinned release's jar.
_LATEST_PRODUCTION_LEVEL = 33
METADATA_VERSIONS: tuple[MetadataVersion, ...] = tuple(
    MetadataVersion(level, release, iv, level <= _LATEST_PRODUCTION_LEVEL)
    for level, release, iv in (
        (1, "3.0", 1), (2, "3.1", 0), (3, "3.2", 0),
        (4, "3.3", 0), (5, "3.3", 1), (6, "3.3", 2), (7, "3.3", 3),
        (8, "3.4", 0), (9, "3.5", 0), (10, "3.5", 1), (11, "3.5", 2),
        (12, "3.6", 0), (13, "3.6", 1), (14, "3.6", 2),
        (15, "3.7", 0), (16, "3.7", 1), (17, "3.7", 2), (18, "3.7", 3), (19, "3.7", 4),
        (20, "3.8", 0), (21, "3.9", 0),
        (22, "4.0", 0), (23, "4.0", 1), (24, "4.0", 2), (25, "4.0", 3),
        (26, "4.1", 0), (27, "4.1", 1), (28, "4.2", 0), (29, "4.2", 1), (30, "4.3", 0),
        (31, "4.4", 0), (32, "4.4", 1), (33, "4.4", 2), (34, "4.5", 0),
    )
)
MINIMUM_BOOTSTRAP_VERSION = METADATA_VERSIONS[3]  # 3.3-IV0 (MetadataVersion.MINIMUM_BOOTSTRAP_VERSION)
DEFAULT_RELEASE_VERSION = METADATA_VERSIONS[20]  # 3.9-IV0: KIP-853 dynamic quorums, no 4.x features
_BY_LEVEL = {mv.level: mv for mv in METADATA_VERSIONS}
LATEST_PRODUCTION = _BY_LEVEL[_LATEST_PRODUCTION_LEVEL]
_VERSION_TEXT = re.compile(r"^(\d+\.\d+)(?:-IV(\d+))?$")


def metadata_version_from_level(level: int) -> MetadataVersion:
    """The MetadataVersion with feature level ``level`` (``MetadataVersion.fromFeatureLevel``).
    Raises ValueError for a level kwire does not know."""
    try:
        return _BY_LEVEL[level]
    except KeyError:
        raise ValueError(f"No MetadataVersion with feature level {level}") from None


def metadata_version_from_string(text: str) -> MetadataVersion:
    """``"3.9"`` (the release's last IV) or ``"3.7-IV2"`` (``MetadataVersion.fromVersionString``).
    Raises ValueError."""
    match = _VERSION_TEXT.match(text.strip())
    if match:
        release, iv = match.group(1), match.group(2)
        candidates = [mv for mv in METADATA_VERSIONS if mv.release == release]
        if iv is not None:
            candidates = [mv for mv in candidates if mv.iv == int(iv)]
        if candidates:
            return candidates[-1]
    raise ValueError(
        f"Unknown release version '{text}'. Supported versions are: "
        f"{MINIMUM_BOOTSTRAP_VERSION.name} to {_BY_LEVEL[_LATEST_PRODUCTION_LEVEL].name}"
    )


# ---------------------------------------------------------------------------------------------
# Features other than metadata.version (``org.apache.kafka.server.common.Feature`` and its
# ``FeatureVersion`` enums: KRaftVersion, TransactionVersion, GroupVersion,
# EligibleLeaderReplicasVersion, ShareVersion, StreamsVersion).


@dataclass(frozen=True, slots=True)
class FeatureVersion:
    """One level of a feature: the metadata.version level from which formatting picks it by
    default (``bootstrapMetadataVersion``) and the levels of other features it needs
    (``dependencies``)."""

    level: int
    bootstrap_metadata_level: int
    dependencies: tuple[tuple[str, int], ...] = ()


# Kafka 4.4.0's PRODUCTION_FEATURES, every level production-ready (latestProduction is each
# feature's highest level). Level 0 of each bootstraps at 4.4's MINIMUM_VERSION, 3.3-IV3 (7).
FEATURES: dict[str, tuple[FeatureVersion, ...]] = {
    "eligible.leader.replicas.version": (
        FeatureVersion(0, 7), FeatureVersion(1, 26, ((METADATA_VERSION_FEATURE, 23),)),
    ),
    "group.version": (FeatureVersion(0, 7), FeatureVersion(1, 22)),
    KRAFT_VERSION_FEATURE: (FeatureVersion(0, 7), FeatureVersion(1, 21)),
    "share.version": (FeatureVersion(0, 7), FeatureVersion(1, 28), FeatureVersion(2, 31)),
    "streams.version": (FeatureVersion(0, 7), FeatureVersion(1, 29)),
    "transaction.version": (FeatureVersion(0, 7), FeatureVersion(1, 24), FeatureVersion(2, 24)),
}
_MINIMUM_FEATURE_METADATA_LEVEL = 7  # MetadataVersion.MINIMUM_VERSION of Kafka 4.x (3.3-IV3)


def default_feature_level(name: str, metadata_version: MetadataVersion) -> int:
    """``Feature.defaultLevel(mv)``: the highest level of ``name`` whose bootstrap
    metadata.version is at or below ``metadata_version``; 0 when none is. Raises KeyError for
    an unknown feature."""
    level = 0
    for version in FEATURES[name]:
        if version.bootstrap_metadata_level <= metadata_version.level:
            level = version.level
    return level


def validate_feature_levels(levels: Mapping[str, int]) -> None:
    """``Feature.fromFeatureLevel`` + ``Feature.validateVersion`` for every feature of
    ``levels`` (which holds metadata.version too): each level exists and each dependency is met.
    Raises ValueError with Kafka's messages."""
    metadata_level = levels.get(METADATA_VERSION_FEATURE)
    for name, level in sorted(levels.items()):
        if name == METADATA_VERSION_FEATURE:
            continue
        version = next((v for v in FEATURES[name] if v.level == level), None)
        if version is None:
            raise ValueError(f"No feature:{name} with feature level {level}")
        if level >= 1 and (metadata_level is None or metadata_level < _MINIMUM_FEATURE_METADATA_LEVEL):
            minimum = _BY_LEVEL[_MINIMUM_FEATURE_METADATA_LEVEL]
            raise ValueError(
                f"{name} could not be set to {level} because it depends on "
                f"{METADATA_VERSION_FEATURE}={minimum.level} ({minimum})"
            )
        for dependency, required in version.dependencies:
            if levels.get(dependency, 0) < required:
                raise ValueError(
                    f"{name} could not be set to {level} because it depends on {dependency} level {required}"
                )


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
