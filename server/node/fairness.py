"""The fairness rules of the driving task's loop: which item it takes next, and when it pauses
so that the other tasks run (:class:`Turns`).

Everything that happens to the node reaches its driving task as an item on one memory channel
(requests, raft answers, the snapshot pipeline's events, a wake for held appends); a deadline
(the core's, the host's, the log cleaner's, the held appends') becomes a ``Tick``. What waits
goes first, but at most :data:`MAX_EVENTS_BEFORE_DUE_DEADLINE` items in a row while a deadline
is due. Items of one kind that queued together are taken together (:meth:`Turns.queued`). A
deadline's step that ran past :data:`BUSY_STEP_S` and will come again at once pauses the task
(:meth:`Turns.pause_after`).

Requests reach that channel from the connections through :func:`forward_requests`, every one
waiting at a turn of Trio's loop: a node under a storm of broker requests (a thousand brokers
registering) must not take a turn of the loop per request, or a follower's Fetch waits behind
every request that came before it, for seconds, and the followers elect another leader (Kafka
answers raft RPCs on ``KafkaRaftClient``'s own thread, never behind the controller's queue).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from server.node.linger import AppendLinger
from server.raft.events import Tick

__all__ = ["BUSY_STEP_S", "MAX_BUSY_PAUSE_S", "MAX_EVENTS_BEFORE_DUE_DEADLINE", "Turns", "forward_requests"]

T = TypeVar("T")

BUSY_STEP_S = 0.01
"""A deadline's step (s) past which the driving task pauses, a tenth of the step and at most
``MAX_BUSY_PAUSE_S``, before its next turn when that turn would be more of the same work (an
image being loaded, committed batches still to deliver), so that the connection tasks read
what came meanwhile."""

MAX_BUSY_PAUSE_S = 0.02

MAX_EVENTS_BEFORE_DUE_DEADLINE = 64
"""Events the driving task takes off its channel, while a deadline is already due, before it
acts on the deadline: what waits goes first, but a steady stream of requests must not hold
back the next slice of an image being loaded or the core's timers for ever."""


async def forward_requests(receive: trio.MemoryReceiveChannel[T], post: Callable[[T], None]) -> None:
    """Hand every request the connections send on ``receive`` (an unbuffered channel: each
    connection waits until its request is taken) to ``post`` (onto the driving task's channel),
    in the order they were sent, until ``receive`` closes. All that wait are taken at once:
    each ``receive`` of a Trio memory channel ends with a turn of the loop, and one request per
    turn kept a thousand connections' requests trickling in for seconds (module docstring)."""
    async for item in receive:
        post(item)
        while True:
            try:
                item = receive.receive_nowait()
            except trio.WouldBlock:
                break
            except trio.EndOfChannel:  # the last sender closed while the waiting ones were taken
                return
            post(item)


class Turns:
    """The driving task's next item off ``receive`` (module docstring): ``now_ms()`` is the
    node's clock and ``trio_time(ms)`` converts one of its times to Trio's; while the task
    sleeps, ``linger`` knows until when (a held append due earlier wakes it)."""

    def __init__(
        self,
        receive: trio.MemoryReceiveChannel[Any],
        now_ms: Callable[[], int],
        trio_time: Callable[[int], float],
        linger: AppendLinger,
    ) -> None:
        self._receive = receive
        self._now_ms = now_ms
        self._trio_time = trio_time
        self._linger = linger
        self._held: Any = None
        """An item taken off the channel while collecting queued items, handled next."""
        self._overdue_turns = 0
        """Items taken in a row while a deadline was due (``MAX_EVENTS_BEFORE_DUE_DEADLINE``)."""

    async def next(self, due: list[int]) -> Any:
        """The next item to handle; a ``Tick`` when a deadline of ``due`` (ms) comes first, or
        when one is due and enough items went before it."""
        if self._held is not None:
            item, self._held = self._held, None
            return item
        overdue = bool(due) and min(due) <= self._now_ms()
        try:  # what is waiting goes first (a due deadline must not starve it), up to a point
            if overdue and self._overdue_turns >= MAX_EVENTS_BEFORE_DUE_DEADLINE:
                raise trio.WouldBlock
            item = self._receive.receive_nowait()
            self._overdue_turns = self._overdue_turns + 1 if overdue else 0
            return item
        except trio.WouldBlock:
            self._overdue_turns = 0
        item = Tick()
        self._linger.asleep_until_ms = min(due)
        try:
            with trio.move_on_at(self._trio_time(self._linger.asleep_until_ms)):
                item = await self._receive.receive()
        finally:
            self._linger.asleep_until_ms = None
        return item

    def queued(self, kind: type[T]) -> list[T]:
        """The items of ``kind`` waiting on the channel up to the first other item (held for
        the next turn): appends that queued while the node waited go to the core in one step
        (one batch); controller requests reach the host before it is polled, so that their
        writes share a batch too."""
        items: list[T] = []
        while True:
            try:
                item = self._receive.receive_nowait()
            except trio.WouldBlock:
                return items
            if not isinstance(item, kind):
                self._held = item
                return items
            items.append(item)

    @staticmethod
    async def pause_after(busy_s: float, again: bool) -> None:
        """After a deadline's step of ``busy_s`` seconds: when it ran long and ``again`` (an
        image being loaded, committed batches still to deliver) it may come again at once.
        Trio runs each task once per turn, and each read of a socket ends a turn: without a
        pause the connections read 64 KiB of a Fetch response per busy step, and a catch-up
        takes minutes."""
        if busy_s > BUSY_STEP_S and again:
            await trio.sleep(min(busy_s / 10, MAX_BUSY_PAUSE_S))
