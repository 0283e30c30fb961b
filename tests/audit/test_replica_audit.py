"""The replica audit over synthetic broker log directories (tests/audit/broker_synth.py): each
check fires on the fault it names, at the offsets it names, and nothing fires on a healthy
cluster. The same checks on stock brokers' directories: compat/test_replica_audit_stock.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from storage.leader_epoch import EpochEntry
from tests.audit.broker_synth import Cluster, Copy
from tools.audit.broker_dirs import classify_dirs, iter_segment
from tools.audit.cli import main
from tools.audit.history import read_history
from tools.audit.replica_scan import BadBytes, BatchSummary
from tools.audit.replicas import audit_replicas

BROKERS = (101, 102, 103)


def healthy() -> Cluster:
    cluster = Cluster()
    cluster.partition_record(0, leader=101, isr=list(BROKERS))
    cluster.change(0, leader=102)  # epoch 1
    for broker in BROKERS:
        cluster.copies[broker] = {0: Copy([(0, 5), (0, 5), (1, 4), (1, 6)], high_watermark=20)}
    return cluster


def audit(root: Path, cluster: Cluster, metadata: bool = True):  # noqa: ANN201
    dirs = classify_dirs([str(d) for d in cluster.write(root)])
    history = read_history(dirs[0].metadata_dir) if metadata and dirs[0].metadata_dir else None
    return audit_replicas(dirs, history)


def invariants(result, severity: str = "violation") -> list[tuple[str, str | None, int | None, int | None]]:  # noqa: ANN001
    return sorted((f.invariant, f.node, f.offset, f.end_offset) for f in result.findings if f.severity == severity)


def test_healthy_cluster_is_clean(tmp_path: Path) -> None:
    result = audit(tmp_path, healthy())
    assert result.ok and not result.findings, [f.to_dict() for f in result.findings]
    [report] = result.partitions
    assert (report.reference, report.committed, report.basis, report.lost) == ("102", 20, "high-watermark", [])
    assert result.batches == 12 and result.bytes_read > 0


def test_directories_told_apart(tmp_path: Path) -> None:
    dirs = healthy().write(tmp_path)
    (tmp_path / "controller" / "__cluster_metadata-0").mkdir(parents=True)
    found = classify_dirs([str(tmp_path / "broker-*"), f"ctl={tmp_path / 'controller'}"])
    assert [(d.name, d.broker, d.metadata_dir is not None) for d in found] == [
        ("101", True, True), ("102", True, False), ("103", True, False), ("ctl", False, True)]
    assert [d.path for d in found[:3]] == [str(d) for d in dirs]
    (tmp_path / "empty").mkdir()
    for bad in ([str(tmp_path / "empty")], [str(tmp_path / "nothing-*")], [str(tmp_path / "missing")]):
        with pytest.raises(ValueError):
            classify_dirs(bad)


def test_unclean_election_names_the_lost_offsets(tmp_path: Path) -> None:
    """101 led epoch 0 alone (ISR [101]) and had 15 records acknowledged; 102 was elected
    outside the ISR and wrote epoch 1 from offset 10. Offsets 10-14 are lost, and the cause is
    the PartitionChangeRecord of the unclean election."""
    cluster = Cluster()
    cluster.partition_record(0, leader=101, isr=list(BROKERS))
    cluster.change(0, isr=[101])
    cluster.change(0, leader=102, isr=[102], recovering=True)
    cluster.copies = {
        101: {0: Copy([(0, 5), (0, 5), (0, 5)], high_watermark=15)},
        102: {0: Copy([(0, 5), (0, 5), (1, 3)], high_watermark=13)},
        103: {0: Copy([(0, 5), (0, 5), (1, 3)], high_watermark=13)},
    }
    result = audit(tmp_path, cluster)
    assert invariants(result) == [("lost_acknowledged_data", "101", 10, 15)]
    [lost] = result.violations
    assert lost.epochs == (0,)
    assert lost.cause == ("PartitionChangeRecord at metadata offset 3 made broker 102 leader in epoch 1, outside "
                          "the ISR [101]: an unclean election (leader recovery state RECOVERING)")
    assert result.lost == [{"topic": "orders", "partition": 0, "start": 10, "end": 15}]
    timeline = result.timelines[("orders", 0)]  # what the report's plot draws
    assert timeline.spans["101"] == [(0, 15, 0)] and timeline.spans["102"] == [(0, 10, 0), (10, 13, 1)]
    assert timeline.leaders == {0: (101, (101,)), 1: (102, (102,))}


def test_lost_leader_disk(tmp_path: Path) -> None:
    """The only ISR member lost its disk and came back empty as leader: what the others held
    below their high watermarks is lost; its own log is below its checkpointed high watermark."""
    cluster = Cluster()
    cluster.partition_record(0, leader=101, isr=list(BROKERS))
    cluster.change(0, isr=[101])
    cluster.change(0, leader=101)  # re-elected from the ISR after its restart: epoch 1
    cluster.copies = {
        101: {0: Copy([(1, 4)], high_watermark=12)},
        102: {0: Copy([(0, 6), (0, 6)], high_watermark=12)},
        103: {0: Copy([(0, 6)], high_watermark=6)},
    }
    result = audit(tmp_path, cluster)
    assert invariants(result) == [
        ("log_below_high_watermark", "101", 4, 12),
        ("lost_acknowledged_data", "102", 0, 12), ("lost_acknowledged_data", "103", 0, 6)]
    assert result.lost == [{"topic": "orders", "partition": 0, "start": 0, "end": 12}]


def test_only_in_sync_replica_lost(tmp_path: Path) -> None:
    """The ISR shrank to 101, which alone acknowledged offsets 10-14, then lost its copy (its
    directory is gone, its checkpoint is not): those offsets are on no surviving replica."""
    cluster = Cluster()
    cluster.partition_record(0, leader=101, isr=list(BROKERS))
    cluster.change(0, isr=[101])
    cluster.change(0, leader=-1)  # 101 fenced: no leader, the ISR keeps it
    cluster.copies = {
        101: {0: Copy([(0, 5), (0, 5), (0, 5)], high_watermark=15)},
        102: {0: Copy([(0, 5), (0, 5)], high_watermark=10)},
        103: {0: Copy([(0, 5), (0, 5)], high_watermark=10)},
    }
    dirs = cluster.write(tmp_path)
    shutil.rmtree(dirs[0] / "orders-0")
    found = classify_dirs([str(d) for d in dirs])
    result = audit_replicas(found, read_history(found[0].metadata_dir))
    assert invariants(result) == [("lost_acknowledged_data", "101", 10, 15), ("missing_replica", "101", None, None)]
    assert result.lost == [{"topic": "orders", "partition": 0, "start": 10, "end": 15}]
    [lost] = [f for f in result.violations if f.invariant == "lost_acknowledged_data"]
    assert "101 itself holds them only up to 0" in lost.detail and "epochs" not in lost.detail
    assert lost.cause == ("PartitionChangeRecord at metadata offset 3 left the partition without a leader in epoch 1 "
                          "(ISR [101]): no copy given holds these offsets")


def test_uncommitted_tail_is_a_warning_and_a_fork_below_it_is_not(tmp_path: Path) -> None:
    cluster = healthy()
    cluster.copies[103][0] = Copy([(0, 5), (0, 5), (1, 4), (1, 6), (1, 3)], high_watermark=20)
    cluster.copies[101][0] = Copy([(0, 5), (0, 5), (0, 2)], high_watermark=10)  # stale epoch-0 tail
    result = audit(tmp_path, cluster)
    assert invariants(result) == []
    assert invariants(result, "warning") == [("divergent_uncommitted_tail", "101", 10, 12),
                                             ("divergent_uncommitted_tail", "103", 20, 23)]
    # without high watermarks the committed point is the ISR's smallest log end (20)
    cluster = healthy()
    for broker in BROKERS:
        cluster.copies[broker][0].high_watermark = None
    cluster.copies[103][0].salt = b"x"
    cluster.copies[103][0].epochs = None
    result = audit(tmp_path / "fork", cluster)
    assert invariants(result) == [("replica_divergence", "103", 0, 20)]
    assert result.partitions[0].basis == "isr-log-end"


def test_corrupt_batch_and_torn_tail(tmp_path: Path) -> None:
    dirs = healthy().write(tmp_path)
    first = dirs[1] / "orders-0" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF  # the last batch of the first segment: not the replica's tail
    first.write_bytes(bytes(data))
    last = dirs[2] / "orders-0" / f"{14:020d}.log"
    last.write_bytes(last.read_bytes() + b"\x00" * 7)
    found = classify_dirs([str(d) for d in dirs])
    result = audit_replicas(found, read_history(found[0].metadata_dir))
    assert invariants(result) == [("corrupt_batch", "102", 10, 14)]  # 102 leads: nothing counts as lost
    assert invariants(result, "warning") == [("torn_tail", "103", 20, None)]  # the bytes after offset 19's batch
    torn = [f for f in result.findings if f.invariant == "torn_tail"]
    assert "7 bytes at the end" in torn[0].detail


def test_read_ahead_keeps_a_window_ahead(tmp_path: Path) -> None:
    from tools.audit.broker_dirs import ReadAhead

    files = []
    for i in range(6):
        path = tmp_path / f"{i}.log"
        path.write_bytes(b"x" * 100)
        files.append((str(path), 0, 100))
    files.insert(3, (str(tmp_path / "missing.log"), 0, 100))  # advice only: a missing file is skipped
    ahead = ReadAhead(files, window=250)
    ahead.reading(0)
    assert ahead.issued == 2  # the first range, and the next while within 250 bytes past its start
    ahead.reading(1)
    assert ahead.issued == 3
    ahead.reading(6)
    assert ahead.issued == 7


def test_prefetch_reads_ahead_within_its_window(tmp_path: Path) -> None:
    from tools.audit.broker_dirs import Prefetch

    ranges = []
    for i in range(6):
        path = tmp_path / f"{i}.log"
        path.write_bytes(bytes([i]) * 100)
        ranges.append((str(path), 10, 100))
    ranges.insert(3, (str(tmp_path / "missing.log"), 0, 100))  # read by the scan, which reports it
    ranges.insert(4, (str(tmp_path / "0.log"), 0, 100))  # larger than max_range: left to the scan
    with Prefetch(ranges, threads=2, window=200, max_range=90) as ahead:
        assert ahead.take(0) == bytes([0]) * 90
        assert ahead._ahead <= 200  # noqa: SLF001 - the window holds
        assert [ahead.take(i) for i in range(1, 8)] == [
            bytes([1]) * 90, bytes([2]) * 90, None, None, bytes([3]) * 90, bytes([4]) * 90, bytes([5]) * 90]


def test_deep_read_decodes_the_records(tmp_path: Path) -> None:
    """A batch whose CRC was recomputed over records that do not match its header passes the
    CRC check; only the deep read finds it. A producer snapshot that cannot be read, or lies
    beyond the log end, is a warning."""
    import crc32c

    from storage.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot

    dirs = healthy().write(tmp_path)
    for log_dir in dirs:  # the same bytes on every copy, as a leader that wrote them would leave them
        segment = log_dir / "orders-0" / f"{0:020d}.log"
        data = bytearray(segment.read_bytes())
        data[57:61] = (7).to_bytes(4, "big")  # the first batch claims 7 records; it holds 5
        size = 12 + int.from_bytes(data[8:12], "big")  # BaseOffset and Length, then Length bytes
        data[17:21] = crc32c.crc32c(bytes(data[21:size])).to_bytes(4, "big")  # the CRC covers Attributes on
        segment.write_bytes(bytes(data))
    (dirs[0] / "orders-0" / f"{5:020d}.snapshot").write_bytes(encode_producer_snapshot(
        [ProducerSnapshotEntry(7, 0, 4, 4, 4, 0, -1, -1)]))
    (dirs[0] / "orders-0" / f"{99:020d}.snapshot").write_bytes(encode_producer_snapshot([]))
    (dirs[1] / "orders-0" / f"{10:020d}.snapshot").write_bytes(b"\x00\x01garbage")
    found = classify_dirs([str(d) for d in dirs])
    history = read_history(found[0].metadata_dir)
    shallow = audit_replicas(found, history)
    assert shallow.ok
    assert invariants(shallow, "warning") == [("producer_snapshot", "101", 99, None), ("producer_snapshot", "102", 10, None)]
    deep = audit_replicas(found, history, deep=True)
    assert invariants(deep) == [("undecodable_records", str(b), 0, 5) for b in BROKERS]
    assert "InvalidRecordError" in deep.violations[0].detail


def test_segment_read_in_chunks(tmp_path: Path) -> None:
    """A chunk smaller than a batch still yields every batch whole."""
    dirs = healthy().write(tmp_path)
    path = str(dirs[0] / "orders-0" / f"{0:020d}.log")
    whole = list(iter_segment(path, True))
    assert list(iter_segment(path, True, chunk_bytes=7)) == whole
    assert [b.base_offset for b in whole if isinstance(b, BatchSummary)] == [0, 5, 10]
    with open(path, "ab") as f:
        f.write(b"\xff" * 20)  # an impossible size field
    tail = list(iter_segment(path, True, chunk_bytes=7))[-1]
    assert isinstance(tail, BadBytes) and tail.size == 20 and "unframeable" in tail.detail


def test_epoch_checkpoint_checks(tmp_path: Path) -> None:
    cluster = healthy()
    cluster.copies[102][0].epochs = [EpochEntry(0, 0), EpochEntry(1, 14)]  # epoch 1 starts at 10
    cluster.copies[103][0].epochs = [EpochEntry(1, 0), EpochEntry(0, 10)]
    cluster.copies[101][0] = Copy([(0, 5), (0, 5), (7, 4), (7, 6)], high_watermark=10)
    result = audit(tmp_path, cluster)
    got = invariants(result)
    assert ("leader_epoch_checkpoint", "102", 10, None) in got  # below the recovery point: a violation
    assert ("leader_epoch_checkpoint", "103", 10, None) in got
    assert ("epoch_not_in_metadata", "101", 10, None) in got


def test_directories_against_the_metadata(tmp_path: Path) -> None:
    cluster = healthy()
    cluster.change(0, replicas=[101, 102], isr=[101, 102])
    from kwire.uuid import Uuid

    cluster.copies[101][1] = Copy([(0, 2)], high_watermark=2, topic_id=Uuid(bytes(15) + b"\x43"))
    result = audit(tmp_path, cluster)
    got = invariants(result)
    assert ("stray_replica", "103", None, None) in got
    assert ("orphan_partition", "101", None, None) in got  # partition 1 does not exist
    # a broker the partition is assigned to, without its directory
    cluster = healthy()
    dirs = cluster.write(tmp_path / "missing")
    (dirs[2] / "orders-0" / "partition.metadata").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAQw")
    found = classify_dirs([str(d) for d in dirs])
    result = audit_replicas(found, read_history(found[0].metadata_dir))
    assert ("orphan_partition", "103", None, None) not in invariants(result)
    assert ("topic_id_mismatch", "103", None, None) in invariants(result)
    os.rename(dirs[1] / "orders-0", dirs[1] / ("orders-0." + "a" * 32 + "-stray"))
    result = audit_replicas(found, read_history(found[0].metadata_dir))
    assert ("missing_replica", "102", None, None) in invariants(result)
    assert ("stray_directory", "102", None, None) in invariants(result, "warning")


def test_deleted_topic_left_on_disk(tmp_path: Path) -> None:
    cluster = healthy()
    cluster.remove_topic()
    result = audit(tmp_path, cluster)
    assert invariants(result) == [("orphan_partition", str(b), None, None) for b in BROKERS]


def test_without_metadata(tmp_path: Path) -> None:
    """No metadata log: the reference is the replica of the newest epoch, and the checks that
    need the metadata are skipped."""
    cluster = healthy()
    cluster.copies[103][0] = Copy([(0, 5), (0, 5), (0, 5)], high_watermark=15)
    cluster.metadata = []
    result = audit(tmp_path, cluster, metadata=False)
    assert result.metadata_source is None
    assert invariants(result) == [("lost_acknowledged_data", "103", 10, 15)]
    assert result.violations[0].cause == "101 continues from offset 10 in leader epoch 1 (no metadata record for it)"


@pytest.mark.parametrize(("scenario", "split_bytes"), [
    ("healthy", 100), ("unclean", 100), ("lost_disk", 100), ("corrupt", 100), ("unclean", 1 << 20),
    ("corrupt", 1 << 20)])
def test_spark_gives_the_same_result(spark, tmp_path: Path, scenario: str, split_bytes: int) -> None:  # noqa: ANN001
    """The Spark audit finds what the one-process audit finds: with the partition cut into
    offset ranges of a batch through the segments' indexes (the copies' batches of each range
    read together, the ranges' scans joined after the shuffle; in the unclean run the cuts fall
    inside other copies' batches), and with each partition read and judged by one task."""
    from tools.audit.replica_spark import audit_replicas_spark, plan_units
    from tools.audit.replicas import list_segments, plan_replicas

    cluster = healthy()
    if scenario == "unclean":
        cluster.copies[101][0] = Copy([(0, 5), (0, 5), (0, 5), (0, 5), (0, 5)], high_watermark=25)
    elif scenario == "lost_disk":
        cluster.copies[102][0].high_watermark = 30  # checkpointed past its log end
    dirs = cluster.write(tmp_path)
    if scenario == "corrupt":
        segment = dirs[2] / "orders-0" / f"{0:020d}.log"
        data = bytearray(segment.read_bytes())
        data[100] ^= 0x01
        segment.write_bytes(bytes(data) + b"\x00" * 9)  # and a torn batch at the end of a middle segment
    found = classify_dirs([str(d) for d in dirs])
    history = read_history(found[0].metadata_dir)
    copies = plan_replicas(found).copies
    units = plan_units(list_segments(copies), split_bytes)
    if split_bytes == 100:  # a range per batch of the largest copy
        assert [(u.lo, u.hi, u.whole) for u in units] == (
            [(None, 5, False), (5, 10, False), (10, 15, False), (15, 20, False), (20, None, False)]
            if scenario == "unclean" else [(None, 5, False), (5, 10, False), (10, 14, False), (14, None, False)])
    else:
        assert [u.whole for u in units] == [True]
    local = audit_replicas(found, history)
    distributed = audit_replicas_spark(spark, found, history, split_bytes=split_bytes)
    assert [f.to_dict() for f in distributed.findings] == [f.to_dict() for f in local.findings]
    assert distributed.summary() == {**local.summary(), "metadata_source": local.metadata_source}
    assert distributed.timelines == local.timelines
    assert (scenario == "healthy") == distributed.ok
    if scenario == "corrupt" and split_bytes == 100:  # the partition table as a DataFrame: the same rows
        from tools.audit.replica_spark import partition_table

        frame = partition_table(spark, distributed)
        assert [row.asDict() for row in frame.orderBy("topic", "partition", "node").collect()] == local.partition_rows()
        assert [(r.node, r.verdict) for r in frame.where("verdict <> 'ok'").collect()] == [("103", "violation")]


def test_scans_of_offset_ranges_join_to_the_scan_of_the_whole(tmp_path: Path) -> None:
    """Reading a partition's copies in offset ranges cut anywhere (inside batches of some
    copies, between the segments of others) and joining the ranges' scans gives what one read of
    everything gives: every copy's counts, runs and findings, and where each pair of copies
    parts. The copies differ in batch shapes and epochs, and 102's batch 7-11 fails its CRC, so
    its next batch (12-13) meets 101's 7-13, which starts before a cut at 8-12."""
    import random

    from tools.audit.broker_dirs import CopyReader, segment_paths
    from tools.audit.replica_scan import PartitionScan, compared_pairs, scan_copies
    from tools.audit.replicas import open_views, plan_replicas

    cluster = Cluster()
    cluster.partition_record(0, leader=101, isr=list(BROKERS))
    cluster.copies = {
        101: {0: Copy([(0, 3), (0, 4), (0, 7), (1, 7), (2, 1), (2, 4)], high_watermark=20)},
        102: {0: Copy([(0, 3), (0, 4), (0, 5), (1, 2), (1, 7)], high_watermark=17, batches_per_segment=2)},
        103: {0: Copy([(0, 3), (0, 4), (0, 5), (3, 6), (3, 6)], high_watermark=14, batches_per_segment=4)},
    }
    dirs = cluster.write(tmp_path)
    segment = dirs[1] / "orders-0" / f"{7:020d}.log"  # 102's second segment: flip a byte of its first batch
    data = bytearray(segment.read_bytes())
    data[80] ^= 0x01
    segment.write_bytes(bytes(data))
    [(key, found)] = plan_replicas(classify_dirs([str(d) for d in dirs])).copies.items()
    views = open_views(found, *key)
    paths = [segment_paths(part.path) for _, part in found]  # type: ignore[union-attr]
    pairs = compared_pairs(views, None)

    def scan(lo: int | None, hi: int | None) -> PartitionScan:
        return scan_copies(views, [CopyReader(p, lo=lo, hi=hi) for p in paths], pairs)

    def facts(s: PartitionScan) -> object:
        return ({node: (c.batches, c.bytes_read, c.first, c.last, c.last_valid, c.runs, c.bad, c.flagged, c.disorder,
                        list(c.misplaced.items())) for node, c in s.copies.items()}, s.differences)

    whole = scan(None, None)
    assert whole.differences == {("101", "102"): 12, ("101", "103"): 7, ("102", "101"): 12, ("102", "103"): 12,
                                 ("103", "101"): 7, ("103", "102"): 12}
    assert [c.batches for c in whole.copies.values()] == [6, 5, 5] and len(whole.copies["102"].flagged) == 1
    rng = random.Random(7)
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, 28), rng.randint(1, 8)))
        bounds = [None, *cuts, None]
        joined = scan(bounds[0], bounds[1])
        for lo, hi in zip(bounds[1:], bounds[2:], strict=False):
            joined.extend(scan(lo, hi), views)
        assert facts(joined) == facts(whole), cuts


def test_batch_data_source(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """``kafkabatches``: a row per batch of every copy, segments cut into input partitions
    through their indexes, a corrupt batch and a torn tail as the audit sees them; with
    ``deep``, records decoded (101's first batch claims 7 records under a recomputed CRC)."""
    import crc32c

    from tools.audit.batch_source import KafkaBatchesDataSource

    dirs = healthy().write(tmp_path)
    first = dirs[0] / "orders-0" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[57:61] = (7).to_bytes(4, "big")
    data[17:21] = crc32c.crc32c(bytes(data[21:12 + int.from_bytes(data[8:12], "big")])).to_bytes(4, "big")
    first.write_bytes(bytes(data))
    segment = dirs[2] / "orders-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[100] ^= 0x01
    segment.write_bytes(bytes(data) + b"\x00" * 9)
    local = audit_replicas(classify_dirs([str(d) for d in dirs]), None)
    spark.dataSource.register(KafkaBatchesDataSource)
    for deep in ("false", "true"):
        df = (spark.read.format("kafkabatches").option("paths", ",".join(str(d) for d in dirs))
              .option("splitBytes", "100").option("deep", deep).load())
        assert df.rdd.getNumPartitions() >= 12  # an input partition per batch
        rows = df.orderBy("node", "file", "position").collect()
        batches = [r for r in rows if r.bad_bytes is None]
        assert len(batches) == local.batches == 12
        assert sum(r.size for r in rows) == local.bytes_read
        [(node, bad)] = [(r.node, r.bad_bytes) for r in rows if r.bad_bytes is not None]
        assert node == "103" and "torn batch: 9 bytes" in bad
        assert [(r.node, r.base_offset) for r in batches if not r.crc_valid] == [("103", 0)]
        assert {(r.node, r.topic, r.partition, r.broker_id) for r in batches} == {
            (str(b), "orders", 0, b) for b in BROKERS}
        ends = {r.node: r["max(last_offset)"] for r in df.groupBy("node").max("last_offset").collect()}
        assert ends == {"101": 19, "102": 19, "103": 19}
        undecodable = [(r.node, r.base_offset) for r in batches if r.records_error is not None]
        assert undecodable == ([("101", 0)] if deep == "true" else [])
        epochs = {(r.base_offset, r.leader_epoch) for r in batches if r.node == "101"}
        assert epochs == {(0, 0), (5, 0), (10, 1), (14, 1)}


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kwire audit`` on broker log directories: exit status, lines, JSON and report files."""
    dirs = healthy().write(tmp_path / "ok")
    assert main([str(tmp_path / "ok" / "broker-*"), "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["replicas"]["ok"] and out["replicas"]["partitions"] == 1
    assert out["replicas"]["metadata_source"] == str(dirs[0] / "__cluster_metadata-0")
    cluster = healthy()
    cluster.copies[103][0] = Copy([(0, 5), (0, 5), (0, 5), (0, 5), (0, 4)], high_watermark=24)
    cluster.write(tmp_path / "bad")
    report = tmp_path / "report"
    assert main([str(tmp_path / "bad" / "broker-*"), "--quiet", "--out", str(report)]) == 1
    err = capsys.readouterr().err
    assert "VIOLATION lost_acknowledged_data topic=orders partition=0 node=103 offsets=10-23" in err
    lines = (report / "replica_violations.jsonl").read_text().splitlines()
    assert [json.loads(line)["invariant"] for line in lines] == ["lost_acknowledged_data"]
    assert (report / "partition-orders-0.png").stat().st_size > 0
    assert json.loads((report / "replica_summary.json").read_text())["lost"] == [
        {"topic": "orders", "partition": 0, "start": 10, "end": 24}]
    assert main([str(tmp_path / "nothing-*")]) == 2
