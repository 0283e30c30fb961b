"""Replica placement (``server.controller.placement``, Kafka's ``StripedReplicaPlacer``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kwire.errors import Errors
from server.controller.errors import ApiError
from server.controller.placement import UsableBroker, place_replicas


def _brokers(racks: dict[str | None, list[int]], fenced: frozenset[int] = frozenset()) -> list[UsableBroker]:
    return [UsableBroker(b, rack, b in fenced) for rack, ids in racks.items() for b in ids]


def test_each_unfenced_broker_leads_once_per_round() -> None:
    brokers = _brokers({None: [1, 2, 3, 4, 5, 6]})
    placed = place_replicas(6, 3, brokers, random.Random(1))
    assert sorted(p[0] for p in placed) == [1, 2, 3, 4, 5, 6]
    assert all(len(set(p)) == 3 for p in placed)


def test_replicas_spread_over_racks_before_a_rack_holds_two() -> None:
    brokers = _brokers({"a": [1, 2], "b": [3, 4], "c": [5, 6]})
    rack_of = {b.broker_id: b.rack for b in brokers}
    for seed in range(20):
        for replicas in place_replicas(12, 3, brokers, random.Random(seed)):
            assert len({rack_of[b] for b in replicas}) == 3, replicas
        for replicas in place_replicas(12, 4, brokers, random.Random(seed)):
            assert len({rack_of[b] for b in replicas}) == 3 and len(set(replicas)) == 4, replicas


def test_a_leader_is_never_fenced_and_fenced_brokers_come_last() -> None:
    brokers = _brokers({None: [1, 2, 3]}, fenced=frozenset({2, 3}))
    for seed in range(10):
        for replicas in place_replicas(5, 3, brokers, random.Random(seed)):
            assert replicas[0] == 1 and sorted(replicas) == [1, 2, 3]
    # with enough unfenced brokers a fenced one is not needed
    brokers = _brokers({None: [1, 2, 3, 4]}, fenced=frozenset({4}))
    assert all(4 not in r for r in place_replicas(9, 3, brokers, random.Random(5)))


@pytest.mark.parametrize(
    ("factor", "brokers", "message"),
    [
        (0, _brokers({None: [1]}), "Invalid replication factor 0: the replication factor must be positive."),
        (-2, _brokers({None: [1]}), "Invalid replication factor -2"),
        (1, _brokers({None: [1, 2]}, frozenset({1, 2})), "All brokers are currently fenced"),
        (1, [], "All brokers are currently fenced"),
        (3, _brokers({"a": [1], "b": [2]}), "The target replication factor of 3 cannot be reached because only 2 broker(s)"),
    ],
)
def test_placements_kafka_refuses(factor: int, brokers: list[UsableBroker], message: str) -> None:
    with pytest.raises(ApiError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
        place_replicas(1, factor, brokers, random.Random(0))
    assert refused.value.error == Errors.INVALID_REPLICATION_FACTOR


@given(
    st.dictionaries(st.sampled_from([None, "a", "b", "c"]), st.integers(1, 4), min_size=1),
    st.integers(1, 30),
    st.integers(0, 2**32),
    st.data(),
)
def test_any_placement_is_valid(sizes: dict[str | None, int], partitions: int, seed: int, data: st.DataObject) -> None:
    next_id = iter(range(1, 100))
    racks = {rack: [next(next_id) for _ in range(n)] for rack, n in sizes.items()}
    ids = [b for members in racks.values() for b in members]
    fenced = frozenset(data.draw(st.sets(st.sampled_from(ids), max_size=len(ids) - 1)))
    factor = data.draw(st.integers(1, len(ids)))
    brokers = _brokers(racks, fenced)
    placed = place_replicas(partitions, factor, brokers, random.Random(seed))
    assert len(placed) == partitions
    for replicas in placed:
        assert len(replicas) == factor and len(set(replicas)) == factor and set(replicas) <= set(ids)
        assert replicas[0] not in fenced
