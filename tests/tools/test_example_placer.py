"""The example placer (``tools.examples.placers``): loaded as a node loads it, it keeps every
preferred leader off the named rack while the replicas stay as the striped placer spreads them,
and a controller running it creates topics and partitions so."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from messages.generated.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.partition_record import PartitionRecord
from server.controller.placement import PlacementSpec, StripedReplicaPlacer, UsableBroker
from server.node.plugins import load_plugins
from tests.controller.test_host import Harness, _config, _heartbeat, _registration
from tools.examples.placers import RACK_KEY, LeadersOffRackPlacer

RACKS = {b: f"rack-{'abc'[b % 3]}" for b in range(1, 10)}
NAME = "tools.examples.placers:LeadersOffRackPlacer"


class Describer:
    def __init__(self, seed: int, fenced: frozenset[int] = frozenset()) -> None:
        self.random = random.Random(seed)
        self.brokers = [UsableBroker(b, rack, b in fenced) for b, rack in RACKS.items()]

    def usable_brokers(self) -> Any:
        return iter(self.brokers)


def test_no_preferred_leader_on_the_rack_and_the_same_replicas_as_striped() -> None:
    placer = load_plugins({"kwire.replica.placer.class": NAME, RACK_KEY: "rack-a"}).replica_placer
    assert isinstance(placer, LeadersOffRackPlacer)
    for seed in range(10):
        ours = placer.place(PlacementSpec(0, 60, 3), Describer(seed))  # type: ignore[arg-type]
        striped = StripedReplicaPlacer().place(PlacementSpec(0, 60, 3), Describer(seed))  # type: ignore[arg-type]
        assert all(RACKS[p.replicas[0]] != "rack-a" for p in ours.assignments)
        assert [sorted(p.replicas) for p in ours.assignments] == [sorted(p.replicas) for p in striped.assignments]
        # the striped placer does put leaders there: the example changed something
        assert any(RACKS[p.replicas[0]] == "rack-a" for p in striped.assignments)


def test_without_a_rack_or_another_candidate_it_places_as_striped() -> None:
    plain = LeadersOffRackPlacer()
    plain.configure({})
    spec = PlacementSpec(0, 30, 2)
    assert plain.place(spec, Describer(3)) == StripedReplicaPlacer().place(spec, Describer(3))  # type: ignore[arg-type]
    # every broker off rack-a fenced: no partition can move its leader, the placement stands
    fenced = frozenset(b for b, rack in RACKS.items() if rack != "rack-a")
    placer = LeadersOffRackPlacer()
    placer.configure({RACK_KEY: "rack-a"})
    spec = PlacementSpec(0, 20, 1)
    assert placer.place(spec, Describer(4, fenced)) == StripedReplicaPlacer().place(spec, Describer(4, fenced))  # type: ignore[arg-type]


def test_a_controller_running_it_creates_topics_and_partitions_with_leaders_off_the_rack() -> None:
    plugins = load_plugins({"kwire.replica.placer.class": NAME, RACK_KEY: "rack-b"})
    harness = Harness(config=_config(plugins=plugins))
    for broker in range(1, 7):
        handle = object()
        registration = _registration(broker)
        registration.rack = RACKS[broker]
        harness.request(registration, 4, handle)
        epoch = harness.answer(handle).broker_epoch  # type: ignore[union-attr]
        harness.request(_heartbeat(broker, epoch, harness.core.high_watermark - 1), 1, object())
    handle = object()
    harness.request(CreateTopicsRequest(topics=[CreatableTopic(
        name="t", num_partitions=12, replication_factor=3, assignments=[], configs=[])], timeout_ms=1000,
        validate_only=False), 7, handle)
    assert harness.answer(handle).topics[0].error_code == 0  # type: ignore[union-attr]
    handle = object()
    harness.request(CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=18, assignments=None)],
                                            timeout_ms=1000, validate_only=False), 3, handle)
    assert harness.answer(handle).results[0].error_code == 0  # type: ignore[union-attr]
    partitions = [r for r in harness.records() if isinstance(r, PartitionRecord)]
    assert len(partitions) == 18
    assert all(RACKS[r.leader] != "rack-b" for r in partitions)
    assert Counter(RACKS[b] for r in partitions for b in r.replicas) == {"rack-a": 18, "rack-b": 18, "rack-c": 18}



def test_the_readme_tutorials_placer_places_as_the_example() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index("    from server.controller.placement import PartitionAssignment")
    end = readme.index("return TopicAssignment(out)", start) + len("return TopicAssignment(out)")
    code = "\n".join(line[4:] for line in readme[start:end].splitlines())
    scope: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), scope)
    for seed in range(10):
        for fenced in (frozenset(), frozenset({2, 5, 8})):
            ours, example = scope["LeadersOffRackPlacer"](), LeadersOffRackPlacer()
            for placer in (ours, example):
                placer.configure({RACK_KEY: "rack-b"})
            spec = PlacementSpec(0, 30, 3)
            assert ours.place(spec, Describer(seed, fenced)) == example.place(spec, Describer(seed, fenced))
