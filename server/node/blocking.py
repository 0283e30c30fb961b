"""How the driving task runs file I/O and waits for it: :class:`Blocking`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

__all__ = ["Blocking"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")


class Blocking:
    """Runs an operation on the log or the quorum-state file for node ``node_id`` and waits for
    it (``await blocking(fn)``): off the event loop in a worker thread, or with ``on_loop`` on
    the event loop itself (the log write and fsync of the commit path, at most
    ``server.node.raft_target.ON_LOOP_LOG_BYTES``: Kafka's ``KafkaRaftClient`` appends and
    flushes on its one polling thread too, and a thread hand-off each way cost a follower a
    fifth of its CPU at 20,000 records/s). The driving task does nothing else meanwhile either
    way: one that waits for half of ``controller.quorum.fetch.timeout.ms`` (``fetch_timeout_ms``)
    or more is logged at WARN with where ``fn`` was written (an fsync queued behind a disk busy
    with a snapshot's 100 MB was one). A ``run_blocking`` given runs both kinds."""

    def __init__(
        self, node_id: int, fetch_timeout_ms: int, run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]] | None,
    ) -> None:
        self.node_id = node_id
        self.fetch_timeout_ms = fetch_timeout_ms
        self._run_blocking = run_blocking

    async def __call__(self, fn: Callable[[], T], *, on_loop: bool = False) -> T:
        started = trio.current_time()
        if self._run_blocking is not None:
            result: T = await self._run_blocking(fn)
        elif on_loop:
            result = fn()
        else:
            result = await trio.to_thread.run_sync(fn)
        took = trio.current_time() - started
        if took * 2000 >= self.fetch_timeout_ms:
            code = getattr(fn, "__code__", None)
            where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(fn)
            log.warning("node %d: the driving task waited %d ms for %s (%s)", self.node_id, took * 1000,
                        getattr(fn, "__qualname__", "a call"), where)
        return result
