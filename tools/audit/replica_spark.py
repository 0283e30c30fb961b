"""The replica audit on Spark: the segments of every partition copy are read in parallel, in
parts of at most ``split_bytes`` cut at batch boundaries through each segment's ``.index``
(:func:`tools.audit.scan.segment_cuts`, as the metadata-log audit cuts its segments), so one
huge partition is read by many tasks; the batch summaries are grouped by partition and each
partition is judged by :func:`tools.audit.replicas.judge_partition` in a Python worker; only
the verdicts come back to the driver.

The work per byte is the same as the one-process audit's (:func:`tools.audit.replicas.
audit_replicas`): framing, CRC32C, the checks. Runs on any master: ``local[N]``, or a
standalone cluster's ``spark://host:port`` whose workers run this interpreter with kwire
installed and see the same paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tools.audit.broker_dirs import (
    AuditDir,
    LogDir,
    PartitionDir,
    add_item,
    iter_segment,
    open_replica,
    segment_paths,
)
from tools.audit.history import MetadataHistory
from tools.audit.replica_checks import BadBytes, BatchSummary, ReplicaView
from tools.audit.replicas import (
    PartitionVerdict,
    ReplicaAuditResult,
    add_verdict,
    judge_partition,
    new_result,
    off_disk_view,
    plan_replicas,
)
from tools.audit.scan import DEFAULT_SPLIT_BYTES, segment_cuts

__all__ = ["ReplicaPart", "audit_replicas_spark", "plan_parts"]

Copies = dict[tuple[str, int], list[tuple[LogDir, PartitionDir | None]]]


@dataclass(frozen=True, slots=True)
class ReplicaPart:
    """Bytes ``[start, end)`` of one copy's segment; ``last``: they end its last segment."""

    node: str
    topic: str
    partition: int
    path: str
    start: int
    end: int
    last: bool


def plan_parts(copies: Copies, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[ReplicaPart]:
    """The parts of every segment of every copy on disk, largest first (so that the big ones
    do not start last)."""
    parts = []
    for (topic, partition), found in copies.items():
        for log_dir, part in found:
            if part is None:
                continue
            segments = segment_paths(part.path)
            for i, path in enumerate(segments):
                size = os.path.getsize(path)
                bounds = segment_cuts(path, int(os.path.basename(path)[:20]), size, split_bytes) + [size]
                for start, end in zip(bounds, bounds[1:], strict=False):
                    parts.append(ReplicaPart(log_dir.node, topic, partition, path, start, end,
                                             i == len(segments) - 1 and end == size))
    parts.sort(key=lambda p: p.end - p.start, reverse=True)
    return parts


def read_part(part: ReplicaPart) -> Iterator[tuple[tuple[str, int], tuple[str, BatchSummary | BadBytes]]]:
    """``((topic, partition), (node, summary))`` for each batch of the part (a Spark task)."""
    key = (part.topic, part.partition)
    for item in iter_segment(part.path, part.last, start=part.start, end=part.end):
        yield key, (part.node, item)


def judge_group(key: tuple[str, int], items: Iterable[tuple[str, BatchSummary | BadBytes]], copies: Copies,
                history: MetadataHistory | None, present: set[int]) -> PartitionVerdict:
    """One partition's verdict from the summaries its parts gave (a Spark task): each copy's
    view is opened from its directory and filled in file order."""
    topic, partition = key
    views: dict[str, ReplicaView] = {}
    for log_dir, part in copies[key]:
        views[log_dir.node] = off_disk_view(log_dir, topic, partition) if part is None else open_replica(log_dir, part)
    for node, item in sorted(items, key=lambda i: (i[0], i[1].file, i[1].position)):
        add_item(views[node], item)
    return judge_partition(topic, partition, list(views.values()), history, present)


def audit_replicas_spark(
    spark: Any,  # noqa: ANN401 - pyspark.sql.SparkSession, imported lazily
    dirs: Sequence[AuditDir],
    history: MetadataHistory | None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    progress: Callable[[str], None] | None = None,
) -> ReplicaAuditResult:
    """:func:`tools.audit.replicas.audit_replicas` with the reading and the judging spread over
    ``spark``'s executors (module docstring); the same result."""
    plan = plan_replicas(dirs)
    result = new_result(plan, history)
    parts = plan_parts(plan.copies, split_bytes)
    if progress:
        progress(f"auditing {len(plan.copies)} partitions in {len(plan.log_dirs)} log directories: "
                 f"{len(parts)} segment parts on {spark.sparkContext.master}")
    sc = spark.sparkContext
    copies, present = sc.broadcast(plan.copies), plan.present
    known = sc.broadcast(history)
    verdicts: list[PartitionVerdict] = []
    if parts:
        groups = max(1, min(len(plan.copies), sc.defaultParallelism * 4))
        verdicts = (
            sc.parallelize(parts, len(parts))
            .flatMap(read_part)
            .groupByKey(groups)
            .map(lambda group: judge_group(group[0], group[1], copies.value, known.value, present))
            .collect()
        )
    judged = {(v.report.topic, v.report.partition) for v in verdicts}
    for topic, partition in plan.copies:  # copies without a single batch
        if (topic, partition) not in judged:
            verdicts.append(judge_group((topic, partition), [], plan.copies, history, present))
    for verdict in sorted(verdicts, key=lambda v: (v.report.topic, v.report.partition)):
        add_verdict(result, verdict)
    copies.unpersist()
    known.unpersist()
    return result
