"""The core's outbound requests in flight and where they go (Kafka's ``RequestManager``).

A destination is a voter (its endpoint on the default listener), a leader learned from a
request or response, or a bootstrap server (ids -2, -3, ... as Kafka numbers
``controller.quorum.bootstrap.servers``). Each request gets a correlation id, a deadline (``request.timeout.ms``) and the API key it was
sent with. At most one request is in flight to a destination at a time; after a failure or an
error answer the destination is backed off for ``retry.backoff.ms``. Every role change forgets
both (responses to requests of an earlier role are ignored).
"""

from __future__ import annotations

from dataclasses import dataclass

from kwire.api_keys import ApiKey
from server.raft.types import Endpoint, VoterSet


@dataclass(slots=True)
class InFlight:
    """One request awaiting its answer: to ``destination_id``, due by ``deadline_ms``."""

    destination_id: int
    deadline_ms: int
    api_key: ApiKey


class RequestManager:
    """In-flight requests by correlation id, and per-destination backoff deadlines (ms)."""

    def __init__(
        self,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        default_listener: str,
        bootstrap_servers: tuple[Endpoint, ...] = (),
    ) -> None:
        self.default_listener = default_listener
        self.bootstrap_servers: dict[int, Endpoint] = {-2 - i: e for i, e in enumerate(bootstrap_servers)}
        """``controller.quorum.bootstrap.servers`` by the ids Kafka gives them: -2, -3, ..."""
        self._learned_endpoints: dict[int, Endpoint] = {}
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._next_correlation = 1
        self._in_flight: dict[int, InFlight] = {}
        self._backoff_until: dict[int, int] = {}

    def learn_endpoint(self, node_id: int, host: str, port: int) -> None:
        """Remember a leader's endpoint named in a response (NodeEndpoints) or a request
        (LeaderEndpoints), for leaders that are not (yet) in the local voter set."""
        if node_id >= 0:
            self._learned_endpoints[node_id] = Endpoint(self.default_listener, host, port)

    def learned_endpoint(self, node_id: int) -> Endpoint | None:
        """The endpoint a response or request named for ``node_id``, if any."""
        return self._learned_endpoints.get(node_id)

    def endpoint_of(self, destination_id: int, voters: VoterSet) -> Endpoint | None:
        """A voter's endpoint on the default listener (else its first), else a learned or
        bootstrap endpoint; None when nothing is known."""
        voter = voters.get(destination_id)
        if voter is not None:
            endpoint = voter.endpoint(self.default_listener) or (voter.endpoints[0] if voter.endpoints else None)
            if endpoint is not None:
                return endpoint
        return self._learned_endpoints.get(destination_id) or self.bootstrap_servers.get(destination_id)

    def register(self, destination_id: int, api_key: ApiKey, now_ms: int) -> int:
        """Record a request about to be sent; returns its correlation id (1, 2, ...)."""
        correlation = self._next_correlation
        self._next_correlation += 1
        self._in_flight[correlation] = InFlight(
            destination_id, now_ms + self._request_timeout_ms, api_key
        )
        return correlation

    def can_send_to(self, destination_id: int, now_ms: int) -> bool:
        """True when nothing is in flight to ``destination_id`` and its backoff has passed."""
        if any(f.destination_id == destination_id for f in self._in_flight.values()):
            return False
        return self._backoff_until.get(destination_id, -1) <= now_ms

    def has_in_flight(self, api_key: ApiKey) -> bool:
        """True when a request of ``api_key`` awaits its answer."""
        return any(f.api_key == api_key for f in self._in_flight.values())

    def get(self, correlation_id: int) -> InFlight | None:
        """The request in flight under ``correlation_id``, if any."""
        return self._in_flight.get(correlation_id)

    def take_response(self, correlation_id: int, source_id: int) -> InFlight | None:
        """Forget and return the request a response from ``source_id`` answers; None for a
        response to a request this role did not send (an earlier role's, or a stranger's)."""
        flight = self._in_flight.get(correlation_id)
        if flight is None or flight.destination_id != source_id:
            return None
        del self._in_flight[correlation_id]
        return flight

    def fail(self, correlation_id: int, now_ms: int) -> InFlight:
        """Forget a request that failed or timed out and back off its destination. Raises
        KeyError for an unknown correlation id."""
        flight = self._in_flight.pop(correlation_id)
        self.backoff(flight.destination_id, now_ms)
        return flight

    def expired(self, now_ms: int) -> list[int]:
        """Correlation ids whose deadline is at or before ``now_ms``, oldest first."""
        return [c for c, f in self._in_flight.items() if now_ms >= f.deadline_ms]

    def backoff(self, destination_id: int, now_ms: int) -> None:
        """Send nothing to ``destination_id`` for ``retry.backoff.ms`` from ``now_ms``."""
        self._backoff_until[destination_id] = now_ms + self._retry_backoff_ms

    def forget_backoffs_until(self, now_ms: int) -> None:
        """Drop backoff deadlines that have passed."""
        for destination, until in list(self._backoff_until.items()):
            if until <= now_ms:
                del self._backoff_until[destination]

    def clear(self) -> None:
        """Forget every request and backoff (a role change)."""
        self._in_flight.clear()
        self._backoff_until.clear()

    def deadlines(self) -> list[int]:
        """Every request deadline and backoff deadline (ms), for the next timer."""
        return [f.deadline_ms for f in self._in_flight.values()] + list(self._backoff_until.values())
