"""Writing an audit's results with matplotlib's Agg backend: for the metadata-log audit
``summary.json``, ``violations.jsonl``, ``warnings.jsonl`` and PNG plots (``timeline.png``,
``records_per_second.png``, ``batch_sizes.png``); for the replica audit
:func:`write_replica_report`'s files."""

from __future__ import annotations

import json
import os
from typing import Any

from tools.audit.jobs import AuditResult
from tools.audit.replica_checks import PartitionReport
from tools.audit.replicas import ReplicaAuditResult, Timeline


def summary(result: AuditResult, elapsed_s: float | None = None) -> dict[str, Any]:
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


MAX_PARTITION_PLOTS = 50


def write_replica_report(result: ReplicaAuditResult, out_dir: str, elapsed_s: float | None = None) -> list[str]:
    """The replica audit's files in ``out_dir`` (created): ``replica_summary.json`` (with each
    partition's facts), ``replica_violations.jsonl``, ``replica_warnings.jsonl``, and a timeline
    plot for each of the first :data:`MAX_PARTITION_PLOTS` partitions with a violation
    (``partition-<topic>-<p>.png``). Returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "replica_summary.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**result.summary(), "elapsed_s": None if elapsed_s is None else round(elapsed_s, 2),
                   "partition_reports": [p.summary() for p in result.partitions if p.findings]},
                  f, indent=2, sort_keys=True)
    written = [path]
    for name, rows in (("replica_violations.jsonl", result.violations), ("replica_warnings.jsonl", result.warnings)):
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row.to_dict(), sort_keys=True) + "\n")
        written.append(path)
    faulty = [p for p in result.partitions if any(f.severity == "violation" for f in p.findings)]
    for report in faulty[:MAX_PARTITION_PLOTS]:
        written.append(_partition_plot(report, result.timelines.get((report.topic, report.partition)), out_dir))
    return written


def _partition_plot(report: PartitionReport, timeline: Timeline | None, out_dir: str) -> str:
    """Each replica's leader epoch over offsets (one band per replica, a colour per epoch,
    labelled with the epoch's leader and ISR from the metadata), its high watermark marked, and
    the lost offset ranges shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spans = {} if timeline is None else timeline.spans
    leaders = {} if timeline is None else timeline.leaders
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.6 * max(len(spans), 1)))
    epochs = sorted({e for runs in spans.values() for _, _, e in runs})
    colours = {e: plt.cm.tab10(i % 10) for i, e in enumerate(epochs)}
    for row, (node, runs) in enumerate(sorted(spans.items())):
        for start, end, epoch in runs:
            ax.barh(row, end - start, left=start, color=colours[epoch], edgecolor="none", height=0.6)
        mark = report.replicas.get(node, {}).get("high_watermark")
        if mark is not None:
            ax.plot([mark, mark], [row - 0.4, row + 0.4], color="black", linewidth=2)
    for start, end in report.lost:
        ax.axvspan(start, end, color="red", alpha=0.2)
    ax.set_yticks(range(len(spans)), [f"{n}{' (reference)' if n == report.reference else ''}" for n in sorted(spans)])

    def label(epoch: int) -> str:
        if epoch not in leaders:
            return f"epoch {epoch}"
        leader, isr = leaders[epoch]
        return f"epoch {epoch}: leader {leader}, ISR {list(isr)}"

    handles = [matplotlib.patches.Patch(color=colours[e], label=label(e)) for e in epochs]
    handles.append(matplotlib.patches.Patch(color="red", alpha=0.2, label="lost"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xlabel("offset (black: the replica's high watermark)")
    ax.set_title(f"{report.topic}-{report.partition}: leader epochs per replica")
    fig.tight_layout()
    path = os.path.join(out_dir, f"partition-{report.topic}-{report.partition}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
