"""A stock controller and a kwire node put in the same state, for the differential tests that
send both the same requests and compare the answers (compat/test_differential_probe.py, and
the controller, broker and topic RPC tests).

:func:`start_pair` formats two directories with the release's own ``kafka-storage format``
(same cluster id) and starts one node of each kind on them, in one of two roles:

* ``leader``: the standalone leader of its quorum (``--standalone``), NoOps off so that its log
  stands still, a static log config (for DescribeConfigs), and a metadata snapshot after every
  committed batch;
* ``observer``: formatted with ``--no-initial-controllers``, its bootstrap server an address
  where nothing answers, so it stays Unattached in epoch 0 with an empty log.

It yields ``{"stock": PairNode, "kwire": PairNode}`` once both are ready. :func:`send`
sends one request to a node and returns the decoded answer (or the connection error as text).
:func:`finalized_features`, :func:`broker_features` and :func:`registration` are what the
broker and topic RPC tests register brokers with.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import trio

from compat.harness import (
    CLUSTER_ID,
    KafkaRelease,
    controller_properties,
    free_port,
    log_batches,
    start_kwire,
    start_stock,
    stop_processes,
    wait_until,
)
from kwire.uuid import Uuid
from messages.generated.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from messages.generated.envelope_request import EnvelopeRequest
from messages.protocol import encode_request
from messages.runtime import Message
from server.net.client import KafkaConnectionError, open_connection
from storage.meta_properties import read_meta_properties
from storage.snapshots import parse_snapshot_path, read_snapshot_content
from tools.api_versions import describe as api_versions_describe
from tools.quorum_client import QuorumToolError, describe_node

__all__ = [
    "CAUGHT_UP",
    "DIR_A",
    "INCARNATION",
    "ROLES",
    "START_TIMEOUT_S",
    "PairNode",
    "Snapshot",
    "State",
    "acl_answer",
    "broker_features",
    "finalized_features",
    "forwarded",
    "newest_snapshot",
    "registration",
    "send",
    "start_pair",
    "start_secured_pair",
    "wait_ready",
]

ROLES = ("leader", "observer")
START_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class State:
    """The receiver as DescribeQuorum shows it just before a case."""

    node_id: int
    epoch: int
    log_end: int
    high_watermark: int
    directory_id: Uuid


@dataclass(frozen=True)
class PairNode:
    """One side of a pair: its port, process, log directory and current :class:`State`."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]
    data: Path
    role: str

    def state(self) -> State | None:
        """Its state when ready (a leader with a settled log, or an answering observer), else
        None."""
        return trio.run(_leader_state, self.port) if self.role == "leader" else _observer_state(self.port, self.data)


async def _leader_state(port: int) -> State | None:
    """The node's view when it leads, else None (not answering or not leading). Asked with
    DescribeQuorum alone: below metadata.version 3.7-IV0 a controller refuses DescribeCluster."""
    try:
        view = await describe_node(f"localhost:{port}", 5.0)
    except (KafkaConnectionError, OSError, QuorumToolError, trio.TooSlowError):
        return None
    p = view.partition
    if p.leader_id != 1:
        return None
    [voter] = [v for v in p.current_voters if v.replica_id == 1]
    return State(1, p.leader_epoch, voter.log_end_offset, p.high_watermark, voter.replica_directory_id)


def _observer_state(port: int, data: Path) -> State | None:
    """An observer that never finds a leader stays in epoch 0 with an empty log; it is ready
    once it answers ApiVersions."""
    try:
        trio.run(api_versions_describe, f"localhost:{port}", "differential-probe", 5000)
    except (KafkaConnectionError, OSError):
        return None
    meta = read_meta_properties(data)
    assert meta is not None and meta.directory_id is not None
    return State(1, 0, 0, 0, meta.directory_id)


def wait_ready(node: PairNode, timeout_s: float) -> State:
    """The node's state once it is ready: a leader whose high watermark has reached its log end
    (a new leader reports its own log end and high watermark as -1 until its first commit; a
    case built from those would send offset -1), or an answering observer."""

    state = wait_until(
        f"{node.name} ready as {node.role}", node.state, timeout_s, alive=[node.proc],
        ok=lambda s: s is not None and s.high_watermark >= s.log_end >= 0,
    )
    assert state is not None
    return state


@contextmanager
def start_pair(
    kafka: KafkaRelease, root: Path, role: str, extra: str = "", *, side_extra: Mapping[str, str] | None = None,
    stock_classpath: Sequence[str | os.PathLike[str]] = (), format_args: Sequence[str] = (),
    static_quorum: bool = False,
) -> Iterator[dict[str, PairNode]]:
    """A stock controller of ``kafka`` and a kwire node in ``role`` under ``root`` (``stock/``
    and ``kwire/`` their log directories, ``logs/`` their output), both ready; stopped on exit,
    when the tail of each one's output is printed. ``extra`` lines go into both nodes'
    properties, ``side_extra["stock"]`` / ``["kwire"]`` into one node's (e.g. a plug-in's class,
    Java on one side and Python on the other), ``stock_classpath`` before the stock node's jars.
    ``format_args`` go to both nodes' ``kafka-storage format`` (e.g. ``--release-version
    3.6-IV2``). With ``static_quorum`` a leader is the single voter of a static quorum
    (``controller.quorum.voters``, kraft.version 0) formatted without ``--standalone``: KIP-853's
    kraft.version 1 needs metadata.version 3.9-IV0 (``KRaftVersion`` dependencies), so a leader
    formatted at an older level cannot be standalone."""
    assert role in ROLES, role
    assert not static_quorum or role == "leader", "an observer needs a bootstrap server"
    nodes: dict[str, PairNode] = {}
    logs = root / "logs"
    logs.mkdir(parents=True)
    # an observer's bootstrap server: bound (so no node gets the port) but not listening
    holder = socket.socket()
    holder.bind(("localhost", 0))
    nowhere = holder.getsockname()[1]
    try:
        for name in ("stock", "kwire"):
            port = free_port()
            data = root / name
            props = controller_properties(
                root / f"{name}.properties", data, port,
                # a static log config, for the DescribeConfigs cases of compat/test_topic_rpcs.py,
                # and a snapshot after every committed batch, for its snapshot comparison
                "metadata.max.idle.interval.ms=0\nlog.retention.hours=100\n"
                "metadata.log.max.record.bytes.between.snapshots=1\n" + extra,
                bootstrap_port=nowhere if role == "observer" else None,
            )
            flags = ["--no-initial-controllers"] if role == "observer" else [] if static_quorum else ["--standalone"]
            if static_quorum:
                text = props.read_text(encoding="utf-8")
                props.write_text(text.replace(f"controller.quorum.bootstrap.servers=localhost:{port}",
                                              f"controller.quorum.voters=1@localhost:{port}"), encoding="utf-8")
            kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, *flags, *format_args])
            if side_extra and name in side_extra:  # after formatting: the format tool loads plug-in classes
                with open(props, "a") as file:
                    file.write("\n" + side_extra[name] + "\n")
            out = logs / f"{name}.txt"
            if name == "stock":
                proc = start_stock(kafka, props, out, logs_dir=logs, classpath=stock_classpath)
            else:
                proc = start_kwire(props, out)
            nodes[name] = PairNode(name, port, proc, data, role)
        for node in nodes.values():
            wait_ready(node, START_TIMEOUT_S)
            if role == "leader":
                # a leader's high watermark can reach its log end before its activation records
                # (the bootstrap feature levels) are written: ready once they are committed
                wait_until(f"{node.name} activated", partial(_activated, node.port), START_TIMEOUT_S, alive=[node.proc])
        yield nodes
    finally:
        stop_processes(node.proc for node in nodes.values())
        holder.close()
        for name in nodes:
            print(f"--- {name}\n" + (logs / f"{name}.txt").read_text(errors="replace")[-4000:])


@contextmanager
def start_secured_pair(
    kafka: KafkaRelease, root: Path, settings: str, ready: Callable[[int], bool], format_args: Sequence[str] = (),
) -> Iterator[dict[str, int]]:
    """A stock controller of ``kafka`` and a kwire node, each the standalone leader of its own
    quorum, on a secured listener: ``settings`` lines in both nodes' properties, both formatted
    by the stock tool (with ``format_args``, e.g. ``--add-scram``). Yields ``{"stock": port,
    "kwire": port}`` once ``ready(port)`` holds for each (the pair's readiness needs the
    secured client the caller has); stopped on exit, when the tail of each one's output is
    printed."""
    ports: dict[str, int] = {}
    procs: list[subprocess.Popen[bytes]] = []
    (root / "logs").mkdir()
    try:
        for name in ("stock", "kwire"):
            port = free_port()
            props = controller_properties(root / f"{name}.properties", root / name, port, settings)
            kafka.run_tool("storage", ["format", "-t", CLUSTER_ID, "-c", props, "--standalone", *format_args])
            out = root / "logs" / f"{name}.txt"
            procs.append(start_stock(kafka, props, out, logs_dir=root / "logs") if name == "stock"
                         else start_kwire(props, out))
            ports[name] = port
        for name, port in ports.items():
            wait_until(f"{name} ready", partial(ready, port), START_TIMEOUT_S, alive=procs)
        yield ports
    finally:
        stop_processes(procs)
        for name in ports:
            print(f"--- {name}\n" + (root / "logs" / f"{name}.txt").read_text(errors="replace")[-3000:])


async def send(port: int, body: Message, version: int) -> Any:
    """Send ``body`` at ``version`` to the node at ``port``: its decoded answer, or the
    connection error as text."""
    async with await open_connection("localhost", port, "differential-probe", request_timeout_ms=15_000) as conn:
        try:
            return await conn.request(body, version)
        except KafkaConnectionError as exc:
            return f"connection error: {exc}"



def forwarded(principal: str, inner: Message, version: int) -> EnvelopeRequest:
    """``inner`` at ``version`` in an Envelope from 127.0.0.1 for ``principal`` (``Type:name``,
    as ``DefaultPrincipalData`` v0: a broker forwarding its client's request, KIP-590)."""
    kind, _, name = principal.partition(":")
    data = (b"\x00\x00" + bytes([len(kind) + 1]) + kind.encode() + bytes([len(name) + 1]) + name.encode()
            + b"\x00\x00")
    return EnvelopeRequest(request_data=encode_request(inner, version, 9, "forwarded"), request_principal=data,
                           client_host_address=bytes([127, 0, 0, 1]))


class Snapshot(NamedTuple):
    """A node's snapshot: its end offset, data record values and checkpoint file."""

    end_offset: int
    records: list[bytes]
    path: Path


def newest_snapshot(partition: Path, at_least: int | None = None, timeout_s: float = 20.0) -> Snapshot:
    """A node's newest snapshot once one ends at or past ``at_least`` (default: the log end;
    the pairs write one after every committed batch)."""
    if at_least is None:
        at_least = max(b.last_offset for b in log_batches(partition)) + 1
    deadline = time.monotonic() + timeout_s
    while True:
        found = sorted(
            (parsed.snapshot_id, path)
            for path in partition.glob("*.checkpoint")
            if (parsed := parse_snapshot_path(path)) is not None
        )
        if found and found[-1][0].end_offset >= at_least:
            snapshot_id, path = found[-1]
            return Snapshot(snapshot_id.end_offset, list(read_snapshot_content(path.read_bytes()).data_records()), path)
        assert time.monotonic() < deadline, f"no snapshot at or past offset {at_least} in {partition}"
        time.sleep(0.2)  # poll interval


def acl_answer(response: Any) -> tuple[Any, ...]:
    """A CreateAcls, DeleteAcls or DescribeAcls answer with the orders Kafka leaves to hash
    iteration (bindings per filter, resources and their bindings) sorted."""
    name = type(response).__name__
    if name == "CreateAclsResponse":
        return name, [(int(r.error_code), r.error_message) for r in response.results]
    if name == "DeleteAclsResponse":
        return name, [
            (int(f.error_code), f.error_message, sorted(
                (int(m.error_code), m.error_message, m.resource_type, m.resource_name, m.pattern_type, m.principal,
                 m.host, m.operation, m.permission_type) for m in f.matching_acls
            ))
            for f in response.filter_results
        ]
    assert name == "DescribeAclsResponse", name
    return name, int(response.error_code), response.error_message, sorted(
        (r.resource_type, r.resource_name, r.pattern_type,
         sorted((a.principal, a.host, a.operation, a.permission_type) for a in r.acls))
        for r in response.resources
    )


# -- brokers ----------------------------------------------------------------------------------

CAUGHT_UP = 1 << 40
"""A metadata offset past any registration."""
DIR_A = Uuid.from_longs(7, 1001)
"""A broker's log directory id (the default of :func:`registration`)."""
INCARNATION = Uuid.from_longs(0x77, 1)
"""A broker's incarnation id (the default of :func:`registration`)."""


def _activated(port: int) -> bool:
    """Whether the node at ``port`` lists a finalized metadata.version (its activation
    records committed); False while it does not answer."""
    try:
        return "metadata.version" in finalized_features(port)
    except (KafkaConnectionError, OSError):
        return False


def finalized_features(port: int) -> dict[str, int]:
    """The finalized feature levels the node at ``port`` lists in ApiVersions."""
    info = trio.run(api_versions_describe, f"localhost:{port}", "broker-rpcs", 10_000)
    return {f["name"]: f["maxVersionLevel"] for f in info["finalizedFeatures"]}


def broker_features(finalized: dict[str, int]) -> list[Feature]:
    """Ranges that hold every finalized level (as a stock broker of the release lists them)."""
    return [
        Feature(name=name, min_supported_version=1 if name == "metadata.version" else 0, max_supported_version=level)
        for name, level in sorted(finalized.items())
    ]


def registration(
    broker_id: int, features: list[Feature], *, incarnation: Uuid = INCARNATION, dirs: tuple[Uuid, ...] = (DIR_A,),
    cluster_id: str = CLUSTER_ID, migrating: bool = False,
) -> BrokerRegistrationRequest:
    """A BrokerRegistration of ``broker_id`` (listening on port 9000 + id) with ``features``."""
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=incarnation,
        listeners=[Listener(name="PLAINTEXT", host="localhost", port=9000 + broker_id, security_protocol=0)],
        features=features,
        rack=None,
        is_migrating_zk_broker=migrating,
        log_dirs=list(dirs),
    )
