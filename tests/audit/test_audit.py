"""The audit end to end: synthetic 3-replica metadata logs through the ``kraftlog`` data source
and the Spark checks; one pass per damaged copy."""

from __future__ import annotations

import copy
import json
import os
import re
import struct

import pytest

from messages.generated.topic_record import TopicRecord
from messages.metadata import encode_record
from storage.record_codec import SimpleRecord
from tests.audit.synth import (
    PARTITION,
    Batch,
    flip_byte,
    make_cluster,
    make_history,
    segment_files,
    write_node,
)
from tools.audit import cli
from tools.audit.jobs import run_audit
from tools.audit.report import write_report
from tools.audit.scan import parse_node_dirs, plan_file_parts, read_rows, scan_rows_python

EPOCHS = [(1, 1, 4), (2, 2, 5), (3, 3, 4)]  # (epoch, leader, data batches of 3 records)
HISTORY = make_history(EPOCHS)
END = HISTORY.end_offset  # 44
SNAPSHOT_ROWS = 5  # header, kraft.version, voters, one record, footer


def nodes_of(dirs):
    return parse_node_dirs([str(d) for d in dirs])


def by_invariant(result, invariant):
    return [v for v in result.violations if v["invariant"] == invariant]


# -- without Spark -----------------------------------------------------------------------------


def test_python_scan_counts_every_record_and_splits_at_batch_boundaries(tmp_path):
    dirs = make_cluster(tmp_path, HISTORY)
    assert scan_rows_python([str(d) for d in dirs]) == 3 * (END + SNAPSHOT_ROWS)

    whole = plan_file_parts(nodes_of(dirs[:1]))
    split = plan_file_parts(nodes_of(dirs[:1]), split_bytes=300)
    assert len(split) > len(whole)
    rows_whole = [r for p in whole for r in read_rows(p)]
    rows_split = [r for p in split for r in read_rows(p)]
    assert rows_split == rows_whole
    assert all(r[10] for r in rows_whole)  # crc_valid
    first = rows_whole[0]
    assert (first[5], first[7], first[8], first[11], first[12]) == (0, 0, 1, True, 2)
    assert json.loads(first[18])["data"]["leaderId"] == 1


def test_python_scan_turns_a_torn_and_corrupt_tail_into_invalid_rows(tmp_path):
    (d,) = [write_node(tmp_path / "n", HISTORY)]
    last = segment_files(d)[-1]
    flip_byte(last, os.path.getsize(last) - 5)  # inside the last batch's records
    with open(last, "ab") as f:
        f.write(struct.pack(">qiib", END, 256, 3, 2) + b"\x00" * 5)  # promises 268 bytes
    rows = [r for p in plan_file_parts(nodes_of([tmp_path / "n"])) for r in read_rows(p)]
    bad = [r for r in rows if not r[10]]
    assert {r[7] for r in bad if r[7] is not None} == {END - 3, END - 2, END - 1}
    torn = [r for r in bad if r[7] is None]
    assert len(torn) == 1 and torn[0][19].startswith("torn batch")


def test_arrow_batches_carry_the_rows_under_the_schema_spark_expects(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    import pyspark.sql.types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    from tools.audit.datasource import arrow_batches, arrow_schema
    from tools.audit.scan import COLUMNS, SCHEMA

    sql_types = {"string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(),
                 "boolean": T.BooleanType(), "binary": T.BinaryType()}
    struct = T.StructType([T.StructField(p.split()[0], sql_types[p.split()[1]])
                           for p in SCHEMA.split(",")])
    assert arrow_schema().equals(to_arrow_schema(struct, timezone="UTC"))

    dirs = make_cluster(tmp_path, HISTORY)
    rows = [r for p in plan_file_parts(nodes_of(dirs)) for r in read_rows(p)]
    batches = list(arrow_batches(iter(rows), batch_rows=50))
    assert [b.num_rows for b in batches[:-1]] == [50] * (len(batches) - 1)
    back = [tuple(b.column(i)[j].as_py() for i in range(len(COLUMNS)))
            for b in batches for j in range(b.num_rows)]
    assert back == rows


# -- Spark -------------------------------------------------------------------------------------


@pytest.mark.spark
def test_consistent_replicas_pass_with_timeline_and_report(spark, tmp_path):
    dirs = make_cluster(tmp_path / "q", HISTORY)
    result = run_audit(spark, nodes_of(dirs), split_bytes=600)
    assert result.violations == [] and result.warnings == []
    assert result.rows == 3 * (END + SNAPSHOT_ROWS) and result.invalid_rows == 0
    assert [n["log_end_offset"] for n in result.nodes] == [END] * 3

    epochs = result.timeline["epochs"]
    assert [(e["epoch"], e["leader"], e["start_offset"]) for e in epochs] == [
        (1, 1, 0), (2, 2, 15), (3, 3, 31)
    ]
    assert epochs[1]["record_types"] == {
        "LEADER_CHANGE": 1, "FEATURE_LEVEL_RECORD": 5, "TOPIC_RECORD": 5, "NO_OP_RECORD": 5
    }
    assert epochs[1]["batch_bytes"]["batches"] == 6
    assert [c["voters"] for c in result.timeline["voter_changes"]] == [[1, 2, 3]]
    assert sum(p["records"] for p in result.timeline["records_per_second"]) == END

    written = write_report(result, str(tmp_path / "report"))
    names = {os.path.basename(p) for p in written}
    assert {"summary.json", "violations.jsonl", "timeline.png", "records_per_second.png",
            "batch_sizes.png", "index.html"} <= names
    with open(tmp_path / "report" / "index.html") as f:  # every link and image is a file beside it
        targets = set(re.findall(r"(?:href|src)='([^']+)'", f.read()))
    assert "timeline.png" in targets and all((tmp_path / "report" / t).is_file() for t in targets), targets
    for p in written:
        if p.endswith(".png"):
            with open(p, "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "report" / "summary.json") as f:
        assert json.load(f)["ok"] is True


@pytest.mark.spark
def test_altered_record_bytes_on_one_replica_are_named(spark, tmp_path):
    altered = copy.deepcopy(HISTORY)
    victim = altered.batches[7]  # a data batch of epoch 2, offsets 19..21
    records = list(victim.records)
    records[1] = SimpleRecord(
        encode_record(TopicRecord(name="evil", topic_id=TopicRecord().topic_id), 0),
        timestamp=victim.timestamp,
    )
    altered.batches[7] = Batch(victim.offset, victim.epoch, victim.timestamp, records, False)
    dirs = make_cluster(tmp_path / "q", HISTORY)
    write_node(dirs[2], altered)
    result = run_audit(spark, nodes_of(dirs), timeline=False)
    found = by_invariant(result, "log_matching")
    assert [(v["node"], v["offset"]) for v in found] == [("node3", victim.offset + 1)]
    assert "record bytes differ" in found[0]["detail"]
    assert set(result.violation_counts) == {"log_matching"}


@pytest.mark.spark
def test_rewritten_epoch_breaks_election_safety_and_log_matching(spark, tmp_path):
    rewritten = make_history([(1, 1, 4), (2, 3, 5), (3, 3, 4)])  # epoch 2 led by node 3
    dirs = make_cluster(tmp_path / "q", HISTORY)
    write_node(dirs[2], rewritten)
    result = run_audit(spark, nodes_of(dirs), timeline=False)
    election = by_invariant(result, "election_safety")
    assert [(v["node"], v["offset"]) for v in election] == [("node3", 15)]
    assert "epoch 2 has leader 3" in election[0]["detail"]
    assert [(v["node"], v["offset"]) for v in by_invariant(result, "log_matching")] == [
        ("node3", 15)
    ]


@pytest.mark.spark
def test_tail_cut_below_the_high_watermark_fails_the_command(spark, tmp_path, capsys):
    dirs = make_cluster(tmp_path / "q", HISTORY)
    cut = END - 6
    for p in (dirs[2] / PARTITION).iterdir():
        p.unlink()
    write_node(dirs[2], HISTORY, upto=cut)
    args = cli.parse_args([str(d) for d in dirs] + [
        "--high-watermark", str(END), "--out", str(tmp_path / "report"), "--json"
    ])
    assert cli.run(args, spark=spark) == 1
    out, err = capsys.readouterr()
    assert f"VIOLATION committed_entry_missing node=node3 offset={cut}" in err
    summary = json.loads(out)
    assert summary["ok"] is False and summary["commit_basis"] == "high-watermark"
    assert summary["violation_counts"] == {"committed_entry_missing": 1}
    assert [(v["invariant"], v["node"], v["offset"]) for v in summary["findings"]["violations"]] == [
        ("committed_entry_missing", "node3", cut)]
    assert summary["findings"]["left_out"] == {"violations": 0, "warnings": 0}
    with open(tmp_path / "report" / "violations.jsonl") as f:
        rows = [json.loads(line) for line in f]
    assert [(r["invariant"], r["node"], r["offset"]) for r in rows] == [
        ("committed_entry_missing", "node3", cut)
    ]


@pytest.mark.spark
def test_lagging_ok_still_names_the_last_leader_missing_committed_entries(spark, tmp_path):
    dirs = make_cluster(tmp_path / "q", HISTORY)
    cut = END - 6
    for p in (dirs[2] / PARTITION).iterdir():  # node3 led the last epoch
        p.unlink()
    write_node(dirs[2], HISTORY, upto=cut)
    result = run_audit(spark, nodes_of(dirs), high_watermark=END, lagging_ok=True,
                       timeline=False)
    assert [(v["invariant"], v["node"], v["offset"]) for v in result.violations] == [
        ("committed_entry_missing", "node3", cut)
    ]
    assert "last epoch's leader (node.id 3)" in result.violations[0]["detail"]


@pytest.mark.spark
def test_corrupt_tail_gives_invalid_rows_not_a_failed_job(spark, tmp_path):
    dirs = make_cluster(tmp_path / "q", HISTORY)
    last = segment_files(dirs[1] / PARTITION)[-1]
    flip_byte(last, os.path.getsize(last) - 5)
    with open(last, "ab") as f:
        f.write(b"\xff" * 40)  # unframeable garbage after it
    result = run_audit(spark, nodes_of(dirs), timeline=False)
    assert result.ok, result.violations
    assert result.invalid_rows == 3 + 1
    tails = [w for w in result.warnings if w["invariant"] == "torn_tail"]
    assert {(w["node"], w["offset"]) for w in tails} == {("node2", END - 3), ("node2", None)}
    assert [n["log_end_offset"] for n in result.nodes] == [END, END - 3, END]
