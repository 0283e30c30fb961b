"""How a node process ends when its metadata log directory fails: one FATAL line, exit status 1.

Kafka stops a controller whose raft I/O fails: ``KafkaRaftClientDriver`` hands the error to a
``ProcessTerminatingFaultHandler``, which logs "Encountered fatal fault" and halts the JVM with
status 1 (``Exit.halt``); a broker whose log directory goes offline halts the same way
(``LogDirFailureChannel``, ``ReplicaManager.handleLogDirFailure``). Nothing the failed write
would have had to precede is sent: the node raises out of ``Node.run`` at the failure
(``server.node.driver``).

kwire's node runs in Trio nurseries, so the failure reaches the command wrapped in exception
groups (one per nursery it crossed), with its siblings' cancellations. :func:`run_or_halt` runs
a command's node: :func:`storage_failure` finds the failure there, and :func:`halt_message` is
the one line logged before the command returns :data:`FATAL_EXIT_STATUS` -- not the groups'
tracebacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from server.raft.log import LogInvariantError
from storage.errors import KafkaStorageError

__all__ = ["FATAL", "FATAL_EXIT_STATUS", "halt_message", "name_fatal_level", "run_or_halt", "storage_failure"]

FATAL_EXIT_STATUS = 1
"""The status of a process that stopped on a storage failure (Kafka's ``Exit.halt(1)``)."""

FATAL = logging.CRITICAL
"""The level of the halt line; :func:`name_fatal_level` names it ``FATAL``, as log4j does."""


def name_fatal_level() -> None:
    """Name :data:`FATAL` ``FATAL`` in this process's log lines (Python calls it CRITICAL)."""
    logging.addLevelName(FATAL, "FATAL")


def storage_failure(exc: BaseException) -> KafkaStorageError | LogInvariantError | None:
    """The storage failure that stopped a node: ``exc`` itself when it is a
    ``KafkaStorageError`` or ``LogInvariantError``, else the first one found depth-first in
    ``exc``'s exception groups; None when there is none."""
    if isinstance(exc, (KafkaStorageError, LogInvariantError)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = storage_failure(inner)
            if found is not None:
                return found
    return None


def halt_message(node_id: int, metadata_log_dir: str, failure: BaseException) -> str:
    """The halt line: node, directory and the failure (the failed operation, its file and the
    operating system's error), e.g. ``Halting node 1: metadata log directory /data failed:
    appending to /data/__cluster_metadata-0/00000000000000000000.log: [Errno 28] No space left
    on device``."""
    kind = "failed" if isinstance(failure, KafkaStorageError) else "broke an invariant"
    return f"Halting node {node_id}: metadata log directory {metadata_log_dir} {kind}: {failure}"


def run_or_halt(run: Callable[[], object], config: Any, log: logging.Logger) -> int:
    """Call ``run`` (a ``trio.run`` of a node with ``config``, a ``KRaftConfig``); 0 when it
    returns. On a storage failure inside it, log :func:`halt_message` at :data:`FATAL` on
    ``log`` and return :data:`FATAL_EXIT_STATUS`; anything else propagates."""
    try:
        run()
    except BaseException as exc:
        failure = storage_failure(exc)
        if failure is None:
            raise
        log.log(FATAL, halt_message(config.node_id, config.metadata_log_dir, failure))
        return FATAL_EXIT_STATUS
    return 0
