"""``meta.properties``: which cluster, node and directory a log directory belongs to.

Mirrors ``org.apache.kafka.metadata.properties.MetaProperties`` / ``PropertiesUtils`` /
``MetaPropertiesEnsemble``. The file is what ``java.util.Properties.store(writer, "")`` writes,
in UTF-8::

    #
    #Wed Nov 20 23:01:02 UTC 2024
    node.id=1
    directory.id=J8aAPcfLQt2bqs1JT_rMgQ
    version=1
    cluster.id=MkU3OEVBNTcwNTJENDM2Qg

Version 1 keys: ``version=1``, ``cluster.id``, ``node.id``, ``directory.id``; version 0 used
``broker.id`` instead of ``node.id``. ``Properties`` does not sort its keys; on Java 17 (Kafka's
usual runtime) they come out in the order of its hash table, which kwire reproduces for these
few keys; readers accept any order. Kafka reads the file as ISO-8859-1 (``Properties.load(
InputStream)``) although it writes UTF-8; kwire reads UTF-8 and falls back to ISO-8859-1.

Written as ``meta.properties.tmp`` + fsync + rename + directory fsync.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from kwire.uuid import Uuid
from storage.errors import FormatError
from storage.fileio import atomic_write, io_errors

META_PROPERTIES_FILE = "meta.properties"
VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
NODE_ID_PROP = "node.id"
BROKER_ID_PROP = "broker.id"
DIRECTORY_ID_PROP = "directory.id"


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The content of ``meta.properties`` (``MetaProperties``)."""

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: Uuid | None = None

    def to_properties(self) -> dict[str, str]:
        """Keys in the order Kafka inserts them (``MetaProperties.toProperties``); version 0 writes
        ``broker.id``, version 1 ``node.id``. Raises ValueError for version 1 without a node
        id."""
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.version == 0:
            if self.node_id is not None:
                props[BROKER_ID_PROP] = str(self.node_id)
        else:
            if self.node_id is None:
                raise ValueError("meta.properties version 1 needs a node id")
            props[NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], location: str = META_PROPERTIES_FILE) -> MetaProperties:
        """Parse (``MetaProperties.Builder(Properties)``); a missing ``version`` means 0 and
        unknown keys are ignored. Raises FormatError for a version other than 0 or 1, a
        version-1 file without ``node.id``, a node id that is not a base-10 int, or a
        ``directory.id`` that is not a Uuid; ``location`` names the file in the message."""
        version_text = props.get(VERSION_PROP, "0")
        if version_text not in ("0", "1"):
            raise FormatError(f"Unknown meta.properties version number {version_text} in {location}")
        version = int(version_text)
        node_id: int | None = None
        key = BROKER_ID_PROP if version == 0 else NODE_ID_PROP
        if key in props:
            try:
                node_id = int(props[key], 10)
            except ValueError:
                raise FormatError(f"Unable to read {key} as a base-10 number in {location}.") from None
        elif version == 1:
            raise FormatError(f"Failed to find {NODE_ID_PROP} in {location}")
        directory_id: Uuid | None = None
        if DIRECTORY_ID_PROP in props:
            try:
                directory_id = Uuid.from_string(props[DIRECTORY_ID_PROP])
            except ValueError as exc:
                raise FormatError(f"Unable to read {DIRECTORY_ID_PROP} as a Uuid: {exc}") from None
        return cls(version, props.get(CLUSTER_ID_PROP), node_id, directory_id)

    def __str__(self) -> str:
        parts = [f"version={self.version}"]
        if self.cluster_id is not None:
            parts.append(f"clusterId={self.cluster_id}")
        if self.node_id is not None:
            parts.append(f"nodeId={self.node_id}")
        if self.directory_id is not None:
            parts.append(f"directoryId={self.directory_id}")
        return f"MetaProperties({', '.join(parts)})"


def _java_string_hash(text: str) -> int:
    # String.hashCode over UTF-16 code units
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java17_properties_order(keys: Iterable[str]) -> list[str]:
    """The order ``Properties.store`` visits a few keys on Java 9-17: the buckets of its
    16-slot ``ConcurrentHashMap`` ascending, insertion order within a bucket (valid up to its
    resize threshold of 12 keys; beyond that, sorted)."""
    ordered = list(keys)
    if len(ordered) > 12:
        return sorted(ordered)

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & 15

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(ordered))]


def encode_meta_properties(meta: MetaProperties, now: datetime.datetime | None = None) -> bytes:
    """The whole file as UTF-8 bytes, as ``Properties.store(writer, "")`` writes it: an empty
    comment, the ``Date.toString()`` line for ``now`` (default: the local time now), then the
    keys in Java 17's order. Raises ValueError as :meth:`MetaProperties.to_properties` does."""
    props = meta.to_properties()
    stamp = now or datetime.datetime.now().astimezone()  # Date.toString(): local time zone
    text = javaproperties.dumps(
        [(k, props[k]) for k in java17_properties_order(props)],
        comments="",
        timestamp=stamp,
        ensure_ascii=False,
    )
    return text.encode("utf-8")


def decode_meta_properties(data: bytes, location: str = META_PROPERTIES_FILE) -> MetaProperties:
    """Parse the file's bytes (UTF-8, else ISO-8859-1) in ``java.util.Properties`` syntax.
    Raises FormatError when the syntax or the values are invalid (see
    :meth:`MetaProperties.from_properties`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    try:
        props = javaproperties.loads(text)
    except Exception as exc:  # javaproperties raises its own parse errors
        raise FormatError(f"cannot parse {location}: {exc}") from exc
    return MetaProperties.from_properties(props, location)


def meta_properties_path(directory: str | os.PathLike[str]) -> Path:
    """``<directory>/meta.properties``; touches no file."""
    return Path(directory) / META_PROPERTIES_FILE


def read_meta_properties(directory: str | os.PathLike[str]) -> MetaProperties | None:
    """None when the directory has no ``meta.properties``. Raises FormatError when it is
    malformed and KafkaStorageError when it cannot be read."""
    path = meta_properties_path(directory)
    with io_errors(f"reading {path}"):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
    return decode_meta_properties(data, str(path))


def write_meta_properties(
    directory: str | os.PathLike[str], meta: MetaProperties, *, fsync: bool = True,
    now: datetime.datetime | None = None,
) -> None:
    """Atomically replace ``meta.properties`` (``PropertiesUtils.writePropertiesFile``).
    Raises KafkaStorageError."""
    atomic_write(meta_properties_path(directory), encode_meta_properties(meta, now), fsync=fsync)


def is_reserved_directory_id(directory_id: Uuid) -> bool:
    """``DirectoryId.reserved``: ids with the high 64 bits 0 and the low below 100."""
    return directory_id.most_significant_bits == 0 and directory_id.least_significant_bits < 100


def generate_directory_id(taken: Iterable[Uuid] = ()) -> Uuid:
    """A fresh directory id (``MetaPropertiesEnsemble.generateValidDirectoryId``): random, not
    reserved, not starting with '-', not already used."""
    used = set(taken)
    while True:
        candidate = Uuid.random()
        if not is_reserved_directory_id(candidate) and candidate not in used:
            return candidate
