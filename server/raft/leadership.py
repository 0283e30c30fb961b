"""What a leader does besides answering RPCs (Kafka's ``KafkaRaftClient.onBecomeLeader``,
``appendAsLeader`` with its ``BatchAccumulator``, and ``LeaderState``'s high watermark).

Functions of a :class:`~server.raft.context.RaftContext`; each raises
:class:`~server.raft.quorum_state.NotInRoleError` when the replica is not in the role it needs.
"""

from __future__ import annotations

from typing import Any

from kwire.errors import Errors
from server.raft import voter_change
from server.raft.context import RaftContext
from server.raft.control import (
    build_control_batch,
    kraft_version_record,
    leader_change_message,
    voters_record,
)
from server.raft.events import AppendResult, ClientAppend
from server.raft.quorum_state import voters_with_local_entry
from server.raft.roles import Leader
from server.raft.types import ReplicaKey, VoterNode


def become_leader(ctx: RaftContext, now_ms: int) -> None:
    """The Candidate won: the log end offset becomes the epoch start offset and the
    start-of-epoch control batch is appended at once
    (``LeaderState.appendStartOfEpochControlRecords``): a LeaderChange, and at kraft.version 1 a
    KRaftVersion and Voters record when the set came from the bootstrap checkpoint or this
    leader's own entry (endpoints, supported kraft.version range) changed."""
    start = ctx.view.log_end_offset()
    leader = ctx.quorum.become_leader(now_ms, start, ctx.config.append_linger_ms, ctx.config.max_batch_size_bytes)
    voters = leader.voters
    if ctx.control.kraft_version < 1:
        # LeaderState: the in-memory voters a static-to-dynamic upgrade writes, starting with
        # this leader's own directory id, endpoints and supported range
        identity = ctx.identity
        local = VoterNode(ReplicaKey.of(identity.node_id, identity.directory_id), identity.endpoints, identity.supported_kraft_versions)
        leader.volatile_voters = voters.update_voter(local, ignoring_directory_id=True)
    messages: list[Any] = [leader_change_message(ctx.identity.node_id, sorted(voters.ids), sorted(leader.granting))]
    if ctx.control.kraft_version >= 1:
        updated = voters_with_local_entry(ctx.identity, voters)
        if not ctx.control.voters_in_log or updated != voters:
            messages.append(kraft_version_record(ctx.control.kraft_version))
            messages.append(voters_record(updated))
    ctx.view.stage_append(build_control_batch(messages, base_offset=start, epoch=leader.epoch, timestamp_ms=now_ms))


def client_append(ctx: RaftContext, now_ms: int, event: ClientAppend) -> AppendResult:
    """Accept the state machine's records into the leader's accumulator and promise their
    offsets; NOT_LEADER_OR_FOLLOWER off the leader or for another epoch than the event's (as
    ``KafkaRaftClient.prepareAppend`` throws NotLeaderException for a stale epoch),
    INVALID_RECORD for an empty value, RECORD_LIST_TOO_LARGE when they cannot fit one batch."""
    state = ctx.quorum.state
    if not isinstance(state, Leader) or event.epoch not in (None, state.epoch):
        return AppendResult(event.token, -1, -1, state.epoch, Errors.NOT_LEADER_OR_FOLLOWER)
    if not event.values or not all(event.values):  # KRaft data records have a value
        return AppendResult(event.token, -1, -1, state.epoch, Errors.INVALID_RECORD)
    base = ctx.view.log_end_offset() + len(state.accumulator)
    appended_ms = now_ms if event.appended_ms is None else min(event.appended_ms, now_ms)
    if not state.accumulator.append(event.values, appended_ms):  # all or nothing: it cannot be one batch
        return AppendResult(event.token, -1, -1, state.epoch, Errors.RECORD_LIST_TOO_LARGE)
    if event.drain_now:
        state.accumulator.drain_at(now_ms)
    return AppendResult(event.token, base, base + len(event.values) - 1, state.epoch)


def advance_high_watermark(ctx: RaftContext, now_ms: int) -> None:
    """Recompute the high watermark from the voters' end offsets; when it moves, finish a
    committed voter change (or resign once this leader's own removal is committed)."""
    new = ctx.quorum.leader().maybe_advance_high_watermark()
    if new is not None and new > ctx.view.high_watermark:
        ctx.view.update_high_watermark(new)
        voter_change.after_high_watermark(ctx, now_ms)
