"""The active controller's writes waiting for their batch to commit, and the requests waiting
for them: Kafka's ``DeferredEventQueue`` (``add`` / ``completeUpTo`` / ``failAll``) with the
controller host's write barrier beside it.

Each entry is keyed by the token of the host's append it waits for (``ClientAppend.token``,
negative) or, for an answer that waits for every write before it (a read or a write that
wrote nothing on the active controller), by a token of its own; entries complete in the order
they were added. An entry learns its batch's last offset when the append lands
(:meth:`DeferredWriteQueue.landed`), or is given it when added (an answer after writes), and
completes once the committed offset reaches it (:meth:`DeferredWriteQueue.complete_up_to`):
first its ``on_commit`` hears the offset, then its ``answer`` hears None. An append the core
refused, and every entry when the leadership is lost, is answered with the error given
(NOT_CONTROLLER).

The barrier: a write that asks for a kraft.version upgrade is not applied ahead of its commit
(the control batch before it moves its offsets), and after going back to the committed image
nothing is; requests that arrive then wait, in arrival order, until no write is uncommitted
(:attr:`DeferredWriteQueue.blocked`). The queue reads no clock and knows nothing of the image.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from server.controller.errors import ApiError

__all__ = ["Answer", "DeferredWrite", "DeferredWriteQueue"]

Answer = Callable[[ApiError | None], None]
"""Hears a write's outcome: None once its batch committed, else the error it failed with."""

R = TypeVar("R")


@dataclass(slots=True)
class DeferredWrite:
    """A write whose batch is on its way to the log: ``answer`` (None for the controller's own
    writes) hears the outcome once the batch up to ``last_offset`` committed, ``on_commit`` the
    batch's last offset. ``last_offset`` is None until the append lands."""

    answer: Answer | None
    on_commit: Callable[[int], None] | None = None
    last_offset: int | None = None


class DeferredWriteQueue(Generic[R]):
    """Uncommitted writes by token (module docstring), and the requests (``R``) waiting
    behind the barrier."""

    def __init__(self) -> None:
        self._writes: dict[int, DeferredWrite] = {}
        self.waiting: deque[R] = deque()
        """Requests waiting, in arrival order, for every write before them to commit."""
        self.barrier = False
        """Requests wait in :attr:`waiting` until no write is uncommitted."""

    @property
    def pending(self) -> bool:
        """A write or an answer waits for a commit."""
        return bool(self._writes)

    def __len__(self) -> int:
        return len(self._writes)

    def add(self, token: int, answer: Answer | None, on_commit: Callable[[int], None] | None = None,
            *, last_offset: int | None = None) -> None:
        """Wait for the commit of append ``token`` (``last_offset`` None: known when it lands),
        or, for an answer after writes, for the commit of ``last_offset``."""
        self._writes[token] = DeferredWrite(answer, on_commit, last_offset)

    def landed(self, token: int, last_offset: int, *, ack: bool = False) -> bool:
        """Append ``token`` will end at ``last_offset``; False when nothing waits for it.
        ``ack``: answer its write now, before the commit (TEST ONLY:
        ``kwire.unsafe.test.ack.on.append``)."""
        write = self._writes.get(token)
        if write is None:
            return False
        write.last_offset = last_offset
        if ack and write.answer is not None:
            write.answer(None)
            write.answer = None
        return True

    def refused(self, token: int, error: ApiError) -> bool:
        """The core refused append ``token``: its write is answered ``error`` and forgotten;
        False when nothing waited for it."""
        write = self._writes.pop(token, None)
        if write is None:
            return False
        if write.answer is not None:
            write.answer(error)
        return True

    def complete_up_to(self, committed_offset: int) -> None:
        """Complete, in the order they were added, the entries whose last offset is at or
        below ``committed_offset`` (``DeferredEventQueue.completeUpTo``)."""
        for token, write in list(self._writes.items()):
            if write.last_offset is None or write.last_offset > committed_offset:
                continue
            del self._writes[token]
            if write.on_commit is not None:
                write.on_commit(write.last_offset)
            if write.answer is not None:
                write.answer(None)

    def fail_all(self, error: ApiError) -> None:
        """Answer every entry ``error`` and forget them (``DeferredEventQueue.failAll``); the
        waiting requests stay for the caller to answer."""
        writes, self._writes = self._writes, {}
        for write in writes.values():
            if write.answer is not None:
                write.answer(error)

    @property
    def blocked(self) -> bool:
        """Requests must wait: the barrier is up and a write is uncommitted."""
        return self.barrier and bool(self._writes)

    def lower_barrier_if_idle(self) -> None:
        """Drop the barrier once nothing is uncommitted."""
        if not self._writes:
            self.barrier = False

    def next_waiting(self) -> R | None:
        """The first waiting request, taken off the queue, once the barrier lets it run; else
        None."""
        if self.waiting and not self.blocked:
            return self.waiting.popleft()
        return None
