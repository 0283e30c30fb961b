"""What goes into ``RaftCore.step`` (events) and what comes out (the :class:`Outbox`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from server.raft.types import ElectionState, Endpoint, OffsetAndEpoch

# --------------------------------------------------------------------------------------------
# events


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A typed request from a peer or client. ``request_id`` is the driver's reply handle: the
    response comes back as a :class:`Reply` with the same id. ``api_version`` is the version it
    was sent at; ``listener`` the listener name it arrived on."""

    request_id: int
    api_version: int
    request: Any
    listener: str = "CONTROLLER"


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The response to one of the core's :class:`OutboundRequest` (same ``correlation_id``)."""

    correlation_id: int
    source_id: int
    response: Any


class FailureReason(StrEnum):
    """Why an outbound request got no answer (Kafka's ``NetworkClient`` outcomes)."""

    TIMEOUT = "timeout"
    """No answer within ``request.timeout.ms``."""
    DISCONNECTED = "disconnected"
    """The connection broke before the answer arrived."""
    UNREACHABLE = "unreachable"
    """No connection could be made, or the destination's endpoint is unknown."""
    UNSUPPORTED_VERSION = "unsupported_version"
    """The peer supports no version able to carry the request (e.g. a pre-vote to a Kafka 3.9
    voter, whose Vote stops at v1)."""


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """An outbound request timed out, could not be sent, or its connection broke."""

    correlation_id: int
    source_id: int
    reason: FailureReason = FailureReason.TIMEOUT


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; the core checks its timers (``poll``)."""


@dataclass(frozen=True, slots=True)
class FlushCompleted:
    """A flush requested by an Outbox finished: ``log.flushed_offset`` has moved."""


@dataclass(frozen=True, slots=True)
class ClientAppend:
    """The local state machine asks the leader to append ``values`` (non-empty). They join the
    leader's accumulator (``server.raft.accumulator``) and reach the log in one data batch once
    ``append.linger.ms`` has passed or a batch filled up; the answer, at once, is an
    :class:`AppendResult` with the same ``token`` and the offsets the records will have.

    ``drain_now``: the state machine appends nothing more until these commit, so lingering
    would only delay them: the accumulator is drained in this step (the open batch still takes
    whatever lingered before)."""

    token: int
    values: tuple[bytes, ...]
    drain_now: bool = False
    epoch: int | None = None
    """The epoch the state machine believes this node leads (``RaftClient.prepareAppend``'s
    ``epoch``): refused when the leader's differs, so records a state machine made for one
    epoch never land in a later one (a node restarted as a former leader is told of its old
    epoch while Resigned, then leads the next). None: unchecked, for a state machine stepped
    in the same step it learns of the epoch (the controller host, the simulation's client)."""
    appended_ms: int | None = None
    """When the state machine asked (None: the step's time). A driver that holds appends until
    the linger would end hands them over with the time each was made, so the linger timer
    still starts at the first (``Node.append``)."""


@dataclass(frozen=True, slots=True)
class UpgradeKRaftVersion:
    """The controller upgrades kraft.version to ``level`` (UpdateFeatures) after
    ``RaftCore.check_kraft_upgrade`` allowed it in the same state: the leader appends the
    KRaftVersion (and Voters) control batch (``server.raft.kraft_upgrade``)."""

    level: int


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown of a leader: move to Resigned and send EndQuorumEpoch."""


Event = (
    RequestReceived | ResponseReceived | RequestFailed | Tick | FlushCompleted | ClientAppend | UpgradeKRaftVersion | Resign
)

# --------------------------------------------------------------------------------------------
# outputs


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """A request to send to node ``destination_id`` at ``endpoint`` (None: the driver knows it,
    e.g. a bootstrap server). Its response or failure comes back with ``correlation_id``."""

    correlation_id: int
    destination_id: int
    endpoint: Endpoint | None
    request: Any
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Reply:
    """The response to the :class:`RequestReceived` with ``request_id``."""

    request_id: int
    response: Any


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where a :class:`ClientAppend` will go: ``(base_offset, last_offset, epoch)`` or an error
    code (``NOT_LEADER_OR_FOLLOWER`` when this node cannot append, ``INVALID_RECORD`` for an
    empty value, ``RECORD_LIST_TOO_LARGE`` for more than one batch can hold). Records still
    lingering when the leader loses its epoch are never written, as in Kafka."""

    token: int
    base_offset: int
    last_offset: int
    epoch: int
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """A batch wholly below the high watermark, delivered once in offset order. ``data`` is the
    record batch v2 bytes (control batches included; the state machine skips them)."""

    base_offset: int
    last_offset: int
    epoch: int
    is_control: bool
    data: bytes


@dataclass(slots=True)
class Outbox:
    """Everything one ``step`` asks the driver to do.

    Ordering contract (the driver must follow it; cf. etcd's ``Ready``):

    1. ``election_state``: if set, write it to quorum-state and make it durable (fsync) FIRST.
       No message of this Outbox may leave before it is durable; in particular a Vote or
       BeginQuorumEpoch response must never be sent before the vote or epoch it reflects is.
    2. ``truncate_to``: if set, truncate the log to that offset (never below the high
       watermark; the core guarantees it and the log must refuse it).
       ``install_snapshot``: if set, write that downloaded snapshot (frozen and fsynced) and
       replace the whole log by it (``MutableRaftLog.install_snapshot``).
    3. ``appends``: append these batch bytes in order at the log end offset.
    4. ``high_watermark``: if set, record it in the log (it only grows).
    5. ``sends`` and ``replies`` may now go out, in order.
    6. ``flush``: start an fsync of the log up to its (new) end offset and report a
       :class:`FlushCompleted` event when done. Until then nothing appended counts toward the
       high watermark on this replica: the leader counts only ``log.flushed_offset`` for itself,
       and a follower sends its next Fetch (whose FetchOffset is its end offset and counts for
       the leader's high watermark) only once its log is flushed.
    7. ``load_snapshot`` (if set: the state machine reloads from that snapshot first), then
       ``committed`` and ``append_results`` go to the state machine.

    All of 1-4 must be applied before the next ``step`` call (the core reads the log through
    ``RaftLog`` and assumes it reflects them). ``next_deadline_ms`` is the time at which the
    driver must call ``step`` with a :class:`Tick` at the latest.
    """

    election_state: ElectionState | None = None
    truncate_to: int | None = None
    install_snapshot: tuple[OffsetAndEpoch, bytes] | None = None
    appends: list[bytes] = field(default_factory=list)
    high_watermark: int | None = None
    sends: list[OutboundRequest] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    flush: bool = False
    load_snapshot: OffsetAndEpoch | None = None
    committed: list[CommittedBatch] = field(default_factory=list)
    append_results: list[AppendResult] = field(default_factory=list)
    next_deadline_ms: int | None = None
