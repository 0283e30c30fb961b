"""``kwire audit`` on stock brokers' log directories: a healthy cluster, a corrupt batch, an
unclean election, and the loss of the only in-sync replica; the audit must name exactly the
offsets the producer was acknowledged for and that no surviving replica holds, and nothing else.

One run per configuration: a one-node controller quorum (kwire, or stock Kafka as the
control) and three stock brokers (node.id 11, 12 and 13) of the release,
``broker.session.timeout.ms`` 4 s, high watermarks checkpointed every 200 ms. Three topics of
one partition, replicas ``[11, 12, 13]`` (11 leads): ``t1`` (healthy throughout), ``unclean``
(``unclean.leader.election.enable``) and ``lost``, produced to with gzip, lz4 and zstd; the
audits read deep (every record decoded) and name the directories ``b11=DIR b12=DIR b13=DIR``,
as the audit's usage documents. Phases:

1. 100 records to each topic (kafka-python, ``acks=all``; to ``t1`` from two producers, 50
   each, so that its log has more than one batch), every replica's high watermark
   checkpointed at 100. The audit of the running brokers' directories finds no violation and
   no warning; its ``--json`` gives broker ids 11, 12 and 13 (from ``meta.properties``, though
   the directories are named) and the partition table: every copy of the three partitions
   from offset 0 to 100 with its high watermark 100, 11's the reference, every verdict ok.
   Then one byte of the first batch of 13's copy of ``t1-0`` is flipped: the audit exits 1,
   and its ``--json`` names exactly one violation, ``corrupt_batch`` at ``t1-0`` on ``b13``
   (broker 13) from offset 0 to that batch's end; the plot of ``t1-0`` draws that range in the
   corrupt-batch colour. The byte is restored.
2. Brokers 12 and 13 are killed (-9); once fenced, the ISR of every partition is ``[11]``.
   50 more records to ``unclean`` and ``lost``: acknowledged by 11 alone, offsets 100-149.
3. 11 is killed once its checkpoint holds 150, and its copy of ``lost`` deleted (the disk that
   held it is gone). 12 and 13 start again: ``unclean`` gets one of them as leader by an
   unclean election, which takes 20 more records at offsets 100-119; ``lost`` has no leader.
4. The brokers are stopped and the audit runs on their three directories with the
   controller's metadata log as history. Expected, and nothing more: on ``unclean``,
   ``lost_acknowledged_data`` of 100-149 on 11 caused by the unclean election's
   PartitionChangeRecord; on ``lost``, ``missing_replica`` on 11 and ``lost_acknowledged_data``
   of 100-149 (the copy is gone, its checkpointed high watermark is not); the lost ranges
   equal the offsets acknowledged in phase 2. On the newest release under a kwire controller,
   the Spark audit (``local[2]``, partitions cut into offset ranges of about 2 KiB) finds the
   same, and its partition table as a DataFrame holds the one-process audit's rows.

Configurations: ``make test`` runs the newest release on a kwire controller (the brokers, the
audited directories, are wholly Kafka's); ``make nightly`` (``KWIRE_COMPAT_FULL_MATRIX``) runs
every pinned release on a kwire controller and on a stock one, the same nemesis under both
controllers. About 25 s each on a quiet machine. The module runs on the worker that holds the
Spark session (conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from compat.harness import CLUSTER_ID, START_TIMEOUT_S, KafkaRelease, Quorum, free_port, wait_until
from compat.kafka import PINNED_VERSIONS
from storage.offset_checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_offset_checkpoint
from tests.audit.session import shared_spark
from tools.audit.broker_dirs import classify_dirs
from tools.audit.cli import main as audit_main
from tools.audit.history import newest_history
from tools.audit.replica_spark import audit_replicas_spark, partition_table
from tools.audit.replicas import audit_replicas
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_IDS = (11, 12, 13)
LEADER, OTHERS = 11, (12, 13)
TOPICS = ("t1", "unclean", "lost")
CODECS = {"t1": "gzip", "unclean": "lz4", "lost": "zstd"}
"""The producer's compression per topic: the brokers keep the batches as produced, and the
audit's deep read decodes each codec's batches as stock brokers wrote them."""
FIRST, ALONE, AFTER = 100, 50, 20
"""Records per phase: to every topic; acknowledged by 11 alone; on the unclean leader."""
SESSION_TIMEOUT_MS = 4000
CONTROLLER_SETTINGS = (
    f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}\n"
    "unclean.leader.election.interval.ms=1000\n"
)
BROKER_SETTINGS = {
    "broker.heartbeat.interval.ms": "500",
    "replica.high.watermark.checkpoint.interval.ms": "200",
    "offsets.topic.replication.factor": "3",
}
BROKER_START_TIMEOUT_S = 90.0
STEP_TIMEOUT_S = 60.0


def _configurations() -> list[tuple[str, str]]:
    """The newest release on a kwire controller; with ``KWIRE_COMPAT_FULL_MATRIX`` (``make
    nightly``) every pinned release on a kwire controller and on a stock one."""
    if os.environ.get("KWIRE_COMPAT_FULL_MATRIX"):
        return [(v, controller) for v in PINNED_VERSIONS for controller in ("kwire", "stock")]
    return [(PINNED_VERSIONS[-1], "kwire")]


def _admin(bootstrap: str):  # noqa: ANN202
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-audit", request_timeout_ms=10_000)


def _create_topics(bootstrap: str) -> None:
    from kafka.admin import NewTopic

    admin = _admin(bootstrap)
    try:
        admin.create_topics([
            NewTopic(topic, replica_assignments={0: list(BROKER_IDS)},
                     topic_configs={"unclean.leader.election.enable": str(topic == "unclean").lower()})
            for topic in TOPICS
        ], timeout_ms=30_000)
    finally:
        admin.close()


def _partition(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    """(leader, ISR) of ``topic``-0 as a broker's Metadata gives it ((-1, []) while unknown or
    while no broker of ``bootstrap`` answers)."""
    try:
        admin = _admin(bootstrap)
    except Exception:  # noqa: BLE001 - no broker reached before the client's bootstrap timeout
        return -1, []
    try:
        [described] = admin.describe_topics([topic])
    except Exception:  # noqa: BLE001 - a broker not serving yet: asked again
        return -1, []
    finally:
        admin.close()
    for p in described["partitions"]:
        leader = p.get("leader_id", p.get("leader"))
        isr = p.get("isr_nodes", p.get("isr"))
        return int(leader), sorted(isr)
    return -1, []


def _produce(bootstrap: str, topic: str, count: int, tag: str) -> list[int]:
    """``count`` records to ``topic`` (acks=all, one in flight, compressed with the topic's
    codec of :data:`CODECS`); the offsets the brokers acknowledged."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=5,
                             max_in_flight_requests_per_connection=1, request_timeout_ms=10_000,
                             compression_type=CODECS[topic])
    try:
        futures = [producer.send(topic, f"{tag}-{i}".encode(), partition=0) for i in range(count)]
        producer.flush(timeout=60)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close()


def _checkpointed(brokers: StockBrokers, broker: int, topic: str) -> int | None:
    """``topic``-0's high watermark in broker's replication-offset-checkpoint."""
    marks = read_offset_checkpoint(brokers.nodes[broker].data_dir / REPLICATION_OFFSET_CHECKPOINT) or {}
    return marks.get((topic, 0))


def _wait_checkpoints(brokers: StockBrokers, ids: tuple[int, ...], topics: tuple[str, ...], mark: int) -> None:
    for broker in ids:
        for topic in topics:
            wait_until(f"broker {broker} checkpoints {topic}-0 at {mark}",
                       lambda b=broker, t=topic: _checkpointed(brokers, b, t), STEP_TIMEOUT_S,
                       ok=lambda got: got == mark)


def _audit(dirs: list[Path], metadata: Path, capsys: pytest.CaptureFixture[str], out: Path) -> tuple[int, dict]:
    """``kwire audit b11=DIR b12=DIR b13=DIR --metadata M --deep --json --out OUT``: its exit
    status and its JSON."""
    capsys.readouterr()
    named = [f"b{broker}={path}" for broker, path in zip(BROKER_IDS, dirs, strict=True)]
    status = audit_main([*named, "--metadata", str(metadata), "--deep", "--json", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    print(captured.err)
    return status, json.loads(captured.out)


def _check_clean_report(report: dict, out: Path) -> None:
    """Phase 1's clean audit: broker ids from meta.properties, and the partition table."""
    replicas = report["replicas"]
    assert [(d["node"], d["broker_id"]) for d in replicas["log_dirs"]] == [(f"b{b}", b) for b in BROKER_IDS], replicas
    assert all(d["directory_id"] for d in replicas["log_dirs"]), replicas["log_dirs"]
    rows = replicas["partition_table"]["rows"]
    assert replicas["partition_table"]["left_out"] == 0
    mine = [r for r in rows if r["topic"] in TOPICS]
    assert sorted((r["topic"], r["node"], r["broker_id"], r["log_start_offset"], r["log_end_offset"], r["high_watermark"],
                   r["reference"], r["verdict"]) for r in mine) == sorted(
        (t, f"b{b}", b, 0, FIRST, FIRST, b == LEADER, "ok") for t in TOPICS for b in BROKER_IDS), mine
    assert {r["verdict"] for r in rows} == {"ok"} and len({r["topic_id"] for r in mine}) == len(TOPICS), rows
    assert all(r["last_leader_epoch"] is not None and r["commit_basis"] == "high-watermark" for r in mine), mine
    written = [json.loads(line) for line in (out / "replica_partitions.jsonl").read_text().splitlines()]
    assert written == rows
    assert {"index.html", "cluster_summary.png"} <= {p.name for p in out.iterdir()}


def _check_corrupt_batch(dirs: list[Path], metadata: Path, capsys: pytest.CaptureFixture[str], out: Path) -> None:
    """One byte flipped in the first batch of b13's t1-0 (a follower's copy, which its broker
    does not read back): ``--json`` names that batch, and the plot draws it; then restored."""
    import matplotlib.image

    from storage.batch_scan import batch_headers
    from tools.audit.replica_plots import MARKS

    segment = dirs[BROKER_IDS.index(13)] / "t1-0" / f"{0:020d}.log"
    original = segment.read_bytes()
    batches = list(batch_headers(original))
    _, size, base, last, *_ = batches[0]
    assert base == 0 and size > 70 and len(batches) >= 2, batches  # a batch in the middle of the log
    flipped = bytearray(original)
    flipped[70] ^= 0x01  # inside the first batch's records: its CRC no longer matches
    segment.write_bytes(bytes(flipped))
    try:
        status, found = _audit(dirs, metadata, capsys, out)
    finally:
        segment.write_bytes(original)
    assert status == 1, found
    findings = found["replicas"]["findings"]
    assert [{k: v[k] for k in ("invariant", "topic", "partition", "node", "broker_id", "offset", "end_offset")}
            for v in findings["violations"]] == [
        {"invariant": "corrupt_batch", "topic": "t1", "partition": 0, "node": "b13", "broker_id": 13, "offset": 0,
         "end_offset": last + 1}], findings
    assert findings["warnings"] == [] and findings["left_out"] == {"violations": 0, "warnings": 0}
    [row] = [r for r in found["replicas"]["partition_table"]["rows"] if (r["topic"], r["node"]) == ("t1", "b13")]
    assert (row["verdict"], row["findings"]) == ("violation", ["corrupt_batch"]), row
    pixels = matplotlib.image.imread(out / "partition-t1-0.png")[:, :, :3]
    red = [int(MARKS["corrupt_batch"][0][i:i + 2], 16) / 255 for i in (1, 3, 5)]
    assert (abs(pixels - red).max(axis=2) < 0.02).sum() > 50  # the corrupt range is drawn


@pytest.mark.parametrize(("version", "controller"), _configurations(), ids=lambda x: x)
def test_audit_names_the_lost_offsets(version: str, controller: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from compat import kafka as _kafka

    _kafka.require_kafka(version)
    kafka = KafkaRelease(version)
    quorum = Quorum(kafka, tmp_path, {1} if controller == "kwire" else set(), dynamic=False, ids=(1,),
                    extra=CONTROLLER_SETTINGS)
    brokers = StockBrokers.create(tmp_path / "brokers", version, cluster_id=CLUSTER_ID,
                                  bootstrap_controllers=quorum.bootstrap, quorum_voters=f"1@localhost:{quorum.ports[1]}",
                                  ports={i: free_port() for i in BROKER_IDS}, properties=BROKER_SETTINGS)
    dirs = [brokers.nodes[i].data_dir for i in BROKER_IDS]
    try:
        quorum.start(1)
        quorum.wait_leader(START_TIMEOUT_S)
        brokers.start()
        brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
        bootstrap = brokers.bootstrap_servers
        _create_topics(bootstrap)
        for topic in TOPICS:
            wait_until(f"{topic}-0 led by {LEADER} with a full ISR", lambda t=topic: _partition(bootstrap, t),
                       STEP_TIMEOUT_S, ok=lambda got: got == (LEADER, list(BROKER_IDS)))
            if topic == "t1":  # two producers: at least two batches, so that a corrupt first batch is not the tail
                offsets = _produce(bootstrap, topic, FIRST // 2, "first") + _produce(bootstrap, topic, FIRST // 2, "more")
            else:
                offsets = _produce(bootstrap, topic, FIRST, "first")
            assert offsets == list(range(FIRST))
        _wait_checkpoints(brokers, BROKER_IDS, TOPICS, FIRST)

        # 1. the running healthy cluster, then a corrupt batch on one copy
        metadata = tmp_path / "data1" / "__cluster_metadata-0"
        status, healthy = _audit(dirs, metadata, capsys, tmp_path / "report-healthy")
        assert status == 0 and healthy["replicas"]["violations"] == healthy["replicas"]["warnings"] == 0, healthy
        assert healthy["replicas"]["partitions"] >= 3 and healthy["replicas"]["lost"] == [], healthy
        _check_clean_report(healthy, tmp_path / "report-healthy")
        _check_corrupt_batch(dirs, metadata, capsys, tmp_path / "report-corrupt")

        # 2. the ISR shrinks to 11, which alone acknowledges 50 more records; the clients
        # bootstrap from the running brokers only (kafka-python backs off from a refused
        # bootstrap server exponentially and may pick it again until its timeout)
        for broker in OTHERS:
            brokers.kill(broker)
        bootstrap = brokers.bootstrap_servers_of((LEADER,))
        for topic in TOPICS:
            wait_until(f"{topic}-0's ISR shrunk to {LEADER}", lambda t=topic: _partition(bootstrap, t), STEP_TIMEOUT_S,
                       ok=lambda got: got == (LEADER, [LEADER]))
        acked = {topic: _produce(bootstrap, topic, ALONE, "alone") for topic in ("unclean", "lost")}
        assert all(offsets == list(range(FIRST, FIRST + ALONE)) for offsets in acked.values()), acked
        _wait_checkpoints(brokers, (LEADER,), ("unclean", "lost"), FIRST + ALONE)

        # 3. 11 and its copy of "lost" are gone; an unclean election on "unclean"
        brokers.kill(LEADER)
        shutil.rmtree(brokers.nodes[LEADER].data_dir / "lost-0")
        brokers.start(list(OTHERS))
        brokers.wait_listed(set(OTHERS), BROKER_START_TIMEOUT_S)
        bootstrap = brokers.bootstrap_servers_of(OTHERS)
        leader, _ = wait_until("an unclean leader for unclean-0", lambda: _partition(bootstrap, "unclean"),
                               STEP_TIMEOUT_S, ok=lambda got: got[0] in OTHERS)
        assert _produce(bootstrap, "unclean", AFTER, "after") == list(range(FIRST, FIRST + AFTER))
        _wait_checkpoints(brokers, OTHERS, ("unclean",), FIRST + AFTER)
        brokers.stop()

        # 4. the audit of what is left
        status, found = _audit(dirs, metadata, capsys, tmp_path / "report")
        assert status == 1, found
        lost = {(r["topic"], r["partition"]): (r["start"], r["end"]) for r in found["replicas"]["lost"]}
        assert lost == {(t, 0): (min(acked[t]), max(acked[t]) + 1) for t in ("unclean", "lost")}, found
        violations = [json.loads(line) for line in (tmp_path / "report" / "replica_violations.jsonl").read_text().splitlines()]
        assert sorted((v["invariant"], v["topic"], v["node"], v["offset"], v["end_offset"]) for v in violations) == [
            ("lost_acknowledged_data", "lost", "b11", FIRST, FIRST + ALONE),
            ("lost_acknowledged_data", "unclean", "b11", FIRST, FIRST + ALONE),
            ("missing_replica", "lost", "b11", None, None),
        ], violations
        assert {v["broker_id"] for v in violations} == {LEADER}, violations
        causes = {v["topic"]: v["cause"] for v in violations if v["invariant"] == "lost_acknowledged_data"}
        assert f"made broker {leader} leader" in causes["unclean"] and "an unclean election" in causes["unclean"], causes
        assert "without a leader" in causes["lost"], causes
        assert (tmp_path / "report" / "partition-unclean-0.png").exists()
        assert (tmp_path / "report" / "partition-lost-0.png").exists()
        if controller != "kwire" or version != PINNED_VERSIONS[-1]:
            return
        # the same audit on Spark (local[2]), each partition cut into offset ranges of a few
        # batches; its partition table as a DataFrame
        found_dirs = classify_dirs([*map(str, dirs)])
        history = newest_history([str(metadata)])
        local = audit_replicas(found_dirs, history)
        distributed = audit_replicas_spark(shared_spark(), found_dirs, history, split_bytes=2048)
        assert [f.to_dict() for f in distributed.findings] == [f.to_dict() for f in local.findings]
        assert distributed.lost == local.lost == found["replicas"]["lost"]
        frame = partition_table(shared_spark(), distributed)
        assert [r.asDict() for r in frame.orderBy("topic", "partition", "node").collect()] == local.partition_rows()
    except BaseException:
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        try:
            brokers.stop()
        finally:
            quorum.stop()
