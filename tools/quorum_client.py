"""A quorum admin client: what Kafka's admin client does for ``describeMetadataQuorum()``,
``addRaftVoter()`` and ``removeRaftVoter()`` with ``bootstrap.controllers`` (KIP-919, KIP-853),
as ``kafka-metadata-quorum.sh --bootstrap-controller``
(``org.apache.kafka.tools.MetadataQuorumCommand``) uses them.

Each call asks a bootstrap controller for the controllers (DescribeCluster with EndpointType 2),
then sends its request to the active controller. :func:`describe` (DescribeQuorum on
``__cluster_metadata-0``) returns a :class:`QuorumView`; :func:`add_raft_voter` and
:func:`remove_raft_voter` return once the leader accepted the change (AddRaftVoter v1+ asks it to
answer once the new voter set is committed, KIP-1186), retrying while the leader moves. ``kwire metadata-quorum``
(:mod:`tools.metadata_quorum`) prints it; ``DevCluster``, the tests and the compat harness use
it to find the leader and compare with the stock tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from kwire.topics import METADATA_PARTITION, METADATA_TOPIC_NAME
from kwire.uuid import Uuid
from messages.generated.add_raft_voter_request import AddRaftVoterRequest
from messages.generated.add_raft_voter_request import Listener as AddListener
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_cluster_response import DescribeClusterResponse
from messages.generated.describe_quorum_request import (
    DescribeQuorumRequest,
)
from messages.generated.describe_quorum_request import (
    PartitionData as RequestPartition,
)
from messages.generated.describe_quorum_request import (
    TopicData as RequestTopic,
)
from messages.generated.describe_quorum_response import (
    DescribeQuorumResponse,
    Node,
    PartitionData,
)
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from tools.client_config import PLAINTEXT, ClientSecurity

if TYPE_CHECKING:
    from server.net.client import KafkaConnection

__all__ = [
    "CONTROLLER_ENDPOINT_TYPE", "QuorumToolError", "QuorumView", "VoterChangeError",
    "active_controller", "add_raft_voter", "describe", "describe_node", "remove_raft_voter",
]

CONTROLLER_ENDPOINT_TYPE = 2
VOTER_CHANGE_TIMEOUT_MS = 60_000
"""The admin client's ``default.api.timeout.ms``, which it sends as AddRaftVoter's TimeoutMs."""
_LEADER_MOVED = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_CONTROLLER})


class QuorumToolError(Exception):
    """A failure of the exchange or of its answer, which ``kwire metadata-quorum`` reports on
    stderr with exit code 1 (Kafka's TerseException)."""


class VoterChangeError(QuorumToolError):
    """The leader refused a voter change: ``error`` is its code, the message Kafka's exception
    name and the leader's message (e.g. ``DuplicateVoterException: The voter id ...``)."""

    def __init__(self, error: Errors, message: str | None) -> None:
        name = "".join(part.capitalize() for part in error.name.split("_")) + "Exception"
        super().__init__(f"{name}: {message or error.message}")
        self.error = error


@dataclass
class QuorumView:
    """What the tool learned: the cluster id and the quorum's partition description.

    ``partition`` is DescribeQuorum's ``__cluster_metadata-0`` entry: ``leader_id``,
    ``leader_epoch``, ``high_watermark`` (an offset) and ``current_voters`` / ``observers``
    (``ReplicaState``: ``log_end_offset``, ``last_fetch_timestamp`` and
    ``last_caught_up_timestamp`` in ms since the epoch, -1 when unknown). ``nodes`` are the
    voters' endpoints (DescribeQuorum v2+; empty before).
    """

    cluster_id: str
    partition: PartitionData
    nodes: list[Node]


def _parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise QuorumToolError(f"not a HOST:PORT address: {text!r}")
    return host.strip("[]"), int(port)


async def describe(bootstrap: str, timeout_s: float = 30.0, security: ClientSecurity = PLAINTEXT) -> QuorumView:
    """Ask the quorum through ``bootstrap`` (``HOST:PORT[,HOST:PORT...]``, IPv6 hosts in
    brackets) as Kafka's admin client does with ``bootstrap.controllers``: the first address
    that accepts a connection answers DescribeCluster, the active controller it names answers
    DescribeQuorum. Runs under Trio; the whole exchange has ``timeout_s`` seconds. Every
    connection logs in as ``security`` says (``--command-config``, :mod:`tools.client_config`).

    Raises QuorumToolError for a malformed address or the server's error, OSError when no
    address accepts a connection, ``trio.TooSlowError`` after ``timeout_s`` (also when no
    active controller was listed by then)."""
    import trio

    with trio.fail_after(timeout_s):
        cluster_id, host, port = await active_controller(bootstrap, security)
        return await _describe_quorum(cluster_id, host, port, security)


async def describe_node(address: str, timeout_s: float = 30.0, security: ClientSecurity = PLAINTEXT) -> QuorumView:
    """DescribeQuorum sent to the controller at ``address`` (``HOST:PORT``) itself, without
    DescribeCluster first: the way to a quorum at a metadata.version before 3.7-IV0, whose
    controllers refuse DescribeCluster (direct-to-controller admin requests came with KIP-919)
    but answer DescribeQuorum, as brokers forward it to them. Only the leader answers it; the
    others answer NOT_LEADER_OR_FOLLOWER (``KafkaRaftClient.handleDescribeQuorumRequest``),
    raised as QuorumToolError. ``cluster_id`` of the view is empty. Raises as
    :func:`describe`."""
    import trio

    host, port = _parse_host_port(address)
    with trio.fail_after(timeout_s):
        return await _describe_quorum("", host, port, security)


async def _describe_quorum(cluster_id: str, host: str, port: int, security: ClientSecurity) -> QuorumView:
    quorum = await _request(
        host, port, security,
        DescribeQuorumRequest([RequestTopic(METADATA_TOPIC_NAME, [RequestPartition(METADATA_PARTITION)])]),
    )
    assert isinstance(quorum, DescribeQuorumResponse)
    if quorum.error_code != Errors.NONE:
        raise QuorumToolError(f"DescribeQuorum failed: {Errors.of(quorum.error_code).name}")
    if len(quorum.topics) != 1 or len(quorum.topics[0].partitions) != 1:
        raise QuorumToolError("DescribeQuorum answered with other than one partition")
    partition = quorum.topics[0].partitions[0]
    if partition.error_code != Errors.NONE:
        raise QuorumToolError(
            f"DescribeQuorum failed: {Errors.of(partition.error_code).name}"
            + (f": {partition.error_message}" if partition.error_message else "")
        )
    return QuorumView(cluster_id, partition, quorum.nodes)


async def active_controller(bootstrap: str, security: ClientSecurity = PLAINTEXT) -> tuple[str, str, int]:
    """``(cluster id, host, port)`` of the active controller, from the first address of
    ``bootstrap`` that accepts a connection (DescribeCluster, EndpointType 2). While the
    answer does not list the active controller (no leader yet, its KIP-919 registration not
    yet committed, or no metadata.version replayed yet) or is NOT_CONTROLLER (the asked node
    lost the leadership while its answer waited for what it read to commit), it asks again every
    ``retry.backoff.ms``, as the admin client waits for the controller to appear in its
    metadata: the caller bounds the time."""
    import trio

    while True:
        found = await _describe_cluster(bootstrap, security)
        if found is not None:
            return found
        await trio.sleep(0.1)  # retry.backoff.ms


_NO_METADATA_VERSION = "There is no finalized MetadataVersion"
"""The start of a controller's DescribeCluster error before it replayed its metadata.version
(``ControllerApis.handleDescribeCluster``); any other UNSUPPORTED_VERSION (a metadata.version
before 3.7-IV0) is final."""


async def _describe_cluster(bootstrap: str, security: ClientSecurity) -> tuple[str, str, int] | None:
    addresses = [_parse_host_port(a.strip()) for a in bootstrap.split(",") if a.strip()]
    if not addresses:
        raise QuorumToolError("--bootstrap-controller names no address")
    conn: KafkaConnection | None = None
    failure: OSError | None = None
    for host, port in addresses:
        try:
            conn = await _connect(host, port, security)
            break
        except OSError as exc:
            failure = exc
    if conn is None:
        assert failure is not None
        raise failure
    try:
        cluster = await conn.request(DescribeClusterRequest(endpoint_type=CONTROLLER_ENDPOINT_TYPE))
    finally:
        await conn.aclose()
    assert isinstance(cluster, DescribeClusterResponse)
    if cluster.error_code == Errors.UNSUPPORTED_VERSION and (cluster.error_message or "").startswith(_NO_METADATA_VERSION):
        return None  # a controller that has not replayed its metadata.version yet: it will
    if cluster.error_code == Errors.NOT_CONTROLLER:
        return None  # the leadership moved while the answer waited for its commit: retriable
    if cluster.error_code != Errors.NONE:
        raise QuorumToolError(
            f"DescribeCluster failed: {Errors.of(cluster.error_code).name}"
            + (f": {cluster.error_message}" if cluster.error_message else "")
        )
    active = next((b for b in cluster.brokers if b.broker_id == cluster.controller_id), None)
    if active is None:
        return None
    return cluster.cluster_id, active.host, active.port


async def _connect(host: str, port: int, security: ClientSecurity) -> KafkaConnection:
    from server.net.client import open_connection

    return await open_connection(host, port, client_id="kwire-metadata-quorum", sasl=security.sasl,
                                 ssl_context=security.ssl_context)


async def _request(host: str, port: int, security: ClientSecurity, body: Any) -> Any:
    conn = await _connect(host, port, security)
    try:
        return await conn.request(body)
    finally:
        await conn.aclose()


async def _voter_change(bootstrap: str, body: Any, timeout_s: float, security: ClientSecurity) -> None:
    """Send ``body`` to the active controller until it answers other than "not the leader"
    (the admin client's retries: no active controller known yet, NOT_LEADER_OR_FOLLOWER,
    NOT_CONTROLLER, a connection lost before the answer; ``retry.backoff.ms`` 100 ms), within
    ``timeout_s``. Raises VoterChangeError, or ``trio.TooSlowError`` when the time is up."""
    import trio

    from server.net.client import KafkaConnectionError

    with trio.fail_after(timeout_s):
        while True:
            try:
                _, host, port = await active_controller(bootstrap, security)
                response = await _request(host, port, security, body)
            except (QuorumToolError, KafkaConnectionError, OSError):
                await trio.sleep(0.1)  # retry.backoff.ms: the leader is moving
                continue
            error = Errors.of(response.error_code)
            if error == Errors.NONE:
                return
            if error not in _LEADER_MOVED:
                raise VoterChangeError(error, response.error_message)
            await trio.sleep(0.1)  # retry.backoff.ms


async def add_raft_voter(
    bootstrap: str, voter_id: int, directory_id: Uuid, endpoints: Sequence[tuple[str, str, int]],
    timeout_s: float = VOTER_CHANGE_TIMEOUT_MS / 1000, security: ClientSecurity = PLAINTEXT,
) -> None:
    """``Admin.addRaftVoter``: add ``(voter_id, directory_id)`` with ``endpoints`` (``(listener,
    host, port)``) to the voter set. Raises VoterChangeError for the leader's refusal (e.g.
    DUPLICATE_VOTER), QuorumToolError / OSError as :func:`describe`, ``trio.TooSlowError``
    after ``timeout_s``."""
    request = AddRaftVoterRequest(
        cluster_id=None,
        timeout_ms=VOTER_CHANGE_TIMEOUT_MS,
        voter_id=voter_id,
        voter_directory_id=directory_id,
        listeners=[AddListener(name=name, host=host, port=port) for name, host, port in endpoints],
        ack_when_committed=True,
    )
    await _voter_change(bootstrap, request, timeout_s, security)


async def remove_raft_voter(
    bootstrap: str, voter_id: int, directory_id: Uuid, timeout_s: float = VOTER_CHANGE_TIMEOUT_MS / 1000,
    security: ClientSecurity = PLAINTEXT,
) -> None:
    """``Admin.removeRaftVoter``: remove ``(voter_id, directory_id)`` from the voter set. Raises
    as :func:`add_raft_voter` (VOTER_NOT_FOUND for a replica key that is not a voter)."""
    request = RemoveRaftVoterRequest(cluster_id=None, voter_id=voter_id, voter_directory_id=directory_id)
    await _voter_change(bootstrap, request, timeout_s, security)
