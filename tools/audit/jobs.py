"""The audit jobs: Spark DataFrame/SQL checks over the rows of the ``kraftlog`` data source.

Invariants (Raft's safety properties read from the files on disk; names as they appear in the
report):

``log_matching``
    For every pair of replicas and every offset in ``[max(log starts), committed point)`` both
    hold the entry with the same leader epoch, timestamp, key and value. The committed point of
    a pair is ``min(LEO_a, LEO_b)``, further capped by the quorum's high watermark when one is
    given. Why: KRaft does not persist the high watermark, so an offline audit only knows it
    when the operator passes it (DescribeQuorum's HighWatermark). Without it, the prefix both
    replicas hold is the largest range where Raft's log-matching property can be checked
    without guessing; it is stricter than necessary only when a replica still holds an
    uncommitted tail from a deposed leader that it would truncate on its next fetch -- then the
    report names basis ``min-leo`` and the violation's epochs show the stale tail, and passing
    ``--high-watermark`` removes the false alarm.
``committed_entry_missing``
    Only with a high watermark: a replica's log ends below it. By default every replica must
    hold the committed prefix (an audit of a settled quorum); with ``lagging_ok`` only the
    leader of the last epoch and a majority of the replicas must (Raft's durability rule).
``election_safety``
    The LeaderChange records of one epoch name one leader on every node, and a node has at
    most one LeaderChange per epoch.
``offsets_contiguous`` / ``epochs_non_decreasing`` / ``segment_base_offset``
    Per node, valid entries have offsets log_start, log_start+1, ... without gaps or
    duplicates, non-decreasing leader epochs, and each segment's first batch starts at the
    offset in its file name.
``leader_epoch_checkpoint``
    Every epoch in the log has a checkpoint entry whose start offset is the epoch's first
    offset (or at most the log start offset when the epoch began before it); no entry for an
    epoch absent from the retained log unless it starts below the log start offset.
``corrupt_batch``
    Invalid bytes (CRC mismatch, unframeable data, undecodable records) anywhere except the
    tail of a node's last segment. Invalid bytes in that tail are a warning (``torn_tail``):
    recovery truncates them.
``snapshot``
    A checkpoint starts with a SnapshotHeader, ends with a SnapshotFooter, is wholly valid,
    its name's epoch equals the epoch of the log entry just below its end offset (when the
    node still has it), and when the log start offset is above 0 a snapshot ends exactly there.

This module runs the audit (:func:`run_audit`); the rows and the one-action query runner are in
:mod:`tools.audit.log_rows`, the checks' SQL and their judging in :mod:`tools.audit.log_checks`,
the timeline in :mod:`tools.audit.log_timeline`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.audit.log_checks import (
    attribute_log_matching,
    check_queries,
    check_views,
    committed_prefix,
    election_violations,
    epoch_checkpoint_violations,
    snapshot_violations,
    violation,
)
from tools.audit.log_rows import VIEW, collect_together, load_rows, sorted_rows
from tools.audit.log_timeline import TIMELINE_QUERIES, build_timeline
from tools.audit.scan import node_meta


@dataclass
class AuditResult:
    """What :func:`run_audit` found. ``nodes``: per node ``node``, ``dir``, ``node_id``,
    ``log_start_offset``, ``log_end_offset`` (exclusive), ``last_epoch``, ``records``;
    ``commit_basis``: ``"high-watermark"`` or ``"min-leo"``; ``violations`` / ``warnings``: dicts
    of ``invariant``, ``node``, ``offset``, ``other_node``, ``detail``; ``timeline``: see
    :func:`tools.audit.log_timeline.build_timeline` (empty when not asked for); ``rows`` /
    ``invalid_rows``: rows scanned and those with ``crc_valid = false``."""

    nodes: list[dict[str, Any]]
    commit_basis: str
    high_watermark: int | None
    violations: list[dict[str, Any]] = field(default_factory=list)
    violation_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    timeline: dict[str, Any] = field(default_factory=dict)
    rows: int = 0
    invalid_rows: int = 0

    @property
    def ok(self) -> bool:
        """True when no check found a violation (warnings do not count)."""
        return not self.violations


def run_audit(
    spark,  # noqa: ANN001
    nodes: Sequence[tuple[str, str]],
    *,
    high_watermark: int | None = None,
    lagging_ok: bool = False,
    split_bytes: int | None = None,
    max_violations: int = 10_000,
    timeline: bool = True,
    progress: Callable[[str], None] = lambda _msg: None,
) -> AuditResult:
    """Read the node dirs ``[(name, partition dir)]`` and run every check.

    Two Spark actions: the per-node log ranges (which also fills the cache of the scanned rows),
    then every check and the timeline together (:func:`tools.audit.log_rows.collect_together`,
    the queries of :mod:`tools.audit.log_checks` and :mod:`tools.audit.log_timeline`); the rest
    is Python over their small results. ``max_violations`` caps the violations kept in the
    result and the rows each check fetches; ``violation_counts`` counts every violation kept or
    dropped past the cap among those fetched. Raises whatever Spark raises for an unreadable plan; bad
    file content never raises (it becomes invalid rows, see :mod:`tools.audit.scan`)."""
    progress(f"scanning {len(nodes)} node directories")
    df = load_rows(spark, [f"{name}={pdir}" for name, pdir in nodes], split_bytes)
    try:
        progress("computing log ranges per node")
        node_info, totals = _node_stats(spark, nodes)
        by_name = {n["node"]: n for n in node_info}
        basis = "high-watermark" if high_watermark is not None else "min-leo"
        pairs = []
        for i, (a, _) in enumerate(nodes):
            for b, _ in nodes[i + 1 :]:
                na, nb = by_name[a], by_name[b]
                hi = min(na["log_end_offset"], nb["log_end_offset"])
                if high_watermark is not None:
                    hi = min(hi, high_watermark)
                lo = max(na["log_start_offset"], nb["log_start_offset"])
                if hi > lo:
                    pairs.append((a, b, lo, hi))
        ref = max(node_info, key=lambda n: (n["log_end_offset"], n["node"]))["node"] \
            if timeline and node_info else None
        progress("checking log matching, election safety, offsets, epochs, segments, invalid "
                 "bytes and snapshots" + (", building the timeline" if ref is not None else ""))
        queries, args = check_queries(pairs, max_violations,
                                      high_watermark is not None and lagging_ok)
        views = check_views(pairs, args, ref is not None)
        if ref is not None:
            queries.update(TIMELINE_QUERIES)
            args["ref"] = ref
        got = collect_together(spark, queries, args, views)
    finally:
        df.unpersist()

    violations: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()

    def add(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            counts[row["invariant"]] += 1
            if len(violations) < max_violations:
                violations.append(row)

    # -- (a) log matching
    add(attribute_log_matching(sorted_rows(got.get("mismatch", []), "offset", "a", "b"), basis))
    if high_watermark is not None:
        last = got.get("last_leader") or [{"leader_id": None}]
        add(committed_prefix(node_info, high_watermark, lagging_ok, last[0]["leader_id"]))

    # -- (b) election safety
    add(election_violations(sorted_rows(got["conflict"], "leader_epoch")))

    # -- (c) per-node structure
    for r in sorted_rows(got["sequence"], "node", "offset"):
        if r["offset"] == r["prev_offset"]:
            add([violation("offsets_contiguous", r["node"], r["offset"],
                           f"offset {r['offset']} appears twice (in {r['file']})")])
        elif r["offset"] != r["prev_offset"] + 1:
            add([violation("offsets_contiguous", r["node"], r["prev_offset"] + 1,
                           f"gap: offset {r['prev_offset']} is followed by {r['offset']} "
                           f"({r['file']})")])
        if r["leader_epoch"] < r["prev_epoch"]:
            add([violation("epochs_non_decreasing", r["node"], r["offset"],
                           f"epoch {r['leader_epoch']} after epoch {r['prev_epoch']}")])
    for r in sorted_rows(got["segment_base"], "node", "file"):
        add([violation("segment_base_offset", r["node"], r["first_base"],
                       f"{r['file']} starts at offset {r['first_base']}")])

    first_by_epoch: dict[str, dict[int, int]] = defaultdict(dict)
    for r in got["epoch_start"]:
        first_by_epoch[r["node"]][r["leader_epoch"]] = r["first"]
    for info in node_info:
        found = epoch_checkpoint_violations(info, first_by_epoch.get(info["node"], {}))
        if found is None:
            warnings.append(violation("leader_epoch_checkpoint", info["node"], None,
                                      "no readable leader-epoch-checkpoint"))
        else:
            add(found)

    for r in sorted_rows(got["invalid"], "node", "file", "position"):
        what = r["error"] or "CRC mismatch"
        detail = f"{r['file']} byte {r['position']} ({r['batch_size']} bytes): {what}"
        if r["source"] == "snapshot":
            add([violation("snapshot", r["node"], r["base_offset"], detail)])
        elif r["in_tail"]:
            warnings.append(violation("torn_tail", r["node"], r["base_offset"], detail))
        else:
            add([violation("corrupt_batch", r["node"], r["base_offset"], detail)])
    for r in sorted_rows(got["undecodable"], "node", "offset"):
        warnings.append(violation("undecodable_record", r["node"], r["offset"], r["error"]))

    add(snapshot_violations(node_info, sorted_rows(got["snapshot"], "node", "file"),
                            sorted_rows(got["snapshot_end"], "node", "file", "offset")))

    # -- (d) timeline
    events = build_timeline(got, ref) if ref is not None else {}

    return AuditResult(
        nodes=node_info,
        commit_basis=basis,
        high_watermark=high_watermark,
        violations=violations,
        violation_counts=dict(counts),
        warnings=warnings,
        timeline=events,
        rows=int(totals["n"] or 0),
        invalid_rows=int(totals["bad"] or 0),
    )


def _node_stats(spark, nodes: Sequence[tuple[str, str]]) -> tuple[list[dict], dict[str, int]]:  # noqa: ANN001
    """Per node: ``log_start_offset``, ``log_end_offset`` (0 and 0 for an empty log),
    ``last_epoch`` and ``records`` of the valid entries, with its ``dir`` and ``node_id``; and the
    totals ``{"n": rows, "bad": invalid rows}``. The first action over the rows (it fills their
    cache)."""
    ok_entry = "source = 'segment' AND offset IS NOT NULL AND crc_valid"
    stats = {
        r["node"]: r.asDict()
        for r in spark.sql(
            f"""SELECT node, count(*) AS rows, sum(CASE WHEN crc_valid THEN 0 ELSE 1 END) AS bad,
                      min(offset) FILTER (WHERE {ok_entry}) AS log_start_offset,
                      max(offset) FILTER (WHERE {ok_entry}) + 1 AS log_end_offset,
                      max(leader_epoch) FILTER (WHERE {ok_entry}) AS last_epoch,
                      count(offset) FILTER (WHERE {ok_entry}) AS records
               FROM {VIEW} GROUP BY node"""
        ).collect()
    }
    totals = {"n": sum(s["rows"] for s in stats.values()),
              "bad": sum(s["bad"] or 0 for s in stats.values())}
    for s in stats.values():
        s.pop("rows")
        s.pop("bad")
        if s["log_end_offset"] is None:
            s.update(log_start_offset=0, log_end_offset=0, records=0)
    node_info = []
    for name, pdir in nodes:
        s = stats.get(name) or {"log_start_offset": 0, "log_end_offset": 0, "last_epoch": None,
                                "records": 0}
        node_info.append({"node": name, "dir": pdir, "node_id": node_id(name, pdir),
                          **{k: v for k, v in s.items() if k != "node"}})
    return node_info, totals


def node_id(name: str, partition_dir: str) -> int | None:
    """The replica id: ``node.id`` from ``meta.properties`` beside the partition dir
    (:func:`tools.audit.scan.node_meta`), else the trailing digits of the node name
    (``node3`` -> 3), else None."""
    import re

    meta = node_meta(partition_dir)
    if meta is not None and meta.node_id is not None:
        return meta.node_id
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else None
