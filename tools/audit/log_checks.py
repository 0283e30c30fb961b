"""The invariant checks of the metadata-log audit (named and explained in
:mod:`tools.audit.jobs`): their Spark SQL over the ``kraftlog_rows`` view, and the Python that
turns the rows they return into violations."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from typing import Any

from tools.audit.log_rows import VIEW
from tools.audit.scan import SNAPSHOT_RE


def violation(invariant: str, node: str | None, offset: int | None, detail: str,
              other_node: str | None = None) -> dict[str, Any]:
    """One finding as the audit reports it: a dict of ``invariant``, ``node``, ``offset`` (None
    when it concerns no offset), ``other_node`` and ``detail`` (used for warnings too)."""
    return {
        "invariant": invariant,
        "node": node,
        "offset": offset,
        "other_node": other_node,
        "detail": detail,
    }

def check_views(pairs: list[tuple[str, str, int, int]], args: dict[str, Any],
                timeline: bool) -> str:
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


def check_queries(pairs: list, max_violations: int, last_leader: bool
                  ) -> tuple[dict[str, str], dict[str, Any]]:
    """The SQL of every check (over the views of :func:`check_views`) and their parameters."""
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


def committed_prefix(node_info: list[dict], high_watermark: int, lagging_ok: bool,
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
                violation("committed_entry_missing", n["node"], n["log_end_offset"],
                          f"log ends at {n['log_end_offset']}, below the high watermark "
                          f"{high_watermark}; only {holding} of {len(node_info)} replicas hold the "
                          "committed prefix")
                for n in short
            ]
        if last_leader is not None:
            out += [
                violation("committed_entry_missing", n["node"], n["log_end_offset"],
                          f"the last epoch's leader (node.id {last_leader}) ends at "
                          f"{n['log_end_offset']}, below the high watermark {high_watermark}")
                for n in short
                if n.get("node_id") == last_leader
            ]
        return out
    return [
        violation("committed_entry_missing", n["node"], n["log_end_offset"],
                  f"log ends at {n['log_end_offset']}, below the high watermark {high_watermark}")
        for n in short
    ]


def election_violations(conflicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``election_safety`` violations from the rows of the ``conflict`` query (per leader epoch,
    its LeaderChange records as ``node``, ``offset``, ``leader_id``): a node with two
    LeaderChange records in one epoch, and, when nodes disagree on the epoch's leader, every node
    naming another leader than the majority's (all of them when there is no majority)."""
    out = []
    for r in conflicts:
        changes = r["changes"]
        per_node = Counter(c["node"] for c in changes)
        for node, n in sorted(per_node.items()):
            if n > 1:
                offsets = sorted(c["offset"] for c in changes if c["node"] == node)
                out.append(violation("election_safety", node, offsets[1],
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
                    out.append(violation("election_safety", c["node"], c["offset"],
                                         f"epoch {r['leader_epoch']} has leader "
                                         f"{c['leader_id']} here, but {', '.join(rest)}"))
    return out


def attribute_log_matching(rows: list, basis: str) -> list[dict[str, Any]]:
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
            out.append(violation("log_matching", node, offset,
                                 f"{what}; committed point basis {basis}", ",".join(others)))
    return out


def epoch_checkpoint_violations(info: dict, first_by_epoch: dict[int, int]) -> list[dict] | None:
    """``leader_epoch_checkpoint`` violations of one node (``info``, a row of
    :attr:`tools.audit.jobs.AuditResult.nodes`) against ``first_by_epoch`` (epoch -> its first
    offset in the node's log); None when the node's ``leader-epoch-checkpoint`` is missing or
    unreadable (Kafka's ``LeaderEpochCheckpointFile`` format)."""
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
            out.append(violation("leader_epoch_checkpoint", node, first,
                                 f"epoch {epoch} starts at {first} in the log but has no entry"))
        elif have != first and not (first == start and have <= start):
            out.append(violation("leader_epoch_checkpoint", node, first,
                                 f"entry says epoch {epoch} starts at {have}, the log at {first}"))
    for epoch, have in sorted(by_epoch.items()):
        if epoch in first_by_epoch or have < start:
            continue
        detail = (f"entry (epoch {epoch}, start {have}) is at or beyond the log end offset {leo}"
                  if have >= leo else f"entry (epoch {epoch}, start {have}) has no such epoch in the log")
        out.append(violation("leader_epoch_checkpoint", node, have, detail))
    return out


def snapshot_violations(node_info: list[dict], snapshots: list[dict],
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
            out.append(violation("snapshot", r["node"], end,
                                 f"{r['file']} does not start with a SnapshotHeader"))
        if r["last_type"] != 4:
            out.append(violation("snapshot", r["node"], end,
                                 f"{r['file']} does not end with a SnapshotFooter"))
    for r in end_mismatches:
        out.append(violation("snapshot", r["node"], r["offset"],
                             f"{r['file']} names epoch {r['epoch']} but the log has epoch "
                             f"{r['leader_epoch']} at offset {r['offset']}"))
    for n in node_info:
        if n["log_start_offset"] > 0 and n["log_start_offset"] not in ends[n["node"]]:
            out.append(violation("snapshot", n["node"], n["log_start_offset"],
                                 f"log starts at {n['log_start_offset']} but no snapshot ends "
                                 "there"))
    return out
