"""Committed batches reach the state machine a bounded number of records per step
(``LogView.deliver_committed``): a follower that fetched megabytes of records replays them over
several steps, with the raft traffic between them, instead of missing its own fetch timeout."""

from __future__ import annotations

from server.raft.events import ClientAppend, FlushCompleted
from server.raft.log_view import MAX_DELIVERED_RECORDS_PER_STEP
from server.raft.roles import Leader
from tests.raft.helpers import make_context, static_voters

RECORDS = MAX_DELIVERED_RECORDS_PER_STEP * 2 // 3


def test_a_step_delivers_about_the_bound_and_asks_for_the_next_step_at_once() -> None:
    context = make_context(voters=static_voters(1), append_linger_ms=0)
    context.tick(3000)  # a single voter elects itself
    assert isinstance(context.core.state, Leader)
    context.auto_flush = False
    delivered_before = context.core.view.delivered_offset
    for token in range(3):  # three batches of two thirds of the bound each, not yet flushed
        context.step(ClientAppend(token, (b"v",) * RECORDS, drain_now=True))
    context.log.flush()
    out = context.step(FlushCompleted())
    assert [b.last_offset - b.base_offset + 1 for b in out.committed] == [RECORDS, RECORDS]  # the bound passed on the second
    assert out.next_deadline_ms == context.now  # the rest comes at the next step, at once
    follow = context.tick()
    assert len(follow.committed) == 1 and follow.committed[0].base_offset == out.committed[-1].last_offset + 1
    assert context.core.view.delivered_offset == delivered_before + 3 * RECORDS
    assert follow.next_deadline_ms != context.now
