"""Stock Kafka brokers (from the pinned jars, ``make compat-jars``) on a kwire controller quorum:
:class:`StockBrokers`, which ``kwire dev-cluster --brokers N`` runs and the compat tests drive.

``StockBrokers.create(root, version, bootstrap_controllers, ids)`` gives each broker ``i`` a
directory ``root/broker-<i>/`` holding ``server.properties`` (``process.roles=broker``, a
PLAINTEXT client listener, ``controller.quorum.bootstrap.servers`` naming the controllers),
``data/`` formatted by the release's own ``kafka-storage format``, ``stdout.log`` (its output,
the broker lifecycle at INFO) and ``logs/``. The cluster id must be the controllers'. Brokers
are started, killed and stopped one by one; :meth:`StockBrokers.listed_by` asks a broker which
brokers it knows to be unfenced (its Metadata response), the readiness check Kafka's clients
make too.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools import stock_kafka
from tools.local_cluster import ProcessDirectory, stop_processes

__all__ = ["BrokerNode", "StockBrokerError", "StockBrokers"]

_LIFECYCLE_LOGGERS = (
    "org.apache.kafka.server.BrokerLifecycleManager",  # 4.x
    "kafka.server.BrokerLifecycleManager",  # 3.9
    "kafka.server.BrokerServer",
    "org.apache.kafka.server.NodeToControllerRequestThread",  # 4.x: "Recorded new KRaft controller"
    "kafka.server.NodeToControllerRequestThread",  # 3.x
)


STOP_AFTER_FAILED_START_S = 30.0
"""Seconds the brokers of a start that failed get to stop on SIGTERM before SIGKILL."""


class StockBrokerError(RuntimeError):
    """A broker that exited, or did not become ready in time."""


@dataclass
class BrokerNode(ProcessDirectory):
    """One broker: id, client port, directory, and its process once started."""

    broker_id: int
    port: int
    root: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)


class StockBrokers:
    """Stock brokers of Kafka ``version`` under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, version: str, nodes: Sequence[BrokerNode], host: str = "localhost",
                 prefix: Sequence[str] = ()) -> None:
        self.root = root
        self.version = version
        self.nodes = {n.broker_id: n for n in nodes}
        self.host = host
        self.prefix = list(prefix)
        base = stock_kafka.logging_config(version)
        self._logging = root / f"brokers-{base.name}"
        if base.name == "log4j2.properties":
            extra = "".join(
                f"logger.lifecycle{n}.name = {name}\nlogger.lifecycle{n}.level = INFO\n"
                for n, name in enumerate(_LIFECYCLE_LOGGERS)
            )
            self._logging_flag = f"-Dlog4j2.configurationFile={self._logging}"
        else:
            extra = "".join(f"log4j.logger.{name}=INFO\n" for name in _LIFECYCLE_LOGGERS)
            self._logging_flag = f"-Dlog4j.configuration={self._logging.as_uri()}"
        self._logging_text = base.read_text(encoding="utf-8") + extra

    @classmethod
    def create(
        cls,
        root: Path | str,
        version: str,
        *,
        cluster_id: str,
        bootstrap_controllers: str,
        ports: Mapping[int, int],
        host: str = "localhost",
        properties: Mapping[str, str] | None = None,
        quorum_voters: str | None = None,
        prefix: Sequence[str] = (),
        broker_properties: Mapping[int, Mapping[str, str]] | None = None,
    ) -> StockBrokers:
        """Write each broker's configuration (broker id -> client port in ``ports``; extra
        ``properties`` for every broker, then ``broker_properties`` by broker id) and format its directory with the stock tool. With
        ``quorum_voters`` (``id@host:port,...``, a static quorum) the brokers name the voters
        in ``controller.quorum.voters`` instead of ``bootstrap_controllers``. ``prefix`` is a
        command each broker runs under (e.g. ``ip netns exec NS``, with ``host`` an address
        there). Raises ``stock_kafka.KafkaUnavailable`` without Java or the jars, and
        ``stock_kafka.KafkaCommandError`` when the format fails."""
        root = Path(root).resolve()
        nodes = [BrokerNode(i, port, root / f"broker-{i}") for i, port in ports.items()]
        for node in nodes:
            node.root.mkdir(parents=True, exist_ok=True)
            lines = [
                "# A stock Kafka broker on a kwire controller quorum.",
                "process.roles=broker",
                f"node.id={node.broker_id}",
                f"controller.quorum.bootstrap.servers={bootstrap_controllers}" if quorum_voters is None
                else f"controller.quorum.voters={quorum_voters}",
                "controller.listener.names=CONTROLLER",
                f"listeners=PLAINTEXT://{host}:{node.port}",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={node.data_dir}",
            ]
            lines += [f"{k}={v}" for k, v in (properties or {}).items()]
            lines += [f"{k}={v}" for k, v in (broker_properties or {}).get(node.broker_id, {}).items()]
            node.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            stock_kafka.run_tool(version, "storage", ["format", "-t", cluster_id, "-c", node.config_path])
        return cls(root, version, nodes, host, prefix)

    # ------------------------------------------------------------------ processes

    def start(self, broker_ids: Iterable[int] | None = None) -> None:
        """Start the given brokers (default: each one not running), each in its own session so
        that a signal to the caller's process group leaves them to :meth:`stop`. A start that
        fails part-way stops the brokers it started (:meth:`stop`) before the error goes on."""
        self._logging.write_text(self._logging_text, encoding="utf-8")
        started: list[subprocess.Popen[bytes]] = []
        try:
            for broker_id in self.nodes if broker_ids is None else broker_ids:
                node = self.nodes[broker_id]
                if node.running:
                    continue
                with node.stdout_path.open("ab") as out:
                    node.process = stock_kafka.start_kafka_class(
                        self.version, "kafka.Kafka", [node.config_path], logs_dir=node.root / "logs",
                        jvm_args=[self._logging_flag], stdout=out.fileno(), stderr=out.fileno(),
                        start_new_session=True, prefix=self.prefix,
                    )
                started.append(node.process)
        except BaseException:
            stop_processes(started, timeout_s=STOP_AFTER_FAILED_START_S)
            raise

    @contextlib.contextmanager
    def starting(self, stop_timeout_s: float = STOP_AFTER_FAILED_START_S) -> Iterator[StockBrokers]:
        """Start every broker not running (:meth:`start`) for a block that waits until they
        serve; when the block raises, every broker started here is stopped -- SIGTERM, then
        SIGKILL after ``stop_timeout_s`` (a broker whose controllers are gone waits on its
        controlled shutdown and ignores SIGTERM) -- before the error goes on, so that a failed
        start leaves no broker running::

            with brokers.starting():
                brokers.wait_listed(set(brokers.nodes), 120.0, exited_fails=True)
        """
        before = {i for i, n in self.nodes.items() if n.running}
        try:
            self.start()
            yield self
        except BaseException:
            stop_processes((n.process for i, n in self.nodes.items() if i not in before), timeout_s=stop_timeout_s)
            raise

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) to a broker and reap it."""
        process = self.nodes[broker_id].process
        if process is not None:
            if process.poll() is None:
                process.send_signal(sig)
            process.wait()

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM every running broker (a controlled shutdown), SIGKILL any still running
        after ``timeout_s``."""
        stop_processes((n.process for n in self.nodes.values()), timeout_s=timeout_s)

    # ------------------------------------------------------------------ views

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker's client listener, for ``--bootstrap-server``."""
        return self.bootstrap_servers_of(self.nodes)

    def bootstrap_servers_of(self, ids: Iterable[int]) -> str:
        """``host:port,...`` of brokers ``ids``'s client listeners (the running ones, for a
        client that must not pick a killed broker to bootstrap from)."""
        return ",".join(f"{self.host}:{self.nodes[i].port}" for i in ids)

    def listed_by(self, broker_id: int, timeout_s: float = 10.0) -> set[int] | None:
        """The broker ids broker ``broker_id``'s Metadata response lists (the brokers it knows
        to be unfenced), None while it does not answer (its client listener opens once it is
        unfenced)."""
        import trio

        from server.net.client import KafkaConnectionError

        try:
            response = trio.run(_metadata, self.host, self.nodes[broker_id].port, timeout_s)
        except (OSError, KafkaConnectionError, trio.TooSlowError):
            return None
        return {b.node_id for b in response.brokers}

    def wait_listed(self, expected: set[int], timeout_s: float, *, exited_fails: bool = False) -> float:
        """Until every running broker lists exactly ``expected``; returns the seconds it took.
        Raises StockBrokerError (with each broker's last output) after ``timeout_s``, and with
        ``exited_fails`` at once when a broker that was started has exited (a start that
        failed, e.g. on a port in use)."""
        started = time.monotonic()
        while True:
            views = {i: self.listed_by(i) for i, n in self.nodes.items() if n.running}
            if views and all(v == expected for v in views.values()):
                return time.monotonic() - started
            exited = sorted(i for i, n in self.nodes.items() if n.process is not None and not n.running)
            if exited_fails and exited:
                raise StockBrokerError(f"brokers {exited} exited while starting\n{self.report()}")
            if time.monotonic() - started > timeout_s:
                raise StockBrokerError(f"brokers list {views}, expected {sorted(expected)}\n{self.report()}")
            time.sleep(0.2)  # poll interval

    def report(self, lines: int = 25) -> str:
        """Each broker's state and the last ``lines`` lines of its output."""
        out = []
        for node in self.nodes.values():
            process = node.process
            state = "not started" if process is None else "running" if process.poll() is None else f"exited {process.returncode}"
            out.append(f"--- broker {node.broker_id} ({state}) ---")
            text = node.stdout_path.read_text(encoding="utf-8", errors="replace") if node.stdout_path.exists() else ""
            out.extend(line[:400] for line in text.splitlines()[-lines:])
        return "\n".join(out)


async def _metadata(host: str, port: int, timeout_s: float) -> Any:
    import trio

    from messages.generated.metadata_request import MetadataRequest
    from server.net.client import open_connection

    with trio.fail_after(timeout_s):
        async with await open_connection(host, port, "kwire-stock-brokers", request_timeout_ms=int(timeout_s * 1000)) as conn:
            return await conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False))
