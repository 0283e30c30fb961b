"""Building a snapshot's bytes in a forked child at a lower priority.

A checkpoint of 10^6 partitions takes 6-20 s of CPU to encode. Built on the event loop, even a
step at a time, that CPU is the node's own: on a machine where three controllers snapshot at
once (every node fires its byte trigger at the same offset) their raft traffic starves, the
followers' fetches time out (``controller.quorum.fetch.timeout.ms``) and the leader resigns.
Kafka builds snapshots on a thread of their own beside the raft thread; a Python thread would
hold the GIL against the event loop.

:func:`build_in_child` forks (the child holds the image as it stood, copy-on-write, without a
copy being made), lowers the child's priority (:data:`CHILD_NICENESS`), runs the build there and reads its bytes back through a pipe while the event loop
goes on. The child touches nothing but the snapshot view and the pipe, and leaves with
``os._exit``: no trio, no logging, no exit handlers. It takes SIGTERM and SIGINT as a plain
process does, so it never runs the parent's handlers.

The child first closes every descriptor it inherited but the pipe and the standard three. A
fork copies them all, the node's listening sockets and connections among them: a node killed
with SIGKILL while a snapshot was being built left its listening socket open in the child for
the rest of the build (25-75 s at 10^6 partitions), so clients and peers that connected to the
dead controller were accepted by the kernel and never answered, instead of being refused; a
kill -9 of the active controller took 13 and 29 s to a CreateTopics answered elsewhere. On
Linux the child also asks to be killed when its parent dies (``PR_SET_PDEATHSIG``), so that no
build outlives its node; elsewhere it ends at its next write to the pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
from collections.abc import Callable

import trio

__all__ = ["BuildFailed", "build_in_child", "can_fork"]

CHILD_NICENESS = 10
"""How much the child lowers its priority (``nice``): a woken event loop goes first, yet on a
machine busy with other work the child still gets a share (CFS weight 110 against 1024), where
``SCHED_IDLE`` or ``nice 19`` could leave a snapshot unbuilt for as long as the load lasts."""
_CHUNK = 1 << 20
_MAX_FD = 1 << 20
"""Above any descriptor a node opens (``os.closerange`` closes a range in one ``close_range``
call where the kernel has it)."""
_STATUS_BYTES = 1
"""The child ends the stream with one status byte: 0 after the whole payload, else 1."""


class BuildFailed(RuntimeError):
    """The child died or its build raised (the message says which)."""


def can_fork() -> bool:
    """Whether this platform forks (POSIX)."""
    return hasattr(os, "fork")


def _lower_priority() -> None:
    try:
        os.nice(CHILD_NICENESS)
    except OSError:
        pass


_PR_SET_PDEATHSIG = 1
"""``prctl``'s option: the signal the calling process gets when its parent dies (Linux)."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` on Linux, else None; looked up in the parent, as the child must not
    import or load anything (another thread of the parent may hold a lock it would need)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl  # the process's own libc
    except (OSError, AttributeError):
        return None
    return function


def _close_inherited(keep: int) -> None:
    """Close every descriptor above the standard three but ``keep``."""
    os.closerange(3, keep)
    os.closerange(keep + 1, _MAX_FD)


def _child(build: Callable[[], bytes], write_fd: int, parent: int, prctl: Callable[..., int] | None) -> None:
    """The child's whole life: let go of what it inherited, build, write, ``_exit``."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        _close_inherited(write_fd)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        _lower_priority()
        data = memoryview(build())
        while data:
            written = os.write(write_fd, data[:_CHUNK])
            data = data[written:]
        status = 0
    except BaseException as exc:  # noqa: BLE001 - reported through the status byte and stderr
        try:
            # the raw descriptor: a thread of the parent (logging) may have held sys.stderr's
            # lock at the fork, and no thread of the parent runs here to release it
            os.write(2, f"snapshot build in a child failed: {type(exc).__name__}: {exc}\n".encode())
        except BaseException:  # noqa: BLE001 - nothing more to do in a dying child
            pass
    finally:
        try:
            os.write(write_fd, bytes([status]))
        finally:
            os._exit(status)


async def build_in_child(build: Callable[[], bytes]) -> bytes:
    """Run ``build`` in a forked child at a lower priority and return its bytes. Raises
    :class:`BuildFailed` when the child's build raised or the child died."""
    prctl, parent = _prctl(), os.getpid()
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except BaseException:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
        os.close(read_fd)
        _child(build, write_fd, parent, prctl)
    os.close(write_fd)
    chunks: list[bytes] = []
    try:
        async with trio.lowlevel.FdStream(read_fd) as stream:
            while chunk := await stream.receive_some(_CHUNK):
                chunks.append(chunk)
    except BaseException:  # cancelled (the node stops) or the pipe failed: the child goes too
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        with trio.CancelScope(shield=True):  # reap it, killed or done, never leave a zombie
            _, wait_status = await trio.to_thread.run_sync(os.waitpid, pid, 0)
    data = b"".join(chunks)
    exit_code = os.waitstatus_to_exitcode(wait_status)
    if exit_code != 0 or not data or data[-_STATUS_BYTES:] != b"\x00":
        raise BuildFailed(f"the snapshot build child exited with {exit_code}")
    return data[:-_STATUS_BYTES]
