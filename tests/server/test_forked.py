"""Snapshot bytes built in a forked child (``server.node.forked``)."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest
import trio

from server.node.forked import BuildFailed, build_in_child, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="the platform does not fork")


def _pid_bytes() -> bytes:
    return str(os.getpid()).encode() * 200_000  # over a pipe's buffer: read while it is written


def _fails() -> bytes:
    raise ValueError("no image")


def _never_ends(pid_file: Path) -> bytes:
    pid_file.write_text(str(os.getpid()))
    while True:
        pass


def test_the_bytes_come_back_from_another_process() -> None:
    data = trio.run(build_in_child, _pid_bytes)
    child = data[: len(data) // 200_000]
    assert child != str(os.getpid()).encode() and data == child * 200_000


def test_a_build_that_raises_is_a_build_failed() -> None:
    with pytest.raises(BuildFailed, match="exited with 1"):
        trio.run(build_in_child, _fails)


def test_cancelling_the_build_kills_and_reaps_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"

    async def cancelled_build() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(build_in_child, partial(_never_ends, pid_file))
            with trio.move_on_after(10):
                while not pid_file.exists() or not pid_file.read_text():
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(cancelled_build)
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: a zombie would still be there
        os.kill(child, 0)
