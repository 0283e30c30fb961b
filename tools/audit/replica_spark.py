"""The replica audit on Spark: the segments of every partition copy are read in parallel, in
parts of at most ``split_bytes`` cut at batch boundaries through each segment's ``.index``
(:func:`tools.audit.scan.segment_cuts`, as the metadata-log audit cuts its segments), so one
huge partition is read by many tasks. Partitions of at most ``split_bytes`` (all copies) are
read and judged (:func:`tools.audit.replicas.judge_partition`) each by one task, in a job with no
shuffle (a shuffle stage costs about a second here); the parts of larger ones are read in a
second job whose summaries are grouped by partition and judged after the shuffle. Units are
packed into tasks of about ``split_bytes`` (:func:`pack_units`); only the verdicts come back to
the driver.

The work per byte is the same as the one-process audit's (:func:`tools.audit.replicas.
audit_replicas`): framing, CRC32C, the checks. Runs on any master: ``local[N]``, or a
standalone cluster's ``spark://host:port`` whose workers run this interpreter with kwire
installed and see the same paths.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tools.audit.broker_dirs import (
    AuditDir,
    ReadAhead,
    add_item,
    iter_segment,
    open_replica,
    segment_paths,
)
from tools.audit.history import MetadataHistory
from tools.audit.replica_checks import BadBytes, BatchSummary, ReplicaView
from tools.audit.replicas import (
    Copies,
    PartitionVerdict,
    ReplicaAuditResult,
    add_verdict,
    judge_partition,
    new_result,
    off_disk_view,
    plan_replicas,
)
from tools.audit.scan import DEFAULT_SPLIT_BYTES, segment_cuts

__all__ = ["ReplicaPart", "Unit", "audit_replicas_spark", "pack_units", "plan_parts", "plan_units"]

MIN_SPLIT_BYTES = DEFAULT_SPLIT_BYTES
MAX_SPLIT_BYTES = 1 << 30
"""The default task size's bounds: a PySpark task costs tens of milliseconds of scheduling and
worker hand-off before it reads a byte (about 30 ms of wall time per task on ``local[2]`` on
the 2-core machines), so a task should read hundreds of megabytes; and four tasks per core
balance the load."""

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


@dataclass(frozen=True, slots=True)
class Unit:
    """What one task does for one partition: ``whole`` -- read every part of its copies and
    judge it there; else read the one part in ``parts`` and ship the summaries to the partition's
    judging task."""

    key: tuple[str, int]
    parts: tuple[ReplicaPart, ...]
    whole: bool

    @property
    def weight(self) -> int:
        return sum(p.end - p.start for p in self.parts)


def plan_units(copies: Copies, split_bytes: int) -> list[Unit]:
    """A partition whose copies hold at most ``split_bytes`` in all is one unit, judged where it
    is read (no shuffle); a larger one is a unit per part, judged after a shuffle."""
    by_key: dict[tuple[str, int], list[ReplicaPart]] = {key: [] for key in copies}
    for part in plan_parts(copies, split_bytes):
        by_key[(part.topic, part.partition)].append(part)
    units = []
    for key, parts in by_key.items():
        if sum(p.end - p.start for p in parts) <= split_bytes:
            units.append(Unit(key, tuple(parts), True))
        else:
            units += [Unit(key, (p,), False) for p in parts]
    return units


def pack_units(units: Sequence[Unit], bins: int) -> list[list[Unit]]:
    """``units`` in ``bins`` tasks of about equal bytes (largest first, each to the lightest
    task so far): a Spark task costs tens of milliseconds before it reads a byte, so thousands
    of small partitions go as a few tasks, as Spark's file sources pack files into input splits."""
    tasks: list[list[Unit]] = [[] for _ in range(max(1, min(bins, len(units))))]
    heap = [(0, i) for i in range(len(tasks))]
    for unit in sorted(units, key=lambda u: u.weight, reverse=True):
        load, i = heapq.heappop(heap)
        tasks[i].append(unit)
        heapq.heappush(heap, (load + unit.weight, i))
    return [t for t in tasks if t]


Shipped = tuple[str, Any]
"""``("verdict", PartitionVerdict)`` or ``("summaries", (node, [summary, ...]))``."""


def run_task(units: Iterable[Unit], copies: Copies, history: MetadataHistory | None,
             present: set[int], deep: bool = False) -> list[tuple[tuple[str, int], Shipped]]:
    """One Spark task: each whole unit read and judged, each part read (``deep``: records
    decoded too)."""
    out: list[tuple[tuple[str, int], Shipped]] = []
    units = list(units)
    ahead = ReadAhead([(p.path, p.start, p.end) for unit in units for p in unit.parts])
    first = 0
    for unit in units:
        if unit.parts:
            ahead.reading(first)
            first += len(unit.parts)
        read = [(part.node, list(iter_segment(part.path, part.last, start=part.start, end=part.end, deep=deep)))
                for part in unit.parts]
        if unit.whole:
            out.append((unit.key, ("verdict", judge_group(unit.key, read, copies, history, present))))
        else:
            out += [(unit.key, ("summaries", item)) for item in read]
    return out


def finish_group(key: tuple[str, int], shipped: Iterable[Shipped], copies: Copies, history: MetadataHistory | None,
                 present: set[int]) -> PartitionVerdict:
    """A split partition's verdict, judged from its parts' summaries after the shuffle."""
    return judge_group(key, [payload for _, payload in shipped], copies, history, present)


def judge_group(key: tuple[str, int], items: Iterable[tuple[str, list[BatchSummary | BadBytes]]], copies: Copies,
                history: MetadataHistory | None, present: set[int]) -> PartitionVerdict:
    """One partition's verdict from the summaries its parts gave (a Spark task): each copy's
    view is opened from its directory and filled in file order."""
    topic, partition = key
    views: dict[str, ReplicaView] = {}
    for log_dir, part in copies[key]:
        views[log_dir.node] = off_disk_view(log_dir, topic, partition) if part is None else open_replica(log_dir, part)
    summaries = [(node, item) for node, rows in items for item in rows]
    for node, item in sorted(summaries, key=lambda i: (i[0], i[1].file, i[1].position)):
        add_item(views[node], item)
    return judge_partition(topic, partition, list(views.values()), history, present)


def audit_replicas_spark(
    spark: Any,  # noqa: ANN401 - pyspark.sql.SparkSession, imported lazily
    dirs: Sequence[AuditDir],
    history: MetadataHistory | None,
    split_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
    deep: bool = False,
) -> ReplicaAuditResult:
    """:func:`tools.audit.replicas.audit_replicas` with the reading and the judging spread over
    ``spark``'s executors (module docstring); the same result. ``split_bytes`` None: the
    segment bytes over four tasks per core, between :data:`MIN_SPLIT_BYTES` and
    :data:`MAX_SPLIT_BYTES`."""
    plan = plan_replicas(dirs)
    result = new_result(plan, history)
    sc = spark.sparkContext
    if split_bytes is None:
        on_disk = sum(os.path.getsize(path) for found in plan.copies.values() for _, part in found if part is not None
                      for path in segment_paths(part.path))
        split_bytes = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, on_disk // (4 * sc.defaultParallelism)))
    units = plan_units(plan.copies, split_bytes)
    whole = [u for u in units if u.whole]
    pieces = [u for u in units if not u.whole]
    slots = sc.defaultParallelism
    whole_tasks = pack_units(whole, max(slots, -(-sum(u.weight for u in whole) // split_bytes)))
    piece_tasks = pack_units(pieces, max(slots, -(-sum(u.weight for u in pieces) // split_bytes)))
    if progress:
        progress(f"auditing {len(plan.copies)} partitions in {len(plan.log_dirs)} log directories on {sc.master}: "
                 f"{len(whole)} read and judged whole in {len(whole_tasks)} tasks, "
                 f"{len({u.key for u in pieces})} in {len(pieces)} parts in {len(piece_tasks)} tasks")
    copies, known, present = sc.broadcast(plan.copies), sc.broadcast(history), plan.present
    verdicts: list[PartitionVerdict] = []
    if whole_tasks:  # no shuffle: each task returns its partitions' verdicts
        verdicts += (
            sc.parallelize(whole_tasks, len(whole_tasks))
            .flatMap(lambda task: run_task(task, copies.value, known.value, present, deep))
            .map(lambda shipped: shipped[1][1])
            .collect()
        )
    if piece_tasks:
        groups = max(1, min(len({u.key for u in pieces}), slots * 4))
        verdicts += (
            sc.parallelize(piece_tasks, len(piece_tasks))
            .flatMap(lambda task: run_task(task, copies.value, known.value, present, deep))
            .groupByKey(groups)
            .map(lambda group: finish_group(group[0], group[1], copies.value, known.value, present))
            .collect()
        )
    for verdict in sorted(verdicts, key=lambda v: (v.report.topic, v.report.partition)):
        add_verdict(result, verdict)
    copies.unpersist()
    known.unpersist()
    return result
