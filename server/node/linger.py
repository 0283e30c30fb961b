"""Appends held for their linger (``controller.quorum.append.linger.ms``) before they reach the
core: :class:`AppendLinger`.

:meth:`Node.append <server.node.driver.Node.append>` does not wake the driving task for each
call. Like Kafka's ``RaftClient.prepareAppend``, which only adds to the accumulator the raft
thread drains, it holds the append, with the time it was made, until the next step of any kind
or until the first held append's linger ends (at once at linger 0, or when the held appends
fill a batch). The core then takes them all in one step (``RaftCore.step_many``), ahead of that
step's other events, and its accumulator lingers from the first one's time
(``ClientAppend.appended_ms``). The batches are the ones an append-per-step driver would make.
A load generator appending every millisecond then costs one turn of the driving task per
linger, not one per append. Appends made while the node waited on the disk or the network go
to the core together too: one step, one Outbox, one batch at linger 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from server.raft.accumulator import MAX_BATCH_SIZE_BYTES, records_size_upper_bound
from server.raft.events import ClientAppend

__all__ = ["AppendLinger", "AppendsWaiting"]


@dataclass(frozen=True, slots=True)
class AppendsWaiting:
    """The first append of a linger is held: the driving task's next deadline moved."""


class AppendLinger:
    """The appends held for the core (module docstring): ``linger_ms`` is
    ``controller.quorum.append.linger.ms``, ``now_ms()`` the node's clock, ``wake()`` posts
    :class:`AppendsWaiting` to a driving task asleep past the held appends' due time."""

    def __init__(self, linger_ms: int, now_ms: Callable[[], int], wake: Callable[[], None]) -> None:
        self.linger_ms = linger_ms
        self._now_ms = now_ms
        self._wake = wake
        self._next_token = 1
        self._appends: list[ClientAppend] = []
        self._held_bytes = 0
        """Their size as the accumulator counts it (``records_size_upper_bound``)."""
        self.asleep_until_ms: int | None = None
        """While the driving task waits for an item: until when (its earliest deadline)."""

    def append(self, values: tuple[bytes, ...], epoch: int) -> int:
        """Hold an append of ``values`` as leader of ``epoch``; returns its token."""
        token, self._next_token = self._next_token, self._next_token + 1
        values = tuple(values)
        self._appends.append(ClientAppend(token, values, epoch=epoch, appended_ms=self._now_ms()))
        self._held_bytes += records_size_upper_bound(values)
        asleep_until = self.asleep_until_ms
        if asleep_until is not None:  # a driving task that is busy looks at the appends before it waits
            due = self.due_ms()
            assert due is not None
            if due < asleep_until:
                self.asleep_until_ms = None  # one wake is enough
                self._wake()
        return token

    def due_ms(self) -> int | None:
        """When the held appends must reach the core: as the first one's linger ends (at once
        at linger 0), or at once when they fill a batch, if no step took them before; None
        while none is held."""
        if not self._appends:
            return None
        first = self._appends[0]
        assert first.appended_ms is not None
        if self._held_bytes >= MAX_BATCH_SIZE_BYTES:
            return first.appended_ms
        return first.appended_ms + self.linger_ms

    def take(self) -> list[ClientAppend]:
        """Every held append, in order, for the next step; none are held afterwards."""
        appends, self._appends, self._held_bytes = self._appends, [], 0
        return appends
