"""The replica audit's outputs: the ``--json`` summary (:func:`json_summary`) and the report
directory (:func:`write_replica_report`).

``--json`` carries, beside the counts, the findings themselves and the partition table, each
capped at ``limit`` entries (:data:`JSON_LIMIT` by default, ``kwire audit --json-limit``) with
the number left out, so that a script reads the common case from stdout alone::

    "findings": {"limit": 100, "violations": [...], "warnings": [...],
                 "left_out": {"violations": 0, "warnings": 0}},
    "partition_table": {"limit": 100, "rows": [...], "left_out": 0}

Each finding is :meth:`~tools.audit.replica_checks.Finding.to_dict` (invariant, severity,
topic, partition, node, broker_id, offset, end_offset, epochs, cause, detail); each table row is
a copy of a partition (:meth:`~tools.audit.replicas.ReplicaAuditResult.partition_rows`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from tools.audit.html_index import Index, Table, write_index
from tools.audit.replica_checks import Finding
from tools.audit.replicas import ReplicaAuditResult

JSON_LIMIT = 100
"""Findings of each severity, and partition-table rows, that ``--json`` carries at most."""
MAX_PARTITION_PLOTS = 50
"""Partitions drawn at most (those with a violation first, then those with a warning)."""
FINDING_COLUMNS = ("invariant", "topic", "partition", "node", "broker_id", "offset", "end_offset", "epochs",
                   "detail", "cause")


def _capped(items: Sequence[Any], limit: int | None) -> tuple[list[Any], int]:
    if limit is None or limit <= 0:
        return list(items), 0
    return list(items[:limit]), max(0, len(items) - limit)


def json_summary(result: ReplicaAuditResult, elapsed_s: float | None = None, limit: int | None = JSON_LIMIT,
                 rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The replica audit's ``--json`` section: :meth:`ReplicaAuditResult.summary`, the elapsed
    seconds, and the capped findings and partition table of the module docstring (``limit``
    None or 0: no cap). ``rows``: the partition table, when computed already."""
    violations, violations_out = _capped([f.to_dict() for f in result.violations], limit)
    warnings, warnings_out = _capped([f.to_dict() for f in result.warnings], limit)
    table, table_out = _capped(result.partition_rows() if rows is None else rows, limit)
    return {
        **result.summary(),
        "elapsed_s": None if elapsed_s is None else round(elapsed_s, 2),
        "findings": {"limit": limit or None, "violations": violations, "warnings": warnings,
                     "left_out": {"violations": violations_out, "warnings": warnings_out}},
        "partition_table": {"limit": limit or None, "rows": table, "left_out": table_out},
    }


def _jsonl(path: str, rows: Sequence[dict[str, Any]]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def write_replica_report(result: ReplicaAuditResult, out_dir: str, elapsed_s: float | None = None,
                         metadata_index: str | None = None) -> list[str]:
    """The replica audit's files in ``out_dir`` (created); returns their paths:

    * ``replica_summary.json``: the summary (uncapped findings and table left to the files
      below) and the facts of each partition with a finding;
    * ``replica_violations.jsonl``, ``replica_warnings.jsonl``: a finding per line;
    * ``replica_partitions.jsonl``: the partition table, a copy of a partition per line;
    * ``cluster_summary.png`` and ``partition-<topic>-<p>.png`` for each of the first
      :data:`MAX_PARTITION_PLOTS` partitions with a finding (:mod:`tools.audit.replica_plots`);
    * ``index.html`` linking them all (:mod:`tools.audit.html_index`), and ``metadata_index``
      (a path relative to ``out_dir``: the metadata-log audit's own index) when given.
    """
    from tools.audit.replica_plots import cluster_plot, partition_plot

    os.makedirs(out_dir, exist_ok=True)
    rows = result.partition_rows()
    summary_path = os.path.join(out_dir, "replica_summary.json")
    with open(summary_path, "w", encoding="utf-8") as out:
        json.dump({**result.summary(), "elapsed_s": None if elapsed_s is None else round(elapsed_s, 2),
                   "partition_reports": [p.summary() for p in result.partitions if p.findings]},
                  out, indent=2, sort_keys=True)
    written = [summary_path]
    for name, found in (("replica_violations.jsonl", result.violations), ("replica_warnings.jsonl", result.warnings)):
        written.append(_jsonl(os.path.join(out_dir, name), [f.to_dict() for f in found]))
    written.append(_jsonl(os.path.join(out_dir, "replica_partitions.jsonl"), rows))
    written.append(cluster_plot(rows, result.log_dirs, out_dir))
    by_partition: dict[tuple[str, int], list[Finding]] = {}
    for finding in result.findings:
        by_partition.setdefault((finding.topic, finding.partition), []).append(finding)
    rank = {"violation": 0, "warning": 1}
    drawn = sorted((p for p in result.partitions if by_partition.get((p.topic, p.partition))),
                   key=lambda p: (min(rank.get(f.severity, 2) for f in by_partition[(p.topic, p.partition)]),
                                  p.topic, p.partition))[:MAX_PARTITION_PLOTS]
    plots = [partition_plot(p, result.timelines.get((p.topic, p.partition)), by_partition[(p.topic, p.partition)],
                            out_dir) for p in drawn]
    written += plots
    written.append(write_index(_index(result, elapsed_s, rows, plots, metadata_index), out_dir))
    return written


def _index(result: ReplicaAuditResult, elapsed_s: float | None, rows: list[dict[str, Any]], plots: list[str],
           metadata_index: str | None) -> Index:
    status = (f"OK: no violation, {len(result.warnings)} warnings" if result.ok else
              f"{len(result.violations)} violations, {len(result.warnings)} warnings")
    links = [("summary (JSON)", "replica_summary.json"), ("violations (JSON lines)", "replica_violations.jsonl"),
             ("warnings (JSON lines)", "replica_warnings.jsonl"),
             ("partition table (JSON lines, a copy per line)", "replica_partitions.jsonl")]
    if metadata_index:
        links.append(("the metadata-log audit", metadata_index))
    return Index(
        "kwire audit: brokers' log directories", result.ok, status,
        facts=[("partitions", len(result.partitions)), ("batches read", result.batches),
               ("bytes read", result.bytes_read), ("metadata history", result.metadata_source or "none"),
               ("lost offset ranges", [f"{r['topic']}-{r['partition']} {r['start']}-{r['end'] - 1}"
                                       for r in result.lost] or "none"),
               ("seconds", None if elapsed_s is None else round(elapsed_s, 2))],
        links=links,
        lead_images=[("Cluster summary", "cluster_summary.png")],
        tables=[
            Table("Log directories", result.log_dirs, ("node", "broker_id", "directory_id", "cluster_id", "partitions",
                                                       "path")),
            Table("Violations", [f.to_dict() for f in result.violations], FINDING_COLUMNS, "replica_violations.jsonl"),
            Table("Warnings", [f.to_dict() for f in result.warnings], FINDING_COLUMNS, "replica_warnings.jsonl"),
            Table("Partitions", rows, ("topic", "partition", "node", "broker_id", "log_start_offset", "log_end_offset",
                                       "high_watermark", "last_leader_epoch", "reference", "committed_offset",
                                       "commit_basis", "verdict", "findings", "topic_id"),
                  "replica_partitions.jsonl", shade_by="verdict"),
        ],
        images=[(os.path.basename(p)[len("partition-"):-len(".png")], os.path.basename(p)) for p in plots],
    )
