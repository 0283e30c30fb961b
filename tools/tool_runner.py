"""Java main classes run one after another in one long-lived JVM per command line, rather than one
JVM each: the client of ``kwire.oracle.ToolRunner`` (``compat/oracle/src/kwire/oracle/
ToolRunner.java``, compiled by ``compat/fetch-kafka.sh`` into each release's ``oracle/``).

A stock Kafka tool run (StorageTool, MetadataQuorumCommand, ...) costs about a CPU-second, mostly
the JVM's start-up and class loading; in a runner that has run it before, a few milliseconds of
that are left. :mod:`tools.stock_kafka` decides which calls come here (see
``TOOL_RUNNER_ENV`` there); this module knows nothing about Kafka.

Protocol (big-endian 4-byte integers, UTF-8 strings; the Java file's header has the whole of
it): the runner writes :data:`MAGIC` once started; a request is the main class and its
arguments; the answer is the exit code, stdout bytes and stderr bytes of that main class as a
JVM of its own would have ended.

Runners are per process and per command line (``java <flags> -cp <classpath> ToolRunner``):
a process started by ``fork`` never uses its parent's, and every runner is closed at
interpreter exit. Calls on one runner take turns (a lock per runner). A runner's working
directory and environment are the process's when it started.

    answer = run_main(runner_command, "kafka.tools.StorageTool", ["random-uuid"],
                      display=java_command_line, timeout=120.0)
    if answer is None:   # no runner, or it died mid-call: run it as a subprocess instead
        ...
"""

from __future__ import annotations

import atexit
import locale
import os
import queue
import struct
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO

RUNNER_CLASS = "kwire.oracle.ToolRunner"
"""The runner's main class, in ``compat/.cache/kafka-<version>/oracle``."""
MAGIC = 0x4B575452
"""The 4-byte integer ("KWTR") the runner writes once it is ready for requests."""
CLOSE_WAIT = 5.0
"""Seconds a runner gets to end after its stdin closes (it runs the shutdown hooks of the tools
it ran) before it is killed."""

_Answer = tuple[int, bytes, bytes]
_READY = "ready"
_INT = struct.Struct(">i")


class _Runner:
    """One ``ToolRunner`` JVM: its process, a thread reading its answers into a queue, and the
    lock that makes calls take turns."""

    def __init__(self, command: tuple[str, ...]) -> None:
        self.command = command
        self.cwd = os.getcwd()
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.dead = False
        self.started = False
        self._frames: queue.Queue[_Answer | str | None] = queue.Queue()
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        reader = threading.Thread(target=self._read, args=(self._proc.stdout,),
                                  name=f"tool-runner-{self._proc.pid}", daemon=True)
        reader.start()

    def _read(self, stream: IO[bytes] | None) -> None:
        frames = self._frames
        try:
            if stream is None or _read_int(stream) != MAGIC:
                return
            frames.put(_READY)
            while True:
                code = _read_int(stream)
                out = _read_exactly(stream, _read_int(stream))
                err = _read_exactly(stream, _read_int(stream))
                frames.put((code, out, err))
        except (EOFError, OSError, ValueError):
            pass
        finally:
            frames.put(None)

    def _next(self, deadline: float | None) -> _Answer | str | None:
        """The next frame; None when the JVM has gone. Raises TimeoutError at ``deadline``
        (``time.monotonic()``)."""
        try:
            if deadline is None:
                return self._frames.get()
            return self._frames.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError from None

    def call(self, main_class: str, args: Sequence[str], timeout: float | None) -> _Answer | None:
        """Run ``main_class`` with ``args``: ``(exit code, stdout, stderr)``, or None when the JVM
        did not start or died before answering (it is then dead). Raises TimeoutError (after
        killing the JVM) when ``timeout`` seconds pass first, its start-up included. The
        caller holds :attr:`lock`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if not self.started:
                if self._next(deadline) != _READY:
                    self.kill()
                    return None
                self.started = True
            stdin = self._proc.stdin
            if stdin is None:
                return None
            payload = [_INT.pack(1 + len(args))]
            for item in (main_class, *args):
                raw = item.encode("utf-8")
                payload += [_INT.pack(len(raw)), raw]
            try:
                stdin.write(b"".join(payload))
                stdin.flush()
            except (OSError, ValueError):
                self.kill()
                return None
            answer = self._next(deadline)
        except TimeoutError:
            self.kill()
            raise
        if not isinstance(answer, tuple):
            self.kill()
            return None
        return answer

    def kill(self) -> None:
        self.dead = True
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._close_pipes()

    def close(self) -> None:
        """Close its stdin, so that it ends on its own; kill it after :data:`CLOSE_WAIT`."""
        self.dead = True
        self._close_pipes()
        try:
            self._proc.wait(timeout=CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self.kill()

    def _close_pipes(self) -> None:
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    if size < 0:
        raise ValueError(f"negative frame length {size}")
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _read_int(stream: IO[bytes]) -> int:
    value: int = _INT.unpack(_read_exactly(stream, _INT.size))[0]
    return value


# -- the process's runners ------------------------------------------------------------------------

_registry_lock = threading.Lock()
_runners: dict[tuple[str, ...], _Runner] = {}
_broken: set[tuple[str, ...]] = set()
_owner = os.getpid()
_inherited: list[_Runner] = []


def _forget_inherited() -> None:
    """In a forked child: start afresh. The parent's runners are kept (not used, not closed),
    so that nothing of theirs is flushed or closed from this process."""
    global _registry_lock, _owner
    _registry_lock = threading.Lock()
    _inherited.extend(_runners.values())
    _runners.clear()
    _broken.clear()
    _owner = os.getpid()


def _runner(command: tuple[str, ...]) -> _Runner | None:
    with _registry_lock:
        if _owner != os.getpid():
            _forget_inherited()
        if command in _broken:
            return None
        runner = _runners.get(command)
        if runner is None or runner.dead:
            try:
                runner = _runners[command] = _Runner(command)
            except OSError:
                _broken.add(command)
                return None
        return runner


def run_main(
    runner_command: Sequence[str],
    main_class: str,
    args: Sequence[str],
    *,
    display: Sequence[str],
    timeout: float | None,
) -> subprocess.CompletedProcess[str] | None:
    """Run ``main_class args`` in the runner that ``runner_command`` (``java <flags> -cp
    <classpath that holds RUNNER_CLASS> kwire.oracle.ToolRunner``) starts, started on first use.

    Returns what ``subprocess.run(display, capture_output=True, text=True)`` would for a JVM of
    its own: ``args`` is ``display``, the exit code as the OS reports it (low 8 bits on POSIX),
    stdout and stderr decoded with the locale's encoding and universal newlines. Returns None,
    for the caller to run it as a subprocess, when the runner cannot start (then never again
    for this command line in this process), died before answering (a tool called
    ``System.exit``; the next call starts a new one), or when the working directory is not the
    runner's. Raises ``subprocess.TimeoutExpired`` (``cmd`` is ``display``) when ``timeout``
    seconds pass first; the runner is then killed, and the next call starts a new one."""
    key = tuple(runner_command)
    for _ in range(2):
        runner = _runner(key)
        if runner is None or runner.cwd != os.getcwd():
            return None
        with runner.lock:
            if runner.dead:
                continue  # killed by another thread's timeout while this one waited
            try:
                answer = runner.call(main_class, args, timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(list(display), timeout or 0.0) from None
            if answer is None and not runner.started:
                with _registry_lock:
                    _broken.add(key)
        if answer is None:
            return None
        code, out, err = answer
        return subprocess.CompletedProcess(
            list(display), code & 0xFF if os.name == "posix" else code & 0xFFFFFFFF,
            _text(out), _text(err),
        )
    return None


def _text(data: bytes) -> str:
    # as subprocess.run(..., text=True) decodes a child's output
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def close_all() -> None:
    """Close every runner this process started (run at interpreter exit)."""
    with _registry_lock:
        mine = [r for r in _runners.values() if r.pid == os.getpid()]
        _runners.clear()
    for runner in mine:
        # a daemon thread may be mid-call: close the runner under it all the same
        acquired = runner.lock.acquire(timeout=CLOSE_WAIT)
        try:
            runner.close()
        finally:
            if acquired:
                runner.lock.release()


atexit.register(close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)
