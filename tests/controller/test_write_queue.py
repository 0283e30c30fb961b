"""The deferred write queue (``server.controller.write_queue``): completion up to a committed
offset in the order entries were added, refusal, failing all, and the barrier."""

from __future__ import annotations

from collections.abc import Callable

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.write_queue import DeferredWriteQueue

NOT_CONTROLLER = ApiError(Errors.NOT_CONTROLLER, None)


class Heard:
    """Records what each named answer and commit callback heard, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def answer(self, name: str) -> Callable[[ApiError | None], None]:
        return lambda error: self.events.append((name, None if error is None else error.error))

    def on_commit(self, name: str) -> Callable[[int], None]:
        return lambda offset: self.events.append((f"{name}@commit", offset))


def test_writes_complete_once_the_committed_offset_reaches_their_last_offset() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("a"), heard.on_commit("a"))
    queue.add(-2, heard.answer("b"))
    assert queue.landed(-1, 9) and queue.landed(-2, 19)
    queue.complete_up_to(8)
    assert heard.events == []
    queue.complete_up_to(9)
    assert heard.events == [("a@commit", 9), ("a", None)]
    assert queue.pending and len(queue) == 1
    queue.complete_up_to(30)
    assert heard.events[-1] == ("b", None)
    assert not queue.pending


def test_a_write_whose_append_has_not_landed_waits_whatever_commits() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("a"))
    queue.complete_up_to(1_000_000)
    assert heard.events == [] and queue.pending


def test_entries_complete_in_the_order_they_were_added_not_by_offset() -> None:
    """An answer after writes is given the offset it waits for; it completes after the write
    added before it when both are committed, as the host's replies keep arrival order."""
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("write"))
    queue.add(-2, heard.answer("read"), last_offset=4)
    queue.landed(-1, 4)
    queue.complete_up_to(4)
    assert heard.events == [("write", None), ("read", None)]


def test_a_refused_append_is_answered_with_the_error_and_forgotten() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("a"))
    assert queue.refused(-1, NOT_CONTROLLER)
    assert heard.events == [("a", Errors.NOT_CONTROLLER)]
    assert not queue.refused(-1, NOT_CONTROLLER), "nothing waits for it any more"
    assert not queue.landed(-3, 5), "an append nothing waits for (a NoOp)"


def test_fail_all_answers_every_entry_and_keeps_the_waiting_requests() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("a"))
    queue.add(-2, None)  # the controller's own write: nothing to answer
    queue.add(-3, heard.answer("c"), last_offset=7)
    queue.waiting.append("request")
    queue.fail_all(NOT_CONTROLLER)
    assert heard.events == [("a", Errors.NOT_CONTROLLER), ("c", Errors.NOT_CONTROLLER)]
    assert not queue.pending and list(queue.waiting) == ["request"]


def test_ack_on_append_answers_at_once_and_completes_silently() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    heard = Heard()
    queue.add(-1, heard.answer("a"), heard.on_commit("a"))
    queue.landed(-1, 3, ack=True)
    assert heard.events == [("a", None)]
    queue.complete_up_to(3)
    assert heard.events == [("a", None), ("a@commit", 3)], "answered once; on_commit still runs"


def test_the_barrier_holds_requests_until_no_write_is_uncommitted() -> None:
    queue: DeferredWriteQueue[str] = DeferredWriteQueue()
    queue.waiting.extend(["r1", "r2"])
    assert queue.next_waiting() == "r1", "no barrier: a waiting request runs"
    queue.add(-1, None)
    queue.barrier = True
    assert queue.blocked and queue.next_waiting() is None
    queue.lower_barrier_if_idle()
    assert queue.barrier, "a write is still uncommitted"
    queue.landed(-1, 0)
    queue.complete_up_to(0)
    assert not queue.blocked, "nothing uncommitted: the barrier no longer blocks"
    queue.lower_barrier_if_idle()
    assert not queue.barrier
    assert queue.next_waiting() == "r2" and queue.next_waiting() is None
