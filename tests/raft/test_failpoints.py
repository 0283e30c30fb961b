"""The ``raft.fetch`` failpoint on the core (``server.failpoints``): an armed leader answers a
follower's Fetch with the error at the top, leaves it unanswered, or holds it until its delay
passes (the held Fetch names the core's next deadline); clearing restores the answer."""

from __future__ import annotations

from kwire.errors import Errors
from server.failpoints import parse_action
from tests.raft.helpers import elect_local_leader, fetch_request, make_context


def test_an_armed_fetch_error_is_answered_and_clearing_restores_the_answer() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.core.failpoints.arm("raft.fetch", parse_action("error(6)"))
    _, response = context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    assert response.error_code == Errors.NOT_LEADER_OR_FOLLOWER and not response.responses
    context.core.failpoints.clear()
    _, response = context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    assert response.error_code == Errors.NONE and response.responses[0].partitions[0].records


def test_a_dropped_fetch_is_not_answered_and_does_not_move_the_high_watermark() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    context.core.failpoints.arm("raft.fetch", parse_action("drop"))
    _, response = context.request(fetch_request(2, leader.epoch, 1, leader.epoch), 17)
    assert response is None
    assert context.core.high_watermark != 1  # the follower's fetch at offset 1 never counted


def test_a_delayed_fetch_is_held_until_its_deadline_then_answered() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    context.core.failpoints.arm("raft.fetch", parse_action("delay(200)"))
    start, held = context.now, context.next_request_id
    out, response = context.request(fetch_request(2, leader.epoch, 0, 0), 17)
    assert response is None
    assert out.next_deadline_ms is not None and out.next_deadline_ms <= start + 200
    context.core.failpoints.clear()  # the held Fetch is let in all the same
    assert not [r for r in context.tick(199).replies if r.request_id == held]
    replies = [r for r in context.tick(1).replies if r.request_id == held]
    assert [r.response.error_code for r in replies] == [Errors.NONE]
