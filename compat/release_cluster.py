"""Stock brokers of any release of the matrix on three kwire controllers, and the checks the
release matrix runs on them (``compat/test_release_matrix.py``, ``make nightly``) and the mixed
release cluster of ``compat/test_mixed_releases.py`` (``make test``).

:class:`ReleaseCluster`: three kwire controllers in a static quorum (``controller.quorum.voters``,
which every release since 3.3 can name; KIP-853's dynamic quorums start at 3.9) formatted with
``--release-version`` at one metadata.version, and stock brokers (ids 101, 102, ...) each of its
own release, formatted by that release's ``kafka-storage``. :class:`Checks` runs named checks in
order, stops at the first that fails, and keeps each one's outcome for a release x check
table (:func:`table`).
"""

from __future__ import annotations

import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from compat.clients import partitions_of, produce, read_all, records
from compat.harness import (
    CLUSTER_ID,
    ELECTION_BOUND_S,
    START_TIMEOUT_S,
    KafkaRelease,
    Quorum,
    free_port,
    wait_until,
)
from compat.kafka import release_facts, require_release
from tools.quorum_client import QuorumView, describe_node
from tools.stock_brokers import StockBrokers

__all__ = [
    "BROKER_START_TIMEOUT_S", "FENCE_BOUND_S", "ISR_BOUND_S", "Checks", "Outcome", "ReleaseCluster",
    "consumed_exactly", "facts_line", "produce", "table",
]

SESSION_TIMEOUT_MS = 9000
"""``broker.session.timeout.ms``, Kafka's default."""
FENCE_BOUND_S = (SESSION_TIMEOUT_MS + SESSION_TIMEOUT_MS // 8) / 1000 + 5.0
"""How long the other brokers may still list a killed broker: its session, one period of the
controller's expiry check, the fencing record's way to the brokers and a margin."""
BROKER_START_TIMEOUT_S = 120.0
"""How long stock brokers may take to start, register and be unfenced (JVM start-up included,
three JVMs at once on a loaded 2-core machine)."""
ISR_BOUND_S = 90.0
"""How long a restarted broker may take to be back in every ISR (it catches up first)."""


class _StaticQuorum(Quorum):
    """A :class:`Quorum` asked with DescribeQuorum sent to each controller itself
    (``tools.quorum_client.describe_node``): below metadata.version 3.7-IV0 controllers refuse the
    DescribeCluster the harness otherwise asks first."""

    def describe(self, i: int) -> QuorumView:
        return trio.run(describe_node, f"{self.hosts[i]}:{self.ports[i]}", 3.0)


class ReleaseCluster:
    """Three kwire controllers (voters 1-3 under ``root/controllers``) formatted at
    ``metadata_version``, and stock brokers ``brokers`` (broker id -> release) under
    ``root/brokers-<release>``; with ``kwire_controllers`` False, stock controllers of the newest
    of those releases (or of ``controller_release``) instead (the control of a finding). Requires every release (fetched on demand, see
    :func:`compat.kafka.require_release`). Use as a context manager: everything it started is
    stopped when the block ends, and a failed block prints each node's last output."""

    def __init__(self, root: Path, metadata_version: str, brokers: Mapping[int, str], *,
                 kwire_controllers: bool = True, controller_release: str | None = None) -> None:
        for version in set(brokers.values()):
            require_release(version)
        self.releases = {i: KafkaRelease(v) for i, v in brokers.items()}
        newest = max(self.releases.values(), key=lambda k: tuple(map(int, k.version.split("."))))
        if controller_release is not None:  # stock controllers of a release no broker starts at
            require_release(controller_release)
            newest = KafkaRelease(controller_release)
        self.root = root
        (root / "controllers").mkdir(parents=True)
        # stock controllers (of the newest broker release) only as the control of a finding
        self.quorum = _StaticQuorum(newest, root / "controllers", {1, 2, 3} if kwire_controllers else set(),
                                    dynamic=False,
                             format_args=["--release-version", metadata_version])
        voters = ",".join(f"{i}@localhost:{p}" for i, p in self.quorum.ports.items())
        self.groups: dict[str, StockBrokers] = {}
        for version in sorted(set(brokers.values())):
            ids = sorted(i for i, v in brokers.items() if v == version)
            self.groups[version] = StockBrokers.create(
                root / f"brokers-{version}", version, cluster_id=CLUSTER_ID, bootstrap_controllers=self.quorum.bootstrap,
                ports={i: free_port() for i in ids}, quorum_voters=voters,
            )

    def __enter__(self) -> ReleaseCluster:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if kind is not None:
            print(self.report())
        try:
            for group in self.groups.values():
                group.stop()
        finally:
            self.quorum.stop()

    @property
    def broker_ids(self) -> set[int]:
        return set(self.releases)

    @property
    def bootstrap(self) -> str:
        """Every broker's client listener, ``host:port,...``."""
        return ",".join(g.bootstrap_servers for g in self.groups.values())

    def group_of(self, broker_id: int) -> StockBrokers:
        return self.groups[self.releases[broker_id].version]

    def broker_address(self, broker_id: int) -> str:
        group = self.group_of(broker_id)
        return f"{group.host}:{group.nodes[broker_id].port}"

    def start(self) -> None:
        """Start the controllers, wait for a leader, then start every broker."""
        for i in self.quorum.ports:
            self.quorum.start(i)
        self.quorum.wait_leader(START_TIMEOUT_S)
        for group in self.groups.values():
            group.start()

    def wait_listed(self, expected: set[int], timeout_s: float) -> None:
        """Until every running broker lists exactly ``expected`` as its unfenced brokers."""
        deadline = time.monotonic() + timeout_s
        for group in self.groups.values():
            if any(n.running for n in group.nodes.values()):
                group.wait_listed(expected, max(1.0, deadline - time.monotonic()))

    def report(self) -> str:
        return "\n".join([self.quorum.report(), *(g.report() for g in self.groups.values())])

    # ------------------------------------------------------------------ steps

    def create_topic(self, kafka: KafkaRelease, topic: str, partitions: int = 3) -> dict[int, tuple[int, list[int], list[int]]]:
        """``kafka-topics --create`` of release ``kafka`` through a broker, replication factor
        3; then until every partition has a leader and all three replicas in its ISR (within
        :data:`ISR_BOUND_S`). Returns partition -> (leader, replicas, ISR)."""
        out = kafka.run_tool("topics", [
            "--bootstrap-server", self.bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", "3",
        ]).stdout
        assert f"Created topic {topic}." in out, out
        return self.wait_in_sync(topic, self.broker_ids, partitions)

    def wait_in_sync(self, topic: str, replicas: set[int], partitions: int) -> dict[int, tuple[int, list[int], list[int]]]:
        """Until each of ``partitions`` partitions of ``topic`` has a leader and exactly
        ``replicas`` in its ISR (within :data:`ISR_BOUND_S`)."""
        def described() -> dict[int, tuple[int, list[int], list[int]]]:
            try:
                return partitions_of(self.bootstrap, topic)
            except Exception:  # a broker still starting, a topic not yet known: ask again
                return {}

        return wait_until(
            f"{topic}: {partitions} partitions, each led and {sorted(replicas)} in sync", described, ISR_BOUND_S,
            ok=lambda p: len(p) == partitions
            and all(leader >= 0 and set(isr) == replicas for leader, _, isr in p.values()),
            interval_s=0.5,
        )

    def quorum_status(self, kafka: KafkaRelease, *, through_controller: bool) -> dict[str, str]:
        """Stock ``kafka-metadata-quorum describe --status`` of release ``kafka``, asked through
        broker 101 (``--bootstrap-server``, which forwards DescribeQuorum to the active
        controller) or through the controllers (``--bootstrap-controller``, KIP-919)."""
        target = (["--bootstrap-controller", self.quorum.bootstrap] if through_controller
                  else ["--bootstrap-server", self.broker_address(min(self.broker_ids))])
        out = kafka.run_tool("metadata-quorum", [*target, "describe", "--status"]).stdout
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}

    def quorum_status_diagnosis(self, kafka: KafkaRelease, *, through_controller: bool) -> str:
        """After a failed :meth:`quorum_status`: what the broker asked answers to kwire's own
        DescribeQuorum, and what the same stock tool prints when run again in a JVM of its own
        and in the shared tool runner, to tell a broker's or controller's fault from the
        client's."""
        from tools.quorum_client import describe_node

        notes = []
        for i in sorted(self.broker_ids)[:1]:
            try:
                view = trio.run(describe_node, self.broker_address(i), 10.0)
                notes.append(f"DescribeQuorum to broker {i}: leader {view.partition.leader_id} "
                             f"epoch {view.partition.leader_epoch}")
            except Exception as exc:
                notes.append(f"DescribeQuorum to broker {i}: {exc!r}"[:300])
        notes.append(f"controller connections: {self._controller_connections()}")
        target = (["--bootstrap-controller", self.quorum.bootstrap] if through_controller
                  else ["--bootstrap-server", self.broker_address(min(self.broker_ids))])
        for how, extra in (("own JVM", {"env": {"KWIRE_DIAGNOSIS": "1"}}), ("tool runner", {})):
            started = time.monotonic()
            done = kafka.run_tool("metadata-quorum", [*target, "describe", "--status"], check=False,
                                  **extra)  # type: ignore[arg-type]
            first = (done.stderr.strip().splitlines() or [""])[0][:200]
            notes.append(f"again in {how}: exit {done.returncode} after {time.monotonic() - started:.1f} s"
                         + (f" ({first})" if done.returncode else ""))
        return "; ".join(notes)

    def _controller_connections(self) -> dict[int, list[int]]:
        """Broker id -> the controllers its established TCP connections lead to (``ss -tnp``),
        or {} where ``ss`` cannot tell."""
        import re
        import subprocess

        try:
            out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True,
                                 timeout=10, check=False).stdout
        except OSError:
            return {}
        by_port = {port: i for i, port in self.quorum.ports.items()}
        found: dict[int, list[int]] = {}
        for group in self.groups.values():
            for broker_id, node in group.nodes.items():
                if node.process is None:
                    continue
                for line in out.splitlines():
                    fields = line.split()
                    if len(fields) >= 4 and f"pid={node.process.pid}," in line:
                        port = int(re.sub(r".*:", "", fields[3]))
                        if port in by_port:
                            found.setdefault(broker_id, []).append(by_port[port])
        return {b: sorted(ids) for b, ids in sorted(found.items())}

    def restart_on(self, broker_id: int, version: str, stop_timeout_s: float = 60.0) -> None:
        """One step of a rolling upgrade: broker ``broker_id`` is stopped with SIGTERM (a
        controlled shutdown: its leaderships move first; SIGKILL after ``stop_timeout_s``) and
        started again on release ``version``, with the same ``server.properties``, data
        directory, node id and client port. It then moves to that release's group (under
        ``root/brokers-<version>``). The caller waits for it to be listed and in sync."""
        from tools.local_cluster import stop_processes

        require_release(version)
        old = self.group_of(broker_id)
        node = old.nodes.pop(broker_id)
        stop_processes([node.process], timeout_s=stop_timeout_s)
        if not old.nodes:
            del self.groups[old.version]
        if version not in self.groups:
            (self.root / f"brokers-{version}").mkdir(exist_ok=True)
            self.groups[version] = StockBrokers(self.root / f"brokers-{version}", version, [], old.host)
        self.groups[version].nodes[broker_id] = node
        self.releases[broker_id] = KafkaRelease(version)
        self.groups[version].start([broker_id])

    def kill_active_controller(self) -> str:
        """kill -9 of the active controller; until another leads. Returns what happened."""
        leader, epoch, _ = self.quorum.wait_leader(ELECTION_BOUND_S)
        killed = time.monotonic()
        self.quorum.kill(leader, signal.SIGKILL)
        new_leader, new_epoch, _ = self.quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
        self.quorum.start(leader)
        return (f"controller {leader} (epoch {epoch}) killed, {new_leader} leads epoch {new_epoch} "
                f"after {time.monotonic() - killed:.1f} s")

    def kill_broker_and_return(self, victim: int, topics: Mapping[str, int]) -> str:
        """kill -9 of broker ``victim``: the others stop listing it and every partition of
        ``topics`` (topic -> partition count) is led by another broker without it in the ISR;
        then it is restarted, listed again and back in every ISR. Returns the timings."""
        group = self.group_of(victim)
        killed = time.monotonic()
        group.kill(victim, signal.SIGKILL)
        others = self.broker_ids - {victim}
        self.wait_listed(others, FENCE_BOUND_S)
        fenced = time.monotonic() - killed
        for topic, count in topics.items():
            self.wait_in_sync(topic, others, count)
        moved = time.monotonic() - killed
        group.start([victim])
        self.wait_listed(self.broker_ids, BROKER_START_TIMEOUT_S)
        for topic, count in topics.items():
            self.wait_in_sync(topic, self.broker_ids, count)
        return (f"broker {victim} killed: fenced after {fenced:.1f} s, out of every ISR after {moved:.1f} s, "
                f"restarted and back in every ISR after {time.monotonic() - killed:.1f} s")


def consumed_exactly(bootstrap: str, topic: str, count: int) -> None:
    """``records(topic, count)`` read back, each exactly once (an AssertionError says what was
    missing or duplicated)."""
    back = read_all(bootstrap, topic, count)
    expected = Counter(records(topic, count))
    missing = set(expected) - set(back)
    duplicated = [v for v, n in back.items() if n > 1]
    assert back == expected, f"{topic}: {len(missing)} missing (e.g. {sorted(missing)[:3]}), {len(duplicated)} duplicated"


# -- checks and their table -------------------------------------------------------------------

@dataclass
class Outcome:
    """One check's result: ``"ok"``, ``"FAIL"``, ``"n/a"`` (the release cannot do it) or
    ``"not run"`` (an earlier check failed); ``detail`` says what was seen or why."""

    status: str
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Checks:
    """Named checks of one release, run in order by :meth:`run` until one fails."""

    release: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failed: str | None = None

    def run(self, name: str, check: Callable[[], str | None], *, even_after: str | None = None) -> None:
        """Run ``check`` (it returns a detail line or None, and raises when it fails) unless an
        earlier check failed -- other than ``even_after``, a check it does not depend on."""
        if self.failed is not None and self.failed != even_after:
            self.outcomes[name] = Outcome("not run", f"after {self.failed} failed")
            return
        started = time.monotonic()
        try:
            detail = check() or ""
        except Exception as exc:
            self.failed = self.failed or name
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            self.outcomes[name] = Outcome("FAIL", last[:2000], time.monotonic() - started)
            return
        self.outcomes[name] = Outcome("ok", detail, time.monotonic() - started)

    def not_applicable(self, name: str, why: str) -> None:
        self.outcomes[name] = Outcome("n/a", why)


def table(rows: Sequence[Checks], columns: Sequence[str]) -> str:
    """A release x check table in Markdown, then each failure's detail."""
    lines = ["| release | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for row in rows:
        cells = [row.outcomes.get(c, Outcome("not run")).status for c in columns]
        lines.append(f"| {row.release} | " + " | ".join(cells) + " |")
    for row in rows:
        for name, outcome in row.outcomes.items():
            if outcome.status == "FAIL":
                lines.append(f"{row.release} {name}: {outcome.detail}")
    return "\n".join(lines)


def facts_line(version: str) -> str:
    """The facts of a release the checks go by, for the test's output."""
    facts = release_facts(version)
    return (f"Kafka {version}: metadata.version {facts.metadata_version}, "
            f"{'dynamic or static' if facts.dynamic_quorum else 'static'} quorum, "
            f"--bootstrap-controller {'yes' if facts.bootstrap_controller else 'no'}, "
            f"{'log4j2' if facts.log4j2 else 'log4j 1.x'}")
