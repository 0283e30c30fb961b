"""The leader's side of a KIP-853 voter change, shared by AddRaftVoter, RemoveRaftVoter and
UpdateRaftVoter (Kafka's ``AddVoterHandler``, ``RemoveVoterHandler``, ``UpdateVoterHandler``
and ``LeaderState``'s voter bookkeeping).

A change is one control batch holding a VotersRecord with the whole new set; the leader counts
the new set from the moment it is appended. At most one change is pending
(:class:`~server.raft.roles.PendingVoterChange` on the :class:`~server.raft.roles.Leader`),
and none may start while the latest VotersRecord is above the high watermark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kwire.errors import Errors
from server.raft.context import RaftContext
from server.raft.control import build_control_batch, voters_record
from server.raft.quorum_state import voters_with_local_entry
from server.raft.roles import Follower
from server.raft.types import VoterSet


def uncommitted(ctx: RaftContext) -> bool:
    """True while the latest VotersRecord in the log is at or above the high watermark."""
    offset = ctx.control.latest_voters_offset()
    return offset is not None and offset >= ctx.view.high_watermark


def cluster_id_text(given: str | None, cluster_id: str | None) -> str:
    """INCONSISTENT_CLUSTER_ID's message of AddRaftVoter and RemoveRaftVoter, as
    ``KafkaRaftClient.handleAddVoterRequest`` / ``handleRemoveVoterRequest`` word it."""
    return f'The given id "{given}" doesn\'t match the cluster id "{cluster_id}"'


def endpoints_text(endpoints: Sequence[tuple[str, str, int]]) -> str:
    """``(listener, host, port)``s as Kafka prints an ``Endpoints`` built from a request:
    ``Endpoints(endpoints={ListenerName(CONTROLLER)=host/<unresolved>:9093})`` (the addresses
    are unresolved ``InetSocketAddress``es). Kafka keeps them in a hash map, so several print in
    its hash order; kwire prints them in the request's order."""
    inner = ", ".join(f"ListenerName({name})={host}/<unresolved>:{port}" for name, host, port in endpoints)
    return f"Endpoints(endpoints={{{inner}}})"


def uncommitted_text(ctx: RaftContext) -> str:
    """REQUEST_TIMED_OUT's message while the latest voter change is uncommitted, as
    ``AddVoterHandler`` / ``RemoveVoterHandler`` word it: the latest VotersRecord's offset
    printed as Java prints an ``Optional``, and the high watermark."""
    offset = ctx.control.latest_voters_offset()
    at = "Optional.empty" if offset is None else f"Optional[{offset}]"
    return f"Request timed out waiting for voters to commit the latest voter change at {at} with HWM {ctx.view.high_watermark}"


def append_voters_record(ctx: RaftContext, voters: VoterSet, now_ms: int) -> int:
    """Leader: drain lingering records, then append a control batch with one VotersRecord of
    ``voters``; returns its offset. A pending change that does not wait for the commit
    (AckWhenCommitted=false) is answered NONE at once. Raises NotInRoleError off the leader."""
    state = ctx.quorum.leader()
    ctx.view.stage_lingering(state, now_ms)
    offset = ctx.view.log_end_offset()
    ctx.view.stage_append(
        build_control_batch([voters_record(voters)], base_offset=offset, epoch=state.epoch, timestamp_ms=now_ms)
    )
    pending = state.pending_voter_change
    if pending is not None:
        pending.record_offset = offset
        if not pending.ack_when_committed:
            finish(ctx, Errors.NONE)
    return offset


def finish(ctx: RaftContext, error: Errors, message: str | None = None) -> None:
    """Answer the pending voter change (if any) with ``error`` and forget it."""
    state = ctx.quorum.leader()
    pending = state.pending_voter_change
    if pending is None:
        return
    state.pending_voter_change = None
    factory: Any = pending.response_factory
    ctx.reply(pending.request_id, factory(error, message))


def after_high_watermark(ctx: RaftContext, now_ms: int) -> None:
    """The leader's high watermark moved: answer a change whose record is now committed, and
    resign once a VotersRecord that removed this leader is committed."""
    state = ctx.quorum.leader()
    hwm = ctx.view.high_watermark
    pending = state.pending_voter_change
    if pending is not None and pending.record_offset is not None and hwm > pending.record_offset:
        finish(ctx, Errors.NONE)
    if state.resign_when_committed is not None and hwm > state.resign_when_committed:
        ctx.quorum.resign(now_ms)


def should_send_update_voter(ctx: RaftContext, state: Follower) -> bool:
    """Whether this follower voter owes its leader an UpdateRaftVoter
    (``KafkaRaftClient.shouldSendUpdateVoteRequest``): at kraft.version >= 1 when its listeners
    or supported kraft.version range differ from its entry in the voter set; at kraft.version 0
    (Kafka 4.1+) until this leader has taken one, so that the leader learns the directory ids
    a static-to-dynamic upgrade needs."""
    if not ctx.quorum.is_voter:
        return False
    if ctx.control.kraft_version < 1:
        return not state.has_updated_leader
    voters = ctx.control.voters
    return voters_with_local_entry(ctx.identity, voters) != voters
