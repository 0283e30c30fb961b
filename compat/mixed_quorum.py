""":class:`Quorum`: kwire and stock controllers in one static or dynamic quorum, on localhost or
each in a network namespace (``compat/faults/net.py``), started, killed, restarted and asked who
leads; and the timeouts its tests are bounded by. Part of the harness (:mod:`compat.harness`
re-exports it).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import trio

from compat.faults.net import Network
from compat.kafka import logging_config, stop_processes
from compat.metadata_log import batches_below
from compat.processes import (
    CLUSTER_ID,
    format_kwire,
    free_port,
    start_kwire,
    start_stock,
    wait_until,
)
from compat.stock_release import KafkaRelease
from kwire.uuid import Uuid
from tools.client_config import PLAINTEXT, ClientSecurity
from tools.quorum_client import QuorumToolError, QuorumView, describe

__all__ = [
    "ELECTION_BOUND_S",
    "ELECTION_TIMEOUT_MS",
    "FETCH_TIMEOUT_MS",
    "START_TIMEOUT_S",
    "Quorum",
]

# -- quorums of both kinds --------------------------------------------------------------------

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
ELECTION_BOUND_S = (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 6.0
"""How long a :class:`Quorum` may be without a leader: the fetch timeout plus two election
timeouts, plus slack for DescribeQuorum polling on a loaded machine."""
START_TIMEOUT_S = 90.0
"""How long a quorum's first election may take, JVM start-ups included."""


class Quorum:
    """Controllers ``ids`` (kwire for ``kwire_ids``, stock otherwise) under ``root``: node i has
    ``i.properties``, ``data<i>``, ``i.out``. Static: every node a voter. Dynamic: the
    ``voter_ids`` (default all) are the initial controllers, the others are formatted with
    ``--no-initial-controllers`` and start as observers. ``extra`` lines go into every node's
    properties, ``kwire_extra`` lines into the kwire nodes' only; ``env`` maps a node to the
    variables added to its process's environment; ``format_args`` go to every node's ``storage
    format`` (e.g. ``--add-scram``); ``security`` is how the harness's own DescribeQuorum
    connections log in (a secured controller listener). With a ``network``
    (``compat.faults.net.Network`` with hosts ``"1"``, ``"2"``, ... and ``"client"``), node i
    runs on host ``str(i)`` at its address, and the quorum is asked from ``"client"``; else
    every node is on localhost."""

    def __init__(
        self, kafka: KafkaRelease, root: Path, kwire_ids: set[int], dynamic: bool,
        ids: tuple[int, ...] = (1, 2, 3), voter_ids: tuple[int, ...] | None = None,
        extra: str = "", network: Network | None = None, kwire_extra: str = "",
        env: Mapping[int, Mapping[str, str]] | None = None, format_args: Sequence[str] = (),
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.kafka, self.root, self.kwire_ids, self.network = kafka, root, kwire_ids, network
        self.security = security
        self.env = dict(env or {})
        self.dynamic = dynamic
        self.ports = {i: free_port() for i in ids}
        self.hosts = {i: "localhost" if network is None else network.address(str(i)) for i in ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.answers: dict[int, str] = {}
        """node -> what it last answered to :meth:`leader`"""
        self.logging = self._raft_logging(root)
        voter_ids = ids if voter_ids is None else voter_ids
        voters = ",".join(f"{i}@{self.hosts[i]}:{p}" for i, p in self.ports.items())
        bootstrap = self.bootstrap
        initial = ",".join(f"{i}@{self.hosts[i]}:{self.ports[i]}:{Uuid.random()}" for i in voter_ids)
        quorum = f"controller.quorum.bootstrap.servers={bootstrap}" if dynamic else f"controller.quorum.voters={voters}"
        for i, port in self.ports.items():
            format_flags = (
                ["--initial-controllers", initial] if dynamic and i in voter_ids else ["--no-initial-controllers"]
            )
            props = root / f"{i}.properties"
            props.write_text(
                f"process.roles=controller\nnode.id={i}\n{quorum}\n"
                f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://{self.hosts[i]}:{port}\n"
                f"log.dirs={root / f'data{i}'}\n"
                f"controller.quorum.election.timeout.ms={ELECTION_TIMEOUT_MS}\n"
                f"controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n" + extra
                + (kwire_extra if i in kwire_ids else ""),
                encoding="utf-8",
            )
            if i in kwire_ids:
                format_kwire(props, *format_flags, *format_args)
            else:
                kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, *format_flags, *format_args])

    @property
    def bootstrap(self) -> str:
        """Every node's address, for ``--bootstrap-controller``."""
        return ",".join(f"{self.hosts[i]}:{p}" for i, p in self.ports.items())

    def _raft_logging(self, root: Path) -> Path:
        """The harness's stock logging config plus Kafka's raft package at INFO (its role
        transitions), written under ``root``, so a failed run shows how each election went."""
        base = logging_config(self.kafka.version)
        extra = (
            "logger.raft.name = org.apache.kafka.raft\nlogger.raft.level = INFO\n"
            if base.name == "log4j2.properties"
            else "log4j.logger.org.apache.kafka.raft=INFO\n"
        )
        path = root / base.name
        path.write_text(base.read_text(encoding="utf-8") + extra, encoding="utf-8")
        return path

    def _logging_flag(self) -> str:
        if self.logging.name == "log4j2.properties":
            return f"-Dlog4j2.configurationFile={self.logging}"
        return f"-Dlog4j.configuration={self.logging.as_uri()}"

    def report(self) -> str:
        """Each node's kind and state (running or its exit code) and the last role
        transitions, errors and faults in its output."""
        lines: list[str] = []
        for i in self.ports:
            proc = self.procs.get(i)
            state = "not started" if proc is None else "running" if proc.poll() is None else f"exited {proc.returncode}"
            kind = "kwire" if i in self.kwire_ids else f"kafka {self.kafka.version}"
            lines.append(f"--- node {i} ({kind}, {state}) ---")
            out = self.root / f"{i}.out"
            text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
            wanted = [
                line for line in text.splitlines()
                if any(k in line for k in ("kwire.node", "transition", "ERROR", "WARN", "fatal", "Exception", "Traceback"))
                and "DESCRIBE_CLUSTER" not in line and "Direct-to-controller" not in line
            ]
            lines.extend(line[:400] for line in wanted[-30:])
            if proc is not None and proc.poll() is not None:
                lines.append("(last lines of its output)")
                lines.extend(line[:400] for line in text.splitlines()[-15:])
        return "\n".join(lines)

    def start(self, i: int) -> None:
        props = self.root / f"{i}.properties"
        out = self.root / f"{i}.out"
        prefix = [] if self.network is None else self.network.command(str(i), [])
        env = self.env.get(i)
        if i in self.kwire_ids:
            self.procs[i] = start_kwire(props, out, prefix=prefix, env=env)
        else:
            self.procs[i] = start_stock(
                self.kafka, props, out, logs_dir=self.root / f"logs{i}", jvm_args=[self._logging_flag()],
                prefix=prefix, env=env,
            )

    def describe(self, i: int) -> QuorumView:
        """The quorum as asked through node ``i`` (its DescribeCluster names the active
        controller, which answers DescribeQuorum) within 3 s. Raises OSError, QuorumToolError
        or ``trio.TooSlowError``."""
        address = f"{self.hosts[i]}:{self.ports[i]}"
        if self.network is None:
            return trio.run(describe, address, 3.0, self.security)
        return self.network.call("client", lambda: trio.run(describe, address, 3.0, self.security))

    def leader(self, excluded: int | None = None) -> tuple[int, int, int] | None:
        """(leader id, epoch, high watermark) as a live node other than ``excluded`` sees it.
        What each node answered (or the error, and after how long) is kept in ``answers``."""
        for i in self.ports:
            if i == excluded or i not in self.procs or self.procs[i].poll() is not None:
                continue
            asked = time.monotonic()
            try:
                view = self.describe(i)
            except (OSError, QuorumToolError, trio.TooSlowError) as exc:
                self.answers[i] = f"{type(exc).__name__}: {str(exc)[:120]} after {time.monotonic() - asked:.1f} s"
                continue
            p = view.partition
            self.answers[i] = f"leader {p.leader_id} epoch {p.leader_epoch} hw {p.high_watermark}"
            if p.leader_id >= 0 and p.leader_id != excluded:
                return p.leader_id, p.leader_epoch, p.high_watermark
        return None

    def wait_leader(self, timeout_s: float, excluded: int | None = None) -> tuple[int, int, int]:
        """(leader id, epoch, high watermark) once a leader other than ``excluded`` is known;
        the AssertionError after ``timeout_s`` says what each node last answered."""
        self.answers.clear()
        try:
            found = wait_until(f"a leader (other than {excluded})", lambda: self.leader(excluded), timeout_s,
                               interval_s=0.1)
        except AssertionError as exc:
            answers = "; ".join(f"node {i}: {a}" for i, a in sorted(self.answers.items()))
            raise AssertionError(f"{exc} (last answers: {answers or 'none asked'})") from None
        assert found is not None
        return found

    def stop(self) -> None:
        stop_processes(self.procs.values())

    def kill(self, i: int, sig: int = signal.SIGKILL, timeout_s: float = 60.0) -> None:
        """Send ``sig`` to node ``i`` and wait until it has exited."""
        self.procs[i].send_signal(sig)
        self.procs[i].wait(timeout_s)

    def voters_caught_up(self, high_watermark: int, since_ms: int = -1) -> bool:
        """Whether every voter's log end offset, as the leader reports it, reached
        ``high_watermark`` in a fetch at or after ``since_ms`` (wall-clock ms): the leader keeps
        a restarted voter's offset from before its kill until it fetches again, which must not
        count."""
        for i in self.ports:
            if i not in self.procs or self.procs[i].poll() is not None:
                continue
            try:
                view = self.describe(i)
            except (OSError, QuorumToolError, trio.TooSlowError):
                continue
            return all(v.log_end_offset >= high_watermark and v.last_fetch_timestamp >= since_ms
                       for v in view.partition.current_voters)
        return False

    @contextlib.contextmanager
    def running(self, then: Callable[[], None] = lambda: None) -> Iterator[Quorum]:
        """Start every node and wait for a first leader (within :data:`START_TIMEOUT_S`); when
        the block ends, print :meth:`report` if it failed, stop every node, then call ``then``
        (e.g. to print what the test saw, either way)."""
        try:
            for i in self.ports:
                self.start(i)
            self.wait_leader(START_TIMEOUT_S)
            yield self
        except BaseException:
            print(self.report())
            raise
        finally:
            self.stop()
            then()

    def settle_after_faults(self) -> tuple[int, dict[int, bytes]]:
        """Once the faults are over: until the high watermark moves (within 30 s), then
        :meth:`settled_high_watermark`. Returns that high watermark and what each stock node
        has written to its output so far (stopping a JVM still starting can log a fatal fault of
        its own shutdown, which must not count)."""
        _, _, hwm = self.wait_leader(ELECTION_BOUND_S)
        wait_until("the high watermark to move after the faults", lambda: self.wait_leader(ELECTION_BOUND_S)[2],
                   30.0, ok=lambda moved: moved > hwm)
        final_hwm = self.settled_high_watermark()
        return final_hwm, {i: (self.root / f"{i}.out").read_bytes() for i in set(self.ports) - self.kwire_ids}

    def assert_agreed(self, final_hwm: int, logged: dict[int, bytes]) -> None:
        """After :meth:`stop`: no stock node logged a fatal fault or an IllegalStateException in
        ``logged`` (:meth:`settle_after_faults`), and every node's log holds the same batches,
        byte for byte, below ``final_hwm``."""
        for raw in logged.values():
            text = raw.decode(errors="replace")
            assert "fatal fault" not in text and "IllegalStateException" not in text, text[-3000:]
        logs = {i: batches_below(self.root / f"data{i}", final_hwm) for i in self.ports}
        first = logs[min(logs)]
        assert first and all(log == first for log in logs.values()), {i: len(b) for i, b in logs.items()}

    def settled_high_watermark(self) -> int:
        """The high watermark once every voter has reached it in a fetch made after this call
        began (within 60 s), after checking that no process died."""
        since_ms = time.time_ns() // 1_000_000
        dead = {i: p.returncode for i, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"processes died: {dead}"
        _, _, hwm = self.wait_leader(ELECTION_BOUND_S)
        wait_until(f"every voter at offset {hwm}", lambda: self.voters_caught_up(hwm, since_ms), 60.0)
        return hwm
