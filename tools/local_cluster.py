"""A local N-node KRaft controller quorum, one ``kwire`` process per node: :class:`DevCluster`,
which ``kwire dev-cluster`` (:mod:`tools.dev_cluster`) runs and tests and benchmarks drive.

``DevCluster.create(root, n)`` gives ``root`` one directory per node (``node-<id>/``:
``server.properties``, ``data/`` formatted as ``kafka-storage format --initial-controllers``
formats it -- a dynamic quorum at kraft.version 1 with every node an initial voter -- and the
node's ``stdout.log`` and ``server.log``) and ``cluster.json`` (cluster id, node ids, ports,
directory ids); ``DevCluster.open(root)`` reads that back, to start the same cluster again. Node
ids are 1..N, node ``i`` listens on ``CONTROLLER://localhost:<base_port + i - 1>`` (free ports
when ``base_port`` is None).

Each node runs ``kwire server-start``, or ``kwire test-raft-server --json`` with a workload (the
leader then writes a steady load and its nodes report commit latency in ``stdout.log``, see
:mod:`tools.raft_server_load`). ``start``/``kill``/``stop`` act per node, ``wait_for_leader`` and
``describe`` ask the quorum (:func:`tools.quorum_client.describe`), ``events`` reads a node's
workload reports.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kwire.topics import METADATA_PARTITION_DIR
from tools.client_config import PLAINTEXT, ClientSecurity

__all__ = [
    "DEFAULT_BASE_PORT",
    "DevCluster",
    "DevClusterError",
    "DevNode",
    "ProcessDirectory",
    "free_ports",
    "stop_processes",
]

REPO_DIR = Path(__file__).resolve().parent.parent
DEFAULT_BASE_PORT = 19093
LISTENER = "CONTROLLER"
_DYNAMIC_QUORUM_LEVEL = 21
"""metadata.version 3.9-IV0: the first that kraft.version 1 (KIP-853 dynamic quorums) allows."""
_DESCRIBE_CLUSTER_LEVEL = 15
"""metadata.version 3.7-IV0: the first at which controllers answer DescribeCluster (KIP-919)."""


def _voters(members: Sequence[DevNode], host: str) -> str:
    return ",".join(f"{n.node_id}@{host}:{n.port}" for n in members)


class DevClusterError(RuntimeError):
    """The cluster cannot be created, started or reached."""


def stop_processes(
    procs: Iterable[subprocess.Popen[bytes] | None], sig: int = signal.SIGTERM, timeout_s: float = 60.0
) -> None:
    """Send ``sig`` to every process still running, all at once (a quorum stops together, so
    no survivor waits on a dead leader), then wait for them; SIGKILL any still running
    ``timeout_s`` seconds after the signal. None entries (never started) are skipped."""
    started = [proc for proc in procs if proc is not None]
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(sig)
    deadline = time.monotonic() + timeout_s
    for proc in started:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (Linux
    ``ip_local_port_range``; IANA's 49152-65535 elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


PORT_SLICE_ENV = "KWIRE_PORT_SLICE"
"""``"i/n"`` (e.g. ``"0/2"``): :func:`free_ports` chooses only from the i-th of n equal slices of
its range, so that n processes choosing ports at once (parallel test workers) never choose the
same one, not even one whose server is down between a kill and a restart."""


def _port_slice(ports: range) -> range:
    raw = os.environ.get(PORT_SLICE_ENV, "").strip()
    if not raw:
        return ports
    index, count = (int(part) for part in raw.split("/"))
    size = len(ports) // count
    return ports[index * size:(index + 1) * size]


_HANDED_OUT: set[int] = set()
"""The ports :func:`free_ports` has returned in this process: never returned again (until every
candidate has been), since a port released by the check is as free for the next call."""


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago (bound then released), chosen
    below the kernel's ephemeral range: a port there can be taken as the source port of any
    outgoing connection, so a server restarted on it after a kill could find it in use. With
    ``KWIRE_PORT_SLICE`` set (:data:`PORT_SLICE_ENV`), only from that slice of the range.

    A port is returned once per process (:data:`_HANDED_OUT`): the check releases each port
    before returning it, so two calls (``{i: free_port() for i in ids}``) could otherwise
    draw the same one for two servers -- which then meet only when the second binds it, or
    never on the host at all when the servers run in a network namespace of their own."""
    low, _ = _ephemeral_range()
    candidates = [p for p in _port_slice(range(10_000, low)) if p not in _HANDED_OUT] if low > 11_000 else []
    if low > 11_000 and len(candidates) < count:  # every candidate handed out once: start again
        _HANDED_OUT.clear()
        candidates = list(_port_slice(range(10_000, low)))
    random.shuffle(candidates)
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        while len(sockets) < count:  # no room below the ephemeral range: let the OS choose
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        ports = [int(s.getsockname()[1]) for s in sockets]
        _HANDED_OUT.update(ports)
        return ports
    finally:
        for s in sockets:
            s.close()


class ProcessDirectory:
    """A server process kept in one directory ``root``: its ``server.properties``, its data
    directory and its output; ``process`` is None until started."""

    root: Path
    process: subprocess.Popen[bytes] | None

    @property
    def config_path(self) -> Path:
        """The node's ``server.properties``."""
        return self.root / "server.properties"

    @property
    def data_dir(self) -> Path:
        """``log.dirs`` (and for a controller ``metadata.log.dir``)."""
        return self.root / "data"

    @property
    def stdout_path(self) -> Path:
        """The process's stdout, appended across restarts."""
        return self.root / "stdout.log"

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.process is not None and self.process.poll() is None


@dataclass
class DevNode(ProcessDirectory):
    """One node of a dev cluster and its process (None when not running); its stdout holds a
    workload's JSON reports."""

    node_id: int
    port: int
    directory_id: str
    root: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        """The process's stderr (its log), appended across restarts."""
        return self.root / "server.log"

    @property
    def partition_dir(self) -> Path:
        """The ``__cluster_metadata-0`` log directory."""
        return self.data_dir / METADATA_PARTITION_DIR


class DevCluster:
    """A dev cluster rooted at ``root`` (see the module docstring).

    ``workload`` is ``(records_per_s, record_size)`` to run ``kwire test-raft-server`` instead
    of ``kwire server-start``; ``overrides`` are ``key=value`` properties for every node;
    ``stats_interval_ms`` (with a workload) is the workload's ``--stats-interval-ms`` (None: the
    tool's default, 5000 ms) and ``record_type`` its ``--record-type`` (None: the tool's default).
    ``security`` is how :meth:`describe` logs in (a listener made SSL or SASL by ``properties``).
    """

    def __init__(
        self,
        root: Path,
        cluster_id: str,
        nodes: list[DevNode],
        *,
        host: str = "localhost",
        workload: tuple[int, int] | None = None,
        overrides: Sequence[str] = (),
        python: str = sys.executable,
        stats_interval_ms: int | None = None,
        record_type: str | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.root = root
        self.security = security
        self.cluster_id = cluster_id
        self.nodes = {n.node_id: n for n in nodes}
        self.host = host
        self.workload = workload
        self.overrides = list(overrides)
        self.python = python
        self.stats_interval_ms = stats_interval_ms
        self.record_type = record_type
        self.quorum_voters: str | None = None
        """``controller.quorum.voters`` of a static quorum (``create`` with a ``release_version``
        before 3.9), None for a dynamic one."""
        self.direct_describe = False
        """Whether :meth:`describe` sends DescribeQuorum to each node itself: the controllers of a
        quorum below metadata.version 3.7-IV0 refuse DescribeCluster (KIP-919)."""
        self.python_path: list[str] = []
        """Directories the nodes also import from (after kwire's own, on ``PYTHONPATH``): where
        the plug-ins named in ``overrides`` live."""

    # ------------------------------------------------------------------ creation

    @classmethod
    def create(
        cls,
        root: Path | str,
        nodes: int = 3,
        *,
        base_port: int | None = DEFAULT_BASE_PORT,
        host: str = "localhost",
        workload: tuple[int, int] | None = None,
        overrides: Sequence[str] = (),
        properties: dict[str, str] | None = None,
        stats_interval_ms: int | None = None,
        record_type: str | None = None,
        security: ClientSecurity = PLAINTEXT,
        release_version: str | None = None,
    ) -> DevCluster:
        """Write the configurations and format every node's directory. ``base_port`` None picks
        free ports. ``properties`` are extra lines for every ``server.properties`` (a key given
        there wins over the same key written before it). ``release_version`` (``"3.6-IV2"``,
        ``"3.6"``) is ``kafka-storage format --release-version``: the metadata.version the
        quorum starts at (default: the formatter's, 3.9-IV0); below 3.9-IV0, which KIP-853's
        kraft.version 1 needs, the quorum is static (``controller.quorum.voters``). Raises
        DevClusterError when ``root`` already holds a cluster or ``release_version`` is unknown."""
        from kwire.uuid import Uuid
        from storage.features import metadata_version_from_string
        from storage.format import DynamicVoter, format_directories
        from storage.meta_properties import generate_directory_id

        try:
            level = None if release_version is None else metadata_version_from_string(release_version)
        except ValueError as exc:
            raise DevClusterError(str(exc)) from None
        static = level is not None and level.level < _DYNAMIC_QUORUM_LEVEL

        root = Path(root).resolve()
        if (root / "cluster.json").exists():
            raise DevClusterError(f"{root} already holds a dev cluster (use --fresh to replace it)")
        if nodes < 1:
            raise DevClusterError("--nodes must be at least 1")
        ports = free_ports(nodes) if base_port is None else [base_port + i for i in range(nodes)]
        members = [
            DevNode(i + 1, ports[i], str(generate_directory_id()), root / f"node-{i + 1}")
            for i in range(nodes)
        ]
        cluster_id = str(Uuid.random())
        bootstrap = ",".join(f"{host}:{n.port}" for n in members)
        voters = [DynamicVoter(n.node_id, host, n.port, Uuid.from_string(n.directory_id)) for n in members]
        for node in members:
            node.root.mkdir(parents=True, exist_ok=True)
            lines = [
                "# A kwire dev-cluster node (Kafka's server.properties keys).",
                "process.roles=controller",
                f"node.id={node.node_id}",
                f"listeners={LISTENER}://{host}:{node.port}",
                f"controller.listener.names={LISTENER}",
                f"listener.security.protocol.map={LISTENER}:PLAINTEXT",
                f"controller.quorum.voters={_voters(members, host)}" if static
                else f"controller.quorum.bootstrap.servers={bootstrap}",
                f"metadata.log.dir={node.data_dir}",
                f"log.dirs={node.data_dir}",
            ]
            lines += [f"{k}={v}" for k, v in (properties or {}).items()]
            node.config_path.write_text("\n".join(lines) + "\n")
            format_directories(
                cluster_id=cluster_id,
                node_id=node.node_id,
                directories=[str(node.data_dir)],
                metadata_log_dir=str(node.data_dir),
                controller_listener_name=LISTENER,
                release_version=level,
                initial_controllers=None if static else voters,
                out=lambda _line: None,
            )
        description: dict[str, Any] = {
            "cluster_id": cluster_id,
            "host": host,
            "nodes": [{"id": n.node_id, "port": n.port, "directory_id": n.directory_id} for n in members],
        }
        if level is not None:
            description["metadata_version"] = level.name
        if static:
            description["quorum_voters"] = _voters(members, host)
        (root / "cluster.json").write_text(json.dumps(description, indent=2) + "\n")
        cluster = cls(root, cluster_id, members, host=host, workload=workload, overrides=overrides,
                      stats_interval_ms=stats_interval_ms, record_type=record_type, security=security)
        cluster.quorum_voters = description.get("quorum_voters")
        cluster.direct_describe = level is not None and level.level < _DESCRIBE_CLUSTER_LEVEL
        return cluster

    @classmethod
    def open(
        cls, root: Path | str, *, workload: tuple[int, int] | None = None, overrides: Sequence[str] = (),
        stats_interval_ms: int | None = None,
    ) -> DevCluster:
        """A cluster ``create`` made earlier. Raises DevClusterError when there is none."""
        root = Path(root).resolve()
        try:
            description = json.loads((root / "cluster.json").read_text())
        except FileNotFoundError:
            raise DevClusterError(f"{root} holds no dev cluster (no cluster.json)") from None
        members = [
            DevNode(n["id"], n["port"], n["directory_id"], root / f"node-{n['id']}")
            for n in description["nodes"]
        ]
        cluster = cls(root, description["cluster_id"], members, host=description["host"],
                      workload=workload, overrides=overrides, stats_interval_ms=stats_interval_ms)
        cluster.quorum_voters = description.get("quorum_voters")
        level = description.get("metadata_version")
        if level is not None:
            from storage.features import metadata_version_from_string

            cluster.direct_describe = metadata_version_from_string(level).level < _DESCRIBE_CLUSTER_LEVEL
        return cluster

    # ------------------------------------------------------------------ views

    @property
    def bootstrap_controllers(self) -> str:
        """``host:port,...`` of every node, for ``--bootstrap-controller``."""
        return ",".join(f"{self.host}:{n.port}" for n in self.nodes.values())

    def address(self, node_id: int) -> str:
        """``host:port`` of node ``node_id``'s controller listener."""
        return f"{self.host}:{self.nodes[node_id].port}"

    def events(self, node_id: int) -> list[dict[str, Any]]:
        """The JSON reports of node ``node_id``'s workload so far, across restarts (a line cut
        by a kill is skipped)."""
        path = self.nodes[node_id].stdout_path
        result = []
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    try:
                        result.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        return result

    # ------------------------------------------------------------------ processes

    def command(self, node_id: int) -> list[str]:
        """The command line that runs node ``node_id``: ``kwire server-start``, or with a
        workload ``kwire test-raft-server --json``."""
        node = self.nodes[node_id]
        overrides = [arg for o in self.overrides for arg in ("--override", o)]
        if self.workload is None:
            return [self.python, "-m", "tools.cli", "server-start", str(node.config_path), *overrides]
        throughput, record_size = self.workload
        interval = [] if self.stats_interval_ms is None else ["--stats-interval-ms", str(self.stats_interval_ms)]
        if self.record_type is not None:
            interval += ["--record-type", self.record_type]
        return [
            self.python, "-m", "tools.cli", "test-raft-server", "--config", str(node.config_path),
            "--throughput", str(throughput), "--record-size", str(record_size),
            "--replica-directory-id", node.directory_id, "--json", *interval, *overrides,
        ]

    def _environment(self) -> dict[str, str]:
        """The nodes' environment: the caller's, unbuffered, with :attr:`python_path` added."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        paths = [*filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), *self.python_path]
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        return env

    def start(self, node_ids: Iterable[int] | None = None, *, wait: bool = True, timeout_s: float = 60.0) -> None:
        """Start the given nodes (default: every node not running); with ``wait``, return once
        each listens. Raises DevClusterError when a node exits or does not listen in time; a
        start that fails part-way first stops the nodes it started (SIGTERM, then SIGKILL after
        ``timeout_s``), so that it leaves none running."""
        ids = list(self.nodes) if node_ids is None else list(node_ids)
        started: list[subprocess.Popen[bytes]] = []
        try:
            for node_id in ids:
                node = self.nodes[node_id]
                if node.running:
                    continue
                with node.stdout_path.open("ab") as out, node.log_path.open("ab") as err:
                    # its own session: a Ctrl-C to the caller's process group leaves the node to
                    # stop(), so that brokers on the quorum can shut down before it does
                    node.process = subprocess.Popen(
                        self.command(node_id), cwd=REPO_DIR, stdout=out, stderr=err,
                        env=self._environment(), start_new_session=True,
                    )
                started.append(node.process)
            if wait:
                for node_id in ids:
                    self.wait_listening(node_id, timeout_s)
        except BaseException:
            stop_processes(started, timeout_s=timeout_s)
            raise

    def wait_listening(self, node_id: int, timeout_s: float = 60.0) -> None:
        """Return once node ``node_id`` accepts TCP connections. Raises DevClusterError when its
        process exits first or after ``timeout_s`` seconds."""
        node = self.nodes[node_id]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not node.running:
                raise DevClusterError(
                    f"node {node_id} exited with status {node.process and node.process.returncode}; "
                    f"see {node.log_path}"
                )
            try:
                with socket.create_connection((self.host, node.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise DevClusterError(f"node {node_id} is not listening on port {node.port} after {timeout_s} s")

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL, no goodbye) to node ``node_id`` and reap it."""
        node = self.nodes[node_id]
        if node.process is None:
            return
        if node.process.poll() is None:
            node.process.send_signal(sig)
        node.process.wait()

    def stop(self, node_ids: Iterable[int] | None = None, timeout_s: float = 30.0) -> None:
        """Graceful stop (SIGTERM, a leader resigns) of the given nodes, killing any that has
        not exited after ``timeout_s``."""
        ids = list(self.nodes) if node_ids is None else list(node_ids)
        stop_processes((self.nodes[i].process for i in ids), timeout_s=timeout_s)

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ quorum

    def describe(self, timeout_s: float = 5.0) -> Any:
        """DescribeQuorum through the running nodes (:func:`tools.quorum_client.describe`)."""
        import trio

        from tools.quorum_client import describe

        bootstrap = ",".join(self.address(i) for i, n in self.nodes.items() if n.running)
        if not bootstrap:
            raise DevClusterError("no node is running")
        if not self.direct_describe:
            return trio.run(describe, bootstrap, timeout_s, self.security)
        from tools.quorum_client import QuorumToolError, describe_node

        failure: Exception | None = None
        for address in bootstrap.split(","):  # only the leader answers
            try:
                return trio.run(describe_node, address, timeout_s, self.security)
            except (OSError, QuorumToolError, trio.TooSlowError) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def wait_for_leader(
        self, timeout_s: float = 30.0, *, exclude: Iterable[int] = (), min_epoch: int = 0
    ) -> tuple[int, int]:
        """``(leader id, epoch)`` once a running node outside ``exclude`` leads an epoch of at
        least ``min_epoch``. Raises DevClusterError after ``timeout_s``."""
        import trio

        from tools.quorum_client import QuorumToolError

        excluded = set(exclude)
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            try:
                view = self.describe()
                partition = view.partition
                leader = partition.leader_id
                if (
                    leader not in excluded
                    and leader in self.nodes
                    and self.nodes[leader].running
                    and partition.leader_epoch >= min_epoch
                ):
                    return leader, partition.leader_epoch
                last = (leader, partition.leader_epoch)
            except (QuorumToolError, OSError, trio.TooSlowError) as exc:  # no answer yet: retried
                last = exc
            time.sleep(0.1)
        raise DevClusterError(f"no leader after {timeout_s} s (last: {last!r})")
