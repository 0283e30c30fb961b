"""The replica audit's plots, drawn with matplotlib's Agg backend (no display needed):

* ``partition-<topic>-<p>.png`` (:func:`partition_plot`): a band per copy over offsets, its
  valid batches coloured by leader epoch (labelled with the epoch's leader and ISR from the
  metadata), its checkpointed high watermark as a black tick; over them what the audit found,
  each in its own colour and hatch: corrupt batches (CRC mismatch, or bytes that frame no
  batch), batches whose records do not decode, torn tails, and the acknowledged offsets lost
  (shaded across every copy); a legend names each.
* ``cluster_summary.png`` (:func:`cluster_plot`): the copies of each broker log directory by
  verdict (ok, warning, violation), and the partitions by verdict.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tools.audit.replica_checks import Finding, PartitionReport
from tools.audit.replicas import Timeline

EPOCH_COLOURS = ("#1f77b4", "#2ca02c", "#17becf", "#8c564b", "#aec7e8", "#98df8a", "#9edae5", "#c49c94")
"""Leader epochs, in turn: blues, greens and browns, none of the colours of :data:`MARKS`."""
MARKS = {
    "corrupt_batch": ("#d62728", "xx", "corrupt batch (CRC mismatch, unframeable bytes)"),
    "undecodable_records": ("#9467bd", "//", "records that do not decode (--deep)"),
    "torn_tail": ("#ff7f0e", "..", "torn tail (recovery truncates it)"),
}
"""Findings drawn on a copy's band: colour, hatch, legend label."""
LOST = ("#ffd700", "acknowledged offsets lost")
VERDICT_COLOURS = {"ok": "#2ca02c", "warning": "#ff7f0e", "violation": "#d62728"}


def _pyplot() -> Any:  # noqa: ANN401 - matplotlib.pyplot, imported lazily
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def node_label(node: str, broker_id: int | None) -> str:
    """``b13 (broker 13)``; the name alone when it is the id or the id is unknown."""
    return node if broker_id is None or node == str(broker_id) else f"{node} (broker {broker_id})"


def partition_plot(report: PartitionReport, timeline: Timeline | None, findings: Sequence[Finding],
                   out_dir: str) -> str:
    """Draw ``report``'s partition (module docstring) into ``out_dir``; returns the file's path.
    ``findings``: the partition's (those of other kinds are not drawn)."""
    from matplotlib.patches import Patch

    plt = _pyplot()
    spans = {} if timeline is None else timeline.spans
    leaders = {} if timeline is None else timeline.leaders
    nodes = sorted(set(spans) | set(report.replicas))
    rows = {node: i for i, node in enumerate(nodes)}
    marks = [f for f in findings if f.invariant in MARKS and f.node in rows and f.offset is not None]
    ends = [end for runs in spans.values() for _, end, _ in runs] + [end for _, end in report.lost]
    ends += [r["high_watermark"] for r in report.replicas.values() if r.get("high_watermark") is not None]
    ends += [r["log_end"] for r in report.replicas.values()] + [f.offset + 1 for f in marks]  # type: ignore[operator]
    right = max(ends, default=1) or 1
    reach = right + max(1, right // 10)  # a batch header's last offset may be damaged: drawn no further

    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.6 * max(len(nodes), 1)))
    epochs = sorted({e for runs in spans.values() for _, _, e in runs})
    colours = {e: EPOCH_COLOURS[i % len(EPOCH_COLOURS)] for i, e in enumerate(epochs)}
    for start, end in report.lost:
        ax.axvspan(start, end, color=LOST[0], alpha=0.45, zorder=0)
    for node, runs in spans.items():
        for start, end, epoch in runs:
            ax.barh(rows[node], end - start, left=start, color=colours[epoch], edgecolor="none", height=0.6, zorder=1)
    for node, facts in report.replicas.items():
        mark = facts.get("high_watermark")
        if mark is not None:
            ax.plot([mark, mark], [rows[node] - 0.4, rows[node] + 0.4], color="black", linewidth=2, zorder=3)
    for f in marks:
        colour, hatch, _ = MARKS[f.invariant]
        first = f.offset if f.offset is not None else 0
        end = min(f.end_offset, reach) if f.end_offset is not None else first + max(1, right // 50)
        ax.barh(rows[f.node or ""], max(end - first, 1), left=first, color=colour, edgecolor="white", hatch=hatch,
                height=0.6, zorder=2)
    ax.set_xlim(0, reach)
    ax.set_ylim(-0.6, len(nodes) - 0.4)
    ax.set_yticks(range(len(nodes)), [
        node_label(n, report.replicas.get(n, {}).get("broker_id")) + (" - reference" if n == report.reference else "")
        for n in nodes])

    def label(epoch: int) -> str:
        if epoch not in leaders:
            return f"epoch {epoch}"
        leader, isr = leaders[epoch]
        return f"epoch {epoch}: leader {leader}, ISR {list(isr)}"

    handles = [Patch(color=colours[e], label=label(e)) for e in epochs]
    handles += [Patch(facecolor=colour, edgecolor="white", hatch=hatch, label=text)
                for invariant, (colour, hatch, text) in MARKS.items() if any(f.invariant == invariant for f in marks)]
    if report.lost:
        handles.append(Patch(color=LOST[0], alpha=0.45, label=LOST[1]))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xlabel("offset (black tick: the copy's checkpointed high watermark)")
    problems = Counter(f.invariant for f in findings)
    found = ", ".join(f"{n} {name}" for name, n in sorted(problems.items())) or "nothing found"
    ax.set_title(f"{report.topic}-{report.partition}: leader epochs per copy; {found}", fontsize=9)
    fig.tight_layout()
    path = os.path.join(out_dir, f"partition-{report.topic}-{report.partition}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def cluster_plot(rows: Sequence[dict[str, Any]], log_dirs: Sequence[dict[str, Any]], out_dir: str) -> str:
    """``cluster_summary.png`` from the partition table's ``rows``
    (:meth:`~tools.audit.replicas.ReplicaAuditResult.partition_rows`) and the log directories
    audited; returns its path."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    nodes = [d["node"] for d in log_dirs]
    nodes += sorted({r["node"] for r in rows} - set(nodes))
    ids = {d["node"]: d.get("broker_id") for d in log_dirs}
    per_node = {n: Counter(r["verdict"] for r in rows if r["node"] == n) for n in nodes}
    partitions = Counter(r["partition_verdict"] for r in {(r["topic"], r["partition"]): r for r in rows}.values())
    bottom = [0] * len(nodes)
    for verdict, colour in VERDICT_COLOURS.items():
        counts = [per_node[n][verdict] for n in nodes]
        left.bar(range(len(nodes)), counts, bottom=bottom, color=colour, label=verdict)
        for i, (c, b) in enumerate(zip(counts, bottom, strict=True)):
            if c:
                left.text(i, b + c / 2, str(c), ha="center", va="center", fontsize=8)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    left.set_xticks(range(len(nodes)), [node_label(n, ids.get(n)) for n in nodes], fontsize=8)
    left.set_ylabel("partition copies")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title("Copies per broker log directory, by verdict", fontsize=10)
    left.legend(fontsize=8)
    verdicts = list(VERDICT_COLOURS)
    right.bar(range(len(verdicts)), [partitions[v] for v in verdicts], color=list(VERDICT_COLOURS.values()))
    for i, v in enumerate(verdicts):
        right.text(i, partitions[v], str(partitions[v]), ha="center", va="bottom", fontsize=8)
    right.set_xticks(range(len(verdicts)), verdicts)
    right.set_ylabel("partitions")
    right.set_title(f"{sum(partitions.values())} partitions, by verdict", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, "cluster_summary.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
