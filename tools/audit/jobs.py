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
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.audit.scan import (
    CONTROL_TYPE_NAMES,
    SNAPSHOT_RE,
    input_bytes,
    node_meta,
    parse_node_dirs,
)

VIEW = "kraftlog_rows"


@dataclass
class AuditResult:
    """What :func:`run_audit` found. ``nodes``: per node ``node``, ``dir``, ``node_id``,
    ``log_start_offset``, ``log_end_offset`` (exclusive), ``last_epoch``, ``records``;
    ``commit_basis``: ``"high-watermark"`` or ``"min-leo"``; ``violations`` / ``warnings``: dicts
    of ``invariant``, ``node``, ``offset``, ``other_node``, ``detail``; ``timeline``: see
    :func:`_timeline` (empty when not asked for); ``rows`` / ``invalid_rows``: rows scanned and
    those with ``crc_valid = false``."""

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
        return not self.violations


def _v(invariant: str, node: str | None, offset: int | None, detail: str,
       other_node: str | None = None) -> dict[str, Any]:
    return {
        "invariant": invariant,
        "node": node,
        "offset": offset,
        "other_node": other_node,
        "detail": detail,
    }


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
    then every check and the timeline together (:func:`collect_together`); the rest is Python
    over their small results. ``max_violations`` caps the violations kept in the result and the
    rows each check fetches; ``violation_counts`` counts every violation kept or dropped past
    the cap among those fetched. Raises whatever Spark raises for an unreadable plan; bad
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
        queries, args = _check_queries(pairs, max_violations,
                                       high_watermark is not None and lagging_ok)
        views = _views(pairs, args, ref is not None)
        if ref is not None:
            queries.update(_TIMELINE_QUERIES)
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
    add(_attribute_log_matching(_sorted(got.get("mismatch", []), "offset", "a", "b"), basis))
    if high_watermark is not None:
        last = got.get("last_leader") or [{"leader_id": None}]
        add(_committed_prefix(node_info, high_watermark, lagging_ok, last[0]["leader_id"]))

    # -- (b) election safety
    add(_election_violations(_sorted(got["conflict"], "leader_epoch")))

    # -- (c) per-node structure
    for r in _sorted(got["sequence"], "node", "offset"):
        if r["offset"] == r["prev_offset"]:
            add([_v("offsets_contiguous", r["node"], r["offset"],
                    f"offset {r['offset']} appears twice (in {r['file']})")])
        elif r["offset"] != r["prev_offset"] + 1:
            add([_v("offsets_contiguous", r["node"], r["prev_offset"] + 1,
                    f"gap: offset {r['prev_offset']} is followed by {r['offset']} ({r['file']})")])
        if r["leader_epoch"] < r["prev_epoch"]:
            add([_v("epochs_non_decreasing", r["node"], r["offset"],
                    f"epoch {r['leader_epoch']} after epoch {r['prev_epoch']}")])
    for r in _sorted(got["segment_base"], "node", "file"):
        add([_v("segment_base_offset", r["node"], r["first_base"],
                f"{r['file']} starts at offset {r['first_base']}")])

    first_by_epoch: dict[str, dict[int, int]] = defaultdict(dict)
    for r in got["epoch_start"]:
        first_by_epoch[r["node"]][r["leader_epoch"]] = r["first"]
    for info in node_info:
        found = _epoch_checkpoint(info, first_by_epoch.get(info["node"], {}))
        if found is None:
            warnings.append(_v("leader_epoch_checkpoint", info["node"], None,
                               "no readable leader-epoch-checkpoint"))
        else:
            add(found)

    for r in _sorted(got["invalid"], "node", "file", "position"):
        what = r["error"] or "CRC mismatch"
        detail = f"{r['file']} byte {r['position']} ({r['batch_size']} bytes): {what}"
        if r["source"] == "snapshot":
            add([_v("snapshot", r["node"], r["base_offset"], detail)])
        elif r["in_tail"]:
            warnings.append(_v("torn_tail", r["node"], r["base_offset"], detail))
        else:
            add([_v("corrupt_batch", r["node"], r["base_offset"], detail)])
    for r in _sorted(got["undecodable"], "node", "offset"):
        warnings.append(_v("undecodable_record", r["node"], r["offset"], r["error"]))

    add(_snapshot_violations(node_info, _sorted(got["snapshot"], "node", "file"),
                             _sorted(got["snapshot_end"], "node", "file", "offset")))

    # -- (d) timeline
    events = _timeline(got, ref) if ref is not None else {}

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


def _sorted(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """``rows`` in SQL's ascending order of ``keys`` (nulls first)."""
    return sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in keys))


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


def _views(pairs: list[tuple[str, str, int, int]], args: dict[str, Any], timeline: bool) -> str:
    """The ``WITH`` list of the checks: ``entries`` (valid segment records), ``leader_changes``,
    ``pairs`` (the replica pairs and their ``[lo, hi)`` ranges, as parameters put in ``args``)
    and, for the timeline, ``ref_batches`` (the batches of the reference node ``:ref``)."""
    views = [
        f"""entries AS (
          SELECT node, file, position, batch_size, base_offset, offset, leader_epoch, timestamp,
                 is_control, control_type, api_key, key, value, record_json
          FROM {VIEW} WHERE source = 'segment' AND offset IS NOT NULL AND crc_valid)""",
        """leader_changes AS (
          SELECT node, offset, leader_epoch, timestamp,
                 CAST(get_json_object(record_json, '$.data.leaderId') AS INT) AS leader_id,
                 get_json_object(record_json, '$.data.voters') AS voters
          FROM entries WHERE control_type = 2)""",
    ]
    if pairs:
        values = []
        for i, (a, b, lo, hi) in enumerate(pairs):
            args.update({f"pair{i}_a": a, f"pair{i}_b": b, f"pair{i}_lo": lo, f"pair{i}_hi": hi})
            values.append(f"(:pair{i}_a, :pair{i}_b, CAST(:pair{i}_lo AS BIGINT), "
                          f"CAST(:pair{i}_hi AS BIGINT))")
        views.append(f"pairs AS (SELECT * FROM VALUES {', '.join(values)} AS pairs(a, b, lo, hi))")
    if timeline:
        views.append("""ref_batches AS (
          SELECT DISTINCT file, position, batch_size, leader_epoch, base_offset
          FROM entries WHERE node = :ref)""")
    return ",\n".join(views)


def _check_queries(pairs: list, max_violations: int, last_leader: bool
                   ) -> tuple[dict[str, str], dict[str, Any]]:
    """The SQL of every check (over the views of :func:`_views`) and their parameters."""
    queries: dict[str, str] = {}
    if pairs:
        # both replicas' entries of every pair's range, side by side; a row wherever they differ
        queries["mismatch"] = """
            WITH A AS (SELECT p.a, p.b, e.offset, e.leader_epoch AS ep, e.timestamp AS ts,
                              e.key AS k, e.value AS v
                       FROM pairs p JOIN entries e ON e.node = p.a AND e.offset >= p.lo
                                                      AND e.offset < p.hi),
                 B AS (SELECT p.a, p.b, e.offset, e.leader_epoch AS ep, e.timestamp AS ts,
                              e.key AS k, e.value AS v
                       FROM pairs p JOIN entries e ON e.node = p.b AND e.offset >= p.lo
                                                      AND e.offset < p.hi)
            SELECT coalesce(A.a, B.a) AS a, coalesce(A.b, B.b) AS b,
                   coalesce(A.offset, B.offset) AS offset,
                   A.offset IS NULL AS missing_a, B.offset IS NULL AS missing_b,
                   A.ep AS ep_a, B.ep AS ep_b, A.ts <=> B.ts AS same_ts,
                   (A.k <=> B.k) AND (A.v <=> B.v) AS same_bytes
            FROM A FULL OUTER JOIN B ON A.a = B.a AND A.b = B.b AND A.offset = B.offset
            WHERE A.offset IS NULL OR B.offset IS NULL
                  OR NOT (A.ep <=> B.ep AND A.ts <=> B.ts AND A.k <=> B.k AND A.v <=> B.v)
            ORDER BY offset, a, b LIMIT :max_violations"""
    if last_leader:
        queries["last_leader"] = """
            SELECT leader_id FROM leader_changes ORDER BY leader_epoch DESC, offset LIMIT 1"""
    queries["conflict"] = """
        SELECT leader_epoch, collect_list(struct(node, offset, leader_id)) AS changes
        FROM leader_changes GROUP BY leader_epoch
        HAVING size(collect_set(leader_id)) > 1 OR count(*) > size(collect_set(node))"""
    queries["sequence"] = """
        SELECT node, offset, leader_epoch, prev_offset, prev_epoch, file FROM (
          SELECT node, offset, leader_epoch, file,
                 lag(offset) OVER (PARTITION BY node ORDER BY offset, file, position) AS prev_offset,
                 lag(leader_epoch) OVER (PARTITION BY node ORDER BY offset, file, position)
                   AS prev_epoch
          FROM entries)
        WHERE prev_offset IS NOT NULL AND (offset <> prev_offset + 1 OR leader_epoch < prev_epoch)
        ORDER BY node, offset LIMIT :max_violations"""
    queries["segment_base"] = """
        SELECT node, file, min(base_offset) AS first_base FROM entries GROUP BY node, file
        HAVING min(base_offset) <> CAST(substr(file, 1, 20) AS BIGINT)"""
    queries["epoch_start"] = """
        SELECT node, leader_epoch, min(offset) AS first FROM entries GROUP BY node, leader_epoch"""
    queries["invalid"] = f"""
        WITH bad AS (
          SELECT node, file, source, position, first(batch_size) AS batch_size,
                 first(base_offset) AS base_offset, first(error) AS error
          FROM {VIEW} WHERE NOT crc_valid GROUP BY node, file, source, position),
        last_valid AS (
          SELECT node, file, max(position) AS pos FROM {VIEW} WHERE crc_valid GROUP BY node, file),
        last_segment AS (
          SELECT node, max(file) AS file FROM {VIEW} WHERE source = 'segment' GROUP BY node)
        SELECT bad.*, ls.file IS NOT NULL AND (lv.pos IS NULL OR lv.pos < bad.position) AS in_tail
        FROM bad LEFT JOIN last_valid lv ON bad.node = lv.node AND bad.file = lv.file
                 LEFT JOIN last_segment ls ON bad.node = ls.node AND bad.file = ls.file
                                            AND bad.source = 'segment'
        ORDER BY node, file, position LIMIT :max_violations"""
    queries["undecodable"] = f"""
        SELECT node, offset, error FROM {VIEW} WHERE crc_valid AND error IS NOT NULL
        ORDER BY node, offset LIMIT 1000"""
    # snapshot files are named <20-digit end offset>-<10-digit epoch>.checkpoint (the scan reads
    # no others)
    snapshots = f"""
        SELECT node, file, min_by(control_type, offset) AS first_type,
               max_by(control_type, offset) AS last_type, count(offset) AS records,
               CAST(substr(file, 1, 20) AS BIGINT) AS end_offset,
               CAST(substr(file, 22, 10) AS INT) AS epoch
        FROM {VIEW} WHERE source = 'snapshot' AND offset IS NOT NULL GROUP BY node, file"""
    queries["snapshot"] = snapshots
    queries["snapshot_end"] = f"""
        SELECT s.node, s.file, s.epoch, e.offset, e.leader_epoch
        FROM ({snapshots}) s JOIN entries e ON e.node = s.node AND e.offset = s.end_offset - 1
        WHERE s.end_offset > 0 AND e.leader_epoch <> s.epoch"""
    return queries, {"max_violations": max_violations}


def _committed_prefix(node_info: list[dict], high_watermark: int, lagging_ok: bool,
                      last_leader: int | None) -> list[dict]:
    """``committed_entry_missing`` for replicas whose log ends below ``high_watermark``; with
    ``lagging_ok`` only when a majority lacks the prefix or the last epoch's leader
    (``last_leader``, a node.id, None when no LeaderChange was read) is one of them."""
    short = [n for n in node_info if n["log_end_offset"] < high_watermark]
    if not short:
        return []
    if lagging_ok:
        holding = len(node_info) - len(short)
        out = []
        if holding * 2 <= len(node_info):
            out += [
                _v("committed_entry_missing", n["node"], n["log_end_offset"],
                   f"log ends at {n['log_end_offset']}, below the high watermark "
                   f"{high_watermark}; only {holding} of {len(node_info)} replicas hold the "
                   "committed prefix")
                for n in short
            ]
        if last_leader is not None:
            out += [
                _v("committed_entry_missing", n["node"], n["log_end_offset"],
                   f"the last epoch's leader (node.id {last_leader}) ends at "
                   f"{n['log_end_offset']}, below the high watermark {high_watermark}")
                for n in short
                if n.get("node_id") == last_leader
            ]
        return out
    return [
        _v("committed_entry_missing", n["node"], n["log_end_offset"],
           f"log ends at {n['log_end_offset']}, below the high watermark {high_watermark}")
        for n in short
    ]


def _election_violations(conflicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in conflicts:
        changes = r["changes"]
        per_node = Counter(c["node"] for c in changes)
        for node, n in sorted(per_node.items()):
            if n > 1:
                offsets = sorted(c["offset"] for c in changes if c["node"] == node)
                out.append(_v("election_safety", node, offsets[1],
                              f"{n} LeaderChange records in epoch {r['leader_epoch']} "
                              f"at offsets {offsets}"))
        leaders = Counter(c["leader_id"] for c in changes)
        if len(leaders) > 1:
            top = leaders.most_common()
            majority = top[0][0] if top[0][1] > top[1][1] else None
            for c in sorted(changes, key=lambda c: (c["node"], c["offset"])):
                if majority is None or c["leader_id"] != majority:
                    rest = sorted({f"{x['node']}@{x['offset']}:leader {x['leader_id']}"
                                   for x in changes if x["node"] != c["node"]})
                    out.append(_v("election_safety", c["node"], c["offset"],
                                  f"epoch {r['leader_epoch']} has leader {c['leader_id']} here, "
                                  f"but {', '.join(rest)}"))
    return out


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


def _attribute_log_matching(rows: list, basis: str) -> list[dict[str, Any]]:
    """Pairwise mismatches -> violations naming the replica that disagrees: at an offset where
    one node is in every mismatching pair (and there are at least two such pairs) that node is
    named; otherwise the second node of the pair, with the first as ``other_node``."""
    by_offset: dict[int, list] = defaultdict(list)
    for r in rows:
        by_offset[r["offset"]].append(r)
    out = []
    for offset, group in by_offset.items():
        involved: Counter[str] = Counter()
        for r in group:
            involved[r["a"]] += 1
            involved[r["b"]] += 1
        suspect = None
        if len(group) >= 2:
            common = [n for n, c in involved.items() if c == len(group)]
            if len(common) == 1:
                suspect = common[0]
        for r in group:
            if suspect is not None and r is not group[0]:
                continue
            node = suspect or r["b"]
            others = sorted({x for g in group for x in (g["a"], g["b"])} - {node}) if suspect else [r["a"]]
            if r["missing_a"] or r["missing_b"]:
                holder = r["b"] if r["missing_a"] else r["a"]
                lacking = r["a"] if r["missing_a"] else r["b"]
                node = suspect or lacking
                what = f"entry held by {holder} is missing on {lacking}"
            elif r["ep_a"] != r["ep_b"]:
                what = f"leader epoch {r['ep_a']} on {r['a']} but {r['ep_b']} on {r['b']}"
            elif not r["same_bytes"]:
                what = f"record bytes differ between {r['a']} and {r['b']} (epoch {r['ep_a']})"
            else:
                what = f"timestamps differ between {r['a']} and {r['b']}"
            out.append(_v("log_matching", node, offset, f"{what}; committed point basis {basis}",
                          ",".join(others)))
    return out


def _epoch_checkpoint(info: dict, first_by_epoch: dict[int, int]) -> list[dict] | None:
    from storage.leader_epoch import decode_checkpoint

    path = os.path.join(info["dir"], "leader-epoch-checkpoint")
    try:
        with open(path, "rb") as f:
            entries = decode_checkpoint(f.read(), path)
    except Exception:  # missing or malformed: reported as a warning by the caller
        return None
    node, start, leo = info["node"], info["log_start_offset"], info["log_end_offset"]
    out = []
    by_epoch = {e.epoch: e.start_offset for e in entries}
    for epoch, first in sorted(first_by_epoch.items()):
        have = by_epoch.get(epoch)
        if have is None:
            out.append(_v("leader_epoch_checkpoint", node, first,
                          f"epoch {epoch} starts at {first} in the log but has no entry"))
        elif have != first and not (first == start and have <= start):
            out.append(_v("leader_epoch_checkpoint", node, first,
                          f"entry says epoch {epoch} starts at {have}, the log at {first}"))
    for epoch, have in sorted(by_epoch.items()):
        if epoch in first_by_epoch or have < start:
            continue
        detail = (f"entry (epoch {epoch}, start {have}) is at or beyond the log end offset {leo}"
                  if have >= leo else f"entry (epoch {epoch}, start {have}) has no such epoch in the log")
        out.append(_v("leader_epoch_checkpoint", node, have, detail))
    return out


def _snapshot_violations(node_info: list[dict], snapshots: list[dict],
                         end_mismatches: list[dict]) -> list[dict]:
    """``snapshot`` violations from the per-file rows of the ``snapshot`` query (first and last
    control type) and the ``snapshot_end`` rows (log entries just below a snapshot's end offset
    whose epoch differs from the one in its name), and for nodes whose log starts above 0
    without a snapshot ending there."""
    out = []
    ends: dict[str, set[int]] = defaultdict(set)
    for r in snapshots:
        if SNAPSHOT_RE.match(r["file"]) is None:
            continue
        end = r["end_offset"]
        ends[r["node"]].add(end)
        if r["first_type"] != 3:
            out.append(_v("snapshot", r["node"], end, f"{r['file']} does not start with a SnapshotHeader"))
        if r["last_type"] != 4:
            out.append(_v("snapshot", r["node"], end, f"{r['file']} does not end with a SnapshotFooter"))
    for r in end_mismatches:
        out.append(_v("snapshot", r["node"], r["offset"],
                      f"{r['file']} names epoch {r['epoch']} but the log has epoch "
                      f"{r['leader_epoch']} at offset {r['offset']}"))
    for n in node_info:
        if n["log_start_offset"] > 0 and n["log_start_offset"] not in ends[n["node"]]:
            out.append(_v("snapshot", n["node"], n["log_start_offset"],
                          f"log starts at {n['log_start_offset']} but no snapshot ends there"))
    return out


def _type_name(is_control: bool, control_type: int | None, api_key: int | None) -> str:
    from messages.metadata import record_type_name

    if is_control:
        if control_type is None:
            return "CONTROL_UNKNOWN"
        return CONTROL_TYPE_NAMES.get(control_type, f"CONTROL_{control_type}")
    return record_type_name(api_key) if api_key is not None else "UNDECODED"


# The timeline's queries (run by collect_together with the checks; ``:ref`` is the reference
# node, the one with the longest log).
_TIMELINE_QUERIES = {
    "tl_leaders": """
        SELECT leader_epoch, collect_set(leader_id) AS leaders, min(offset) AS start_offset,
               min(timestamp) AS start_ms, first(voters) AS voters
        FROM leader_changes GROUP BY leader_epoch""",
    "tl_epochs": """
        SELECT leader_epoch, min(offset) AS first_offset, max(offset) AS last_offset,
               min(timestamp) AS first_ms, max(timestamp) AS last_ms, count(*) AS records
        FROM entries WHERE node = :ref GROUP BY leader_epoch""",
    "tl_types": """
        SELECT leader_epoch, is_control, control_type, api_key, count(*) AS n FROM entries
        WHERE node = :ref GROUP BY leader_epoch, is_control, control_type, api_key""",
    "tl_batches": """
        SELECT leader_epoch, count(*) AS batches, avg(batch_size) AS mean,
               percentile_approx(batch_size, array(0.5, 0.9, 0.99)) AS pct,
               min(batch_size) AS min, max(batch_size) AS max
        FROM ref_batches GROUP BY leader_epoch""",
    "tl_voters": f"""
        SELECT source, file, offset, leader_epoch,
               get_json_object(record_json, '$.data.voters') AS voters
        FROM {VIEW} WHERE node = :ref AND crc_valid AND control_type = 6""",
    "tl_per_second": """
        SELECT CAST(floor(timestamp / 1000) AS BIGINT) AS sec, count(*) AS n FROM entries
        WHERE node = :ref GROUP BY 1""",
    "tl_histogram": """
        SELECT pow(2, CAST(ceil(log2(batch_size)) AS INT)) AS bucket, count(*) AS n
        FROM ref_batches GROUP BY 1""",
}


def _timeline(got: dict[str, list[dict[str, Any]]], ref: str) -> dict[str, Any]:
    """Per epoch: leader, start offset and time, record-type counts and batch sizes (from the
    reference replica ``ref``, the one with the longest log), voter-set changes, records per
    second and a batch-size histogram -- from the rows of :data:`_TIMELINE_QUERIES`."""
    epochs: dict[int, dict[str, Any]] = {}
    for r in got["tl_leaders"]:
        voters = sorted(v["voterId"] for v in json.loads(r["voters"] or "[]"))
        epochs[r["leader_epoch"]] = {
            "epoch": r["leader_epoch"], "leaders": sorted(r["leaders"]),
            "leader": r["leaders"][0] if len(r["leaders"]) == 1 else None,
            "start_offset": r["start_offset"], "start_ms": r["start_ms"], "voters": voters,
        }
    for r in got["tl_epochs"]:
        e = epochs.setdefault(r["leader_epoch"], {"epoch": r["leader_epoch"], "leaders": [],
                                                  "leader": None, "start_offset": None,
                                                  "start_ms": None, "voters": []})
        e.update(first_offset=r["first_offset"], last_offset=r["last_offset"],
                 first_ms=r["first_ms"], last_ms=r["last_ms"], records=r["records"])
        if e["start_offset"] is None:
            e["start_offset"], e["start_ms"] = r["first_offset"], r["first_ms"]
    for r in _sorted(got["tl_types"], "leader_epoch", "is_control", "control_type", "api_key"):
        counts = epochs[r["leader_epoch"]].setdefault("record_types", {})
        name = _type_name(r["is_control"], r["control_type"], r["api_key"])
        counts[name] = counts.get(name, 0) + r["n"]
    for r in got["tl_batches"]:
        epochs[r["leader_epoch"]]["batch_bytes"] = {
            "batches": r["batches"], "mean": round(float(r["mean"]), 1), "min": r["min"],
            "p50": r["pct"][0], "p90": r["pct"][1], "p99": r["pct"][2], "max": r["max"],
        }
    voter_changes = []
    previous = None
    for r in sorted(got["tl_voters"], key=lambda r: (r["source"] != "snapshot", r["file"],
                                                      (r["offset"] is not None, r["offset"]))):
        ids = sorted(v["voterId"] for v in json.loads(r["voters"] or "[]"))
        if ids != previous:
            voter_changes.append({"source": r["source"], "file": r["file"], "offset": r["offset"],
                                  "epoch": r["leader_epoch"], "voters": ids})
            previous = ids
    per_second = [{"second": r["sec"], "records": r["n"]}
                  for r in _sorted(got["tl_per_second"], "sec")]
    histogram = [{"bucket_bytes": int(r["bucket"]), "batches": r["n"]}
                 for r in _sorted(got["tl_histogram"], "bucket")]
    return {
        "reference_node": ref,
        "epochs": [epochs[k] for k in sorted(epochs)],
        "voter_changes": voter_changes,
        "records_per_second": per_second,
        "batch_size_histogram": histogram,
    }
