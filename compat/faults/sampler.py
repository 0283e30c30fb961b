"""What each voter says about the quorum, sampled while a fault run goes on, for the run's report
(:mod:`compat.faults.report`).

Every ``interval_s`` (250 ms) the sampler asks every node, at once and each on a connection of
its own kept open between samples, two things a client may ask a controller:

* DescribeQuorum on ``__cluster_metadata-0``: only the leader answers it (Kafka's
  ``KafkaRaftClient.handleDescribeQuorumRequest`` answers ``NOT_LEADER_OR_FOLLOWER`` on any
  other node), with its epoch, its high watermark and each voter's log end offset as the leader
  last saw it in a fetch;
* DescribeCluster (controller endpoints, KIP-919) from a node that did not answer as leader:
  the ``controller_id`` it names is the leader it follows, ``-1`` (or ``NOT_CONTROLLER``) when
  it knows none -- it is then a candidate, a prospective candidate (KIP-996) or unattached.

A :class:`Sample` per node and tick keeps the role the answers show: ``leader``, ``follower``,
``electing`` (no leader known) or ``down`` (no answer within the sample's timeout: a process
killed or stopped, or cut off from the client). Stock Kafka serves a follower's own high
watermark only over JMX, so the high watermark sampled is the leader's; the voters' progress
is their log end offsets in the leader's view (``log_end_offsets``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from kwire.errors import Errors
from kwire.topics import METADATA_PARTITION, METADATA_TOPIC_NAME
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from server.net.client import open_connection

CONTROLLER_ENDPOINT_TYPE = 2
"""DescribeCluster's EndpointType for controllers (KIP-919)."""
ROLES = ("leader", "follower", "electing", "down")


@dataclass
class Sample:
    """One node's answers at ``at_s`` (``time.monotonic()`` seconds): its ``role`` (one of
    :data:`ROLES`), the ``leader`` it names (-1: none known or no answer) and, when it answered
    as leader, its ``epoch``, ``high_watermark`` and every voter's log end offset (node id ->
    offset; -1 when the leader has not seen the voter fetch)."""

    at_s: float
    node: int
    role: str
    leader: int = -1
    epoch: int = -1
    high_watermark: int = -1
    log_end_offsets: dict[int, int] = field(default_factory=dict)


class QuorumSampler:
    """Samples the nodes at ``addresses`` (node id -> ``(host, port)``) every ``interval_s``
    until :meth:`stop`; run :meth:`run` in the thread (and network namespace) of the client.
    ``samples`` grows as it goes."""

    def __init__(self, addresses: Mapping[int, tuple[str, int]], *, interval_s: float = 0.25,
                 timeout_s: float = 0.5) -> None:
        self.addresses = dict(addresses)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.samples: list[Sample] = []
        self._stopped = threading.Event()
        self._connections: dict[int, Any] = {}

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        trio.run(self._run)

    async def _run(self) -> None:
        try:
            while not self._stopped.is_set():
                tick = time.monotonic()
                found: list[Sample] = []
                async with trio.open_nursery() as nursery:
                    for node in sorted(self.addresses):
                        nursery.start_soon(self._sample, node, tick, found)
                self.samples.extend(sorted(found, key=lambda s: s.node))
                await trio.sleep(max(0.0, self.interval_s - (time.monotonic() - tick)))
        finally:
            for node in list(self._connections):
                await self._drop(node)

    async def _drop(self, node: int) -> None:
        connection = self._connections.pop(node, None)
        if connection is not None:
            with trio.move_on_after(0.5) as scope:
                scope.shield = True
                try:
                    await connection.aclose()
                except Exception:  # noqa: S110 -- a broken connection is dropped either way
                    pass

    async def _ask(self, node: int, request: Any) -> Any:
        connection = self._connections.get(node)
        if connection is None:
            host, port = self.addresses[node]
            connection = await open_connection(host, port, "kwire-fault-sampler",
                                               request_timeout_ms=int(self.timeout_s * 1000))
            self._connections[node] = connection
        return await connection.request(request)

    async def _sample(self, node: int, tick: float, found: list[Sample]) -> None:
        sample = Sample(tick, node, "down")
        try:
            with trio.fail_after(self.timeout_s):
                quorum = await self._ask(node, DescribeQuorumRequest(
                    [TopicData(METADATA_TOPIC_NAME, [PartitionData(METADATA_PARTITION)])]))
                partition = quorum.topics[0].partitions[0] if quorum.topics and quorum.topics[0].partitions else None
                if quorum.error_code == Errors.NONE and partition is not None and partition.error_code == Errors.NONE:
                    sample.role, sample.leader, sample.epoch = "leader", partition.leader_id, partition.leader_epoch
                    sample.high_watermark = partition.high_watermark
                    sample.log_end_offsets = {v.replica_id: v.log_end_offset for v in partition.current_voters}
                    if partition.leader_id != node:  # a node answering for another (never seen)
                        sample.role = "follower"
                else:
                    cluster = await self._ask(node, DescribeClusterRequest(endpoint_type=CONTROLLER_ENDPOINT_TYPE))
                    known = cluster.error_code == Errors.NONE and cluster.controller_id >= 0
                    sample.leader = cluster.controller_id if known else -1
                    sample.role = "follower" if known and cluster.controller_id != node else "electing"
        except Exception:  # no answer in time, or the connection broke: down as the client sees it
            sample.role, sample.leader = "down", -1
            await self._drop(node)
        found.append(sample)
