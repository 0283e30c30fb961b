"""Upgrading kraft.version on a running quorum: a static quorum (kraft.version 0) becomes a
dynamic one (kraft.version 1, KIP-853) through UpdateFeatures, as Kafka 4.1+ does it
(``KafkaRaftClient.upgradeKRaftVersion``, ``LeaderState.maybeAppendUpgradedKRaftVersion``).

At kraft.version 0 the leader keeps the voters in memory (``Leader.volatile_voters``): its own
entry from the start of its epoch, the others' directory ids, endpoints and supported
kraft.version ranges from their UpdateRaftVoter requests. The upgrade appends one control
batch: a KRaftVersionRecord with the new level and, when the in-memory set differs from the
persisted one, a VotersRecord of it. From then on this leader reports the new version.

Refusals, in order (``UpgradeRefused`` with the error the controller answers):

1. Not the leader, or a leader of an earlier epoch than the controller's claim ->
   NOT_CONTROLLER.
2. An upgrade to another level already appended -> INVALID_UPDATE_VERSION "Invalid concurrent
   upgrade ..."; to the same level: nothing to do.
3. The persisted version equals the target: nothing to do; is above it -> INVALID_UPDATE_VERSION
   "... because the new version is a downgrade".
4. No in-memory voter set -> INVALID_UPDATE_VERSION.
5. The in-memory ids differ from the persisted ones -> UNKNOWN_SERVER_ERROR (Kafka's
   IllegalStateException).
6. A voter whose supported range lacks the target -> INVALID_UPDATE_VERSION "... because not
   all of the voters support it" (static voters support 0-0 until they send UpdateRaftVoter).
7. A voter without a directory id -> UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from typing import Any

from kwire.errors import Errors
from server.raft.context import RaftContext
from server.raft.control import build_control_batch, kraft_version_record, voters_record
from server.raft.roles import Leader

__all__ = ["UpgradeRefused", "append_upgrade", "check_upgrade", "kraft_version_name"]


class UpgradeRefused(Exception):
    """The leader refused the upgrade with ``error`` and ``message``."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def kraft_version_name(level: int) -> str:
    """``KRaftVersion.toString``: ``KRAFT_VERSION_1``."""
    return f"KRAFT_VERSION_{level}"


def check_upgrade(ctx: RaftContext, epoch: int, level: int) -> bool:
    """Checks 1-7 above for moving kraft.version to ``level`` in leader epoch ``epoch``: True
    when :func:`append_upgrade` has a batch to append, False when there is nothing to do.
    Reads state only (callable between steps). Raises UpgradeRefused."""
    state = ctx.quorum.state
    if not isinstance(state, Leader) or epoch < state.epoch:
        raise UpgradeRefused(Errors.NOT_CONTROLLER, "Upgrade kraft version failed because the replica is not the current leader")
    persisted = ctx.control.kraft_version
    name = "kraft.version"
    if state.requested_kraft_version is not None:
        if state.requested_kraft_version == level:
            return False
        raise UpgradeRefused(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid concurrent upgrade of {name} from version "
            f"Version[kraftVersion={kraft_version_name(state.requested_kraft_version)}] to {kraft_version_name(level)}",
        )
    if persisted == level:
        return False
    if persisted > level:
        raise UpgradeRefused(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid upgrade of {name} from version {kraft_version_name(persisted)} to "
            f"{kraft_version_name(level)} because the new version is a downgrade",
        )
    volatile = state.volatile_voters
    if volatile is None:
        raise UpgradeRefused(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid upgrade of {name} from version {kraft_version_name(persisted)} to {kraft_version_name(level)}",
        )
    persisted_voters = ctx.control.voters
    if volatile.ids != persisted_voters.ids:
        raise UpgradeRefused(
            Errors.UNKNOWN_SERVER_ERROR,
            f"Unable to update {name} to {kraft_version_name(level)} due to missing voters "
            f"{sorted(volatile.ids)} compared to {sorted(persisted_voters.ids)}",
        )
    if not all(v.supported_kraft_versions[0] <= level <= v.supported_kraft_versions[1] for v in volatile.voters):
        raise UpgradeRefused(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid upgrade of {name} to {kraft_version_name(level)} because not all of the voters support it",
        )
    if any(v.key.directory_id is None for v in volatile.voters):
        raise UpgradeRefused(Errors.UNKNOWN_SERVER_ERROR, f"Directory id must be known for all of the voters: {volatile}")
    return True


def append_upgrade(ctx: RaftContext, now_ms: int, level: int) -> None:
    """Stage the upgrade's control batch (after the records still lingering), once
    :func:`check_upgrade` said so in this same state. Raises NotInRoleError off the leader."""
    state = ctx.quorum.leader()
    volatile = state.volatile_voters
    assert volatile is not None
    persisted_voters = ctx.control.voters
    state.requested_kraft_version = level
    ctx.view.stage_lingering(state, now_ms)
    offset = ctx.view.log_end_offset()
    messages: list[Any] = [kraft_version_record(level)]
    if volatile != persisted_voters:
        messages.append(voters_record(volatile))
    ctx.view.stage_append(build_control_batch(messages, base_offset=offset, epoch=state.epoch, timestamp_ms=now_ms))
