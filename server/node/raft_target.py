"""What each effect of a core Outbox means for a node: :class:`NodeTarget`, the node's
``server.raft.outbox.OutboxTarget`` (the simulation has its own, over in-memory logs and a
simulated network).

``server.raft.outbox.apply`` calls it in the order of the Outbox contract: the election state
goes to quorum-state (tmp + fsync + rename) first; log changes, then the fsync (in one call when
nothing is sent or answered between them), on the event loop when they carry at most
:data:`ON_LOOP_LOG_BYTES`, else off it, as a snapshot install always is; sends go to the
:class:`~server.node.peer.Peers`; replies complete the pending requests; a loaded snapshot and
committed batches go to the controller host and then the listener; append results to the host
(its own appends) or the listener. Once per Outbox (``schedule``) the node's news goes out: the
finalized features ApiVersions reports, the leader the listener knows, the role transition in
the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import trio

from server.controller.host import QuorumController
from server.net import ChannelDispatcher, PendingRequest
from server.node.features import finalized_features
from server.node.peer import Peers
from server.node.startup import to_stored_election
from server.raft.core import RaftCore
from server.raft.events import AppendResult, CommittedBatch, OutboundRequest, Outbox, Reply
from server.raft.outbox import apply_log_changes, flush_follows_write
from server.raft.roles import Leader, Resigned
from server.raft.types import ElectionState, LeaderAndEpoch, OffsetAndEpoch
from server.storage_raft_log import StorageRaftLog
from storage.quorum_state import FileQuorumStateStore
from storage.snapshots import SnapshotId, load_snapshot_batches

__all__ = ["NodeTarget", "RaftListener"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")

ON_LOOP_LOG_BYTES = 1024 * 1024
"""Log writes of at most this many bytes, and fsyncs of at most this many bytes written since
the last one, run on the event loop (``Node._blocking``'s ``on_loop``): copying them into the
page cache takes well under a millisecond, and each thread hand-off they save costs about as
much CPU as the write. Larger ones (a catching-up follower's 8 MiB fetches, a controller's
10,000-record batches at scale) and snapshot installs go to a worker thread, so that the
connections keep moving meanwhile."""


class RaftListener(Protocol):
    """A local state machine fed by the node (Kafka's ``RaftClient.Listener``). Called from the
    driving task, in order, after the Outbox that produced the news was executed; a listener
    must not block (post work to its own task instead)."""

    def handle_append_result(self, result: AppendResult) -> None:
        """Where an append made with ``Node.append`` will land, or why it was refused."""

    def handle_commit(self, batch: CommittedBatch) -> None:
        """One batch (control batches included) now wholly below the high watermark, each
        exactly once and in offset order."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """The leader or epoch this node knows of changed."""


class NodeTarget:
    """The Outbox target of node ``node_id`` (module docstring). ``blocking`` runs file I/O
    (off the event loop, or on it with ``on_loop=True``), ``now_ms`` reads the node's clock;
    ``pending`` maps the core's request ids to the requests waiting for their answers."""

    def __init__(
        self,
        node_id: int,
        *,
        core: RaftCore,
        host: QuorumController,
        raft_log: StorageRaftLog,
        store: FileQuorumStateStore,
        peers: Peers,
        pending: dict[int, PendingRequest],
        dispatcher: ChannelDispatcher,
        listener: RaftListener | None,
        blocking: Callable[..., Awaitable[Any]],
        now_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.now_ms = now_ms
        self.core = core
        self.host = host
        self.raft_log = raft_log
        self.store = store
        self.peers = peers
        self.pending = pending
        self.dispatcher = dispatcher
        self.listener = listener
        self._blocking = blocking
        self.deadline_ms: int | None = None
        """The core's next deadline."""
        self.resigned = trio.Event()
        """Set once the core is Resigned (a graceful stop waits for it)."""
        self.flushed = False
        """This Outbox's flush completed: the core must hear of it (``FlushCompleted``)."""
        self._written_durably = False
        self._unflushed_bytes = 0
        """Bytes written to the log since its last fsync."""
        self._features_seen = False
        self._known_leader: LeaderAndEpoch | None = None
        self._known_role: tuple[str, int, int | None, bool] | None = None
        self._epoch_committed: int | None = None
        """The last epoch this node led whose start it logged as committed."""

    def begin(self) -> None:
        """A new Outbox is about to be applied."""
        self.flushed = self._written_durably = self._features_seen = False

    # ------------------------------------------------------------------ OutboxTarget

    async def persist_election(self, election: ElectionState) -> None:
        """quorum-state, written and fsynced off the event loop."""
        core, store = self.core, self.store
        state = to_stored_election(election, core.voters)
        await self._blocking(lambda: store.write_election_state(state, core.kraft_version))

    async def write_log(self, out: Outbox) -> None:
        """The log changes, in one call: on the event loop when they append at most
        :data:`ON_LOOP_LOG_BYTES` since the last fsync and install no snapshot, else in a
        worker thread. When the Outbox also flushes and sends or answers nothing in between (a
        follower's fetched batches), the fsync rides the same call and :meth:`flush` has
        nothing left to do."""
        raft_log = self.raft_log
        self._unflushed_bytes += sum(len(data) for data in out.appends)
        on_loop = out.install_snapshot is None and self._unflushed_bytes <= ON_LOOP_LOG_BYTES
        if flush_follows_write(out):
            def write_and_flush() -> None:
                apply_log_changes(raft_log, out)
                raft_log.flush()

            await self._blocking(write_and_flush, on_loop=on_loop)
            self._written_durably = True
            self._unflushed_bytes = 0
            return
        await self._blocking(lambda: apply_log_changes(raft_log, out), on_loop=on_loop)

    def send(self, request: OutboundRequest) -> None:
        """Hand the request to the destination's peer task."""
        self.peers.send(request)

    def reply(self, reply: Reply) -> None:
        """Answer the pending request, unless its connection went away."""
        pending = self.pending.pop(reply.request_id, None)
        if pending is not None and not pending.done:
            pending.respond(reply.response)

    async def flush(self) -> None:
        """fsync the log (unless :meth:`write_log` already did), on the event loop when at most
        :data:`ON_LOOP_LOG_BYTES` were written since the last one; the core hears of it in a
        FlushCompleted step."""
        if not self._written_durably:
            on_loop = self._unflushed_bytes <= ON_LOOP_LOG_BYTES
            await self._blocking(self.raft_log.flush, on_loop=on_loop)
            self._unflushed_bytes = 0
        self.flushed = True

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """The controller starts again from the snapshot's records: it replays them a slice
        per poll (``QuorumController.load_snapshot``), and the node goes on meanwhile."""
        directory = self.raft_log.log.dir
        snapshot = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        content = await self._blocking(lambda: load_snapshot_batches(directory, snapshot))
        self.host.load_snapshot(self.now_ms(), snapshot_id, content.iter_data_records())
        self._features_seen = True
        self._maybe_notify_leader()

    def commit(self, batch: CommittedBatch) -> None:
        """The controller replays the batch, then the listener hears of it."""
        self.host.commit(self.now_ms(), batch)
        self._features_seen = True
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_commit(batch)

    def append_result(self, result: AppendResult) -> None:
        """The host's own appends stay with it; others go to the listener."""
        if self.host.append_result(result):
            return
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_append_result(result)

    def schedule(self, deadline_ms: int | None) -> None:
        """The core's next deadline; then the news of this Outbox as a whole: finalized
        features, the leader, the role, a resignation to wait for."""
        self._maybe_notify_leader()
        self._log_transition()
        if self._features_seen:
            self._features_seen = False
            self.dispatcher.finalized = finalized_features(
                self.host.controller.feature_levels, self.core.high_watermark, self.core.kraft_version
            )
        self.deadline_ms = deadline_ms
        if isinstance(self.core.state, Resigned):
            self.resigned.set()

    # ------------------------------------------------------------------ news

    def _log_transition(self) -> None:
        """Log each change of role, epoch or known leader at INFO, as Kafka's ``QuorumState``
        logs its completed transitions; and, as leader, the moment the high watermark first
        passes the epoch's start (Kafka's ``LeaderState`` logs "High watermark set to ... for
        the first time for epoch"): from then on the epoch's writes can commit."""
        core = self.core
        state = core.state
        role = (state.name, state.epoch, state.leader_id, core.quorum.is_voter)
        if role != self._known_role:
            self._known_role = role
            log.info(
                "node %d: %s in epoch %d (leader %s, %s)",
                self.node_id, state.name, state.epoch,
                "none" if state.leader_id is None else state.leader_id,
                "voter" if role[3] else "observer",
            )
        if (
            isinstance(state, Leader)
            and self._epoch_committed != state.epoch
            and state.high_watermark is not None
        ):
            self._epoch_committed = state.epoch
            log.info("node %d: high watermark %d for the first time in epoch %d (epoch start offset %d)",
                     self.node_id, state.high_watermark, state.epoch, state.epoch_start_offset)

    def _maybe_notify_leader(self) -> None:
        listener = self.listener
        if listener is None:
            return
        leader = self.core.leader_and_epoch
        if leader != self._known_leader:
            self._known_leader = leader
            listener.handle_leader_change(leader)

