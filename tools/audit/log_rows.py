"""The metadata-log audit's rows in Spark: the ``kraftlog`` data source's rows cached as the
temp view ``kraftlog_rows``, and the runner that answers many small SQL queries over them with
one Spark action (:func:`collect_together`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tools.audit.scan import input_bytes, parse_node_dirs

VIEW = "kraftlog_rows"

SINGLE_PARTITION_BYTES = 16 << 20


def load_rows(
    spark,  # noqa: ANN001
    paths: Sequence[str] | str,
    split_bytes: int | None = None,
    single_partition_bytes: int = SINGLE_PARTITION_BYTES,
):  # noqa: ANN201 - a pyspark DataFrame (pyspark is imported lazily)
    """Register the ``kraftlog`` data source, read ``paths`` (node dirs, ``name=dir`` allowed,
    as a list or one comma-separated string) and cache the rows as the temp view
    ``kraftlog_rows``; returns the cached DataFrame (``unpersist()`` it when done). Nothing is
    read until the first action.

    Inputs of at most ``single_partition_bytes`` bytes of segment and snapshot files are
    cached as one partition: Spark then knows every row is in the same partition, so the
    checks' aggregates, windows and joins run as one task each without a shuffle -- for the
    megabytes a metadata log usually holds, scheduling the shuffles costs more than the work.
    Larger inputs are cached in as many partitions as Spark runs tasks at once (at least 2).
    Raises ValueError for an empty or duplicate node list (see
    :func:`tools.audit.scan.parse_node_dirs`)."""
    from tools.audit.datasource import KRaftLogDataSource

    spec = paths if isinstance(paths, str) else ",".join(paths)
    spark.dataSource.register(KRaftLogDataSource)
    reader = spark.read.format("kraftlog").option("paths", spec)
    if split_bytes is not None:
        reader = reader.option("splitBytes", str(split_bytes))
    # One input partition per file (or index-cut range) is read by one Python call; coalescing
    # (no shuffle) only groups those reads into fewer tasks.
    if input_bytes(parse_node_dirs(spec)) <= single_partition_bytes:
        partitions = 1
    else:
        partitions = max(2, spark.sparkContext.defaultParallelism)
    df = reader.load().coalesce(partitions).cache()
    df.createOrReplaceTempView(VIEW)
    return df


def collect_together(
    spark,  # noqa: ANN001
    queries: dict[str, str],
    args: dict[str, Any] | None = None,
    views: str = "",
) -> dict[str, list[dict[str, Any]]]:
    """Run several small SQL queries as one Spark action; returns ``{name: [row dict, ...]}``
    with a (possibly empty) list for every name of ``queries``.

    Each query's rows are turned into JSON text (``to_json`` of the whole row, nulls kept) under
    its name, and the queries are combined with ``UNION ALL``, so Spark plans, schedules and
    returns them as one job instead of a job or more each -- what costs the time when every
    result is small. ``views`` is a ``WITH`` list (without the keyword) the queries may refer
    to; ``args`` are the named parameters (``:name``) of the whole text. A query's row order is
    not kept (sort the rows in Python); its ``LIMIT`` still applies. Values come back as JSON
    gives them: numbers, strings, booleans, None, lists and dicts (no binary columns)."""
    if not queries:
        return {}
    union = "\nUNION ALL\n".join(
        f"SELECT '{name}' AS query, to_json(struct(*), map('ignoreNullFields', 'false')) AS row"
        f" FROM ({text})"
        for name, text in queries.items()
    )
    text = f"WITH {views}\n{union}" if views else union
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in queries}
    for r in spark.sql(text, args=args or None).collect():
        out[r["query"]].append(json.loads(r["row"]))
    return out


def sorted_rows(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """``rows`` in SQL's ascending order of ``keys`` (nulls first)."""
    return sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in keys))
