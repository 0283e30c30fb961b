"""DescribeQuorum (api key 55): the leader's view of replication, for kafka-metadata-quorum.

Versions handled: 0-2 (v1 adds LastFetchTimestamp / LastCaughtUpTimestamp, v2 adds the error
messages, ReplicaDirectoryId and Nodes). Mirrors ``KafkaRaftClient.handleDescribeQuorumRequest``
and ``RaftUtil.singletonDescribeQuorumResponse``.

Steps, each with the error it returns:

1. Not exactly one topic ``__cluster_metadata`` with one partition 0 -> UNKNOWN_TOPIC_OR_PARTITION
   for each partition the request names, under its topic (``DescribeQuorumRequest
   .getPartitionLevelErrorResponse``; a request naming none gets no topics).
2. Not the leader -> partition-level NOT_LEADER_OR_FOLLOWER with its message.
3. Leader: LeaderId = self, LeaderEpoch, HighWatermark (-1 until established in this epoch),
   CurrentVoters (the leader's row has LastFetchTimestamp = LastCaughtUpTimestamp = now and its
   log end offset; unknown offsets are -1), Observers (those that fetched in the last 5
   minutes), ReplicaDirectoryId only at v2, and at v2 Nodes = the voters with all their
   listeners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from kwire.uuid import ZERO_UUID
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from server.raft.common import single_partition
from server.raft.roles import Leader
from server.raft.roles import ReplicaState as LeaderReplicaState
from server.raft.types import (
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    OBSERVER_SESSION_TIMEOUT_MS,
)

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived

VERSIONS = (0, 2)


def _error(error: Errors) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(
        topics=[
            TopicData(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    PartitionData(
                        partition_index=METADATA_PARTITION,
                        error_code=error,
                        error_message=error.message,
                    )
                ],
            )
        ]
    )


def _row(state: LeaderReplicaState, version: int) -> ReplicaState:
    return ReplicaState(
        replica_id=state.key.id,
        replica_directory_id=state.key.directory_id_or_zero if version >= 2 else ZERO_UUID,
        log_end_offset=-1 if state.end_offset is None else state.end_offset,
        last_fetch_timestamp=state.last_fetch_ms,
        last_caught_up_timestamp=state.last_caught_up_ms,
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> DescribeQuorumResponse:
    """Steps 1-3 above (``handleDescribeQuorumRequest``); returns the leader's view of the
    replicas, or a partition-level error."""
    request: DescribeQuorumRequest = event.request
    version = event.api_version
    if single_partition(request.topics, "topic_name", "partition_index") is None:
        error = Errors.UNKNOWN_TOPIC_OR_PARTITION
        return DescribeQuorumResponse(
            topics=[
                TopicData(
                    topic_name=topic.topic_name,
                    partitions=[
                        PartitionData(partition_index=p.partition_index, error_code=error, error_message=error.message)
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ]
        )
    state = ctx.quorum.state
    if not isinstance(state, Leader):
        return _error(Errors.NOT_LEADER_OR_FOLLOWER)
    voters: list[ReplicaState] = []
    for voter_id, replica in state.voter_states.items():
        row = _row(replica, version)
        if voter_id == ctx.identity.node_id:
            row.log_end_offset = ctx.log.log_end_offset
            row.last_fetch_timestamp = now_ms
            row.last_caught_up_timestamp = now_ms
        voters.append(row)
    observers = [
        _row(replica, version)
        for replica in state.observer_states.values()
        if replica.last_fetch_ms >= 0 and now_ms - replica.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS
    ]
    nodes: list[Node] = []
    if version >= 2:
        nodes = [
            Node(
                node_id=voter.key.id,
                listeners=[Listener(name=e.name, host=e.host, port=e.port) for e in voter.endpoints],
            )
            for voter in state.voters.voters
        ]
    return DescribeQuorumResponse(
        topics=[
            TopicData(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    PartitionData(
                        partition_index=METADATA_PARTITION,
                        error_code=Errors.NONE,
                        leader_id=ctx.identity.node_id,
                        leader_epoch=state.epoch,
                        high_watermark=-1 if state.high_watermark is None else state.high_watermark,
                        current_voters=voters,
                        observers=observers,
                    )
                ],
            )
        ],
        nodes=nodes,
    )
