"""The metadata-log audit's timeline: per leader epoch its leader, offsets, times, record
types and batch sizes, with the voter-set changes, records per second and a batch-size
histogram, from queries run together with the checks."""

from __future__ import annotations

import json
from typing import Any

from tools.audit.log_rows import VIEW, sorted_rows
from tools.audit.scan import CONTROL_TYPE_NAMES


def _type_name(is_control: bool, control_type: int | None, api_key: int | None) -> str:
    from messages.metadata import record_type_name

    if is_control:
        if control_type is None:
            return "CONTROL_UNKNOWN"
        return CONTROL_TYPE_NAMES.get(control_type, f"CONTROL_{control_type}")
    return record_type_name(api_key) if api_key is not None else "UNDECODED"


# The timeline's queries (run by collect_together with the checks; ``:ref`` is the reference
# node, the one with the longest log).
TIMELINE_QUERIES = {
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


def build_timeline(got: dict[str, list[dict[str, Any]]], ref: str) -> dict[str, Any]:
    """Per epoch: leader, start offset and time, record-type counts and batch sizes (from the
    reference replica ``ref``, the one with the longest log), voter-set changes, records per
    second and a batch-size histogram -- from the rows of :data:`TIMELINE_QUERIES`."""
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
    for r in sorted_rows(got["tl_types"], "leader_epoch", "is_control", "control_type", "api_key"):
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
                  for r in sorted_rows(got["tl_per_second"], "sec")]
    histogram = [{"bucket_bytes": int(r["bucket"]), "batches": r["n"]}
                 for r in sorted_rows(got["tl_histogram"], "bucket")]
    return {
        "reference_node": ref,
        "epochs": [epochs[k] for k in sorted(epochs)],
        "voter_changes": voter_changes,
        "records_per_second": per_second,
        "batch_size_histogram": histogram,
    }
