"""Log retention (KIP-630): every ``kwire.metadata.log.clean.interval.ms`` (Kafka's fixed 60 s)
the node deletes old snapshots and the log below them as ``metadata.max.retention.bytes`` and
``metadata.max.retention.ms`` say (``StorageRaftLog.maybe_clean``, Kafka's
``KafkaRaftLog.maybeClean`` run by ``KafkaRaftClient``'s cleaning timer). The snapshots its
controller takes are written by ``server.node.snapshot_files``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from server.config import KRaftConfig
from server.storage_raft_log import StorageRaftLog

__all__ = ["LogCleaner"]

log = logging.getLogger("kwire.node")

Blocking = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a file operation off the event loop."""


class LogCleaner:
    """The retention timer of one node (times in ms on the node's clock)."""

    def __init__(self, config: KRaftConfig, raft_log: StorageRaftLog, now_ms: int) -> None:
        self.config = config
        self.raft_log = raft_log
        self.next_ms = now_ms + config.metadata_log_clean_interval_ms
        """When retention runs next."""

    async def maybe_clean(self, now_ms: int, blocking: Blocking) -> None:
        """Enforce retention if it is due, then wait an interval again."""
        if now_ms < self.next_ms:
            return
        config, raft_log = self.config, self.raft_log
        self.next_ms = now_ms + config.metadata_log_clean_interval_ms
        before = raft_log.log_start_offset
        await blocking(
            lambda: raft_log.maybe_clean(
                retention_bytes=config.metadata_max_retention_bytes,
                retention_ms=config.metadata_max_retention_ms,
                now_ms=now_ms,
            )
        )
        if raft_log.log_start_offset != before:
            log.info("node %d: log start offset %d -> %d (retention)", config.node_id, before, raft_log.log_start_offset)
