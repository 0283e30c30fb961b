"""The one Outbox applier: :func:`apply` carries out an Outbox in its contract's order.

Every driver of the core (the node, the deterministic simulation, the unit tests' context)
applies Outboxes through this module, implementing :class:`OutboxTarget` for what each effect
means to it: a file fsynced on a disk, a list in memory. The order lives here alone (see
:class:`~server.raft.events.Outbox` for the contract):

1. ``persist_election`` (durable before anything of this Outbox leaves);
2. ``write_log`` (truncation or snapshot install, appends, high watermark:
   :func:`apply_log_changes` does them in order on a ``MutableRaftLog``);
3. ``send`` each request, then ``reply`` each response;
4. ``flush`` (the target reports ``FlushCompleted`` to the core when it is done);
5. ``load_snapshot``, then ``commit`` each committed batch, then ``append_result`` each result;
6. ``schedule`` the next deadline.

The target's I/O methods are coroutines so that the node can run them off the event loop.
A target whose coroutines never suspend (the simulation, tests) uses :func:`apply_now`, which
runs the same coroutine to completion without an event loop.
"""

from __future__ import annotations

from typing import Protocol

from server.raft.events import AppendResult, CommittedBatch, OutboundRequest, Outbox, Reply
from server.raft.log import MutableRaftLog
from server.raft.types import ElectionState, OffsetAndEpoch


class OutboxTarget(Protocol):
    """What an Outbox's effects do on one driver."""

    async def persist_election(self, election: ElectionState) -> None:
        """Write ``election`` to quorum-state durably (it must survive a crash on return)."""
        ...

    async def write_log(self, out: Outbox) -> None:
        """Apply the Outbox's log changes (normally :func:`apply_log_changes`)."""
        ...

    def send(self, request: OutboundRequest) -> None:
        """Send a request to a peer; its answer or failure goes back to the core later."""
        ...

    def reply(self, reply: Reply) -> None:
        """Answer the received request ``reply.request_id``."""
        ...

    async def flush(self) -> None:
        """Make the log durable up to its end offset (now, or report it done later)."""
        ...

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """The state machine starts again from the snapshot ``snapshot_id`` (already in the
        log's snapshot store)."""
        ...

    def commit(self, batch: CommittedBatch) -> None:
        """Hand a committed batch to the state machine (once each, in offset order)."""
        ...

    def append_result(self, result: AppendResult) -> None:
        """Tell the state machine where its appended records go (or why they do not)."""
        ...

    def schedule(self, deadline_ms: int | None) -> None:
        """Step the core with a Tick at ``deadline_ms`` at the latest (None: no timer)."""
        ...


def has_log_changes(out: Outbox) -> bool:
    """True when the Outbox truncates, installs a snapshot, appends or moves the HWM."""
    return (
        out.truncate_to is not None
        or out.install_snapshot is not None
        or bool(out.appends)
        or out.high_watermark is not None
    )


def flush_follows_write(out: Outbox) -> bool:
    """True when :func:`apply` does nothing between this Outbox's log write and its flush (it
    flushes, and sends and answers nothing): a target may then fsync inside the write (a
    follower's fetched batches)."""
    return out.flush and not out.sends and not out.replies


def apply_log_changes(log: MutableRaftLog, out: Outbox) -> None:
    """Contract steps 2-4 on ``log``: truncate, install a snapshot, append, record the HWM."""
    if out.truncate_to is not None:
        log.truncate_to(out.truncate_to)
    if out.install_snapshot is not None:
        log.install_snapshot(*out.install_snapshot)
    for data in out.appends:
        log.append(data)
    if out.high_watermark is not None:
        log.update_high_watermark(out.high_watermark)


async def apply(out: Outbox, target: OutboxTarget) -> None:
    """Carry out ``out`` on ``target`` in the contract's order."""
    if out.election_state is not None:
        await target.persist_election(out.election_state)
    if has_log_changes(out):
        await target.write_log(out)
    for request in out.sends:
        target.send(request)
    for reply in out.replies:
        target.reply(reply)
    if out.flush:
        await target.flush()
    if out.load_snapshot is not None:
        await target.load_snapshot(out.load_snapshot)
    for batch in out.committed:
        target.commit(batch)
    for result in out.append_results:
        target.append_result(result)
    target.schedule(out.next_deadline_ms)


def apply_now(out: Outbox, target: OutboxTarget) -> None:
    """:func:`apply` for a target whose coroutines never suspend. Raises RuntimeError if one
    does (it would need an event loop)."""
    coroutine = apply(out, target)
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("an OutboxTarget suspended: drive it with `await apply(...)` instead")
