"""The replica audit on Spark. Partitions of at most ``split_bytes`` (all copies) are read
and judged (:func:`tools.audit.replicas.judge_partition`) each by one task, in a job with no
shuffle (a shuffle stage costs about a second here). A larger partition is cut into offset
ranges of about ``split_bytes`` across its copies, at batch starts its largest copy's segment
names and ``.index`` files give (:func:`range_cuts`), so one huge partition is read by many
tasks; each range's task reads every copy's batches that start in it together
(:func:`tools.audit.replica_checks.scan_copies`) and ships the bounded scan, and the scans are
grouped by partition, joined in offset order and judged after a shuffle. Units are packed into
tasks of about ``split_bytes`` (:func:`pack_units`); the two jobs run at once, so that neither
leaves a slot idle while the other has tasks, and only the verdicts come back to the driver.

The work per byte is the same as the one-process audit's (:func:`tools.audit.replicas.
audit_replicas`): framing, CRC32C, the checks. Runs on any master: ``local[N]``, or a
standalone cluster's ``spark://host:port`` whose workers run this interpreter with kwire
installed and see the same paths.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tools.audit.broker_dirs import AuditDir, CopyReader, ReadAhead
from tools.audit.history import MetadataHistory
from tools.audit.replica_scan import CopyStream, NoBatches
from tools.audit.replicas import (
    PARTITION_COLUMNS,
    Copies,
    Layout,
    PartitionVerdict,
    ReplicaAuditResult,
    add_verdict,
    judge_partition,
    list_segments,
    new_result,
    open_views,
    partition_context,
    plan_replicas,
    scan_partition,
)
from tools.audit.scan import DEFAULT_SPLIT_BYTES, segment_cut_offsets

__all__ = ["Unit", "audit_replicas_spark", "pack_units", "partition_table", "plan_units", "range_cuts"]

MIN_SPLIT_BYTES = DEFAULT_SPLIT_BYTES
MAX_SPLIT_BYTES = 1 << 30
"""The default task size's bounds: a PySpark task costs tens of milliseconds of scheduling and
worker hand-off before it reads a byte (about 30 ms of wall time per task on ``local[2]`` on
the 2-core machines), so a task should read hundreds of megabytes; and four tasks per core
balance the load."""

@dataclass(frozen=True, slots=True)
class Unit:
    """What one task does for one partition: ``whole`` -- read its copies and judge it there;
    else read the batches of its copies that start in ``[lo, hi)`` (None: unbounded) and ship
    their scan to the partition's judging task. ``weight``: about the bytes read."""

    key: tuple[str, int]
    lo: int | None
    hi: int | None
    weight: int
    whole: bool


def plan_units(layout: Layout, split_bytes: int) -> list[Unit]:
    """A partition whose copies hold at most ``split_bytes`` in all is one unit, judged where it
    is read (no shuffle); a larger one is cut into offset ranges (:func:`range_cuts`), a unit
    each, judged after a shuffle."""
    units = []
    for key, segments in layout.items():
        total = sum(size for copy in segments for _, _, size in copy)
        if total <= split_bytes:
            units.append(Unit(key, None, None, total, True))
            continue
        on_disk = [copy for copy in segments if copy]
        largest = max(on_disk, key=lambda copy: sum(size for _, _, size in copy))
        cuts = range_cuts(largest, max(1, split_bytes // len(on_disk)))
        bounds = [(None, 0), *cuts, (None, sum(size for _, _, size in largest))]
        for (lo, start), (hi, end) in zip(bounds, bounds[1:], strict=False):
            units.append(Unit(key, lo, hi, (end - start) * len(on_disk), False))
    return units


def range_cuts(segments: Sequence[tuple[str, int, int]], piece_bytes: int) -> list[tuple[int, int]]:
    """Offsets to cut a copy's segments at into ranges of about ``piece_bytes`` of it, each with
    its byte position counted over the segments (``(offset, position)``, ascending): segment
    starts, and batch starts inside a segment from its ``.index``
    (:func:`tools.audit.scan.segment_cut_offsets`). Every copy is cut at the same offsets, so
    the copies' batches of one range are read and compared by one task."""
    candidates: list[tuple[int, int]] = []
    before = 0
    for i, (path, base, size) in enumerate(segments):
        if i:
            candidates.append((base, before))
        candidates += [(offset, before + position)
                       for position, offset in segment_cut_offsets(path, base, size, piece_bytes) if position]
        before += size
    cuts: list[tuple[int, int]] = []
    last_position = 0
    for offset, position in candidates:
        if position - last_position >= piece_bytes and (not cuts or offset > cuts[-1][0]):
            cuts.append((offset, position))
            last_position = position
    return cuts


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
"""``("verdict", PartitionVerdict)`` or ``("scan", (lo, PartitionScan))``."""


def run_task(units: Iterable[Unit], copies: Copies, layout: Layout, history: MetadataHistory | None,
             present: Mapping[int, str], deep: bool = False) -> list[tuple[tuple[str, int], Shipped]]:
    """One Spark task: each whole unit read and judged, each range of a partition read into
    its scan (``deep``: records decoded too)."""
    out: list[tuple[tuple[str, int], Shipped]] = []
    units = list(units)
    met = [sorted((base, n, path, size) for n, copy in enumerate(layout[u.key]) for path, base, size in copy)
           if u.whole else [] for u in units]  # whole partitions' segments, in the order the scan meets them
    ahead = ReadAhead([(path, 0, size) for segments in met for _, _, path, size in segments])
    first = 0
    for unit, segments in zip(units, met, strict=True):
        if segments:
            ahead.reading(first)
            first += len(segments)
        topic, partition = unit.key
        streams: list[CopyStream] = [
            CopyReader([path for path, _, _ in copy], deep, unit.lo, unit.hi) if copy else NoBatches()
            for copy in layout[unit.key]]
        context, scan = scan_partition(topic, partition, copies[unit.key], history, streams)
        if unit.whole:
            out.append((unit.key, ("verdict", judge_partition(topic, partition, context, scan, present))))
        else:
            out.append((unit.key, ("scan", (-1 if unit.lo is None else unit.lo, scan))))
    return out


def finish_group(key: tuple[str, int], shipped: Iterable[Shipped], copies: Copies, history: MetadataHistory | None,
                 present: Mapping[int, str]) -> PartitionVerdict:
    """A split partition's verdict, judged from its ranges' scans after the shuffle."""
    topic, partition = key
    context = partition_context(topic, partition, open_views(copies[key], topic, partition), history)
    scans = [scan for _, scan in sorted((payload for _, payload in shipped), key=lambda item: item[0])]
    whole = scans[0]
    for later in scans[1:]:
        whole.extend(later, context.views)
    return judge_partition(topic, partition, context, whole, present)


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
    layout = list_segments(plan.copies)
    if split_bytes is None:
        on_disk = sum(size for segments in layout.values() for copy in segments for _, _, size in copy)
        split_bytes = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, on_disk // (4 * sc.defaultParallelism)))
    units = plan_units(layout, split_bytes)
    whole = [u for u in units if u.whole]
    pieces = [u for u in units if not u.whole]
    slots = sc.defaultParallelism
    whole_tasks = pack_units(whole, max(slots, -(-sum(u.weight for u in whole) // split_bytes)))
    piece_tasks = pack_units(pieces, max(slots, -(-sum(u.weight for u in pieces) // split_bytes)))
    if progress:
        progress(f"auditing {len(plan.copies)} partitions in {len(plan.log_dirs)} log directories on {sc.master}: "
                 f"{len(whole)} read and judged whole in {len(whole_tasks)} tasks, "
                 f"{len({u.key for u in pieces})} in {len(pieces)} offset ranges in {len(piece_tasks)} tasks")
    copies, segments, known = sc.broadcast(plan.copies), sc.broadcast(layout), sc.broadcast(history)
    present = plan.present
    jobs: list[Callable[[], list[PartitionVerdict]]] = []
    if piece_tasks:  # the large partitions' ranges, judged after a shuffle
        groups = max(1, min(len({u.key for u in pieces}), slots * 4))
        jobs.append(lambda: (
            sc.parallelize(piece_tasks, len(piece_tasks))
            .flatMap(lambda task: run_task(task, copies.value, segments.value, known.value, present, deep))
            .groupByKey(groups)
            .map(lambda group: finish_group(group[0], group[1], copies.value, known.value, present))
            .collect()
        ))
    if whole_tasks:  # no shuffle: each task returns its partitions' verdicts
        jobs.append(lambda: (
            sc.parallelize(whole_tasks, len(whole_tasks))
            .flatMap(lambda task: run_task(task, copies.value, segments.value, known.value, present, deep))
            .map(lambda shipped: shipped[1][1])
            .collect()
        ))
    # both jobs at once (from two threads, as PySpark allows): a slot one job's last tasks leave
    # idle takes the other's
    with ThreadPoolExecutor(max(1, len(jobs)), thread_name_prefix="kwire-audit-job") as pool:
        verdicts = [v for future in [pool.submit(job) for job in jobs] for v in future.result()]
    for verdict in sorted(verdicts, key=lambda v: (v.report.topic, v.report.partition)):
        add_verdict(result, verdict)
    for broadcast in (copies, segments, known):
        broadcast.unpersist()
    return result


def partition_table(spark: Any, result: ReplicaAuditResult) -> Any:  # noqa: ANN401 - pyspark objects
    """The partition table of ``result``
    (:meth:`~tools.audit.replicas.ReplicaAuditResult.partition_rows`, the rows of
    ``replica_partitions.jsonl``) as a DataFrame of ``spark``, a row per copy of a partition, with
    the columns and types of :data:`~tools.audit.replicas.PARTITION_COLUMNS`; e.g.
    ``partition_table(spark, audit_replicas_spark(spark, dirs, history)).where("verdict <> 'ok'")``."""
    schema = ", ".join(f"{name} {kind}" for name, kind in PARTITION_COLUMNS)
    return spark.createDataFrame([tuple(row[name] for name, _ in PARTITION_COLUMNS)
                                  for row in result.partition_rows()], schema)
