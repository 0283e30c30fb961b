"""Stock Kafka brokers on a kwire controller quorum (KIP-631), for each pinned release.

Three kwire controllers (a dynamic quorum) and three stock brokers (ids 101-103, formatted by
the stock tool, ``controller.quorum.bootstrap.servers`` naming the controllers). Asserted:

* every broker registers, is unfenced and reaches RUNNING: its client listener answers, and
  the Metadata response of every broker lists all three (a broker lists unfenced brokers only);
* stock ``kafka-metadata-quorum --bootstrap-server <broker> describe --status``, which the
  broker forwards to the active controller in an Envelope (KIP-590), names kwire's leader;
* kill -9 of a broker: the other brokers stop listing it within ``broker.session.timeout.ms``
  plus the controller's fencing period (``broker.session.timeout.ms`` / 8) and a margin;
  restarted, it registers a new incarnation and is listed again;
* kill -9 of the active kwire controller: a new one is elected, no broker stops or is fenced
  (the new active controller gives every broker a fresh session), and the brokers list each
  other again once the killed controller is back.

Cost per release: three broker JVMs (started together) and three kwire processes, ~40 s.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from compat.conftest import KafkaRelease
from compat.kafka import stop_processes
from compat.test_mixed_quorum import ELECTION_BOUND_S, START_TIMEOUT_S, Quorum
from compat.test_storage_interop import CLUSTER_ID, _free_port
from messages.generated.metadata_request import MetadataRequest
from server.net.client import KafkaConnectionError, open_connection
from tools.stock_kafka import logging_config

pytestmark = pytest.mark.compat

BROKER_IDS = (101, 102, 103)
SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms, Kafka's default
FENCE_BOUND_S = (SESSION_TIMEOUT_MS + SESSION_TIMEOUT_MS // 8) / 1000 + 3.0
"""Session timeout, plus one period of the controller's expiry check, plus the time for the
fencing record to reach the brokers (a margin for a loaded machine)."""
BROKER_START_TIMEOUT_S = 90.0


class Brokers:
    """Stock brokers ``BROKER_IDS`` of ``kafka`` under ``root`` for the controllers at
    ``bootstrap``: broker i has ``broker<i>.properties``, ``broker<i>`` (its log dir) and
    ``broker<i>.out`` (its output, the lifecycle at INFO)."""

    def __init__(self, kafka: KafkaRelease, root: Path, bootstrap: str) -> None:
        self.kafka, self.root = kafka, root
        self.ports = {i: _free_port() for i in BROKER_IDS}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        base = logging_config(kafka.version)
        if base.name == "log4j2.properties":
            extra = "".join(
                f"logger.l{n}.name = {name}\nlogger.l{n}.level = INFO\n"
                for n, name in enumerate(("org.apache.kafka.server.BrokerLifecycleManager", "kafka.server.BrokerServer"))
            )
            self.logging_flag = f"-Dlog4j2.configurationFile={root / base.name}"
        else:
            extra = "log4j.logger.kafka.server.BrokerLifecycleManager=INFO\nlog4j.logger.kafka.server.BrokerServer=INFO\n"
            self.logging_flag = f"-Dlog4j.configuration={(root / base.name).as_uri()}"
        (root / base.name).write_text(base.read_text(encoding="utf-8") + extra, encoding="utf-8")
        for i, port in self.ports.items():
            props = root / f"broker{i}.properties"
            props.write_text(
                f"process.roles=broker\nnode.id={i}\ncontroller.quorum.bootstrap.servers={bootstrap}\n"
                f"controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://localhost:{port}\n"
                "inter.broker.listener.name=PLAINTEXT\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                f"log.dirs={root / f'broker{i}'}\n",
                encoding="utf-8",
            )
            kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props])

    def start(self, i: int) -> None:
        with open(self.root / f"broker{i}.out", "ab") as out:
            self.procs[i] = self.kafka.start(
                "kafka.Kafka", [self.root / f"broker{i}.properties"], logs_dir=self.root / f"logs{i}",
                jvm_args=[self.logging_flag], stdout=out.fileno(), stderr=out.fileno(),  # type: ignore[arg-type]
            )

    def alive(self, i: int) -> bool:
        return i in self.procs and self.procs[i].poll() is None

    def listed_by(self, i: int) -> set[int] | None:
        """The brokers broker ``i``'s Metadata response lists (its unfenced brokers), None
        while it does not answer."""
        try:
            response = trio.run(_metadata, self.ports[i])
        except (OSError, KafkaConnectionError, trio.TooSlowError):
            return None
        return {b.node_id for b in response.brokers}

    def wait_listed(self, expected: set[int], timeout_s: float, what: str) -> float:
        """Until every live broker lists exactly ``expected``; returns the seconds it took."""
        started = time.monotonic()
        while True:
            views = {i: self.listed_by(i) for i in BROKER_IDS if self.alive(i)}
            if views and all(v == expected for v in views.values()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise AssertionError(f"{what}: brokers list {views}, expected {sorted(expected)}\n{self.report()}")
            time.sleep(0.2)  # poll interval

    def report(self) -> str:
        lines = []
        for i in BROKER_IDS:
            proc = self.procs.get(i)
            state = "not started" if proc is None else "running" if proc.poll() is None else f"exited {proc.returncode}"
            lines.append(f"--- broker {i} ({state}) ---")
            out = self.root / f"broker{i}.out"
            text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
            lines.extend(line[:400] for line in text.splitlines()[-25:])
        return "\n".join(lines)

    def stop(self) -> None:
        stop_processes(self.procs.values())


async def _metadata(port: int) -> Any:
    with trio.fail_after(10):
        async with await open_connection("localhost", port, "stock-brokers-test", request_timeout_ms=5_000) as conn:
            return await conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False))


def test_stock_brokers_run_on_a_kwire_quorum(kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(kafka, tmp_path, {1, 2, 3}, dynamic=True)
    bootstrap = ",".join(f"localhost:{p}" for p in quorum.ports.values())
    brokers = Brokers(kafka, tmp_path, bootstrap)
    try:
        for i in quorum.ports:
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        for i in BROKER_IDS:
            brokers.start(i)
        brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S, "brokers starting")
        for i in BROKER_IDS:
            text = (tmp_path / f"broker{i}.out").read_text(encoding="utf-8", errors="replace")
            assert "Transitioning from RECOVERY to RUNNING" in text, brokers.report()
        leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S)
        status = kafka.run_tool(
            "metadata-quorum", ["--bootstrap-server", f"localhost:{brokers.ports[BROKER_IDS[0]]}", "describe", "--status"]
        ).stdout
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert (fields["LeaderId"].strip(), fields["LeaderEpoch"].strip()) == (str(leader), str(epoch)), status

        # a broker killed: fenced once its session expires, back after a restart
        victim = BROKER_IDS[-1]
        brokers.procs[victim].send_signal(signal.SIGKILL)
        brokers.procs[victim].wait(30)
        fenced_after = brokers.wait_listed(set(BROKER_IDS) - {victim}, FENCE_BOUND_S, "the killed broker fenced")
        print(f"broker {victim} fenced {fenced_after:.1f} s after kill -9")
        brokers.start(victim)
        brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S, "the restarted broker back")

        # the active controller killed: the brokers stay up and registered
        leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
        quorum.procs[leader].send_signal(signal.SIGKILL)
        quorum.procs[leader].wait(30)
        quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
        quorum.start(leader)
        brokers.wait_listed(set(BROKER_IDS), FENCE_BOUND_S, "after a controller failover")
        # past one more session timeout: no broker lost its session to the failover
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 1)
        brokers.wait_listed(set(BROKER_IDS), 1.0, "a session after the failover")
        assert all(brokers.alive(i) for i in BROKER_IDS), brokers.report()
        assert all(p.poll() is None for p in quorum.procs.values()), quorum.report()
    except BaseException:
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        brokers.stop()
        quorum.stop()
