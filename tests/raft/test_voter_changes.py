"""AddRaftVoter / RemoveRaftVoter on the leader (KIP-853), KafkaRaftClientReconfigTest style."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import ZERO_UUID, Uuid
from messages.generated.add_raft_voter_request import AddRaftVoterRequest, Listener
from messages.generated.api_versions_response import ApiVersionsResponse, SupportedFeatureKey
from messages.generated.fetch_request import FetchRequest
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.update_raft_voter_request import KRaftVersionFeature, UpdateRaftVoterRequest
from messages.generated.update_raft_voter_request import Listener as UpdateListener
from server.raft import voter_change
from server.raft.events import Outbox, ResponseReceived
from server.raft.roles import Follower, Leader, Resigned
from server.raft.types import Endpoint, ReplicaKey, VoterNode, VoterSet
from tests.raft.helpers import CLUSTER_ID, Context, elect_local_leader, fetch_request, make_context

DIRS = {i: Uuid.from_longs(0x77, i) for i in range(1, 6)}


def _voters(*ids: int) -> VoterSet:
    return VoterSet(
        tuple(
            VoterNode(ReplicaKey(i, DIRS[i]), (Endpoint("CONTROLLER", f"host{i}", 9000 + i),), (0, 1))
            for i in ids
        )
    )


def _fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    request = fetch_request(replica, epoch, offset, last_epoch)
    request.topics[0].partitions[0].replica_directory_id = DIRS[replica]
    return request


def _leader(kraft_version: int = 1) -> tuple[Context, Leader]:
    context = make_context(voters=_voters(1, 2, 3), kraft_version=kraft_version, directory_id=DIRS[1])
    leader = elect_local_leader(context)
    end = context.log.log_end_offset
    context.request(_fetch(2, leader.epoch, end, leader.epoch), 17)
    assert leader.high_watermark == end
    return context, leader


def _add(voter: int, directory: Uuid | None = None, listener: str = "CONTROLLER") -> AddRaftVoterRequest:
    return AddRaftVoterRequest(
        cluster_id=CLUSTER_ID,
        timeout_ms=30000,
        voter_id=voter,
        voter_directory_id=DIRS[voter] if directory is None else directory,
        listeners=[Listener(name=listener, host=f"host{voter}", port=9000 + voter)],
    )


def _remove(voter: int, directory: Uuid | None = None) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(
        cluster_id=CLUSTER_ID, voter_id=voter, voter_directory_id=DIRS[voter] if directory is None else directory
    )


def _api_versions(max_kraft: int = 1) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        supported_features=[SupportedFeatureKey(name="kraft.version", min_version=0, max_version=max_kraft)]
    )


def test_add_voter_checks() -> None:
    context, leader = _leader()
    _, response = context.request(_add(2), 0)
    assert response.error_code == Errors.DUPLICATE_VOTER
    assert response.error_message == (  # AddVoterHandler's text
        f"The voter id for ReplicaKey(id=2, directoryId={DIRS[2]}) is already part of the set of voters "
        f"[ReplicaKey(id=1, directoryId={DIRS[1]}), ReplicaKey(id=2, directoryId={DIRS[2]}), "
        f"ReplicaKey(id=3, directoryId={DIRS[3]})]."
    )
    _, response = context.request(_add(4, ZERO_UUID), 0)
    assert response.error_code == Errors.INVALID_REQUEST
    assert response.error_message == "Add voter request didn't include a valid voter"
    _, response = context.request(_add(4, listener="OTHER"), 0)
    assert response.error_code == Errors.INVALID_REQUEST
    assert response.error_message == (  # KafkaRaftClient.handleAddVoterRequest's text
        "Add voter request didn't include the endpoint (Endpoints(endpoints={ListenerName(OTHER)="
        "host4/<unresolved>:9004})) for the default listener ListenerName(CONTROLLER)"
    )
    bad = _add(4)
    bad.cluster_id = "other"
    _, response = context.request(bad, 0)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert response.error_message == f'The given id "other" doesn\'t match the cluster id "{CLUSTER_ID}"'
    bad_removal = _remove(3)
    bad_removal.cluster_id = "other"
    _, response = context.request(bad_removal, 0)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert response.error_message == f'The given id "other" doesn\'t match the cluster id "{CLUSTER_ID}"'


def test_add_voter_needs_kraft_version_1() -> None:
    context, _ = _leader(kraft_version=0)
    _, response = context.request(_add(4), 0)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert "kraft.version feature is 0" in response.error_message
    _, response = context.request(_remove(3), 0)
    assert response.error_code == Errors.UNSUPPORTED_VERSION


def test_not_leader_and_no_high_watermark() -> None:
    context = make_context(voters=_voters(1, 2, 3), kraft_version=1, directory_id=DIRS[1])
    _, response = context.request(_add(4), 0)
    assert (response.error_code, response.error_message) == (Errors.NOT_LEADER_OR_FOLLOWER, "")
    _, response = context.request(_remove(3), 0)
    assert (response.error_code, response.error_message) == (Errors.NOT_LEADER_OR_FOLLOWER, "")
    elect_local_leader(context)
    _, response = context.request(_add(4), 0)
    assert response.error_code == Errors.REQUEST_TIMED_OUT


def test_add_voter_end_to_end() -> None:
    context, leader = _leader()
    end = context.log.log_end_offset
    context.request(_fetch(4, leader.epoch, end, leader.epoch), 17)  # a caught-up observer
    out, response = context.request(_add(4), 0)
    assert response is None
    (send,) = [s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest"]
    assert send.destination_id == 4 and send.endpoint == Endpoint("CONTROLLER", "host4", 9004)
    # a second change must wait
    _, second = context.request(_remove(3), 0)
    assert second.error_code == Errors.REQUEST_TIMED_OUT
    out = context.step(ResponseReceived(send.correlation_id, 4, _api_versions()))
    assert context.core.voters.ids == frozenset({1, 2, 3, 4})
    assert leader.voters.ids == frozenset({1, 2, 3, 4})
    assert context.core.voters.get(4).supported_kraft_versions == (0, 1)  # type: ignore[union-attr]
    assert not out.replies
    record_end = context.log.log_end_offset
    # majority of 4 is 3: the leader and voter 2 are not enough
    context.request(_fetch(2, leader.epoch, record_end, leader.epoch), 17)
    assert leader.high_watermark == end
    out, _ = context.request(_fetch(4, leader.epoch, record_end, leader.epoch), 17)
    assert leader.high_watermark == record_end
    replies = [r.response for r in out.replies if type(r.response).__name__ == "AddRaftVoterResponse"]
    assert replies and replies[0].error_code == Errors.NONE


def test_add_voter_that_is_not_caught_up_times_out() -> None:
    context, leader = _leader()
    out, _ = context.request(_add(4), 0)
    send = next(s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest")
    out = context.step(ResponseReceived(send.correlation_id, 4, _api_versions()))
    assert out.replies[0].response.error_code == Errors.REQUEST_TIMED_OUT
    assert context.core.voters.ids == frozenset({1, 2, 3})


def test_add_voter_that_cannot_run_the_kraft_version() -> None:
    context, leader = _leader()
    end = context.log.log_end_offset
    context.request(_fetch(4, leader.epoch, end, leader.epoch), 17)
    out, _ = context.request(_add(4), 0)
    send = next(s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest")
    out = context.step(ResponseReceived(send.correlation_id, 4, _api_versions(max_kraft=0)))
    assert out.replies[0].response.error_code == Errors.INVALID_REQUEST


def test_a_change_waits_until_the_last_voters_record_commits() -> None:
    """An add that timed out after its VotersRecord was appended leaves the record uncommitted:
    the next change of either kind is refused with the text Kafka's handlers give, the record's
    offset printed as Java prints an Optional."""
    context, leader = _leader()
    end = context.log.log_end_offset
    context.request(_fetch(4, leader.epoch, end, leader.epoch), 17)
    out, _ = context.request(_add(4), 0)
    send = next(s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest")
    context.step(ResponseReceived(send.correlation_id, 4, _api_versions()))
    assert context.log.log_end_offset == end + 1  # the VotersRecord, at offset ``end``
    out = context.tick(2000)
    assert [r.response.error_code for r in out.replies] == [Errors.REQUEST_TIMED_OUT]
    expected = f"Request timed out waiting for voters to commit the latest voter change at Optional[{end}] with HWM {end}"
    for request in (_remove(3), _add(5)):
        _, response = context.request(request, 0)
        assert (response.error_code, response.error_message) == (Errors.REQUEST_TIMED_OUT, expected)


def test_replica_keys_print_as_kafka_prints_them() -> None:
    """``ReplicaKey.toString``; the repr stays Python's, for debugging."""
    assert str(ReplicaKey(2, DIRS[2])) == f"ReplicaKey(id=2, directoryId={DIRS[2]})"
    assert str(ReplicaKey(7)) == "ReplicaKey(id=7, directoryId=<undefined>)"
    assert repr(ReplicaKey(7)) == "ReplicaKey(id=7, directory_id=None)"
    assert _voters(3, 1).keys_text() == f"[ReplicaKey(id=1, directoryId={DIRS[1]}), ReplicaKey(id=3, directoryId={DIRS[3]})]"


def test_voter_change_times_out() -> None:
    context, leader = _leader()
    context.request(_add(4), 0)
    out = context.tick(2000)
    replies = [r.response for r in out.replies if type(r.response).__name__ == "AddRaftVoterResponse"]
    assert replies and replies[0].error_code == Errors.REQUEST_TIMED_OUT


def _key_text(voter: int, directory: Uuid | None = None) -> str:
    return f"ReplicaKey(id={voter}, directoryId={DIRS[voter] if directory is None else directory})"


def test_remove_voter() -> None:
    context, leader = _leader()
    _, response = context.request(_remove(3, Uuid.from_longs(1, 1)), 0)
    assert response.error_code == Errors.VOTER_NOT_FOUND
    # Kafka's text (RemoveVoterHandler), the replica keys as ReplicaKey.toString prints them
    assert response.error_message == (
        f"Cannot remove voter {_key_text(3, Uuid.from_longs(1, 1))} from the set of voters "
        f"[{_key_text(1)}, {_key_text(2)}, {_key_text(3)}]"
    )
    out, response = context.request(_remove(3), 0)
    assert response is None and leader.voters.ids == frozenset({1, 2})
    end = context.log.log_end_offset
    out, _ = context.request(_fetch(2, leader.epoch, end, leader.epoch), 17)
    replies = [r.response for r in out.replies if type(r.response).__name__ == "RemoveRaftVoterResponse"]
    assert replies and replies[0].error_code == Errors.NONE


def test_a_removed_voter_keeps_its_progress_as_an_observer() -> None:
    """``LeaderState.updateVoterAndObserverStates``: a removed voter moves to the observers with
    its fetch state, so adding it straight back does not wait for another fetch."""
    context, leader = _leader()
    end = context.log.log_end_offset
    context.request(_fetch(3, leader.epoch, end, leader.epoch), 17)  # voter 3 caught up
    caught_up = leader.voter_states[3].last_caught_up_ms
    assert caught_up >= 0
    _, response = context.request(_remove(3), 0)
    assert response is None
    context.request(_fetch(2, leader.epoch, context.log.log_end_offset, leader.epoch), 17)  # commits the removal
    assert leader.voters.ids == frozenset({1, 2}) and not voter_change.uncommitted(context.core)
    observer = leader.observer_states[ReplicaKey(3, DIRS[3])]
    assert observer.last_caught_up_ms == caught_up and observer.end_offset == end
    out, response = context.request(_add(3), 0)
    assert response is None
    send = next(s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest")
    context.step(ResponseReceived(send.correlation_id, 3, _api_versions()))
    assert leader.voters.ids == frozenset({1, 2, 3})
    assert ReplicaKey(3, DIRS[3]) not in leader.observer_states


def test_leader_removing_itself_resigns_once_committed() -> None:
    context, leader = _leader()
    out, response = context.request(_remove(1), 0)
    assert response is None and isinstance(context.core.state, Leader)
    end = context.log.log_end_offset
    context.request(_fetch(2, leader.epoch, end, leader.epoch), 17)
    assert isinstance(context.core.state, Leader)  # voters {2, 3}: needs both
    out, _ = context.request(_fetch(3, leader.epoch, end, leader.epoch), 17)
    assert isinstance(context.core.state, Resigned)
    replies = [r.response for r in out.replies if type(r.response).__name__ == "RemoveRaftVoterResponse"]
    assert replies and replies[0].error_code == Errors.NONE
    assert not context.core.quorum.is_voter


def _update(voter: int, epoch: int, *, host: str = "new-host", low: int = 0, high: int = 1,
            listener: str = "CONTROLLER") -> UpdateRaftVoterRequest:
    return UpdateRaftVoterRequest(
        cluster_id=CLUSTER_ID,
        current_leader_epoch=epoch,
        voter_id=voter,
        voter_directory_id=DIRS[voter],
        listeners=[UpdateListener(name=listener, host=host, port=9999)],
        kraft_version_feature=KRaftVersionFeature(min_supported_version=low, max_supported_version=high),
    )


def test_update_voter() -> None:
    context, leader = _leader()
    _, response = context.request(_update(2, leader.epoch - 1), 0)
    assert response.error_code == Errors.FENCED_LEADER_EPOCH
    assert (response.current_leader.leader_id, response.current_leader.host) == (1, "host1")
    _, response = context.request(_update(2, leader.epoch, low=2, high=3), 0)
    assert response.error_code == Errors.INVALID_REQUEST
    _, response = context.request(_update(2, leader.epoch, listener="OTHER"), 0)
    assert response.error_code == Errors.INVALID_REQUEST
    _, response = context.request(_update(4, leader.epoch), 0)
    assert response.error_code == Errors.VOTER_NOT_FOUND
    before = context.log.log_end_offset
    out, response = context.request(_update(2, leader.epoch), 0)
    # answered at once: the voter that asked must keep fetching for the record to commit
    assert response.error_code == Errors.NONE
    assert response.current_leader.leader_epoch == leader.epoch
    assert context.log.log_end_offset == before + 1
    assert context.core.voters.get(2).endpoints == (Endpoint("CONTROLLER", "new-host", 9999),)  # type: ignore[union-attr]
    assert voter_change.uncommitted(context.core)


def test_update_voter_of_a_static_quorum_is_kept_in_memory() -> None:
    # Kafka 4.1+ followers send UpdateRaftVoter to a kraft.version 0 leader too; an error
    # answer stops them (IllegalStateException), so the leader takes it as 4.4's does
    context, leader = _leader(kraft_version=0)
    before = context.log.log_end_offset
    _, response = context.request(_update(2, leader.epoch, low=1, high=1), 0)
    assert response.error_code == Errors.INVALID_REQUEST  # cannot run kraft.version 0
    _, response = context.request(_update(2, leader.epoch, listener="OTHER"), 0)
    assert response.error_code == Errors.INVALID_REQUEST
    _, response = context.request(_update(4, leader.epoch), 0)
    assert response.error_code == Errors.VOTER_NOT_FOUND
    _, response = context.request(_update(2, leader.epoch), 0)
    assert response.error_code == Errors.NONE
    assert context.log.log_end_offset == before  # nothing written
    assert leader.volatile_voters is not None
    assert leader.volatile_voters.get(2).endpoints == (Endpoint("CONTROLLER", "new-host", 9999),)  # type: ignore[union-attr]
    assert context.core.voters.get(2).endpoints == (Endpoint("CONTROLLER", "host2", 9002),)  # type: ignore[union-attr]


def test_follower_with_a_stale_entry_sends_update_raft_voter_in_place_of_a_fetch() -> None:
    from messages.generated.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
    from server.raft.types import ElectionState
    from tests.raft.test_fetch import _fetch_response

    stale = VoterSet(
        tuple(
            VoterNode(ReplicaKey(i, DIRS[i]), (Endpoint("CONTROLLER", f"old{i}", 1000 + i),), (0, 1))
            for i in (1, 2, 3)
        )
    )
    context = make_context(
        voters=stale, kraft_version=1, directory_id=DIRS[1], election=ElectionState(3, 2, None)
    )
    assert voter_change.should_send_update_voter(context.core, Follower(3, 2, 0, None))
    first = context.outboxes[-1]
    assert [type(s.request).__name__ for s in first.sends] == ["FetchRequest"]  # not heard yet
    out = context.respond(first, 2, _fetch_response(3, 2))
    (update,) = [s for s in out.sends if s.destination_id == 2]
    assert type(update.request).__name__ == "UpdateRaftVoterRequest"
    request = update.request
    assert (request.voter_id, request.voter_directory_id, request.current_leader_epoch) == (1, DIRS[1], 3)
    assert [(e.host, e.port) for e in request.listeners] == [("host1", 9001)]
    out = context.respond(out, 2, UpdateRaftVoterResponse(current_leader=CurrentLeader(leader_id=2, leader_epoch=3)))
    assert [type(s.request).__name__ for s in out.sends] == ["FetchRequest"]
    # not again before 3 x fetch.timeout.ms
    out = context.respond(out, 2, _fetch_response(3, 2))
    assert [type(s.request).__name__ for s in out.sends] == ["FetchRequest"]


@pytest.mark.parametrize(
    ("answer", "asks_again"),
    [(Errors.NONE, False), (Errors.UNSUPPORTED_VERSION, False), (Errors.INVALID_REQUEST, True)],
)
def test_static_follower_sends_update_raft_voter_once_per_leader(answer: Errors, asks_again: bool) -> None:
    # Kafka 4.1+ followers of a kraft.version 0 quorum tell each new leader their directory id
    # and endpoints (FollowerState.hasUpdatedLeader), which a static-to-dynamic upgrade needs;
    # NONE or UNSUPPORTED_VERSION ends it for that leader, another error (Kafka 3.9's
    # INVALID_REQUEST) is asked again after 3 x fetch.timeout.ms
    from messages.generated.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
    from server.raft.types import ElectionState
    from tests.raft.test_fetch import _fetch_response

    context = make_context(directory_id=DIRS[1], election=ElectionState(3, 2, None))
    out = context.respond(context.outboxes[-1], 2, _fetch_response(3, 2))
    (update,) = [s for s in out.sends if s.destination_id == 2]
    assert type(update.request).__name__ == "UpdateRaftVoterRequest"
    assert (update.request.voter_id, update.request.voter_directory_id) == (1, DIRS[1])
    feature = update.request.kraft_version_feature
    assert (feature.min_supported_version, feature.max_supported_version) == (0, 1)  # the identity's range
    out = context.respond(
        out, 2, UpdateRaftVoterResponse(error_code=answer, current_leader=CurrentLeader(leader_id=2, leader_epoch=3))
    )
    follower = context.core.state
    assert isinstance(follower, Follower) and follower.has_updated_leader is not asks_again
    sent = [type(s.request).__name__ for s in out.sends]
    for _ in range(8):  # 8 s in 1 s steps (fetch.timeout.ms 2 s): past 3 x fetch.timeout.ms
        if any(type(s.request).__name__ == "FetchRequest" for s in out.sends):
            context.now += 1000  # the leader answers the fetch a second later
            out = context.respond(out, 2, _fetch_response(3, 2))
        else:
            out = context.tick(1000)
        sent.extend(type(s.request).__name__ for s in out.sends)
    assert ("UpdateRaftVoterRequest" in sent) is asks_again, sent
    assert "FetchRequest" in sent


def test_a_leader_alone_for_long_adds_a_voter_without_resigning() -> None:
    # KafkaRaftClient restarts the check-quorum timer of a single-voter leader at every poll;
    # kwire let it expire, so the first added voter made the leader resign at once (epoch bump,
    # NOT_LEADER_OR_FOLLOWER to AddRaftVoter, then DuplicateVoterException from the stock tool)
    context = make_context(voters=_voters(1), kraft_version=1, directory_id=DIRS[1])
    context.tick(0)  # the only voter leads at once
    leader = context.core.state
    assert isinstance(leader, Leader)
    context.request(_fetch(4, leader.epoch, context.log.log_end_offset, leader.epoch), 17)
    context.tick(60_000)  # a minute alone, far past 1.5 x fetch.timeout.ms
    end = context.log.log_end_offset
    context.request(_fetch(4, leader.epoch, end, leader.epoch), 17)  # the caught-up joiner
    out, _ = context.request(_add(4), 0)
    (send,) = [s for s in out.sends if type(s.request).__name__ == "ApiVersionsRequest"]
    context.step(ResponseReceived(send.correlation_id, 4, _api_versions()))
    assert context.core.voters.ids == frozenset({1, 4})
    context.tick(1)
    assert context.core.state is leader and context.core.epoch == leader.epoch
    out, _ = context.request(_fetch(4, leader.epoch, context.log.log_end_offset, leader.epoch), 17)
    replies = [r.response for r in out.replies if type(r.response).__name__ == "AddRaftVoterResponse"]
    assert replies and replies[0].error_code == Errors.NONE
    context.tick(2_000)  # within the check-quorum timeout of the voter's last fetch
    assert context.core.state is leader


def _observer(voters: VoterSet, *, auto_join: bool = True) -> tuple[Context, Outbox]:
    """Node 4 (directory DIRS[4]) observing the dynamic quorum ``voters`` led by 1 in epoch 3,
    after its first successful Fetch."""
    from server.raft.types import ElectionState
    from tests.raft.test_fetch import _fetch_response

    context = make_context(
        local_id=4, voters=voters, kraft_version=1, directory_id=DIRS[4],
        election=ElectionState(3, 1, None), auto_join=auto_join,
    )
    out = context.respond(context.outboxes[-1], 1, _fetch_response(3, 1))
    return context, out


def _sent(out: Outbox) -> list[str]:
    return [type(s.request).__name__ for s in out.sends]


def test_an_observer_with_auto_join_asks_to_be_added_once_per_fetch_timeout() -> None:
    from messages.generated.add_raft_voter_response import AddRaftVoterResponse
    from tests.raft.test_fetch import _fetch_response

    context, out = _observer(_voters(1, 2, 3))
    assert _sent(out) == ["FetchRequest"]  # not before a fetch timeout has passed
    context.now += 2000
    out = context.respond(out, 1, _fetch_response(3, 1))
    assert _sent(out) == ["AddRaftVoterRequest"]
    request = out.sends[0].request
    assert (request.voter_id, request.voter_directory_id, request.ack_when_committed) == (4, DIRS[4], False)
    assert [(e.name, e.host, e.port) for e in request.listeners] == [("CONTROLLER", "host4", 9004)]
    out = context.respond(out, 1, AddRaftVoterResponse(error_code=Errors.REQUEST_TIMED_OUT))
    assert _sent(out) == ["FetchRequest"]  # the next attempt waits another fetch timeout
    out = context.respond(out, 1, _fetch_response(3, 1))
    assert _sent(out) == ["FetchRequest"]


def test_an_observer_whose_id_is_held_by_another_directory_asks_to_remove_it_first() -> None:
    from tests.raft.test_fetch import _fetch_response

    held = VoterSet(tuple(
        VoterNode(ReplicaKey(i, DIRS[5] if i == 4 else DIRS[i]), (Endpoint("CONTROLLER", f"host{i}", 9000 + i),), (0, 1))
        for i in (1, 2, 4)
    ))
    context, out = _observer(held)
    context.now += 2000
    out = context.respond(out, 1, _fetch_response(3, 1))
    assert _sent(out) == ["RemoveRaftVoterRequest"]
    assert (out.sends[0].request.voter_id, out.sends[0].request.voter_directory_id) == (4, DIRS[5])


def test_without_auto_join_an_observer_only_fetches() -> None:
    from tests.raft.test_fetch import _fetch_response

    context, out = _observer(_voters(1, 2, 3), auto_join=False)
    context.now += 10_000
    out = context.respond(out, 1, _fetch_response(3, 1))
    assert _sent(out) == ["FetchRequest"]
