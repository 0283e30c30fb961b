"""The sans-IO KRaft core: ``RaftCore.step(now_ms, event) -> Outbox``.

The core reads the log through ``RaftLog`` and never touches a socket, a file or the clock:
time comes in as ``now_ms``, randomness from the injected ``random.Random``, and every effect
goes out in the :class:`~server.raft.events.Outbox`, whose docstring is the ordering contract
the driver follows (``server.raft.outbox`` applies it). It mirrors ``KafkaRaftClient``; its
parts mirror Kafka's seams: :mod:`~server.raft.quorum_state` (``QuorumState``),
:mod:`~server.raft.requests` (``RequestManager``), :mod:`~server.raft.control_state`
(``KRaftControlRecordStateMachine``), :mod:`~server.raft.log_view` (staged log changes, the high
watermark, committed batches), :mod:`~server.raft.leadership`, :mod:`~server.raft.polling`
(the per-role timers), and one handler module per RPC reached through
:mod:`~server.raft.registry`. The core keeps ``step``, dispatch and the Outbox. Where it
deliberately differs from Kafka (a follower fetches again only after its flush; parked fetches
wake after the step that appended; the core times out its own requests) is written down in
``compat/DEVIATIONS.md``.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from messages.generated.fetch_request import FetchRequest
from messages.generated.fetch_response import FetchResponse
from server.failpoints import Failpoints
from server.raft import (
    kraft_upgrade,
    leadership,
    polling,
)
from server.raft.control_state import ControlRecordStateMachine
from server.raft.events import (
    AppendResult,
    ClientAppend,
    Event,
    FailureReason,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    Reply,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    Tick,
    UpgradeKRaftVersion,
)
from server.raft.log import RaftLog
from server.raft.log_view import LogView
from server.raft.quorum_state import QuorumState
from server.raft.registry import DEFAULT, Registry
from server.raft.requests import RequestManager
from server.raft.roles import EpochState, Leader
from server.raft.rpc import fetch
from server.raft.types import (
    ElectionState,
    Endpoint,
    LeaderAndEpoch,
    QuorumConfig,
    ReplicaIdentity,
    VoterSet,
)

if TYPE_CHECKING:
    import random


class RaftCore:
    """One replica of the ``__cluster_metadata`` KRaft quorum, without I/O.

    ``voters`` is the bootstrap voter set: the static ``controller.quorum.voters`` at
    kraft.version 0, or the set from the bootstrap checkpoint at kraft.version 1 (empty for a
    controller formatted without initial controllers); a VotersRecord in the log overrides it.
    ``bootstrap_servers`` are where an observer that knows no leader fetches from.
    ``election`` is the persisted quorum-state (None when there is none). Raises ValueError
    when there are neither voters nor bootstrap servers. ``registry`` is the table of RPCs
    the core dispatches to.
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
        registry: Registry = DEFAULT,
        failpoints: Failpoints | None = None,
    ) -> None:
        if voters.size == 0 and not bootstrap_servers:
            raise ValueError("Missing kraft bootstrap servers")  # KafkaRaftClient's ConfigException
        self.identity = identity
        self.log = log
        self.config = config or QuorumConfig()
        self.rng = rng
        self.registry = registry
        self.failpoints = failpoints if failpoints is not None else Failpoints(rng.random)
        """The failpoints armed on this node (``server.failpoints``): ``raft.fetch`` is checked
        as a Fetch request arrives (before the leader answers it)."""
        self._held: list[tuple[int, int, RequestReceived]] = []
        """Fetches a ``delay`` failpoint holds: (release time ms, arrival order, event)."""
        self.control = ControlRecordStateMachine(voters, kraft_version)
        self._pending_load_snapshot = self.control.load(log)
        self._out = Outbox()
        self._now = now_ms
        self.requests = RequestManager(
            self.config.request_timeout_ms, self.config.retry_backoff_ms, identity.default_listener, tuple(bootstrap_servers)
        )
        self.quorum = QuorumState(
            identity=identity,
            control=self.control,
            config=self.config,
            rng=rng,
            election=election,
            log_epoch=log.last_fetched_epoch,
            now_ms=now_ms,
            on_transition=self._leaving,
        )
        self.view = LogView(log, self.control, self.quorum)
        if self._pending_load_snapshot is not None:
            self.view.delivered_offset = max(self.view.delivered_offset, self._pending_load_snapshot.offset)

    # ------------------------------------------------------------------ public view

    @property
    def state(self) -> EpochState:
        """The current role."""
        return self.quorum.state

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.quorum.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        """The known leader (None if unknown) and the current epoch."""
        return self.quorum.leader_and_epoch

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark (never decreases while the process lives)."""
        return self.view.high_watermark

    @property
    def delivery_pending(self) -> bool:
        """Committed batches wait for the next step to be delivered (a step hands over about
        ``MAX_DELIVERED_RECORDS_PER_STEP`` records)."""
        return self.view.delivery_pending

    @property
    def voters(self) -> VoterSet:
        """The newest voter set (the log's, else the bootstrap one)."""
        return self.control.voters

    @property
    def kraft_version(self) -> int:
        """The finalized kraft.version level (the log's, else the bootstrap one)."""
        return self.control.kraft_version

    @property
    def next_append_offset(self) -> int | None:
        """The offset the next :class:`ClientAppend` will start at on this leader (the log end
        offset plus the records lingering in its accumulator; Kafka's
        ``OffsetControlManager.nextWriteOffset``); None off the leader."""
        state = self.quorum.state
        if not isinstance(state, Leader):
            return None
        return self.view.log_end_offset() + len(state.accumulator)

    @property
    def persisted_election(self) -> ElectionState:
        """The election state last handed to the driver for persisting."""
        return self.quorum.persisted_election

    # ------------------------------------------------------------------ step

    def check_kraft_upgrade(self, epoch: int, level: int) -> bool:
        """Whether this leader of ``epoch`` can move kraft.version to ``level``: True when an
        :class:`UpgradeKRaftVersion` step will append it, False when there is nothing to do
        (``server.raft.kraft_upgrade.check_upgrade``). Reads state only. Raises
        ``kraft_upgrade.UpgradeRefused``."""
        return kraft_upgrade.check_upgrade(self, epoch, level)

    def step(self, now_ms: int, event: Event) -> Outbox:
        """Feed one event at ``now_ms``; returns what the driver must do (see ``Outbox``).
        Raises ValueError when time goes backwards or for a request no handler takes."""
        return self.step_many(now_ms, (event,))

    def step_many(self, now_ms: int, events: Sequence[Event]) -> Outbox:
        """Feed ``events`` (at least one) at ``now_ms`` in order, then act on timers once, as
        one step: one Outbox for all of them. A driver hands over together the appends that
        queued while it waited on the disk, so that at ``append.linger.ms`` 0 they leave as one
        batch, as appends that reach Kafka's accumulator during a ``KafkaRaftClient.poll``
        drain together. Raises as :meth:`step`."""
        if now_ms < self._now:
            raise ValueError(f"time went backwards: {now_ms} < {self._now}")
        self._now = now_ms
        out = self._out = Outbox()
        self.view.begin_step(out, now_ms)
        if self._pending_load_snapshot is not None:
            out.load_snapshot, self._pending_load_snapshot = self._pending_load_snapshot, None
        self._on_log_applied(now_ms)
        while self._held and self._held[0][0] <= now_ms:
            self._dispatch(now_ms, heapq.heappop(self._held)[2], out)
        for event in events:
            if self.failpoints.armed and self._failpoint(now_ms, event, out):
                continue
            self._dispatch(now_ms, event, out)
        self._poll(now_ms)
        self._wake_parked(now_ms, None)  # a fetch in this step may have moved the high watermark
        self.view.deliver_committed()
        out.election_state = self.quorum.take_unwritten_election()
        out.next_deadline_ms = self._next_deadline(now_ms)
        return out

    def _failpoint(self, now_ms: int, event: Event, out: Outbox) -> bool:
        """Carry out an armed ``raft.append`` failpoint on a ClientAppend (refused with the
        error) or ``raft.fetch`` on a Fetch request: answer it with the error at the top
        (``error``), leave it unanswered (``drop``: the fetcher times out), or hold it until its
        delay passes (``delay``); whether one fired."""
        if isinstance(event, ClientAppend):
            refused = self.failpoints.hit("raft.append")
            if refused is not None:
                out.append_results.append(AppendResult(event.token, -1, -1, self.epoch, refused.value))
            return refused is not None
        if not isinstance(event, RequestReceived) or not isinstance(event.request, FetchRequest):
            return False
        action = self.failpoints.hit("raft.fetch")
        if action is None:
            return False
        if action.kind == "error":
            self.reply(event.request_id, FetchResponse(error_code=action.value))
        elif action.kind == "delay":
            heapq.heappush(self._held, (now_ms + action.value, event.request_id, event))
        return True

    def _dispatch(self, now_ms: int, event: Event, out: Outbox) -> None:
        """Hand one event to its handler (:meth:`step_many`)."""
        if isinstance(event, RequestReceived):
            handler = self.registry.by_request_type.get(type(event.request))
            if handler is None or handler.handle_request is None:
                raise ValueError(f"the KRaft core does not handle {type(event.request).__name__}")
            response = handler.handle_request(self, now_ms, event)
            if response is not None:
                self.reply(event.request_id, response)
        elif isinstance(event, ResponseReceived):
            if self.requests.take_response(event.correlation_id, event.source_id) is not None:
                answered = self.registry.by_response_type.get(type(event.response))
                if answered is None or answered.handle_response is None:
                    raise ValueError(f"the KRaft core does not expect a {type(event.response).__name__}")
                answered.handle_response(self, now_ms, event)
        elif isinstance(event, RequestFailed):
            if self.requests.get(event.correlation_id) is not None:
                self._request_failed(now_ms, event.correlation_id, event.reason)
        elif isinstance(event, ClientAppend):
            out.append_results.append(leadership.client_append(self, now_ms, event))
        elif isinstance(event, UpgradeKRaftVersion):
            kraft_upgrade.append_upgrade(self, now_ms, event.level)
        elif isinstance(event, Resign):
            if isinstance(self.quorum.state, Leader):
                self.quorum.resign(now_ms)
        elif not isinstance(event, (Tick, FlushCompleted)):
            raise TypeError(f"unknown event {event!r}")

    def _next_deadline(self, now_ms: int) -> int | None:
        deadlines = self.requests.deadlines() + self.quorum.state.deadlines()
        # Timers at or before now were acted on by _poll, or wait on an in-flight request, a
        # backoff or a flush, each of which brings its own later deadline or event.
        future = [d for d in deadlines if d > now_ms]
        if self._held:
            future.append(self._held[0][0])  # a Fetch a failpoint delays
        if self.view.has_staged_changes:
            future.append(now_ms)  # the next Fetch is built once the driver applied them
        if self.view.delivery_pending:
            future.append(now_ms)  # more committed batches for the state machine, after other work
        return min(future) if future else None

    # ------------------------------------------------------------------ requests

    def send(
        self, now_ms: int, destination_id: int, api_key: ApiKey, request: Any, endpoint: Endpoint | None = None
    ) -> int:
        """Queue a request; returns its correlation id. The endpoint defaults to the voter's
        endpoint on the default listener, then a learned or bootstrap endpoint."""
        if endpoint is None:
            endpoint = self.requests.endpoint_of(destination_id, self.control.voters)
        correlation = self.requests.register(destination_id, api_key, now_ms)
        self._out.sends.append(
            OutboundRequest(correlation, destination_id, endpoint, request, self.config.request_timeout_ms)
        )
        return correlation

    def reply(self, request_id: int, response: Any) -> None:
        """Queue the response to the received request ``request_id``."""
        self._out.replies.append(Reply(request_id, response))

    def _request_failed(self, now_ms: int, correlation_id: int, reason: FailureReason) -> None:
        flight = self.requests.fail(correlation_id, now_ms)
        on_failure = self.registry.by_api_key[flight.api_key].on_failure
        if on_failure is not None:
            on_failure(self, now_ms, correlation_id, reason)

    def _leaving(self, old: EpochState) -> None:
        """Before any role change: a former leader answers its pending voter change and parked
        fetches NOT_LEADER_OR_FOLLOWER; requests in flight and backoffs are forgotten."""
        if isinstance(old, Leader):
            pending, old.pending_voter_change = old.pending_voter_change, None
            if pending is not None:
                factory: Any = pending.response_factory
                self.reply(pending.request_id, factory(Errors.NOT_LEADER_OR_FOLLOWER, None))
            for parked in old.parked:
                self.reply(parked.request_id, fetch.not_leader_response(self, parked.api_version, parked.listener))
            old.parked.clear()
        self.requests.clear()

    # ------------------------------------------------------------------ leader

    def _on_log_applied(self, now_ms: int) -> None:
        """The driver applied the last Outbox: count the leader's flushed end offset and wake
        parked fetches whose offset the log end offset has passed."""
        state = self.quorum.state
        if not isinstance(state, Leader):
            return
        state.update_local_end_offset(self.log.flushed_offset, now_ms)
        leadership.advance_high_watermark(self, now_ms)
        self._wake_parked(now_ms, self.log.log_end_offset)

    def _wake_parked(self, now_ms: int, end: int | None) -> None:
        """Answer the parked fetches whose offset the log end offset ``end`` has passed (None:
        not known in this step), whose high watermark is behind the leader's, or whose wait
        expired."""
        state = self.quorum.state
        if not isinstance(state, Leader) or not state.parked:
            return
        hwm = -1 if state.high_watermark is None else state.high_watermark
        ready = [
            p for p in state.parked
            if (end is not None and end > p.fetch_offset) or hwm > p.high_watermark or now_ms >= p.expires_ms
        ]
        if ready:
            state.parked = [p for p in state.parked if p not in ready]
            for parked in ready:
                event = RequestReceived(parked.request_id, parked.api_version, parked.request, parked.listener)
                response = fetch.handle_request(self, now_ms, event, may_park=False)
                if response is not None:
                    self.reply(parked.request_id, response)

    # ------------------------------------------------------------------ polling

    def _poll(self, now_ms: int) -> None:
        """Fail the requests whose timeout passed, then act on the role's timers
        (:func:`~server.raft.polling.poll_role`); again after each transition that makes."""
        while True:
            for correlation in self.requests.expired(now_ms):
                self._request_failed(now_ms, correlation, FailureReason.TIMEOUT)
            self.requests.forget_backoffs_until(now_ms)
            if not polling.poll_role(self, now_ms):
                return
