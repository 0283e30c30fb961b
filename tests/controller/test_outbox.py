"""The host's outbox writer (``server.controller.outbox``): tokens, appends applied ahead at the
offsets they will have, what waits in the write queue, replies, and handing the outbox over."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from messages.generated.fence_broker_record import FenceBrokerRecord
from messages.generated.no_op_record import NoOpRecord
from messages.generated.unregister_controller_response import UnregisterControllerResponse
from messages.metadata import encode_record
from server.controller.offset_control import AppliedAhead, OffsetControl
from server.controller.outbox import OutboxWriter, RaftView
from server.controller.write_queue import DeferredWriteQueue
from server.raft.events import ClientAppend, UpgradeKRaftVersion

FENCE = (FenceBrokerRecord(id=1, epoch=2), 0)


class Fixture:
    def __init__(self, log_end_offset: int = 40, epoch: int = 5) -> None:
        self.raft = SimpleNamespace(next_append_offset=log_end_offset, epoch=epoch)
        self.offsets = OffsetControl()
        self.queue: DeferredWriteQueue[Any] = DeferredWriteQueue()
        self.replayed: list[tuple[bytes | None, int, str]] = []
        self.writer = OutboxWriter(cast(RaftView, self.raft), self.offsets, self.queue,
                                   lambda value, offset, how: self.replayed.append((value, offset, how)))


def test_tokens_count_down_from_minus_one() -> None:
    writer = Fixture().writer
    assert [writer.token(), writer.token(), writer.token()] == [-1, -2, -3]


def test_an_append_ahead_is_replayed_at_the_offsets_it_will_have_and_waits_for_its_commit() -> None:
    fixture = Fixture()
    fixture.writer.append([FENCE, FENCE], lambda error: None)
    fixture.writer.append([FENCE], lambda error: None)
    value = encode_record(*FENCE)
    assert fixture.replayed == [(value, 40, "appended"), (value, 41, "appended"), (value, 42, "appended")]
    assert list(fixture.offsets.applied) == [AppliedAhead(-1, 40, 41, 5), AppliedAhead(-2, 42, 42, 5)]
    assert len(fixture.queue) == 2
    events = fixture.writer.out.raft_events
    assert events == [ClientAppend(-1, (value, value), drain_now=True), ClientAppend(-2, (value,), drain_now=True)]


def test_an_append_not_ahead_is_not_replayed_and_a_lingering_own_write_waits_for_nothing() -> None:
    fixture = Fixture()
    fixture.writer.append([(NoOpRecord(), 0)], None, drain_now=False, ahead=False)
    assert fixture.replayed == [] and not fixture.offsets.speculating
    assert not fixture.queue.pending, "nothing waits for a NoOp"
    assert fixture.offsets.write_end == 41


def test_take_hands_the_outbox_over_and_starts_a_fresh_one() -> None:
    fixture = Fixture()
    writer = fixture.writer
    writer.upgrade(1)
    writer.append([FENCE], None)
    response = UnregisterControllerResponse()
    writer.reply("handle", response)
    assert fixture.offsets.next_write_offset(40) == 41
    out = writer.take()
    assert isinstance(out.raft_events[0], UpgradeKRaftVersion) and isinstance(out.raft_events[1], ClientAppend)
    assert out.replies == [("handle", response)]
    assert writer.out.raft_events == [] and writer.out.replies == []
    assert fixture.offsets.next_write_offset(41) == 41, "the core's log end offset counts them now"
