"""Stock Kafka brokers on a kwire controller quorum (KIP-631), for each pinned release.

Three kwire controllers (a dynamic quorum) and three stock brokers (ids 101-103, formatted by
the stock tool, ``controller.quorum.bootstrap.servers`` naming the controllers). Asserted:

* every broker registers, is unfenced and reaches RUNNING: its client listener answers, and
  the Metadata response of every broker lists all three (a broker lists unfenced brokers only);
* stock ``kafka-metadata-quorum --bootstrap-server <broker> describe --status``, which the
  broker forwards to the active controller in an Envelope (KIP-590), names kwire's leader;
* the stock topic tool creates a topic of 6 partitions and replication factor 3 (each broker
  leads two, every ISR holds all three); the stock console producer (idempotent, acks=all)
  writes 5,000 records (100,000 in ``make nightly``) and the stock console consumer reads
  exactly those back; kafka-python creates a second topic and does the same; the stock leader-election tool, through a broker
  that forwards ElectLeaders to kwire, finds the preferred leader already elected;
* the stock reassignment tool, through a broker that forwards AlterPartitionReassignments and
  ListPartitionReassignments to kwire, takes a replica off a partition and puts it back as the
  preferred replica (the broker copies the partition and its leader's AlterPartition completes
  the move); ``--verify`` and ``--list`` see the moves finished, and every record is read back;
* under a steady kafka-python load (idempotent, acks=all), rounds of failures: kill -9 of the
  active kwire controller, kill -9 of a broker, SIGTERM of a broker, kill -9 of the active
  controller, and so on: in ``make test`` the broker kill and the SIGTERM on the newest release
  (its controller kills under brokers are ``compat/test_quorum_faults.py``'s) and none on
  3.9.2, 20 rounds on both in ``make nightly`` (``KWIRE_FAILOVERS``; see :func:`_plan`). After a controller kill a new one is elected, a
  topic created then takes a record and gives it back, and the killed controller rejoins.
  After a broker kill the other brokers stop listing it within ``broker.session.timeout.ms``
  plus the controller's fencing period (``broker.session.timeout.ms`` / 8) and a margin, every
  partition it led gets another leader and it leaves every ISR; it is restarted with an empty metadata log,
  loads a snapshot from the controllers, is unfenced, back in every ISR and leads its
  preferred partitions again (the controllers balance leaders every second here). After a SIGTERM
  the broker's heartbeat asks for a controlled shutdown: the controllers move its leaderships
  and ISR memberships before they let it stop, so no partition waits for its session. At the
  end every broker runs, the producer saw no error, and every acknowledged record is read back
  exactly once;
* the controllers snapshot every 5 s and keep only their newest snapshot (retention): after
  the first broker kill (newest release in ``make test``, both in ``make nightly``), a stock and
  a kwire controller started with empty disks load the leader's snapshot and catch up to the
  high watermark as observers, and keep fetching through the rounds that follow;
* afterwards, stock ``kafka-metadata-shell --snapshot`` on a kwire controller's newest snapshot
  shows each broker's registration as kwire reads it there (epoch, incarnation, fenced) and
  every topic and partition (replicas, directories, ISR, leader, epochs); stock ``kafka-dump-log
  --cluster-metadata-decoder`` decodes every data record of it.

Cost per release: three broker JVMs (started together), three kwire processes, ~5 s per
controller kill, ~15-20 s per broker round, a few seconds for the empty controllers: ~70 s on
the newest release, ~30 s on 3.9.2 in ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from compat.clients import (
    Load,
    create_topic,
    describe_topic,
    new_topic_works,
    partitions_of,
    python_round_trip,
    read_all,
    records,
    stock_round_trip,
)
from compat.harness import (
    CLUSTER_ID,
    ELECTION_BOUND_S,
    PARTITION,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    free_port,
)
from compat.kafka import PINNED_VERSIONS
from server.controller.controller import ControlManagers
from storage.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotId,
    parse_snapshot_path,
    read_snapshot_content,
)
from tools.quorum_client import describe
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_IDS = (101, 102, 103)
SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms, Kafka's default
FENCE_BOUND_S = (SESSION_TIMEOUT_MS + SESSION_TIMEOUT_MS // 8) / 1000 + 3.0
"""Session timeout, plus one period of the controller's expiry check, plus the time for the
fencing record to reach the brokers (a margin for a loaded machine)."""
BROKER_START_TIMEOUT_S = 90.0
REBALANCE_INTERVAL_S = 1
LOAD_RECORDS_PER_S = 1000
"""The steady load's rate through the rounds: every second of a round carries acknowledged
records, and the producer leaves the machine's CPU to the brokers and controllers."""
"""The kwire controllers' ``leader.imbalance.check.interval.seconds`` here (Kafka's default is
300), so that a restarted broker leads its preferred partitions again within the test."""
REBALANCE_BOUND_S = 60.0
VOTER_IDS = (1, 2, 3)
STOCK_OBSERVER, KWIRE_OBSERVER = 4, 5
"""Controllers with empty disks that join at the end, as observers, from the leader's snapshot."""
SNAPSHOT_SETTINGS = (
    "metadata.log.max.snapshot.interval.ms=5000\n"
    "metadata.max.retention.bytes=1\n"
    "internal.metadata.log.segment.bytes=16384\n"
    "kwire.metadata.log.clean.interval.ms=5000\n"
)
"""Every controller snapshots every 5 s and keeps only its newest snapshot and the log after it
(kwire's cleaned every 5 s rather than Kafka's 60 s, for the test's time), in segments of 16 KiB: brokers and controllers that fall behind, or start
empty, are sent to a snapshot."""
REASSIGN_BOUND_S = 60.0
"""Seconds a reassignment of one small partition may take, copying included."""
SHUTDOWN_BOUND_S = 3.0
"""After a controlled shutdown the partitions are already moved: seconds allowed for a broker
to see it, far below the session timeout a killed broker needs."""



@dataclass(frozen=True)
class Plan:
    """What one release's run does: records per client round trip, the rounds of failures (by
    index: ``i % 4`` is 0 for a controller kill -9, 1 for a broker kill -9, 2 for a broker
    SIGTERM, 3 for a controller kill -9), and whether controllers with empty disks join."""

    records: int
    rounds: tuple[int, ...]
    join: bool


def _plan(kafka: KafkaRelease) -> Plan:
    """``KWIRE_FAILOVERS`` rounds with 100,000-record round trips on every release (``make
    nightly`` runs 20); else, for the time ``make test`` has, 5,000-record round trips and on
    the newest release a broker kill and a broker SIGTERM with the empty-disk join, on the
    older one no round: its brokers register, serve, reassign and carry the steady load, and
    its failure rounds are ``make nightly``'s. (``make test`` kills the active controller under
    stock brokers in ``compat/test_quorum_faults.py``, whose runs carry brokers of the newest
    release.)"""
    configured = os.environ.get("KWIRE_FAILOVERS")
    if configured:
        return Plan(100_000, tuple(range(int(configured))), True)
    if kafka.version == PINNED_VERSIONS[-1]:
        return Plan(5_000, (1, 2), True)
    return Plan(5_000, (), False)


def test_stock_brokers_run_on_a_kwire_quorum(each_kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(
        each_kafka, tmp_path, {1, 2, 3, KWIRE_OBSERVER}, dynamic=True, ids=(1, 2, 3, STOCK_OBSERVER, KWIRE_OBSERVER),
        voter_ids=VOTER_IDS, extra=f"leader.imbalance.check.interval.seconds={REBALANCE_INTERVAL_S}\n" + SNAPSHOT_SETTINGS,
    )
    bootstrap = ",".join(f"localhost:{quorum.ports[i]}" for i in VOTER_IDS)
    brokers = StockBrokers.create(
        tmp_path / "brokers", each_kafka.version, cluster_id=CLUSTER_ID, bootstrap_controllers=bootstrap,
        ports={i: free_port() for i in BROKER_IDS},
    )
    plan = _plan(each_kafka)
    load: Load | None = None
    timings: list[str] = []
    try:
        for i in VOTER_IDS:
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        brokers.start()
        brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
        for node in brokers.nodes.values():
            text = node.stdout_path.read_text(encoding="utf-8", errors="replace")
            assert "Transitioning from RECOVERY to RUNNING" in text, brokers.report()
        leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S)
        status = each_kafka.run_tool(
            "metadata-quorum", ["--bootstrap-server", f"localhost:{brokers.nodes[BROKER_IDS[0]].port}", "describe", "--status"]
        ).stdout
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert (fields["LeaderId"].strip(), fields["LeaderEpoch"].strip()) == (str(leader), str(epoch)), status

        # a topic through the stock tool, records through the stock console clients and kafka-python
        bootstrap = brokers.bootstrap_servers
        assert "Created topic orders." in create_topic(each_kafka, bootstrap, "orders", 6, 3)
        described = describe_topic(each_kafka, bootstrap, "orders")
        assert sorted(described) == list(range(6)), described
        for leader, replicas, isr in described.values():
            assert sorted(replicas) == list(BROKER_IDS) and sorted(isr) == list(BROKER_IDS), described
            assert leader == replicas[0], described
        assert {replicas[0] for _, replicas, _ in described.values()} == set(BROKER_IDS), described
        # the stock election tool through a broker, which forwards ElectLeaders to kwire
        elected = each_kafka.run_tool("leader-election", [
            "--bootstrap-server", brokers.bootstrap_servers, "--election-type", "preferred", "--topic", "orders",
            "--partition", "0",
        ]).stdout
        assert "Valid replica already elected for partitions orders-0" in elected, elected
        started = time.monotonic()
        back = stock_round_trip(each_kafka, bootstrap, "orders", plan.records)
        print(f"stock console producer and consumer: {plan.records} records in {time.monotonic() - started:.1f} s")
        assert back == Counter(records("orders", plan.records)), _lost(back, "orders", plan.records)
        started = time.monotonic()
        back = python_round_trip(bootstrap, "py-orders", plan.records, 6, 3)
        print(f"kafka-python: {plan.records} records in {time.monotonic() - started:.1f} s")
        assert back == Counter(records("py-orders", plan.records)), _lost(back, "py-orders", plan.records)
        # the stock reassignment tool through a broker, which forwards to kwire
        print(_reassign_round(each_kafka, bootstrap, tmp_path, "py-orders", plan.records))

        # a steady kafka-python load while the active controller is killed again and again
        assert "Created topic load." in create_topic(each_kafka, bootstrap, "load", 6, 3)
        load = Load(bootstrap, "load", LOAD_RECORDS_PER_S)
        load.start()
        joined = None
        acked_before = 0
        for round_ in plan.rounds:
            if round_ % 4 == 1:
                timings.append(_broker_round(brokers, bootstrap, round_, load))
                if joined is None and plan.join:
                    joined = _empty_controllers_join(quorum, tmp_path)
                continue
            if round_ % 4 == 2:
                timings.append(_shutdown_round(brokers, tmp_path, bootstrap, round_, load))
                continue
            quorum.settled_high_watermark()  # every controller up and caught up
            leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
            acked_before = len(load.acked)
            killed_at = time.monotonic()
            quorum.procs[leader].send_signal(signal.SIGKILL)
            quorum.procs[leader].wait(30)
            new_leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
            elected = time.monotonic() - killed_at
            new_topic_works(bootstrap, f"after-{round_}")
            timings.append(
                f"kill {round_ + 1}: {leader} -> {new_leader} (epoch {epoch}) in {elected:.1f} s, new topic used "
                f"{time.monotonic() - killed_at:.1f} s after the kill, {len(load.acked) - acked_before} acks meanwhile"
            )
            quorum.start(leader)
        if not plan.rounds:  # the load still carries acknowledged records before it stops
            deadline = time.monotonic() + ELECTION_BOUND_S
            while len(load.acked) < LOAD_RECORDS_PER_S and not load.failed:
                assert time.monotonic() < deadline, "the load was not acknowledged"
                time.sleep(0.1)  # poll interval
        quorum.settled_high_watermark()
        load.stop()
        assert not load.failed, load.failed[:5]
        acked = list(load.acked)
        assert len(acked) > acked_before, "the load stopped being acknowledged"
        back = read_all(bootstrap, "load", len(acked))
        missing = set(acked) - set(back)
        duplicated = [v for v, n in back.items() if n > 1]
        assert not missing and not duplicated, (
            f"{len(missing)} acknowledged records missing (e.g. {sorted(missing)[:3]}), {len(duplicated)} duplicated"
        )
        print(f"{len(plan.rounds)} rounds of failures, {len(acked)} records acknowledged and read back once each")
        print("\n".join(timings))
        # no broker lost its session to a failover: every new active controller started them afresh
        brokers.wait_listed(set(BROKER_IDS), FENCE_BOUND_S)
        assert all(n.running for n in brokers.nodes.values()), brokers.report()
        assert all(p.poll() is None for p in quorum.procs.values()), quorum.report()
        if joined is None and plan.join:
            joined = _empty_controllers_join(quorum, tmp_path)
        print(joined or "no controllers with empty disks joined in this run")
    except BaseException:
        print("\n".join(timings))
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        # each step runs even when one before it raises: no process outlives the test
        try:
            if load is not None:
                load.close()
        finally:
            try:
                brokers.stop()
            finally:
                quorum.stop()
    # the topic of the load is in the newest snapshot when rounds made time for one after it
    topics = {"orders", "py-orders", "__consumer_offsets"} | ({"load"} if plan.rounds else set())
    _check_stock_readers(each_kafka, tmp_path / "data1" / PARTITION, topics)


def _reassign(kafka: KafkaRelease, bootstrap: str, root: Path, topic: str, replicas: list[int]) -> float:
    """Stock ``kafka-reassign-partitions --execute`` moving ``topic``-0 to ``replicas``, then
    ``--verify`` until it reports the move complete; the seconds that took."""
    plan = root / "reassignment.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)},
    ]}))
    started = time.monotonic()
    args = ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan)]
    out = kafka.run_tool("reassign-partitions", [*args, "--execute"]).stdout
    assert "Successfully started partition reassignment" in out, out
    deadline = started + REASSIGN_BOUND_S
    while True:
        out = kafka.run_tool("reassign-partitions", [*args, "--verify"]).stdout
        if f"Reassignment of partition {topic}-0 is completed" in out:
            return time.monotonic() - started
        assert time.monotonic() < deadline, out
        time.sleep(0.5)  # poll interval


def _reassign_round(kafka: KafkaRelease, bootstrap: str, root: Path, topic: str, count: int) -> str:
    """``topic``-0 (replication factor 3, ``count`` records over the topic) loses its last
    replica, which the controllers complete at once (every remaining replica is in sync), and
    gets it back as its preferred replica, which the broker must copy and the leader put in the
    ISR (AlterPartition) before the controllers complete the move; every record is still
    there."""
    _, replicas, _ = partitions_of(bootstrap, topic)[0]
    first, second, third = replicas
    shrunk = _reassign(kafka, bootstrap, root, topic, [first, second])
    parts = _wait_partitions(bootstrap, topic, lambda parts: parts[0][1] == [first, second], REASSIGN_BOUND_S)
    assert sorted(parts[0][2]) == sorted([first, second]), parts
    grown = _reassign(kafka, bootstrap, root, topic, [third, first, second])
    parts = _wait_partitions(
        bootstrap, topic, lambda parts: parts[0][1] == [third, first, second] and len(parts[0][2]) == 3, REASSIGN_BOUND_S
    )
    listed = kafka.run_tool("reassign-partitions", ["--bootstrap-server", bootstrap, "--list"]).stdout
    assert "No partition reassignments found." in listed, listed
    back = read_all(bootstrap, topic, count)
    assert back == Counter(records(topic, count)), _lost(back, topic, count)
    return (
        f"reassignment tool: {topic}-0 {replicas} -> {[first, second]} in {shrunk:.1f} s, -> {parts[0][1]} "
        f"(copied to {third}, in sync) in {grown:.1f} s; all {count} records read back"
    )


def _partition_files(partition: Path) -> tuple[list[int], list[SnapshotId]]:
    """(base offsets of the segments, ids of the snapshots other than the bootstrap checkpoint)
    of a metadata partition directory."""
    bases = sorted(int(p.stem) for p in partition.glob("*.log"))
    snapshots = sorted(
        parsed.snapshot_id for p in partition.glob("*.checkpoint")
        if (parsed := parse_snapshot_path(p)) is not None and parsed.snapshot_id != BOOTSTRAP_SNAPSHOT_ID
    )
    return bases, snapshots


def _empty_controllers_join(quorum: Quorum, root: Path) -> str:
    """Once retention deleted the leader's first segment, a stock and a kwire controller with
    empty disks (``--no-initial-controllers``) start as observers: each is sent to the leader's
    snapshot (FetchSnapshot, KIP-630), loads it and fetches up to the high watermark."""
    waited_from = time.monotonic()
    deadline = waited_from + 90  # retention runs every 60 s
    while True:
        leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
        bases, _ = _partition_files(root / f"data{leader}" / PARTITION)
        if bases and bases[0] > 0:
            break
        assert time.monotonic() < deadline, f"retention did not delete the first segment of leader {leader}: {bases}"
        time.sleep(1)  # poll interval
    started = time.monotonic()
    waited = started - waited_from
    for i in (STOCK_OBSERVER, KWIRE_OBSERVER):
        quorum.start(i)
    high_watermark = quorum.settled_high_watermark()
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        leader = quorum.leader()
        view = None if leader is None else trio.run(describe, f"localhost:{quorum.ports[leader[0]]}", 3.0)
        observers = {} if view is None else {o.replica_id: o.log_end_offset for o in view.partition.observers}
        if all(observers.get(i, -1) >= high_watermark for i in (STOCK_OBSERVER, KWIRE_OBSERVER)):
            break
        assert time.monotonic() < deadline, f"the observers did not reach {high_watermark}: {observers}\n{quorum.report()}"
        time.sleep(0.5)  # poll interval
    caught_up = time.monotonic() - started
    for i in (STOCK_OBSERVER, KWIRE_OBSERVER):
        bases, snapshots = _partition_files(root / f"data{i}" / PARTITION)
        assert snapshots and bases and bases[0] > 0, (i, bases, snapshots)  # its log began at a snapshot
        read_snapshot_content((root / f"data{i}" / PARTITION / f"{snapshots[0].file_stem}.checkpoint").read_bytes())
    return (
        f"a stock and a kwire controller with empty disks loaded the snapshot and reached offset {high_watermark} "
        f"in {caught_up:.1f} s (after {waited:.1f} s waiting for retention to delete the leader's first segment)"
    )


def _wait_partitions(bootstrap: str, topic: str, done: Callable[[dict[int, tuple[int, list[int], list[int]]]], bool],
                     timeout_s: float) -> dict[int, tuple[int, list[int], list[int]]]:
    """``topic``'s partitions as a broker describes them, once ``done`` holds (within
    ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            parts = partitions_of(bootstrap, topic)
        except Exception:  # noqa: BLE001 - a broker going away mid-request: ask again
            parts = {}
        if parts and done(parts):
            return parts
        assert time.monotonic() < deadline, f"{topic} did not reach the expected state: {parts}"
        time.sleep(0.5)  # poll interval


def _broker_round(brokers: StockBrokers, bootstrap: str, round_: int, load: Load) -> str:
    """kill -9 of a broker under the load: fenced within the session timeout, every partition
    it led led by another and its ISR memberships gone; restarted: unfenced, back in every ISR,
    and leading its preferred partitions again (``auto.leader.rebalance.enable``)."""
    victim = BROKER_IDS[(round_ // 2) % len(BROKER_IDS)]
    led = sorted(p for p, (leader, _, _) in partitions_of(bootstrap, "load").items() if leader == victim)
    acked_before = len(load.acked)
    killed_at = time.monotonic()
    brokers.kill(victim)
    fenced = brokers.wait_listed(set(BROKER_IDS) - {victim}, FENCE_BOUND_S)
    _wait_partitions(
        bootstrap, "load", lambda parts: all(leader != victim and victim not in isr for leader, _, isr in parts.values()),
        FENCE_BOUND_S,
    )
    moved = time.monotonic() - killed_at
    # it comes back with an empty metadata log: the leader sends it to its snapshot
    shutil.rmtree(brokers.nodes[victim].data_dir / PARTITION)
    _restart(brokers, bootstrap, victim)
    _, snapshots = _partition_files(brokers.nodes[victim].data_dir / PARTITION)
    assert snapshots, "the restarted broker did not load a snapshot from the controllers"
    return (
        f"broker kill {round_ + 1}: {victim} led partitions {led}; fenced {fenced:.1f} s and its partitions led by "
        f"others {moved:.1f} s after the kill; restarted with an empty metadata log (loaded snapshot "
        f"{snapshots[0]}), in every ISR and leading its preferred partitions "
        f"{time.monotonic() - killed_at:.1f} s after the kill; {len(load.acked) - acked_before} acks meanwhile"
    )


def _restart(brokers: StockBrokers, bootstrap: str, victim: int) -> None:
    """Start ``victim`` again; wait until every broker is listed and every partition of the
    load is led by its preferred replica with all replicas in its ISR."""
    brokers.start([victim])
    brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
    _wait_partitions(
        bootstrap, "load",
        lambda parts: all(leader == replicas[0] and sorted(isr) == sorted(replicas) for leader, replicas, isr in parts.values()),
        REBALANCE_BOUND_S,
    )


def _controlled_shutdowns(root: Path, broker_id: int) -> int:
    """How many times the kwire controllers' logs show ``broker_id`` entering a controlled
    shutdown (the BrokerRegistrationChangeRecord its heartbeat asking to shut down wrote)."""
    marker = re.compile(rf"BrokerRegistrationChangeRecord\(broker_id={broker_id}, broker_epoch=\d+, fenced=0, in_controlled_shutdown=1")
    return sum(len(marker.findall(path.read_text(encoding="utf-8", errors="replace"))) for path in root.glob("*.out"))


def _shutdown_round(brokers: StockBrokers, root: Path, bootstrap: str, round_: int, load: Load) -> str:
    """SIGTERM of a broker under the load: a controlled shutdown (KIP-631) in which the
    controllers move its leaderships and ISR memberships before they let it stop, so that once
    its process is gone no partition waits for its session to expire; restarted: unfenced,
    back in every ISR and leading its preferred partitions. The load sees no error (checked at
    the end with every other failure)."""
    victim = BROKER_IDS[(round_ // 2) % len(BROKER_IDS)]
    led = sorted(p for p, (leader, _, _) in partitions_of(bootstrap, "load").items() if leader == victim)
    acked_before = len(load.acked)
    shutdowns_before = _controlled_shutdowns(root, victim)
    stopping_at = time.monotonic()
    brokers.kill(victim, signal.SIGTERM)
    stopped = time.monotonic() - stopping_at
    assert _controlled_shutdowns(root, victim) > shutdowns_before, "the broker stopped without a controlled shutdown"
    parts = _wait_partitions(
        bootstrap, "load", lambda parts: all(leader != victim and victim not in isr for leader, _, isr in parts.values()),
        SHUTDOWN_BOUND_S,
    )
    moved = time.monotonic() - stopping_at
    assert moved < stopped + SHUTDOWN_BOUND_S, parts
    _restart(brokers, bootstrap, victim)
    return (
        f"broker SIGTERM {round_ + 1}: {victim} led partitions {led}; stopped after a controlled shutdown in "
        f"{stopped:.1f} s, its partitions led by others and out of its ISRs {moved:.1f} s after the signal; "
        f"restarted, in every ISR and leading its preferred partitions {time.monotonic() - stopping_at:.1f} s "
        f"after the signal; {len(load.acked) - acked_before} acks meanwhile"
    )


def _lost(back: Counter[str], topic: str, count: int) -> str:
    expected = set(records(topic, count))
    missing, duplicated = expected - set(back), [v for v, n in back.items() if n > 1]
    return f"{len(missing)} missing (e.g. {sorted(missing)[:3]}), {len(duplicated)} duplicated, {len(back)} read"


def _check_stock_readers(kafka: KafkaRelease, partition: Path, topics: set[str]) -> None:
    """Stock metadata-shell and dump-log read a kwire node's newest metadata snapshot (KIP-630)
    as kwire reads it: the same broker registrations, topics (at least ``topics``) and
    partitions, every data record decoded."""
    _, snapshots = _partition_files(partition)
    assert snapshots, f"no snapshot in {partition}"
    path = partition / f"{snapshots[-1].file_stem}.checkpoint"
    content = read_snapshot_content(path.read_bytes())
    controller = ControlManagers(bootstrap=())
    controller.reset(content.data_records(), snapshots[-1].end_offset - 1)
    registrations = controller.cluster.registrations
    assert set(registrations) == set(BROKER_IDS)
    paths = [f"/image/cluster/brokers/{i}" for i in BROKER_IDS]
    for _ in range(3):
        # the shell can publish an image before it has read the whole file (both lines do,
        # now and then): a missing path is asked again, a wrong registration is not
        shown = kafka.metadata_shell(path, "cat", *paths).stdout
        if "No such file" not in shown:
            break
    for broker_id, registration in registrations.items():
        assert f"id={broker_id}, epoch={registration.epoch}, incarnationId={registration.incarnation_id}," in shown, shown
    assert shown.count(", fenced=") == len(BROKER_IDS), shown
    for registration in registrations.values():
        expected = f"incarnationId={registration.incarnation_id},"
        line = next(line for line in shown.splitlines() if expected in line)
        assert f"fenced={str(registration.fenced).lower()}," in line, line
    _check_shell_topics(kafka, path, controller, topics)
    dump = kafka.run_tool("dump-log", ["--cluster-metadata-decoder", "--files", path]).stdout
    decoded = [line for line in dump.splitlines() if 'payload: {"type":' in line and "_RECORD" in line]
    assert len(decoded) == len(content.data_records())
    assert sum("REGISTER_BROKER_RECORD" in d for d in decoded) == len(BROKER_IDS), dump[-3000:]


_REGISTRATION = re.compile(
    r"PartitionRegistration\(replicas=\[(?P<replicas>[^]]*)\], directories=\[(?P<dirs>[^]]*)\], "
    r"isr=\[(?P<isr>[^]]*)\].*, leader=(?P<leader>-?\d+), leaderRecoveryState=\w+, "
    r"leaderEpoch=(?P<leader_epoch>-?\d+), partitionEpoch=(?P<partition_epoch>-?\d+)\)"
)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _shell_topics(text: str) -> dict[str, dict[int, tuple[object, ...]]]:
    """``tree /image/topics/byName`` as topic -> partition -> (replicas, directories, ISR,
    leader, leader epoch, partition epoch)."""
    topics: dict[str, dict[int, tuple[object, ...]]] = {}
    topic = partition = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            topic, partition = line[:-1], None
            topics[topic] = {}
        elif line.startswith("  ") and not line.startswith("   ") and line.strip()[:-1].isdigit():
            partition = int(line.strip()[:-1])
        elif topic is not None and partition is not None and (match := _REGISTRATION.search(line)):
            topics[topic][partition] = (
                _ints(match["replicas"]), tuple(d.strip() for d in match["dirs"].split(",") if d.strip()),
                _ints(match["isr"]), int(match["leader"]), int(match["leader_epoch"]), int(match["partition_epoch"]),
            )
            partition = None
    return topics


def _check_shell_topics(kafka: KafkaRelease, snapshot: Path, controller: ControlManagers, topics: set[str]) -> None:
    """Stock metadata-shell's topics and partitions are kwire's image's."""
    image = controller.replication
    expected = {
        topic.name: {
            index: (p.replicas, tuple(str(d) for d in p.directories), p.isr, p.leader, p.leader_epoch, p.partition_epoch)
            for index, p in topic.partitions.items()
        }
        for topic in image.topics.values()
    }
    assert topics <= set(expected), sorted(expected)
    shown: dict[str, dict[int, tuple[object, ...]]] = {}
    for _ in range(3):  # the shell can publish an image before it has read the whole file
        shown = _shell_topics(kafka.metadata_shell(snapshot, "tree", "/image/topics/byName").stdout)
        if set(shown) == set(expected):
            break
    assert shown == expected
