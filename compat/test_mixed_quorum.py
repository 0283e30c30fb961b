"""Mixed quorums: kwire nodes and stock controllers of each pinned release in one quorum.

Three voters, static (``controller.quorum.voters``, kraft.version 0; each directory formatted
by its own kind's ``storage format --no-initial-controllers``) or dynamic (KIP-853: every
directory formatted with the same ``--initial-controllers``, the nodes configured with
``controller.quorum.bootstrap.servers``): one kwire node and two stock controllers, then two
kwire nodes and one stock controller. Each leader appends a NoOpRecord every
``LOAD_INTERVAL_MS`` (``metadata.max.idle.interval.ms``, Kafka's 500 ms cut to a steady 10
records a second). The leader is stopped ``LEADER_CHANGES`` times, by SIGKILL and SIGTERM in
turn (a graceful leader resigns and sends EndQuorumEpoch), and restarted each time. Asserted:

* after every kill another voter leads within ``ELECTION_BOUND_S`` (the fetch timeout plus two
  election timeouts, plus slack for DescribeQuorum polling on a loaded machine); each kill waits
  until every voter is up and has reached the high watermark, so that the survivors are a
  fetching majority (a JVM restarted after the previous kill can take seconds to start);
* no process dies but the killed ones, and no stock controller logs a fatal fault while the
  quorum runs (a Vote, UpdateRaftVoter or Fetch answer it cannot take; a log it cannot load);
* the quorum's high watermark keeps moving after the last restart;
* once every voter has caught up and all are stopped, their logs hold the same batches, byte
  for byte, below the final high watermark;
* in a soak (``make nightly``), kwire and stock nodes each led at least three times.

Who wins each election is up to the race of timeouts; the leaders are printed. ``make test``
runs 3.9.2 static with two kwire nodes and 4.4.0 dynamic with one; ``make nightly`` runs both
modes and both mixes of both releases. Cost:
three processes (one or two JVMs) for ~20 s per configuration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from compat.conftest import KafkaRelease
from compat.kafka import stop_processes
from compat.test_storage_interop import CLUSTER_ID, PARTITION, _free_port, _log_batches
from kwire.uuid import Uuid
from tools.quorum_client import QuorumToolError, describe
from tools.stock_kafka import logging_config

pytestmark = pytest.mark.compat

REPO_DIR = Path(__file__).resolve().parent.parent
LEADER_CHANGES = int(os.environ.get("KWIRE_MIXED_LEADER_CHANGES", "3"))
"""Kills per configuration: 3 in ``make test`` (12 over the four configurations it runs), 100 in
``make nightly`` (over all eight)."""
SOAK_LEADER_CHANGES = 30
"""From this many kills on, kwire and stock nodes must each have led at least 3 times."""
ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
ELECTION_BOUND_S = (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 6.0
START_TIMEOUT_S = 90.0
LOAD_INTERVAL_MS = 100


class Quorum:
    """Controllers ``ids`` (kwire for ``kwire_ids``, stock otherwise) under ``root``: node i has
    ``i.properties``, ``data<i>``, ``i.out``. Static: every node a voter. Dynamic: the
    ``voter_ids`` (default all) are the initial controllers, the others are formatted with
    ``--no-initial-controllers`` and start as observers. ``extra`` lines go into every node's
    properties."""

    def __init__(
        self, kafka: KafkaRelease, root: Path, kwire_ids: set[int], dynamic: bool,
        ids: tuple[int, ...] = (1, 2, 3), voter_ids: tuple[int, ...] | None = None,
        extra: str = "",
    ) -> None:
        self.kafka, self.root, self.kwire_ids = kafka, root, kwire_ids
        self.ports = {i: _free_port() for i in ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logging = self._raft_logging(root)
        voter_ids = ids if voter_ids is None else voter_ids
        voters = ",".join(f"{i}@localhost:{p}" for i, p in self.ports.items())
        bootstrap = ",".join(f"localhost:{p}" for p in self.ports.values())
        initial = ",".join(f"{i}@localhost:{self.ports[i]}:{Uuid.random()}" for i in voter_ids)
        quorum = f"controller.quorum.bootstrap.servers={bootstrap}" if dynamic else f"controller.quorum.voters={voters}"
        for i, port in self.ports.items():
            format_flags = (
                ["--initial-controllers", initial] if dynamic and i in voter_ids else ["--no-initial-controllers"]
            )
            (root / f"{i}.properties").write_text(
                f"process.roles=controller\nnode.id={i}\n{quorum}\n"
                f"controller.listener.names=CONTROLLER\nlisteners=CONTROLLER://localhost:{port}\n"
                f"log.dirs={root / f'data{i}'}\n"
                f"controller.quorum.election.timeout.ms={ELECTION_TIMEOUT_MS}\n"
                f"controller.quorum.fetch.timeout.ms={FETCH_TIMEOUT_MS}\n" + extra,
                encoding="utf-8",
            )
            props = root / f"{i}.properties"
            if i in kwire_ids:
                subprocess.run(
                    [sys.executable, "-m", "tools.cli", "storage", "format", "-c", str(props), "-t", CLUSTER_ID,
                     *format_flags], cwd=REPO_DIR, check=True, capture_output=True,
                )
            else:
                kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, *format_flags])

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
        with open(self.root / f"{i}.out", "ab") as out:
            if i in self.kwire_ids:
                self.procs[i] = subprocess.Popen(
                    [sys.executable, "-m", "tools.cli", "server-start", str(props)], cwd=REPO_DIR,
                    stdout=out, stderr=subprocess.STDOUT,
                )
            else:
                self.procs[i] = self.kafka.start(
                    "kafka.Kafka", [props], logs_dir=self.root / f"logs{i}", jvm_args=[self._logging_flag()],
                    stdout=out.fileno(), stderr=out.fileno(),  # type: ignore[arg-type]
                )

    def leader(self, excluded: int | None = None) -> tuple[int, int, int] | None:
        """(leader id, epoch, high watermark) as a live node other than ``excluded`` sees it."""
        for i, port in self.ports.items():
            if i == excluded or i not in self.procs or self.procs[i].poll() is not None:
                continue
            try:
                view = trio.run(describe, f"localhost:{port}", 3.0)
            except (OSError, QuorumToolError, trio.TooSlowError):
                continue
            p = view.partition
            if p.leader_id >= 0 and p.leader_id != excluded:
                return p.leader_id, p.leader_epoch, p.high_watermark
        return None

    def wait_leader(self, timeout_s: float, excluded: int | None = None) -> tuple[int, int, int]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.leader(excluded)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader (other than {excluded}) within {timeout_s} s")
            time.sleep(0.1)  # poll interval

    def stop(self) -> None:
        stop_processes(self.procs.values())


    def voters_caught_up(self, high_watermark: int) -> bool:
        """Whether every voter's log end offset, as the leader reports it, reached
        ``high_watermark``."""
        for i, port in self.ports.items():
            if i not in self.procs or self.procs[i].poll() is not None:
                continue
            try:
                view = trio.run(describe, f"localhost:{port}", 3.0)
            except (OSError, QuorumToolError, trio.TooSlowError):
                continue
            return all(v.log_end_offset >= high_watermark for v in view.partition.current_voters)
        return False


    def settled_high_watermark(self) -> int:
        """The high watermark once every voter has reached it (within 60 s), after checking
        that no process died."""
        dead = {i: p.returncode for i, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"processes died: {dead}"
        _, _, hwm = self.wait_leader(ELECTION_BOUND_S)
        deadline = time.monotonic() + 60
        while not self.voters_caught_up(hwm):
            assert time.monotonic() < deadline, f"the voters did not all reach offset {hwm}"
            time.sleep(0.2)  # poll interval
        return hwm


def _batches_below(data: Path, high_watermark: int) -> list[bytes]:
    return [b.to_bytes() for b in _log_batches(data / PARTITION) if b.last_offset < high_watermark]


ALL_MODES = os.environ.get("KWIRE_MIXED_ALL_MODES") == "1" or LEADER_CHANGES >= SOAK_LEADER_CHANGES
"""``make test`` runs each release in its own mode: 3.9.2 static (``controller.quorum.voters``),
4.x dynamic (KIP-853), each with one mix of nodes; ``make nightly`` (or
``KWIRE_MIXED_ALL_MODES=1``) runs both modes and both mixes on both releases."""


def test_leaders_killed_in_a_mixed_quorum(kafka: KafkaRelease, tmp_path: Path) -> None:
    """Each mix (one kwire node and two stock, two kwire and one stock) in each mode; ``make
    test`` runs one mix per release (3.9.2: two kwire nodes, static; 4.x: one kwire node,
    dynamic), ``make nightly`` all of them."""
    modes = [False, True] if ALL_MODES else [kafka.at_least(4, 0)]
    mixes = [{1}, {1, 2}] if ALL_MODES else [{1} if kafka.at_least(4, 0) else {1, 2}]
    for dynamic in modes:
        for kwire_ids in mixes:
            name = f"{'dynamic' if dynamic else 'static'}-{len(kwire_ids)}-kwire"
            _leaders_killed(kafka, tmp_path / name, kwire_ids, dynamic)


def _leaders_killed(kafka: KafkaRelease, tmp_path: Path, kwire_ids: set[int], dynamic: bool) -> None:
    tmp_path.mkdir()
    quorum = Quorum(kafka, tmp_path, kwire_ids, dynamic, extra=f"metadata.max.idle.interval.ms={LOAD_INTERVAL_MS}\n")
    leaders: list[tuple[int, float]] = []
    try:
        for i in (1, 2, 3):
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        for change in range(LEADER_CHANGES):
            # the bound holds for a quorum whose other voters are up and fetching: a JVM still
            # starting (at first, or restarted after the last kill) is not yet one of them
            quorum.settled_high_watermark()
            leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
            killed_at = time.monotonic()
            quorum.procs[leader].send_signal(signal.SIGKILL if change % 2 == 0 else signal.SIGTERM)
            quorum.procs[leader].wait(60)
            new_leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
            leaders.append((new_leader, round(time.monotonic() - killed_at, 1)))
            quorum.start(leader)
        _, _, hwm = quorum.wait_leader(ELECTION_BOUND_S)
        deadline = time.monotonic() + 30
        while (quorum.wait_leader(ELECTION_BOUND_S)[2]) <= hwm:
            assert time.monotonic() < deadline, "the high watermark stopped after the last restart"
            time.sleep(0.2)  # poll interval
        final_hwm = quorum.settled_high_watermark()
        # what the stock nodes logged while the quorum ran; stopping a JVM that is still
        # starting (the last one restarted) can log a fatal fault of its own shutdown
        logged = {i: (tmp_path / f"{i}.out").read_bytes() for i in set(quorum.ports) - kwire_ids}
    except BaseException:
        print(quorum.report())
        raise
    finally:
        quorum.stop()
        print("leaders after each kill (id, seconds):", leaders)
    for raw in logged.values():
        text = raw.decode(errors="replace")
        assert "fatal fault" not in text and "IllegalStateException" not in text, text[-3000:]
    logs = {i: _batches_below(tmp_path / f"data{i}", final_hwm) for i in quorum.ports}
    assert logs[1] and sum(len(b) for b in logs[1]) > 0
    assert logs[1] == logs[2] == logs[3], {i: len(b) for i, b in logs.items()}
    if LEADER_CHANGES >= SOAK_LEADER_CHANGES:
        # over a soak both kinds must win elections: neither side loses every race
        kwire_wins = sum(1 for leader, _ in leaders if leader in kwire_ids)
        assert kwire_wins >= 3 and len(leaders) - kwire_wins >= 3, leaders
