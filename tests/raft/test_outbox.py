"""``server.raft.outbox``: the applier calls a target's effects in the Outbox contract's order,
and ``flush_follows_write`` is true exactly when nothing comes between the write and the flush
(the node then fsyncs inside the write)."""

from __future__ import annotations

from typing import Any

from server.raft.events import OutboundRequest, Outbox
from server.raft.outbox import apply_now, flush_follows_write


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def persist_election(self, election: Any) -> None:
        self.calls.append("persist_election")

    async def write_log(self, out: Outbox) -> None:
        self.calls.append("write_log")

    def send(self, request: Any) -> None:
        self.calls.append("send")

    def reply(self, reply: Any) -> None:
        self.calls.append("reply")

    async def flush(self) -> None:
        self.calls.append("flush")

    async def load_snapshot(self, snapshot_id: Any) -> None:
        self.calls.append("load_snapshot")

    def commit(self, batch: Any) -> None:
        self.calls.append("commit")

    def append_result(self, result: Any) -> None:
        self.calls.append("append_result")

    def schedule(self, deadline_ms: int | None) -> None:
        self.calls.append("schedule")


def _calls(out: Outbox) -> list[str]:
    target = _Recorder()
    apply_now(out, target)
    return target.calls


def test_a_fetched_batch_is_written_then_flushed_with_nothing_between() -> None:
    out = Outbox(appends=[b"batch"], high_watermark=3, flush=True)
    assert flush_follows_write(out)
    assert _calls(out) == ["write_log", "flush", "schedule"]


def test_sends_leave_between_the_write_and_the_flush() -> None:
    request = OutboundRequest(1, 2, None, object(), 2000)
    out = Outbox(appends=[b"batch"], sends=[request], flush=True)
    assert not flush_follows_write(out)
    assert _calls(out) == ["write_log", "send", "flush", "schedule"]
    assert not flush_follows_write(Outbox(appends=[b"batch"]))  # no flush at all
