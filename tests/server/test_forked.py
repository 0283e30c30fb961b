"""Snapshot bytes built in a forked child (``server.node.forked``)."""

from __future__ import annotations

import os

import pytest
import trio

from server.node.forked import BuildFailed, build_in_child, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="the platform does not fork")


def _pid_bytes() -> bytes:
    return str(os.getpid()).encode() * 200_000  # over a pipe's buffer: read while it is written


def _fails() -> bytes:
    raise ValueError("no image")


def _never_ends() -> bytes:
    while True:
        pass


def test_the_bytes_come_back_from_another_process() -> None:
    data = trio.run(build_in_child, _pid_bytes)
    child = data[: len(data) // 200_000]
    assert child != str(os.getpid()).encode() and data == child * 200_000


def test_a_build_that_raises_is_a_build_failed() -> None:
    with pytest.raises(BuildFailed, match="exited with 1"):
        trio.run(build_in_child, _fails)


def test_cancelling_the_build_kills_and_reaps_the_child() -> None:
    async def main() -> None:
        with trio.move_on_after(0.5):
            await build_in_child(_never_ends)

    trio.run(main)
    with pytest.raises(ChildProcessError):  # reaped: no child left to wait for
        os.waitpid(-1, os.WNOHANG)
