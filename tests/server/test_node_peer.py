"""The node's outbound side towards one peer (server.node.peer.Peer)."""

from __future__ import annotations

import trio

from kwire.api_keys import ApiKey
from messages.generated.vote_request import PartitionData, TopicData, VoteRequest
from messages.generated.vote_response import VoteResponse
from server.config import Listener
from server.net import serve
from server.net.dispatcher import HandlerTable
from server.raft.events import FailureReason, OutboundRequest, RequestFailed, ResponseReceived
from server.raft.types import Endpoint

LOCAL = [Listener("CONTROLLER", "127.0.0.1", 0)]


class _Recorder:
    """Collects what the peer posts back, as the node's event channel would."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def _post(self, event: object) -> None:
        self.events.append(event)


async def _exchange(request: VoteRequest) -> object:
    from server.node.peer import Peer

    async def vote(_request: object, _ctx: object) -> VoteResponse:
        return VoteResponse()

    table = HandlerTable()
    table.register(ApiKey.VOTE, (0, 1), vote)  # a Kafka 3.9 voter: no Vote v2, so no pre-vote
    async with trio.open_nursery() as nursery:
        running = await nursery.start(lambda task_status: serve(LOCAL, table, task_status=task_status))
        node = _Recorder()
        peer = Peer(2, node._post, "raft-client-1")
        outbound = OutboundRequest(7, 2, Endpoint("CONTROLLER", "127.0.0.1", running.port()), request, 2000)
        event = await peer._exchange(outbound)
        if peer.connection is not None:
            await peer.connection.aclose()
        nursery.cancel_scope.cancel()
    return event


async def test_a_pre_vote_to_a_voter_without_vote_v2_fails_as_unsupported_version():
    request = VoteRequest(topics=[TopicData("__cluster_metadata", [PartitionData(pre_vote=True)])])
    event = await _exchange(request)
    assert isinstance(event, RequestFailed)
    assert event.reason == FailureReason.UNSUPPORTED_VERSION and event.correlation_id == 7


async def test_an_ordinary_vote_to_the_same_voter_goes_through():
    request = VoteRequest(topics=[TopicData("__cluster_metadata", [PartitionData()])])
    event = await _exchange(request)
    assert isinstance(event, ResponseReceived) and isinstance(event.response, VoteResponse)


async def test_a_peer_restarted_on_the_same_address_is_reached_on_a_new_connection():
    # the idle connection to a killed node fails on first use; the request goes once more on a
    # new connection to the node now listening there (a lost-disk voter restarted on its port)
    from server.node.peer import Peer

    async def vote(_request: object, _ctx: object) -> VoteResponse:
        return VoteResponse()

    table = HandlerTable()
    table.register(ApiKey.VOTE, (0, 1), vote)
    request = VoteRequest(topics=[TopicData("__cluster_metadata", [PartitionData()])])
    node = _Recorder()
    peer = Peer(2, node._post, "raft-client-1")
    async with trio.open_nursery() as nursery:
        running = await nursery.start(lambda task_status: serve(LOCAL, table, task_status=task_status))
        port = running.port()
        endpoint = Endpoint("CONTROLLER", "127.0.0.1", port)
        event = await peer._exchange(OutboundRequest(1, 2, endpoint, request, 2000))
        assert isinstance(event, ResponseReceived)
        nursery.cancel_scope.cancel()  # the node goes away; the peer's connection stays idle
    assert peer.connection is not None and not peer.connection.closed
    async with trio.open_nursery() as nursery:
        again = [Listener("CONTROLLER", "127.0.0.1", port)]
        await nursery.start(lambda task_status: serve(again, table, task_status=task_status))
        event = await peer._exchange(OutboundRequest(2, 2, endpoint, request, 2000))
        assert isinstance(event, ResponseReceived) and event.correlation_id == 2
        if peer.connection is not None:
            await peer.connection.aclose()
        nursery.cancel_scope.cancel()
