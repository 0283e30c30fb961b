"""Failover figures of the quorum section: how long a 3-node quorum under load goes without a
committing leader when its leader is stopped, kwire and Kafka side by side.

* SIGTERM (graceful): the leader resigns (KIP-595's EndQuorumEpoch to the voters, its preferred
  successors first), so a follower may start an election at once.
* SIGKILL (crash): the followers learn nothing; one starts an election only once
  ``controller.quorum.fetch.timeout.ms`` has passed without a successful fetch. The figure's
  excess over the fetch timeout is the cost of the election itself (pre-vote where the side has
  it, backoff, Vote round, the new epoch's first batch replicated).

Each side runs three nodes of the quorum section's kind (``kwire test-raft-server`` /
``kafka.tools.TestRaftServer``) with the same quorum timeouts (:data:`QUORUM_TIMEOUTS`, Kafka's
defaults, written into both configurations), the leader writing :data:`THROUGHPUT` records/s of
:data:`RECORD_SIZE` bytes. For each signal, :data:`ROUNDS` rounds: wait until every node follows
a committing leader and :data:`SETTLE_S` more seconds have passed, note the wall clock, signal the
leader, wait for another node's epoch to commit, and restart the stopped node.

"The new leader's first commit" is the same event on both sides: its high watermark first covers
its epoch's first batch (the LeaderChange record). Kafka logs it at INFO from ``LeaderState``
("High watermark set to ... for the first time for epoch N"); the JVMs here get a log4j2
configuration (written by :func:`kafka_log4j2_config`) that prints that logger and
``QuorumState`` with wall-clock milliseconds. kwire's workload reports it as its
``high-watermark`` event (``tools.raft_server_load``). Both clocks are the machine's wall clock
at millisecond resolution; the signal's moment is taken just before ``kill(2)``.

Kafka's side needs Log4j 2 (Kafka 4.x) for the millisecond timestamps; an older release is
reported as not run.
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tools.bench.core import Tail, tail_text

THROUGHPUT = 1_000
"""records/s the leader writes during the failover rounds: load enough that every node's log
moves, little enough that a restarted node catches up within :data:`SETTLE_S`."""
RECORD_SIZE = 256
NODES = 3
ROUNDS = 5
SETTLE_S = 3.0
QUICK_ROUNDS = 1
QUORUM_TIMEOUTS = {
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "1000",
}
"""Kafka's defaults (``QuorumConfig``), written into every node's configuration on both sides."""
FETCH_TIMEOUT_MS = int(QUORUM_TIMEOUTS["controller.quorum.fetch.timeout.ms"])
SIGNALS = (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL))
POLL_S = 0.01

_KAFKA_FIRST_HW = re.compile(r"^(\d{10,}) INFO (?:\[[^\]]*\] )?High watermark set to .* for the first time for epoch (\d+) ")
_KAFKA_FOLLOWER = re.compile(r"^(\d{10,}) INFO (?:\[[^\]]*\] )?Completed transition to FollowerState\(")


class FailoverError(RuntimeError):
    """A failover run could not produce figures (no leader, no new leader in time, a node
    exited)."""


@dataclass(frozen=True, slots=True)
class Round:
    """One signal to a leader: ``recovery_ms`` from the signal to the new leader's first commit
    (wall clock, ms)."""

    signal_name: str
    stopped: int
    old_epoch: int
    new_leader: int
    new_epoch: int
    recovery_ms: int


@dataclass(slots=True)
class FailoverRow:
    """One side's rounds, or ``error`` when it gave none."""

    implementation: str
    rounds: list[Round] = field(default_factory=list)
    error: str | None = None

    def recoveries(self, signal_name: str) -> list[int]:
        return [r.recovery_ms for r in self.rounds if r.signal_name == signal_name]

    def median(self, signal_name: str) -> float | None:
        values = self.recoveries(signal_name)
        return float(statistics.median(values)) if values else None


class Quorum(Protocol):
    """One side's three nodes, as the rounds drive them."""

    def start(self, node_id: int | None = None) -> None:
        """Start every node, or (again) node ``node_id``."""

    def signal(self, node_id: int, sig: int) -> None:
        """Send ``sig`` to node ``node_id`` and wait for it to exit."""

    def epoch_commits(self) -> list[tuple[int, int, int]]:
        """``(node id, epoch, wall ms)`` of every leader's first commit seen so far."""

    def follows_since(self, node_id: int, since_ms: int) -> bool:
        """Whether node ``node_id`` has taken up a follower's role since ``since_ms``."""

    def check_running(self) -> None:
        """Raise FailoverError when a node that should run has exited."""

    def close(self) -> None:
        """Stop every node."""


def _wait(condition: Callable[[], object], timeout_s: float, what: str, quorum: Quorum) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        quorum.check_running()
        if time.monotonic() > deadline:
            raise FailoverError(f"{what} within {timeout_s:.0f} s")
        time.sleep(POLL_S)


def run_rounds(quorum: Quorum, rounds: int, *, settle_s: float = SETTLE_S,
               timeout_s: float = 60.0) -> list[Round]:
    """Start ``quorum`` and run ``rounds`` failovers per signal of :data:`SIGNALS` (module
    docstring). The caller closes the quorum. Raises FailoverError when it does not recover."""
    quorum.start()
    _wait(quorum.epoch_commits, timeout_s, "no leader committed", quorum)
    results: list[Round] = []
    for name, sig in SIGNALS:
        for _ in range(rounds):
            time.sleep(settle_s)
            node, epoch, _t = max(quorum.epoch_commits(), key=lambda c: (c[1], c[2]))
            signal_ms = time.time_ns() // 1_000_000
            quorum.signal(node, sig)

            def successor(old: int = epoch) -> tuple[int, int, int] | None:
                newer = [c for c in quorum.epoch_commits() if c[1] > old]
                return min(newer, key=lambda c: c[2]) if newer else None

            found = _wait(successor, timeout_s, f"no new leader committed after {name} of node {node}", quorum)
            assert isinstance(found, tuple)
            new_leader, new_epoch, commit_ms = found
            results.append(Round(name, node, epoch, new_leader, new_epoch, commit_ms - signal_ms))
            restart_ms = time.time_ns() // 1_000_000
            quorum.start(node)

            def follows(n: int = node, t: int = restart_ms) -> bool:
                return quorum.follows_since(n, t)

            _wait(follows, timeout_s, f"restarted node {node} did not follow", quorum)
    return results


# ---------------------------------------------------------------------------------------------
# kwire


class _Observed:
    """What a side's nodes reported so far, read from their output as it grows: each leader's
    first commit ``(node, epoch, wall ms)`` and, per node, the wall ms it took up a follower's
    role. A side's ``_scan`` appends what is new."""

    def __init__(self, node_ids: list[int]) -> None:
        self.commits: list[tuple[int, int, int]] = []
        self.follows: dict[int, list[int]] = {n: [] for n in node_ids}

    def _scan(self) -> None:
        raise NotImplementedError

    def epoch_commits(self) -> list[tuple[int, int, int]]:
        self._scan()
        return list(self.commits)

    def follows_since(self, node_id: int, since_ms: int) -> bool:
        self._scan()
        return any(t >= since_ms for t in self.follows[node_id])


class KwireQuorum(_Observed):
    """Three ``kwire test-raft-server`` nodes (:class:`tools.local_cluster.DevCluster`); their
    JSON reports are read as they are appended (the files span restarts)."""

    def __init__(self, root: Path, linger_ms: int) -> None:
        from tools.local_cluster import DevCluster

        self.cluster = DevCluster.create(
            root, NODES, base_port=None, workload=(THROUGHPUT, RECORD_SIZE), record_type="no-op",
            properties={**QUORUM_TIMEOUTS, "controller.quorum.append.linger.ms": str(linger_ms)},
        )
        super().__init__(list(self.cluster.nodes))
        self.stopped: set[int] = set()
        self.tails = {n: Tail(node.stdout_path) for n, node in self.cluster.nodes.items()}

    def start(self, node_id: int | None = None) -> None:
        self.cluster.start(None if node_id is None else [node_id])
        if node_id is None:
            self.stopped.clear()
        else:
            self.stopped.discard(node_id)

    def signal(self, node_id: int, sig: int) -> None:
        self.stopped.add(node_id)
        self.cluster.kill(node_id, sig)

    def _scan(self) -> None:
        for n, tail in self.tails.items():
            for line in tail.lines():
                if not line.startswith("{"):
                    continue
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill
                    continue
                if event["event"] == "high-watermark":
                    self.commits.append((n, event["epoch"], event["time_ms"]))
                elif event["event"] == "leader" and event.get("leader_id") not in (None, n):
                    self.follows[n].append(event["time_ms"])

    def check_running(self) -> None:
        for node_id, node in self.cluster.nodes.items():
            if node_id not in self.stopped and not node.running:
                raise FailoverError(f"kwire node {node_id} exited: {tail_text(node.log_path, 600)}")

    def close(self) -> None:
        self.cluster.stop()
        for node in self.cluster.nodes.values():
            if node.running:
                self.cluster.kill(node.node_id)


# ---------------------------------------------------------------------------------------------
# Kafka


def kafka_log4j2_config() -> str:
    """A log4j2 properties configuration: warnings on stderr as the compat harness's, plus
    ``LeaderState`` and ``QuorumState`` at INFO, each line starting with wall-clock ms."""
    return "\n".join([
        "status = warn",
        "name = kwire-bench-failover",
        "appender.stderr.type = Console",
        "appender.stderr.name = STDERR",
        "appender.stderr.target = SYSTEM_ERR",
        "appender.stderr.layout.type = PatternLayout",
        "appender.stderr.layout.pattern = %d{UNIX_MILLIS} %p %m (%c)%n",
        "rootLogger.level = WARN",
        "rootLogger.appenderRef.stderr.ref = STDERR",
        "logger.leader.name = org.apache.kafka.raft.LeaderState",
        "logger.leader.level = INFO",
        "logger.quorum.name = org.apache.kafka.raft.QuorumState",
        "logger.quorum.level = INFO",
    ]) + "\n"


def parse_kafka_log(lines: Sequence[str]) -> tuple[list[tuple[int, int]], list[int]]:
    """From one Kafka node's log lines (:func:`kafka_log4j2_config`'s layout): ``(epoch, wall
    ms)`` of each first high watermark of an epoch it led, and the wall ms of each transition to
    follower."""
    commits: list[tuple[int, int]] = []
    follows: list[int] = []
    for line in lines:
        m = _KAFKA_FIRST_HW.match(line)
        if m is not None:
            commits.append((int(m[2]), int(m[1])))
            continue
        m = _KAFKA_FOLLOWER.match(line)
        if m is not None:
            follows.append(int(m[1]))
    return commits, follows


class KafkaQuorum(_Observed):
    """Three Kafka TestRaftServer JVMs of ``version`` (static quorum); ``properties(node id,
    port, voters, data dir)`` is a node's configuration, to which the quorum timeouts are
    added."""

    def __init__(self, root: Path, version: str, properties: Callable[[int, int, str, Path], str]) -> None:
        from kwire.uuid import Uuid
        from tools.local_cluster import free_ports

        self.version = version
        self.root = root
        ports = free_ports(NODES)
        voters = ",".join(f"{i + 1}@localhost:{p}" for i, p in enumerate(ports))
        self.log_config = root / "log4j2.properties"
        root.mkdir(parents=True, exist_ok=True)
        self.log_config.write_text(kafka_log4j2_config())
        self.nodes: dict[int, Path] = {}
        self.directory_ids: dict[int, str] = {}
        for i, port in enumerate(ports):
            node_dir = root / f"node-{i + 1}"
            node_dir.mkdir()
            (node_dir / "server.properties").write_text(
                properties(i + 1, port, voters, node_dir / "data")
                + "".join(f"{k}={v}\n" for k, v in QUORUM_TIMEOUTS.items()))
            self.nodes[i + 1] = node_dir
            self.directory_ids[i + 1] = str(Uuid.random())
        super().__init__(list(self.nodes))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.stopped: set[int] = set()
        self.tails = {n: Tail(node_dir / "stderr.log") for n, node_dir in self.nodes.items()}

    def start(self, node_id: int | None = None) -> None:
        from tools.stock_kafka import start_kafka_class

        for n in ([node_id] if node_id is not None else list(self.nodes)):
            node_dir = self.nodes[n]
            with (node_dir / "stdout.log").open("ab") as out, (node_dir / "stderr.log").open("ab") as err:
                self.procs[n] = start_kafka_class(
                    self.version, "kafka.tools.TestRaftServer",
                    ["--config", str(node_dir / "server.properties"),
                     "--replica-directory-id", self.directory_ids[n],
                     "--throughput", str(THROUGHPUT), "--record-size", str(RECORD_SIZE)],
                    jvm_args=("-Xmx1G", "-Xms1G", f"-Dlog4j2.configurationFile={self.log_config}"),
                    logs_dir=node_dir, stdout=out.fileno(), stderr=err.fileno(),
                )
            self.stopped.discard(n)

    def signal(self, node_id: int, sig: int) -> None:
        self.stopped.add(node_id)
        proc = self.procs[node_id]
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait()

    def _scan(self) -> None:
        for n, tail in self.tails.items():
            commits, follows = parse_kafka_log(tail.lines())
            self.commits += [(n, epoch, t) for epoch, t in commits]
            self.follows[n] += follows

    def check_running(self) -> None:
        for n, proc in self.procs.items():
            if n not in self.stopped and proc.poll() is not None:
                raise FailoverError(f"Kafka {self.version} node {n} exited ({proc.returncode}): "
                                    f"{tail_text(self.nodes[n] / 'stderr.log', 600)}")

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------------------------------------
# both sides


def run_side(make: Callable[[], Quorum], name: str, rounds: int) -> FailoverRow:
    """One side's rounds as a row; a side that fails is a row that says why."""
    row = FailoverRow(name)
    quorum: Quorum | None = None
    try:
        quorum = make()
        row.rounds = run_rounds(quorum, rounds)
    except Exception as exc:  # noqa: BLE001 - a failed run is a row that says why
        row.error = f"{type(exc).__name__}: {exc}"
    finally:
        if quorum is not None:
            quorum.close()
    return row


def format_rows(rows: Sequence[FailoverRow]) -> str:
    """The failover table: per side and signal, the recoveries (ms) and their median; for
    SIGKILL the median's excess over the fetch timeout."""
    lines = [f"failover: {NODES} nodes, {THROUGHPUT:,} rec/s x {RECORD_SIZE} B, fetch timeout "
             f"{FETCH_TIMEOUT_MS} ms; signal -> new leader's first commit (its epoch's first batch "
             f"below the high watermark), ms"]
    for row in rows:
        if row.error is not None:
            lines.append(f"  {row.implementation}: error: {row.error}")
            continue
        for name, _sig in SIGNALS:
            values = row.recoveries(name)
            median = row.median(name)
            if median is None:
                continue
            text = f"  {row.implementation:<12} {name}: median {median:,.0f}  (rounds: {', '.join(map(str, values))})"
            if name == "SIGKILL":
                text += f"; excess over the fetch timeout {median - FETCH_TIMEOUT_MS:,.0f}"
            lines.append(text)
    return "\n".join(lines)
