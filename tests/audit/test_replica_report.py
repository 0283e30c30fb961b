"""What the replica audit tells a person and a script (synthetic brokers of
tests/audit/broker_synth.py): broker ids from ``meta.properties`` whatever the directories are
named, directories whose ids disagree as findings of their own, ``--json`` with the findings and
the partition table (capped, with what was left out), and the report directory: the partition
table, the plots and an ``index.html`` whose links all resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from storage.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from tests.audit.broker_synth import CLUSTER_ID
from tests.audit.test_replica_audit import BROKERS, healthy
from tools.audit.broker_dirs import classify_dirs
from tools.audit.cli import main
from tools.audit.history import read_history
from tools.audit.identity import identity_findings
from tools.audit.replicas import audit_replicas


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    capsys.readouterr()
    status = main([*args, "--json", "--quiet"])
    return status, json.loads(capsys.readouterr().out)


def _claim(log_dir: Path, node_id: int, directory: int | None = None, cluster: str = CLUSTER_ID) -> None:
    """Rewrite ``log_dir``'s meta.properties to claim ``node_id`` (and a directory id)."""
    meta = read_meta_properties(log_dir)
    directory_id = meta.directory_id if directory is None else Uuid(bytes(15) + bytes([directory]))
    write_meta_properties(log_dir, MetaProperties(1, cluster, node_id, directory_id), fsync=False)


def _flip(segment: Path, position: int) -> None:
    data = bytearray(segment.read_bytes())
    data[position] ^= 0x01
    segment.write_bytes(bytes(data))


def test_named_directories_keep_their_broker_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = healthy().write(tmp_path)
    _flip(dirs[2] / "orders-0" / f"{0:020d}.log", 70)  # in the first batch's records: its CRC fails
    status, out = _run([f"b{b}={d}" for b, d in zip(BROKERS, dirs, strict=True)], capsys)
    assert status == 1
    replicas = out["replicas"]
    assert [(d["node"], d["broker_id"], d["directory_id"]) for d in replicas["log_dirs"]] == [
        (f"b{b}", b, str(Uuid(bytes(15) + bytes([b])))) for b in BROKERS]
    [corrupt] = replicas["findings"]["violations"]
    assert {k: corrupt[k] for k in ("invariant", "topic", "partition", "node", "broker_id", "offset", "end_offset")} == {
        "invariant": "corrupt_batch", "topic": "orders", "partition": 0, "node": "b103", "broker_id": 103,
        "offset": 0, "end_offset": 5}
    assert replicas["findings"]["left_out"] == {"violations": 0, "warnings": 0}
    table = replicas["partition_table"]
    assert table["left_out"] == 0
    assert [(r["node"], r["broker_id"], r["log_start_offset"], r["log_end_offset"], r["high_watermark"],
             r["last_leader_epoch"], r["reference"], r["verdict"], r["findings"]) for r in table["rows"]] == [
        ("b101", 101, 0, 20, 20, 1, False, "ok", []),
        ("b102", 102, 0, 20, 20, 1, True, "ok", []),  # the leader the metadata names
        ("b103", 103, 0, 20, 20, 1, False, "violation", ["corrupt_batch"]),
    ]
    assert {r["partition_verdict"] for r in table["rows"]} == {"violation"}
    assert {r["topic_id"] for r in table["rows"]} == {"AAAAAAAAAAAAAAAAAAAAQg"}


def test_json_findings_are_capped_with_a_count_of_what_was_left_out(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    dirs = healthy().write(tmp_path)
    for d in dirs:  # a corrupt first batch on every copy
        _flip(d / "orders-0" / f"{0:020d}.log", 70)
    status, out = _run([*map(str, dirs), "--json-limit", "2"], capsys)
    assert status == 1
    findings, table = out["replicas"]["findings"], out["replicas"]["partition_table"]
    assert findings["limit"] == 2 and out["replicas"]["violations"] == 3
    assert [(v["invariant"], v["node"]) for v in findings["violations"]] == [("corrupt_batch", "101"),
                                                                            ("corrupt_batch", "102")]
    assert findings["left_out"] == {"violations": 1, "warnings": 0}
    assert [r["node"] for r in table["rows"]] == ["101", "102"] and table["left_out"] == 1
    _, whole = _run([*map(str, dirs), "--json-limit", "0"], capsys)
    assert len(whole["replicas"]["findings"]["violations"]) == 3 and whole["replicas"]["findings"]["limit"] is None


def test_two_directories_claiming_one_node_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """103's directory claims node.id 102 (its own directory id): two directories of broker 102
    each hold a copy of orders-0 -- two brokers with one id, a violation on both. Named
    ``b103=``, its name disagrees with its meta.properties too."""
    dirs = healthy().write(tmp_path)
    _claim(dirs[2], 102)
    status, out = _run([f"b101={dirs[0]}", f"b102={dirs[1]}", f"b103={dirs[2]}"], capsys)
    assert status == 1
    found = out["replicas"]["findings"]
    duplicate = [(v["invariant"], v["node"], v["broker_id"]) for v in found["violations"]
                 if v["invariant"] == "duplicate_node_id"]
    assert duplicate == [("duplicate_node_id", "b102", 102), ("duplicate_node_id", "b103", 102)]
    detail = found["violations"][0]["detail"]
    assert "2 directories claim node.id 102" in detail and "each holds a copy of orders-0" in detail, detail
    assert [(w["invariant"], w["node"]) for w in found["warnings"]] == [("node_name_mismatch", "b103")]
    assert "says node.id 102" in found["warnings"][0]["detail"]
    assert [d["broker_id"] for d in out["replicas"]["log_dirs"]] == [101, 102, 102]


def test_one_directory_given_twice_and_a_jbod_pair(tmp_path: Path) -> None:
    """The same directory.id twice is a violation even with nothing in common; two log
    directories of one broker (distinct directory ids, no shared partition) are a warning; a
    directory of another cluster is a violation."""
    dirs = healthy().write(tmp_path)
    second = tmp_path / "broker-101-b"
    second.mkdir()
    (second / "replication-offset-checkpoint").write_text("0\n0\n")  # an empty log directory of broker 101
    write_meta_properties(second, MetaProperties(1, CLUSTER_ID, 101, Uuid(bytes(15) + b"\x99")), fsync=False)
    found = identity_findings(classify_dirs([*map(str, dirs), str(second)]))
    assert [(f.invariant, f.severity, f.node) for f in found] == [  # named by directory id, as they share a node id
        ("duplicate_node_id", "warning", str(Uuid(bytes(15) + b"\x65"))),
        ("duplicate_node_id", "warning", str(Uuid(bytes(15) + b"\x99")))]
    assert "audited as one broker's log.dirs" in found[0].detail
    _claim(second, 101, directory=101)  # now the same directory id as broker-101's
    found = identity_findings(classify_dirs([*map(str, dirs), str(second)]))
    assert {(f.invariant, f.severity) for f in found} == {("duplicate_node_id", "violation")}
    assert "one directory given twice, or a copy" in found[0].detail
    assert [f.node for f in found] == ["broker-101", "broker-101-b"]  # one directory id: their directory names
    _claim(dirs[2], 103, cluster="BBBBBBBBBBBBBBBBBBBBBB")
    found = identity_findings(classify_dirs(list(map(str, dirs))))
    assert [(f.invariant, f.severity, f.node) for f in found] == [("cluster_id_mismatch", "violation", "103")]


def test_report_directory(tmp_path: Path) -> None:
    """``--out``: the partition table as JSON lines, the plots, and an index whose every link
    and image is a file of the directory."""
    dirs = healthy().write(tmp_path / "dirs")
    _flip(dirs[2] / "orders-0" / f"{0:020d}.log", 70)
    report = tmp_path / "report"
    assert main([*map(str, dirs), "--quiet", "--out", str(report)]) == 1
    rows = [json.loads(line) for line in (report / "replica_partitions.jsonl").read_text().splitlines()]
    found = classify_dirs(list(map(str, dirs)))
    assert rows == audit_replicas(found, read_history(found[0].metadata_dir)).partition_rows()
    page = (report / "index.html").read_text()
    targets = set(re.findall(r"(?:href|src)='([^']+)'", page))
    assert targets >= {"replica_summary.json", "replica_violations.jsonl", "replica_warnings.jsonl",
                       "replica_partitions.jsonl", "cluster_summary.png", "partition-orders-0.png"}
    assert all((report / t).is_file() for t in targets), targets
    assert "corrupt_batch" in page and "1 violations, 0 warnings" in page
    for png in ("cluster_summary.png", "partition-orders-0.png"):
        assert (report / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_partition_plot_draws_what_was_found(tmp_path: Path) -> None:
    """The plot's corrupt range, torn tail and lost range are drawn in their colours: the pixels
    of each colour are there (Agg's output, read back with matplotlib)."""
    import matplotlib.image

    from tests.audit.broker_synth import Copy
    from tools.audit.replica_plots import LOST, MARKS
    from tools.audit.replica_report import write_replica_report

    cluster = healthy()
    cluster.copies[101][0] = Copy([(0, 5), (0, 5), (0, 5), (0, 5), (0, 4)], high_watermark=24)  # acked 20-23: lost
    dirs = cluster.write(tmp_path / "dirs")
    _flip(dirs[2] / "orders-0" / f"{0:020d}.log", 70)
    last = dirs[1] / "orders-0" / f"{14:020d}.log"
    last.write_bytes(last.read_bytes() + b"\x00" * 7)
    found = classify_dirs(list(map(str, dirs)))
    result = audit_replicas(found, read_history(found[0].metadata_dir))
    assert sorted((f.invariant, f.node) for f in result.findings) == [
        ("corrupt_batch", "103"), ("lost_acknowledged_data", "101"), ("torn_tail", "102")]
    write_replica_report(result, str(tmp_path / "report"))
    pixels = matplotlib.image.imread(tmp_path / "report" / "partition-orders-0.png")[:, :, :3]

    def present(colour: str) -> bool:
        rgb = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        return bool((abs(pixels - rgb).max(axis=2) < 0.02).sum() > 50)

    assert present(MARKS["corrupt_batch"][0]) and present(MARKS["torn_tail"][0])
    assert not present(MARKS["undecodable_records"][0])
    lost = [int(LOST[0][i:i + 2], 16) / 255 for i in (1, 3, 5)]
    shade = [0.45 * c + 0.55 for c in lost]  # drawn at alpha 0.45 over white
    assert (abs(pixels - shade).max(axis=2) < 0.03).sum() > 50


def test_metadata_log_audit_reports_two_nodes_with_one_id(tmp_path: Path) -> None:
    """Controllers' metadata log directories: two claiming node.id 1, each with a metadata log,
    are two nodes with one id; the metadata-log audit carries the finding in its own shape."""
    from tests.audit.test_audit_node_names import dir_id, format_node
    from tools.audit.cli import _add_identity_findings
    from tools.audit.jobs import AuditResult

    dirs = classify_dirs([str(format_node(tmp_path / x / "meta", 1, dir_id(n))) for n, x in ((1, "a"), (2, "b"))])
    result = AuditResult(nodes=[], commit_basis="min-leo", high_watermark=None)
    _add_identity_findings(result, dirs)
    assert [(v["invariant"], v["node"], v["offset"]) for v in result.violations] == [
        ("duplicate_node_id", str(dir_id(1)), None), ("duplicate_node_id", str(dir_id(2)), None)]
    assert "each holds a metadata log" in result.violations[0]["detail"]
    assert result.violation_counts == {"duplicate_node_id": 2} and not result.ok
