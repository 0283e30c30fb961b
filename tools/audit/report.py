"""The metadata-log audit's outputs: its ``--json`` summary (:func:`summary`), and a report
directory of ``summary.json``, ``violations.jsonl``, ``warnings.jsonl``, PNG plots drawn with
matplotlib's Agg backend (``timeline.png``, ``records_per_second.png``, ``batch_sizes.png``) and
an ``index.html`` linking them (:func:`write_report`). The replica audit's are in
:mod:`tools.audit.replica_report`."""

from __future__ import annotations

import json
import os
from typing import Any

from tools.audit.html_index import Index, Table, write_index
from tools.audit.jobs import AuditResult
from tools.audit.replica_report import JSON_LIMIT


def summary(result: AuditResult, elapsed_s: float | None = None, limit: int | None = JSON_LIMIT) -> dict[str, Any]:
    """The metadata-log audit's summary: nodes, counts, commit basis, the timeline, and the
    violations and warnings themselves (``invariant``, ``node``, ``offset``, ``other_node``,
    ``detail``), at most ``limit`` of each (None or 0: all) with the number left out (of the
    violations, also those past ``--max-violations``, which only ``violation_counts`` counts)."""
    cap = None if not limit else limit
    violations, warnings = result.violations[:cap], result.warnings[:cap]
    return {
        "ok": result.ok,
        "nodes": result.nodes,
        "rows": result.rows,
        "invalid_rows": result.invalid_rows,
        "commit_basis": result.commit_basis,
        "high_watermark": result.high_watermark,
        "violation_counts": result.violation_counts,
        "violations": len(result.violations),
        "warnings": len(result.warnings),
        "elapsed_s": None if elapsed_s is None else round(elapsed_s, 2),
        "timeline": result.timeline,
        "findings": {"limit": cap, "violations": violations, "warnings": warnings,
                     "left_out": {"violations": sum(result.violation_counts.values()) - len(violations),
                                  "warnings": len(result.warnings) - len(warnings)}},
    }


def write_report(result: AuditResult, out_dir: str, elapsed_s: float | None = None) -> list[str]:
    """Write every report file into ``out_dir`` (created); returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "summary.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(summary(result, elapsed_s), f, indent=2, sort_keys=True)
    written.append(path)
    for name, rows in (("violations.jsonl", result.violations), ("warnings.jsonl", result.warnings)):
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")
        written.append(path)
    written += write_plots(result.timeline, out_dir)
    columns = ("invariant", "node", "offset", "other_node", "detail")
    total = sum(result.violation_counts.values())
    written.append(write_index(Index(
        "kwire audit: metadata logs", result.ok,
        f"OK: no violation, {len(result.warnings)} warnings" if result.ok else
        f"{total} violations, {len(result.warnings)} warnings",
        facts=[("rows", result.rows), ("invalid rows", result.invalid_rows), ("commit basis", result.commit_basis),
               ("high watermark", result.high_watermark),
               ("seconds", None if elapsed_s is None else round(elapsed_s, 2))],
        links=[("summary (JSON)", "summary.json"), ("violations (JSON lines)", "violations.jsonl"),
               ("warnings (JSON lines)", "warnings.jsonl")],
        tables=[Table("Nodes", result.nodes, ("node", "node_id", "log_start_offset", "log_end_offset", "last_epoch",
                                               "records", "dir")),
                Table("Violations", result.violations, columns, "violations.jsonl"),
                Table("Warnings", result.warnings, columns, "warnings.jsonl")],
        images=[("Leader epochs", "timeline.png"), ("Records per second", "records_per_second.png"),
                ("Batch sizes", "batch_sizes.png")]), out_dir))
    return written


def write_plots(timeline: dict[str, Any], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    written = []
    epochs = timeline.get("epochs", [])

    fig, ax = plt.subplots(figsize=(9, 4))
    if epochs:
        t0 = min(e["start_ms"] for e in epochs if e.get("start_ms") is not None) if any(
            e.get("start_ms") is not None for e in epochs) else 0
        leaders = sorted({e["leader"] for e in epochs if e.get("leader") is not None})
        colours = {leader: plt.cm.tab10(i % 10) for i, leader in enumerate(leaders)}
        for e in epochs:
            start = ((e.get("start_ms") or t0) - t0) / 1000
            end = ((e.get("last_ms") or e.get("start_ms") or t0) - t0) / 1000
            colour = colours.get(e.get("leader"), "red")
            ax.hlines(e["epoch"], start, max(end, start + 0.05), colors=[colour], linewidth=6)
            label = f"leader {e['leader']}" if e.get("leader") is not None else f"leaders {e['leaders']}"
            ax.annotate(label, (start, e["epoch"]), textcoords="offset points", xytext=(0, 6),
                        fontsize=8)
    ax.set_xlabel("seconds since the first epoch started")
    ax.set_ylabel("leader epoch")
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_title(f"Leader epochs (reference node {timeline.get('reference_node')})")
    fig.tight_layout()
    path = os.path.join(out_dir, "timeline.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(9, 4))
    series = timeline.get("records_per_second", [])
    if series:
        s0 = series[0]["second"]
        ax.bar([p["second"] - s0 for p in series], [p["records"] for p in series], width=0.9)
    ax.set_xlabel("second since the first record")
    ax.set_ylabel("records")
    ax.set_title("Records per second")
    fig.tight_layout()
    path = os.path.join(out_dir, "records_per_second.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(9, 4))
    hist = timeline.get("batch_size_histogram", [])
    if hist:
        ax.bar([f"<={h['bucket_bytes']}" for h in hist], [h["batches"] for h in hist])
    ax.set_xlabel("batch size (bytes, power-of-two buckets)")
    ax.set_ylabel("batches")
    ax.set_title("Batch sizes")
    fig.tight_layout()
    path = os.path.join(out_dir, "batch_sizes.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written
