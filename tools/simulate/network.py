"""The simulated network (``tools.simulate.cluster``): an in-memory router between the nodes'
cores with latency jitter, per-message loss (seen by the requester as a broken connection, as
over TCP), late duplicates of requests, directed link cuts (silent partitions), voters without
Vote v2 (Kafka 3.9, no pre-vote) and, optionally, every message encoded and decoded at its
version."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from messages.generated.vote_request import VoteRequest
from server.raft import registry
from server.raft.events import FailureReason

if TYPE_CHECKING:
    from tools.simulate.nodes import SimNode

__all__ = ["API_VERSIONS", "Router"]

API_VERSIONS = {
    message_type.__name__.replace("Response", "Request"): version
    for message_type, version in registry.DEFAULT.highest_versions().items()
}
"""``{request class name: version}`` the simulated peers speak: the highest each handler in
``server.raft.registry`` accepts (one table for the core, the node's ApiVersions and this)."""


class Router:
    """The network part of :class:`~tools.simulate.cluster.Cluster` (a mixin: the state it
    reads is the cluster's)."""

    nodes: dict[int, SimNode]
    cut: set[tuple[int, int]]
    bootstrap_map: dict[int, int]
    vote_v1_nodes: set[int]
    wire: bool
    drop_rate: float
    duplicate_rate: float
    rng: random.Random
    now: int
    texts: dict[int, tuple[Any, str]]

    if TYPE_CHECKING:  # the cluster's own methods, which these parts call

        def schedule(self, at: int, kind: str, payload: Any) -> None: ...

    def reachable(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.cut

    def route_request(self, node: SimNode, named: int, correlation: int, request: Any) -> None:
        """``named`` is the destination as the core knows it: a node id, or a bootstrap
        server's negative id (-2, -3, ...), which the router maps to a voter."""
        dst = self.bootstrap_map.get(named, named)
        if dst not in self.nodes or not self.reachable(node.node_id, dst):
            return
        if dst in self.vote_v1_nodes and isinstance(request, VoteRequest) and request.topics[0].partitions[0].pre_vote:
            # a Kafka 3.9 voter: Vote stops at v1, a pre-vote cannot be sent to it
            self.fail_connection(node.node_id, node.incarnation, named, correlation, FailureReason.UNSUPPORTED_VERSION)
            return
        text = self.text_of(request)
        if self.wire:
            request = self.over_the_wire(request)
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.fail_connection(node.node_id, node.incarnation, named, correlation)
            return
        self.schedule(
            self.now + self.rng.randint(1, 5),
            "deliver_request",
            (node.node_id, dst, node.incarnation, correlation, request, named, text),
        )
        if self.duplicate_rate and self.rng.random() < self.duplicate_rate:
            # a stale copy arrives much later (after newer traffic): it must be harmless
            self.schedule(
                self.now + self.rng.randint(5, 2000),
                "deliver_request",
                (node.node_id, dst, node.incarnation, correlation, request, named, text),
            )

    def route_response(
        self, src: int, dst: int, dst_incarnation: int, correlation: int, response: Any, named: int
    ) -> None:
        if not self.reachable(src, dst):
            return
        text = self.text_of(response)
        if self.wire:
            response = self.over_the_wire(response)
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.fail_connection(dst, dst_incarnation, named, correlation)
            return
        self.schedule(
            self.now + self.rng.randint(1, 5),
            "deliver_response",
            (dst, dst_incarnation, named, correlation, response, text),
        )

    def text_of(self, message: Any) -> str | None:
        """The trace text the last step made of ``message`` (None if it made none, or if the
        wire will hand the receiver another object, whose repr differs)."""
        entry = self.texts.get(id(message))
        return entry[1] if entry is not None and entry[0] is message and not self.wire else None

    def over_the_wire(self, message: Any) -> Any:
        """Encode and decode a message at the version this simulated network uses, proving
        that what the core builds is valid at that version."""
        name = type(message).__name__.replace("Response", "Request")
        version = API_VERSIONS[name]
        return type(message).decode(message.encode(version), version)

    def fail_connection(
        self, requester: int, incarnation: int, peer: int, correlation: int, reason: FailureReason = FailureReason.DISCONNECTED
    ) -> None:
        """A lost message breaks the connection, as over TCP: the requester learns it soon
        (a link cut by a partition, by contrast, is a silent black hole)."""
        self.schedule(
            self.now + self.rng.randint(1, 30),
            "request_failed",
            (requester, incarnation, peer, correlation, reason),
        )

    def isolate(self, node_id: int) -> None:
        for other in self.nodes:
            if other != node_id:
                self.cut.add((node_id, other))
                self.cut.add((other, node_id))

    def partition(self, *groups: list[int]) -> None:
        self.cut.clear()
        for a in groups:
            for b in groups:
                if a is b:
                    continue
                for x in a:
                    for y in b:
                        self.cut.add((x, y))

    def heal(self) -> None:
        self.cut.clear()

