"""Snapshot bytes built in a forked child (``server.node.forked``)."""

from __future__ import annotations

import contextlib
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


def _sockets_open(fds: list[int]) -> bytes:
    """Which of ``fds`` are open sockets in this process."""
    import stat

    found = []
    for fd in fds:
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(str(fd))
        except OSError:
            pass
    return (" ".join(found) or "none").encode()


def test_the_child_lets_go_of_the_sockets_it_inherited() -> None:
    """A listening socket and a connection of the parent are closed in the child: were the
    parent killed during the build, a client connecting to it would be refused, not accepted
    and never answered."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    fds = [listener.fileno(), client.fileno()]
    try:
        assert _sockets_open(fds) == " ".join(map(str, fds)).encode()  # open here
        assert trio.run(build_in_child, partial(_sockets_open, fds)) == b"none"
    finally:
        client.close()
        listener.close()


def _sleeper_parent(pid_file: Path) -> None:
    trio.run(build_in_child, partial(_never_ends, pid_file))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="Linux only: PR_SET_PDEATHSIG")
def test_the_child_dies_with_its_parent(tmp_path: Path) -> None:
    """A node killed with SIGKILL takes its snapshot build with it."""
    import multiprocessing
    import signal
    import time

    pid_file = tmp_path / "child.pid"
    parent = multiprocessing.get_context("fork").Process(target=_sleeper_parent, args=(pid_file,))
    parent.start()
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.02)
    child = int(pid_file.read_text())
    os.kill(parent.pid, signal.SIGKILL)
    parent.join()
    try:
        while True:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.02)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)  # a failed run leaves no busy child behind
