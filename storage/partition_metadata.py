"""``partition.metadata``: the topic id of the partition directory.

Mirrors ``PartitionMetadataFile`` / ``PartitionMetadata.encode`` / ``PartitionMetadataReadBuffer``.
Exactly these bytes, with no trailing newline, for the metadata log::

    version: 0\\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ

Written through ``partition.metadata.tmp`` + fsync + rename (+ directory fsync).
"""

from __future__ import annotations

import re
from pathlib import Path

from kwire.uuid import ZERO_UUID, Uuid
from storage.errors import InconsistentStateError
from storage.fileio import atomic_write, io_errors

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0
_WHITESPACE = re.compile(r":\s+")


def encode_partition_metadata(topic_id: Uuid) -> bytes:
    """The whole file for ``topic_id``: ``version: 0\\ntopic_id: <base64 uuid>`` in UTF-8, no
    trailing newline (``PartitionMetadata.encode``). Raises nothing."""
    return f"version: {CURRENT_VERSION}\ntopic_id: {topic_id}".encode()


def decode_partition_metadata(data: bytes, location: str = PARTITION_METADATA_FILE) -> Uuid:
    """The topic id in the file's bytes (``PartitionMetadataReadBuffer.read``); ``location``
    only names the file in error messages. Raises InconsistentStateError when malformed, of a
    version below 0, or holding the zero uuid."""
    lines = data.decode("utf-8", "replace").splitlines()
    if len(lines) < 2:
        raise InconsistentStateError(f"Malformed line in partition metadata file ({location})")
    version_parts = _WHITESPACE.split(lines[0])
    if len(version_parts) != 2:
        raise InconsistentStateError(f"Malformed line in partition metadata file ({location}): {lines[0]!r}")
    try:
        version = int(version_parts[1])
    except ValueError as exc:
        raise InconsistentStateError(f"Malformed line in partition metadata file ({location}): {lines[0]!r}") from exc
    if version < CURRENT_VERSION:
        raise InconsistentStateError(f"Unrecognized version of partition metadata file ({location}): {version}")
    id_parts = _WHITESPACE.split(lines[1])
    if len(id_parts) != 2:
        raise InconsistentStateError(f"Malformed line in partition metadata file ({location}): {lines[1]!r}")
    try:
        topic_id = Uuid.from_string(id_parts[1])
    except ValueError as exc:
        raise InconsistentStateError(f"Malformed topic id in partition metadata file ({location})") from exc
    if topic_id == ZERO_UUID:
        raise InconsistentStateError(f"Invalid topic ID in partition metadata file ({location})")
    return topic_id


def ensure_partition_metadata(partition_dir: Path, topic_id: Uuid) -> None:
    """Write ``partition.metadata`` if missing; if present, check it names ``topic_id``
    (``UnifiedLog.initializeTopicId``). Raises InconsistentStateError on a different id and
    KafkaStorageError on I/O failure."""
    path = partition_dir / PARTITION_METADATA_FILE
    with io_errors(f"reading {path}"):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = None
    if data is None:
        atomic_write(path, encode_partition_metadata(topic_id))
        return
    found = decode_partition_metadata(data, str(path))
    if found != topic_id:
        raise InconsistentStateError(
            f"Tried to assign topic ID {topic_id} to log for {partition_dir.name}, but log "
            f"already contained topic ID {found}"
        )
