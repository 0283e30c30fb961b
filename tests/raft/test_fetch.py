"""Fetch on the leader (validation, divergence, high watermark, long-poll) and on the follower
(append, truncation, high watermark), KafkaRaftClientTest style."""

from __future__ import annotations

import random

import pytest

from kwire.errors import Errors
from kwire.uuid import METADATA_TOPIC_ID
from messages.generated.fetch_request import FetchRequest
from messages.generated.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.update_raft_voter_request import UpdateRaftVoterRequest
from messages.generated.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
from server.raft.control import ControlRecordType, build_data_batch
from server.raft.core import RaftCore
from server.raft.events import ClientAppend, FlushCompleted, RequestReceived, ResponseReceived, Tick
from server.raft.log import MemoryRaftLog
from server.raft.quorum_state import RaftSafetyError
from server.raft.roles import Follower, Leader, Unattached
from server.raft.types import ElectionState, Endpoint, ReplicaIdentity, ReplicaKey, VoterSet
from storage.batch_scan import iter_batches
from storage.control import parse_control_key
from tests.raft.helpers import (
    CLUSTER_ID,
    append_batches,
    begin_epoch_request,
    elect_local_leader,
    fetch_request,
    make_context,
    static_voters,
)


def _part(response: FetchResponse) -> PartitionData:
    return response.responses[0].partitions[0]


def test_start_of_epoch_control_batch() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    (batch,) = list(iter_batches(context.log.read(0, 1 << 20)))
    assert batch.is_control and batch.partition_leader_epoch == leader.epoch
    (record,) = batch.records()
    assert parse_control_key(record.key) == ControlRecordType.LEADER_CHANGE
    assert record.value is not None
    message = LeaderChangeMessage.decode(record.value, 0)
    assert message.leader_id == 1
    assert [v.voter_id for v in message.voters] == [1, 2, 3]
    assert [v.voter_id for v in message.granting_voters] == [1, 2]
    assert leader.epoch_start_offset == 0


def test_high_watermark_needs_a_flushed_majority_past_the_epoch_start() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    assert leader.high_watermark is None
    _, response = context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    assert _part(response).high_watermark == -1  # follower has nothing yet
    assert _part(response).records  # the LeaderChange batch
    _, response = context.request(fetch_request(2, leader.epoch, 1, leader.epoch), 17)
    assert leader.high_watermark == 1 and context.core.high_watermark == 1
    assert _part(response).high_watermark == 1
    # an append counts for the leader only once flushed
    context.auto_flush = False
    context.step(ClientAppend(1, (b"a",)))
    context.request(fetch_request(2, leader.epoch, 2, leader.epoch), 17)
    assert leader.high_watermark == 1
    context.log.flush()
    out = context.step(FlushCompleted())
    assert leader.high_watermark == 2 and out.high_watermark == 2
    assert [b.base_offset for b in out.committed] == [1]


def test_observer_fetch_does_not_move_the_high_watermark() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.request(fetch_request(9, leader.epoch, 1, leader.epoch), 17)
    assert leader.high_watermark is None
    assert ReplicaKey(9) in leader.observer_states


def test_fetch_errors() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    _, response = context.request(fetch_request(2, leader.epoch - 1, 0, 0), 17)
    assert _part(response).error_code == Errors.FENCED_LEADER_EPOCH
    assert _part(response).current_leader.leader_id == 1
    _, response = context.request(fetch_request(2, leader.epoch + 1, 0, 0), 17)
    assert _part(response).error_code == Errors.UNKNOWN_LEADER_EPOCH
    assert _part(response).high_watermark == -1  # errors carry no high watermark
    _, response = context.request(fetch_request(2, leader.epoch, 0, leader.epoch + 1), 17)
    assert response.error_code == Errors.NONE and _part(response).error_code == Errors.INVALID_REQUEST
    _, response = context.request(fetch_request(2, leader.epoch, -1, 0), 17)
    assert _part(response).error_code == Errors.INVALID_REQUEST and _part(response).high_watermark == -1
    bad = fetch_request(2, leader.epoch, 0, 0)
    bad.topics[0].topic_id = bad.topics[0].topic_id.from_longs(0, 2)
    _, response = context.request(bad, 17)
    assert response.error_code == Errors.INVALID_REQUEST
    bad = fetch_request(2, leader.epoch, 0, 0)
    bad.cluster_id = "other"
    _, response = context.request(bad, 17)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID


def test_not_leader() -> None:
    context = make_context(election=ElectionState(3, 2, None))
    assert isinstance(context.core.state, Follower)
    _, response = context.request(fetch_request(3, 3, 0, 0), 17)
    part = _part(response)
    assert part.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 3)


def test_diverging_epoch() -> None:
    log = MemoryRaftLog()
    append_batches(log, [1, 1, 1, 3, 3])  # epoch 1: [0, 3), epoch 3: [3, 5)
    context = make_context(log=log, election=ElectionState(3))
    leader = elect_local_leader(context)
    # the follower has epoch 2 entries up to offset 6 that the leader never had
    _, response = context.request(fetch_request(2, leader.epoch, 6, 2), 17)
    part = _part(response)
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (1, 3)
    assert not part.records
    # same epoch but further than the leader's end of that epoch
    _, response = context.request(fetch_request(2, leader.epoch, 4, 1), 17)
    assert (_part(response).diverging_epoch.epoch, _part(response).diverging_epoch.end_offset) == (1, 3)
    # consistent: records from the fetch offset
    _, response = context.request(fetch_request(2, leader.epoch, 3, 1), 17)
    assert _part(response).diverging_epoch.epoch == -1
    assert next(iter_batches(_part(response).records or b"")).base_offset == 3


def test_long_poll_parks_until_the_log_grows_or_max_wait() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    _, response = context.request(fetch_request(2, leader.epoch, 1, leader.epoch, max_wait_ms=500), 17)
    assert response is None and len(leader.parked) == 1
    out = context.step(ClientAppend(1, (b"x",)))
    woken = [r.response for r in out.replies]
    assert len(woken) == 1 and next(iter_batches(_part(woken[0]).records or b"")).base_offset == 1
    _, response = context.request(fetch_request(2, leader.epoch, 2, leader.epoch, max_wait_ms=500), 17)
    assert response is None
    out = context.tick(499)
    assert not out.replies
    out = context.tick(1)
    assert len(out.replies) == 1 and not _part(out.replies[0].response).records


def test_a_parked_fetch_is_answered_when_the_high_watermark_moves() -> None:
    # KafkaRaftClient.onUpdateLeaderHighWatermark completes every parked fetch, so that
    # followers learn the new high watermark at once (KIP-1166)
    context = make_context(voters=static_voters(1, 2, 3, 4, 5))
    leader = elect_local_leader(context)
    end = context.log.log_end_offset
    _, parked = context.request(fetch_request(2, leader.epoch, end, leader.epoch, max_wait_ms=500), 17)
    assert parked is None and leader.high_watermark is None  # the leader and 2 are not a majority of 5
    out, answered = context.request(fetch_request(3, leader.epoch, end, leader.epoch, max_wait_ms=500), 17)
    assert leader.high_watermark == end
    woken = [r.response for r in out.replies if r.response is not answered]
    assert len(woken) == 1 and _part(woken[0]).high_watermark == end and not _part(woken[0]).records
    assert len(leader.parked) == 1  # 3's own fetch waits: it was parked knowing this high watermark


def test_a_v18_fetch_knowing_an_older_high_watermark_is_answered_at_once() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    end = context.log.log_end_offset
    context.request(fetch_request(2, leader.epoch, end, leader.epoch), 18)
    assert leader.high_watermark == end
    stale = fetch_request(3, leader.epoch, end, leader.epoch, max_wait_ms=500)
    stale.topics[0].partitions[0].high_watermark = end - 1
    _, response = context.request(stale, 18)
    assert response is not None and _part(response).high_watermark == end
    current = fetch_request(3, leader.epoch, end, leader.epoch, max_wait_ms=500)
    current.topics[0].partitions[0].high_watermark = end
    _, response = context.request(current, 18)
    assert response is None  # parked: nothing new to tell


def test_parked_fetches_fail_when_leadership_is_lost() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.request(fetch_request(2, leader.epoch, 1, leader.epoch, max_wait_ms=500), 17)
    out, _ = context.request(begin_epoch_request(3, leader.epoch + 1), 1)
    assert isinstance(context.core.state, Follower)
    parked = [r for r in out.replies if isinstance(r.response, FetchResponse)]
    assert _part(parked[0].response).error_code == Errors.NOT_LEADER_OR_FOLLOWER


def _fetch_response(epoch: int, leader: int, *, records: bytes | None = None, hwm: int = -1,
                    diverging: tuple[int, int] | None = None, error: int = 0) -> FetchResponse:
    part = PartitionData(
        partition_index=0,
        error_code=error,
        high_watermark=hwm,
        current_leader=LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch),
        records=records,
    )
    if diverging is not None:
        part.diverging_epoch = EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
    return FetchResponse(responses=[FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[part])])


def _follower(log: MemoryRaftLog | None = None, epoch: int = 5):  # type: ignore[no-untyped-def]
    context = make_context(log=log, election=ElectionState(epoch, 2, None))
    assert isinstance(context.core.state, Follower)
    out = context.outboxes[-1]
    assert [s.destination_id for s in out.sends] == [2]
    return context, out


def test_follower_appends_and_takes_min_of_leader_hwm_and_its_end() -> None:
    context, out = _follower()
    request = out.sends[0].request.topics[0].partitions[0]
    assert (request.fetch_offset, request.last_fetched_epoch, request.current_leader_epoch) == (0, 0, 5)
    assert out.sends[0].request.replica_state.replica_id == 1
    data = build_data_batch([b"a", b"b"], base_offset=0, epoch=5, timestamp_ms=0)
    out = context.respond(out, 2, _fetch_response(5, 2, records=data, hwm=10))
    assert context.log.log_end_offset == 2
    assert context.core.high_watermark == 2
    # a static voter first tells this leader its directory id (Kafka 4.1+), in place of a fetch
    (update,) = [s for s in out.sends if s.destination_id == 2]
    assert isinstance(update.request, UpdateRaftVoterRequest)
    out = context.respond(out, 2, UpdateRaftVoterResponse(current_leader=CurrentLeader(leader_id=2, leader_epoch=5)))
    # the next fetch goes out once the append is flushed, from the new end offset
    fetches = [s for s in out.sends if s.destination_id == 2]
    assert fetches and fetches[-1].request.topics[0].partitions[0].fetch_offset == 2


def test_follower_waits_for_its_flush_before_fetching_again() -> None:
    context, out = _follower()
    context.auto_flush = False
    data = build_data_batch([b"a"], base_offset=0, epoch=5, timestamp_ms=0)
    out = context.respond(out, 2, _fetch_response(5, 2, records=data))
    assert out.flush and not out.sends
    assert not context.tick().sends
    context.log.flush()
    out = context.step(FlushCompleted())
    assert [s.destination_id for s in out.sends] == [2]


def test_follower_truncates_on_divergence() -> None:
    log = MemoryRaftLog()
    append_batches(log, [1, 1, 2, 2])
    context, out = _follower(log)
    out = context.respond(out, 2, _fetch_response(5, 2, diverging=(1, 3)))
    # local end of epoch 1 is 2: truncate there (min with the leader's 3)
    assert out.truncate_to == 2 and context.log.log_end_offset == 2


def test_follower_refuses_to_truncate_below_its_high_watermark() -> None:
    log = MemoryRaftLog()
    append_batches(log, [1, 1, 2, 2])
    context, out = _follower(log)
    context.core.view.update_high_watermark(3)
    with pytest.raises(RaftSafetyError):
        context.respond(out, 2, _fetch_response(5, 2, diverging=(1, 1)))


def test_follower_learns_a_new_leader_from_a_response() -> None:
    context, out = _follower()
    context.respond(out, 2, _fetch_response(6, 3, error=Errors.FENCED_LEADER_EPOCH))
    state = context.core.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id) == (6, 3)


def test_follower_times_out_into_an_election() -> None:
    context, _ = _follower()
    context.tick(2000)
    assert context.core.state.epoch == 6 and not isinstance(context.core.state, (Follower, Unattached))


def test_a_follower_s_fetch_timeout_ends_in_a_tenth_of_it_centred_on_it() -> None:
    deadlines = []
    for seed in range(80):
        context = make_context(election=ElectionState(5, 2, None), seed=seed)
        state = context.core.state
        assert isinstance(state, Follower)
        deadlines.append(state.fetch_deadline_ms)
        context.tick(state.fetch_deadline_ms - 1)
        assert context.core.state is state  # not a millisecond early
        context.tick(1)
        assert not isinstance(context.core.state, Follower)
    assert min(deadlines) >= 1900 and max(deadlines) <= 2100
    assert len(set(deadlines)) > 40  # spread, so that two followers seldom time out together
    # against a voter that waits exactly the timeout (Kafka's FollowerState), the one that times
    # out second wins (its PreVote reaches a Prospective): kwire must be second about half the time
    later = sum(1 for deadline in deadlines if deadline > 2000)
    assert 25 <= later <= 55, later


def test_each_successful_fetch_draws_a_new_fetch_timeout() -> None:
    context, out = _follower()
    deadlines = []
    for offset in range(10):
        context.now += 100
        (fetch,) = [s for s in out.sends if s.destination_id == 2 and isinstance(s.request, FetchRequest)]
        data = build_data_batch([b"a"], base_offset=offset, epoch=5, timestamp_ms=0)
        out = context.step(ResponseReceived(fetch.correlation_id, 2, _fetch_response(5, 2, records=data)))
        state = context.core.state
        assert isinstance(state, Follower)
        assert context.now + 1900 <= state.fetch_deadline_ms <= context.now + 2100
        deadlines.append(state.fetch_deadline_ms - context.now)
        for update in [s for s in out.sends if isinstance(s.request, UpdateRaftVoterRequest)]:
            answer = UpdateRaftVoterResponse(current_leader=CurrentLeader(leader_id=2, leader_epoch=5))
            out = context.step(ResponseReceived(update.correlation_id, 2, answer))  # then the next Fetch goes out
    assert len(set(deadlines)) > 1


def test_observer_discovers_the_leader() -> None:
    context = make_context(local_id=7)
    assert isinstance(context.core.state, Unattached)
    context.tick(1)
    sends = [s for o in context.outboxes for s in o.sends]
    assert sends, "an observer fetches from some voter"
    target = sends[-1].destination_id
    context.step(
        ResponseReceived(
            sends[-1].correlation_id, target, _fetch_response(4, 2, error=Errors.NOT_LEADER_OR_FOLLOWER)
        )
    )
    state = context.core.state
    assert isinstance(state, Follower) and state.leader_id == 2 and state.epoch == 4
    assert not isinstance(state, Leader)


def test_observer_without_voters_uses_the_bootstrap_servers() -> None:
    with pytest.raises(ValueError, match="bootstrap servers"):
        make_context(local_id=7, voters=VoterSet(()))
    log = MemoryRaftLog()
    core = RaftCore(
        identity=ReplicaIdentity(7, cluster_id="test-cluster"),
        log=log,
        voters=VoterSet(()),
        rng=random.Random(3),
        now_ms=0,
        bootstrap_servers=[Endpoint("CONTROLLER", "boot1", 9093), Endpoint("CONTROLLER", "boot2", 9094)],
    )
    out = core.step(0, Tick())
    (send,) = out.sends
    assert send.destination_id in (-2, -3)
    assert send.endpoint in (Endpoint("CONTROLLER", "boot1", 9093), Endpoint("CONTROLLER", "boot2", 9094))
    response = _fetch_response(3, 1, error=Errors.NOT_LEADER_OR_FOLLOWER)
    response.node_endpoints = [NodeEndpoint(node_id=1, host="leader1", port=9095)]
    out = core.step(5, ResponseReceived(send.correlation_id, send.destination_id, response))
    state = core.state
    assert isinstance(state, Follower) and (state.leader_id, state.epoch) == (1, 3)
    (fetch,) = out.sends
    assert fetch.destination_id == 1 and fetch.endpoint == Endpoint("CONTROLLER", "leader1", 9095)


def test_an_observer_names_a_leader_outside_its_voter_set_with_the_endpoint_it_learned() -> None:
    # an observer with no voters yet follows leader 1, learned from a bootstrap server's answer;
    # another observer asking it must get leader 1's endpoint too: a stock node told of a
    # leader outside its voter set without one stops (KafkaRaftClient.transitionToFollower)
    core = RaftCore(
        identity=ReplicaIdentity(7, cluster_id=CLUSTER_ID),
        log=MemoryRaftLog(),
        voters=VoterSet(()),
        rng=random.Random(3),
        now_ms=0,
        bootstrap_servers=[Endpoint("CONTROLLER", "boot1", 9093)],
    )
    (send,) = core.step(0, Tick()).sends
    response = _fetch_response(3, 1, error=Errors.NOT_LEADER_OR_FOLLOWER)
    response.node_endpoints = [NodeEndpoint(node_id=1, host="leader1", port=9095)]
    core.step(5, ResponseReceived(send.correlation_id, send.destination_id, response))
    assert isinstance(core.state, Follower) and core.state.leader_id == 1
    out = core.step(6, RequestReceived(1, 17, fetch_request(8, 3, 0, 0)))
    (reply,) = out.replies
    partition = reply.response.responses[0].partitions[0]
    assert partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 3)
    assert [(e.node_id, e.host, e.port) for e in reply.response.node_endpoints] == [(1, "leader1", 9095)]
    # on another listener it knows no endpoint of the leader, and names none
    out = core.step(7, RequestReceived(2, 17, fetch_request(8, 3, 0, 0), listener="OTHER"))
    assert out.replies[0].response.node_endpoints == []
