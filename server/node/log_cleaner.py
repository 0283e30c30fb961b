"""Log retention (KIP-630): every ``kwire.metadata.log.clean.interval.ms`` (Kafka's fixed 60 s)
the node deletes old snapshots and the log below them as ``metadata.max.retention.bytes`` and
``metadata.max.retention.ms`` say (``StorageRaftLog.maybe_clean``, Kafka's
``KafkaRaftLog.maybeClean`` run by ``KafkaRaftClient``'s cleaning timer), and writes the
snapshots its controller takes (``server.controller.host``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from server.config import KRaftConfig
from server.raft.types import OffsetAndEpoch
from server.storage_raft_log import StorageRaftLog

__all__ = ["LogCleaner", "write_snapshot"]

log = logging.getLogger("kwire.node")

Blocking = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a file operation off the event loop."""


async def write_snapshot(raft_log: StorageRaftLog, snapshot_id: OffsetAndEpoch, data: bytes, blocking: Blocking) -> None:
    """Write and freeze snapshot ``snapshot_id`` of ``data`` (its ``.checkpoint`` bytes) off
    the event loop (fsync, rename); a storage failure raises (the node stops). Nothing is
    written when the log meanwhile starts at or after its offset (a snapshot from the leader
    replaced it)."""
    if snapshot_id.offset <= raft_log.log_start_offset:
        return
    await blocking(lambda: raft_log.create_snapshot(snapshot_id, data))


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
