"""An example replica placer (``kwire.replica.placer.class``): Kafka's striped placement, with no
preferred leader on one rack.

    kwire.replica.placer.class=tools.examples.placers:LeadersOffRackPlacer
    kwire.placer.leaders.off.rack=rack-a

Each partition is placed as ``StripedReplicaPlacer`` places it (the same replicas, spread over
racks); when its first replica, the preferred leader, is on the named rack, the first of its
other replicas that is unfenced and on another rack becomes the first instead. A partition
all of whose other candidates are fenced or on that rack keeps its order: a placer must still
place when a zone holds the only unfenced brokers. Use: drain leadership from a rack about to
be serviced, or keep leaders (and so produce traffic) out of a costlier zone.

A placer is any class with ``place(spec, cluster)`` (``server.controller.placement``); this one
also has ``configure(configs)``, which kwire calls with the node's properties at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.controller.placement import (
    ClusterDescriber,
    PartitionAssignment,
    PlacementSpec,
    StripedReplicaPlacer,
    TopicAssignment,
)

__all__ = ["RACK_KEY", "LeadersOffRackPlacer"]

RACK_KEY = "kwire.placer.leaders.off.rack"
"""The rack no preferred leader goes to (default: none, the striped placement as it is)."""


class LeadersOffRackPlacer:
    """Striped placement, preferred leaders off the rack :data:`RACK_KEY` names."""

    def __init__(self) -> None:
        self.rack: str | None = None
        self.striped = StripedReplicaPlacer()

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Read :data:`RACK_KEY` from the node's properties."""
        self.rack = str(configs[RACK_KEY]) if configs.get(RACK_KEY) else None

    def place(self, spec: PlacementSpec, cluster: ClusterDescriber) -> TopicAssignment:
        """The striped placement of ``spec``, each preferred leader moved off the rack."""
        placed = self.striped.place(spec, cluster)
        if self.rack is None:
            return placed
        brokers = {broker.id: broker for broker in cluster.usable_brokers()}
        out = []
        for partition in placed.assignments:
            replicas = list(partition.replicas)
            if brokers[replicas[0]].rack == self.rack:
                better = next((b for b in replicas[1:]
                               if brokers[b].rack != self.rack and not brokers[b].fenced), None)
                if better is not None:
                    replicas.remove(better)
                    replicas.insert(0, better)
            out.append(PartitionAssignment(replicas))
        return TopicAssignment(out)
