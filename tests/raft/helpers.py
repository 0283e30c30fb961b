"""A tiny driver for unit tests of ``RaftCore`` (in the spirit of Kafka's RaftClientTestContext):
build a core over a ``MemoryRaftLog``, feed it events, apply each Outbox as the contract says."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kwire.uuid import METADATA_TOPIC_ID, ZERO_UUID, Uuid
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.begin_quorum_epoch_request import PartitionData as BeginPartition
from messages.generated.begin_quorum_epoch_request import TopicData as BeginTopic
from messages.generated.fetch_request import FetchPartition, FetchRequest, FetchTopic
from messages.generated.fetch_request import ReplicaState as FetchReplicaState
from messages.generated.vote_request import PartitionData as VotePartition
from messages.generated.vote_request import TopicData as VoteTopic
from messages.generated.vote_request import VoteRequest
from messages.generated.vote_response import PartitionData as VoteResponsePartition
from messages.generated.vote_response import TopicData as VoteResponseTopic
from messages.generated.vote_response import VoteResponse
from server.raft.control import build_control_batch, build_data_batch, leader_change_message
from server.raft.core import RaftCore
from server.raft.events import (
    AppendResult,
    CommittedBatch,
    Event,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    Reply,
    RequestReceived,
    ResponseReceived,
    Tick,
)
from server.raft.log import MemoryRaftLog
from server.raft.outbox import apply_log_changes, apply_now
from server.raft.roles import Candidate, Leader
from server.raft.types import (
    METADATA_TOPIC_NAME,
    ElectionState,
    Endpoint,
    OffsetAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    VoterSet,
)

CLUSTER_ID = "test-cluster"


def static_voters(*ids: int) -> VoterSet:
    return VoterSet.static({i: (f"host{i}", 9000 + i) for i in ids})


@dataclass
class Context:
    """A core over a ``MemoryRaftLog``; Outboxes are applied through ``server.raft.outbox``
    (the election state a test can read in ``elections``; messages stay in the Outboxes)."""

    core: RaftCore
    log: MemoryRaftLog
    now: int = 0
    next_request_id: int = 1
    outboxes: list[Outbox] = field(default_factory=list)
    auto_flush: bool = True
    elections: list[ElectionState] = field(default_factory=list)

    async def persist_election(self, election: ElectionState) -> None:
        self.elections.append(election)

    async def write_log(self, out: Outbox) -> None:
        apply_log_changes(self.log, out)

    def send(self, request: OutboundRequest) -> None:
        pass  # the test answers from the Outbox

    def reply(self, reply: Reply) -> None:
        pass

    async def flush(self) -> None:
        if self.auto_flush:
            self.log.flush()

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        pass

    def commit(self, batch: CommittedBatch) -> None:
        pass

    def append_result(self, result: AppendResult) -> None:
        pass

    def schedule(self, deadline_ms: int | None) -> None:
        pass  # the test moves time itself

    def step(self, event: Event) -> Outbox:
        out = self.core.step(self.now, event)
        apply_now(out, self)
        self.outboxes.append(out)
        if out.flush and self.auto_flush:
            follow = self.step(FlushCompleted())
            out.replies.extend(follow.replies)
            out.sends.extend(follow.sends)
            out.committed.extend(follow.committed)
        return out

    def tick(self, advance_ms: int = 0) -> Outbox:
        self.now += advance_ms
        return self.step(Tick())

    def request(self, message: Any, version: int) -> tuple[Outbox, Any]:
        """Deliver a request; returns the Outbox and the response (None if parked)."""
        request_id = self.next_request_id
        self.next_request_id += 1
        out = self.step(RequestReceived(request_id, version, message))
        replies = [r.response for r in out.replies if r.request_id == request_id]
        return out, (replies[0] if replies else None)

    def respond(self, out: Outbox, destination: int, response: Any) -> Outbox:
        send = next(s for s in out.sends if s.destination_id == destination)
        return self.step(ResponseReceived(send.correlation_id, destination, response))


def make_context(
    local_id: int = 1,
    voters: VoterSet | None = None,
    *,
    election: ElectionState | None = None,
    log: MemoryRaftLog | None = None,
    pre_vote: bool = False,
    kraft_version: int = 0,
    seed: int = 1,
    directory_id: Uuid = ZERO_UUID,
    append_linger_ms: int = 0,
    max_batch_size_bytes: int = 8 * 1024 * 1024,
    auto_join: bool = False,
) -> Context:
    log = log or MemoryRaftLog()
    core = RaftCore(
        identity=ReplicaIdentity(
            local_id,
            directory_id=directory_id,
            cluster_id=CLUSTER_ID,
            endpoints=(Endpoint("CONTROLLER", f"host{local_id}", 9000 + local_id),),
        ),
        log=log,
        voters=voters or static_voters(1, 2, 3),
        rng=random.Random(seed),
        now_ms=0,
        election=election,
        kraft_version=kraft_version,
        config=QuorumConfig(
            pre_vote=pre_vote, append_linger_ms=append_linger_ms, auto_join=auto_join,
            max_batch_size_bytes=max_batch_size_bytes,
        ),
    )
    context = Context(core, log)
    context.step(Tick())
    return context


def append_batches(log: MemoryRaftLog, epochs: list[int]) -> None:
    """One single-record data batch per entry, with that epoch, flushed."""
    for epoch in epochs:
        offset = log.log_end_offset
        log.append(build_data_batch([f"v{offset}".encode()], base_offset=offset, epoch=epoch, timestamp_ms=0))
    log.flush()


def append_leader_change(log: MemoryRaftLog, epoch: int, leader: int) -> None:
    offset = log.log_end_offset
    log.append(
        build_control_batch(
            [leader_change_message(leader, [1, 2, 3], [leader])], base_offset=offset, epoch=epoch, timestamp_ms=0
        )
    )
    log.flush()


def vote_request(
    candidate: int,
    epoch: int,
    last_epoch: int,
    last_offset: int,
    *,
    voter_id: int = 1,
    pre_vote: bool = False,
    cluster_id: str | None = CLUSTER_ID,
) -> VoteRequest:
    return VoteRequest(
        cluster_id=cluster_id,
        voter_id=voter_id,
        topics=[
            VoteTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    VotePartition(
                        partition_index=0,
                        replica_epoch=epoch,
                        replica_id=candidate,
                        replica_directory_id=ZERO_UUID,
                        voter_directory_id=ZERO_UUID,
                        last_offset_epoch=last_epoch,
                        last_offset=last_offset,
                        pre_vote=pre_vote,
                    )
                ],
            )
        ],
    )


def vote_response(epoch: int, granted: bool, leader_id: int = -1, error: int = 0) -> VoteResponse:
    return VoteResponse(
        topics=[
            VoteResponseTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    VoteResponsePartition(
                        partition_index=0,
                        error_code=error,
                        leader_id=leader_id,
                        leader_epoch=epoch,
                        vote_granted=granted,
                    )
                ],
            )
        ]
    )


def begin_epoch_request(leader: int, epoch: int, *, voter_id: int = 1) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(
        cluster_id=CLUSTER_ID,
        voter_id=voter_id,
        topics=[
            BeginTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[BeginPartition(partition_index=0, leader_id=leader, leader_epoch=epoch)],
            )
        ],
    )


def fetch_request(
    replica_id: int,
    epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    *,
    max_wait_ms: int = 0,
) -> FetchRequest:
    return FetchRequest(
        cluster_id=CLUSTER_ID,
        replica_state=FetchReplicaState(replica_id=replica_id),
        max_wait_ms=max_wait_ms,
        topics=[
            FetchTopic(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    FetchPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        fetch_offset=fetch_offset,
                        last_fetched_epoch=last_fetched_epoch,
                    )
                ],
            )
        ],
    )


def elect_local_leader(context: Context) -> Leader:
    """Run an election (pre-vote off) in which every other voter grants its vote."""
    core = context.core
    out = context.tick(3000)
    state = core.state
    assert isinstance(state, Candidate), state
    for voter_id in sorted(core.voters.ids - {core.identity.node_id}):
        if not isinstance(core.state, Candidate):
            break
        out2 = context.respond(out, voter_id, vote_response(state.epoch, True))
        out.sends.extend(out2.sends)
    assert isinstance(core.state, Leader), core.state
    return core.state
