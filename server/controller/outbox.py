"""The controller host's seam with the KRaft core and the driver: what the host reads of the
core (:class:`RaftView`), what it hands over after each poll (:class:`ControllerOutbox`), and
the writer that fills the outbox (:class:`OutboxWriter`): the host's appends, each with its
token and the offsets it will have, and its replies.

The host's append tokens count down from -1, so they never meet a driver's own (tokens >= 0,
such as ``kwire test-raft-server``'s workload). An append whose records are applied ahead of
their commit is replayed into the image at the offsets it will have
(``OffsetControl.next_write_offset``) as it is written to the outbox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from messages.metadata import encode_record
from messages.runtime import Message
from server.controller.offset_control import OffsetControl
from server.controller.result import Record
from server.controller.snapshots import SnapshotToWrite
from server.controller.write_queue import Answer, DeferredWriteQueue
from server.raft.control_state import ControlRecordStateMachine
from server.raft.events import ClientAppend, UpgradeKRaftVersion
from server.raft.log import RaftLog
from server.raft.roles import EpochState
from server.raft.types import LeaderAndEpoch, OffsetAndEpoch, VoterSet

__all__ = ["ControllerOutbox", "OutboxWriter", "RaftView"]


class RaftView(Protocol):
    """What the host reads of the KRaft core it sits beside (``server.raft.core.RaftCore``
    fits). Reading only: the host changes the core solely through its outbox's
    ``raft_events``."""

    @property
    def state(self) -> EpochState:
        """The current role."""

    @property
    def epoch(self) -> int:
        """The current epoch."""

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        """The known leader and the epoch."""

    @property
    def voters(self) -> VoterSet:
        """The newest voter set."""

    @property
    def kraft_version(self) -> int:
        """The finalized kraft.version."""

    @property
    def next_append_offset(self) -> int | None:
        """Where the next append starts on this leader, None elsewhere."""

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark (0 while unknown)."""

    @property
    def control(self) -> ControlRecordStateMachine:
        """The voter set and kraft.version history (``at_offset`` for a snapshot's header)."""

    @property
    def log(self) -> RaftLog:
        """The replicated log (its start offset and latest snapshot id)."""

    def check_kraft_upgrade(self, epoch: int, level: int) -> bool:
        """Whether this leader of ``epoch`` will append kraft.version ``level``."""


@dataclass(slots=True)
class ControllerOutbox:
    """What the driver must do after a ``QuorumController.poll``, in this order:

    1. ``raft_events``: step the core with each (``ClientAppend`` of the controller's writes,
       activation records and NoOps; ``UpgradeKRaftVersion`` before the write that asked for
       it), in order and before any other event reaches the core (consecutive appends may go
       in one step);
    2. ``replies``: answer each request (``(handle, response)``);
    3. ``snapshot``: build it a step at a time between other work, and write it; skip it
       when the log meanwhile starts at or after its offset;
    4. poll again no later than ``next_deadline_ms`` (None: no timer is running).

    ``loaded`` names the snapshot whose load (``QuorumController.load_snapshot``) ended since
    the previous poll: the image is whole and long-lived from there on.
    """

    raft_events: list[ClientAppend | UpgradeKRaftVersion] = field(default_factory=list)
    replies: list[tuple[Any, Message]] = field(default_factory=list)
    snapshot: SnapshotToWrite | None = None
    loaded: OffsetAndEpoch | None = None
    next_deadline_ms: int | None = None


class OutboxWriter:
    """Fills the outbox the driver takes at each poll (module docstring). ``replay(value,
    offset, how)`` applies a record to the image."""

    def __init__(self, raft: RaftView, offsets: OffsetControl, queue: DeferredWriteQueue[Any],
                 replay: Callable[[bytes | None, int, str], None]) -> None:
        self.out = ControllerOutbox()
        self._raft = raft
        self._offsets = offsets
        self._queue = queue
        self._replay = replay
        self._next_token = -1

    def token(self) -> int:
        """A fresh token (an append's, or an answer's that waits for the writes before it)."""
        token = self._next_token
        self._next_token -= 1
        return token

    def reply(self, handle: Any, response: Message) -> None:
        """Answer the request ``handle`` names."""
        self.out.replies.append((handle, response))

    def upgrade(self, level: int) -> None:
        """Ask the core for kraft.version ``level`` before the appends that follow."""
        self.out.raft_events.append(UpgradeKRaftVersion(level))

    def append(self, records: Sequence[Record], answer: Answer | None, on_commit: Callable[[int], None] | None = None,
               *, drain_now: bool = True, ahead: bool = True) -> None:
        """Hand ``records`` to the core as one batch; a write (``answer`` given, or the
        controller's own periodic writes) waits for its commit. ``drain_now``: leave without
        lingering (the writes that came meanwhile share the batch). ``ahead``: apply the
        records to the image now, at the offsets they will have (the log end offset plus
        what is still on its way to the accumulator), else when they commit."""
        token = self.token()
        values = tuple(encode_record(m, v) for m, v in records)
        offset = self._raft.next_append_offset
        assert offset is not None, "only a leader appends"
        first = self._offsets.next_write_offset(offset)
        if ahead:
            for record_offset, value in enumerate(values, first):
                self._replay(value, record_offset, "appended")
        self._offsets.appended(token, first, len(values), self._raft.epoch, ahead=ahead)
        if answer is not None or drain_now:
            self._queue.add(token, answer, on_commit)
        self.out.raft_events.append(ClientAppend(token, values, drain_now=drain_now))

    def take(self) -> ControllerOutbox:
        """The outbox for the driver; a fresh one is filled from here on."""
        out, self.out = self.out, ControllerOutbox()
        self._offsets.handed_over()
        return out
