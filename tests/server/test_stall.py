"""StallWatch: a pause of the event loop is reported while it lasts, with the loop's stack, and
its length once the loop runs again; a loop that keeps turning is never reported."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import pytest
import trio

from server.node.stall import StallWatch

DEADLINE_S = 10.0


def _hold_the_loop_for(seconds: float) -> None:
    time.sleep(seconds)  # a blocking call on the loop's thread: no task runs meanwhile


async def _wait_for(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    with trio.fail_after(DEADLINE_S):
        while not condition():
            await trio.sleep(0.01)
    assert condition(), what


def _watched(threshold_s: float, caplog: pytest.LogCaptureFixture, body: Callable[[], Awaitable[None]]) -> StallWatch:
    """Run ``body`` on a Trio loop that a StallWatch of ``threshold_s`` watches, its reports
    captured; the watch."""
    watch = StallWatch(threshold_s, log=logging.getLogger("kwire.test.stall"), interval_s=0.02)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            await body()
            nursery.cancel_scope.cancel()

    with caplog.at_level(logging.WARNING, logger="kwire.test.stall"):
        trio.run(main)
    return watch


async def _pause_ends(caplog: pytest.LogCaptureFixture) -> None:
    await _wait_for(lambda: any("ran again" in r.getMessage() for r in caplog.records), "the pause's end")


def test_a_paused_loop_is_reported_with_its_stack_and_its_length(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        await trio.sleep(0.1)
        _hold_the_loop_for(0.9)
        await _pause_ends(caplog)

    watch = _watched(0.3, caplog, body)
    messages = [r.getMessage() for r in caplog.records]
    paused = [m for m in messages if "has not run for" in m]
    assert paused, messages
    assert "_hold_the_loop_for" in paused[-1] and "time.sleep(seconds)" in paused[-1]
    ended = [m for m in messages if "ran again after" in m]
    length_ms = int(ended[-1].split("after ")[1].split(" ms")[0])
    assert 850 <= length_ms < 900 + 1000 * DEADLINE_S
    assert watch.stalls == len(paused)


def test_a_turning_loop_is_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        for _ in range(30):  # 0.3 s of short steps, each far below the threshold
            _hold_the_loop_for(0.005)
            await trio.sleep(0.005)

    watch = _watched(1.0, caplog, body)
    assert watch.stalls == 0
    assert not caplog.records


def test_the_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        StallWatch(0, log=logging.getLogger("kwire.test.stall"))


def test_a_pause_in_a_garbage_collection_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """A collection that holds the loop (made slow here by a callback of the test's own, run
    between the watch's start and end callbacks) is named with its generation and time."""
    import gc

    def slow(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            time.sleep(0.9)

    async def body() -> None:
        await trio.sleep(0.1)
        gc.callbacks.append(slow)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(slow)
        await _pause_ends(caplog)

    _watched(0.3, caplog, body)
    reports = [r.getMessage() for r in caplog.records if "has not run for" in r.getMessage()
               or "ran again" in r.getMessage()]
    named = [m for m in reports if "a garbage collection of generation 2 took" in m]
    assert named, reports
    took_ms = int(named[-1].split("generation 2 took ")[1].split(" ms")[0])
    assert took_ms >= 850
