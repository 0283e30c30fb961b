"""Whether this node's controller is the active one, and the moves between active and not:
Kafka's ``ControlManagers.claim`` and ``renounce`` as its ``QuorumMetaLogListener`` calls them
on ``handleLeaderChange``.

* **Claim.** Once the raft core leads an epoch and the host has replayed everything committed
  before the epoch's start offset (where ``KafkaRaftClient`` tells its listener of its own
  leadership), the controller claims the epoch: :meth:`Leadership.follow` returns the records
  it appends first (``ActivationRecordsGenerator``, ``server.controller.activation``), which
  the host appends as one batch. Not while the node stops, nor while an image is rebuilt.
* **Renounce.** Off the leader the controller renounces, and every write waiting for its
  commit is answered NOT_CONTROLLER (:meth:`Leadership.fail_writes`); so are the writes of an
  earlier epoch of this node's when it claims a later one, since they never commit in it.
  Records applied ahead of their commit in an epoch this node no longer leads send the image
  back to the committed one (the host's ``revert``; Kafka's ``renounce`` reverts its timeline
  data structures to the last committed offset).

Sans-IO: it reads the core through :class:`~server.controller.outbox.RaftView` and the host's
replay through :class:`LeadershipHost`, at each call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from server.controller.activation import ActivationRecords
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.offset_control import OffsetControl
from server.controller.operation_context import ControllerLog
from server.controller.outbox import RaftView
from server.controller.responses import not_controller
from server.controller.write_queue import DeferredWriteQueue
from server.raft.roles import Leader

__all__ = ["Leadership", "LeadershipHost"]


class LeadershipHost(Protocol):
    """What the leadership reads of the host, at each call (``QuorumController`` fits)."""

    log: ControllerLog
    stopping: bool
    """The node is stopping: no claim any more."""
    replayed_offset: int
    """The offset after the last committed batch (or snapshot) replayed."""

    @property
    def loading(self) -> bool:
        """An image is being rebuilt and is not whole yet."""


class Leadership:
    """The active-or-not state of node ``node_id``'s ``controller`` beside ``raft`` (module
    docstring). ``offsets`` and ``queue`` are the host's; ``revert(now_ms, reason)`` sends the
    image back to the committed one."""

    def __init__(self, node_id: int, raft: RaftView, controller: ControlManagers, host: LeadershipHost,
                 offsets: OffsetControl, queue: DeferredWriteQueue[Any], *,
                 revert: Callable[[int, str], None]) -> None:
        self._node_id = node_id
        self._raft = raft
        self._controller = controller
        self._host = host
        self._offsets = offsets
        self._queue = queue
        self._revert = revert
        self._elected: tuple[int, int, int] | None = None
        """The epoch this node leads, when it was first seen to lead, and ``replayed_offset`` then."""

    def active_controller(self) -> ControlManagers | None:
        """The controller while this node is the active one and has replayed a
        metadata.version (Kafka's active controller knows it from its first record on)."""
        controller = self._controller
        if (
            not isinstance(self._raft.state, Leader)
            or controller.active_epoch != self._raft.epoch
            or controller.metadata_version is None
        ):
            return None
        return controller

    def leader_epoch(self) -> int | None:
        """The epoch this node leads, None off the leader."""
        state = self._raft.state
        return state.epoch if isinstance(state, Leader) else None

    def claimed(self) -> bool:
        """This node leads and its controller claimed the epoch (its metadata.version may still
        be on its way: the periodic writes wait for it)."""
        return isinstance(self._raft.state, Leader) and self._controller.active_epoch == self._raft.epoch

    def not_controller(self) -> ApiError:
        """NOT_CONTROLLER naming the leader, or none while this node leads without being the
        active controller yet."""
        leader = self._raft.leader_and_epoch.leader_id
        return not_controller(None if leader == self._node_id and self.active_controller() is None else leader)

    def fail_writes(self) -> None:
        """Leadership was lost: every uncommitted write is answered NOT_CONTROLLER (waiting
        requests follow at the next poll, off the active controller)."""
        self._offsets.writes_failed()
        self._queue.fail_all(self.not_controller())

    def follow(self, now_ms: int) -> ActivationRecords | None:
        """Act on the core's role at ``now_ms``: renounce off the leader (going back to the
        committed image first when records of a lost epoch were applied ahead), claim the epoch
        once everything before its start offset is replayed. The activation records when the
        controller claimed an epoch now (``records`` may be empty), else None."""
        state, controller, host = self._raft.state, self._controller, self._host
        if self._offsets.outlived(self.leader_epoch()):
            controller.renounce()
            self._revert(now_ms, "the leadership of the epoch it was appended in was lost")
            if self._queue.pending:
                self.fail_writes()
        if not isinstance(state, Leader):
            controller.renounce()
            if self._queue.pending:
                self.fail_writes()
            return None
        if self._elected is None or self._elected[0] != state.epoch:
            self._elected = (state.epoch, now_ms, host.replayed_offset)
        if host.stopping or host.loading or host.replayed_offset < state.epoch_start_offset:
            return None
        if controller.active_epoch is not None and controller.active_epoch != state.epoch and self._queue.pending:
            self.fail_writes()  # writes of an earlier epoch of ours never commit in this one
        activation = controller.activate(state.epoch, now_ms)
        if activation is None:
            return None
        _, elected_ms, replayed = self._elected
        # the epoch's own first batch may have committed (and been replayed) before the host saw
        # the election, on a single voter always: nothing before the epoch start was left then
        host.log.info("node %d: the active controller of epoch %d, %d ms after its election (%d committed records "
                      "replayed meanwhile up to the epoch start offset %d)", self._node_id, state.epoch,
                      now_ms - elected_ms, max(0, state.epoch_start_offset - replayed), state.epoch_start_offset)
        return activation
