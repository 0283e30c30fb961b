"""``kwire audit`` on stock brokers' log directories: a healthy cluster, an unclean election,
and the loss of the only in-sync replica; the audit must name exactly the offsets the
producer was acknowledged for and that no surviving replica holds, and nothing else.

One run per configuration: a one-node controller quorum (kwire, or stock Kafka as the
control) and three stock brokers (101-103) of the release, ``broker.session.timeout.ms`` 4 s,
high watermarks checkpointed every 200 ms. Three topics of one partition, replicas
``[101, 102, 103]`` (101 leads): ``healthy``, ``unclean`` (``unclean.leader.election.enable``)
and ``lost``, produced to with gzip, lz4 and zstd; the audits read deep (every record
decoded). Phases:

1. 100 records to each topic (kafka-python, ``acks=all``), every replica's high watermark
   checkpointed at 100. The audit of the running brokers' directories finds no violation.
2. Brokers 102 and 103 are killed (-9); once fenced, the ISR of every partition is ``[101]``.
   50 more records to ``unclean`` and ``lost``: acknowledged by 101 alone, offsets 100-149.
3. 101 is killed once its checkpoint holds 150, and its copy of ``lost`` deleted (the disk that
   held it is gone). 102 and 103 start again: ``unclean`` gets one of them as leader by an
   unclean election, which takes 20 more records at offsets 100-119; ``lost`` has no leader.
4. The brokers are stopped and the audit runs on their three directories with the
   controller's metadata log as history. Expected, and nothing more: on ``unclean``,
   ``lost_acknowledged_data`` of 100-149 on 101 caused by the unclean election's
   PartitionChangeRecord; on ``lost``, ``missing_replica`` on 101 and ``lost_acknowledged_data``
   of 100-149 (the copy is gone, its checkpointed high watermark is not); the lost ranges
   equal the offsets acknowledged in phase 2. On the newest release's stock run, the Spark audit
   (``local[2]``, partitions cut into offset ranges of about 2 KiB) finds the same.

Configurations: ``make test`` runs the newest release on a stock controller, a cluster wholly
of Kafka's as the audit's users run; ``make nightly`` (``KWIRE_COMPAT_FULL_MATRIX``) runs every
pinned release on a kwire controller and on a stock one, the same nemesis under both
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
from tools.audit.replica_spark import audit_replicas_spark
from tools.audit.replicas import audit_replicas
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_IDS = (101, 102, 103)
TOPICS = ("healthy", "unclean", "lost")
CODECS = {"healthy": "gzip", "unclean": "lz4", "lost": "zstd"}
"""The producer's compression per topic: the brokers keep the batches as produced, and the
audit's deep read decodes each codec's batches as stock brokers wrote them."""
FIRST, ALONE, AFTER = 100, 50, 20
"""Records per phase: to every topic; acknowledged by 101 alone; on the unclean leader."""
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
    """The newest release on a stock controller: a cluster wholly of Kafka's, as the audit's
    users run; with ``KWIRE_COMPAT_FULL_MATRIX`` (``make nightly``) every pinned release on a
    kwire controller and on a stock one."""
    if os.environ.get("KWIRE_COMPAT_FULL_MATRIX"):
        return [(v, controller) for v in PINNED_VERSIONS for controller in ("kwire", "stock")]
    return [(PINNED_VERSIONS[-1], "stock")]


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
    capsys.readouterr()
    status = audit_main([*map(str, dirs), "--metadata", str(metadata), "--deep", "--json", "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    print(captured.err)
    return status, json.loads(captured.out)


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
            wait_until(f"{topic}-0 led by 101 with a full ISR", lambda t=topic: _partition(bootstrap, t), STEP_TIMEOUT_S,
                       ok=lambda got: got == (101, list(BROKER_IDS)))
            assert _produce(bootstrap, topic, FIRST, "first") == list(range(FIRST))
        _wait_checkpoints(brokers, BROKER_IDS, TOPICS, FIRST)

        # 1. the running healthy cluster
        status, healthy = _audit(dirs, tmp_path / "data1" / "__cluster_metadata-0", capsys, tmp_path / "report-healthy")
        assert status == 0 and healthy["replicas"]["violations"] == healthy["replicas"]["warnings"] == 0, healthy
        assert healthy["replicas"]["partitions"] >= 3 and healthy["replicas"]["lost"] == [], healthy

        # 2. the ISR shrinks to 101, which alone acknowledges 50 more records; the clients
        # bootstrap from the running brokers only (kafka-python backs off from a refused
        # bootstrap server exponentially and may pick it again until its timeout)
        for broker in (102, 103):
            brokers.kill(broker)
        bootstrap = brokers.bootstrap_servers_of((101,))
        for topic in TOPICS:
            wait_until(f"{topic}-0's ISR shrunk to 101", lambda t=topic: _partition(bootstrap, t), STEP_TIMEOUT_S,
                       ok=lambda got: got == (101, [101]))
        acked = {topic: _produce(bootstrap, topic, ALONE, "alone") for topic in ("unclean", "lost")}
        assert all(offsets == list(range(FIRST, FIRST + ALONE)) for offsets in acked.values()), acked
        _wait_checkpoints(brokers, (101,), ("unclean", "lost"), FIRST + ALONE)

        # 3. 101 and its copy of "lost" are gone; an unclean election on "unclean"
        brokers.kill(101)
        shutil.rmtree(brokers.nodes[101].data_dir / "lost-0")
        brokers.start([102, 103])
        brokers.wait_listed({102, 103}, BROKER_START_TIMEOUT_S)
        bootstrap = brokers.bootstrap_servers_of((102, 103))
        leader, _ = wait_until("an unclean leader for unclean-0", lambda: _partition(bootstrap, "unclean"),
                               STEP_TIMEOUT_S, ok=lambda got: got[0] in (102, 103))
        assert _produce(bootstrap, "unclean", AFTER, "after") == list(range(FIRST, FIRST + AFTER))
        _wait_checkpoints(brokers, (102, 103), ("unclean",), FIRST + AFTER)
        brokers.stop()

        # 4. the audit of what is left
        status, found = _audit(dirs, tmp_path / "data1" / "__cluster_metadata-0", capsys, tmp_path / "report")
        assert status == 1, found
        lost = {(r["topic"], r["partition"]): (r["start"], r["end"]) for r in found["replicas"]["lost"]}
        assert lost == {(t, 0): (min(acked[t]), max(acked[t]) + 1) for t in ("unclean", "lost")}, found
        violations = [json.loads(line) for line in (tmp_path / "report" / "replica_violations.jsonl").read_text().splitlines()]
        assert sorted((v["invariant"], v["topic"], v["node"], v["offset"], v["end_offset"]) for v in violations) == [
            ("lost_acknowledged_data", "lost", "101", FIRST, FIRST + ALONE),
            ("lost_acknowledged_data", "unclean", "101", FIRST, FIRST + ALONE),
            ("missing_replica", "lost", "101", None, None),
        ], violations
        causes = {v["topic"]: v["cause"] for v in violations if v["invariant"] == "lost_acknowledged_data"}
        assert f"made broker {leader} leader" in causes["unclean"] and "an unclean election" in causes["unclean"], causes
        assert "without a leader" in causes["lost"], causes
        assert (tmp_path / "report" / "partition-unclean-0.png").exists()
        if controller != "stock" or version != PINNED_VERSIONS[-1]:
            return
        # the same audit on Spark (local[2]), each partition cut into offset ranges of a few batches
        found_dirs = classify_dirs([*map(str, dirs)])
        history = newest_history([str(tmp_path / "data1" / "__cluster_metadata-0")])
        local = audit_replicas(found_dirs, history)
        distributed = audit_replicas_spark(shared_spark(), found_dirs, history, split_bytes=2048)
        assert [f.to_dict() for f in distributed.findings] == [f.to_dict() for f in local.findings]
        assert distributed.lost == local.lost == found["replicas"]["lost"]
    except BaseException:
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        try:
            brokers.stop()
        finally:
            quorum.stop()
