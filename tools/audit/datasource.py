"""``kraftlog``: a PySpark Python Data Source over KRaft metadata-log files.

Usage (Spark 4.x, ``pyspark.sql.datasource``)::

    spark.dataSource.register(KRaftLogDataSource)
    df = (spark.read.format("kraftlog")
          .option("paths", "/data/n1,/data/n2,node3=/data/other")   # node dirs, optional names
          .option("splitBytes", str(64 << 20))                      # optional
          .load())

Options (strings, as Spark passes them):

* ``paths`` -- comma-separated node directories (a metadata log dir or its
  ``__cluster_metadata-0``), each optionally ``name=dir``; without a name a node is named by
  :func:`tools.audit.scan.parse_node_dirs` (its ``node.id`` from ``meta.properties``, else the
  directory's basename).
* ``splitBytes`` -- segments larger than this are read as several input partitions, cut at
  batch boundaries found through the ``.index`` (default 64 MiB).

Each input partition is one :class:`tools.audit.scan.FilePart`; rows are produced by
:func:`tools.audit.scan.read_rows` with the columns of :data:`tools.audit.scan.SCHEMA` and handed
to Spark as ``pyarrow.RecordBatch`` es of up to :data:`ARROW_BATCH_ROWS` rows (Spark 4's Arrow
path for Python data sources): the rows are turned into columns by ``zip`` and ``pa.array`` in C,
where yielding tuples would make Spark's worker convert every cell with a Python call.
Planning (``partitions()``) and reading run in Spark's Python workers, which import this
module by name (kwire is installed in the environment); heavy imports happen inside the methods.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tools.audit.scan import COLUMNS, DEFAULT_SPLIT_BYTES, SCHEMA

ARROW_BATCH_ROWS = 8192
# Spark SQL type -> Arrow type, as pyspark's to_arrow_schema maps them (Spark checks that the
# batches' schema equals the one it derives from SCHEMA).
_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool_",
                "binary": "binary"}


def arrow_schema(sql_schema: str = SCHEMA):  # noqa: ANN201 - pyarrow is imported lazily
    """The Arrow schema of a Spark DDL schema string, :data:`tools.audit.scan.SCHEMA` by
    default (every column nullable)."""
    import pyarrow as pa

    fields = []
    for part in sql_schema.split(","):
        name, sql_type = part.split()
        fields.append(pa.field(name, getattr(pa, _ARROW_TYPES[sql_type])(), nullable=True))
    assert sql_schema != SCHEMA or tuple(f.name for f in fields) == COLUMNS
    return pa.schema(fields)


def arrow_batches(rows, batch_rows: int = ARROW_BATCH_ROWS, sql_schema: str = SCHEMA):  # noqa: ANN001, ANN201
    """``rows`` (tuples in the schema's column order) as ``pyarrow.RecordBatch`` es of
    ``batch_rows`` rows."""
    from itertools import islice

    import pyarrow as pa

    schema = arrow_schema(sql_schema)
    types = [f.type for f in schema]
    rows = iter(rows)
    while chunk := list(islice(rows, batch_rows)):
        columns = zip(*chunk, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(col, type=t) for col, t in zip(columns, types, strict=True)], schema=schema
        )


class FilePartition(InputPartition):
    """A picklable input partition carrying one :class:`tools.audit.scan.FilePart`'s fields."""

    def __init__(
        self, node: str, path: str, source: str, base_offset: int, start: int, end: int
    ) -> None:
        self.node = node
        self.path = path
        self.source = source
        self.base_offset = base_offset
        self.start = start
        self.end = end


class KRaftLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kraftlog"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> KRaftLogReader:  # noqa: ANN001 - Spark passes a StructType
        return KRaftLogReader(dict(self.options))


class KRaftLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def _option(self, name: str) -> str | None:
        for key, value in self.options.items():
            if key.lower() == name.lower():
                return value
        return None

    def partitions(self) -> list[FilePartition]:
        from tools.audit.scan import parse_node_dirs, plan_file_parts

        paths = self._option("paths") or self._option("path")
        if not paths:
            raise ValueError("kraftlog needs the option 'paths' (comma-separated node dirs)")
        split = int(self._option("splitBytes") or DEFAULT_SPLIT_BYTES)
        parts = plan_file_parts(parse_node_dirs(paths), split)
        if not parts:  # no files: one empty partition rather than a plan Spark may reject
            return [FilePartition("", "", "none", 0, 0, 0)]
        return [
            FilePartition(p.node, p.path, p.source, p.base_offset, p.start, p.end) for p in parts
        ]

    def read(self, partition: FilePartition):  # type: ignore[override]  # a generator of rows
        from tools.audit.scan import FilePart, read_rows

        if partition.source == "none":
            return

        part = FilePart(
            partition.node,
            partition.path,
            partition.source,
            partition.base_offset,
            partition.start,
            partition.end,
        )
        yield from arrow_batches(read_rows(part))
