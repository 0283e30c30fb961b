"""A DescribeQuorum client: what Kafka's admin client does for ``describeMetadataQuorum()`` with
``bootstrap.controllers`` (KIP-919), as ``kafka-metadata-quorum.sh --bootstrap-controller``
(``org.apache.kafka.tools.MetadataQuorumCommand``) uses it.

:func:`describe` asks a bootstrap controller for the controllers (DescribeCluster with
EndpointType 2), then the active controller for the quorum (DescribeQuorum on
``__cluster_metadata-0``), and returns a :class:`QuorumView`. ``kwire metadata-quorum``
(:mod:`tools.metadata_quorum`) prints it; ``DevCluster``, the tests and the compat harness use
it to find the leader and compare with the stock tool.
"""

from __future__ import annotations

from dataclasses import dataclass

from kwire.errors import Errors
from kwire.topics import METADATA_PARTITION, METADATA_TOPIC_NAME
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

__all__ = [
    "CONTROLLER_ENDPOINT_TYPE", "QuorumToolError", "QuorumView", "describe",
]

CONTROLLER_ENDPOINT_TYPE = 2


class QuorumToolError(Exception):
    """A failure of the exchange or of its answer, which ``kwire metadata-quorum`` reports on
    stderr with exit code 1 (Kafka's TerseException)."""


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


async def describe(bootstrap: str, timeout_s: float = 30.0) -> QuorumView:
    """Ask the quorum through ``bootstrap`` (``HOST:PORT[,HOST:PORT...]``, IPv6 hosts in
    brackets) as Kafka's admin client does with ``bootstrap.controllers``: the first address
    that accepts a connection answers DescribeCluster, the active controller it names answers
    DescribeQuorum. Runs under Trio; the whole exchange has ``timeout_s`` seconds.

    Raises QuorumToolError for a malformed address, the server's error or no active controller,
    OSError when no address accepts a connection, ``trio.TooSlowError`` after ``timeout_s``."""
    import trio

    from server.net.client import KafkaConnection, open_connection

    addresses = [_parse_host_port(a.strip()) for a in bootstrap.split(",") if a.strip()]
    if not addresses:
        raise QuorumToolError("--bootstrap-controller names no address")
    with trio.fail_after(timeout_s):
        conn: KafkaConnection | None = None
        failure: OSError | None = None
        for host, port in addresses:
            try:
                conn = await open_connection(host, port, client_id="kwire-metadata-quorum")
                break
            except OSError as exc:
                failure = exc
        if conn is None:
            assert failure is not None
            raise failure
        try:
            cluster = await conn.request(
                DescribeClusterRequest(endpoint_type=CONTROLLER_ENDPOINT_TYPE)
            )
        finally:
            await conn.aclose()
        assert isinstance(cluster, DescribeClusterResponse)
        if cluster.error_code != Errors.NONE:
            raise QuorumToolError(
                f"DescribeCluster failed: {Errors.of(cluster.error_code).name}"
                + (f": {cluster.error_message}" if cluster.error_message else "")
            )
        active = next((b for b in cluster.brokers if b.broker_id == cluster.controller_id), None)
        if active is None:
            raise QuorumToolError("the quorum has no active controller reachable on this listener")
        conn = await open_connection(active.host, active.port, client_id="kwire-metadata-quorum")
        try:
            quorum = await conn.request(
                DescribeQuorumRequest([RequestTopic(METADATA_TOPIC_NAME, [RequestPartition(METADATA_PARTITION)])])
            )
        finally:
            await conn.aclose()
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
    return QuorumView(cluster.cluster_id, partition, quorum.nodes)
