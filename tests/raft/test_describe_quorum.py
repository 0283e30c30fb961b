"""DescribeQuorum content (``KafkaRaftClient.handleDescribeQuorumRequest``,
``RaftUtil.singletonDescribeQuorumResponse``)."""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from server.raft.types import ElectionState
from tests.raft.helpers import elect_local_leader, fetch_request, make_context


def _request(topic: str = "__cluster_metadata") -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[TopicData(topic_name=topic, partitions=[PartitionData(partition_index=0)])]
    )


def test_not_leader() -> None:
    context = make_context(election=ElectionState(3, 2, None))
    _, response = context.request(_request(), 2)
    part = response.topics[0].partitions[0]
    assert part.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert part.error_message == Errors.NOT_LEADER_OR_FOLLOWER.message


def test_unknown_topic() -> None:
    context = make_context()
    elect_local_leader(context)
    _, response = context.request(_request("other"), 2)
    assert response.topics[0].topic_name == "other"
    assert response.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    # the answer mirrors what was asked: nothing asked, nothing answered
    _, response = context.request(DescribeQuorumRequest(), 2)
    assert response.topics == []


def test_leader_view() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.now = 5000
    _, response = context.request(_request(), 2)
    part = response.topics[0].partitions[0]
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (1, leader.epoch, -1)
    rows = {r.replica_id: r for r in part.current_voters}
    assert set(rows) == {1, 2, 3}
    assert rows[1].log_end_offset == 1
    assert rows[1].last_fetch_timestamp == 5000 and rows[1].last_caught_up_timestamp == 5000
    assert rows[2].log_end_offset == -1 and rows[2].last_fetch_timestamp == -1
    assert [n.node_id for n in response.nodes] == [1, 2, 3]
    assert response.nodes[1].listeners[0].port == 9002

    context.now = 6000
    context.request(fetch_request(2, leader.epoch, 1, leader.epoch), 17)
    context.request(fetch_request(8, leader.epoch, 1, leader.epoch), 17)
    context.now = 7000
    _, response = context.request(_request(), 1)
    part = response.topics[0].partitions[0]
    assert part.high_watermark == 1
    rows = {r.replica_id: r for r in part.current_voters}
    assert rows[2].log_end_offset == 1 and rows[2].last_fetch_timestamp == 6000
    assert rows[2].last_caught_up_timestamp == 6000
    assert [o.replica_id for o in part.observers] == [8]
    assert response.nodes == []  # v1 has no Nodes
    response.encode(1)
    # observers that stopped fetching 5 minutes ago are dropped
    context.now = 6000 + 300_000
    _, response = context.request(_request(), 2)
    assert response.topics[0].partitions[0].observers == []
    response.encode(2)
