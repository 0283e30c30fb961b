"""The failpoint registry (server.failpoints): arming, clearing, listing, probabilities and the
action text form."""

from __future__ import annotations

import random

import pytest

from server.failpoints import POINTS, Action, FailpointHalt, Failpoints, parse_action


def test_nothing_is_armed_by_default_and_every_hit_is_none() -> None:
    points = Failpoints(random.Random(1).random)
    assert points.armed == {}
    assert all(points.hit(name) is None for name in POINTS)
    assert all(entry["action"] is None for entry in points.list().values())


def test_an_armed_point_fires_until_cleared_and_only_at_its_name() -> None:
    points = Failpoints(random.Random(1).random)
    points.arm("controller.heartbeat", parse_action("error(41)"))
    assert points.hit("controller.request") is None
    assert points.hit("controller.heartbeat") == Action("error", 41)
    assert points.list()["controller.heartbeat"] == {
        "where": POINTS["controller.heartbeat"][0], "action": "error(41)", "probability": 1.0, "fired": 1}
    assert points.clear("controller.heartbeat")
    assert not points.clear("controller.heartbeat")
    assert points.hit("controller.heartbeat") is None


def test_clear_without_a_name_disarms_every_point() -> None:
    points = Failpoints(random.Random(1).random)
    points.arm("controller.heartbeat", Action("drop"))
    points.arm("controller.request", Action("delay", 5))
    assert points.clear()
    assert points.armed == {}
    assert not points.clear()


def test_a_probability_fires_about_that_share_of_hits_from_the_injected_draw() -> None:
    points = Failpoints(random.Random(3).random)
    points.arm("controller.request", Action("drop", probability=0.25))
    fired = sum(points.hit("controller.request") is not None for _ in range(4000))
    assert 800 < fired < 1200
    assert points.fired["controller.request"] == fired


def test_halt_calls_the_injected_halt_and_raises_by_default() -> None:
    halted: list[bool] = []
    points = Failpoints(random.Random(1).random, halt=lambda: halted.append(True))
    points.arm("controller.request", parse_action("halt"))
    assert points.hit("controller.request") == Action("halt")
    assert halted == [True]
    default = Failpoints(random.Random(1).random)
    default.arm("controller.request", Action("halt"))
    with pytest.raises(FailpointHalt):
        default.hit("controller.request")


@pytest.mark.parametrize(("text", "action"), [
    ("delay(250)", Action("delay", 250)), (" error( 41 ) ", Action("error", 41)),
    ("drop", Action("drop")), ("halt", Action("halt")),
])
def test_action_text_round_trips(text: str, action: Action) -> None:
    assert parse_action(text) == action
    assert parse_action(action.text()) == action


@pytest.mark.parametrize("text", ["sleep(5)", "delay", "drop(1)", "error(0)", "error(9999)", "delay(-1)", ""])
def test_a_bad_action_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_action(text)


def test_an_unknown_point_or_probability_is_refused() -> None:
    points = Failpoints(random.Random(1).random)
    with pytest.raises(ValueError):
        points.arm("no.such.point", Action("drop"))
    with pytest.raises(ValueError):
        Action("drop", probability=0.0)
    with pytest.raises(ValueError):
        Action("drop", probability=1.5)


def test_a_point_refuses_an_action_kind_it_does_not_take() -> None:
    points = Failpoints(random.Random(1).random)
    with pytest.raises(ValueError, match="raft.append takes error, halt"):
        points.arm("raft.append", Action("delay", 10))
    points.arm("raft.append", Action("error", 6))
    assert points.armed == {"raft.append": Action("error", 6)}
