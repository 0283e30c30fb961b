"""``kafkabatches``: a PySpark Python Data Source over brokers' log directories, a row per
record batch of every topic-partition copy -- what the replica audit reads, for queries of
one's own in Spark SQL.

Usage (Spark 4.x, ``pyspark.sql.datasource``)::

    spark.dataSource.register(KafkaBatchesDataSource)
    df = (spark.read.format("kafkabatches")
          .option("paths", "/data/b1,/data/b2,b3=/data/other")   # log.dirs, name=DIR or globs
          .option("splitBytes", str(64 << 20))                     # optional
          .option("deep", "true")                                  # optional: decode the records
          .load())
    df.groupBy("topic", "partition", "node").agg(F.max("last_offset")).show()

Options (strings, as Spark passes them):

* ``paths`` -- comma-separated directories, each a path, ``name=DIR`` or a glob, told apart as
  ``kwire audit`` tells them (:func:`tools.audit.broker_dirs.classify_dirs`); only broker log
  directories contribute rows, and only live partition directories (not ``-delete``,
  ``-future`` or ``-stray`` ones).
* ``splitBytes`` -- segments larger than this are read as several input partitions, cut at
  batch starts through their ``.index`` (:func:`tools.audit.scan.segment_cuts`; default 64 MiB).
* ``deep`` -- ``true``: every batch that passes its CRC has its records decompressed and decoded,
  and ``records_error`` says why they do not (:func:`tools.audit.broker_dirs.records_error`).

Columns (:data:`SCHEMA`): the copy (``node``, ``broker_id``, ``topic``, ``partition``), where
the batch lies (``file``, ``position``, ``size`` in bytes), its header (``base_offset``,
``last_offset``, ``leader_epoch``: the partition leader epoch, ``crc``, ``crc_valid``) and
``records_error``. Bytes that cannot be framed as a batch (a torn tail, an impossible size) are
one row with null offsets and ``bad_bytes`` saying why; reading that segment stops there, as
Kafka's recovery does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tools.audit.datasource import arrow_batches
from tools.audit.scan import DEFAULT_SPLIT_BYTES

SCHEMA = (
    "node string, broker_id int, topic string, partition int, file string, position long, size int, "
    "base_offset long, last_offset long, leader_epoch int, crc long, crc_valid boolean, "
    "records_error string, bad_bytes string"
)


class SegmentPartition(InputPartition):
    """Bytes ``[start, end)`` of one copy's segment at ``path``; ``last``: they end the copy's
    last segment."""

    def __init__(self, node: str, broker_id: int | None, topic: str, partition: int, path: str, start: int,
                 end: int, last: bool) -> None:
        self.node, self.broker_id, self.topic, self.partition = node, broker_id, topic, partition
        self.path, self.start, self.end, self.last = path, start, end, last


def plan_segment_parts(items: list[str], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[SegmentPartition]:
    """The input partitions of the broker log directories among ``items``: each segment of
    every live partition copy, cut where :func:`tools.audit.scan.segment_cuts` says. Raises
    ValueError for a directory that is neither a metadata nor a broker log directory."""
    import os

    from tools.audit.broker_dirs import classify_dirs, read_log_dir, segment_paths
    from tools.audit.scan import segment_cuts

    parts = []
    for audit_dir in classify_dirs(items):
        if not audit_dir.broker:
            continue
        log_dir = read_log_dir(audit_dir)
        for part in sorted(log_dir.partitions, key=lambda p: (p.topic, p.partition)):
            if part.suffix is not None:
                continue
            segments = segment_paths(part.path)
            for i, path in enumerate(segments):
                size = os.path.getsize(path)
                bounds = segment_cuts(path, int(os.path.basename(path)[:20]), size, split_bytes) + [size]
                for start, end in zip(bounds, bounds[1:], strict=False):
                    parts.append(SegmentPartition(log_dir.node, log_dir.broker_id, part.topic, part.partition, path,
                                                  start, end, i == len(segments) - 1 and end == size))
    return parts


def read_segment_part(part: SegmentPartition, deep: bool = False) -> Iterator[tuple[Any, ...]]:
    """The rows of one input partition, in :data:`SCHEMA`'s column order."""
    from tools.audit.broker_dirs import iter_segment
    from tools.audit.replica_scan import BadBytes

    copy = (part.node, part.broker_id, part.topic, part.partition)
    for item in iter_segment(part.path, part.last, start=part.start, end=part.end, deep=deep):
        if isinstance(item, BadBytes):
            yield (*copy, item.file, item.position, item.size, None, None, None, None, None, None, item.detail)
        else:
            yield (*copy, item.file, item.position, item.size, item.base_offset, item.last_offset, item.epoch,
                   item.crc, item.crc_valid, item.records_error, None)


class KafkaBatchesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkabatches"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> KafkaBatchesReader:  # noqa: ANN001 - Spark passes a StructType
        return KafkaBatchesReader(dict(self.options))


class KafkaBatchesReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = {key.lower(): value for key, value in options.items()}

    def partitions(self) -> list[SegmentPartition]:
        paths = self.options.get("paths") or self.options.get("path")
        if not paths:
            raise ValueError("kafkabatches needs the option 'paths' (comma-separated broker log directories)")
        parts = plan_segment_parts([p.strip() for p in paths.split(",") if p.strip()],
                                   int(self.options.get("splitbytes") or DEFAULT_SPLIT_BYTES))
        if not parts:  # no segments: one empty partition rather than a plan Spark may reject
            return [SegmentPartition("", None, "", -1, "", 0, 0, False)]
        return parts

    def read(self, partition: SegmentPartition):  # type: ignore[override]  # a generator of Arrow batches
        if not partition.path:
            return
        deep = (self.options.get("deep") or "false").lower() == "true"
        yield from arrow_batches(read_segment_part(partition, deep), sql_schema=SCHEMA)
