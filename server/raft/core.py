"""The sans-IO KRaft core: ``RaftCore.step(now_ms, event) -> Outbox``.

The core owns the role (``server.raft.roles``), the timers, the in-flight requests and the
high watermark. It reads the log through ``RaftLog`` and never touches a socket, a file or the
clock: time comes in as ``now_ms``, randomness from the injected ``random.Random``, and every
effect goes out in the :class:`~server.raft.events.Outbox`, whose docstring is the ordering
contract the driver follows. It mirrors ``KafkaRaftClient`` + ``QuorumState``; the handling of
each RPC lives in its own module (``vote``, ``begin_quorum_epoch``, ``end_quorum_epoch``,
``fetch``, ``fetch_snapshot``, ``describe_quorum``, ``add_raft_voter``, ``remove_raft_voter``,
``update_raft_voter``).

Known differences from Kafka, by design of this version:

* a follower sends its next Fetch only after the previous records are flushed (Kafka fsyncs
  synchronously inside ``appendAsFollower``), and the leader counts only its *flushed* end
  offset toward the high watermark (Kafka counts its log end offset before the fsync);
* parked fetches are woken when the log end offset the driver applied passes their offset, so
  followers see new records after the step that appended them (Kafka: right after the append);
* in-flight requests are timed out by the core itself after ``request.timeout.ms`` (a driver
  may report failures earlier with ``RequestFailed``);
* not implemented: controller auto-join, kraft.version upgrades (UpdateFeatures), KIP-1166
  early completion of parked fetches, a shutting-down state answering BROKER_NOT_AVAILABLE
  (``Resign`` is the graceful hand-over).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kwire.errors import Errors
from messages.generated.fetch_request import FetchRequest
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.voters_record import VotersRecord
from server.raft import (
    add_raft_voter,
    begin_quorum_epoch,
    describe_quorum,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    remove_raft_voter,
    update_raft_voter,
    vote,
)
from server.raft.control import (
    build_control_batch,
    build_data_batch,
    control_records_of,
    kraft_version_record,
    leader_change_message,
    voter_set_from_record,
    voters_record,
)
from server.raft.events import (
    UNSUPPORTED_VERSION,
    AppendResult,
    ClientAppend,
    CommittedBatch,
    Event,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    Reply,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    Tick,
)
from server.raft.log import RaftLog
from server.raft.roles import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    transition_allowed,
)
from server.raft.types import (
    CHECK_QUORUM_TIMEOUT_FACTOR,
    ELECTION_BACKOFF_BASE_MS,
    MAX_FETCH_SIZE_BYTES,
    ElectionState,
    Endpoint,
    LeaderAndEpoch,
    OffsetAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    ReplicaKey,
    VoterNode,
    VoterSet,
)
from storage.records import iter_batches
from storage.snapshots import read_snapshot_content

BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)


class IllegalTransitionError(AssertionError):
    """A role change that :data:`server.raft.roles.TRANSITIONS` does not allow."""


class RaftSafetyError(AssertionError):
    """The core was asked to do something that would break Raft safety (e.g. a leader telling
    it to truncate below its high watermark). The node must stop."""


@dataclass(slots=True)
class _InFlight:
    destination_id: int
    deadline_ms: int
    api: str


class RaftCore:
    """One replica of the ``__cluster_metadata`` KRaft quorum, without I/O.

    ``voters`` is the bootstrap voter set: the static ``controller.quorum.voters`` at
    kraft.version 0, or the set from the bootstrap checkpoint at kraft.version 1 (empty for a
    controller formatted without initial controllers); a VotersRecord in the log overrides it
    (``KRaftControlRecordStateMachine``). ``bootstrap_servers`` are where an observer that knows
    no leader fetches from. ``election`` is the persisted quorum-state (None when there is
    none). Raises ValueError when there are neither voters nor bootstrap servers.
    """

    def __init__(
        self,
        *,
        identity: ReplicaIdentity,
        log: RaftLog,
        voters: VoterSet,
        rng: random.Random,
        now_ms: int,
        election: ElectionState | None = None,
        kraft_version: int = 0,
        config: QuorumConfig | None = None,
        bootstrap_servers: Sequence[Endpoint] = (),
    ) -> None:
        if voters.size == 0 and not bootstrap_servers:
            raise ValueError("Missing kraft bootstrap servers")  # KafkaRaftClient's ConfigException
        self.identity = identity
        self.bootstrap_servers: dict[int, Endpoint] = {
            -2 - index: endpoint for index, endpoint in enumerate(bootstrap_servers)
        }
        """``controller.quorum.bootstrap.servers`` by the ids Kafka gives them: -2, -3, ..."""
        self._learned_endpoints: dict[int, Endpoint] = {}
        self.log = log
        self.config = config or QuorumConfig()
        self.rng = rng
        self.local_key = identity.key
        self._bootstrap_voters = voters
        self._bootstrap_kraft_version = kraft_version
        self._voter_history: list[tuple[int, VoterSet]] = []
        self._kraft_history: list[tuple[int, int]] = []
        self._pending_load_snapshot: OffsetAndEpoch | None = None
        self._delivered_offset = log.log_start_offset
        latest = log.latest_snapshot_id()
        if latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
            size = log.snapshot_size(latest) or 0
            self._read_snapshot_control(latest, log.read_snapshot(latest, 0, size))
            self._pending_load_snapshot = latest
            self._delivered_offset = max(self._delivered_offset, latest.offset)
        self._scan_whole_log()
        self._out = Outbox()
        self._now = now_ms
        self._staged_end: int | None = None
        self._staged_epoch: int | None = None
        self._staged_truncation = False
        self._high_watermark = log.high_watermark
        self._next_correlation = 1
        self._in_flight: dict[int, _InFlight] = {}
        self._backoff_until: dict[int, int] = {}
        self._election_retries = 0
        self._persisted = election or ElectionState(0)
        self._pending_election: ElectionState | None = None
        self.state: EpochState = self._initial_state(self._persisted, now_ms)
        if election is None or self.state.election() != self._persisted:
            # written at start-up like QuorumState.initialize's durable transition
            self._pending_election = self.state.election()

    # ------------------------------------------------------------------ public view

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.state.leader_id, self.state.epoch)

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark (never decreases while the process lives)."""
        return self._high_watermark

    @property
    def voters(self) -> VoterSet:
        return self._voter_history[-1][1] if self._voter_history else self._bootstrap_voters

    @property
    def kraft_version(self) -> int:
        return self._kraft_history[-1][1] if self._kraft_history else self._bootstrap_kraft_version

    @property
    def is_voter(self) -> bool:
        return self.voters.is_voter(self.local_key)

    @property
    def persisted_election(self) -> ElectionState:
        return self._persisted

    # ------------------------------------------------------------------ step

    def step(self, now_ms: int, event: Event) -> Outbox:
        """Feed one event at ``now_ms``; returns what the driver must do (see ``Outbox``)."""
        if now_ms < self._now:
            raise ValueError(f"time went backwards: {now_ms} < {self._now}")
        self._now = now_ms
        self._out = Outbox()
        self._staged_end = None
        self._staged_epoch = None
        self._staged_truncation = False
        if self._pending_election is not None:
            self._out.election_state = self._pending_election
            self._persisted = self._pending_election
            self._pending_election = None
        if self._pending_load_snapshot is not None:
            self._out.load_snapshot = self._pending_load_snapshot
            self._pending_load_snapshot = None
        self._on_log_applied(now_ms)
        if isinstance(event, RequestReceived):
            self._handle_request(now_ms, event)
        elif isinstance(event, ResponseReceived):
            self._handle_response(now_ms, event)
        elif isinstance(event, RequestFailed):
            if event.correlation_id in self._in_flight:
                flight = self._in_flight[event.correlation_id]
                self._request_failed(now_ms, event.correlation_id)
                if event.reason == UNSUPPORTED_VERSION and flight.api == "Vote":
                    vote.pre_vote_unsupported(self, now_ms)
        elif isinstance(event, ClientAppend):
            self._client_append(now_ms, event)
        elif isinstance(event, Resign):
            if isinstance(self.state, Leader):
                self._resign(now_ms)
        elif isinstance(event, (Tick, FlushCompleted)):
            pass
        else:  # pragma: no cover - typing guards this
            raise TypeError(f"unknown event {event!r}")
        self._poll(now_ms)
        self._deliver_committed()
        self._out.next_deadline_ms = self._next_deadline(now_ms)
        return self._out

    # ------------------------------------------------------------------ initial state

    def _initial_state(self, election: ElectionState, now_ms: int) -> EpochState:
        """``QuorumState.initialize`` (kraft-facts §4.7)."""
        log_epoch = self.log.last_fetched_epoch
        if election.epoch < log_epoch:
            return Unattached(log_epoch, self._voter_election_deadline(now_ms))
        if election.leader_id == self.identity.node_id and self.is_voter:
            return Resigned(
                election.epoch,
                self.local_key,
                set(self.voters.ids - {self.identity.node_id}),
                self._election_deadline(now_ms),
                [],
            )
        if election.voted_key is not None and election.voted_key.matches(self.local_key) and self.is_voter:
            return Candidate(
                election.epoch,
                self.local_key,
                self.voters,
                self._election_deadline(now_ms),
                retries=1,
            )
        if election.leader_id is not None and self.voters.get(election.leader_id) is not None:
            return Follower(
                election.epoch,
                election.leader_id,
                now_ms + self.config.fetch_timeout_ms,
                election.voted_key,
            )
        return Unattached(election.epoch, self._voter_election_deadline(now_ms), election.voted_key)

    # ------------------------------------------------------------------ time

    def _election_deadline(self, now_ms: int) -> int:
        """``QuorumState.randomElectionTimeoutMs``: T + rand[0, T)."""
        timeout = self.config.election_timeout_ms
        return now_ms + timeout + self.rng.randrange(timeout)

    def _voter_election_deadline(self, now_ms: int) -> int | None:
        if not self.is_voter:
            return None
        if self.voters.is_only_voter(self.local_key):
            return now_ms
        return self._election_deadline(now_ms)

    def _election_backoff_ms(self, retries: int) -> int:
        """``KafkaRaftClient.binaryExponentialElectionBackoffMs``: 100 ms x rand[0, 2^retries),
        capped at ``election.backoff.max.ms``."""
        bound = 1 << min(max(retries, 1), 20)
        return min(self.config.election_backoff_max_ms, ELECTION_BACKOFF_BASE_MS * self.rng.randrange(bound))

    def _next_deadline(self, now_ms: int) -> int | None:
        deadlines: list[int] = [f.deadline_ms for f in self._in_flight.values()]
        deadlines.extend(self._backoff_until.values())
        state = self.state
        if isinstance(state, Unattached):
            if state.election_deadline_ms is not None:
                deadlines.append(state.election_deadline_ms)
        elif isinstance(state, (Prospective, Candidate)):
            deadlines.append(state.election_deadline_ms)
            if state.backoff_until_ms is not None:
                deadlines.append(state.backoff_until_ms)
        elif isinstance(state, Follower):
            deadlines.append(state.fetch_deadline_ms)
            if state.backoff_until_ms is not None:
                deadlines.append(state.backoff_until_ms)
        elif isinstance(state, Leader):
            if state.voters.majority_size > 1:
                deadlines.append(state.check_quorum_deadline_ms)
            deadlines.extend(state.next_begin_epoch_ms.values())
            deadlines.extend(p.expires_ms for p in state.parked)
            if state.accumulator.deadline_ms is not None:
                deadlines.append(state.accumulator.deadline_ms)
        elif isinstance(state, Resigned):
            deadlines.append(state.election_deadline_ms)
        # Timers at or before now were acted on by _poll, or wait on an in-flight request, a
        # backoff or a flush, each of which brings its own later deadline or event.
        future = [d for d in deadlines if d > now_ms]
        if self._staged_end is not None or self._staged_truncation:
            # the next Fetch can only be built once the driver applied the staged changes
            future.append(now_ms)
        return min(future) if future else None

    # ------------------------------------------------------------------ log view

    def log_end_offset(self) -> int:
        """The log end offset including changes staged in this step's Outbox."""
        return self._staged_end if self._staged_end is not None else self.log.log_end_offset

    def last_fetched_epoch(self) -> int:
        if self._staged_epoch is not None:
            return self._staged_epoch
        if self._staged_truncation:
            end = self.log_end_offset()
            if end <= self.log.log_start_offset:
                snapshot = self.log.latest_snapshot_id()
                return snapshot.epoch if snapshot is not None else 0
            for batch in iter_batches(self.log.read(end - 1, 1)):
                return batch.partition_leader_epoch
        return self.log.last_fetched_epoch

    def end_offset(self) -> OffsetAndEpoch:
        return OffsetAndEpoch(self.log_end_offset(), self.last_fetched_epoch())

    def stage_append(self, data: bytes) -> None:
        """Append whole batches (already at the right offsets) via the Outbox."""
        batches = list(iter_batches(data))
        if not batches:
            return
        if batches[0].base_offset != self.log_end_offset():
            raise RaftSafetyError(
                f"append at {batches[0].base_offset}, end offset is {self.log_end_offset()}"
            )
        self._out.appends.append(data)
        self._out.flush = True
        self._staged_end = batches[-1].next_offset
        self._staged_epoch = batches[-1].partition_leader_epoch
        for batch in batches:
            self._scan_control_batch(batch)
        state = self.state
        if isinstance(state, Leader) and state.voters != self.voters:
            state.set_voters(self.voters, self._now)

    def stage_truncation(self, offset: int) -> None:
        if offset < self._high_watermark:
            raise RaftSafetyError(
                f"truncation to {offset} below the high watermark {self._high_watermark}"
            )
        if self._out.appends:
            raise RaftSafetyError("truncation after an append in one step")
        self._out.truncate_to = offset if self._out.truncate_to is None else min(offset, self._out.truncate_to)
        self._out.flush = True
        self._staged_end = offset
        self._staged_epoch = None
        self._staged_truncation = True
        self._voter_history = [(o, v) for o, v in self._voter_history if o < offset]
        self._kraft_history = [(o, v) for o, v in self._kraft_history if o < offset]

    def update_high_watermark(self, offset: int) -> None:
        if offset < self._high_watermark:
            raise RaftSafetyError(f"high watermark moving back from {self._high_watermark} to {offset}")
        if offset > self._high_watermark:
            self._high_watermark = offset
            self._out.high_watermark = offset

    # ------------------------------------------------------------------ control records

    def _scan_whole_log(self) -> None:
        """Read the voter set and kraft.version history from the log, a chunk at a time."""
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            progressed = False
            for batch in iter_batches(self.log.read(offset, MAX_FETCH_SIZE_BYTES)):
                if batch.last_offset < offset:
                    continue
                self._scan_control_batch(batch)
                offset = batch.last_offset + 1
                progressed = True
            if not progressed:
                return

    def _scan_control_batch(self, batch: Any) -> None:
        if not batch.is_control:
            return
        for record in control_records_of(batch):
            if isinstance(record.message, VotersRecord):
                self._voter_history.append((record.offset, voter_set_from_record(record.message)))
            elif isinstance(record.message, KRaftVersionRecord):
                self._kraft_history.append((record.offset, record.message.kraft_version))

    def _read_snapshot_control(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Voters and kraft.version held by a snapshot count as written at its last offset."""
        content = read_snapshot_content(data)
        at = snapshot_id.offset - 1
        self._voter_history = [(o, v) for o, v in self._voter_history if o < at]
        self._kraft_history = [(o, v) for o, v in self._kraft_history if o < at]
        if content.voters is not None:
            self._voter_history.append((at, voter_set_from_record(content.voters)))
        if any(r.message.__class__ is KRaftVersionRecord for r in content.control_records()):
            self._kraft_history.append((at, content.kraft_version))

    @property
    def voters_in_log(self) -> bool:
        return bool(self._voter_history)

    def stage_snapshot_install(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A downloaded snapshot replaces the whole log (``truncateToLatestSnapshot``)."""
        if isinstance(self.state, Leader):
            raise RaftSafetyError("a leader never loads a snapshot")
        if snapshot_id.offset < self._high_watermark:
            raise RaftSafetyError(
                f"snapshot {snapshot_id} ends below the high watermark {self._high_watermark}"
            )
        self._voter_history = []
        self._kraft_history = []
        self._read_snapshot_control(snapshot_id, data)
        self._out.install_snapshot = (snapshot_id, data)
        self._out.load_snapshot = snapshot_id
        self._out.committed.clear()
        self._staged_end = snapshot_id.offset
        self._staged_epoch = snapshot_id.epoch
        self._delivered_offset = snapshot_id.offset
        self.update_high_watermark(snapshot_id.offset)

    def learn_endpoint(self, node_id: int, host: str, port: int) -> None:
        """Remember a leader's endpoint named in a response (NodeEndpoints) or a request
        (LeaderEndpoints), for leaders that are not (yet) in the local voter set."""
        if node_id >= 0:
            self._learned_endpoints[node_id] = Endpoint(self.default_listener, host, port)

    @property
    def default_listener(self) -> str:
        """The first controller listener (``controller.listener.names``)."""
        return self.identity.endpoints[0].name if self.identity.endpoints else "CONTROLLER"

    def uncommitted_voter_change(self) -> bool:
        """True while the latest VotersRecord in the log is above the high watermark."""
        return bool(self._voter_history) and self._voter_history[-1][0] >= self._high_watermark

    def append_voters_record(self, voters: VoterSet, now_ms: int) -> int:
        """Leader: append a control batch with one VotersRecord; returns its offset."""
        state = self.state
        assert isinstance(state, Leader)
        self._drain_appends(now_ms, state)
        offset = self.log_end_offset()
        self.stage_append(
            build_control_batch([voters_record(voters)], base_offset=offset, epoch=state.epoch, timestamp_ms=now_ms)
        )
        pending = state.pending_voter_change
        if pending is not None:
            pending.record_offset = offset
            if not pending.ack_when_committed:
                self.finish_voter_change(Errors.NONE)
        return offset

    def finish_voter_change(self, error: Errors, message: str | None = None) -> None:
        state = self.state
        assert isinstance(state, Leader)
        pending = state.pending_voter_change
        if pending is None:
            return
        state.pending_voter_change = None
        factory: Any = pending.response_factory
        self.reply(pending.request_id, factory(error, message))

    def _after_leader_high_watermark(self, now_ms: int) -> None:
        state = self.state
        assert isinstance(state, Leader)
        hwm = self._high_watermark
        pending = state.pending_voter_change
        if pending is not None and pending.record_offset is not None and hwm > pending.record_offset:
            self.finish_voter_change(Errors.NONE)
        if state.resign_when_committed is not None and hwm > state.resign_when_committed:
            self._resign(now_ms)

    def validate_snapshot_id(self, snapshot_id: OffsetAndEpoch) -> None:
        """Raise ValueError unless the state machine may snapshot at ``snapshot_id``: at most
        the high watermark, at least the log start, and with the epoch of the batch holding
        ``offset - 1`` (``KafkaRaftClient.createSnapshot``)."""
        if snapshot_id.offset > self._high_watermark:
            raise ValueError(f"snapshot {snapshot_id} beyond the high watermark {self._high_watermark}")
        if snapshot_id.offset <= self.log.log_start_offset:
            raise ValueError(f"snapshot {snapshot_id} not after the log start offset")
        for batch in iter_batches(self.log.read(snapshot_id.offset - 1, 1)):
            if batch.last_offset != snapshot_id.offset - 1:
                raise ValueError(f"snapshot {snapshot_id} does not end at a batch boundary")
            if batch.partition_leader_epoch != snapshot_id.epoch:
                raise ValueError(
                    f"snapshot {snapshot_id} has epoch {snapshot_id.epoch}, the log has "
                    f"{batch.partition_leader_epoch} there"
                )
            return
        raise ValueError(f"snapshot {snapshot_id} is not in the log")

    # ------------------------------------------------------------------ transitions

    def transition(self, new: EpochState) -> None:
        """Change role, checking the transition table; the new election state, if it differs
        from the persisted one, goes into this step's Outbox to be made durable first."""
        old = self.state
        if not transition_allowed(type(old), type(new), old.epoch, new.epoch):
            raise IllegalTransitionError(f"{old!r} -> {new!r} is not allowed")
        if isinstance(old, Leader):
            pending = old.pending_voter_change
            if pending is not None:
                old.pending_voter_change = None
                factory: Any = pending.response_factory
                self._out.replies.append(
                    Reply(pending.request_id, factory(Errors.NOT_LEADER_OR_FOLLOWER, None))
                )
            for parked in old.parked:
                self._out.replies.append(
                    Reply(
                        parked.request_id,
                        fetch.not_leader_response(self, parked.api_version, parked.listener),
                    )
                )
            old.parked.clear()
        self.state = new
        self._in_flight.clear()
        self._backoff_until.clear()
        election = new.election()
        if election != self._persisted:
            self._out.election_state = election
            self._persisted = election

    def transition_to_unattached(self, epoch: int, now_ms: int, voted_key: ReplicaKey | None = None) -> None:
        """Unattached in ``epoch``. Granting a vote restarts the election timer; otherwise an
        Unattached, Prospective or Candidate voter keeps the time it had left
        (``QuorumState.transitionToUnattached``), so that a lagging candidate bumping epochs
        cannot hold everyone else's timers back forever."""
        deadline = self._voter_election_deadline(now_ms)
        state = self.state
        if voted_key is None and deadline is not None:
            if isinstance(state, Unattached) and state.election_deadline_ms is not None:
                deadline = state.election_deadline_ms
            elif isinstance(state, (Prospective, Candidate)):
                deadline = state.election_deadline_ms
        if voted_key is None and epoch == state.epoch:
            voted_key = state.election().voted_key  # at most one vote per epoch, ever
        self.transition(Unattached(epoch, deadline, voted_key))

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        voted = self.state.election().voted_key if self.state.epoch == epoch else None
        self.transition(
            Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms, voted)
        )

    def maybe_transition(self, leader_id: int | None, epoch: int, now_ms: int) -> bool:
        """React to a leader (or just an epoch) learned from any request or response
        (``KafkaRaftClient.maybeTransition``). Returns True if the role changed."""
        state = self.state
        if epoch < state.epoch:
            return False
        if leader_id is not None and leader_id < 0:
            leader_id = None
        if epoch > state.epoch:
            if leader_id is not None and leader_id != self.identity.node_id:
                self.transition_to_follower(epoch, leader_id, now_ms)
            else:
                self.transition_to_unattached(epoch, now_ms)
            return True
        if leader_id is None or leader_id == self.identity.node_id:
            return False
        if state.leader_id == leader_id and isinstance(state, (Follower, Prospective)):
            return False
        if isinstance(state, (Leader, Resigned)) or isinstance(state, Follower):
            raise RaftSafetyError(
                f"{state!r} told that {leader_id} leads epoch {epoch}"
            )
        self.transition_to_follower(epoch, leader_id, now_ms)
        return True

    def start_election(self, now_ms: int) -> None:
        """Election timeout: a pre-vote (Prospective) first, unless disabled or alone."""
        if not self.is_voter:
            return
        if self.config.pre_vote and not self.voters.is_only_voter(self.local_key):
            voted = self.state.election().voted_key
            previous_leader = self.state.leader_id if isinstance(self.state, (Follower, Prospective)) else None
            self.transition(
                Prospective(
                    self.state.epoch,
                    self.voters,
                    self.identity.node_id,
                    self._election_deadline(now_ms),
                    self._election_retries + 1,
                    voted,
                    previous_leader,
                )
            )
            self._election_retries += 1
            return
        self.become_candidate(now_ms)

    def become_candidate(self, now_ms: int) -> None:
        self._election_retries += 1
        candidate = Candidate(
            self.state.epoch + 1,
            self.local_key,
            self.voters,
            self._election_deadline(now_ms),
            self._election_retries,
        )
        self.transition(candidate)
        if candidate.votes.is_won():
            self.become_leader(now_ms)

    def become_leader(self, now_ms: int) -> None:
        """``onBecomeLeader``: LEO becomes the epoch start offset and the start-of-epoch control
        batch is appended at once (kraft-facts §3.4)."""
        state = self.state
        assert isinstance(state, Candidate)
        self._election_retries = 0
        start = self.log_end_offset()
        voters = self.voters
        leader = Leader(
            state.epoch,
            self.local_key,
            voters,
            start,
            state.votes.granted,
            now_ms,
            int(self.config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR),
            self.config.append_linger_ms,
        )
        self.transition(leader)
        messages: list[Any] = [
            leader_change_message(
                self.identity.node_id, sorted(voters.ids), sorted(leader.granting)
            )
        ]
        if self.kraft_version >= 1:
            updated = self._voters_with_current_local_entry(voters)
            if not self.voters_in_log or updated != voters:
                # the set came from the bootstrap checkpoint, or this leader's own endpoints
                # or supported kraft.version range changed since it was written
                messages.append(kraft_version_record(self.kraft_version))
                messages.append(voters_record(updated))
        self.stage_append(
            build_control_batch(messages, base_offset=start, epoch=leader.epoch, timestamp_ms=now_ms)
        )

    def local_voter_entry_is_stale(self) -> bool:
        """kraft.version >= 1 and this voter's listeners or supported kraft.version range differ
        from its entry in the voter set (``FollowerState`` / ``shouldSendUpdateVoteRequest``)."""
        if self.kraft_version < 1 or not self.is_voter:
            return False
        voters = self.voters
        return self._voters_with_current_local_entry(voters) != voters

    def _voters_with_current_local_entry(self, voters: VoterSet) -> VoterSet:
        node = voters.get(self.identity.node_id)
        if node is None or not self.identity.endpoints:
            return voters
        current = VoterNode(node.key, self.identity.endpoints, self.identity.supported_kraft_versions)
        if current == node:
            return voters
        return voters.update_voter(current) or voters

    def _resign(self, now_ms: int) -> None:
        state = self.state
        assert isinstance(state, Leader)
        self.transition(
            Resigned(
                state.epoch,
                self.local_key,
                set(state.voters.ids - {self.identity.node_id}),
                self._election_deadline(now_ms),
                state.preferred_successors(),
            )
        )

    # ------------------------------------------------------------------ requests out

    def send(
        self,
        now_ms: int,
        destination_id: int,
        api: str,
        request: Any,
        endpoint: Endpoint | None = None,
    ) -> int:
        """Queue a request; returns its correlation id. The endpoint defaults to the voter's
        endpoint on the default listener."""
        correlation = self._next_correlation
        self._next_correlation += 1
        voter = self.voters.get(destination_id)
        if endpoint is None and voter is not None:
            endpoint = voter.endpoint(self.default_listener) or (voter.endpoints[0] if voter.endpoints else None)
        if endpoint is None:
            endpoint = self._learned_endpoints.get(destination_id) or self.bootstrap_servers.get(destination_id)
        self._in_flight[correlation] = _InFlight(
            destination_id, now_ms + self.config.request_timeout_ms, api
        )
        self._out.sends.append(
            OutboundRequest(correlation, destination_id, endpoint, request, self.config.request_timeout_ms)
        )
        return correlation

    def can_send_to(self, destination_id: int, now_ms: int) -> bool:
        if any(f.destination_id == destination_id for f in self._in_flight.values()):
            return False
        return self._backoff_until.get(destination_id, -1) <= now_ms

    def reply(self, request_id: int, response: Any) -> None:
        self._out.replies.append(Reply(request_id, response))

    def _request_failed(self, now_ms: int, correlation_id: int) -> None:
        flight = self._in_flight.pop(correlation_id)
        self._backoff_until[flight.destination_id] = now_ms + self.config.retry_backoff_ms
        if flight.api == "ApiVersions":
            add_raft_voter.handle_api_versions(self, now_ms, correlation_id, None)

    # ------------------------------------------------------------------ dispatch

    def _handle_request(self, now_ms: int, event: RequestReceived) -> None:
        request = event.request
        name = type(request).__name__
        if name == "VoteRequest":
            self.reply(event.request_id, vote.handle_request(self, now_ms, event))
        elif name == "BeginQuorumEpochRequest":
            self.reply(event.request_id, begin_quorum_epoch.handle_request(self, now_ms, event))
        elif name == "EndQuorumEpochRequest":
            self.reply(event.request_id, end_quorum_epoch.handle_request(self, now_ms, event))
        elif name == "FetchRequest":
            response = fetch.handle_request(self, now_ms, event, may_park=True)
            if response is not None:
                self.reply(event.request_id, response)
        elif name == "DescribeQuorumRequest":
            self.reply(event.request_id, describe_quorum.handle_request(self, now_ms, event))
        elif name == "FetchSnapshotRequest":
            self.reply(event.request_id, fetch_snapshot.handle_request(self, now_ms, event))
        elif name == "AddRaftVoterRequest":
            add_response = add_raft_voter.handle_request(self, now_ms, event)
            if add_response is not None:
                self.reply(event.request_id, add_response)
        elif name == "RemoveRaftVoterRequest":
            remove_response = remove_raft_voter.handle_request(self, now_ms, event)
            if remove_response is not None:
                self.reply(event.request_id, remove_response)
        elif name == "UpdateRaftVoterRequest":
            update_response = update_raft_voter.handle_request(self, now_ms, event)
            if update_response is not None:
                self.reply(event.request_id, update_response)
        else:
            raise ValueError(f"the KRaft core does not handle {name}")

    def _handle_response(self, now_ms: int, event: ResponseReceived) -> None:
        flight = self._in_flight.get(event.correlation_id)
        if flight is None or flight.destination_id != event.source_id:
            return  # a response to a request from an earlier role or epoch
        del self._in_flight[event.correlation_id]
        name = type(event.response).__name__
        if name == "VoteResponse":
            vote.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "BeginQuorumEpochResponse":
            begin_quorum_epoch.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "EndQuorumEpochResponse":
            end_quorum_epoch.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "FetchResponse":
            fetch.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "FetchSnapshotResponse":
            fetch_snapshot.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "UpdateRaftVoterResponse":
            update_raft_voter.handle_response(self, now_ms, event.source_id, event.response)
        elif name == "ApiVersionsResponse":
            add_raft_voter.handle_api_versions(self, now_ms, event.correlation_id, event.response)
        else:
            raise ValueError(f"the KRaft core does not expect a {name}")

    def backoff(self, destination_id: int, now_ms: int) -> None:
        self._backoff_until[destination_id] = now_ms + self.config.retry_backoff_ms

    # ------------------------------------------------------------------ client appends

    def _client_append(self, now_ms: int, event: ClientAppend) -> None:
        state = self.state
        if not isinstance(state, Leader):
            self._out.append_results.append(
                AppendResult(event.token, -1, -1, state.epoch, Errors.NOT_LEADER_OR_FOLLOWER)
            )
            return
        if not event.values or not all(event.values):
            # KRaft data records have a non-empty value (RecordsIterator)
            self._out.append_results.append(
                AppendResult(event.token, -1, -1, state.epoch, Errors.INVALID_RECORD)
            )
            return
        accumulator = state.accumulator
        if not accumulator.fits(event.values):
            self._out.append_results.append(
                AppendResult(event.token, -1, -1, state.epoch, Errors.RECORD_LIST_TOO_LARGE)
            )
            return
        base = self.log_end_offset() + len(accumulator)
        accumulator.append(event.values, now_ms)
        self._out.append_results.append(
            AppendResult(event.token, base, base + len(event.values) - 1, state.epoch)
        )

    def _drain_appends(self, now_ms: int, state: Leader) -> None:
        """Stage every lingering batch of the accumulator as data batches of this epoch."""
        for values in state.accumulator.drain():
            self.stage_append(
                build_data_batch(values, base_offset=self.log_end_offset(), epoch=state.epoch, timestamp_ms=now_ms)
            )

    # ------------------------------------------------------------------ per-step work

    def _on_log_applied(self, now_ms: int) -> None:
        """The driver applied the last Outbox: count the leader's flushed end offset and wake
        parked fetches whose offset the log end offset has passed."""
        state = self.state
        if not isinstance(state, Leader):
            return
        state.update_local_end_offset(self.log.flushed_offset, now_ms)
        self.maybe_advance_leader_high_watermark()
        end = self.log.log_end_offset
        ready = [p for p in state.parked if end > p.fetch_offset or now_ms >= p.expires_ms]
        if ready:
            state.parked = [p for p in state.parked if p not in ready]
            for parked in ready:
                response = fetch.handle_request(
                    self,
                    now_ms,
                    RequestReceived(parked.request_id, parked.api_version, parked.request, parked.listener),
                    may_park=False,
                )
                if response is not None:
                    self.reply(parked.request_id, response)

    def maybe_advance_leader_high_watermark(self) -> None:
        state = self.state
        assert isinstance(state, Leader)
        new = state.maybe_advance_high_watermark()
        if new is not None and new > self._high_watermark:
            self.update_high_watermark(new)
            self._after_leader_high_watermark(self._now)

    def _poll(self, now_ms: int) -> None:
        for correlation, flight in list(self._in_flight.items()):
            if now_ms >= flight.deadline_ms:
                self._request_failed(now_ms, correlation)
        for destination, until in list(self._backoff_until.items()):
            if until <= now_ms:
                del self._backoff_until[destination]
        state = self.state
        if isinstance(state, Leader):
            self._poll_leader(now_ms, state)
        elif isinstance(state, Follower):
            self._poll_follower(now_ms, state)
        elif isinstance(state, Candidate):
            self._poll_candidate(now_ms, state)
        elif isinstance(state, Prospective):
            self._poll_prospective(now_ms, state)
        elif isinstance(state, Unattached):
            self._poll_unattached(now_ms, state)
        elif isinstance(state, Resigned):
            self._poll_resigned(now_ms, state)

    def _poll_leader(self, now_ms: int, state: Leader) -> None:
        if state.accumulator.needs_drain(now_ms):
            self._drain_appends(now_ms, state)
        pending = state.pending_voter_change
        if pending is not None and now_ms >= pending.deadline_ms:
            self.finish_voter_change(Errors.REQUEST_TIMED_OUT)
        if state.check_quorum_expired(now_ms):
            self._resign(now_ms)
            self._poll(now_ms)
            return
        for voter_id, due in sorted(state.next_begin_epoch_ms.items()):
            if due <= now_ms and self.can_send_to(voter_id, now_ms):
                self.send(now_ms, voter_id, "BeginQuorumEpoch", begin_quorum_epoch.build_request(self, voter_id))
                state.next_begin_epoch_ms[voter_id] = now_ms + self.config.fetch_timeout_ms // 2

    def _poll_follower(self, now_ms: int, state: Follower) -> None:
        if now_ms >= state.fetch_deadline_ms:
            if self.is_voter:
                self.start_election(now_ms)
            else:
                self.transition_to_unattached(state.epoch, now_ms)
            self._poll(now_ms)
            return
        if state.backoff_until_ms is not None and now_ms < state.backoff_until_ms:
            return
        state.backoff_until_ms = None
        self._maybe_send_fetch(now_ms, state.leader_id)

    def _maybe_send_fetch(self, now_ms: int, destination_id: int | None) -> None:
        if destination_id is None or not self.can_send_to(destination_id, now_ms):
            return
        if self._staged_end is not None or self._staged_truncation:
            return  # wait until the driver applied this step's log changes
        if self.log.flushed_offset < self.log.log_end_offset:
            return  # the fetch offset counts toward the HWM: only flushed data may be reported
        state = self.state
        if (
            isinstance(state, Follower)
            and state.has_fetched
            and now_ms >= state.update_voter_due_ms
            and self.local_voter_entry_is_stale()
        ):
            # in place of this Fetch, as Kafka's pollFollowerAsVoter does
            state.update_voter_due_ms = now_ms + 3 * self.config.fetch_timeout_ms
            self.send(now_ms, destination_id, "UpdateRaftVoter", update_raft_voter.build_request(self))
            return
        if isinstance(state, Follower) and state.snapshot_download is not None:
            self.send(
                now_ms,
                destination_id,
                "FetchSnapshot",
                fetch_snapshot.build_request(self, state.snapshot_download),
            )
            return
        self.send(now_ms, destination_id, "Fetch", fetch.build_request(self))

    def _poll_unattached(self, now_ms: int, state: Unattached) -> None:
        if not self.is_voter:
            state.election_deadline_ms = None
        elif state.election_deadline_ms is None:
            state.election_deadline_ms = self._election_deadline(now_ms)  # it became a voter
        if state.election_deadline_ms is not None and now_ms >= state.election_deadline_ms:
            self.start_election(now_ms)
            self._poll(now_ms)
            return
        if not self.is_voter:
            # an observer looks for the leader by fetching from a bootstrap server, or else
            # from any voter (kraft-facts §6.7)
            candidates = sorted(self.bootstrap_servers) or sorted(self.voters.ids)
            if candidates and not any(f.api == "Fetch" for f in self._in_flight.values()):
                target = self.rng.choice(candidates)
                self._maybe_send_fetch(now_ms, target)

    def _poll_candidate(self, now_ms: int, state: Candidate) -> None:
        if state.votes.is_won():
            self.become_leader(now_ms)
            self._poll(now_ms)
            return
        if state.backoff_until_ms is not None:
            if now_ms >= state.backoff_until_ms:
                self._restart_election(now_ms)
            return
        if state.votes.is_lost() or now_ms >= state.election_deadline_ms:
            state.backoff_until_ms = now_ms + self._election_backoff_ms(state.retries)
            if state.backoff_until_ms <= now_ms:
                self._restart_election(now_ms)
            return
        for voter_id in state.votes.unrecorded():
            if voter_id != self.identity.node_id and self.can_send_to(voter_id, now_ms):
                self.send(now_ms, voter_id, "Vote", vote.build_request(self, voter_id, pre_vote=False))

    def _restart_election(self, now_ms: int) -> None:
        if self.config.pre_vote and not self.voters.is_only_voter(self.local_key):
            self.start_election(now_ms)
        else:
            self.become_candidate(now_ms)
        self._poll(now_ms)

    def _poll_prospective(self, now_ms: int, state: Prospective) -> None:
        if state.votes.is_won():
            self.become_candidate(now_ms)
            self._poll(now_ms)
            return
        if state.backoff_until_ms is not None:
            if now_ms >= state.backoff_until_ms:
                self._restart_election(now_ms)
            return
        if state.votes.is_lost() or now_ms >= state.election_deadline_ms:
            if state.leader_id is not None:
                # the majority still hears from the old leader: follow it again
                self.transition_to_follower(state.epoch, state.leader_id, now_ms)
                self._poll(now_ms)
                return
            state.backoff_until_ms = now_ms + self._election_backoff_ms(state.retries)
            if state.backoff_until_ms <= now_ms:
                self._restart_election(now_ms)
            return
        for voter_id in state.votes.unrecorded():
            if voter_id != self.identity.node_id and self.can_send_to(voter_id, now_ms):
                self.send(now_ms, voter_id, "Vote", vote.build_request(self, voter_id, pre_vote=True))

    def _poll_resigned(self, now_ms: int, state: Resigned) -> None:
        if now_ms >= state.election_deadline_ms:
            if self.is_voter:
                self.start_election(now_ms)
            else:  # it removed itself from the voters: carry on as an observer
                self.transition_to_unattached(state.epoch, now_ms)
            self._poll(now_ms)
            return
        for voter_id in sorted(state.unacknowledged):
            if self.can_send_to(voter_id, now_ms):
                self.send(now_ms, voter_id, "EndQuorumEpoch", end_quorum_epoch.build_request(self, state))

    # ------------------------------------------------------------------ commits

    def _deliver_committed(self) -> None:
        """Hand every batch wholly below the high watermark to the state machine, once."""
        if self._out.install_snapshot is not None:
            return  # the log is about to be replaced: deliver from the next step on
        limit = min(self._high_watermark, self.log.log_end_offset)
        while self._delivered_offset < limit:
            before = self._delivered_offset
            for batch in iter_batches(self.log.read(before, MAX_FETCH_SIZE_BYTES)):
                last = batch.last_offset
                if last >= limit:
                    return
                if last < self._delivered_offset:
                    continue
                self._out.committed.append(
                    CommittedBatch(
                        batch.base_offset, last, batch.partition_leader_epoch, batch.is_control, batch.to_bytes()
                    )
                )
                self._delivered_offset = last + 1
            if self._delivered_offset == before:
                return  # nothing readable there (e.g. below the log start): wait

    # ------------------------------------------------------------------ helpers for handlers

    def validate_cluster_id(self, cluster_id: str | None) -> bool:
        """``KafkaRaftClient.hasValidClusterId``: a null id skips the check."""
        return cluster_id is None or self.identity.cluster_id is None or cluster_id == self.identity.cluster_id

    def fetch_request_type(self) -> type[FetchRequest]:
        return FetchRequest
