"""The one stepping function of core and host (``server.controller.stepping``): the order of a
turn, the merging of the host's appends, the load and task flags of its polls, and the slice
sizing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from server.controller import stepping
from server.controller.host import ControllerOutbox, QuorumController
from server.raft.core import RaftCore
from server.raft.events import (
    ClientAppend,
    Event,
    FlushCompleted,
    Outbox,
    Tick,
    UpgradeKRaftVersion,
)


class _Core:
    def __init__(self) -> None:
        self.steps: list[tuple[int, list[Event]]] = []

    def step_many(self, now_ms: int, events: Sequence[Event]) -> Outbox:
        self.steps.append((now_ms, list(events)))
        return Outbox()

    def step(self, now_ms: int, event: Event) -> Outbox:
        return self.step_many(now_ms, (event,))


class _Host:
    """Hands over ``outboxes`` one per poll, then empty ones."""

    def __init__(self, *outboxes: ControllerOutbox) -> None:
        self.outboxes = list(outboxes)
        self.polls: list[tuple[bool, bool]] = []

    def poll(self, now_ms: int, *, run_tasks: bool = True, load: bool = True) -> ControllerOutbox:
        self.polls.append((run_tasks, load))
        return self.outboxes.pop(0) if self.outboxes else ControllerOutbox()


def _append(token: int) -> ClientAppend:
    return ClientAppend(token, (b"v",))


def _turn(core: _Core, host: _Host, events: list[Event], *, load: bool, flushes: int = 0) -> list[str]:
    """Run one turn; the first ``flushes`` core Outboxes report a flush completed at once."""
    done: list[str] = []
    left = [flushes]

    def apply(out: Outbox) -> bool:
        done.append("core")
        if left[0] > 0:
            left[0] -= 1
            return True
        return False

    def carry_out(out: ControllerOutbox) -> None:
        done.append("host")

    stepped: list[Sequence[Event]] = []
    stepping.run_steps(
        stepping.steps(cast(RaftCore, core), cast(QuorumController, host), events, lambda: 5, load=load,
                       on_step=stepped.append),
        apply, carry_out,
    )
    assert [list(s) for s in stepped] == [events for _, events in core.steps]
    return done


def test_events_step_the_core_then_the_host_is_polled_with_load_and_tasks_once() -> None:
    core, host = _Core(), _Host()
    assert _turn(core, host, [Tick()], load=True) == ["core", "host"]
    assert core.steps == [(5, [Tick()])]
    assert host.polls == [(True, True)]


def test_no_events_polls_the_host_only() -> None:
    core, host = _Core(), _Host()
    assert _turn(core, host, [], load=False) == ["host"]
    assert core.steps == [] and host.polls == [(True, False)]


def test_consecutive_host_appends_step_the_core_together_and_an_upgrade_alone() -> None:
    appends: list[Any] = [_append(-1), _append(-2), UpgradeKRaftVersion(1), _append(-3), _append(-4)]
    core, host = _Core(), _Host(ControllerOutbox(raft_events=appends), ControllerOutbox(raft_events=[_append(-5)]))
    assert _turn(core, host, [Tick()], load=True) == ["core", "host", "core", "core", "core", "host", "core", "host"]
    assert [events for _, events in core.steps] == [
        [Tick()], [_append(-1), _append(-2)], [UpgradeKRaftVersion(1)], [_append(-3), _append(-4)], [_append(-5)],
    ]
    # the host's own tasks and the next slice wait for the driver's next turn
    assert host.polls == [(True, True), (False, False), (False, False)]


def test_a_flush_completed_at_once_steps_the_core_with_flush_completed() -> None:
    core, host = _Core(), _Host()
    assert _turn(core, host, [Tick()], load=False, flushes=2) == ["core", "core", "core", "host"]
    assert [events for _, events in core.steps] == [[Tick()], [FlushCompleted()], [FlushCompleted()]]


def test_a_slice_is_sized_to_the_time_the_last_one_took() -> None:
    most = 20_000
    assert stepping.load_slice_records(20_000, 0.4, most) == int(20_000 * stepping.LOAD_SLICE_S / 0.4)
    assert stepping.load_slice_records(2_500, 0.005, most) == most
    assert stepping.load_slice_records(1_000, 60.0, most) == stepping.MIN_LOAD_SLICE_RECORDS
    assert stepping.load_slice_records(3_000, 0.0, most) == 3_000
