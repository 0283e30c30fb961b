"""Broker sessions and heartbeat states on the active controller (Kafka's
``BrokerHeartbeatManager`` with its ``BrokerHeartbeatTracker``): when a broker's session
expires, which expired session is fenced first, and the state a heartbeat moves a broker to
(``calculateNextBrokerState``). No I/O; the cluster's registrations
(``server.controller.cluster.ClusterControlManager``) own one :class:`BrokerHeartbeats`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from server.controller.java_order import ConcurrentHashMapOrder, java_record_hash

__all__ = ["FENCED_STATES", "BrokerControlState", "BrokerHeartbeatReply", "BrokerHeartbeats"]


class BrokerControlState(Enum):
    """``BrokerControlState``: where a heartbeat leaves a broker."""

    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"

    @property
    def fenced(self) -> bool:
        """The answer's IsFenced."""
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        """The answer's ShouldShutDown."""
        return self is BrokerControlState.SHUTDOWN_NOW


FENCED_STATES = frozenset({BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW})


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    """The fields of a successful BrokerHeartbeatResponse (``BrokerHeartbeatReply``)."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


@dataclass(slots=True)
class _HeartbeatState:
    fenced: bool
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


@dataclass(slots=True)
class BrokerHeartbeats:
    """The active controller's view of broker sessions (``BrokerHeartbeatManager`` with its
    ``BrokerHeartbeatTracker``). A session is a (broker id, broker epoch) with the time of its
    last contact; it is valid until ``session_timeout_ms`` (``broker.session.timeout.ms``)
    has passed without one."""

    session_timeout_ms: int
    contact_ms: dict[tuple[int, int], int] = field(default_factory=dict)
    states: dict[int, _HeartbeatState] = field(default_factory=dict)
    _order: ConcurrentHashMapOrder = field(default_factory=ConcurrentHashMapOrder)
    """``BrokerHeartbeatTracker`` keeps contact times in a ``ConcurrentHashMap`` keyed by
    ``BrokerIdAndEpoch``: its iteration order decides which expired session is fenced first."""

    def update_contact(self, broker_id: int, epoch: int, now_ms: int) -> None:
        """The broker at ``epoch`` was heard from at ``now_ms``."""
        key = (broker_id, epoch)
        known = key in self.contact_ms
        self.contact_ms[key] = now_ms
        if not known:
            self._order.added(len(self.contact_ms))

    def _expired(self, contact_ms: int, now_ms: int) -> bool:
        return now_ms > contact_ms and contact_ms + self.session_timeout_ms < now_ms

    def has_valid_session(self, broker_id: int, epoch: int, now_ms: int) -> bool:
        """Whether the broker at ``epoch`` was heard from within the session timeout."""
        contact = self.contact_ms.get((broker_id, epoch))
        return contact is not None and not self._expired(contact, now_ms)

    def next_expiry_ms(self) -> int | None:
        """The first moment (ms) at which a session is expired: a millisecond past the oldest
        contact plus the session timeout; None without a session."""
        if not self.contact_ms:
            return None
        return min(self.contact_ms.values()) + self.session_timeout_ms + 1

    def remove_expired(self, now_ms: int) -> tuple[int, int] | None:
        """Forget and return one session whose time is up, None when none is: the first in
        the contact map's iteration order (``BrokerHeartbeatTracker.maybeRemoveExpired``)."""
        order = self._order
        for key in sorted(self.contact_ms, key=lambda k: order.bin(java_record_hash(*k))):
            if self._expired(self.contact_ms[key], now_ms):
                del self.contact_ms[key]
                return key
        return None

    def register(self, broker_id: int, fenced: bool) -> None:
        """Track the broker (again) as ``fenced``; its reported offset survives only a change
        of fencing."""
        state = self.states.get(broker_id)
        offset = -1
        if state is None:
            self.states[broker_id] = state = _HeartbeatState(fenced)
        elif state.fenced != fenced:
            offset = state.metadata_offset
        self.touch(broker_id, fenced, offset)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        """After a heartbeat: the broker's fencing and the metadata offset it reported; fencing
        ends a controlled shutdown."""
        state = self.states[broker_id]
        state.fenced = fenced
        state.metadata_offset = metadata_offset
        if fenced:
            state.controlled_shutdown_offset = -1

    def fence(self, broker_id: int) -> None:
        """The broker's session expired and it is being fenced."""
        state = self.states.get(broker_id)
        if state is not None:
            state.fenced = True

    def remove(self, broker_id: int) -> None:
        """Stop tracking the broker (a new incarnation or an unregistration)."""
        self.states.pop(broker_id, None)

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset reported by an unfenced broker not shutting down."""
        offsets = [s.metadata_offset for s in self.states.values() if not s.fenced and not s.shutting_down]
        return min(offsets) if offsets else 2**63 - 1

    def update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """The broker entered controlled shutdown with a batch ending at ``offset`` (kept from
        the first time)."""
        state = self.states[broker_id]
        if state.controlled_shutdown_offset < 0:
            state.controlled_shutdown_offset = offset

    def current_state(self, broker_id: int) -> BrokerControlState:
        """CONTROLLED_SHUTDOWN, FENCED or UNFENCED, in that order of precedence."""
        state = self.states[broker_id]
        if state.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if state.fenced else BrokerControlState.UNFENCED

    def next_state(
        self, broker_id: int, request: BrokerHeartbeatRequest, register_offset: int, leads_partitions: Callable[[], bool]
    ) -> tuple[BrokerControlState, BrokerControlState]:
        """(current, next) state for a heartbeat (``calculateNextBrokerState``);
        ``leads_partitions`` is asked only when a shutdown depends on it."""
        current = self.current_state(broker_id)
        S = BrokerControlState
        if current is S.FENCED:
            if request.want_shut_down:
                return current, S.SHUTDOWN_NOW
            if not request.want_fence and request.current_metadata_offset >= register_offset:
                return current, S.UNFENCED
            return current, S.FENCED
        if current is S.UNFENCED:
            if request.want_fence:
                return current, S.SHUTDOWN_NOW if request.want_shut_down else S.FENCED
            if request.want_shut_down:
                return current, S.CONTROLLED_SHUTDOWN if leads_partitions() else S.SHUTDOWN_NOW
            return current, S.UNFENCED
        if leads_partitions():
            return current, S.CONTROLLED_SHUTDOWN
        state = self.states[broker_id]
        if state.controlled_shutdown_offset <= self.lowest_active_offset():
            return current, S.SHUTDOWN_NOW
        return current, S.CONTROLLED_SHUTDOWN
