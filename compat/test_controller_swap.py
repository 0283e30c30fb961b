"""A live controller swap (``make nightly``, ``KWIRE_CONTROLLER_SWAP=1``): every controller of a
running stock Kafka 3.9.2 cluster replaced by a kwire node, one at a time, then every kwire node
replaced by a stock controller again, with brokers and clients running throughout -- the way an
operator adopts kwire (and leaves it). ``KWIRE_CONTROLLER_SWAP=3.9.2,4.4.0`` (``make nightly``)
runs it on each release named, the controllers, brokers and tools all of that release.

The cluster: a KIP-853 dynamic quorum of stock controllers 1-3 (formatted with
``--initial-controllers``), three stock brokers (101-103), a topic of 3 partitions,
replication factor 3, ``min.insync.replicas=2``, an idempotent acks=all kafka-python producer
(:class:`compat.clients.Load`) and a group-less consumer (:class:`compat.clients.Consumer`).
Every node names every controller (1-9) in ``controller.quorum.bootstrap.servers``.

One swap of controller ``old`` by ``new``, as an operator does it with the stock tools:

1. ``new`` (formatted with ``--no-initial-controllers``: a directory id of its own and no voter
   set) is started; the test waits until the leader's DescribeQuorum lists it as an observer at
   the high watermark;
2. stock ``kafka-metadata-quorum --bootstrap-controller ... --command-config <new's
   properties> add-controller`` (AddRaftVoter); the test waits until ``new`` is a voter that has
   caught up (it reached the leader's log end within ``tools.voter_changes.DEFAULT_MAX_LAG_MS``);
3. ``kafka-metadata-quorum remove-controller --controller-id old --controller-directory-id
   ...`` (RemoveRaftVoter); once ``old`` is no longer a voter (a removed leader resigns when the
   change commits, ``KafkaRaftClient``), it is stopped with SIGTERM.

Controllers 1, 2, 3 are swapped for kwire nodes 4, 5, 6, the followers first and the leader
last, so that the last removal hands leadership from a stock controller to a kwire node; then,
with only kwire voters, the kwire leader is stopped with SIGTERM (it resigns) and started again,
then killed with SIGKILL and started again, so that kwire hands leadership to kwire under stock
brokers, gracefully and not, and a second topic is created through a broker, written and read
back (and read back again, every record once, at the end); then 4, 5, 6 are swapped for stock
controllers 7, 8, 9 the same way, the last removal handing leadership back to stock.

Watched throughout (:mod:`compat.watch`): the partition leaders and the brokers every broker's
Metadata lists (a fenced broker drops out of it), and the quorum's leader of each epoch
(DescribeQuorum). Asserted at the end:

* kwire led the quorum at some epoch (DescribeQuorum named a kwire node, and a LeaderChange
  record of the log); the removed stock leader's successor was a kwire node, the removed kwire
  leader's a stock controller; the voters end as 7, 8, 9 with a stock leader;
* no broker was fenced by the swap: no Metadata answer left a broker out, and the metadata log
  (read from controller 7's directory, which holds it from offset 0) has no record that fenced,
  shut down, unregistered or registered again a broker once it was first unfenced;
* nothing acknowledged was lost: no send failed, every acknowledged value was consumed exactly
  once (and no value at all twice: the producer is idempotent);
* no partition was without a live leader in any sample (the brokers never changed);
* no controller exited by itself, but for a stock 3.9 leader of the fault
  :data:`KAFKA_3_9_REMOVAL_FAULT` (then the stock tool's retry of the removal may report
  VoterNotFoundException, the removal having been made, and the swap goes on without it).

Printed (run with ``-s``): acknowledged and consumed counts, the longest offline window, the
longest time without a quorum leader, each swap's duration, and the leader of each epoch (node
id, kwire or stock) from DescribeQuorum and from the log's LeaderChange records.

Collected only when ``KWIRE_CONTROLLER_SWAP`` is set (``compat/conftest.py``). Cost per release: 35-50 s and 35-45 CPU-s
(the test's process tree: up to four controllers and three brokers at a time, a dozen tool
JVMs) on a quiet 2-core machine; up to 155 s on a loaded one, where a stock controller's JVM
took up to 15 s to start.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from compat.clients import Consumer, Load, produce
from compat.faults.cluster import create_topic
from compat.harness import (
    CLUSTER_ID,
    ELECTION_BOUND_S,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    free_port,
    wait_until,
)
from compat.kafka import require_kafka
from compat.release_cluster import BROKER_START_TIMEOUT_S, consumed_exactly
from compat.watch import (
    LeaderSampler,
    QuorumWatch,
    leader_of_each_epoch,
    registration_changes,
    topic_metadata,
)
from kwire.uuid import Uuid
from tools.quorum_client import QuorumView, describe
from tools.stock_brokers import StockBrokers
from tools.voter_changes import caught_up_voters

SWAP_ENV = "KWIRE_CONTROLLER_SWAP"
"""``1``: the swap on Kafka 3.9.2 (the first release with KIP-853's dynamic quorums); or a
comma-separated list of pinned releases to run it on, e.g. ``3.9.2,4.4.0``."""
RELEASES = ["3.9.2"] if os.environ.get(SWAP_ENV, "1") == "1" else os.environ[SWAP_ENV].split(",")

pytestmark = [pytest.mark.compat, pytest.mark.slow]

STOCK_IDS = (1, 2, 3)
"""The stock controllers the cluster starts with (its initial voters)."""
KWIRE_IDS = (4, 5, 6)
BACK_IDS = (7, 8, 9)
"""The stock controllers that replace the kwire nodes."""
BROKER_IDS = (101, 102, 103)
TOPIC = "swap"
KWIRE_TOPIC = "created-under-kwire"
"""A topic created, written and read while only kwire nodes vote, and read again at the end."""
KWIRE_TOPIC_RECORDS = 300
RECORDS_PER_S = 300
KAFKA_3_9_REMOVAL_FAULT = "Unexpected acknowledgement from non-voter"
"""What a Kafka 3.9.2 leader dies of, now and then, while it removes a voter: the removed voter's
answer to the leader's BeginQuorumEpoch heartbeat arrives after the VotersRecord without it was
appended, and ``LeaderState.addAcknowledgementFrom`` throws IllegalArgumentException in the raft
I/O thread, a fatal fault (``KafkaRaftClient.handleBeginQuorumEpochResponse``). It involves only
stock nodes; the swap goes on with the voters left, and any other exit fails the test."""
CATCH_UP_S = 120.0
"""How long a new controller may take to start and catch up as an observer (a JVM start on a
loaded machine), and then as a voter."""


def _running(quorum: Quorum) -> list[int]:
    return [i for i, p in sorted(quorum.procs.items()) if p.poll() is None]


def _bootstrap(quorum: Quorum) -> str:
    """The running controllers' listeners, for ``--bootstrap-controller``."""
    return ",".join(f"{quorum.hosts[i]}:{quorum.ports[i]}" for i in _running(quorum))


def _view(quorum: Quorum) -> QuorumView | None:
    """DescribeQuorum through the running controllers, None while none names a leader."""
    try:
        return trio.run(describe, _bootstrap(quorum), 5.0)
    except Exception:  # no leader, a controller stopping: asked again
        return None


def _wait_view(quorum: Quorum, what: str, holds: Callable[[QuorumView], bool], alive: int | None = None) -> QuorumView:
    view = wait_until(what, lambda: _view(quorum), CATCH_UP_S, ok=lambda v: v is not None and holds(v),
                      interval_s=0.5, alive=[quorum.procs[alive]] if alive is not None else [])
    assert view is not None
    return view


def _voters(view: QuorumView) -> dict[int, Uuid]:
    return {v.replica_id: v.replica_directory_id for v in view.partition.current_voters}


def _kind(quorum: Quorum, node: int) -> str:
    return "kwire" if node in quorum.kwire_ids else f"stock {quorum.kafka.version}"


@dataclass(frozen=True)
class Swapped:
    """One swap done: a line saying how long each step took, whether the voter removed was the
    leader when the removal was asked, and who led once it was gone."""

    line: str
    removed_leader: bool
    leader_after: int


class SwapRun:
    """The controllers of one run and what happened to them: ``stopped`` holds the nodes the
    run stopped for good, ``crashed`` node -> exit status of any that exited by itself."""

    def __init__(self, kafka: KafkaRelease, quorum: Quorum, report: Callable[[str], None]) -> None:
        self.kafka, self.quorum, self.report = kafka, quorum, report
        self.stopped: set[int] = set()
        self.crashed: dict[int, int] = {}

    def look(self) -> dict[int, int]:
        """Note every controller that exited without being stopped; returns them all."""
        for i, proc in self.quorum.procs.items():
            if i not in self.stopped and i not in self.crashed and proc.poll() is not None:
                self.crashed[i] = proc.returncode
        return self.crashed

    def replace_all(self, olds: tuple[int, ...], news: tuple[int, ...]) -> list[Swapped]:
        """Swap every voter of ``olds`` for a controller of ``news``, followers first and the
        leader last, so that the last removal takes leadership from the old kind to the new."""
        done = []
        for new in news:
            view = _wait_view(self.quorum, "a leader", lambda v: True)
            left = [i for i in olds if i in _voters(view)]
            old = next((i for i in left if i != view.partition.leader_id), left[0])
            done.append(self.swap(old, new))
            self.report(done[-1].line)
        return done

    def swap(self, old: int, new: int) -> Swapped:
        """Replace voter ``old`` by controller ``new`` (see the module docstring)."""
        quorum = self.quorum
        began = time.monotonic()
        quorum.start(new)
        _wait_view(quorum, f"controller {new} at the high watermark as an observer", lambda v: any(
            o.replica_id == new and o.log_end_offset >= v.partition.high_watermark for o in v.partition.observers),
            new)
        observed = time.monotonic()
        added = self.kafka.run_tool("metadata-quorum", [
            "--bootstrap-controller", _bootstrap(quorum), "--command-config", quorum.root / f"{new}.properties",
            "add-controller"], check=False)
        assert added.returncode == 0 and f"Added controller {new}" in added.stdout, added.stdout + added.stderr
        view = _wait_view(quorum, f"controller {new} a caught-up voter", lambda v: new in _voters(v)
                          and new in caught_up_voters(v, time.time_ns() // 1_000_000), new)
        voted = time.monotonic()
        was_leader = view.partition.leader_id == old
        removed = self.kafka.run_tool("metadata-quorum", [
            "--bootstrap-controller", _bootstrap(quorum), "remove-controller", "--controller-id", str(old),
            "--controller-directory-id", str(_voters(view)[old])], check=False)
        if removed.returncode != 0:
            # a leader that died after appending the removal never answered (KAFKA_3_9_REMOVAL_FAULT);
            # the tool's retry to the next leader finds the voter gone: the wait below tells
            assert "VoterNotFoundException" in removed.stderr and self.look(), removed.stdout + removed.stderr
        else:  # the tool prints "Removed  KRaft controller <id> with directory id <id>" (two spaces)
            assert re.search(rf"Removed\s+KRaft controller {old} ", removed.stdout), removed.stdout
        view = _wait_view(quorum, f"controller {old} no longer a voter, another leading",
                          lambda v: old not in _voters(v) and v.partition.leader_id != old)
        self.look()
        quorum.kill(old, signal.SIGTERM)
        self.stopped.add(old)
        leader = view.partition.leader_id
        line = (f"{old} ({_kind(quorum, old)}{', the leader' if was_leader else ''}) -> {new} "
                f"({_kind(quorum, new)}): observer after {observed - began:.1f} s, caught-up voter after "
                f"{voted - began:.1f} s, {old} removed after {time.monotonic() - began:.1f} s; voters "
                f"{sorted(_voters(view))}, leader {leader} ({_kind(quorum, leader)}) epoch {view.partition.leader_epoch}")
        return Swapped(line, was_leader, leader)

    def stop_leader(self, sig: signal.Signals) -> None:
        """``sig`` to the leader (SIGTERM: it resigns and sends EndQuorumEpoch; SIGKILL: the
        others notice its silence after ``controller.quorum.fetch.timeout.ms``), another voter
        leads; it is started again and catches up as a voter."""
        quorum = self.quorum
        view = _wait_view(quorum, "a leader", lambda v: True)
        leader, epoch = view.partition.leader_id, view.partition.leader_epoch
        stopped = time.monotonic()
        quorum.kill(leader, sig)
        new_leader, new_epoch, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
        elected = time.monotonic() - stopped
        quorum.start(leader)
        _wait_view(quorum, f"controller {leader} a caught-up voter again",
                   lambda v: leader in caught_up_voters(v, time.time_ns() // 1_000_000)
                   and any(r.replica_id == leader and r.last_fetch_timestamp > time.time_ns() // 1_000_000 - 2000
                           for r in v.partition.current_voters), leader)
        self.report(f"leader {leader} ({_kind(quorum, leader)}, epoch {epoch}) sent {sig.name}: {new_leader} "
                    f"({_kind(quorum, new_leader)}) leads epoch {new_epoch} after {elected:.1f} s; {leader} back "
                    "as a voter")


@pytest.mark.parametrize("release", RELEASES)
def test_live_controller_swap(tmp_path: Path, release: str) -> None:
    require_kafka(release)
    started_wall, started_cpu = time.monotonic(), _cpu_s()
    kafka = KafkaRelease(release)
    (tmp_path / "controllers").mkdir()
    quorum = Quorum(kafka, tmp_path / "controllers", set(KWIRE_IDS), dynamic=True,
                    ids=(*STOCK_IDS, *KWIRE_IDS, *BACK_IDS), voter_ids=STOCK_IDS)
    brokers = StockBrokers.create(tmp_path / "brokers", release, cluster_id=CLUSTER_ID,
                                  bootstrap_controllers=quorum.bootstrap, ports={i: free_port() for i in BROKER_IDS})
    try:
        for i in STOCK_IDS:
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        with brokers.starting():
            brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S, exited_fails=True)
        first = brokers.nodes[BROKER_IDS[0]]
        create_topic(brokers.host, first.port, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        addresses = [f"{brokers.host}:{n.port}" for n in brokers.nodes.values()]
        sampler = LeaderSampler(lambda: addresses, TOPIC, BROKER_IDS)
        wait_until(f"{TOPIC}: every partition led, all three in sync", lambda: _in_sync(addresses[0], TOPIC), 60.0)
        watch = QuorumWatch(lambda: [f"{quorum.hosts[i]}:{quorum.ports[i]}" for i in _running(quorum)])
        load = Load(brokers.bootstrap_servers, TOPIC, RECORDS_PER_S)
        consumer = Consumer(brokers.bootstrap_servers, TOPIC)
        for worker in (sampler, watch, load, consumer):
            worker.start()

        def report(line: str) -> None:
            print(f"{line} ({len(load.acked)} acknowledged so far)", flush=True)

        run = SwapRun(kafka, quorum, report)
        try:
            to_kwire = run.replace_all(STOCK_IDS, KWIRE_IDS)
            run.stop_leader(signal.SIGTERM)
            run.stop_leader(signal.SIGKILL)
            report(_topic_under_kwire(brokers, addresses[0]))
            to_stock = run.replace_all(KWIRE_IDS, BACK_IDS)
            final = _wait_view(quorum, "the final voters", lambda v: sorted(_voters(v)) == list(BACK_IDS))
            crashed = dict(run.look())
        except BaseException:
            load.close()
            consumer.close()
            sampler.stop()
            watch.stop()
            raise
        load.stop()
        acked = set(load.acked)
        missing = consumer.wait_for(acked, 120.0)
        consumed_exactly(brokers.bootstrap_servers, KWIRE_TOPIC, KWIRE_TOPIC_RECORDS)  # kept through the swap back
        consumer.close()
        sampler.stop()
        watch.stop()
        high_watermark = final.partition.high_watermark
    except BaseException:
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        brokers.stop()
        quorum.stop()
    data = tmp_path / "controllers" / f"data{BACK_IDS[0]}"
    first_offset, changes = registration_changes(data, high_watermark)
    logged = leader_of_each_epoch(data, high_watermark)
    seen = consumer.seen
    twice = sorted(v for v, n in seen.items() if n > 1)
    print(f"acknowledged {len(acked)}, failed {len(load.failed)}, consumed {sum(seen.values())} "
          f"({len(seen)} distinct, {len(twice)} more than once), acknowledged but not consumed {len(missing)}")
    print(f"longest offline window {sampler.longest_offline_s:.2f} s; {sampler.samples} partition samples, "
          f"{sampler.unanswered} unanswered; samples leaving a broker out: {sampler.unlisted[:5]}")
    print(f"longest time without a quorum leader {watch.leaderless_s:.2f} s; {watch.samples} quorum samples")
    print("leader of each epoch (DescribeQuorum): " + ", ".join(
        f"{e}: {leader} ({_kind(quorum, leader)})" for e, leader in sorted(watch.epochs.items())))
    print("leader of each epoch (LeaderChange records): " + ", ".join(
        f"{e}: {leader} ({_kind(quorum, leader)})" for e, leader in sorted(logged.items())))
    print(f"registration changes after unfencing: {changes or 'none'} (log from offset {first_offset} "
          f"to the high watermark {high_watermark})")
    print(f"wall {time.monotonic() - started_wall:.0f} s, CPU {_cpu_s() - started_cpu:.0f} s (this process and "
          "the processes it started and reaped)")

    print(f"controllers that exited by themselves: {crashed or 'none'}")

    for node in crashed:  # only a stock controller, and only of the fault Kafka 3.9 is known for
        out = (tmp_path / "controllers" / f"{node}.out").read_text(errors="replace")
        assert node not in KWIRE_IDS and KAFKA_3_9_REMOVAL_FAULT in out, (node, out[-3000:])
    assert any(leader in KWIRE_IDS for leader in watch.epochs.values()), watch.epochs
    # the stock leader removed, a kwire node took over (unless the stock leader died first);
    # the kwire leader removed, a stock one took over
    assert to_kwire[-1].leader_after in KWIRE_IDS and (crashed or to_kwire[-1].removed_leader), to_kwire[-1]
    assert to_stock[-1].removed_leader and to_stock[-1].leader_after in BACK_IDS, to_stock[-1]
    assert final.partition.leader_id in BACK_IDS, final.partition
    assert not load.failed, load.failed[:5]
    assert acked and not missing, f"{len(missing)} acknowledged values never consumed, e.g. {sorted(missing)[:3]}"
    assert not twice, f"{len(twice)} values consumed more than once, e.g. {twice[:3]}"
    assert not sampler.unlisted, sampler.unlisted[:10]
    assert first_offset == 0 and not changes, (first_offset, changes)
    assert set(logged.values()) & set(KWIRE_IDS), logged
    assert sampler.samples > 0 and sampler.unanswered < sampler.samples / 10, (sampler.samples, sampler.unanswered)
    assert sampler.longest_offline_s == 0.0, sampler.longest


def _cpu_s() -> float:
    """CPU seconds of this process and of its children reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _topic_under_kwire(brokers: StockBrokers, address: str) -> str:
    """While only kwire nodes vote: :data:`KWIRE_TOPIC` created through a broker (CreateTopics
    forwarded to the kwire controller), every partition in sync on all three brokers, its
    records written (idempotent, acks=all) and read back exactly once."""
    began = time.monotonic()
    create_topic(brokers.host, brokers.nodes[BROKER_IDS[0]].port, KWIRE_TOPIC, 3, 3, {"min.insync.replicas": "2"})
    wait_until(f"{KWIRE_TOPIC}: every partition led, all three in sync", lambda: _in_sync(address, KWIRE_TOPIC), 60.0)
    produce(brokers.bootstrap_servers, KWIRE_TOPIC, KWIRE_TOPIC_RECORDS)
    consumed_exactly(brokers.bootstrap_servers, KWIRE_TOPIC, KWIRE_TOPIC_RECORDS)
    return (f"{KWIRE_TOPIC} created under kwire, {KWIRE_TOPIC_RECORDS} records written and read back after "
            f"{time.monotonic() - began:.1f} s")


def _in_sync(address: str, topic: str) -> bool:
    """Whether the broker at ``address`` says every partition of ``topic`` is led and has all
    three brokers in its ISR."""
    try:
        response = trio.run(topic_metadata, address, topic)
    except Exception:
        return False
    partitions = [p for t in response.topics for p in t.partitions]
    return len(partitions) == 3 and all(p.leader_id >= 0 and sorted(p.isr_nodes) == list(BROKER_IDS) for p in partitions)
