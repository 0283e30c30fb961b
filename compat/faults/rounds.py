"""Rounds of network and process faults on a three-voter controller quorum -- kwire, stock Kafka
or a mix -- while a client writes (:mod:`compat.faults.history`); used by
``compat/test_quorum_faults.py`` and by the soak (``python -m compat.faults``).

Each node runs in a network namespace of its own on a private bridge (:mod:`compat.faults.net`);
the quorum is asked from a client namespace on the same bridge. Each leader appends a
NoOpRecord every ``LOAD_INTERVAL_MS``. A round finds the leader, applies a nemesis for
``HOLD_S`` (the fetch timeout and half a second), heals it, and waits for the quorum to settle.
The nemeses (:data:`NEMESES`):

* ``pause``: SIGSTOP on the leader, then SIGCONT -- it wakes up believing it still leads;
* ``pause-follower``: SIGSTOP on a follower, then SIGCONT;
* ``kill-leader``: kill -9 of the leader, restarted on the same directory at the heal;
* ``isolate-leader``: the leader cut off from both other voters, both ways (the client still
  reaches everyone);
* ``one-way``: what the leader sends to the other voters is dropped; what they send arrives;
* ``bridge``: the leader cut off from one follower only; the other follower sees both;
* ``remove-partitioned`` (dynamic quorums, 4.x): a follower cut off from the other voters is
  removed from the voter set (RemoveRaftVoter, KIP-853) while cut off; at the heal it is added
  back (AddRaftVoter with its directory id) once it has caught up as an observer;
* ``slow-link``: what the leader sends leaves at ``SLOW_LINK_KBIT`` and waits at most
  ``SLOW_LINK_LATENCY_MS`` in its queue, the rest dropped (:meth:`Network.slow`): fetch
  responses and the client's answers arrive late or are lost and resent;
* ``slow-disk``: each fsync of the leader first waits ``SLOW_FSYNC_MS``
  (:class:`compat.faults.disk.SlowFsync`, preloaded into every node of the run);
* ``pause-broker`` (runs with brokers): SIGSTOP of a stock broker until the others stop
  listing it (the controller fenced it), then SIGCONT; it must be listed again;
* on kwire nodes only (:data:`KWIRE_ONLY`), the failpoint nemeses of
  :mod:`compat.faults.failpoints`: ``slow-commit``, ``append-refused``, ``not-controller``,
  ``fetch-drop`` and, with brokers, ``heartbeat-delay``.

A run may carry three stock brokers of its release under the controller workload
(:mod:`compat.faults.cluster`): a producer and an admin through the brokers, with a checker of
their own.

Checked in each round: under the :data:`ELECTING` nemeses another voter leads within
``ELECTION_BOUND_S``, and after the heal the old leader answers with a later epoch within the
same bound (it stopped claiming its old one; ``START_TIMEOUT_S`` for a killed one, which
restarts first); after the heal every voter reaches the high
watermark within ``CATCH_UP_S`` (the recovery time, ``recovered_s``). Checked at the end of a
run (:func:`run_faults`): no two nodes ever answered as leader of the same epoch; no process
died, no stock controller logged a fatal fault, and the logs hold the same batches, byte for
byte, below the final high watermark; the client's history passes
:func:`compat.faults.history.check`; and with brokers, the workload's passes
:func:`compat.faults.cluster.check_cluster`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from compat import kafka as _kafka
from compat.faults import cluster as _cluster
from compat.faults.cluster import AdminOp, ClusterVerdict
from compat.faults.disk import SlowFsync, fsync_fault_library
from compat.faults.failpoints import BROKER_FAILPOINT_NEMESES, FAILPOINT_NEMESES, KWIRE_EXTRA
from compat.faults.failpoints import arm as arm_failpoint
from compat.faults.history import ConfigWrites, Op, Verdict, check, committed_values
from compat.faults.net import Network
from compat.faults.sampler import QuorumSampler, Sample
from compat.harness import (
    ELECTION_BOUND_S,
    FETCH_TIMEOUT_MS,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    newest_pinned_release,
    wait_until,
)
from tools.quorum_client import QuorumToolError, add_raft_voter, remove_raft_voter
from tools.stock_brokers import StockBrokers

NEMESES = ("pause", "pause-follower", "kill-leader", "isolate-leader", "one-way", "bridge", "remove-partitioned",
           "slow-link", "slow-disk", *FAILPOINT_NEMESES)
BROKER_NEMESES = ("pause-broker", *BROKER_FAILPOINT_NEMESES)
"""Nemeses of the runs with stock brokers (:mod:`compat.faults.cluster`)."""
KWIRE_ONLY = {*FAILPOINT_NEMESES, *BROKER_FAILPOINT_NEMESES}
"""Nemeses built from kwire's failpoints (:mod:`compat.faults.failpoints`): only a quorum of
kwire nodes alone takes them."""
QUORUM_IDS = frozenset({1, 2, 3})
"""The voters of a run (:func:`run_faults`)."""
DYNAMIC_ONLY = {"remove-partitioned"}
"""Nemeses that change the voter set, which a static quorum (``controller.quorum.voters``) cannot."""
ELECTING = {"pause", "kill-leader", "isolate-leader", "one-way"}
"""The nemeses under which the old leader cannot keep a majority: another voter must lead."""
HOLD_S = FETCH_TIMEOUT_MS / 1000 + 0.5
LOAD_INTERVAL_MS = 100
CATCH_UP_S = 60.0
SLOW_LINK_KBIT = 32
SLOW_LINK_LATENCY_MS = 500
SLOW_FSYNC_MS = 1000
"""Half the fetch timeout: a leader's flush this slow still lets it answer within a fetch's
wait, but each of its appends is durable on its own disk a second late."""
FENCE_BOUND_S = _cluster.SESSION_TIMEOUT_MS / 1000 * 9 / 8 + 10.0
"""A paused broker's session, one period of the controller's expiry check (a session / 8) and
a margin for the fencing to reach the other brokers on a loaded machine."""


@dataclass
class Round:
    """One round: its nemesis, the leader it hit, when it ran (``time.monotonic()`` seconds),
    and what was measured (``election_s``, ``step_down_s``, ``recovered_s``)."""

    nemesis: str
    leader: int
    epoch: int
    started_s: float
    ended_s: float = 0.0
    figures: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.nemesis} (leader {self.leader}, epoch {self.epoch}): " + ", ".join(
            f"{k} {v}" for k, v in self.figures.items())


@dataclass
class Run:
    """What one quorum's rounds saw."""

    quorum: Quorum
    network: Network
    leaders_of: dict[int, set[int]] = field(default_factory=dict)
    """epoch -> every node seen answering as its leader"""
    rounds: list[Round] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    verdict: Verdict | None = None
    slow_disks: dict[int, SlowFsync] = field(default_factory=dict)
    """node -> the switch that slows its flushes (``slow-disk``)"""
    brokers: StockBrokers | None = None
    """the stock brokers of a run with the controller workload (:mod:`compat.faults.cluster`)"""
    admin_ops: list[AdminOp] = field(default_factory=list)
    """that workload's admin history"""
    cluster: ClusterVerdict | None = None
    """and its verdict"""
    paused_brokers: set[int] = field(default_factory=set)
    """brokers ``pause-broker`` has stopped (the admin's describe probe leaves them out)"""
    samples: list[Sample] = field(default_factory=list)
    """each node's role and the leader's offsets every 250 ms (:mod:`compat.faults.sampler`)"""

    def observe(self, i: int) -> tuple[int, int, int] | None:
        """``(leader, epoch, high watermark)`` of the answer reached through node ``i`` (None
        when none came within 3 s); its leader is noted for its epoch."""
        try:
            view = self.quorum.describe(i)
        except (OSError, QuorumToolError, trio.TooSlowError):
            return None
        p = view.partition
        if p.leader_id >= 0:
            self.leaders_of.setdefault(p.leader_epoch, set()).add(p.leader_id)
        return p.leader_id, p.leader_epoch, p.high_watermark

    def round_of(self, op: Op | AdminOp) -> Round | None:
        """The round during which ``op`` was invoked (None: between rounds)."""
        return next((r for r in self.rounds if r.started_s <= op.invoked_s <= r.ended_s), None)


def run_round(run: Run, nemesis: str) -> Round:
    """One round of ``nemesis`` (see the module docstring); raises AssertionError or
    TimeoutError when the quorum did not behave."""
    quorum, net = run.quorum, run.network
    quorum.settled_high_watermark()
    leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S)
    run.leaders_of.setdefault(epoch, set()).add(leader)
    others = [i for i in quorum.ports if i != leader]
    this = Round(nemesis, leader, epoch, time.monotonic())
    run.rounds.append(this)

    def resume(i: int) -> Callable[[], None]:
        return lambda: quorum.procs[i].send_signal(signal.SIGCONT)

    heal: Callable[[], None] = net.heal
    if nemesis == "pause":
        quorum.procs[leader].send_signal(signal.SIGSTOP)
        heal = resume(leader)
    elif nemesis == "pause-follower":
        quorum.procs[others[0]].send_signal(signal.SIGSTOP)
        heal = resume(others[0])
    elif nemesis == "kill-leader":
        quorum.kill(leader)
        heal = lambda: quorum.start(leader)  # noqa: E731
    elif nemesis == "isolate-leader":
        net.partition([str(leader)], [str(i) for i in others])
    elif nemesis == "one-way":
        for i in others:
            net.cut(str(leader), str(i))
    elif nemesis == "bridge":
        net.partition([str(leader)], [str(others[0])])
    elif nemesis == "remove-partitioned":
        if not quorum.dynamic:
            raise ValueError(f"{nemesis} needs a dynamic quorum")
        heal = _remove_while_partitioned(run, others[0], [leader, others[1]])
    elif nemesis == "slow-link":
        net.slow(str(leader), SLOW_LINK_KBIT, SLOW_LINK_LATENCY_MS)
    elif nemesis == "slow-disk":
        run.slow_disks[leader].slow(SLOW_FSYNC_MS)
        heal = run.slow_disks[leader].heal
    elif nemesis in KWIRE_ONLY:
        heal = arm_failpoint(run, nemesis)
    elif nemesis == "pause-broker":
        if run.brokers is None:
            raise ValueError(f"{nemesis} needs a run with brokers")
        heal = _pause_broker(run, sorted(run.brokers.nodes)[len(run.rounds) % len(run.brokers.nodes)])
    else:
        raise ValueError(nemesis)
    started = time.monotonic()
    try:
        if nemesis in ELECTING:
            def elsewhere() -> tuple[int, int, int] | None:
                return next((c for c in map(run.observe, others) if c and c[0] not in (leader, -1)), None)

            new = wait_until(f"another voter to lead ({nemesis})", elsewhere, ELECTION_BOUND_S, interval_s=0.1)
            assert new is not None and new[1] > epoch, (new, epoch)
            this.figures["election_s"] = round(time.monotonic() - started, 1)
        else:
            for i in quorum.ports:
                run.observe(i)
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - started)))
    finally:
        heal()
    healed, healed_ms = time.monotonic(), time.time_ns() // 1_000_000
    if nemesis in ELECTING:
        # a restarted node first starts its process (a JVM's start-up on a loaded machine)
        bound = START_TIMEOUT_S if nemesis == "kill-leader" else ELECTION_BOUND_S
        wait_until(f"node {leader} to answer with an epoch after {epoch}", lambda: run.observe(leader),
                   bound, interval_s=0.1, ok=lambda c: c is not None and c[1] > epoch)
        this.figures["step_down_s"] = round(time.monotonic() - healed, 1)
    _, _, hwm = quorum.wait_leader(ELECTION_BOUND_S)
    wait_until(f"every voter at offset {hwm} after the heal", lambda: quorum.voters_caught_up(hwm, healed_ms), CATCH_UP_S)
    this.figures["recovered_s"] = round(time.monotonic() - healed, 1)
    this.ended_s = time.monotonic()
    return this


def _pause_broker(run: Run, victim: int) -> Callable[[], None]:
    """SIGSTOP of broker ``victim`` until the other brokers stop listing it (it was fenced:
    figure ``fenced_s``, within :data:`FENCE_BOUND_S`); the heal resumes it and waits until
    every broker lists every broker again (``rejoined_s``)."""
    assert run.brokers is not None
    brokers, net = run.brokers, run.network
    process = brokers.nodes[victim].process
    assert process is not None
    others = [i for i in brokers.nodes if i != victim]
    run.paused_brokers.add(victim)
    process.send_signal(signal.SIGSTOP)
    paused = time.monotonic()

    def fenced() -> bool:
        views = net.call("client", lambda: [brokers.listed_by(i, timeout_s=3.0) for i in others])
        return all(v is not None and victim not in v for v in views)

    try:
        wait_until(f"broker {victim} fenced while paused", fenced, FENCE_BOUND_S)
    except BaseException:
        process.send_signal(signal.SIGCONT)
        run.paused_brokers.discard(victim)
        raise
    run.rounds[-1].figures["fenced_s"] = round(time.monotonic() - paused, 1)

    def heal() -> None:
        process.send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        net.call("client", lambda: brokers.wait_listed(set(brokers.nodes), FENCE_BOUND_S * 2))
        run.paused_brokers.discard(victim)
        run.rounds[-1].figures["rejoined_s"] = round(time.monotonic() - resumed, 1)

    return heal


def _remove_while_partitioned(run: Run, follower: int, rest: list[int]) -> Callable[[], None]:
    """Cut ``follower`` off from ``rest`` and remove it from the voter set through the leader
    (asked from the client host); the heal reconnects it and adds it back with its directory
    id once it answers as an observer (the add retries while it catches up)."""
    quorum, net = run.quorum, run.network
    net.partition([str(follower)], [str(i) for i in rest])
    view = quorum.describe(rest[0])
    directory = next(v.replica_directory_id for v in view.partition.current_voters if v.replica_id == follower)
    bootstrap = ",".join(f"{quorum.hosts[i]}:{quorum.ports[i]}" for i in rest)
    net.call("client", lambda: trio.run(remove_raft_voter, bootstrap, follower, directory))

    def caught_up_observer(since_ms: int) -> bool:
        p = quorum.describe(rest[0]).partition
        return any(o.replica_id == follower and o.log_end_offset >= p.high_watermark
                   and o.last_fetch_timestamp >= since_ms for o in p.observers)

    def heal() -> None:
        net.heal()
        healed, healed_ms = time.monotonic(), time.time_ns() // 1_000_000
        # AddRaftVoter is refused (REQUEST_TIMED_OUT) until the observer has caught up
        wait_until(f"node {follower} to fetch as a caught-up observer", lambda: caught_up_observer(healed_ms),
                   CATCH_UP_S, interval_s=0.1)
        run.rounds[-1].figures["observer_s"] = round(time.monotonic() - healed, 1)
        endpoints = [("CONTROLLER", quorum.hosts[follower], quorum.ports[follower])]
        net.call("client", lambda: trio.run(add_raft_voter, bootstrap, follower, directory, endpoints))
        voters = {v.replica_id for v in quorum.describe(rest[0]).partition.current_voters}
        assert follower in voters, f"node {follower} was not added back: voters {sorted(voters)}"

    return heal


def run_faults(kafka: KafkaRelease, kwire_ids: frozenset[int], root: Path, nemeses: Sequence[str],
               *, kwire_extra: str = "", brokers: bool = False, writes: bool = True,
               seen: list[Run] | None = None) -> Run:
    """Run ``nemeses`` on a quorum of ``kafka``'s release whose nodes ``kwire_ids`` are kwire's
    (their properties get ``kwire_extra``) while the client writes; check the rounds, the logs
    and the history (the verdict is on the returned run; the other checks raise
    AssertionError or TimeoutError). With ``brokers``, three stock brokers of the release run
    too, under the controller workload of :mod:`compat.faults.cluster` (whose verdict is the
    run's ``cluster``), and ``nemeses`` may hold :data:`BROKER_NEMESES`. Without ``writes`` only
    the admin's topic and config requests write: the quorum's own client stays idle and the
    admin moves no partition (whose ISR changes are the brokers' writes). kwire's controller
    holds a write until the writes before it commit, so a positive control of the controller
    workload's checker leaves the admin's requests alone in the quorum. ``seen`` gets the run as soon as it starts, so that
    a caller sees the rounds of a run that raised."""
    if any(n in KWIRE_ONLY for n in nemeses):
        kwire_extra = KWIRE_EXTRA + kwire_extra
    library = fsync_fault_library()
    slow_disks = {i: SlowFsync(library, root / f"slow-fsync-{i}") for i in (1, 2, 3)}
    hosts = ["1", "2", "3", "client"] + (["brokers"] if brokers else [])
    with Network(hosts, tag=f"q{os.getpid() % 1000}") as net:
        quorum = Quorum(kafka, root, set(kwire_ids), dynamic=kafka.at_least(4, 0), network=net,
                        extra=f"metadata.max.idle.interval.ms={LOAD_INTERVAL_MS}\n", kwire_extra=kwire_extra,
                        env={i: d.env() for i, d in slow_disks.items()})
        sampler = QuorumSampler({i: (quorum.hosts[i], quorum.ports[i]) for i in quorum.ports})
        run = Run(quorum, net, slow_disks=slow_disks, samples=sampler.samples)
        if seen is not None:
            seen.append(run)
        config_writes = ConfigWrites({i: (quorum.hosts[i], quorum.ports[i]) for i in quorum.ports})
        run.ops = config_writes.ops
        client = threading.Thread(target=net.call, args=("client", config_writes.run), daemon=True)
        sampling = threading.Thread(target=net.call, args=("client", sampler.run), daemon=True)
        with quorum.running(then=lambda: print(*run.rounds, sep="\n")), contextlib.ExitStack() as cluster:
            if brokers:
                voters = None if quorum.dynamic else ",".join(
                    f"{i}@{quorum.hosts[i]}:{p}" for i, p in quorum.ports.items())
                run.brokers = _cluster.start_brokers(kafka, root, net, quorum.bootstrap, voters)
                cluster.callback(run.brokers.stop)  # before the controllers stop
                cluster.push(lambda kind, *_: _print_report(kind, run.brokers))
                clients = _cluster.start_load(run.brokers, net, run.paused_brokers, moves=writes)
                run.admin_ops = clients.admin.ops
            if writes:
                client.start()
            sampling.start()
            try:
                for nemesis in nemeses:
                    run_round(run, nemesis)
            finally:
                sampler.stop()
                config_writes.stop()
                if brokers:
                    clients.stop()
                if writes:
                    client.join(timeout=30)
                sampling.join(timeout=10)
            final_hwm, logged = quorum.settle_after_faults()
            if brokers:
                assert run.brokers is not None
                events = {i: _cluster.committed_events(root / f"data{i}", final_hwm) for i in quorum.ports}
                run.cluster = _cluster.settle_and_check(run.brokers, net, clients, events)
    two = {epoch: ids for epoch, ids in run.leaders_of.items() if len(ids) > 1}
    assert not two, f"two leaders in one epoch: {two}"
    quorum.assert_agreed(final_hwm, logged)
    run.verdict = check(config_writes.ops, {i: committed_values(quorum.root / f"data{i}", final_hwm) for i in quorum.ports})
    print(f"history: {run.verdict.summary()}")
    if run.cluster is not None:
        print(f"controller workload: {run.cluster.summary()}")
    return run


def _print_report(kind: type[BaseException] | None, brokers: StockBrokers | None) -> bool:
    """An exit callback: the brokers' output when the block failed (the failure goes on)."""
    if kind is not None and brokers is not None:
        print(brokers.report())
    return False


def configurations(all_configs: bool) -> list[tuple[str, str, frozenset[int]]]:
    """``(id, release, kwire node ids)``: kwire and stock on the newest release, and with
    ``all_configs`` the mixes on every release and the kwire and stock quorums of the older ones
    (a kwire quorum of an older release is formatted as that release's quorums are, static on
    3.x, and its brokers, with the brokers, are of that release)."""
    newest = newest_pinned_release().version
    configs = [("kwire", newest, frozenset({1, 2, 3})), (f"stock-{newest}", newest, frozenset())]
    if all_configs:
        for version in _kafka.PINNED_VERSIONS:
            configs += [(f"mixed-{version}-1-kwire", version, frozenset({1})),
                        (f"mixed-{version}-2-kwire", version, frozenset({1, 2}))]
            if version != newest:
                configs += [(f"kwire-{version}", version, frozenset({1, 2, 3})),
                            (f"stock-{version}", version, frozenset())]
    return configs


def available_nemeses(kafka: KafkaRelease, brokers: bool = False, *, kwire: bool) -> tuple[str, ...]:
    """The nemeses a quorum of ``kafka``'s release can take (:data:`DYNAMIC_ONLY` needs 4.x,
    whose quorums the rounds format dynamic), with :data:`BROKER_NEMESES` when it has
    ``brokers``, and :data:`KWIRE_ONLY` only when every node is ``kwire``'s."""
    own = NEMESES if kafka.at_least(4, 0) else tuple(n for n in NEMESES if n not in DYNAMIC_ONLY)
    return tuple(n for n in own + (BROKER_NEMESES if brokers else ()) if kwire or n not in KWIRE_ONLY)


def recovery_figures(rounds: Sequence[Round]) -> tuple[float, float] | None:
    """Median and max ``recovered_s`` of ``rounds`` (None without any)."""
    times = [r.figures["recovered_s"] for r in rounds if "recovered_s" in r.figures]
    return (round(statistics.median(times), 2), max(times)) if times else None
