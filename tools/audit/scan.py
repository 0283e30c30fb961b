"""Finding a quorum's metadata-log files and turning them into audit rows.

This module is the per-file work shared by the Spark data source (:mod:`tools.audit.datasource`,
one call of :func:`read_rows` per input partition) and by the single-process baseline
:func:`scan_rows_python`. Batch framing, CRCs and records come from :mod:`storage.records` and
:mod:`storage.batch_scan` -- the one implementation of the v2 batch format in kwire; this module
only walks files with it.

Layout read (file names of Kafka's ``LogFileUtils``, ``Snapshots`` and
``LeaderEpochCheckpointFile``)::

    <node dir>/__cluster_metadata-0/<20-digit base offset>.log         segments
    <node dir>/__cluster_metadata-0/<20-digit base offset>.index       sparse offset index
    <node dir>/__cluster_metadata-0/<20-digit end>-<10-digit epoch>.checkpoint   snapshots
    <node dir>/__cluster_metadata-0/leader-epoch-checkpoint

A node dir may also be the ``__cluster_metadata-0`` directory itself.

One row per record, with these columns (:data:`SCHEMA`). A batch whose framing is intact but
whose CRC does not match gives rows with ``crc_valid = false``; bytes that cannot be framed as a
batch (a torn tail, an impossible length or magic) give one row with ``offset = null``,
``crc_valid = false``, ``position``/``batch_size`` covering the unreadable bytes and ``error``
saying why. Nothing here raises for bad file content.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kwire.topics import METADATA_PARTITION_DIR

if TYPE_CHECKING:
    from messages.runtime import Message
    from storage.meta_properties import MetaProperties

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024

SCHEMA = (
    "node string, file string, source string, position long, batch_size int, "
    "base_offset long, last_offset long, offset long, leader_epoch int, batch_crc long, "
    "crc_valid boolean, is_control boolean, control_type int, api_key int, "
    "record_version int, timestamp long, key binary, value binary, record_json string, "
    "error string"
)
COLUMNS = tuple(part.strip().split(" ")[0] for part in SCHEMA.split(","))

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

# Kafka's ControlRecordType (clients/src/main/java/org/apache/kafka/common/record/)
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_CONTROL_KEY = struct.Struct(">hh")
_HEADER_PREFIX = struct.Struct(">qiib")  # BaseOffset, Length, PartitionLeaderEpoch, Magic


@dataclass(frozen=True, slots=True)
class FilePart:
    """A byte range ``[start, end)`` of one file, starting at a batch boundary.

    ``source`` is ``"segment"`` or ``"snapshot"``; ``base_offset`` is the offset in the file
    name (the snapshot end offset for a checkpoint)."""

    node: str
    path: str
    source: str
    base_offset: int
    start: int
    end: int


def node_meta(partition_dir: str) -> MetaProperties | None:
    """The ``meta.properties`` of the node dir holding ``partition_dir`` (the metadata log dir,
    its parent), read as Kafka writes it (:mod:`storage.meta_properties`); None when there is
    none, or when it cannot be read or parsed (a damaged directory is still audited)."""
    from storage.errors import StorageError
    from storage.meta_properties import read_meta_properties

    try:
        return read_meta_properties(os.path.dirname(partition_dir))
    except StorageError:
        return None


@dataclass(frozen=True, slots=True)
class NodeDir:
    """One node directory given to the audit, before it is named: ``explicit`` is the name of
    ``name=dir`` (None without one), ``dir_name`` the node dir's basename, ``node_id`` and
    ``directory_id`` come from its ``meta.properties`` (None when absent)."""

    partition_dir: str
    dir_name: str
    explicit: str | None = None
    node_id: int | None = None
    directory_id: str | None = None


def node_names(dirs: Sequence[NodeDir]) -> list[str]:
    """The audit's name of each of ``dirs``, in order: the explicit name when given; else the
    ``node.id`` of its ``meta.properties``; when another unnamed directory has the same node id,
    its ``directory.id``; without either (no ``meta.properties``, or a shared node id and no
    directory id or one another unnamed directory holds too) its directory name. Raises ValueError when two names are still equal."""
    shared = Counter(d.node_id for d in dirs if d.explicit is None and d.node_id is not None)
    copies = Counter(d.directory_id for d in dirs if d.explicit is None and d.directory_id is not None)
    names: list[str] = []
    for d in dirs:
        if d.explicit is not None:
            names.append(d.explicit)
        elif d.node_id is not None and shared[d.node_id] == 1:
            names.append(str(d.node_id))
        elif d.node_id is not None and d.directory_id is not None and copies[d.directory_id] == 1:
            names.append(d.directory_id)
        else:
            names.append(d.dir_name)
    by_name: dict[str, list[str]] = {}
    for name, d in zip(names, dirs, strict=True):
        by_name.setdefault(name, []).append(d.partition_dir)
    dupes = {name: where for name, where in by_name.items() if len(where) > 1}
    if dupes:
        detail = "; ".join(f"{name!r} for {', '.join(where)}" for name, where in sorted(dupes.items()))
        raise ValueError(f"duplicate node names: {detail}; name them explicitly as name=DIR")
    return names


def named_item(raw: str) -> tuple[str | None, str] | None:
    """``(name, path)`` of a ``name=path`` item, ``(None, path)`` of a plain one (also of a path
    that holds ``=`` and exists), None for a blank one."""
    item = raw.strip()
    if not item:
        return None
    if "=" in item and not os.path.exists(item):
        name, item = item.split("=", 1)
        return name, item
    return None, item


def parse_node_dirs(spec: str | Sequence[str]) -> list[tuple[str, str]]:
    """``[(node name, partition dir)]`` from ``"dirA,dirB"`` or ``"name=dir,..."`` (or a list of
    such items). A node dir is a metadata log dir or its ``__cluster_metadata-0``; an item
    without ``name=`` is named by :func:`node_names` from the ``meta.properties`` of the
    metadata log dir, falling back to its basename. Raises ValueError when names collide or
    the list is empty."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    dirs: list[NodeDir] = []
    for raw in items:
        named = named_item(raw)
        if named is None:
            continue
        name, item = named
        path = os.path.abspath(item)
        if os.path.basename(path) == METADATA_PARTITION_DIR:
            partition_dir = path
        else:
            partition_dir = os.path.join(path, METADATA_PARTITION_DIR)
        dir_name = os.path.basename(os.path.dirname(partition_dir))
        meta = None if name else node_meta(partition_dir)
        dirs.append(NodeDir(
            partition_dir, dir_name, explicit=name or None,
            node_id=meta.node_id if meta else None,
            directory_id=str(meta.directory_id) if meta and meta.directory_id else None,
        ))
    if not dirs:
        raise ValueError("no node directories given")
    return list(zip(node_names(dirs), (d.partition_dir for d in dirs), strict=True))


def input_bytes(nodes: Sequence[tuple[str, str]]) -> int:
    """Total size in bytes of the segment and snapshot files the scan would read in the
    partition dirs of ``nodes`` (``[(name, partition dir)]``); a missing dir counts 0. The files
    are those of :func:`plan_file_parts`, taken whole (no index is read)."""
    return sum(p.end - p.start for p in plan_file_parts(nodes, split_bytes=sys.maxsize))


def _batch_base_at(fd: int, position: int, base_offset: int) -> int | None:
    """The base offset of the batch whose header starts at ``position`` of a segment (base
    offset ``base_offset``), None unless the bytes there look like one: magic 2, a base offset
    at or past the segment's, a length a batch can have."""
    head = os.pread(fd, _HEADER_PREFIX.size, position)
    if len(head) < _HEADER_PREFIX.size:
        return None
    offset, length, _epoch, magic = _HEADER_PREFIX.unpack(head)
    return offset if magic == 2 and offset >= base_offset and length >= 49 else None


def segment_cuts(path: str, base_offset: int, size: int, split_bytes: int) -> list[int]:
    """Byte positions to cut the segment at ``path`` (``size`` bytes, base offset
    ``base_offset``) into parts of about ``split_bytes``, starting with 0: positions taken from
    its ``.index`` (entries point at batch starts, Kafka's ``OffsetIndex``), each used only if
    the bytes there look like a batch start of this segment, so a stale or corrupt index can
    only make parts larger, never misframe them. ``[0]`` when it is small or has no index."""
    return [position for position, _ in segment_cut_offsets(path, base_offset, size, split_bytes)]


def segment_cut_offsets(path: str, base_offset: int, size: int, split_bytes: int) -> list[tuple[int, int]]:
    """:func:`segment_cuts` with the base offset of the batch at each cut:
    ``(position, offset)`` pairs, ``(0, base_offset)`` first."""
    from storage.errors import StorageError
    from storage.index import read_offset_index

    cuts = [(0, base_offset)]
    index_path = path[: -len(".log")] + ".index"
    if size <= split_bytes or not os.path.exists(index_path):
        return cuts
    try:
        with open(index_path, "rb") as f:
            entries = read_offset_index(f.read(), base_offset)
    except (OSError, StorageError):
        return cuts
    fd = os.open(path, os.O_RDONLY)
    try:
        for _offset, position in entries:
            if cuts[-1][0] + split_bytes <= position < size:
                offset = _batch_base_at(fd, position, base_offset)
                if offset is not None:
                    cuts.append((position, offset))
    finally:
        os.close(fd)
    return cuts


def index_entry_position(data: bytes, base_offset: int, offset: int) -> int | None:
    """The position of the last entry at or below ``offset`` of the ``.index`` bytes ``data``
    (base offset ``base_offset``); None when there is none or ``data`` is not whole slots. A
    binary search over the raw 8-byte slots, a slot past the first with relative offset 0 (the
    pre-sized, unwritten tail) reading as above every offset: for an index in offset order, the
    entry :func:`storage.index.read_offset_index`'s list gives."""
    from storage.index import OFFSET_ENTRY

    if len(data) % OFFSET_ENTRY.size:
        return None
    target = offset - base_offset

    def above(slot: int) -> bool:  # false up to the entry wanted, true after it
        relative, _ = OFFSET_ENTRY.unpack_from(data, slot * OFFSET_ENTRY.size)
        return bool(relative > target or (slot > 0 and relative == 0))

    i = bisect_left(range(len(data) // OFFSET_ENTRY.size), True, key=above) - 1
    if i < 0:
        return None
    position: int = OFFSET_ENTRY.unpack_from(data, i * OFFSET_ENTRY.size)[1]
    return position


def index_position(path: str, base_offset: int, offset: int) -> int:
    """The byte position in the segment at ``path`` (base offset ``base_offset``) to read from
    to meet the batch holding ``offset``, or the first batch after it: the position of its
    ``.index``'s last entry at or below ``offset`` (an entry names a batch's last offset or, in
    older files, its base offset and the batch's position; either lies at or before the batch
    wanted), used only if the bytes there look like the start of a batch at or below
    ``offset``. 0 without a usable index. The entry is found by binary search
    (:func:`index_entry_position`; a 1 GiB segment's index has about 262,000): an index out of
    order can only yield another batch start or none, checked as above."""
    try:
        with open(path[: -len(".log")] + ".index", "rb") as f:
            position = index_entry_position(f.read(), base_offset, offset)
    except OSError:
        return 0
    if position is None:
        return 0
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        base = _batch_base_at(fd, position, base_offset)
    finally:
        os.close(fd)
    return position if base is not None and base <= offset else 0


def plan_file_parts(
    nodes: Sequence[tuple[str, str]], split_bytes: int = DEFAULT_SPLIT_BYTES
) -> list[FilePart]:
    """One part per file; segments larger than ``split_bytes`` are cut where
    :func:`segment_cuts` says."""
    parts: list[FilePart] = []
    for node, pdir in nodes:
        try:
            names = sorted(os.listdir(pdir))
        except OSError:
            continue
        for name in names:
            path = os.path.join(pdir, name)
            snap = SNAPSHOT_RE.match(name)
            if snap:
                parts.append(
                    FilePart(node, path, "snapshot", int(snap.group(1)), 0, os.path.getsize(path))
                )
                continue
            seg = SEGMENT_RE.match(name)
            if not seg:
                continue
            base = int(seg.group(1))
            size = os.path.getsize(path)
            bounds = segment_cuts(path, base, size, split_bytes) + [size]
            for start, end in zip(bounds, bounds[1:], strict=False):
                parts.append(FilePart(node, path, "segment", base, start, end))
    return parts


_CONTROL_CLASSES: dict[int, type[Message]] | None = None
_TYPE_NAMES: dict[int, str] = {}


def _control_classes() -> dict[int, type[Message]]:
    """Control type -> message class (imported once per process)."""
    global _CONTROL_CLASSES
    if _CONTROL_CLASSES is None:
        from messages.generated.kraft_version_record import KRaftVersionRecord
        from messages.generated.leader_change_message import LeaderChangeMessage
        from messages.generated.snapshot_footer_record import SnapshotFooterRecord
        from messages.generated.snapshot_header_record import SnapshotHeaderRecord
        from messages.generated.voters_record import VotersRecord

        _CONTROL_CLASSES = {
            2: LeaderChangeMessage,
            3: SnapshotHeaderRecord,
            4: SnapshotFooterRecord,
            5: KRaftVersionRecord,
            6: VotersRecord,
        }
    return _CONTROL_CLASSES


def _record_type_name(api_key: int) -> str:
    """:func:`messages.metadata.record_type_name`, memoized (it is called once per row)."""
    name = _TYPE_NAMES.get(api_key)
    if name is None:
        from messages.metadata import record_type_name

        name = _TYPE_NAMES[api_key] = record_type_name(api_key)
    return name


def _decode_control(key: bytes | None, value: bytes | None) -> tuple[int | None, int | None, str]:
    """``(control type, value version, json)`` of a control record."""
    if key is None or len(key) < 4:
        raise ValueError(f"control record key of {0 if key is None else len(key)} bytes")
    key_version, control_type = _CONTROL_KEY.unpack_from(key, 0)
    if key_version < 0:
        raise ValueError(f"negative control record key version {key_version}")
    cls = _control_classes().get(control_type)
    name = CONTROL_TYPE_NAMES.get(control_type, "UNKNOWN")
    if cls is None or value is None:
        return control_type, None, json.dumps({"type": name})
    message = cls.decode(value, 0)
    return control_type, 0, json.dumps({"type": name, "version": 0, "data": message.to_json(0)})


def read_rows(part: FilePart) -> Iterator[tuple]:
    """The rows (tuples in :data:`COLUMNS` order) of one file part. Never raises for bad
    content; an unreadable file gives one error row."""
    from messages.metadata import decode_record
    from storage.batch_scan import next_batch_size
    from storage.errors import CorruptRecordError
    from storage.records import RecordBatch

    file_name = os.path.basename(part.path)

    def bad_bytes(position: int, size: int, message: str) -> tuple:
        return (
            part.node, file_name, part.source, position, size, None, None, None, None, None,
            False, None, None, None, None, None, None, None, None, message,
        )

    try:
        with open(part.path, "rb") as f:
            f.seek(part.start)
            data = memoryview(f.read(part.end - part.start))
    except OSError as exc:
        yield bad_bytes(part.start, 0, f"unreadable file: {exc}")
        return

    pos = 0
    while pos < len(data):
        try:
            size = next_batch_size(data, pos)
            if size is None:
                yield bad_bytes(
                    part.start + pos, len(data) - pos,
                    f"torn batch: {len(data) - pos} bytes at the end of the range",
                )
                return
            batch = RecordBatch(data[pos : pos + size])
        except CorruptRecordError as exc:
            yield bad_bytes(part.start + pos, len(data) - pos, f"unframeable bytes: {exc}")
            return
        crc_valid = batch.is_valid()
        head = (
            part.node, file_name, part.source, part.start + pos, size, batch.base_offset,
            batch.last_offset,
        )
        epoch = batch.partition_leader_epoch
        is_control = batch.is_control
        try:
            records = batch.records()
        except Exception as exc:  # InvalidRecordError, CompressionError: bad bytes, not a bug
            yield head + (
                None, epoch, batch.crc, False, is_control, None, None, None,
                batch.max_timestamp, None, None, None, f"undecodable records: {exc}",
            )
            pos += size
            continue
        for record in records:
            control_type = api_key = version = None
            record_json = error = None
            try:
                if is_control:
                    control_type, version, record_json = _decode_control(record.key, record.value)
                elif record.value is not None:
                    message, version = decode_record(record.value)
                    api_key = type(message).API_KEY
                    assert api_key is not None  # every metadata record class has one
                    record_json = json.dumps(
                        {
                            "type": _record_type_name(api_key),
                            "version": version,
                            "data": message.to_json(version),
                        }
                    )
                else:
                    error = "data record without a value"
            except Exception as exc:  # DecodeError and friends: report, keep going
                error = f"undecodable value: {exc}"
                if not is_control and record.value is not None and len(record.value) >= 2:
                    api_key = record.value[1] if record.value[1] < 0x80 else None
            yield head + (
                record.offset, epoch, batch.crc, crc_valid, is_control, control_type, api_key,
                version, record.timestamp, record.key, record.value, record_json, error,
            )
        pos += size


def scan_rows_python(dirs: Sequence[str] | str, split_bytes: int = DEFAULT_SPLIT_BYTES) -> int:
    """Scan the same files as the ``kraftlog`` data source, doing the same per-row work, in
    this one process; returns the number of rows. The baseline the Spark path is timed against."""
    count = 0
    for part in plan_file_parts(parse_node_dirs(dirs), split_bytes):
        for _row in read_rows(part):
            count += 1
    return count
