"""The replica audit: every topic-partition found in brokers' log directories, its copies
checked against each other and against the metadata log's history
(:func:`tools.audit.replica_checks.check_partition`), one partition at a time in this process.

Besides the per-partition checks, the directories themselves:

``orphan_partition`` [violation]
    A partition directory whose topic the metadata does not hold (or deleted).
``stray_directory`` [warning]
    A directory Kafka itself renamed ``-stray`` (a replica it found unassigned at start-up).
A log directory whose ``replication-offset-checkpoint`` names a partition it has no directory
for (a copy deleted or lost while the broker was down), while another log directory given has
one, contributes that copy as an empty log with the checkpointed high watermark
(``ReplicaView.on_disk`` false): what it had acknowledged still counts.

``unreadable_checkpoint`` [warning]
    A log directory's offset checkpoint that could not be read (its offsets count as unknown).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.audit.broker_dirs import (
    AuditDir,
    CopyReader,
    LogDir,
    PartitionDir,
    Prefetch,
    open_replica,
    read_log_dir,
    segment_paths,
)
from tools.audit.history import MetadataHistory
from tools.audit.identity import identity_findings
from tools.audit.replica_checks import (
    VIOLATION,
    WARNING,
    CopyStream,
    Finding,
    NoBatches,
    PartitionHistory,
    PartitionReport,
    PartitionScan,
    ReplicaView,
    check_partition,
    compared_pairs,
    planned_reference,
    scan_copies,
)

__all__ = ["Copies", "Layout", "PartitionContext", "ReplicaAuditResult", "audit_replicas", "format_finding", "judge_partition",
           "list_segments", "partition_context", "plan_replicas",
           "scan_partition"]


@dataclass
class ReplicaAuditResult:
    """What :func:`audit_replicas` found: ``log_dirs`` (node, path, broker id, partition
    directories), the metadata log the history came from (None: no history), one report per
    partition, every finding, and the batches and segment bytes read."""

    log_dirs: list[dict[str, Any]]
    metadata_source: str | None
    partitions: list[PartitionReport] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    batches: int = 0
    bytes_read: int = 0
    timelines: dict[tuple[str, int], Timeline] = field(default_factory=dict)
    """For each partition with a finding, its :class:`Timeline`, for the report's plots."""

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == VIOLATION]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def lost(self) -> list[dict[str, Any]]:
        """``{topic, partition, start, end}`` (end exclusive) of every lost offset range."""
        return [{"topic": p.topic, "partition": p.partition, "start": start, "end": end}
                for p in self.partitions for start, end in p.lost]

    def partition_rows(self) -> list[dict[str, Any]]:
        """The partition table: a row per copy of every partition audited (in topic, partition
        and node order), its fields those of :data:`PARTITION_COLUMNS`. ``verdict``: the worst
        severity among the copy's findings (``ok``, ``warning`` or ``violation``);
        ``partition_verdict``: among the partition's; ``findings``: the copy's invariants."""
        by_copy: dict[tuple[str, int, str | None], list[Finding]] = {}
        for f in self.findings:
            by_copy.setdefault((f.topic, f.partition, f.node), []).append(f)
        rows = []
        for p in sorted(self.partitions, key=lambda p: (p.topic, p.partition)):
            everything = [f for (t, n, _), found in by_copy.items() if (t, n) == (p.topic, p.partition) for f in found]
            for node, r in sorted(p.replicas.items()):
                found = by_copy.get((p.topic, p.partition, node), [])
                rows.append({
                    "topic": p.topic, "partition": p.partition, "topic_id": p.topic_id, "node": node,
                    "broker_id": r["broker_id"], "on_disk": r["on_disk"], "log_start_offset": r["log_start"],
                    "log_end_offset": r["log_end"], "high_watermark": r["high_watermark"],
                    "last_leader_epoch": r["last_epoch"], "reference": node == p.reference,
                    "committed_offset": p.committed, "commit_basis": p.basis, "verdict": _verdict(found),
                    "partition_verdict": _verdict(everything), "findings": sorted({f.invariant for f in found}),
                })
        return rows

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for f in self.violations:
            counts[f.invariant] = counts.get(f.invariant, 0) + 1
        return {
            "ok": self.ok,
            "log_dirs": self.log_dirs,
            "metadata_source": self.metadata_source,
            "partitions": len(self.partitions),
            "batches": self.batches,
            "bytes_read": self.bytes_read,
            "violation_counts": counts,
            "violations": len(self.violations),
            "warnings": len(self.warnings),
            "lost": self.lost,
        }


PARTITION_COLUMNS = (
    ("topic", "string"), ("partition", "int"), ("topic_id", "string"), ("node", "string"), ("broker_id", "int"),
    ("on_disk", "boolean"), ("log_start_offset", "bigint"), ("log_end_offset", "bigint"), ("high_watermark", "bigint"),
    ("last_leader_epoch", "int"), ("reference", "boolean"), ("committed_offset", "bigint"), ("commit_basis", "string"),
    ("verdict", "string"), ("partition_verdict", "string"), ("findings", "array<string>"),
)
"""The partition table's columns and their Spark SQL types (:meth:`ReplicaAuditResult.partition_rows`):
per copy, its node (the directory's name) and broker id, log start offset, log end offset (after
its last valid batch), checkpointed high watermark, the leader epoch of its last valid batch,
whether it is the reference the others are judged against; the partition's committed point and
its basis; the verdicts."""


def _verdict(findings: Sequence[Finding]) -> str:
    severities = {f.severity for f in findings}
    return VIOLATION if VIOLATION in severities else WARNING if WARNING in severities else "ok"


Copies = dict[tuple[str, int], list[tuple[LogDir, PartitionDir | None]]]
"""Each partition's copies: its directory in a log directory, or None for a copy known only from
that log directory's high watermark checkpoint."""


@dataclass
class ReplicaPlan:
    """What the directories hold, before any segment is read: the broker log directories, each
    partition's copies (a ``PartitionDir``, or None for a copy known only from the high
    watermark checkpoint), the findings about directories, and the broker ids present."""

    log_dirs: list[LogDir]
    copies: Copies
    findings: list[Finding]
    present: dict[int, str]
    """The broker ids whose log directories were given, each with its (first) directory's name."""


def plan_replicas(dirs: Sequence[AuditDir]) -> ReplicaPlan:
    """Read the broker log directories among ``dirs``: checkpoints and partition directories
    (no segment yet), and what the directories say of themselves
    (:func:`tools.audit.identity.identity_findings`, of every directory given)."""
    log_dirs = [read_log_dir(d) for d in dirs if d.broker]
    findings = identity_findings(dirs, {d.node: [(p.topic, p.partition) for p in d.partitions if p.suffix is None]
                                        for d in log_dirs})
    copies: Copies = {}
    for log_dir in log_dirs:
        for error in log_dir.errors:
            findings.append(Finding("unreadable_checkpoint", WARNING, "", -1, log_dir.node, None, error,
                                    broker_id=log_dir.broker_id))
        for part in log_dir.partitions:
            if part.suffix is None:
                copies.setdefault((part.topic, part.partition), []).append((log_dir, part))
            elif part.suffix == "stray":
                findings.append(Finding("stray_directory", WARNING, part.topic, part.partition, log_dir.node,
                                        None, f"{os.path.basename(part.path)}: Kafka found it stray",
                                        broker_id=log_dir.broker_id))
    for log_dir in log_dirs:  # copies gone from disk whose acknowledged offsets the checkpoint still holds
        held = {(p.topic, p.partition) for p in log_dir.partitions if p.suffix is None}
        for key, mark in log_dir.high_watermarks.items():
            if key not in held and key in copies and mark > 0:
                copies[key].append((log_dir, None))
    present: dict[int, str] = {}
    for d in log_dirs:
        if d.broker_id is not None:
            present.setdefault(d.broker_id, d.node)
    return ReplicaPlan(log_dirs, copies, findings, present)


def off_disk_view(log_dir: LogDir, topic: str, partition: int) -> ReplicaView:
    """A copy the log directory no longer holds, with the high watermark its checkpoint kept."""
    return ReplicaView(log_dir.node, log_dir.broker_id, high_watermark=log_dir.high_watermarks[(topic, partition)],
                       epochs=[], on_disk=False)


@dataclass(frozen=True)
class Timeline:
    """A partition's picture: per copy, ``(start, end, epoch)`` runs of its valid batches of one
    epoch (end exclusive); per leader epoch, the leader and the ISR the metadata gave it (the last
    state of the epoch; empty without history)."""

    spans: dict[str, list[tuple[int, int, int]]]
    leaders: dict[int, tuple[int, tuple[int, ...]]]


@dataclass
class PartitionVerdict:
    """One partition's report, its findings (the orphan ones included), and, when it has a
    finding, each copy's epoch spans for the plots."""

    report: PartitionReport
    findings: list[Finding]
    timeline: Timeline | None
    batches: int
    bytes_read: int


@dataclass
class PartitionContext:
    """What a partition is judged against, known before its batches are read: its copies' facts,
    its history (None: no metadata, or an orphan), the ``orphan_partition`` findings, and the
    ordered pairs of copies the scan must compare."""

    views: list[ReplicaView]
    history: PartitionHistory | None
    orphans: list[Finding]
    pairs: list[tuple[str, str]]


def partition_context(topic: str, partition: int, views: list[ReplicaView],
                      history: MetadataHistory | None) -> PartitionContext:
    """The copies' history in ``history`` and the orphan check: a topic the metadata does not
    hold (or deleted) makes every copy an ``orphan_partition``, judged then without history."""
    orphans: list[Finding] = []
    partition_history = None
    if history is not None:
        topic_id = next((v.topic_id for v in views if v.topic_id is not None), None)
        partition_history = history.lookup(topic, partition, topic_id)
        if partition_history is None or partition_history.topic_id in history.removed:
            gone = topic_id in history.removed if topic_id else False
            for view in views:
                orphans.append(Finding(
                    "orphan_partition", VIOLATION, topic, partition, view.node, None,
                    f"topic {topic} (id {view.topic_id}) is {'deleted in' if gone else 'not in'} the metadata log",
                    broker_id=view.broker_id))
            partition_history = None
    pairs = compared_pairs(views, planned_reference(views, partition_history))
    return PartitionContext(views, partition_history, orphans, pairs)


def open_views(log_dirs_and_parts: Sequence[tuple[LogDir, PartitionDir | None]], topic: str,
               partition: int) -> list[ReplicaView]:
    """Each copy's facts: from its directory, or from the high watermark checkpoint alone."""
    return [off_disk_view(log_dir, topic, partition) if part is None else open_replica(log_dir, part)
            for log_dir, part in log_dirs_and_parts]


Layout = dict[tuple[str, int], list[list[tuple[str, int, int]]]]
"""Per partition, per copy (in the order of its :data:`Copies` entry): its segments as ``(path,
base offset, size)`` in base offset order (none for a copy off disk)."""


def list_segments(copies: Copies) -> Layout:
    """Every copy's segments, listed and sized once."""
    return {key: [[] if part is None else
                  [(path, int(os.path.basename(path)[:20]), os.path.getsize(path)) for path in segment_paths(part.path)]
                  for _, part in found]
            for key, found in copies.items()}


def scan_partition(topic: str, partition: int, found: Sequence[tuple[LogDir, PartitionDir | None]],
                   history: MetadataHistory | None, streams: Sequence[CopyStream]) -> tuple[PartitionContext, PartitionScan]:
    """A partition's context (:func:`partition_context`) and the scan of its copies' ``streams``
    (one per entry of ``found``, in its order)."""
    context = partition_context(topic, partition, open_views(found, topic, partition), history)
    return context, scan_copies(context.views, streams, context.pairs)


def judge_partition(topic: str, partition: int, context: PartitionContext, scan: PartitionScan,
                    present: Mapping[int, str]) -> PartitionVerdict:
    """The checks of one partition's copies (:func:`~tools.audit.replica_checks.check_partition`)
    from what ``scan`` read of them, with the orphan findings."""
    report = check_partition(topic, partition, context.views, scan, context.history, present)
    findings = context.orphans + report.findings
    timeline = None
    if findings:
        leaders = {} if context.history is None else {
            s.leader_epoch: (s.leader, s.isr) for s in context.history.states}
        timeline = Timeline({view.node: scan.copies[view.node].spans() for view in context.views}, leaders)
    copies = scan.copies.values()
    return PartitionVerdict(report, findings, timeline, sum(c.batches for c in copies),
                            sum(c.bytes_read for c in copies))


def new_result(plan: ReplicaPlan, history: MetadataHistory | None) -> ReplicaAuditResult:
    return ReplicaAuditResult(
        [{"node": d.node, "path": d.path, "broker_id": d.broker_id, "directory_id": d.directory_id,
          "cluster_id": d.cluster_id, "partitions": len(d.partitions)}
         for d in plan.log_dirs],
        None if history is None else history.source, findings=list(plan.findings))


def add_verdict(result: ReplicaAuditResult, verdict: PartitionVerdict) -> None:
    report = verdict.report
    result.partitions.append(report)
    result.findings += verdict.findings
    result.batches += verdict.batches
    result.bytes_read += verdict.bytes_read
    if verdict.timeline is not None:
        result.timelines[(report.topic, report.partition)] = verdict.timeline


def audit_replicas(
    dirs: Sequence[AuditDir],
    history: MetadataHistory | None,
    progress: Callable[[str], None] | None = None,
    deep: bool = False,
) -> ReplicaAuditResult:
    """Audit every partition of the broker log directories among ``dirs`` (see the module
    docstring) against ``history`` (None: only the checks that need no metadata), one partition
    at a time in this process, its copies read together in offset order
    (:func:`~tools.audit.replica_checks.scan_copies`), the next segments read ahead on threads
    (:class:`~tools.audit.broker_dirs.Prefetch`, in the order the scan meets them: by base
    offset across the copies); ``deep``: decode every batch's records too. Memory: the prefetch
    window, a read chunk per copy, and each partition's bounded scan and report."""
    plan = plan_replicas(dirs)
    result = new_result(plan, history)
    if progress:
        progress(f"auditing {len(plan.copies)} partitions in {len(plan.log_dirs)} log directories")
    layout = list_segments(plan.copies)
    order = sorted(plan.copies)
    ranges: list[tuple[str, int, int]] = []
    slot: dict[str, int] = {}
    for key in order:  # every segment in the order the scan meets it: by base offset across the copies
        for _, _, path, size in sorted((base, n, path, size) for n, copy in enumerate(layout[key])
                                       for path, base, size in copy):
            slot[path] = len(ranges)
            ranges.append((path, 0, size))
    with Prefetch(ranges) as ahead:
        for topic, partition in order:
            streams: list[CopyStream] = [
                CopyReader(paths, deep, take=_taker(ahead, slot, paths)) if paths else NoBatches()
                for paths in ([path for path, _, _ in copy] for copy in layout[(topic, partition)])]
            context, scan = scan_partition(topic, partition, plan.copies[(topic, partition)], history, streams)
            add_verdict(result, judge_partition(topic, partition, context, scan, plan.present))
    return result


def _taker(ahead: Prefetch, slot: dict[str, int], paths: Sequence[str]) -> Callable[[int], bytes | None]:
    return lambda i: ahead.take(slot[paths[i]])


def format_finding(f: Finding) -> str:
    """One line per finding: ``VIOLATION|WARNING <invariant> topic=.. partition=.. node=..
    offsets=a-b: detail; cause``."""
    where = ""
    if f.offset is not None:
        where = f" offsets={f.offset}-{f.end_offset - 1}" if f.end_offset is not None else f" offset={f.offset}"
    text = (f"{f.severity.upper()} {f.invariant} topic={f.topic} partition={f.partition} node={f.node}{where}: "
            f"{f.detail}")
    return text if f.cause is None else f"{text}; cause: {f.cause}"
