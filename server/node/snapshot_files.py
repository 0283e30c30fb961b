"""The snapshot file pipeline of a node: build, defer, write, freeze
(``SnapshotGenerator`` and ``RawSnapshotWriter`` in Kafka's terms).

The host hands over a :class:`~server.controller.host.SnapshotToWrite`
(:meth:`SnapshotFiles.offer`). Its bytes are built by a forked child at a lower priority
(``server.node.forked``: 6-20 s of CPU at a million partitions, none of it the event loop's),
or, for an image of fewer than :data:`FORK_MIN_IMAGE_RECORDS` records (cheaper than the fork)
or with ``kwire.metadata.snapshot.build.in.child=false``, a step at a time on the event loop.
Once built (:class:`SnapshotBuilt` posted to the driving task), its file is opened by the
driving task (the log's one caller), written and frozen on a thread of its own, and
(:class:`SnapshotFrozen` posted) taken by the log back on the driving task. One snapshot is
built and written at a time; the newest one the host takes meanwhile is deferred and built
next, the ones between are skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from server.controller.host import SnapshotToWrite
from server.failpoints import Failpoints
from server.node.forked import BuildFailed, build_in_child, can_fork
from server.node.heap import age_heap
from server.raft.types import OffsetAndEpoch
from server.storage_raft_log import StorageRaftLog
from storage.snapshots import SnapshotId

__all__ = ["FORK_MIN_IMAGE_RECORDS", "SNAPSHOT_FLUSH_BYTES", "SnapshotBuilt", "SnapshotFiles", "SnapshotFrozen"]

log = logging.getLogger("kwire.node")

SNAPSHOT_FLUSH_BYTES = 8 << 20
"""A snapshot file is written and fsynced this many bytes at a time (``RawSnapshotWriter.flush``):
written whole, a million partitions' 120 MB were still being written out to the disk when the
log's next fsync came, and the driving task waited for that fsync."""

FORK_MIN_IMAGE_RECORDS = 2_000
"""Images of fewer records (``SnapshotToWrite.image_records``) are built on the event loop even
where snapshots are built in a child: a fork of a node of 150 MB costs 13-14 ms of CPU before
the child does anything (page tables copied, then torn down, 6 and 7.5 ms), and its pages the
node writes afterwards are copied; encoding a partition's record costs about 12 us, so below
this many records the build is the cheaper, and it pauses every 1,000 records. A quorum
writing 160,000 records/s fires the byte trigger (20 MiB) twice a second on every node: three
nodes' forks cost 0.7 CPU-s per million records, 8% of the commit path's."""


@dataclass(frozen=True, slots=True)
class SnapshotBuilt:
    """A snapshot's bytes, built in ``build_s`` seconds, to write."""

    snapshot_id: OffsetAndEpoch
    data: bytes
    build_s: float


@dataclass(frozen=True, slots=True)
class SnapshotFrozen:
    """A snapshot's file, written and frozen off the driving task, for the log to take."""

    snapshot_id: OffsetAndEpoch


def _stem(snapshot_id: OffsetAndEpoch) -> str:
    return SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem


class SnapshotFiles:
    """The pipeline of node ``node_id`` (module docstring) over ``raft_log``: its tasks start in
    ``nursery``, its events go to the driving task through ``post``, its log operations run
    through ``blocking`` (the node's one-caller path to the log); ``build_in_child``
    is ``kwire.metadata.snapshot.build.in.child``; ``stopping()`` says the node is stopping (no
    deferred snapshot is started then); ``failpoints`` holds the node's armed points
    (``snapshot.write`` is checked as a built snapshot is about to be written)."""

    def __init__(
        self,
        node_id: int,
        raft_log: StorageRaftLog,
        *,
        nursery: trio.Nursery,
        post: Callable[[Any], None],
        blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
        build_in_child: bool,
        stopping: Callable[[], bool],
        failpoints: Failpoints | None = None,
    ) -> None:
        self.node_id = node_id
        self.raft_log = raft_log
        self._nursery = nursery
        self._post = post
        self._blocking = blocking
        self.build_in_child = build_in_child
        self._stopping = stopping
        self._failpoints = failpoints
        self.building: OffsetAndEpoch | None = None
        """The snapshot being built, None when none is."""
        self.deferred: SnapshotToWrite | None = None
        """The newest snapshot the host asked for while another was being built."""

    def offer(self, snapshot: SnapshotToWrite) -> None:
        """The host took ``snapshot``: built now, or once the one in progress is done (its view
        holds the image as of now, so the newest trigger is never lost when no batch follows
        it)."""
        if self.building is not None:
            log.info("node %d: deferring snapshot %s: snapshot %s is still being built", self.node_id,
                     _stem(snapshot.snapshot_id), _stem(self.building))
            self.deferred = snapshot
        else:
            self.start(snapshot)

    def start(self, snapshot: SnapshotToWrite) -> None:
        """Start building ``snapshot``."""
        age_heap()  # the image up to the snapshot is long-lived (server.node.heap)
        log.info("node %d: building snapshot %s", self.node_id, _stem(snapshot.snapshot_id))
        self.building = snapshot.snapshot_id
        self._nursery.start_soon(self._build, snapshot)

    async def handle(self, item: SnapshotBuilt | SnapshotFrozen) -> None:
        """Carry on with a posted event of the pipeline, on the driving task."""
        if isinstance(item, SnapshotBuilt):
            await self._write(item)
        else:
            await self._take(item)

    def _done(self) -> None:
        """The snapshot being built was taken by the log, or given up: the newest one deferred
        meanwhile (if any) is built next."""
        self.building = None
        deferred, self.deferred = self.deferred, None
        if deferred is not None and not self._stopping():
            self.start(deferred)

    async def _build(self, snapshot: SnapshotToWrite) -> None:
        """Build ``snapshot``'s bytes and post them: in a forked child at a lower priority when
        the image holds :data:`FORK_MIN_IMAGE_RECORDS` records or more, else a step at a time on
        the event loop, letting every other task run between two steps (a worker thread would
        hold the GIL against the event loop). A failed child's snapshot is skipped, logged at
        ERROR; a deferred one, or the next trigger, takes another."""
        started = time.perf_counter()
        if self.build_in_child and can_fork() and snapshot.image_records >= FORK_MIN_IMAGE_RECORDS:
            try:
                data = await build_in_child(snapshot.build)
            except BuildFailed as exc:
                log.error("node %d: snapshot %s not built: %s", self.node_id, _stem(snapshot.snapshot_id), exc)
                self._done()
                return
        else:
            steps = snapshot.steps()
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    data = done.value
                    break
                await trio.sleep(0)
        self._post(SnapshotBuilt(snapshot.snapshot_id, data, time.perf_counter() - started))

    async def _write(self, built: SnapshotBuilt) -> None:
        """Open a built snapshot's file on the driving task (the log's one caller), then write
        and freeze it (fsync, rename) on a thread of its own while the node goes on: an fsync
        of 100 MB awaited here would hold up the raft traffic for seconds. The log takes the
        file once it is frozen (:class:`SnapshotFrozen`); a storage failure stops the node.

        An armed ``snapshot.write`` failpoint skips the snapshot (``drop``; ``error``, logged
        at ERROR as a failed write), holds its write back (``delay``) or stops the node before
        it is written (``halt``)."""
        raft_log, snapshot_id = self.raft_log, built.snapshot_id
        fault = self._failpoints.hit("snapshot.write") if self._failpoints is not None and self._failpoints.armed else None
        if fault is not None and fault.kind in ("drop", "error"):
            log.log(logging.ERROR if fault.kind == "error" else logging.INFO, "node %d: snapshot %s not written: "
                    "failpoint snapshot.write %s", self.node_id, _stem(snapshot_id), fault.text())
            self._done()
            return
        writer = await self._blocking(lambda: raft_log.open_snapshot_writer(snapshot_id))
        if writer is None:  # there already, or the log moved past it
            self._done()
            return
        log.info("node %d: writing snapshot %s (%d bytes, built in %.1f s)", self.node_id, _stem(snapshot_id),
                 len(built.data), built.build_s)

        def write_and_freeze() -> None:
            data = memoryview(built.data)
            with writer:
                for start in range(0, len(data), SNAPSHOT_FLUSH_BYTES):
                    writer.append(data[start:start + SNAPSHOT_FLUSH_BYTES])
                    writer.flush()  # a piece at a time: the log's own fsyncs never queue behind it all
                writer.freeze()

        async def freeze() -> None:
            if fault is not None and fault.kind == "delay":
                await trio.sleep(fault.value / 1000)
            await trio.to_thread.run_sync(write_and_freeze)
            self._post(SnapshotFrozen(snapshot_id))

        self._nursery.start_soon(freeze)

    async def _take(self, frozen: SnapshotFrozen) -> None:
        """The log takes a frozen snapshot (or deletes it, when it meanwhile moved past it);
        the next snapshot may be built."""
        raft_log = self.raft_log
        await self._blocking(lambda: raft_log.snapshot_frozen(frozen.snapshot_id))
        self._done()
